// Replaying traces through the runtime over simulated memory: the DTR authors' figures on their own logs
// (../shared/traces), and invariants on generated traces.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>

#include <unistd.h>

#include "dtr/ops.h"
#include "dtr/runtime.h"
#include "dtr/sim.h"
#include "test_helpers.h"
#include "test_resources.h"

namespace dtr::test {
namespace {

sim::Trace parse(const std::string& text) {
  std::istringstream in(text);
  return sim::parse_trace(in, "generated.log");
}

// A forward chain of `n` ops of `bytes` each from one constant, then a backward pass reading each forward
// value in reverse (as gradients do), releasing everything it no longer needs.
std::string chain_trace(int n, std::uint64_t bytes) {
  std::ostringstream out;
  out << R"({"ANNOTATION":"START","INSTRUCTION":"ANNOTATE"})" << '\n';
  out << R"({"INSTRUCTION":"CONSTANT","NAME":"x0"})" << '\n';
  out << R"({"INSTRUCTION":"MEMORY","MEMORY":")" << bytes << R"(","NAME":"x0"})" << '\n';
  for (int i = 1; i <= n; ++i) {
    out << R"({"ARGS":["x)" << i - 1 << R"("],"INSTRUCTION":"CALL","NAME":"f","RESULT":["x)" << i
        << R"("],"TIME":"1000"})" << '\n';
    out << R"({"INSTRUCTION":"MEMORY","MEMORY":")" << bytes << R"(","NAME":"x)" << i << R"("})" << '\n';
    out << R"({"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"x)" << i << R"("})" << '\n';
  }
  out << R"({"ANNOTATION":"BACKWARD","INSTRUCTION":"ANNOTATE"})" << '\n';
  std::string g = std::string("x").append(std::to_string(n));
  for (int i = n - 1; i >= 0; --i) {
    const std::string next = std::string("g").append(std::to_string(i));
    out << R"({"ARGS":[")" << g << R"(","x)" << i << R"("],"INSTRUCTION":"CALL","NAME":"df","RESULT":[")" << next
        << R"("],"TIME":"2000"})" << '\n';
    out << R"({"INSTRUCTION":"MEMORY","MEMORY":")" << bytes << R"(","NAME":")" << next << R"("})" << '\n';
    out << R"({"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":")" << next << R"("})" << '\n';
    out << R"({"INSTRUCTION":"RELEASE","NAME":")" << g << R"("})" << '\n';
    if (i > 0) out << R"({"INSTRUCTION":"RELEASE","NAME":"x)" << i << R"("})" << '\n';
    g = next;
  }
  return out.str();
}

TEST(Replay, UnbudgetedReplayRecomputesNothingAndPeaksAsSummarized) {
  const sim::Trace trace = parse(chain_trace(50, 4096));
  const sim::TraceSummary summary = sim::summarize(trace);
  EXPECT_EQ(summary.base_compute_ns, 50 * 1000.0 + 50 * 2000.0);
  EXPECT_EQ(summary.constant_bytes, 4096u);
  EXPECT_EQ(summary.peak_bytes, 52u * 4096);  // x0..x50 and the first gradient
  const sim::ReplayResult r = sim::replay(trace, {});
  EXPECT_TRUE(r.feasible);
  EXPECT_FALSE(r.thrashed);
  EXPECT_EQ(r.base_compute_ns, summary.base_compute_ns);
  EXPECT_EQ(r.remat_compute_ns, 0.0);
  EXPECT_EQ(r.evictions, 0u);
  EXPECT_EQ(r.peak_resident_bytes, summary.peak_bytes);
  EXPECT_DOUBLE_EQ(r.overhead(), 1.0);
}

// Past the simulated device (32 TiB) a trace is refused with a message, not reported infeasible at every budget
// (even 100% of its own peak); sums past 2^64 bytes are an error, not a wrapped peak.
TEST(Replay, TracesPastTheSimulatedDeviceOrTwoToTheSixtyFourAreRefused) {
  const sim::Trace big = parse(chain_trace(2, std::uint64_t{20} << 40));  // 20 TiB tensors, 40+ TiB at the peak
  sim::ReplayOptions options;
  options.budget_bytes = sim::summarize(big).peak_bytes;
  expect_error<TraceError>([&] { sim::replay(big, options); },
                           {"generated.log: the unbudgeted peak", "beyond the simulated device's 32.00 TiB"});
  const sim::Trace fits = parse(chain_trace(2, std::uint64_t{4} << 40));  // 12 TiB: replays
  EXPECT_TRUE(sim::replay(fits, sim::ReplayOptions{}).feasible);
  const sim::Trace wraps = parse(chain_trace(20, 1000000000000000000ull));  // 1e18 bytes each
  expect_error<TraceError>([&] { sim::summarize(wraps); }, {"generated.log:", "sum past 2^64 bytes"});
}

