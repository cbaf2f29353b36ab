// What ops cost the runtime's clocks and counters: known costs over simulated memory (what dtr-sim replays), a
// program's own reruns priced apart from DTR's recomputations, staleness measured in cost.
#include <gtest/gtest.h>

#include "test_helpers.h"
#include "test_resources.h"
#include "timed_op.h"

namespace dtr::test {
namespace {

TEST(Runtime, SimulatedMemoryRunsOpsThatTouchNoMemoryAndCountsTheirKnownCost) {
  Config config = deterministic_config(3000, BudgetMode::bytes, "lru");
  config.clock = ClockKind::compute;
  Runtime rt(config, make_simulated_resource(std::size_t{1} << 30));
  Tensor c = rt.constant(TensorMeta{{1000}, DType::uint8});
  EXPECT_EQ(c.storage_bytes(), 1000u);
  EXPECT_TRUE(c.resident());
  Tensor a = rt.call1(timed_op(), {c}, Attrs{{"cost", 250.0}});
  Tensor b = rt.call1(timed_op(), {a}, Attrs{{"cost", 500.0}});
  EXPECT_EQ(rt.stats().base_compute, 750.0);  // known costs, whatever the cost model
  Tensor d = rt.call1(timed_op(), {b}, Attrs{{"cost", 1.0}});  // 4000 > 3000 bytes: a goes
  EXPECT_FALSE(a.resident());
  rt.materialize(a);  // back without reading it
  EXPECT_TRUE(a.resident());
  EXPECT_EQ(rt.stats().remat_compute, 250.0);
  EXPECT_EQ(rt.stats().rematerializations, 1u);
  // Memory the host cannot touch: no kernels that write, no values in or out.
  EXPECT_THROW(rt.call1(ops::relu(), {a}), InvalidArgument);
  EXPECT_THROW(a.to_host(), InvalidArgument);
  EXPECT_THROW(rt.constant(TensorMeta{{2}}, std::vector<float>{1.0f, 2.0f}), InvalidArgument);
  EXPECT_THROW(rt.materialize(Tensor()), InvalidArgument);
  EXPECT_THROW(Runtime(config, nullptr), InvalidArgument);
}

// A program's own reruns (static checkpointing's) are program ops priced also in rerun_compute; nested pairs
// count once; a recomputation inside one is DTR's (remat_compute), not the program's; an unmatched end is an
// error that changes nothing.
TEST(Runtime, ProgramRerunsArePricedApartFromDtrsRecomputations) {
  Config config = deterministic_config(3000, BudgetMode::bytes, "lru");
  Runtime rt(config, make_simulated_resource(std::size_t{1} << 30));
  const Tensor c = rt.constant(TensorMeta{{1000}, DType::uint8});
  const Tensor a = rt.call1(timed_op(), {c}, Attrs{{"cost", 250.0}});
  rt.begin_program_rerun();
  const Tensor b = rt.call1(timed_op(), {a}, Attrs{{"cost", 500.0}});
  rt.begin_program_rerun();
  const Tensor d = rt.call1(timed_op(), {b}, Attrs{{"cost", 20.0}});  // 4000 > 3000 bytes: a goes
  EXPECT_FALSE(a.resident());
  rt.end_program_rerun();
  rt.materialize(a);  // DTR's recomputation, inside the program's rerun
  rt.end_program_rerun();
  const Tensor e = rt.call1(timed_op(), {d}, Attrs{{"cost", 1.0}});
  const RuntimeStats s = rt.stats();
  EXPECT_EQ(s.base_compute, 771.0);
  EXPECT_EQ(s.rerun_compute, 520.0);
  EXPECT_EQ(s.remat_compute, 250.0);
  expect_error<InvalidArgument>([&] { rt.end_program_rerun(); }, {"end_program_rerun", "no program rerun"});
  EXPECT_EQ(rt.stats().rerun_compute, 520.0);
}

TEST(Runtime, ComputeClockMeasuresStalenessInCost) {
  // a (cost 60) then b (cost 50), then an expensive y (cost 10 000), then x needs room. By ops, a is 3 ops
  // stale and b 2: dtr-local scores a 60/3 < b 50/2 and evicts a. By compute, both are ~10 000 stale: a's
  // higher cost keeps it and b goes.
  for (const ClockKind clock : {ClockKind::ops, ClockKind::compute}) {
    SCOPED_TRACE(to_string(clock));
    Config config = deterministic_config(10 + 3 * 1000, BudgetMode::bytes, "dtr-local");
    config.clock = clock;
    Runtime rt(config, make_simulated_resource(std::size_t{1} << 30));
    Tensor k = rt.constant(TensorMeta{{10}, DType::uint8});
    Tensor a = rt.call1(timed_op(), {k}, Attrs{{"cost", 60.0}, {"bytes", std::int64_t{1000}}});
    Tensor b = rt.call1(timed_op(), {k}, Attrs{{"cost", 50.0}, {"bytes", std::int64_t{1000}}});
    Tensor y = rt.call1(timed_op(), {k}, Attrs{{"cost", 10000.0}, {"bytes", std::int64_t{1000}}});
    EXPECT_EQ(rt.stats().evictions, 0u);
    Tensor x = rt.call1(timed_op(), {k}, Attrs{{"cost", 1.0}, {"bytes", std::int64_t{1000}}});
    EXPECT_EQ(rt.stats().evictions, 1u);
    EXPECT_EQ(a.resident(), clock == ClockKind::compute);
    EXPECT_EQ(b.resident(), clock == ClockKind::ops);
    EXPECT_TRUE(y.resident());
  }
  EXPECT_EQ(parse_clock("compute"), ClockKind::compute);
  EXPECT_STREQ(to_string(ClockKind::compute), "compute");
}

}  // namespace
}  // namespace dtr::test
