// DTR_COST_MODEL=measured (runtime/kernel_times.h): of the runs of each kernel signature (name, cost
// signature, input and output shapes), the first N = Config::timed_runs (3 by default) are timed, then the
// 2N-th, 4N-th, ...; the others cost the least time seen, untimed.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>
#include <limits>
#include <map>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_helpers.h"

namespace dtr::test {
namespace {

using std::chrono::milliseconds;
constexpr double kNsPerMs = 1e6;

// Busy-waits the next duration of its schedule (shared by every instance), then writes ones; a negative
// duration throws instead.
class Spin final : public Computation {
 public:
  Spin(std::string name, std::deque<milliseconds>& schedule, std::uint64_t signature = 0)
      : name_(std::move(name)), schedule_(schedule), signature_(signature) {}
  std::string_view name() const override { return name_; }
  std::uint64_t cost_signature() const override { return signature_; }
  void run(const KernelArgs& args) override {
    const milliseconds wait = schedule_.empty() ? milliseconds(0) : schedule_.front();
    if (!schedule_.empty()) schedule_.pop_front();
    if (wait.count() < 0) throw std::runtime_error("spin: told to fail");
    const auto until = std::chrono::steady_clock::now() + wait;
    while (std::chrono::steady_clock::now() < until) {
    }
    for (std::int64_t i = 0; i < args.output_meta[0].numel(); ++i) {
      if (args.output_meta[0].dtype == DType::float64) {
        args.output<double>(0)[i] = 1.0;
      } else {
        args.output<float>(0)[i] = 1.0F;
      }
    }
  }