// The runtime names every replayed op 'replay': the failure says where in the trace it ran out, and which op.
TEST(Replay, AnOutOfMemoryNamesTheTraceLineAndTheLoggedOp) {
  constexpr std::uint64_t kBytes = 1024;
  const sim::Trace trace = parse(chain_trace(10, kBytes));
  sim::ReplayOptions options;
  // Room for the forward's two values at a time, not for the backward's first op: its gradient in and out and
  // the value it reads, beside the constant x0.
  options.budget_bytes = 3 * kBytes + kBytes / 2;
  options.thrash_limit = std::nullopt;
  const sim::ReplayResult r = sim::replay(trace, options);
  ASSERT_FALSE(r.feasible);
  // Line 1 starts the trace, x0 takes two, each forward op three, then the BACKWARD annotation: the first df.
  EXPECT_EQ(r.failure.rfind("generated.log:35: in op 'df': dtr: out of memory running op 'replay'", 0), 0u)
      << r.failure;
}

TEST(Replay, BudgetsBoundMemoryAndCostRecomputation) {
  // 256 KiB tensors: eight of the default allocator's 2 MiB segments at the unbudgeted peak.
  const sim::Trace trace = parse(chain_trace(60, 256 * 1024));
  const sim::TraceSummary summary = sim::summarize(trace);
  sim::ReplayOptions unbudgeted;
  unbudgeted.budget_mode = BudgetMode::device;
  const std::uint64_t reserved_peak = sim::replay(trace, unbudgeted).peak_reserved_bytes;
  EXPECT_GE(reserved_peak, summary.peak_bytes);
  int feasible_budgeted = 0;
  for (const char* heuristic : {"dtr", "dtr-eq", "dtr-local", "lru", "msps", "size", "dtr-eq+window"}) {
    for (const BudgetMode mode : {BudgetMode::bytes, BudgetMode::device}) {
      for (const double ratio : {1.0, 0.6, 0.3, 0.15}) {
        SCOPED_TRACE(::testing::Message() << heuristic << ", " << to_string(mode) << ", ratio " << ratio);
        sim::ReplayOptions options;
        options.heuristic = heuristic;
        options.budget_mode = mode;
        const double peak = static_cast<double>(mode == BudgetMode::bytes ? summary.peak_bytes : reserved_peak);
        options.budget_bytes = static_cast<std::uint64_t>(ratio * peak);
        options.thrash_limit = std::nullopt;
        const sim::ReplayResult r = sim::replay(trace, options);
        if (!r.feasible) {
          EXPECT_NE(r.failure.find("out of memory"), std::string::npos) << r.failure;
          continue;
        }
        EXPECT_EQ(r.base_compute_ns, summary.base_compute_ns);
        EXPECT_GE(r.overhead(), 1.0);
        EXPECT_EQ(r.rematerializations > 0, r.remat_compute_ns > 0);
        if (mode == BudgetMode::bytes) {
          EXPECT_LE(r.peak_resident_bytes, *options.budget_bytes);
        } else {
          EXPECT_LE(r.peak_reserved_bytes, *options.budget_bytes);
        }
        if (ratio < 1.0) {
          EXPECT_GT(r.rematerializations, 0u);
          feasible_budgeted += 1;
        }
      }
    }
  }
  EXPECT_GT(feasible_budgeted, 20);
}

// Replaying chain_trace(200, 4096) under a budget of `tensors` tensors, with no thrash limit.
sim::ReplayOptions chain_options(std::uint64_t tensors, const char* heuristic) {
  sim::ReplayOptions options;
  options.budget_bytes = tensors * 4096;
  options.heuristic = heuristic;
  options.thrash_limit = std::nullopt;
  return options;
}

