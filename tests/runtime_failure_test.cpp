// A recomputation that fails part way (its kernel's scratch does not fit the budget) leaves the runtime as it
// was: the outputs it had given buffers go back to evicted, so nothing reads their garbage, the heuristic's
// view stays consistent (dtr-eq used to see the storage evicted twice and abort), and once memory allows, the
// same read gives the right values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "dtr/failing_resource.h"
#include "heuristics/heuristic.h"
#include "test_helpers.h"
#include "test_resources.h"

namespace dtr::test {
namespace {

TEST(RuntimeFailure, ARecomputationThatRunsOutOfScratchPutsItsOutputsBackToEvicted) {
  for (const std::string& heuristic : heuristic_names()) {
    SCOPED_TRACE(heuristic);
    Config config;
    config.budget_mode = BudgetMode::bytes;
    config.heuristic = heuristic;
    Runtime rt(config);
    std::vector<float> image(4 * 28 * 28);
    for (std::size_t i = 0; i < image.size(); ++i) image[i] = std::sin(0.1F * static_cast<float>(i));
    std::vector<float> weights(4 * 4 * 3 * 3);
    for (std::size_t i = 0; i < weights.size(); ++i) weights[i] = 0.05F * static_cast<float>(i % 7) - 0.1F;
    const Tensor x = rt.constant(TensorMeta{{1, 4, 28, 28}}, image);
    const Tensor w = rt.constant(TensorMeta{{4, 4, 3, 3}}, weights);
    const Attrs padded{{"padding", std::vector<std::int64_t>{1, 1}}};
    Tensor y = rt.call1(ops::conv2d(), {x, w}, padded);
    const std::vector<float> expected = y.to_host();
    ASSERT_TRUE(rt.evict(y));
    // Room for the inputs and the output, not for the column matrix (4 x 9 x 784 floats) the kernel asks for.
    rt.set_memory_budget(x.storage_bytes() + w.storage_bytes() + y.storage_bytes() + 4096);
    EXPECT_THROW((void)y.to_host(), OutOfMemory);
    EXPECT_FALSE(y.resident());
    EXPECT_THROW((void)y.to_host(), OutOfMemory);  // again: still evicted, not a half-made value
    rt.set_memory_budget(std::nullopt);
    EXPECT_EQ(y.to_host(), expected);
    y = Tensor();  // its last handle: the heuristic must not see it evicted twice
    const Tensor z = rt.call1(ops::relu(), {x});
    EXPECT_TRUE(z.resident());
  }
}

// s_k = s_(k-1) + c_k, with every c_k = 2 x resident and every s_k evicted: recomputing s_n descends the whole
// chain. A walk that keeps every frame's ready input pinned holds all the c_k at once, and cannot fit s_1 under
// a budget of what is resident, x and the c_k; the walk the runtime falls back to leaves them evictable
// (each is remade from x when needed again) and gives the same bits.
TEST(RuntimeFailure, ADeepRecomputationThatCannotKeepItsReadyInputsPinnedPinsLess) {
  constexpr int n = 8;
  for (const std::string& heuristic : heuristic_names()) {
    for (const bool read_by_an_op : {false, true}) {  // a read (materialize) and a new op's inputs
      SCOPED_TRACE(::testing::Message() << heuristic << (read_by_an_op ? ", read by an op" : ", read back"));
      Runtime rt(deterministic_config(std::nullopt, BudgetMode::bytes, heuristic));
      const Tensor x = constant(rt, {16}, 0.5F);
      std::vector<Tensor> c;
      std::vector<std::vector<float>> c_values;
      std::vector<Tensor> sums{x};
      for (int k = 1; k <= n; ++k) {
        c.push_back(rt.call1(ops::scale(), {x}, Attrs{{"factor", 1.0 + k}}));
        c_values.push_back(c.back().to_host());
        sums.push_back(rt.call1(ops::add(), {sums.back(), c.back()}));
      }
      const std::vector<float> expected = sums.back().to_host();
      for (int k = 1; k <= n; ++k) ASSERT_TRUE(rt.evict(sums[static_cast<std::size_t>(k)]));
      const Tensor last = sums.back();
      sums.clear();
      const std::uint64_t evictions = rt.stats().evictions;
      rt.set_memory_budget((n + 1) * x.storage_bytes());  // what is resident: x and the c_k
      if (read_by_an_op) {
        const Tensor y = rt.call1(ops::relu(), {last});
        EXPECT_EQ(y.to_host(), expected);  // the values are positive
      } else {
        EXPECT_EQ(last.to_host(), expected);
      }
      EXPECT_GT(rt.stats().evictions, evictions) << "the c_k must have made room";
      EXPECT_TRUE(rt.evict(last)) << "left pinned";
      for (std::size_t k = 0; k < c.size(); ++k) EXPECT_EQ(c[k].to_host(), c_values[k]) << "c_" << k + 1;
    }
  }
}

// The retry is for the runtime's own pins: an OutOfMemory a user's computation throws while recomputed under
// a budget reaches the caller after one run, as it is.
TEST(RuntimeFailure, AnOutOfMemoryFromAUsersComputationIsNotRetried) {
  class OutOfItsOwnMemory final : public Computation {
   public:
    explicit OutOfItsOwnMemory(int* runs) : runs_(runs) {}
    std::string_view name() const override { return "own_memory"; }
    void run(const KernelArgs& args) override {
      if ((*runs_)++ > 0) throw OutOfMemory("own_memory: its own memory is full", {}, __FILE__, __LINE__);
      std::copy_n(static_cast<const float*>(args.inputs[0]), 16, static_cast<float*>(args.outputs[0]));
    }

   private:
    int* runs_;
  };
  int runs = 0;
  Runtime rt(deterministic_config(std::nullopt, BudgetMode::bytes));
  const Tensor x = constant(rt, {16}, 0.5F);
  const std::vector<TensorMeta> meta{x.meta()};
  const Tensor y = rt.call(std::make_shared<OutOfItsOwnMemory>(&runs), std::vector<Tensor>{x}, meta).front();
  ASSERT_TRUE(rt.evict(y));
  rt.set_memory_budget(4 * x.storage_bytes());
  expect_error<OutOfMemory>([&] { (void)y.to_host(); }, {"own_memory: its own memory is full"});
  EXPECT_EQ(runs, 2);  // the first run, and one recomputation
}

// Thrown by the test's kernel observer, or its computation, in the middle of a recomputation.
struct ObserverFailure {};
struct KernelFailure {};

// A user's computation with two outputs (the rows of its input scaled by 0.5 and by 2) whose recomputations
// throw when `fail` says so, after the runtime gave both outputs their buffers.
class FlakyHalves final : public Computation {
 public:
  explicit FlakyHalves(std::function<bool()> fail) : fail_(std::move(fail)) {}
  std::string_view name() const override { return "flaky_halves"; }
  void run(const KernelArgs& args) override {
    if (runs_++ > 0 && fail_()) throw KernelFailure{};
    const auto* in = static_cast<const float*>(args.inputs[0]);
    const auto n = static_cast<std::size_t>(args.input_meta[0].numel());
    for (std::size_t i = 0; i < n; ++i) {
      static_cast<float*>(args.outputs[0])[i] = 0.5F * in[i];
      static_cast<float*>(args.outputs[1])[i] = 2.0F * in[i];
    }
  }

