// The order in which a recomputation remakes its evicted inputs (Config::recompute_order): the same bits either
// way; stable-last remakes an RNN-shaped chain once each under a budget the closure's order cannot keep to.
#include <gtest/gtest.h>

#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "dtr/ops.h"
#include "dtr/runtime.h"
#include "dtr/sim.h"
#include "test_helpers.h"
#include "test_resources.h"

namespace dtr::test {
namespace {

constexpr int kSteps = 8;

struct ChainRun {
  std::vector<float> last;
  std::uint64_t rematerializations = 0;
  bool out_of_memory = false;  // or thrashing: the budget did not hold
};

// Evicts `made` (dropping the handles), sets `budget`, then reads `state`: its values and what reading it remade.
ChainRun read_evicted(Runtime& rt, std::vector<Tensor>& made, const Tensor& state,
                      std::optional<std::uint64_t> budget) {
  for (const Tensor& t : made) EXPECT_TRUE(rt.evict(t));
  made.clear();
  if (budget) rt.set_memory_budget(*budget);
  const std::uint64_t before = rt.stats().rematerializations;
  ChainRun run;
  try {
    run.last = state.to_host();
  } catch (const OutOfMemory&) {
    run.out_of_memory = true;
  } catch (const Thrashing&) {
    run.out_of_memory = true;
  }
  run.rematerializations = rt.stats().rematerializations - before;
  return run;
}

// s_k = c_k + s_(k-1), c_k = (k + 1) x, as an RNN step reads its input slice and its state: every c_k and s_k
// evicted, then s_n read under a budget of five of them. Remade in the closure's order, each level holds its
// c_k while it goes down the state chain; stable-last remakes the chain first (its c_k come from x alone, a
// constant: they cannot grow by waiting), then c_k.
ChainRun run_chain(const std::string& heuristic, RecomputeOrder order, bool budgeted) {
  Config config = deterministic_config(std::nullopt, BudgetMode::bytes, heuristic);
  config.recompute_order = order;
  Runtime rt(config);
  const Tensor x = constant(rt, {16}, 0.5F);
  Tensor state = x;
  std::vector<Tensor> made;
  for (int k = 1; k <= kSteps; ++k) {
    const Tensor c = rt.call1(ops::scale(), {x}, Attrs{{"factor", 1.0 + k}});
    state = rt.call1(ops::add(), {c, state});
    made.push_back(c);
    made.push_back(state);
  }
  return read_evicted(rt, made, state, budgeted ? std::optional(5 * x.storage_bytes()) : std::nullopt);
}

// Under every heuristic, a chain run(heuristic, order, budgeted) that remakes each c_k and s_k once without a
// budget: stable-last under the budget does the same and reads the unbudgeted bits; the closures' order
// recomputes more, or (where `inputs_may_run_out`) runs out of memory.
template <typename Run>
void expect_stable_last_remakes_each_once(const Run& run, bool inputs_may_run_out) {
  for (const std::string& heuristic : heuristic_names()) {
    SCOPED_TRACE(heuristic);
    const ChainRun unbudgeted = run(heuristic, RecomputeOrder::inputs, false);
    EXPECT_EQ(unbudgeted.rematerializations, 2U * kSteps);
    const ChainRun stable_last = run(heuristic, RecomputeOrder::stable_last, true);
    EXPECT_FALSE(stable_last.out_of_memory);
    EXPECT_EQ(stable_last.last, unbudgeted.last);
    EXPECT_EQ(stable_last.rematerializations, 2U * kSteps) << "each c_k and s_k once";
    const ChainRun inputs = run(heuristic, RecomputeOrder::inputs, true);
    if (inputs_may_run_out) {
      EXPECT_TRUE(inputs.out_of_memory || inputs.rematerializations > 2U * kSteps)
          << "the closure's order holds the c_k down the chain";
    } else {
      EXPECT_EQ(inputs.last, unbudgeted.last);
      EXPECT_GT(inputs.rematerializations, 2U * kSteps) << "the closure's order holds the c_k down the chain";
    }
  }
}

TEST(RecomputeOrder, StableLastRemakesAnRnnChainOnceEachUnderABudgetTheClosuresOrderCannotKeep) {
  expect_stable_last_remakes_each_once(run_chain, false);
}

// An input remade from a computed value can wait too, when that value is smaller than the input: stable-last
// pins the value instead of holding the input down the chain (an upper RNN layer's input projection and the
// state below it). u_k = (k + 1) x (4 floats, computed, resident), c_k = u_k four times over (16 floats), s_k =
// c_k + s_(k-1); every c_k and s_k evicted, then s_n read under a budget that holds the constants, the u_k and
// four of the others. Pinning the u_k, each c_k and s_k is remade once; holding the c_k, they do not fit.
ChainRun run_projected_chain(const std::string& heuristic, RecomputeOrder order, bool budgeted) {
  Config config = deterministic_config(std::nullopt, BudgetMode::bytes, heuristic);
  config.recompute_order = order;
  Runtime rt(config);
  const Tensor x = constant(rt, {4}, 0.5F);
  Tensor state = constant(rt, {16}, 0.25F);
  std::vector<Tensor> projected;
  std::vector<Tensor> made;
  for (int k = 1; k <= kSteps; ++k) {
    const Tensor u = rt.call1(ops::scale(), {x}, Attrs{{"factor", 1.0 + k}});
    const Tensor c = rt.call1(ops::concat(), {u, u, u, u}, Attrs{{"dim", std::int64_t{0}}});
    state = rt.call1(ops::add(), {c, state});
    projected.push_back(u);
    made.push_back(c);
    made.push_back(state);
  }
  const std::uint64_t floats = 4 + 16 + 4 * kSteps + 4 * 16;
  return read_evicted(rt, made, state, budgeted ? std::optional(floats * sizeof(float)) : std::nullopt);
}

TEST(RecomputeOrder, StableLastPinsWhatAnInputIsRemadeFromWhenThatIsSmaller) {
  expect_stable_last_remakes_each_once(run_projected_chain, true);
}

// Inputs that share ancestry: d = 2c, c = 3x, y = d + c with c and d evicted. c, an ancestor of d, is not
// deferred past it (remade inside d's frame, it would be left evictable there); in either order each is remade
// once and y has the same bits.
TEST(RecomputeOrder, InputsThatShareAncestryAreEachRemadeOnce) {
  for (const RecomputeOrder order : {RecomputeOrder::stable_last, RecomputeOrder::inputs}) {
    SCOPED_TRACE(to_string(order));
    Config config = deterministic_config(std::nullopt, BudgetMode::bytes);
    config.recompute_order = order;
    Runtime rt(config);
    const Tensor x = constant(rt, {16}, 0.5F);
    Tensor c = rt.call1(ops::scale(), {x}, Attrs{{"factor", 3.0}});
    Tensor d = rt.call1(ops::scale(), {c}, Attrs{{"factor", 2.0}});
    const std::vector<float> expected = rt.call1(ops::add(), {d, c}).to_host();
    ASSERT_TRUE(rt.evict(c));
    ASSERT_TRUE(rt.evict(d));
    rt.set_memory_budget(4 * x.storage_bytes());
    const std::uint64_t before = rt.stats().rematerializations;
    EXPECT_EQ(rt.call1(ops::add(), {d, c}).to_host(), expected);
    EXPECT_EQ(rt.stats().rematerializations - before, 2U);
  }
}

// The order a frame remakes its inputs in, seen by a kernel observer: a concatenation of `n` evicted inputs,
// input i a chain of 1 + i % 3 scalings of a constant (its top scaled by 100 + i), recomputed unbudgeted. Each
// input can wait (all come from the constant): stable-last remakes the deepest first, ties in the closure's
// order; past 16 inputs the frame keeps the closure's order, as it does under RecomputeOrder::inputs.
std::vector<int> remade_tops(RecomputeOrder order, int n) {
  std::vector<int> tops;
  Config config = deterministic_config(std::nullopt, BudgetMode::bytes);
  config.recompute_order = order;
  config.kernel_observer = [&tops](const KernelRun& run) {
    const double factor = run.args.attrs.get_real("factor", 0);
    if (run.rematerialization && factor >= 100) tops.push_back(static_cast<int>(factor) - 100);
  };
  Runtime rt(config);
  const Tensor x = constant(rt, {4}, 0.5F);
  std::vector<Tensor> parts;
  std::vector<Tensor> made;
  for (int i = 0; i < n; ++i) {
    Tensor t = x;
    for (int k = 0; k < i % 3; ++k) made.push_back(t = rt.call1(ops::scale(), {t}, Attrs{{"factor", 1.0}}));
    parts.push_back(rt.call1(ops::scale(), {t}, Attrs{{"factor", 100.0 + i}}));
  }
  const Tensor joined = rt.call1(ops::concat(), parts, Attrs{{"dim", std::int64_t{0}}});
  const std::vector<float> expected = joined.to_host();
  for (const Tensor& t : made) EXPECT_TRUE(rt.evict(t));
  for (const Tensor& t : parts) EXPECT_TRUE(rt.evict(t));
  EXPECT_TRUE(rt.evict(joined));
  made.clear();
  parts.clear();
  EXPECT_EQ(joined.to_host(), expected);
  return tops;
}

TEST(RecomputeOrder, StableLastRemakesTheDeepestFirstUpToSixteenInputs) {
  EXPECT_EQ(remade_tops(RecomputeOrder::stable_last, 6), (std::vector<int>{2, 5, 1, 4, 0, 3}));
  EXPECT_EQ(remade_tops(RecomputeOrder::inputs, 6), (std::vector<int>{0, 1, 2, 3, 4, 5}));
  std::vector<int> in_order(17);
  for (int i = 0; i < 17; ++i) in_order[static_cast<std::size_t>(i)] = i;
  EXPECT_EQ(remade_tops(RecomputeOrder::stable_last, 17), in_order);
}

// The same chain as a trace: a replay takes its order from ReplayOptions (the closure's, by default, as the DTR
// authors' runtime), and stable-last recomputes less there too.
TEST(RecomputeOrder, AReplayTakesItsOrderFromItsOptions) {
  std::ostringstream text;
  text << R"({"ANNOTATION":"START","INSTRUCTION":"ANNOTATE"})" << '\n'
       << R"({"INSTRUCTION":"CONSTANT","NAME":"x"})" << '\n'
       << R"({"INSTRUCTION":"MEMORY","MEMORY":"4096","NAME":"x"})" << '\n';
  std::string state = "x";
  auto call = [&](const std::string& name, const std::vector<std::string>& args, const std::string& result) {
    text << R"({"ARGS":[)";
    for (std::size_t i = 0; i < args.size(); ++i) text << (i > 0 ? "," : "") << '"' << args[i] << '"';
    text << R"(],"INSTRUCTION":"CALL","NAME":")" << name << R"(","RESULT":[")" << result << R"("],"TIME":"1000"})"
         << '\n'
         << R"({"INSTRUCTION":"MEMORY","MEMORY":"4096","NAME":")" << result << R"("})" << '\n';
  };
  for (int k = 1; k <= 3 * kSteps; ++k) {
    const std::string c = "c" + std::to_string(k);
    const std::string s = "s" + std::to_string(k);
    call("scale", {"x"}, c);
    call("add", {c, state}, s);
    state = s;
  }
  // The backward pass reads the states in reverse, each with its c_k.
  std::string grad = state;
  for (int k = 3 * kSteps; k >= 1; --k) {
    const std::string g = "g" + std::to_string(k);
    const std::string s = "s" + std::to_string(k);
    call("add_backward", {grad, s, "c" + std::to_string(k)}, g);
    for (const std::string& done : {grad, s, "c" + std::to_string(k)}) {
      if (done != grad || grad != s) text << R"({"INSTRUCTION":"RELEASE","NAME":")" << done << R"("})" << '\n';
    }
    grad = g;
  }
  std::istringstream in(text.str());
  const sim::Trace trace = sim::parse_trace(in, "rnn.log");
  EXPECT_EQ(sim::ReplayOptions{}.recompute_order, RecomputeOrder::inputs);
  // The fewest buffers of 4096 bytes each order replays in.
  auto fewest = [&](RecomputeOrder order) {
    sim::ReplayOptions options;
    options.recompute_order = order;
    options.thrash_limit = std::nullopt;
    options.keep_constants = false;
    for (std::uint64_t buffers = 1; buffers <= 6 * kSteps; ++buffers) {
      options.budget_bytes = buffers * 4096;
      if (sim::replay(trace, options).feasible) return buffers;
    }
    return std::uint64_t{0};
  };
  const std::uint64_t inputs = fewest(RecomputeOrder::inputs);
  const std::uint64_t stable_last = fewest(RecomputeOrder::stable_last);
  EXPECT_GT(stable_last, 0U);
  EXPECT_LT(stable_last, inputs) << "buffers of 4096 bytes";
}

}  // namespace
}  // namespace dtr::test