// The runtime stops a thrashing cell at the recomputation that passes the limit (relative to the whole trace's
// base compute, as the DTR authors' simulator), not at the end of the trace nor of the op.
TEST(Replay, ThrashingStopsAtTheRecomputationThatPassesTheLimit) {
  const sim::Trace trace = parse(chain_trace(200, 4096));
  const double base = sim::summarize(trace).base_compute_ns;
  const double longest_op = 2000;  // the chain's backward ops
  sim::ReplayOptions options = chain_options(6, "lru");
  const sim::ReplayResult whole = sim::replay(trace, options);
  ASSERT_TRUE(whole.feasible);
  EXPECT_FALSE(whole.thrashed);
  EXPECT_EQ(whole.base_compute_ns, base);
  ASSERT_GT(whole.overhead(), 3.0) << "the test needs a cell that thrashes";
  for (const double limit : {2.0, 3.0}) {
    options.thrash_limit = limit;
    const sim::ReplayResult r = sim::replay(trace, options);
    ASSERT_TRUE(r.feasible);
    EXPECT_TRUE(r.thrashed) << limit;
    EXPECT_GT(r.remat_compute_ns, (limit - 1) * base);
    EXPECT_LE(r.remat_compute_ns, (limit - 1) * base + longest_op);  // one recomputation past it, no more
    EXPECT_LT(r.base_compute_ns, base);  // stopped inside the trace
  }
  options.thrash_limit = 0.5;
  EXPECT_THROW(sim::replay(trace, options), InvalidArgument);
}

// forecast changes its rule once its recomputation passes the base compute (Heuristic::change_rule), and the
// runtime's limit then counts from the change: at 8 tensors the chain's replay runs on to its end, 2.39x the
// base. The cell is still judged on all its recomputation, as every other heuristic's: past the limit, thrashed.
TEST(Replay, ACellPastTheLimitThrashesEvenWhereItsHeuristicChangedItsRuleAndWentOn) {
  const sim::Trace trace = parse(chain_trace(200, 4096));
  sim::ReplayOptions options = chain_options(8, "forecast");
  const sim::ReplayResult whole = sim::replay(trace, options);
  ASSERT_TRUE(whole.feasible);
  ASSERT_GT(whole.overhead(), 2.0) << "the test needs a cell past the limit";
  options.thrash_limit = 2.0;
  const sim::ReplayResult r = sim::replay(trace, options);
  EXPECT_TRUE(r.feasible);
  EXPECT_TRUE(r.thrashed);
  EXPECT_EQ(r.base_compute_ns, whole.base_compute_ns);  // it ran to the end of the trace ...
  EXPECT_EQ(r.remat_compute_ns, whole.remat_compute_ns);  // ... deciding as without a limit
  options.thrash_limit = 3.0;
  EXPECT_FALSE(sim::replay(trace, options).thrashed);
}

TEST(Replay, TheEndMaterializesWhatIsStillNamed) {
  // x1..x3 computed, then only x1 is still named, while everything else was evicted to make room for x3.
  const std::string text = R"({"ANNOTATION":"START","INSTRUCTION":"ANNOTATE"}
{"INSTRUCTION":"CONSTANT","NAME":"c"}
{"INSTRUCTION":"MEMORY","MEMORY":"100","NAME":"c"}
{"ARGS":["c"],"INSTRUCTION":"CALL","NAME":"f","RESULT":["x1"],"TIME":"10"}
{"INSTRUCTION":"MEMORY","MEMORY":"100","NAME":"x1"}
{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"x1"}
{"ARGS":["x1"],"INSTRUCTION":"CALL","NAME":"f","RESULT":["x2"],"TIME":"10"}
{"INSTRUCTION":"MEMORY","MEMORY":"100","NAME":"x2"}
{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"x2"}
{"ARGS":["x2"],"INSTRUCTION":"CALL","NAME":"f","RESULT":["x3"],"TIME":"10"}
{"INSTRUCTION":"MEMORY","MEMORY":"100","NAME":"x3"}
{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"x3"}
{"INSTRUCTION":"RELEASE","NAME":"x2"}
{"INSTRUCTION":"RELEASE","NAME":"x3"}
)";
  sim::ReplayOptions options;
  options.budget_bytes = 300;  // c, x2 and x3 at the third call: x1 goes
  options.heuristic = "lru";
  const sim::ReplayResult r = sim::replay(parse(text), options);
  ASSERT_TRUE(r.feasible) << r.failure;
  EXPECT_EQ(r.evictions, 1u);
  EXPECT_EQ(r.rematerializations, 1u);  // x1, at the end
  EXPECT_DOUBLE_EQ(r.remat_compute_ns, 10.0);
}

