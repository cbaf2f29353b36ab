// Fault injection (issue 16): FailingResource's schedules, and the runtime over it: every failure surfaces as
// dtr::OutOfMemory or is recovered from, results stay bitwise, and every byte goes back.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "dtr/dtr.h"
#include "test_helpers.h"
#include "test_resources.h"

namespace dtr::test {
namespace {

std::vector<bool> failure_pattern(FailureSchedule schedule, int count, std::size_t bytes = 4096) {
  FailingResource r(make_host_resource(), schedule);
  std::vector<bool> failed;
  std::vector<void*> live;
  for (int i = 0; i < count; ++i) {
    try {
      live.push_back(r.allocate(bytes));
      failed.push_back(false);
    } catch (const OutOfMemory& e) {
      EXPECT_NE(std::string(e.what()).find("failed on purpose"), std::string::npos) << e.what();
      EXPECT_EQ(e.info().requested_bytes, bytes);
      failed.push_back(true);
    }
  }
  EXPECT_EQ(r.allocations(), static_cast<std::uint64_t>(count));
  EXPECT_EQ(r.bytes_in_use(), live.size() * bytes);
  for (void* p : live) r.deallocate(p, bytes);
  EXPECT_EQ(r.bytes_in_use(), 0u);
  return failed;
}

TEST(FailingResource, EveryNthFails) {
  FailureSchedule schedule;
  schedule.every_nth = 3;
  const std::vector<bool> failed = failure_pattern(schedule, 9);
  EXPECT_EQ(failed, (std::vector<bool>{false, false, true, false, false, true, false, false, true}));
}

TEST(FailingResource, RandomFailuresFollowTheSeed) {
  FailureSchedule schedule;
  schedule.probability = 0.3;
  schedule.seed = 7;
  const std::vector<bool> a = failure_pattern(schedule, 200);
  EXPECT_EQ(failure_pattern(schedule, 200), a);  // reproducible
  const auto failures = std::count(a.begin(), a.end(), true);
  EXPECT_GT(failures, 30);
  EXPECT_LT(failures, 90);
  schedule.seed = 8;
  EXPECT_NE(failure_pattern(schedule, 200), a);
  schedule.probability = 0.0;
  const std::vector<bool> never = failure_pattern(schedule, 50);
  EXPECT_EQ(std::count(never.begin(), never.end(), true), 0);
  schedule.probability = 1.0;
  const std::vector<bool> all = failure_pattern(schedule, 5);
  EXPECT_EQ(std::count(all.begin(), all.end(), true), 5);
}

TEST(FailingResource, PastMaxBytesFails) {
  FailureSchedule schedule;
  schedule.max_bytes = 10000;
  const std::vector<bool> failed = failure_pattern(schedule, 4, 4096);  // 4096, 8192 fit; 12288 does not
  EXPECT_EQ(failed, (std::vector<bool>{false, false, true, true}));
}

TEST(FailingResource, BadArgumentsAreRefusedAndForeignPointersChangeNothing) {
  expect_error<InvalidArgument>([] { FailingResource r(nullptr, {}); }, {"upstream is null"});
  FailureSchedule bad;
  bad.probability = 1.5;
  expect_error<InvalidArgument>([&] { FailingResource r(make_host_resource(), bad); }, {"probability 1.5"});
  FailingResource r(make_host_resource(), {});
  void* p = r.allocate(512);
  int other = 0;
  EXPECT_THROW(r.deallocate(&other, 512), InvalidArgument);
  EXPECT_EQ(r.bytes_in_use(), 512u);
  r.deallocate(p, 512);
  EXPECT_EQ(r.bytes_in_use(), 0u);
  EXPECT_EQ(r.name(), "failing(host)");
}

// Lends a resource to a runtime that wants to own one, so that the test can read it after the runtime is gone.
class Borrowed final : public MemoryResource {
 public:
  explicit Borrowed(MemoryResource& r) : r_(r) {}
  std::size_t capacity() const override { return r_.capacity(); }
  std::string name() const override { return r_.name(); }
  bool host_accessible() const override { return r_.host_accessible(); }
  std::optional<Device> device() const override { return r_.device(); }

 protected:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override { return r_.allocate(bytes, alignment); }
  void do_deallocate(void* ptr, std::size_t bytes) override { r_.deallocate(ptr, bytes); }

 private:
  MemoryResource& r_;
};

// Calls `f` again while it throws OutOfMemory (each injected failure moves the schedule on), counting the
// failures that escaped the runtime; anything else fails the test.
template <typename F>
auto retrying(F&& f, int* escaped) {
  for (int attempt = 0;; ++attempt) {
    try {
      return f();
    } catch (const OutOfMemory&) {
      *escaped += 1;
      if (attempt == 20) throw;
    }
  }
}

// A program of matmuls and adds under a device budget that makes the caching allocator reserve and release
// segments; each op that throws is called again. Returns the final values.
std::vector<float> run_program(Runtime& rt, int* escaped) {
  auto call = [&](const OpDef& op, std::initializer_list<Tensor> inputs) {
    return retrying([&] { return rt.call1(op, inputs); }, escaped);
  };
  auto make_constant = [&](float start) { return retrying([&] { return constant(rt, {256, 256}, start); }, escaped); };
  const Tensor w = make_constant(0.001f);
  std::vector<Tensor> xs{make_constant(0.5f)};
  for (int i = 0; i < 24; ++i) {
    const Tensor y = call(ops::matmul(), {xs.back(), w});
    xs.push_back(call(ops::add(), {y, xs.back()}));
  }
  Tensor sum = xs[0];
  for (std::size_t i = 1; i < xs.size(); ++i) sum = call(ops::add(), {sum, xs[i]});  // every value read again
  return retrying([&] { return sum.to_host(); }, escaped);
}

TEST(FailingResource, TheRuntimeOverFailingMemoryStaysConsistentAndExact) {
  const std::uint64_t budget = std::uint64_t{6} << 20;  // 256 KiB tensors, 25 kept: evictions and segment churn
  int none = 0;
  std::vector<float> expected;
  {
    Runtime rt(deterministic_config(budget, BudgetMode::device), make_host_resource());
    expected = run_program(rt, &none);
  }
  ASSERT_EQ(none, 0);
  FailureSchedule every_2nd;
  every_2nd.every_nth = 2;
  FailureSchedule every_3rd;
  every_3rd.every_nth = 3;
  FailureSchedule random;
  random.probability = 0.3;
  FailureSchedule below_budget;  // the device holds less than the budget says: evictions must make up for it
  below_budget.max_bytes = budget * 2 / 3;
  int i = 0;
  for (const FailureSchedule& schedule : {every_2nd, every_3rd, random, below_budget}) {
    SCOPED_TRACE(::testing::Message() << "schedule " << i++);
    FailingResource failing(make_host_resource(), schedule);
    int escaped = 0;
    {
      Config config = deterministic_config(budget, BudgetMode::device);
      Runtime rt(config, std::make_unique<Borrowed>(failing));
      EXPECT_TRUE(bitwise_equal(run_program(rt, &escaped), expected));
      EXPECT_GT(failing.failures(), 0u);
      rt.allocator().empty_cache();
    }
    EXPECT_EQ(failing.bytes_in_use(), 0u) << "the runtime kept memory after it ended";
  }
}

}  // namespace
}  // namespace dtr::test
