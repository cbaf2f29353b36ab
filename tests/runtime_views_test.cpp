// Views made by ops (OpDef::views): they share their input's storage, its cost includes theirs, an eviction
// undoes them and using them again pays their cost again. And the order in which an op acquires its inputs.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "dtr/sim.h"
#include "test_helpers.h"
#include "test_resources.h"
#include "timed_op.h"

namespace dtr::test {
namespace {

// "rows": rows [first, first + count) of a matrix, as a view; costs 1 under the flops model.
const OpDef& rows_view() {
  static const OpDef op{
      .name = "rows",
      .infer =
          [](std::span<const TensorMeta> in, const Attrs& attrs) {
            return TensorMetas{TensorMeta{{attrs.get_int("count"), in[0].shape[1]}, in[0].dtype}};
          },
      .cpu_kernel = [](const KernelArgs&) {},
      .flops = [](std::span<const TensorMeta>, const Attrs&) { return 1.0; },
      .views =
          [](std::span<const TensorMeta> in, const Attrs& attrs) {
            return OutputViews{ViewOf{0, attrs.get_int("first") * in[0].shape[1]}};
          },
  };
  return op;
}

Runtime simulated_runtime(std::optional<std::uint64_t> budget = std::nullopt, const std::string& heuristic = "dtr-eq") {
  Config config = deterministic_config(budget, BudgetMode::bytes, heuristic);
  config.clock = ClockKind::compute;
  return Runtime(config, make_simulated_resource(std::size_t{1} << 30));
}

TEST(RuntimeViews, AnOpViewSharesItsInputsStorageAndReadsItsElements) {
  Runtime rt(deterministic_config());
  Tensor m = constant(rt, {4, 3}, 1.0f);
  Tensor y = rt.call1(ops::relu(), {m});
  const auto allocations = rt.allocator().stats().num_allocations;
  Tensor middle = rt.call1(rows_view(), {y}, Attrs{{"first", 1}, {"count", 2}});
  EXPECT_EQ(rt.allocator().stats().num_allocations, allocations);  // no buffer of its own
  EXPECT_TRUE(middle.is_view());
  EXPECT_EQ(middle.shape(), (Shape{2, 3}));
  EXPECT_EQ(middle.storage_bytes(), y.storage_bytes());
  const std::vector<float> all = y.to_host();
  EXPECT_EQ(middle.to_host(), std::vector<float>(all.begin() + 3, all.begin() + 9));
  // An op on the view reads those elements, also after the storage was evicted and recomputed.
  Tensor doubled = rt.call1(ops::scale(), {middle}, Attrs{{"factor", 2.0}});
  const std::vector<float> expected = doubled.to_host();
  ASSERT_TRUE(rt.evict(y));
  ASSERT_TRUE(rt.evict(doubled));
  EXPECT_TRUE(bitwise_equal(doubled.to_host(), expected));
  // Recomputing y undid the view, so the scale's recomputation made it again: relu, rows, scale.
  EXPECT_EQ(rt.stats().rematerializations, 3u);
  EXPECT_EQ(rt.stats().ops, 3u);
}

TEST(RuntimeViews, AnEvictionUndoesViewsAndUsingThemPaysTheirCostAgain) {
  Runtime rt = simulated_runtime();
  Tensor c = rt.constant(TensorMeta{{100}, DType::uint8});
  Tensor a = rt.call1(timed_op(), {c}, Attrs{{"bytes", 100}, {"cost", 100.0}});
  Tensor v = rt.call1(timed_op(), {a}, Attrs{{"view", 1}, {"cost", 10.0}});
  Tensor w = rt.call1(timed_op(), {v}, Attrs{{"view", 1}, {"cost", 5.0}});  // a view of a view
  Tensor part = rt.view(w, {40}, 10);  // a free view of an op's view: undone with it
  EXPECT_EQ(rt.stats().base_compute, 115.0);
  EXPECT_EQ(rt.resident_bytes(), 200u);
  ASSERT_TRUE(rt.evict(a));
  EXPECT_FALSE(part.resident());
  rt.materialize(part);  // a, then v, then w
  EXPECT_EQ(rt.stats().remat_compute, 115.0);
  EXPECT_EQ(rt.stats().rematerializations, 3u);
  rt.materialize(v);  // made already
  rt.materialize(a);
  EXPECT_EQ(rt.stats().remat_compute, 115.0);
  // Recomputing the storage alone leaves its views undone until they are used.
  ASSERT_TRUE(rt.evict(a));
  rt.materialize(a);
  EXPECT_EQ(rt.stats().remat_compute, 215.0);
  Tensor b = rt.call1(timed_op(), {w}, Attrs{{"bytes", 8}, {"cost", 1.0}});
  EXPECT_EQ(rt.stats().remat_compute, 230.0);
  EXPECT_EQ(rt.stats().rematerializations, 6u);
  EXPECT_EQ(rt.stats().base_compute, 116.0);
}

TEST(RuntimeViews, AViewsCostJoinsItsStoragesCostForTheHeuristic) {
  // a and b are alike (size, cost, no evicted neighbours); msps has no staleness, so without the view they
  // tie and the latest candidate, a (its view op released it last), would go. The view makes a dearer.
  Runtime rt = simulated_runtime(300, "msps");
  Tensor c = rt.constant(TensorMeta{{100}, DType::uint8});
  Tensor b = rt.call1(timed_op(), {c}, Attrs{{"bytes", 100}, {"cost", 100.0}});
  Tensor a = rt.call1(timed_op(), {c}, Attrs{{"bytes", 100}, {"cost", 100.0}});
  Tensor v = rt.call1(timed_op(), {a}, Attrs{{"view", 1}, {"cost", 1000.0}});
  Tensor d = rt.call1(timed_op(), {c}, Attrs{{"bytes", 100}, {"cost", 1.0}});
  EXPECT_TRUE(a.resident());
  EXPECT_FALSE(b.resident());
  EXPECT_EQ(rt.stats().evictions, 1u);
}

TEST(RuntimeViews, ResidentInputsArePinnedBeforeAnyInputIsRecomputed) {
  // matmul(a, b) with a evicted and b resident and the largest storage: recomputing a needs room, and the
  // size heuristic would take b, which the matmul needs next. b is held from the start, so c or d go.
  const auto program = [](Runtime& rt, bool evict_a) {
    Tensor x = constant(rt, {1, 4}, 0.5f);
    Tensor big = constant(rt, {4, 4}, -1.0f);
    Tensor a = rt.call1(ops::scale(), {x}, Attrs{{"factor", 3.0}});
    if (evict_a) {
      EXPECT_TRUE(rt.evict(a));
    }
    Tensor b = rt.call1(ops::relu(), {big});
    Tensor c = rt.call1(ops::relu(), {x});
    Tensor d = rt.call1(ops::scale(), {x}, Attrs{{"factor", 2.0}});
    Tensor y = rt.call1(ops::matmul(), {a, b});
    if (evict_a) {
      EXPECT_TRUE(b.resident());
      EXPECT_FALSE(c.resident());
      EXPECT_FALSE(d.resident());
    }
    return y.to_host();
  };
  Runtime unbudgeted(deterministic_config());
  const std::vector<float> expected = program(unbudgeted, false);
  // Resident before the matmul: x 16 + big 64 + b 64 + c 16 + d 16 = 176 bytes, the whole budget.
  Runtime rt(deterministic_config(176, BudgetMode::bytes, "size"));
  EXPECT_TRUE(bitwise_equal(program(rt, true), expected));
  EXPECT_EQ(rt.stats().rematerializations, 1u);  // a only
  EXPECT_EQ(rt.stats().evictions, 2u);            // d for a, c for the output
}

TEST(RuntimeViews, BadViewsAreErrorsBeforeAnyAllocation) {
  Runtime rt(deterministic_config());
  Tensor m = constant(rt, {4, 3}, 1.0f);
  const auto allocations = rt.allocator().stats().num_allocations;
  const auto ops_before = rt.stats().ops;
  EXPECT_THROW(rt.call1(rows_view(), {m}, Attrs{{"first", 3}, {"count", 2}}), ShapeError);  // past the end
  EXPECT_THROW(rt.call1(rows_view(), {m}, Attrs{{"first", -1}, {"count", 1}}), ShapeError);
  static const OpDef wrong_input{
      .name = "wrong_input",
      .infer = [](std::span<const TensorMeta> in, const Attrs&) { return TensorMetas{in[0]}; },
      .cpu_kernel = [](const KernelArgs&) {},
      .flops = nullptr,
      .views = [](std::span<const TensorMeta>, const Attrs&) { return OutputViews{ViewOf{1, 0}}; },
  };
  EXPECT_THROW(rt.call1(wrong_input, {m}), InvalidArgument);
  static const OpDef wrong_count{
      .name = "wrong_count",
      .infer = [](std::span<const TensorMeta> in, const Attrs&) { return TensorMetas{in[0]}; },
      .cpu_kernel = [](const KernelArgs&) {},
      .flops = nullptr,
      .views = [](std::span<const TensorMeta>, const Attrs&) { return OutputViews(2); },
  };
  EXPECT_THROW(rt.call1(wrong_count, {m}), InvalidArgument);
  EXPECT_EQ(rt.allocator().stats().num_allocations, allocations);
  EXPECT_EQ(rt.stats().ops, ops_before);
  // An in-place update needs a new value, not a view of an old one.
  Tensor y = rt.call1(ops::relu(), {m});
  EXPECT_THROW(rt.assign(y, rows_view(), {m}, Attrs{{"first", 0}, {"count", 4}}), InvalidArgument);
}

TEST(RuntimeViews, TracesNameTheArgumentAViewAliasesAndReplayTheSame) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("dtr-views-trace-" + std::to_string(::getpid()) + ".log");
  RuntimeStats stats;
  {
    Config config = deterministic_config();
    config.trace_path = path.string();
    Runtime rt(config);
    Tensor m = constant(rt, {4, 3}, 1.0f);
    Tensor y = rt.call1(ops::relu(), {m});
    Tensor middle = rt.call1(rows_view(), {y}, Attrs{{"first", 1}, {"count", 2}});
    Tensor z = rt.call1(ops::scale(), {middle}, Attrs{{"factor", 2.0}});
    stats = rt.stats();
  }
  const sim::Trace trace = sim::read_trace(path.string());
  std::filesystem::remove(path);
  std::vector<std::int32_t> aliases;
  for (const sim::Instruction& in : trace.instructions) {
    if (in.kind == sim::Instruction::Kind::call) aliases.push_back(in.results.at(0).alias);
  }
  EXPECT_EQ(aliases, (std::vector<std::int32_t>{-1, 0, -1}));
  EXPECT_EQ(sim::summarize(trace).base_compute_ns, stats.base_compute);
  sim::ReplayOptions options;
  const sim::ReplayResult replayed = sim::replay(trace, options);
  EXPECT_EQ(replayed.base_compute_ns, stats.base_compute);
  EXPECT_EQ(replayed.peak_resident_bytes, stats.peak_resident_bytes);
}

}  // namespace
}  // namespace dtr::test