TEST(Replay, MutateIsCopyOnWriteAndAliasesShareStorage) {
  // y is a COPY of x; MUTATE rebinds x to a new storage of x's size; y keeps the old one. v aliases x's new
  // storage and adds no bytes.
  const std::string text = R"({"ANNOTATION":"START","INSTRUCTION":"ANNOTATE"}
{"INSTRUCTION":"CONSTANT","NAME":"c"}
{"INSTRUCTION":"MEMORY","MEMORY":"64","NAME":"c"}
{"ARGS":["c"],"INSTRUCTION":"CALL","NAME":"f","RESULT":["x"],"TIME":"10"}
{"INSTRUCTION":"MEMORY","MEMORY":"1000","NAME":"x"}
{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"x"}
{"DST":"y","INSTRUCTION":"COPY","SRC":"x"}
{"ARGS":["x","c"],"INSTRUCTION":"MUTATE","MUTATE":[0],"NAME":"add_","TIME":"20"}
{"ARGS":["x"],"INSTRUCTION":"CALL","NAME":"view","RESULT":["v"],"TIME":"1"}
{"INSTRUCTION":"MEMORY","MEMORY":"500","NAME":"v"}
{"ALIAS":"0","INSTRUCTION":"ALIAS","NAME":"v"}
)";
  const sim::Trace trace = parse(text);
  const sim::TraceSummary summary = sim::summarize(trace);
  EXPECT_EQ(summary.peak_bytes, 64u + 1000 + 1000);  // old x (held by y) and new x
  EXPECT_EQ(summary.base_compute_ns, 31.0);
  const sim::ReplayResult r = sim::replay(trace, {});
  EXPECT_EQ(r.peak_resident_bytes, 64u + 1000 + 1000);
  // Without y the old x dies with the mutation.
  std::string without_copy = text;
  without_copy.erase(without_copy.find(R"({"DST":"y")"), std::string(R"({"DST":"y","INSTRUCTION":"COPY","SRC":"x"})").size() + 1);
  const sim::Trace t2 = parse(without_copy);
  EXPECT_EQ(sim::summarize(t2).peak_bytes, 64u + 1000 + 1000);  // both exist while the mutation runs
  sim::ReplayOptions options;
  options.budget_bytes = 64 + 2000;
  EXPECT_TRUE(sim::replay(t2, options).feasible);
  options.budget_bytes = 64 + 1999;
  options.keep_constants = true;
  EXPECT_FALSE(sim::replay(t2, options).feasible);  // the mutation's input and output must coexist
}

// `steps` training steps as dtr-train logs them: a parameter W (a CONSTANT of `weight` bytes) is read by a
// forward op, a gradient op reads the activation, and the update's result is bound to W with COPY_FROM (the
// run's Runtime::assign).
std::string training_steps_trace(int steps, std::uint64_t weight, std::uint64_t activation) {
  std::ostringstream out;
  const auto memory = [&](const std::string& name, std::uint64_t bytes) {
    out << R"({"INSTRUCTION":"MEMORY","MEMORY":")" << bytes << R"(","NAME":")" << name << R"("})" << '\n';
  };
  const auto call = [&](const char* op, const std::string& args, const std::string& result, std::uint64_t bytes) {
    out << R"({"ARGS":[)" << args << R"(],"INSTRUCTION":"CALL","NAME":")" << op << R"(","RESULT":[")" << result
        << R"("],"TIME":"1000"})" << '\n';
    memory(result, bytes);
    out << R"({"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":")" << result << R"("})" << '\n';
  };
  out << R"({"ANNOTATION":"START","INSTRUCTION":"ANNOTATE"})" << '\n';
  out << R"({"INSTRUCTION":"CONSTANT","NAME":"W"})" << '\n';
  memory("W", weight);
  for (int k = 0; k < steps; ++k) {
    const std::string n = std::to_string(k);
    out << R"({"INSTRUCTION":"CONSTANT","NAME":"x)" << n << R"("})" << '\n';
    memory("x" + n, activation);
    call("f", R"("W","x)" + n + R"(")", "y" + n, activation);
    call("df", R"("y)" + n + R"(","x)" + n + R"(")", "g" + n, weight);
    call("sgd", R"("W","g)" + n + R"(")", "u" + n, weight);
    out << R"({"DST":"W","INSTRUCTION":"COPY_FROM","SRC":"u)" << n << R"("})" << '\n';
    for (const char* name : {"y", "g", "u", "x"}) {
      out << R"({"INSTRUCTION":"RELEASE","NAME":")" << name << n << R"("})" << '\n';
    }
  }
  return out.str();
}

