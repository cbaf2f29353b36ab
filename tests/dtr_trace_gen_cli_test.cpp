// The dtr-trace-gen program, run as a user runs it: its traces replay through dtr-sim, its help lists the kinds,
// and bad input is a clear error.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "test_helpers.h"

namespace dtr::test {
namespace {

namespace fs = std::filesystem;

Outcome generate(const std::string& arguments) {
  return run_command(std::string(DTR_TRACE_GEN_PATH) + " " + arguments);
}

class DtrTraceGenCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("dtr-trace-gen-cli-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

std::string contents(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST_F(DtrTraceGenCli, EveryKindReplaysThroughDtrSim) {
  for (const std::string kind : {"chain --layers 20", "resnet --blocks-per-stage 1", "rnn --steps 8",
                                 "gan --unroll 2 --discriminator-layers 2", "dag --forward-ops 200"}) {
    SCOPED_TRACE(kind);
    const std::string trace = path("trace.log");
    const Outcome made = generate(kind + " --seed 3 -o " + trace);
    ASSERT_EQ(made.status, 0) << made.output;
    EXPECT_NE(made.output.find(" ops; unbudgeted peak "), std::string::npos) << made.output;
    const sim::Trace read = sim::read_trace(trace);
    const Outcome replayed =
        run_command(std::string(DTR_SIM_PATH) + " " + trace + " --ratio 0.5 --heuristic dtr-eq --json");
    ASSERT_EQ(replayed.status, 0) << replayed.output;
    const auto row = nlohmann::json::parse(replayed.output);
    EXPECT_EQ(row["budget_bytes"].get<std::uint64_t>(), sim::summarize(read).peak_bytes / 2);
    if (row["feasible"].get<bool>() && !row["thrashed"].get<bool>()) {
      EXPECT_EQ(row["base_compute_ns"].get<double>(), sim::summarize(read).base_compute_ns);
      EXPECT_LE(row["peak_bytes"].get<std::uint64_t>(), row["budget_bytes"].get<std::uint64_t>());
    }
  }
}

TEST_F(DtrTraceGenCli, SameSeedSameFileAndOpsSetsTheSize) {
  ASSERT_EQ(generate("dag --forward-ops 100 --seed 5 -o " + path("a.log")).status, 0);
  ASSERT_EQ(generate("dag --forward-ops 100 --seed 5 -o " + path("b.log")).status, 0);
  ASSERT_EQ(generate("dag --forward-ops 100 --seed 6 -o " + path("c.log")).status, 0);
  EXPECT_EQ(contents(path("a.log")), contents(path("b.log")));
  EXPECT_NE(contents(path("a.log")), contents(path("c.log")));

  ASSERT_EQ(generate("rnn --ops 3000 -o " + path("rnn.log")).status, 0);
  const double calls = static_cast<double>(sim::read_trace(path("rnn.log")).calls);
  EXPECT_NEAR(calls, 3000, 300);

  const Outcome to_stdout = generate("chain --layers 2 -o -");
  ASSERT_EQ(to_stdout.status, 0) << to_stdout.output;
  std::istringstream in(to_stdout.output);
  EXPECT_EQ(sim::parse_trace(in, "stdout").calls, 3U * 2 + 3);
}

TEST_F(DtrTraceGenCli, HelpListsTheKindsAndTheirOptions) {
  const Outcome help = generate("--help");
  EXPECT_EQ(help.status, 0);
  for (const char* expected : {"chain", "resnet", "rnn", "gan", "dag", "--layers", "--blocks-per-stage", "--steps",
                               "--unroll", "--forward-ops", "--ops", "--seed", "--output"}) {
    EXPECT_NE(help.output.find(expected), std::string::npos) << expected << " missing from\n" << help.output;
  }
  const Outcome gan_help = generate("gan --help");
  EXPECT_NE(gan_help.output.find("--discriminator-layers UINT=8"), std::string::npos) << gan_help.output;
}

TEST_F(DtrTraceGenCli, BadInputIsAClearErrorNamingItAndTheAcceptedForms) {
  struct Case {
    std::string arguments;
    std::string expected;
  };
  const std::string out = " -o " + path("x.log");
  for (const Case& c : std::vector<Case>{
           {"lstm" + out, "unknown kind 'lstm'; expected chain, resnet, rnn, gan or dag"},
           {"", "A subcommand is required"},
           {"chain --layers 0" + out, "chain: layers = 0 is out of range; expected 1 to 1000000"},
           {"chain --layers ten" + out, "--layers = ten: expected a whole number"},
           {"rnn --steps -3" + out, "--steps = -3: expected a whole number"},
           {"gan --ops 0" + out, "--ops: Value 0 not in range"},
           {"gan --ops 100 --unroll 3" + out, "excludes"},
           {"dag --max-inputs 5" + out, "dag: max_inputs = 5 is out of range; expected 1 to 3"},
           {"chain", "--output is required"},
           {"chain -o " + path("missing-dir/x.log"),
            "missing-dir/x.log: cannot open the trace for writing: No such file"},
       }) {
    SCOPED_TRACE(c.arguments);
    const Outcome r = generate(c.arguments);
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.output.find(c.expected), std::string::npos) << r.output;
  }
  EXPECT_FALSE(fs::exists(path("x.log")));
}

}  // namespace
}  // namespace dtr::test
