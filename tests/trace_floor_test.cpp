// The floor of a trace (sim::TraceSummary::floor_bytes): the most one op needs at once, its inputs and outputs
// beside the constants resident then. A lower bound on every schedule: no heuristic fits below it.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "dtr/sim.h"
#include "dtr/trace_generator.h"

namespace dtr::test {
namespace {

sim::Trace parse(const std::string& text) {
  std::istringstream in(text);
  return sim::parse_trace(in, "floor.log");
}

// By op (constants resident beside it: released ones / all so far):
//   f(c) -> a:     a 2000 + c 1000 = 3000
//   g(a) -> b:     a + b 5000 + c = 6000
//   h(b, c) -> d:  b + d 3500 + c = 4500 (c counted once)
//   k(d, w) -> e:  d + e 600 + w 8000 = 8600 (c released), or + c = 9600
//   u(e) mutates e: old and new e 200 + w = 8200, or 9200
constexpr const char* kTrace = R"({"ANNOTATION":"START","INSTRUCTION":"ANNOTATE"}
{"INSTRUCTION":"CONSTANT","NAME":"c"}
{"INSTRUCTION":"MEMORY","MEMORY":"1000","NAME":"c"}
{"ARGS":["c"],"INSTRUCTION":"CALL","NAME":"f","RESULT":["a"],"TIME":"1"}
{"INSTRUCTION":"MEMORY","MEMORY":"2000","NAME":"a"}
{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"a"}
{"ARGS":["a"],"INSTRUCTION":"CALL","NAME":"g","RESULT":["b"],"TIME":"1"}
{"INSTRUCTION":"MEMORY","MEMORY":"3000","NAME":"b"}
{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"b"}
{"INSTRUCTION":"RELEASE","NAME":"a"}
{"ARGS":["b","c"],"INSTRUCTION":"CALL","NAME":"h","RESULT":["d"],"TIME":"1"}
{"INSTRUCTION":"MEMORY","MEMORY":"500","NAME":"d"}
{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"d"}
{"INSTRUCTION":"RELEASE","NAME":"c"}
{"INSTRUCTION":"RELEASE","NAME":"b"}
{"INSTRUCTION":"CONSTANT","NAME":"w"}
{"INSTRUCTION":"MEMORY","MEMORY":"8000","NAME":"w"}
{"ARGS":["d","w"],"INSTRUCTION":"CALL","NAME":"k","RESULT":["e"],"TIME":"1"}
{"INSTRUCTION":"MEMORY","MEMORY":"100","NAME":"e"}
{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"e"}
{"INSTRUCTION":"RELEASE","NAME":"d"}
{"ARGS":["e"],"INSTRUCTION":"MUTATE","MUTATE":[0],"NAME":"u","TIME":"1"}
)";

TEST(TraceFloor, TheMostOneOpNeedsBesideTheConstantsResidentThen) {
  const sim::TraceSummary summary = sim::summarize(parse(kTrace));
  EXPECT_EQ(summary.floor_bytes, 8600u);
  EXPECT_EQ(summary.floor_bytes_constants_kept, 9600u);
  EXPECT_EQ(summary.peak_bytes, 8600u);  // here the floor is the peak: k runs with everything else released
}

// No heuristic completes a random program below the floor (out of memory, or stopped by the thrash limit),
// constants freed as the trace releases them or kept, under bytes budgets; at twice the floor some do.
TEST(TraceFloor, NoHeuristicFitsBelowIt) {
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    const sim::Trace trace = sim::generate_dag({.forward_ops = 120, .seed = seed});
    const sim::TraceSummary summary = sim::summarize(trace);
    ASSERT_GT(summary.floor_bytes, 0u);
    EXPECT_LE(summary.floor_bytes, summary.peak_bytes);
    EXPECT_LE(summary.floor_bytes, summary.floor_bytes_constants_kept);
    for (const bool kept : {false, true}) {
      const std::uint64_t floor = kept ? summary.floor_bytes_constants_kept : summary.floor_bytes;
      int completed_at_twice = 0;  // the bound is not vacuous: some heuristic completes at twice the floor
      for (const char* heuristic : {"dtr-eq", "dtr", "forecast", "lru", "size"}) {
        SCOPED_TRACE(::testing::Message() << "seed " << seed << ", " << heuristic << (kept ? ", kept" : ", freed"));
        sim::ReplayOptions options;
        options.heuristic = heuristic;
        options.keep_constants = kept;
        options.thrash_limit = 20.0;  // a replay it stops did not complete either
        options.budget_bytes = floor - 1;
        const sim::ReplayResult r = sim::replay(trace, options);
        EXPECT_FALSE(r.feasible && !r.thrashed) << "completed within " << floor - 1 << " bytes";
        options.budget_bytes = 2 * floor;
        const sim::ReplayResult twice = sim::replay(trace, options);
        completed_at_twice += twice.feasible && !twice.thrashed ? 1 : 0;
      }
      EXPECT_GT(completed_at_twice, 0) << "seed " << seed << (kept ? ", kept" : ", freed");
    }
  }
}

}  // namespace
}  // namespace dtr::test