// A parameter's new value bound by COPY_FROM replays as the run made it (Runtime::assign): a constant, so the
// old value and the step that made the new one are not kept for its recomputation. Replayed as a mere
// rebinding, every old value stayed (a constant read by the new value's producer): 20 steps held 20 weights.
TEST(Replay, AnUpdateBoundWithCopyFromReplaysAsTheRunsAssignment) {
  const std::uint64_t weight = 1000;
  const std::uint64_t activation = 4000;
  const sim::Trace trace = parse(training_steps_trace(20, weight, activation));
  const sim::TraceSummary summary = sim::summarize(trace);
  EXPECT_EQ(summary.peak_bytes, 3 * weight + 2 * activation);  // W, x, y, g and the update's result
  sim::ReplayOptions freed;  // each step's batch is a constant released with the step, as in dtr-train's logs
  freed.keep_constants = false;
  EXPECT_EQ(sim::replay(trace, freed).peak_resident_bytes, summary.peak_bytes);
  sim::ReplayOptions options = freed;
  options.budget_bytes = summary.peak_bytes;
  options.heuristic = "dtr-eq";
  const sim::ReplayResult r = sim::replay(trace, options);
  ASSERT_TRUE(r.feasible) << r.failure;
  EXPECT_EQ(r.rematerializations, 0u);

  // A name that a COPY shares keeps the plain rebinding: "w_old" still holds the first value, as the trace says;
  // Runtime::assign would have moved both names to the new value and freed the old one before z.
  const std::string text = R"({"ANNOTATION":"START","INSTRUCTION":"ANNOTATE"}
{"INSTRUCTION":"CONSTANT","NAME":"W"}
{"INSTRUCTION":"MEMORY","MEMORY":"1000","NAME":"W"}
{"DST":"w_old","INSTRUCTION":"COPY","SRC":"W"}
{"ARGS":["W"],"INSTRUCTION":"CALL","NAME":"sgd","RESULT":["u"],"TIME":"10"}
{"INSTRUCTION":"MEMORY","MEMORY":"1000","NAME":"u"}
{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"u"}
{"DST":"W","INSTRUCTION":"COPY_FROM","SRC":"u"}
{"INSTRUCTION":"RELEASE","NAME":"u"}
{"INSTRUCTION":"CONSTANT","NAME":"z"}
{"INSTRUCTION":"MEMORY","MEMORY":"5000","NAME":"z"}
)";
  const sim::Trace shared = parse(text);
  EXPECT_EQ(sim::summarize(shared).peak_bytes, 7000u);
  EXPECT_EQ(sim::replay(shared, freed).peak_resident_bytes, 7000u);

  // With constants kept (the default), the first value of W stays to the end though W is rebound to a value
  // that becomes a constant: 1000 (first W) + 1000 (its update) + 5000 (z). The kept copy once shared W's
  // handle, and the assignment moved it too: 6000.
  std::string unshared = text;
  unshared.erase(unshared.find(R"({"DST":"w_old")"),
                 std::string(R"({"DST":"w_old","INSTRUCTION":"COPY","SRC":"W"})").size() + 1);
  EXPECT_EQ(sim::replay(parse(unshared), sim::ReplayOptions{}).peak_resident_bytes, 7000u);
}

// The trace `program` writes (Config::trace_path) on a deterministic runtime.
sim::Trace trace_of(const std::string& name, const std::function<void(Runtime&)>& program) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("dtr-" + name + "-trace-" + std::to_string(::getpid()) + ".log");
  {
    Config config = deterministic_config();
    config.trace_path = path.string();
    Runtime rt(config);
    program(rt);
  }
  sim::Trace trace = sim::read_trace(path.string());
  std::filesystem::remove(path);
  return trace;
}

// A run that assigns a computed value (Runtime::assign(target, value)) writes a trace that replays: the
// COPY_FROM names the value's handle, which may not be its storage's first name (an updated parameter's).
TEST(Replay, ATraceOfAnAssignedValueNamesItsHandleAndReplays) {
  const sim::Trace trace = trace_of("assign", [](Runtime& rt) {
    Tensor p1 = constant(rt, {64}, 1.0f);
    Tensor p2 = constant(rt, {64}, 2.0f);
    rt.assign(p1, ops::add(), {p1, p1});  // p1's handle now holds the add's storage, named by the handle
    rt.assign(p2, p1);                    // the value's handle: p1, not the add's result (released)
    Tensor y = rt.call1(ops::relu(), {p2});
  });
  sim::ReplayOptions options;
  options.keep_constants = false;
  EXPECT_TRUE(sim::replay(trace, options).feasible);
}

