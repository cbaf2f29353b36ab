// The dtr-train program, run as a user runs it: a training run's JSON, --compare's table, CSV and plot, a
// resumed run continuing the same losses, --trace replayed by dtr-sim, --max-batch, and clear errors.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "../child_process.h"

namespace dtr::test {
namespace {

namespace fs = std::filesystem;

// Small and quick: an MLP on synthetic data.
const std::string kSmall = " --data synthetic --model mlp --depth 4 --width 32 --batch 32";

Outcome train(const std::string& arguments) { return run_command(std::string(DTR_TRAIN_PATH) + " " + arguments); }

int exit_code(const Outcome& r) { return WIFEXITED(r.status) ? WEXITSTATUS(r.status) : -1; }

nlohmann::json last_json_line(const std::string& output) {
  std::istringstream lines(output);
  std::string line;
  std::string last;
  while (std::getline(lines, line)) {
    if (!line.empty() && line.front() == '{') last = line;
  }
  return nlohmann::json::parse(last);
}

class DtrTrainCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dtr-train-cli-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST_F(DtrTrainCli, ATrainingRunReportsItsLossesAccuracyAndMemory) {
  const Outcome r = train(kSmall + " --steps 5 --json");
  ASSERT_EQ(exit_code(r), 0) << r.output;
  const nlohmann::json j = last_json_line(r.output);
  EXPECT_EQ(j["losses"].size(), 5U);
  EXPECT_EQ(j["steps_done"], 5);
  ASSERT_EQ(j["test_accuracy"].size(), 1U);  // at the end of a --steps run
  EXPECT_GE(j["test_accuracy"][0]["accuracy"].get<double>(), 0.0);
  EXPECT_GT(j["peak_reserved_bytes"].get<std::uint64_t>(), 0U);
  // Without --json, on a pipe: plain log lines, then the accuracy and the summary.
  const Outcome plain = train(kSmall + " --steps 5");
  ASSERT_EQ(exit_code(plain), 0) << plain.output;
  EXPECT_NE(plain.output.find("train: step 5/5"), std::string::npos) << plain.output;
  EXPECT_EQ(plain.output.find('\r'), std::string::npos) << "no progress bar redrawn in place on a pipe";
  EXPECT_NE(plain.output.find("test accuracy"), std::string::npos) << plain.output;
  EXPECT_NE(plain.output.find("peak reserved"), std::string::npos) << plain.output;
}

TEST_F(DtrTrainCli, ARunResumedFromSaveContinuesTheSameLosses) {
  const Outcome straight = train(kSmall + " --steps 6 --json");
  ASSERT_EQ(exit_code(straight), 0) << straight.output;
  const Outcome first = train(kSmall + " --steps 3 --json --save " + path("state.dtr"));
  ASSERT_EQ(exit_code(first), 0) << first.output;
  const Outcome second = train(kSmall + " --steps 3 --json --load " + path("state.dtr"));
  ASSERT_EQ(exit_code(second), 0) << second.output;
  const nlohmann::json all = last_json_line(straight.output)["losses"];
  nlohmann::json resumed = last_json_line(first.output)["losses"];
  const nlohmann::json rest = last_json_line(second.output);
  for (const auto& l : rest["losses"]) resumed.push_back(l);
  EXPECT_EQ(resumed.size(), 6U);
  EXPECT_EQ(resumed, all);  // floats printed exactly: equal text, equal bits
  EXPECT_EQ(rest["steps_done"], 6);
}

TEST_F(DtrTrainCli, CompareWritesOneTableWithEqualLossesACsvAndAPlot) {
  const bool plot = program_installed("gnuplot");  // without it, the table, CSV and JSON are still checked
  const Outcome r = train(kSmall + " --compare --steps 3 --csv " + path("rows.csv") +
                          (plot ? " --plot " + path("plot.svg") : std::string()));
  ASSERT_EQ(exit_code(r), 0) << r.output;
  for (const char* row : {"| unbudgeted |", "| static, sqrt(N) segments |", "| DTR at static's peak |", "| DTR at 50% |",
                          "| DTR at 30% |", "| DTR (dtr-eq) at static's peak |", "| DTR (dtr-eq) at 50% |",
                          "| DTR (dtr-eq) at 30% |", "Losses: bitwise equal in every completed row"}) {
    EXPECT_NE(r.output.find(row), std::string::npos) << row << "\n" << r.output;
  }
  std::ifstream csv(path("rows.csv"));
  std::string header;
  std::getline(csv, header);
  EXPECT_EQ(header.rfind("strategy,budget_bytes,completed,", 0), 0U) << header;
  int rows = 0;
  for (std::string line; std::getline(csv, line);) rows += 1;
  EXPECT_EQ(rows, 8);  // the DTR rows again under --compare-heuristics' default, forecast
  if (plot) {
    std::ifstream svg(path("plot.svg"));
    const std::string image((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
    EXPECT_NE(image.find("<svg"), std::string::npos);
    EXPECT_NE(image.find("static checkpointing"), std::string::npos);
  }
  const Outcome j = train(kSmall + " --compare --steps 2 --json --compare-heuristics none");
  ASSERT_EQ(exit_code(j), 0) << j.output;
  const nlohmann::json out = last_json_line(j.output);
  EXPECT_TRUE(out["losses_bitwise_equal"].get<bool>());
  EXPECT_EQ(out["rows"].size(), 5U);
  // Paired rounds: each row's steps then the rounds' (the step times), the losses compared over all of them.
  const Outcome paired = train(kSmall + " --compare --steps 2 --rounds 3 --json --compare-heuristics none");
  ASSERT_EQ(exit_code(paired), 0) << paired.output;
  const nlohmann::json rounds = last_json_line(paired.output);
  EXPECT_TRUE(rounds["losses_bitwise_equal"].get<bool>());
  int forecast_rows = 0;
  for (const nlohmann::json& row : rounds["rows"]) {
    EXPECT_EQ(row["losses"].size(), 5U) << row.dump();
    EXPECT_EQ(row["paired_step_seconds"].size(), 3U) << row.dump();
    // The DTR rows (forecast, under a budget) make their later steps' values with forecasts; the rows without
    // a budget keep none.
    const bool budgeted = !row["budget_bytes"].is_null();
    if (row["completed"].get<bool>()) {
      EXPECT_EQ(row["forecast_hits"].get<std::uint64_t>() > 0, budgeted) << row.dump();
    }
    forecast_rows += budgeted && row["forecast_hits"].get<std::uint64_t>() > 0 ? 1 : 0;
  }
  EXPECT_GE(forecast_rows, 2) << paired.output;
  const Outcome shown = train(kSmall + " --compare --steps 2 --rounds 2 --compare-heuristics none");
  ASSERT_EQ(exit_code(shown), 0) << shown.output;
  EXPECT_NE(shown.output.find("2 steps per row, then 2 in turns (the step times)"), std::string::npos) << shown.output;
  EXPECT_NE(shown.output.find("paired rounds (one step of each row in turn): 2/2"), std::string::npos) << shown.output;
  // Each row says where its recomputation went: per op, runs adding up to the row's rematerializations (costs
  // counted, not timed, so that the same rows recompute on a slow machine). A wider MLP: the small one's budgets
  // are mostly its parameters (its row at 30% of the peak may run out of memory before it evicts anything).
  // Budgets of bytes: under device budgets a few MiB are a few 2 MiB segments, and its 50% row may not fit.
  const std::string counted = "DTR_COST_MODEL=flops " + std::string(DTR_TRAIN_PATH) +
                              " --data synthetic --model mlp --depth 8 --width 256 --batch 64 --compare --steps 2";
  const Outcome profiled = run_command("DTR_BUDGET_MODE=bytes " + counted + " --json --compare-heuristics none");
  ASSERT_EQ(exit_code(profiled), 0) << profiled.output;
  bool any = false;
  const nlohmann::json profile = last_json_line(profiled.output);
  for (const nlohmann::json& row : profile["rows"]) {
    std::uint64_t runs = 0;
    for (const nlohmann::json& op : row["recomputed_by_op"]) runs += op["runs"].get<std::uint64_t>();
    EXPECT_EQ(runs, row["rematerializations"].get<std::uint64_t>()) << row.dump();
    EXPECT_TRUE(row["relocations"].is_number_unsigned()) << row.dump();
    any = any || runs > 0;
  }
  EXPECT_TRUE(any) << "no row recomputed anything: the check above tests nothing\n" << profiled.output;
  const Outcome listed = run_command("DTR_BUDGET_MODE=bytes " + counted + " --compare-heuristics none");
  ASSERT_EQ(exit_code(listed), 0) << listed.output;
  EXPECT_NE(listed.output.find("What DTR recomputed most"), std::string::npos) << listed.output;
  EXPECT_NE(listed.output.find("- DTR at 50%: linear "), std::string::npos) << listed.output;
  // Over expandable segments the header says so, and every row's losses are still the unbudgeted row's bits.
  const Outcome paged = run_command("DTR_EXPANDABLE_SEGMENTS=1 " + counted + " --compare-heuristics none");
  ASSERT_EQ(exit_code(paged), 0) << paged.output;
  EXPECT_NE(paged.output.find("budgets in device mode (expandable segments)"), std::string::npos) << paged.output;
  EXPECT_NE(paged.output.find("Losses: bitwise equal in every completed row"), std::string::npos) << paged.output;
  // Two more heuristics: their DTR rows follow, the runtime's own (forecast) is not repeated.
  const Outcome more = train(kSmall + " --compare --steps 2 --json --compare-heuristics lru,forecast,dtr");
  ASSERT_EQ(exit_code(more), 0) << more.output;
  const nlohmann::json rows9 = last_json_line(more.output)["rows"];
  ASSERT_EQ(rows9.size(), 11U) << more.output;
  EXPECT_EQ(rows9[5]["strategy"], "DTR (lru) at static's peak");
  EXPECT_EQ(rows9[10]["strategy"], "DTR (dtr) at 30%");
}

// A row whose budget is too small stops: the table names why in a word, the whole error follows the table,
// and the other rows' losses are still compared.
TEST_F(DtrTrainCli, CompareReportsARowThatStoppedAndWhy) {
  // An MLP at batch 64 is mostly parameters: 30% of its peak cannot hold them. Costs counted, not timed: with
  // measured costs a slow run (ASan, a busy machine) may choose other victims and stop on thrashing instead.
  const Outcome r = run_command("DTR_COST_MODEL=flops " + std::string(DTR_TRAIN_PATH) +
                                " --data synthetic --model mlp --batch 64 --compare --steps 2");
  ASSERT_EQ(exit_code(r), 0) << r.output;
  EXPECT_NE(r.output.find("| DTR at 30% |"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("stopped after 0 steps: out of memory |"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("DTR at 30% stopped: out of memory: dtr: out of memory running op '"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("Losses: bitwise equal in every completed row"), std::string::npos) << r.output;
}

TEST_F(DtrTrainCli, TheTraceReplaysInDtrSim) {
  const Outcome r = train(kSmall + " --steps 2 --trace " + path("run.log"));
  ASSERT_EQ(exit_code(r), 0) << r.output;
  // Each step's batch and gradients are new constants, freed when released, as the run freed them; a new
  // parameter value becomes a constant as the run made it (Runtime::assign), so the replay fits in the
  // summarized peak and recomputes nothing there.
  const Outcome sim = run_command(std::string(DTR_SIM_PATH) + " " + path("run.log") + " --constants freed --ratio 1 --json");
  ASSERT_EQ(WEXITSTATUS(sim.status), 0) << sim.output;
  EXPECT_NE(sim.output.find("\"feasible\":true"), std::string::npos) << sim.output;
  EXPECT_NE(sim.output.find("\"rematerializations\":0,"), std::string::npos) << sim.output;
  const Outcome kept = run_command(std::string(DTR_SIM_PATH) + " " + path("run.log") + " --constants kept --ratio 1 --json");
  EXPECT_NE(kept.output.find("\"feasible\":false"), std::string::npos) << "every step's constants pinned: "
                                                                         << kept.output;
}

TEST_F(DtrTrainCli, MaxBatchFindsALargerBatchForDtr) {
  // A small ResNet (activations outweigh parameters), budgets on resident bytes (small models are a segment or
  // two of the caching allocator: too coarse a unit for device budgets). Every DTR_* variable works.
  const Outcome r = run_command("DTR_BUDGET_MODE=bytes " + std::string(DTR_TRAIN_PATH) +
                                " --data synthetic --model resnet --depth 8 --width 4 --batch 16 --max-batch --json");
  ASSERT_EQ(exit_code(r), 0) << r.output;
  const nlohmann::json j = last_json_line(r.output);
  ASSERT_EQ(j["strategies"].size(), 3U);
  EXPECT_GE(j["strategies"][0]["batch"].get<int>(), 16);
  EXPECT_GT(j["strategies"][2]["batch"].get<int>(), j["strategies"][0]["batch"].get<int>());
}

TEST_F(DtrTrainCli, BadInputIsAClearErrorNamingIt) {
  const auto refused = [](const std::string& arguments, int code, std::initializer_list<std::string_view> parts) {
    const Outcome r = train(arguments);
    EXPECT_EQ(exit_code(r), code) << arguments << "\n" << r.output;
    for (const std::string_view part : parts) EXPECT_NE(r.output.find(part), std::string::npos) << r.output;
  };
  refused(" --data synthetic --model vgg --steps 1", 1, {"--model 'vgg'", "resnet, "});
  refused(kSmall + " --checkpoint static:x --steps 1", 2, {"--checkpoint", "static:SEGMENTS"});
  refused(kSmall + " --budget '8 gigs' --steps 1", 1, {"--budget", "8 gigs"});
  refused(kSmall + " --heuristic best --steps 1", 1, {"--heuristic", "dtr-eq"});
  refused(kSmall + " --compare --steps 1 --compare-heuristics forecast,best", 1,
          {"--compare-heuristics=\"best\"", "dtr-eq"});
  refused(kSmall + " --compare --steps 1 --compare-heuristics forecast,", 1, {"--compare-heuristics=\"\""});
  refused(" --data-dir /nonexistent/fm --steps 1", 1, {"/nonexistent/fm/train-images-idx3-ubyte.gz",
                                                       "apt install dataset-fashion-mnist"});
  refused(kSmall + " --budget 1KiB --steps 1", 1, {"out of memory", "budget"});
  refused(kSmall + " --steps 1 --load /nonexistent/state.dtr", 1, {"/nonexistent/state.dtr"});
  refused(kSmall + " --compare --save x.dtr", 2, {"--save/--load"});
  refused(kSmall + " --steps 1 --epochs 1", 108, {"excludes"});
  refused(kSmall + " --data imagenet", 105, {"--data"});
  refused(kSmall + " --steps 1 --rounds 2", 107, {"--rounds", "--compare"});
  refused(kSmall + " --compare --steps 1 --rounds -1", 105, {"--rounds"});
  // Refused before a step runs, not written as an SVG under a PDF's name after minutes of training.
  refused(kSmall + " --compare --steps 1 --plot rows.pdf", 105, {"--plot", "rows.pdf", ".svg", ".png"});
}

}  // namespace
}  // namespace dtr::test