 private:
  std::string name_;
  std::deque<milliseconds>& schedule_;
  std::uint64_t signature_;
};

struct Measured {
  std::vector<double> costs;
  std::vector<bool> recomputed;
  Runtime rt;
  explicit Measured(std::optional<std::uint32_t> timed_runs = Config{}.timed_runs) : rt(config(timed_runs)) {}
  Config config(std::optional<std::uint32_t> timed_runs) {
    Config c;
    c.cost_model = CostModel::measured;
    c.timed_runs = timed_runs;
    c.kernel_observer = [this](const KernelRun& run) {
      costs.push_back(run.cost);
      recomputed.push_back(run.rematerialization);
    };
    return c;
  }
  Tensor spin(std::shared_ptr<Computation> computation, const Tensor& input, Shape out_shape) {
    const TensorMeta out{std::move(out_shape), DType::float32};
    return rt.call(std::move(computation), std::span(&input, 1), std::span(&out, 1)).at(0);
  }
};

TEST(MeasuredCost, ASignatureIsTimedOnItsFirstRunsThenCostsTheLeastOfThem) {
  ASSERT_EQ(Config{}.timed_runs, std::uint32_t{3}) << "the schedule below times runs 1-3 and 6";
  std::deque<milliseconds> schedule{milliseconds(6),  milliseconds(4), milliseconds(5), milliseconds(12),
                                    milliseconds(12), milliseconds(0), milliseconds(12)};
  Measured m;
  const Tensor x = constant(m.rt, {4}, 0.0F);
  for (int i = 0; i < 7; ++i) m.spin(std::make_shared<Spin>("spin", schedule), x, {4});
  ASSERT_EQ(m.costs.size(), 7U);
  EXPECT_GE(m.costs[0], 6 * kNsPerMs);
  EXPECT_GE(m.costs[1], 4 * kNsPerMs);
  EXPECT_GE(m.costs[2], 5 * kNsPerMs);
  const double least = *std::min_element(m.costs.begin(), m.costs.begin() + 3);
  EXPECT_EQ(m.costs[3], least) << "run 4 was timed (it spun 12 ms)";
  EXPECT_EQ(m.costs[4], least) << "run 5 was timed (it spun 12 ms)";
  EXPECT_LT(least, 12 * kNsPerMs);
  // Run 6 (2N) is timed again: it spun for no time, and the runs after it cost that.
  EXPECT_LT(m.costs[5], least) << "run 6 was not timed";
  EXPECT_EQ(m.costs[6], m.costs[5]) << "run 7 was timed (it spun 12 ms), or does not cost the new least";
  EXPECT_DOUBLE_EQ(m.rt.stats().base_compute, std::accumulate(m.costs.begin(), m.costs.end(), 0.0));
}

TEST(MeasuredCost, TimedRunsSetsNAndRunsNTimesAPowerOfTwoAreTimedToo) {
  // N = 2: runs 1 and 2 are timed, then 4 and 8. Each timed run after the first two spins less than the least
  // before it, so it sets a new least that the untimed runs after it cost; untimed runs spin 12 ms.
  const std::map<std::size_t, int> timed_ms{{1, 8}, {2, 7}, {4, 3}, {8, 0}};
  std::deque<milliseconds> schedule;
  for (std::size_t run = 1; run <= 9; ++run) {
    schedule.push_back(milliseconds(timed_ms.contains(run) ? timed_ms.at(run) : 12));
  }
  Measured m(2);
  const Tensor x = constant(m.rt, {4}, 0.0F);
  for (int i = 0; i < 9; ++i) m.spin(std::make_shared<Spin>("spin", schedule), x, {4});
  ASSERT_EQ(m.costs.size(), 9U);
  double least = std::numeric_limits<double>::infinity();
  for (std::size_t run = 1; run <= 9; ++run) {
    const double cost = m.costs[run - 1];
    if (timed_ms.contains(run)) {
      EXPECT_GE(cost, timed_ms.at(run) * kNsPerMs) << "run " << run;
      if (run > 2) {
        EXPECT_LT(cost, least) << "run " << run << " was not timed";
      }
      least = std::min(least, cost);
    } else {
      EXPECT_EQ(cost, least) << "run " << run << " was timed (it spun 12 ms)";
    }
  }
}

// A signature whose timed runs all failed has no time to give: its next run is timed, whatever its number.
TEST(MeasuredCost, ASignatureWhoseTimedRunsFailedIsTimedUntilOneFinishes) {
  std::deque<milliseconds> schedule{milliseconds(-1), milliseconds(-1), milliseconds(2)};  // -1: the kernel throws
  Measured m(1);  // runs 1 and 2 timed, 3 not by number
  const Tensor x = constant(m.rt, {4}, 0.0F);
  for (int i = 0; i < 2; ++i) {
    EXPECT_THROW(m.spin(std::make_shared<Spin>("spin", schedule), x, {4}), std::runtime_error);
  }
  m.spin(std::make_shared<Spin>("spin", schedule), x, {4});
  ASSERT_EQ(m.costs.size(), 1U);
  EXPECT_GE(m.costs[0], 2 * kNsPerMs);
  EXPECT_LT(m.costs[0], 1e12) << "run 3 cost a time no run gave";
}

TEST(MeasuredCost, AnotherNameSignatureOrShapeIsTimedAfresh) {
  std::deque<milliseconds> schedule(3, milliseconds(1));
  Measured m;
  const Tensor x = constant(m.rt, {4}, 0.0F);
  const Tensor wide = constant(m.rt, {8}, 0.0F);
  for (int i = 0; i < 3; ++i) m.spin(std::make_shared<Spin>("spin", schedule), x, {4});
  const double learnt = *std::min_element(m.costs.begin(), m.costs.end());
  // Each differs from the learnt signature in one thing, and spins 5 ms: a timed run costs at least that.
  schedule.assign(5, milliseconds(5));
  m.spin(std::make_shared<Spin>("spin", schedule), wide, {4});          // an input's shape
  m.spin(std::make_shared<Spin>("spin", schedule), x, {8});             // the output's shape
  m.spin(std::make_shared<Spin>("other", schedule), x, {4});            // the name
  m.spin(std::make_shared<Spin>("spin", schedule, 7), x, {4});          // the cost signature
  const TensorMeta as_double{{4}, DType::float64};                      // the output's dtype
  m.rt.call(std::make_shared<Spin>("spin", schedule), std::span(&x, 1), std::span(&as_double, 1));
  ASSERT_EQ(m.costs.size(), 8U);
  for (std::size_t i = 3; i < 8; ++i) EXPECT_GE(m.costs[i], 5 * kNsPerMs) << "run " << i << " was not timed";
  // The learnt one still costs what it learnt.
  schedule.assign(1, milliseconds(5));
  m.spin(std::make_shared<Spin>("spin", schedule), x, {4});
  EXPECT_EQ(m.costs.back(), learnt);
}

TEST(MeasuredCost, ARecomputationCostsWhatItsSignatureLearnt) {
  std::deque<milliseconds> schedule(3, milliseconds(1));
  Measured m;
  const Tensor x = constant(m.rt, {4}, 0.0F);
  for (int i = 0; i < 2; ++i) m.spin(std::make_shared<Spin>("spin", schedule), x, {4});
  const Tensor y = m.spin(std::make_shared<Spin>("spin", schedule), x, {4});
  const double learnt = *std::min_element(m.costs.begin(), m.costs.end());
  ASSERT_TRUE(m.rt.evict(y));
  schedule.assign(1, milliseconds(8));
  EXPECT_EQ(y.to_host(), std::vector<float>(4, 1.0F));
  ASSERT_EQ(m.costs.size(), 4U);
  EXPECT_TRUE(m.recomputed[3]);
  EXPECT_EQ(m.costs[3], learnt) << "the recomputation was timed (it spun 8 ms)";
  EXPECT_EQ(m.rt.stats().remat_compute, learnt);
}

TEST(MeasuredCost, WithoutTimedRunsEveryRunIsTimed) {
  std::deque<milliseconds> schedule{milliseconds(1), milliseconds(1), milliseconds(1), milliseconds(1),
                                    milliseconds(12)};
  Measured m(std::nullopt);
  const Tensor x = constant(m.rt, {4}, 0.0F);
  for (int i = 0; i < 5; ++i) m.spin(std::make_shared<Spin>("spin", schedule), x, {4});
  ASSERT_EQ(m.costs.size(), 5U);
  EXPECT_GE(m.costs[4], 12 * kNsPerMs) << "the fifth run was not timed";
}

}  // namespace
}  // namespace dtr::test