// Runtime::make_constant is traced (MAKE_CONSTANT) and replayed: the value's lineage is cut in the replay as in
// the run, so the constant it was made from goes once released. Without the line, the replay keeps x for y's
// recomputation: 7010 bytes at h instead of 6010.
TEST(Replay, AValueMadeAConstantInTheRunIsOneInTheReplay) {
  const sim::Trace run = trace_of("make-constant", [](Runtime& rt) {
    Tensor x = constant(rt, {64}, 1.0f);
    Tensor y = rt.call1(ops::relu(), {x});
    rt.make_constant(y);
    rt.make_constant(y);  // already one: nothing more is traced
  });
  std::vector<std::string> made;
  std::string relu_result;
  for (const sim::Instruction& in : run.instructions) {
    if (in.kind == sim::Instruction::Kind::call) relu_result = run.names[in.results.at(0).name];
    if (in.kind == sim::Instruction::Kind::make_constant) made.push_back(run.names[in.name]);
  }
  EXPECT_EQ(made, std::vector<std::string>{relu_result});

  const std::string text = R"({"ANNOTATION":"START","INSTRUCTION":"ANNOTATE"}
{"INSTRUCTION":"CONSTANT","NAME":"x"}
{"INSTRUCTION":"MEMORY","MEMORY":"1000","NAME":"x"}
{"ARGS":["x"],"INSTRUCTION":"CALL","NAME":"f","RESULT":["y"],"TIME":"10"}
{"INSTRUCTION":"MEMORY","MEMORY":"1000","NAME":"y"}
{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"y"}
{"INSTRUCTION":"MAKE_CONSTANT","NAME":"y"}
{"INSTRUCTION":"RELEASE","NAME":"x"}
{"ARGS":["y"],"INSTRUCTION":"CALL","NAME":"g","RESULT":["z"],"TIME":"10"}
{"INSTRUCTION":"MEMORY","MEMORY":"5000","NAME":"z"}
{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"z"}
{"ARGS":["z"],"INSTRUCTION":"CALL","NAME":"h","RESULT":["w"],"TIME":"10"}
{"INSTRUCTION":"MEMORY","MEMORY":"10","NAME":"w"}
{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"w"}
)";
  sim::ReplayOptions freed;
  freed.keep_constants = false;
  const sim::Trace made_constant = parse(text);
  EXPECT_EQ(sim::replay(made_constant, freed).peak_resident_bytes, 6010u);
  // The floor counts y, resident and unevictable, beside h's own z and w.
  EXPECT_EQ(sim::summarize(made_constant).floor_bytes, 6010u);
  std::string without = text;
  const std::string line = R"({"INSTRUCTION":"MAKE_CONSTANT","NAME":"y"})";
  without.erase(without.find(line), line.size() + 1);
  EXPECT_EQ(sim::replay(parse(without), freed).peak_resident_bytes, 7010u);
  EXPECT_EQ(sim::summarize(parse(without)).floor_bytes, 6000u);  // y and z at g; w and z alone at h

  // Through a view (the run's reshaped gradients), the storage it views becomes the constant.
  std::string of_view = text;
  of_view.replace(of_view.find(line), line.size(), R"({"ARGS":["y"],"INSTRUCTION":"CALL","NAME":"view","RESULT":["v"],"TIME":"0"}
{"INSTRUCTION":"MEMORY","MEMORY":"1000","NAME":"v"}
{"ALIAS":"0","INSTRUCTION":"ALIAS","NAME":"v"}
{"INSTRUCTION":"MAKE_CONSTANT","NAME":"v"})");
  EXPECT_EQ(sim::replay(parse(of_view), freed).peak_resident_bytes, 6010u);
  EXPECT_EQ(sim::summarize(parse(of_view)).floor_bytes, 6010u);
}

