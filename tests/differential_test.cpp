// The differential fuzzer (fuzz/differential): its programs, their text form, the minimizer, and a bounded
// campaign of random programs under random budgets, heuristics and modes against the unbudgeted run.
#include <gtest/gtest.h>

#include <set>

#include "differential.h"
#include "dtr/error.h"

namespace dtr::differential {
namespace {

TEST(DifferentialProgram, TheSameSeedIsTheSameProgramAndTheTextReadsBack) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    const Program program = generate(seed);
    EXPECT_EQ(to_text(generate(seed)), to_text(program));
    const Program back = parse_program(to_text(program), "program.txt");
    EXPECT_EQ(back.seed, program.seed);
    EXPECT_EQ(back.optimizer, program.optimizer);
    EXPECT_EQ(back.instructions, program.instructions);
  }
  EXPECT_NE(to_text(generate(1)), to_text(generate(2)));
}

// A seed printed by one build must reproduce the same program in any other: the gcc build (release CI) and
// the clang build (sanitizer CI) both check the first lines of seed 7. The generator once drew a leaf's two
// dimensions as two arguments of one call, which gcc evaluates right to left and clang left to right: the
// same seed gave another program under clang (found when the sanitizer build moved to clang).
TEST(DifferentialProgram, ASeedIsTheSameProgramWhateverTheCompiler) {
  const std::string text = to_text(generate(7));
  const std::string expected =
      "# dtr differential program (fuzz/differential/program.h)\n"
      "seed 7\n"
      "optimizer adam\n"
      "v0 = parameter 15 3\n"
      "v1 = parameter 14 7\n"
      "v2 = parameter 2 13\n"
      "v3 = input 2 7\n"
      "v4 = input 15 5\n"
      "read v3\n"
      "v5 = tanh v2\n"
      "v6 = dropout v3\n"
      "v7 = transpose v6\n"
      "v8 = add v1 v1\n"
      "v9 = input 3 11\n"
      "v10 = matmul v0 v9\n";
  EXPECT_EQ(text.substr(0, expected.size()), expected);
}

TEST(DifferentialProgram, ProgramsUseEveryInstructionAndReachBackwardAndTheOptimizer) {
  std::set<OpKind> seen;
  int with_losses = 0;
  int with_optimizer_state = 0;
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    const Program program = generate(seed);
    EXPECT_GE(program.instructions.size(), 200u);  // a backward pass may add the op it differentiates and a step
    EXPECT_LE(program.instructions.size(), 203u);
    for (const Instruction& in : program.instructions) seen.insert(in.kind);
    const Observation oracle = run(program, RunConfig{});
    ASSERT_TRUE(oracle.error.empty()) << oracle.error;
    ASSERT_TRUE(oracle.feasible);
    EXPECT_EQ(oracle.allocated_at_end, 0u);
    bool loss = false;
    bool state = false;
    for (const auto& [name, bits] : oracle.values) {
      loss = loss || name.starts_with("loss");
      state = state || name.starts_with("optimizer");
    }
    with_losses += loss ? 1 : 0;
    with_optimizer_state += state ? 1 : 0;
  }
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(OpKind::step) + 1) << "some instruction is never generated";
  EXPECT_GE(with_losses, 8);
  EXPECT_GE(with_optimizer_state, 6);  // a step before any backward pass builds the optimizer over fewer parameters
}

TEST(DifferentialProgram, AnyBytesDecodeToAProgramThatRuns) {
  const std::vector<std::uint8_t> none;
  EXPECT_GE(decode(none).instructions.size(), 5u);  // the leaves it starts with
  std::vector<std::uint8_t> bytes(600);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>(i * 131 + 7);
  const Program program = decode(bytes);
  EXPECT_GT(program.instructions.size(), 50u);
  const Observation oracle = run(program, RunConfig{});
  EXPECT_TRUE(oracle.error.empty()) << oracle.error;
}

TEST(DifferentialProgram, MalformedTextNamesTheSourceAndLine) {
  const auto message = [](const std::string& text) {
    try {
      (void)parse_program(text, "repro.txt");
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };

  EXPECT_NE(message("seed 1\nv0 = parameter 2 3\nv1 = frobnicate v0\n").find("repro.txt:3: unknown instruction 'frobnicate'"),
            std::string::npos);
  EXPECT_NE(message("v0 = relu x1\n").find("repro.txt:1: expected a value such as v3, got 'x1'"), std::string::npos);
  EXPECT_NE(message("v0 = add v1\n").find("repro.txt:1: add takes 2 value(s) and 0 size(s)"), std::string::npos);
  EXPECT_NE(message("read v1 v2\n").find("repro.txt:1: read takes 1 value(s)"), std::string::npos);
  EXPECT_NE(message("v0 = split v1 2\n").find("repro.txt:1: split makes 2 value(s), the line names 1"),
            std::string::npos);
  EXPECT_NE(message("optimizer lbfgs\n").find("repro.txt:1: the optimizer is sgd or adam"), std::string::npos);
  EXPECT_NE(message("v0 = input 99999 1\n").find("expected a size in [0, 4096]"), std::string::npos);
  EXPECT_NE(message("seed -3\n").find("repro.txt:1: the seed must be an unsigned integer"), std::string::npos);
}

TEST(DifferentialMinimize, ShrinksAProgramToTheInstructionsTheFailureNeeds) {
  // The "failure": the optimizer has state at the end. It needs a parameter, a value computed from it, a
  // backward pass and a step: a handful of the 200 instructions.
  const auto fails = [](const Program& program) {
    for (const auto& [name, bits] : run(program, RunConfig{}).values) {
      if (name.starts_with("optimizer")) return true;
    }
    return false;
  };
  int shrunk = 0;
  for (std::uint64_t seed = 1; shrunk < 3 && seed <= 20; ++seed) {
    const Program program = generate(seed);
    if (!fails(program)) continue;  // a program whose steps all come before its backward passes
    ++shrunk;
    const Program small = minimize(program, fails);
    EXPECT_TRUE(fails(small));
    EXPECT_LE(small.instructions.size(), 4u) << to_text(small);  // parameter, backward, step (+ one op at most)
  }
  EXPECT_EQ(shrunk, 3);
}

TEST(DifferentialCampaign, RandomProgramsUnderRandomBudgetsReadTheUnbudgetedBits) {
  CampaignOptions options;
  options.programs = 150;
  options.configs = 8;
  const CampaignReport report = run_campaign(options);
  ASSERT_FALSE(report.failure) << reproducer_text(report);
  EXPECT_EQ(report.runs, 1200);
  // The campaign proves something only if runs fit their budgets by evicting and recomputing.
  EXPECT_GE(report.runs_with_evictions, 600);
  EXPECT_GT(report.rematerializations, 10000u);
  EXPECT_LT(report.feasible_runs, report.runs) << "no budget too small: the budgets never reach the floor";
  std::printf("%d programs, %d runs, %d feasible, %d evicted (%llu evictions, %llu rematerializations)\n",
              report.programs, report.runs, report.feasible_runs, report.runs_with_evictions,
              static_cast<unsigned long long>(report.evictions),
              static_cast<unsigned long long>(report.rematerializations));
}

}  // namespace
}  // namespace dtr::differential
