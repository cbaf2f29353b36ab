// Differential oracle: random programs run without a budget and under budgets down to the smallest feasible
// one, with each heuristic and budget mode. Every value the program reads must be bitwise equal, the budget
// must hold, and everything must be freed at the end.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include "heuristics/heuristic.h"
#include "test_resources.h"

namespace dtr::test {
namespace {

// What a program observed: every value it read, in order.
struct Observation {
  bool feasible = true;
  std::vector<std::vector<float>> reads;
  RuntimeStats stats;
  std::uint64_t peak_reserved = 0;
  std::uint64_t allocated_at_end = 0;
};

// A random program over a pool of live tensors; the same seed is the same program.
Observation run_program(std::uint64_t seed, int steps, Config config) {
  std::mt19937_64 rng(seed);
  Runtime rt(config);
  Observation obs;
  std::vector<Tensor> pool;
  auto pick = [&]() -> Tensor& { return pool[rng() % pool.size()]; };
  auto dim = [&] { return static_cast<std::int64_t>(std::uniform_int_distribution<int>(1, 24)(rng)); };
  auto fresh_constant = [&](Shape shape) {
    TensorMeta meta{std::move(shape)};
    std::vector<float> values(static_cast<std::size_t>(meta.numel()));
    for (float& v : values) v = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
    return rt.constant(meta, values);
  };
  auto same_shape_partner = [&](const Tensor& a) {
    for (int tries = 0; tries < 8; ++tries) {
      const Tensor& b = pick();
      if (b.shape() == a.shape()) return b;
    }
    return fresh_constant(a.shape());
  };
  try {
    for (int i = 0; i < 4; ++i) pool.push_back(fresh_constant({dim(), dim()}));
    for (int step = 0; step < steps; ++step) {
      const int action = std::uniform_int_distribution<int>(0, 99)(rng);
      Tensor a = pick();
      if (action < 15) {
        pool.push_back(rt.call1(ops::add(), {a, same_shape_partner(a)}));
      } else if (action < 25) {
        pool.push_back(rt.call1(ops::mul(), {a, same_shape_partner(a)}));
      } else if (action < 35) {
        pool.push_back(rt.call1(ops::relu(), {a}));
      } else if (action < 42) {
        pool.push_back(rt.call1(ops::scale(), {a}, Attrs{{"factor", 0.5}}));
      } else if (action < 55 && a.shape().size() == 2) {
        Tensor b = fresh_constant({a.shape()[1], dim()});
        pool.push_back(rt.call1(ops::matmul(), {a, b}));
      } else if (action < 60 && !a.shape().empty()) {
        pool.push_back(rt.call1(ops::sum(), {a}, Attrs{{"axis", std::int64_t{0}}}));
      } else if (action < 65) {
        pool.push_back(rt.call1(ops::uniform(), {a}));
      } else if (action < 72 && !a.shape().empty() && a.shape()[0] >= 2) {
        for (Tensor& half : rt.call(ops::split2(), std::vector<Tensor>{a})) pool.push_back(std::move(half));
      } else if (action < 77 && !a.shape().empty()) {
        Shape other = a.shape();
        other[0] = dim();
        pool.push_back(rt.call1(ops::concat2(), {a, fresh_constant(other)}));
      } else if (action < 81 && !a.shape().empty() && a.shape()[0] >= 2) {
        // A view of some rows (contiguous), or of everything flattened.
        const std::int64_t rows = a.shape()[0];
        const std::int64_t begin = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(rows - 1));
        Shape shape = a.shape();
        shape[0] = rows - begin;
        const std::int64_t row_elements = a.numel() / rows;
        pool.push_back(rng() % 2 == 0 ? rt.view(a, shape, begin * row_elements) : rt.view(a, {a.numel()}));
      } else if (action < 84) {
        // An in-place update of a live tensor that earlier results may have read (their recomputations must
        // see the old value), or of a fresh copy when it is a view.
        Tensor& target = pick();
        if (target.is_view()) {
          pool.push_back(rt.call1(ops::relu(), {target}));
        } else {
          rt.assign(target, ops::add(), {target, same_shape_partner(target)});
        }
      } else if (action < 90 && pool.size() > 3) {
        const std::size_t k = rng() % pool.size();  // drop a handle
        pool[k] = std::move(pool.back());
        pool.pop_back();
      } else {
        obs.reads.push_back(a.to_host());
      }
      if (pool.size() > 48) {  // keep the working set bounded, like a training step's
        pool.erase(pool.begin());
      }
    }
    for (const Tensor& t : pool) obs.reads.push_back(t.to_host());
  } catch (const OutOfMemory&) {
    obs.feasible = false;
  }
  obs.stats = rt.stats();
  obs.peak_reserved = rt.allocator().stats().reserved_bytes.peak;
  pool.clear();
  obs.allocated_at_end = rt.allocator().stats().allocated_bytes.current;
  return obs;
}

void expect_same_reads(const Observation& oracle, const Observation& run) {
  ASSERT_EQ(run.reads.size(), oracle.reads.size());
  for (std::size_t i = 0; i < oracle.reads.size(); ++i) {
    ASSERT_EQ(run.reads[i].size(), oracle.reads[i].size());
    ASSERT_EQ(std::memcmp(run.reads[i].data(), oracle.reads[i].data(), oracle.reads[i].size() * sizeof(float)), 0)
        << "read " << i << " differs";
  }
}

// Odd programs choose victims through the eviction index, even ones by scanning every candidate.
Config config_for(std::optional<std::uint64_t> budget, BudgetMode mode, const char* heuristic, InplaceMode inplace,
                  std::uint64_t seed = 1) {
  Config config = deterministic_config(budget, mode, heuristic);
  config.inplace = inplace;
  config.search = seed % 2 == 1 ? EvictionSearch::index : EvictionSearch::scan;
  // Segments of a few tensors (the programs' tensors are at most 24 x 48 floats).
  return small_segments(config);
}

TEST(RuntimeOracle, RandomProgramsMatchTheUnbudgetedRunBitwise) {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    SCOPED_TRACE(::testing::Message() << "program " << seed);
    const Observation cow_oracle =
        run_program(seed, 300, config_for(std::nullopt, BudgetMode::bytes, "dtr-eq", InplaceMode::copy_on_write));
    for (InplaceMode inplace : {InplaceMode::copy_on_write, InplaceMode::pin_dependents}) {
    // Both in-place strategies give the program the same values; each is its own oracle for peak memory.
    const Observation oracle = run_program(seed, 300, config_for(std::nullopt, BudgetMode::bytes, "dtr-eq", inplace));
    ASSERT_TRUE(oracle.feasible);
    EXPECT_EQ(oracle.allocated_at_end, 0u);
    expect_same_reads(cow_oracle, oracle);
    const std::uint64_t peak = oracle.stats.peak_resident_bytes;
    for (const std::string& name : heuristics::heuristic_names()) {
      const char* heuristic = name.c_str();
      for (BudgetMode mode : {BudgetMode::bytes, BudgetMode::device}) {
        SCOPED_TRACE(::testing::Message() << heuristic << ", " << to_string(mode) << ", " << to_string(inplace));
        const std::uint64_t reference = mode == BudgetMode::bytes ? peak : oracle.peak_reserved;
        // The smallest feasible budget, by bisection over the ratio; every run on the way must be exact.
        std::uint64_t feasible = reference;
        std::uint64_t infeasible = 0;
        int runs = 0;
        while (feasible - infeasible > reference / 64 && runs < 10) {
          const std::uint64_t budget = infeasible + (feasible - infeasible) / 2;
          const Observation run = run_program(seed, 300, config_for(budget, mode, heuristic, inplace, seed));
          ++runs;
          EXPECT_EQ(run.allocated_at_end, 0u) << "leaked at budget " << budget;
          if (!run.feasible) {
            infeasible = budget;
            continue;
          }
          feasible = budget;
          expect_same_reads(oracle, run);
          if (mode == BudgetMode::bytes) {
            EXPECT_LE(run.stats.peak_resident_bytes, budget);
          } else {
            EXPECT_LE(run.peak_reserved, budget);
          }
          if (HasFatalFailure()) return;
        }
        const Observation smallest = run_program(seed, 300, config_for(feasible, mode, heuristic, inplace, seed));
        // Bytes mode is deterministic. Device mode depends on where the host puts the allocator's segments
        // (best fit breaks ties by address), so a budget at the edge may fit in one run and not the next.
        if (mode == BudgetMode::bytes) {
          ASSERT_TRUE(smallest.feasible);
        }
        if (smallest.feasible) expect_same_reads(oracle, smallest);
        std::printf("program %llu, %s, %s, %s: smallest feasible budget %.2f of the unbudgeted peak, overhead %.3f, "
                    "%llu evictions\n",
                    static_cast<unsigned long long>(seed), heuristic, to_string(mode), to_string(inplace),
                    static_cast<double>(feasible) / static_cast<double>(reference), smallest.stats.overhead(),
                    static_cast<unsigned long long>(smallest.stats.evictions));
        EXPECT_LT(feasible, reference) << "never needed to evict: the test would prove nothing";
      }
    }
    }
  }
}

TEST(RuntimeOracle, SizeFloorRunsMatchTheUnbudgetedRunBitwise) {
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    SCOPED_TRACE(::testing::Message() << "program " << seed);
    const Observation oracle =
        run_program(seed, 300, config_for(std::nullopt, BudgetMode::bytes, "dtr-eq", InplaceMode::copy_on_write));
    int feasible_runs = 0;
    for (const double floor : {0.1, 0.5, 2.0}) {
      for (const double ratio : {0.5, 0.7, 0.9}) {
        const auto budget = static_cast<std::uint64_t>(ratio * static_cast<double>(oracle.stats.peak_resident_bytes));
        Config config = config_for(budget, BudgetMode::bytes, "dtr-eq", InplaceMode::copy_on_write, seed);
        config.size_floor = floor;
        const Observation run = run_program(seed, 300, config);
        EXPECT_EQ(run.allocated_at_end, 0u);
        if (!run.feasible) continue;
        feasible_runs += 1;
        EXPECT_GT(run.stats.evictions, 0u);
        EXPECT_LE(run.stats.peak_resident_bytes, budget);
        expect_same_reads(oracle, run);
      }
    }
    EXPECT_GT(feasible_runs, 0);
  }
}

}  // namespace
}  // namespace dtr::test