 private:
  std::function<bool()> fail_;
  int runs_ = 0;
};

// What a run did: every kernel it ran (name, first run or recomputation, output storages), in order, and every
// value it read. Two runs that choose the same victims at every eviction have the same log.
struct FailingRun {
  std::vector<std::string> kernels;
  std::vector<std::vector<float>> reads;
  int observer_failures = 0;
  int kernel_failures = 0;
  int memory_failures = 0;
};

// A random program of elementwise ops and two-output ops under a bytes budget, over memory that fails
// allocations at random, with a kernel observer and a computation that throw during some recomputations;
// each op or read that fails is asked again. So recomputations fail at every stage: giving an output or its
// sibling a buffer, in the kernel, after the kernel ran.
FailingRun run_failing_program(std::uint64_t seed, std::optional<std::uint64_t> budget, const std::string& heuristic,
                               EvictionSearch search, bool inject) {
  FailingRun run;
  std::mt19937_64 observer_rng(seed * 7 + 1);
  std::mt19937_64 kernel_rng(seed * 7 + 2);
  const auto kernel_fails = [&] { return inject && kernel_rng() % 4 == 0; };
  Config config = deterministic_config(budget, BudgetMode::bytes, heuristic);
  config.search = search;
  config.kernel_observer = [&](const KernelRun& k) {
    std::string line = std::string(k.name) + (k.rematerialization ? " again ->" : " ->");
    for (const std::uint64_t id : k.output_storages) line += " " + std::to_string(id);
    run.kernels.push_back(line);
    if (inject && k.rematerialization && observer_rng() % 4 == 0) throw ObserverFailure{};
  };
  FailureSchedule schedule;
  schedule.probability = inject ? 0.02 : 0.0;
  schedule.seed = seed;
  config.buffers = BufferSource::memory_resource;  // every buffer from the failing memory
  Runtime rt(config, std::make_unique<FailingResource>(make_host_resource(), schedule));
  auto retry = [&](auto&& f) {
    for (int attempt = 0;; ++attempt) {
      try {
        return f();
      } catch (const OutOfMemory&) {
        if (!inject || attempt == 50) throw;
        run.memory_failures += 1;
      } catch (const ObserverFailure&) {
        if (attempt == 50) throw;
        run.observer_failures += 1;
      } catch (const KernelFailure&) {
        if (attempt == 50) throw;
        run.kernel_failures += 1;
      }
    }
  };
  std::mt19937_64 rng(seed);
  std::vector<Tensor> pool;
  for (int i = 0; i < 3; ++i) {
    pool.push_back(retry([&] { return constant(rt, {16, 8}, 0.25F * static_cast<float>(i + 1)); }));
  }
  for (int step = 0; step < 160; ++step) {
    const Tensor a = pool[rng() % pool.size()];
    const Tensor b = pool[rng() % pool.size()];
    switch (rng() % 6) {
      case 0:
        if (a.shape() == b.shape()) {
          pool.push_back(retry([&] { return rt.call1(ops::add(), {a, b}); }));
          break;
        }
        [[fallthrough]];
      case 1:
        pool.push_back(retry([&] { return rt.call1(ops::relu(), {a}); }));
        break;
      case 2:
        pool.push_back(retry([&] { return rt.call1(ops::scale(), {a}, Attrs{{"factor", 0.5}}); }));
        break;
      case 3:
        if (a.shape()[0] >= 2) {
          for (Tensor& half : retry([&] { return rt.call(ops::split2(), std::vector<Tensor>{a}); })) {
            pool.push_back(std::move(half));
          }
          break;
        }
        [[fallthrough]];
      case 4: {
        const TensorMeta meta = a.meta();
        const std::vector<TensorMeta> metas{meta, meta};
        for (Tensor& t : retry([&] {
               return rt.call(std::make_shared<FlakyHalves>(kernel_fails), std::vector<Tensor>{a}, metas);
             })) {
          pool.push_back(std::move(t));
        }
        break;
      }
      default:
        if (pool.size() > 8) pool.erase(pool.begin() + static_cast<std::ptrdiff_t>(rng() % pool.size()));
        break;
    }
    if (step % 10 == 9) {
      const Tensor read = pool[rng() % pool.size()];
      run.reads.push_back(retry([&] { return read.to_host(); }));
    }
  }
  for (const Tensor& t : pool) run.reads.push_back(retry([&] { return t.to_host(); }));
  return run;
}

// A failed recomputation must leave the heuristic told of every change it made (restored outputs announced,
// and evicted again when undone): otherwise the index keeps scores a scan would not compute, and the two
// choose different victims from then on.
TEST(RuntimeFailure, AfterFailedRecomputationsTheIndexChoosesAsAScanDoes) {
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    const FailingRun oracle = run_failing_program(seed, std::nullopt, "dtr-eq", EvictionSearch::index, false);
    for (const std::string& heuristic : heuristics::heuristic_names()) {
      if (!heuristics::make_heuristic(heuristic)->indexable()) continue;
      SCOPED_TRACE(::testing::Message() << "program " << seed << ", " << heuristic);
      const std::uint64_t budget = 12 * 16 * 8 * sizeof(float);  // the three constants and nine tensors
      const FailingRun scan = run_failing_program(seed, budget, heuristic, EvictionSearch::scan, true);
      const FailingRun indexed = run_failing_program(seed, budget, heuristic, EvictionSearch::index, true);
      EXPECT_GT(scan.observer_failures, 0);
      EXPECT_GT(scan.kernel_failures, 0);
      EXPECT_GT(scan.memory_failures, 0);
      EXPECT_TRUE(scan.reads == oracle.reads);
      EXPECT_TRUE(indexed.reads == oracle.reads);
      std::printf("program %llu, %s: %d observer, %d kernel and %d memory failures in %zu kernels\n",
                  static_cast<unsigned long long>(seed), heuristic.c_str(), scan.observer_failures,
                  scan.kernel_failures, scan.memory_failures, scan.kernels.size());
      ASSERT_EQ(indexed.kernels.size(), scan.kernels.size());
      for (std::size_t i = 0; i < scan.kernels.size(); ++i) {
        ASSERT_EQ(indexed.kernels[i], scan.kernels[i]) << "kernel " << i << " of " << scan.kernels.size();
      }
    }
  }
}

}  // namespace
}  // namespace dtr::test