// A value released after the last op that read it goes at its RELEASE, as in the run, not at the next op: a
// batch and the chain of dead values that needs it (x, then y = f(x) and z = g(y), both released) are gone
// before the next batch is made, so the replay peaks where the summary says and fits its own peak.
TEST(Replay, AReleaseFreesAtOnceNotAtTheNextOp) {
  const sim::Trace trace = parse(R"({"ANNOTATION":"START","INSTRUCTION":"ANNOTATE"}
{"INSTRUCTION":"CONSTANT","NAME":"x"}
{"INSTRUCTION":"MEMORY","MEMORY":"8000","NAME":"x"}
{"ARGS":["x"],"INSTRUCTION":"CALL","NAME":"f","RESULT":["y"],"TIME":"10"}
{"INSTRUCTION":"MEMORY","MEMORY":"100","NAME":"y"}
{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"y"}
{"ARGS":["y"],"INSTRUCTION":"CALL","NAME":"g","RESULT":["z"],"TIME":"10"}
{"INSTRUCTION":"MEMORY","MEMORY":"100","NAME":"z"}
{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"z"}
{"INSTRUCTION":"RELEASE","NAME":"y"}
{"INSTRUCTION":"RELEASE","NAME":"z"}
{"INSTRUCTION":"RELEASE","NAME":"x"}
{"INSTRUCTION":"CONSTANT","NAME":"x2"}
{"INSTRUCTION":"MEMORY","MEMORY":"8000","NAME":"x2"}
)");
  EXPECT_EQ(sim::summarize(trace).peak_bytes, 8200u);
  sim::ReplayOptions at_peak;
  at_peak.keep_constants = false;
  at_peak.budget_bytes = 8200;
  at_peak.budget_mode = BudgetMode::bytes;
  const sim::ReplayResult r = sim::replay(trace, at_peak);
  EXPECT_TRUE(r.feasible) << r.failure;
  EXPECT_EQ(r.peak_resident_bytes, 8200u);
}

TEST(Replay, NamesThatAreNotLiveAreTraceErrorsWithTheirLine) {
  const std::string text = R"({"ANNOTATION":"START","INSTRUCTION":"ANNOTATE"}
{"INSTRUCTION":"CONSTANT","NAME":"c"}
{"INSTRUCTION":"MEMORY","MEMORY":"64","NAME":"c"}
{"INSTRUCTION":"RELEASE","NAME":"c"}
{"INSTRUCTION":"RELEASE","NAME":"never-defined"}
{"ARGS":["c"],"INSTRUCTION":"CALL","NAME":"f","RESULT":["x"],"TIME":"10"}
{"INSTRUCTION":"MEMORY","MEMORY":"8","NAME":"x"}
{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"x"}
)";
  const sim::Trace trace = parse(text);
  for (int which = 0; which < 2; ++which) {
    try {
      if (which == 0) {
        sim::summarize(trace);
      } else {
        sim::replay(trace, {});
      }
      ADD_FAILURE() << "accepted a released name";
    } catch (const TraceError& e) {
      EXPECT_NE(std::string(e.what()).find("generated.log:6: 'c' is not live here"), std::string::npos) << e.what();
    }
  }
  sim::ReplayOptions bad;
  bad.thrash_limit = -1;
  EXPECT_THROW(sim::replay(trace, bad), InvalidArgument);
}

// A budget of 0 bytes (a ratio so small that ratio x peak rounds to 0) is a run that does not fit, in both
// modes: an infeasible result saying why, not an exception (the allocator refuses a 0-byte budget).
TEST(Replay, ZeroBudgetIsInfeasibleInBothModes) {
  const sim::Trace trace = parse(chain_trace(10, 4096));
  for (const BudgetMode mode : {BudgetMode::bytes, BudgetMode::device}) {
    SCOPED_TRACE(to_string(mode));
    sim::ReplayOptions options;
    options.budget_bytes = 0;
    options.budget_mode = mode;
    sim::ReplayResult r;
    ASSERT_NO_THROW(r = sim::replay(trace, options));
    EXPECT_FALSE(r.feasible);
    EXPECT_FALSE(r.thrashed);
    EXPECT_EQ(r.budget_bytes, 0u);
    EXPECT_EQ(r.evictions + r.rematerializations, 0u);
    EXPECT_NE(r.failure.find("the budget rounds to 0 bytes"), std::string::npos) << r.failure;
    options.heuristic = "fastest";  // the options are still checked
    EXPECT_THROW(sim::replay(trace, options), ConfigError);
  }
}

// ---- the DTR authors' logs ----

// The logs are not part of the repository: they are read from DTR_TRACES_DIR when set, else from
// ../shared/traces next to the checkout, and the tests that need them skip (saying so) when neither has them.
std::optional<std::string> shared_trace(const std::string& name) {
  const char* dir = std::getenv("DTR_TRACES_DIR");  // NOLINT(concurrency-mt-unsafe): read-only
  const std::string path = (dir != nullptr ? std::string(dir) : std::string(DTR_SOURCE_DIR "/../shared/traces")) + "/" + name;
  if (std::filesystem::exists(path)) return path;
  return std::nullopt;
}

struct Published {
  const char* heuristic;
  std::vector<double> overhead;  // ratios 0.1 .. 0.9; 0: OOM or thrash in theirs
};

// ../shared/traces/authors-results.md (their simulator, bytes budgets).
const std::map<std::string, std::vector<Published>> kPublished = {
    {"resnet32-56.log",
     {{"dtr", {0, 1.371, 1.178, 1.140, 1.107, 1.074, 1.046, 1.025, 1.013}},
      {"dtr-eq", {0, 1.332, 1.179, 1.140, 1.107, 1.074, 1.046, 1.025, 1.013}},
      {"dtr-local", {0, 0, 0, 0, 1.197, 1.133, 1.067, 1.041, 1.013}},
      {"lru", {0, 0, 0, 0, 0, 1.130, 1.095, 1.067, 1.032}},
      {"size", {0, 0, 0, 1.738, 1.452, 1.234, 1.092, 1.065, 1.030}},
      {"msps", {0, 1.431, 1.209, 1.146, 1.106, 1.063, 1.037, 1.024, 1.013}}}},
    {"unet-6.log",
     {{"dtr", {0, 0, 0, 0, 1.159, 1.131, 1.085, 1.058, 1.033}},
      {"dtr-eq", {0, 0, 0, 0, 1.159, 1.149, 1.085, 1.058, 1.033}},
      {"dtr-local", {0, 0, 0, 0, 1.847, 1.137, 1.091, 1.056, 1.028}},
      {"lru", {0, 0, 0, 0, 0, 1.225, 1.104, 1.062, 1.039}},
      {"size", {0, 0, 0, 0, 1.659, 1.592, 1.158, 1.128, 1.043}},
      {"msps", {0, 0, 1.585, 1.241, 1.132, 1.088, 1.049, 1.033, 1.016}}}},
};

TEST(ReplayAuthorsLogs, SummariesMatchTheAuthorsBaselines) {
  const std::map<std::string, std::array<double, 3>> expected = {
      {"resnet32-56.log", {10061179152.0, 291905487.0, 35584920.0}},
      {"unet-6.log", {8415764640.0, 435278292.0, 93386276.0}}};
  for (const auto& [name, values] : expected) {
    const auto path = shared_trace(name);
    if (!path) GTEST_SKIP() << name << " is neither in DTR_TRACES_DIR nor in ../shared/traces next to the checkout";
    const sim::TraceSummary s = sim::summarize(sim::read_trace(*path));
    EXPECT_EQ(static_cast<double>(s.peak_bytes), values[0]) << name;
    EXPECT_EQ(s.base_compute_ns, values[1]) << name;
    EXPECT_EQ(static_cast<double>(s.constant_bytes), values[2]) << name;
  }
}

// Issue 5's acceptance: wherever their simulator fits, ours fits, within 2% of their overhead.
TEST(ReplayAuthorsLogs, FeasibleWhereTheirsIsAndWithinTwoPercent) {
  for (const auto& [name, rows] : kPublished) {
    const auto path = shared_trace(name);
    if (!path) GTEST_SKIP() << name << " is neither in DTR_TRACES_DIR nor in ../shared/traces next to the checkout";
    const sim::Trace trace = sim::read_trace(*path);
    const sim::TraceSummary summary = sim::summarize(trace);
    for (const Published& row : rows) {
      for (std::size_t i = 0; i < row.overhead.size(); ++i) {
        if (row.overhead[i] == 0) continue;
        const double ratio = 0.1 * static_cast<double>(i + 1);
        sim::ReplayOptions options;
        options.heuristic = row.heuristic;
        options.budget_bytes = static_cast<std::uint64_t>(ratio * static_cast<double>(summary.peak_bytes));
        const sim::ReplayResult r = sim::replay(trace, options);
        SCOPED_TRACE(::testing::Message() << name << ", " << row.heuristic << ", ratio " << ratio);
        ASSERT_TRUE(r.feasible) << r.failure;
        ASSERT_FALSE(r.thrashed);
        EXPECT_LE(std::abs(r.overhead() / row.overhead[i] - 1.0), 0.02) << "ours " << r.overhead();
      }
    }
  }
}

}  // namespace
}  // namespace dtr::test
