// The dtr-sim program, run as a user runs it: JSON keys, CSV rows, the plot, and clear errors.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "child_process.h"

namespace dtr::test {
namespace {

namespace fs = std::filesystem;

Outcome run(const std::string& arguments) { return run_command(std::string(DTR_SIM_PATH) + " " + arguments); }

// A chain of `steps` calls over values of `bytes` each, then, if `backward`, its backward pass, which
// releases what it has used.
void write_chain(const fs::path& file, std::size_t bytes, int steps, bool backward) {
  std::ofstream out(file);
  const std::string memory = R"(","INSTRUCTION":"MEMORY","MEMORY":")" + std::to_string(bytes);
  out << R"({"ANNOTATION":"START","INSTRUCTION":"ANNOTATE"})" << '\n'
      << R"({"INSTRUCTION":"CONSTANT","NAME":"x0"})" << '\n'
      << R"({"NAME":"x0)" << memory << R"("})" << '\n';
  for (int i = 1; i <= steps; ++i) {
    out << R"({"ARGS":["x)" << i - 1 << R"("],"INSTRUCTION":"CALL","NAME":"f","RESULT":["x)" << i
        << R"("],"TIME":"1000"})" << '\n'
        << R"({"NAME":"x)" << i << memory << R"("})" << '\n'
        << R"({"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"x)" << i << R"("})" << '\n';
  }
  if (!backward) return;
  std::string g = "x" + std::to_string(steps);
  for (int i = steps - 1; i >= 0; --i) {
    const std::string next = std::string("g").append(std::to_string(i));
    out << R"({"ARGS":[")" << g << R"(","x)" << i << R"("],"INSTRUCTION":"CALL","NAME":"df","RESULT":[")" << next
        << R"("],"TIME":"2000"})" << '\n'
        << R"({"NAME":")" << next << memory << R"("})" << '\n'
        << R"({"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":")" << next << R"("})" << '\n'
        << R"({"INSTRUCTION":"RELEASE","NAME":")" << g << R"("})" << '\n';
    if (i > 0) out << R"({"INSTRUCTION":"RELEASE","NAME":"x)" << i << R"("})" << '\n';
    g = next;
  }
}

class DtrSimCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dtr-sim-cli-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                                        "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    write_chain(dir_ / "chain.log", 1048576, 30, true);  // a 30-step chain of 1 MiB values, then its backward pass
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

TEST_F(DtrSimCli, JsonHasExactlyTheDocumentedKeysPerHeuristicAndRatio) {
  // 0.1 is under the floor (0.125): those rows ran out of memory, and say where.
  const Outcome r = run(path("chain.log") + " --sweep 0.1:1.0:0.45 --heuristic dtr-eq --heuristic lru --budget-mode both --json");
  ASSERT_EQ(r.status, 0) << r.output;
  const std::set<std::string> keys = {"heuristic", "ratio", "budget_bytes", "budget_mode", "feasible", "thrashed",
                                      "overhead", "base_compute_ns", "remat_compute_ns", "evictions",
                                      "rematerializations", "peak_bytes", "floor_bytes"};
  std::istringstream lines(r.output);
  std::string line;
  int objects = 0;
  int out_of_memory = 0;
  std::set<std::string> seen;
  while (std::getline(lines, line)) {
    const auto j = nlohmann::json::parse(line);
    std::set<std::string> got;
    for (const auto& [key, value] : j.items()) got.insert(key);
    std::set<std::string> expected = keys;
    if (!j["feasible"].get<bool>()) {  // and `failure`, the runtime's message, where in the trace and which op
      expected.insert("failure");
      const std::string failure = j["failure"].get<std::string>();
      EXPECT_EQ(failure.rfind(path("chain.log") + ":", 0), 0u) << failure;
      EXPECT_NE(failure.find(":94: in op 'df': "), std::string::npos) << failure;  // the backward's first op
      EXPECT_NE(failure.find("out of memory"), std::string::npos) << failure;
      ++out_of_memory;
    }
    EXPECT_EQ(got, expected) << line;
    seen.insert(j["heuristic"].get<std::string>() + "/" + j["budget_mode"].get<std::string>() + "/" +
                std::to_string(j["ratio"].get<double>()));
    if (j["feasible"].get<bool>() && !j["thrashed"].get<bool>()) {  // the others stopped early
      EXPECT_EQ(j["base_compute_ns"].get<double>(), 30 * 1000.0 + 30 * 2000.0);
      EXPECT_LE(j["peak_bytes"].get<std::uint64_t>(), j["budget_bytes"].get<std::uint64_t>()) << line;
      EXPECT_GE(j["overhead"].get<double>(), 1.0);
    }
    EXPECT_EQ(j["floor_bytes"].get<std::uint64_t>(), 4u * 1048576) << line;  // as in the heading (below)
    ++objects;
  }
  EXPECT_EQ(objects, 2 * 2 * 3);  // heuristics x modes x ratios (0.1, 0.55, 1.0)
  EXPECT_EQ(seen.size(), 12u);
  EXPECT_EQ(out_of_memory, 2 * 2);  // every heuristic and mode at 0.1
}

// Under each table, why its largest ratio that ran out of memory did (0.1 under the floor of 0.125; 0.05 too).
TEST_F(DtrSimCli, ATableSaysWhyItsLargestOutOfMemoryRatioDidNotFit) {
  const Outcome r = run(path("chain.log") + " --sweep 0.05:1.0:0.05 --heuristic dtr-eq --heuristic lru");
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string line = "out of memory at 0.1: " + path("chain.log") + ":94: in op 'df': dtr: out of memory";
  std::size_t found = 0;
  for (std::size_t at = r.output.find(line); at != std::string::npos; at = r.output.find(line, at + 1)) ++found;
  EXPECT_EQ(found, 2u) << r.output;  // one per heuristic's table, the default bytes budgets
  EXPECT_EQ(r.output.find("out of memory at 0.05"), std::string::npos) << r.output;
  const Outcome fits = run(path("chain.log") + " --sweep 0.5:1.0:0.5 --heuristic dtr-eq");
  ASSERT_EQ(fits.status, 0) << fits.output;
  EXPECT_EQ(fits.output.find("out of memory at"), std::string::npos) << fits.output;  // none ran out
}

TEST_F(DtrSimCli, TablesCsvAndPlot) {
  const bool gnuplot = program_installed("gnuplot");  // without it, the tables and the CSV are still checked
  const Outcome r = run(path("chain.log") + " --sweep 0.3:1.0:0.35 --heuristic all --csv " + path("out.csv") +
                        (gnuplot ? " --plot " + path("out.svg") : std::string()));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("dtr-eq, bytes budget"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("msps, bytes budget"), std::string::npos);
  // The floor: a backward op's gradient in and out and its saved value, beside the constant x0 (4 of the
  // peak's 32 MiB: x0..x30 and the first gradient).
  EXPECT_NE(r.output.find("floor 4194304 bytes"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("0.125 of the peak"), std::string::npos) << r.output;
  std::ifstream csv(path("out.csv"));
  std::string header;
  std::getline(csv, header);
  EXPECT_EQ(header,
            "heuristic,ratio,budget_bytes,budget_mode,feasible,thrashed,overhead,base_compute_ns,remat_compute_ns,"
            "evictions,rematerializations,peak_bytes,floor_bytes");
  int rows = 0;
  for (std::string line; std::getline(csv, line);) ++rows;
  EXPECT_EQ(rows, 7 * 3);  // the seven heuristics of the paper x ratios 0.3, 0.65, 1.0
  if (!gnuplot) return;
  std::ifstream svg(path("out.svg"));
  std::stringstream plot;
  plot << svg.rdbuf();
  EXPECT_NE(plot.str().find("<svg"), std::string::npos);
  EXPECT_NE(plot.str().find("dtr-eq"), std::string::npos);
  EXPECT_FALSE(fs::exists(path("out.svg.gp")));  // its scratch files are gone
}

TEST_F(DtrSimCli, ErrorsAreClearAndExitNonZero) {
  {
    std::ofstream bad(path("bad.log"));
    bad << R"({"ANNOTATION":"START","INSTRUCTION":"ANNOTATE"})" << "\n{oops\n";
  }
  Outcome r = run(path("bad.log"));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("bad.log:2: expected a JSON object"), std::string::npos) << r.output;
  r = run(path("chain.log") + " --heuristic fastest");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--heuristic=\"fastest\" is not a heuristic"), std::string::npos) << r.output;
  r = run(path("chain.log") + " --sweep 1.0:0.1:0.1");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("FROM:TO:STEP"), std::string::npos) << r.output;
  r = run(path("chain.log") + " --ratio 0.5 --sweep 0.1:1:0.1");
  EXPECT_NE(r.status, 0);
  r = run(path("chain.log") + " --recompute-order deepest");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--recompute-order"), std::string::npos) << r.output;
  EXPECT_EQ(run(path("chain.log") + " --recompute-order stable-last --ratio 0.4").status, 0);
}

// A chain of 3 MiB values (the large pool): classic 20 MiB segments hold six with a 2 MiB tail each, expandable
// segments map the pages under them. The unbudgeted reserved peak (the header) and so every device budget
// follow the flag; the replay's values are checked as always (the run succeeds).
TEST_F(DtrSimCli, ExpandableSegmentsMapPagesForDeviceBudgets) {
  write_chain(path("large.log"), 3145728, 24, false);
  auto reserved = [](const std::string& output) {
    const std::size_t open = output.find("bytes of tensors (");
    return open == std::string::npos ? 0ULL : std::stoull(output.substr(open + 18));
  };
  const Outcome classic = run(path("large.log") + " --budget-mode device --ratio 0.5");
  const Outcome expandable = run(path("large.log") + " --budget-mode device --ratio 0.5 --expandable-segments");
  ASSERT_EQ(classic.status, 0) << classic.output;
  ASSERT_EQ(expandable.status, 0) << expandable.output;
  EXPECT_EQ(reserved(classic.output), 100ULL << 20) << classic.output;   // five 20 MiB segments
  EXPECT_EQ(reserved(expandable.output), 76ULL << 20) << expandable.output;  // 25 x 3 MiB = 75 MiB: 38 pages
  EXPECT_NE(expandable.output.find("38.0 MiB"), std::string::npos) << expandable.output;  // the budget: half
}

// The lines of `output` that are JSON rows (stderr is mixed in).
std::vector<nlohmann::json> json_rows(const std::string& output) {
  std::vector<nlohmann::json> rows;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("{")) rows.push_back(nlohmann::json::parse(line));
  }
  return rows;
}

TEST_F(DtrSimCli, TracePathsThatCannotBeReadSayWhy) {
  Outcome r = run(path("missing.log"));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find(path("missing.log") + ": no such trace file (" + std::strerror(ENOENT) + ")"),
            std::string::npos)
      << r.output;
  r = run(dir_.string());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find(dir_.string() + ": is a directory, not a trace file (" + std::strerror(EISDIR) + ")"),
            std::string::npos)
      << r.output;
  fs::permissions(path("chain.log"), fs::perms::none);
  const std::string command = std::string(DTR_SIM_PATH) + " " + path("chain.log");
  const std::optional<Outcome> u = run_unprivileged([&] {
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    return 127;
  });
  if (!u) GTEST_SKIP() << "running as root and cannot become uid 65534: nothing stops root's reads";
  EXPECT_NE(u->status, 0);
  EXPECT_NE(u->output.find(path("chain.log") + ": the trace is not readable (" + std::strerror(EACCES) + ")"),
            std::string::npos)
      << u->output;
}

// NaN, infinities and ratios outside [1e-9, 1e9] are refused by --ratio and by every --sweep ratio alike,
// with one message, before any replay runs.
TEST_F(DtrSimCli, RatiosOutsideTheRangeAreErrorsForRatioAndSweep) {
  for (const std::string bad : {"--ratio nan", "--ratio -nan", "--ratio inf", "--ratio 0", "--ratio 2e9",
                                "--ratio 1e-10", "--sweep 0.5:2e9:1e9", "--sweep 1e-12:1e-12:1",
                                "--sweep 0:1:0.5", "--sweep 1e-10:1e-9:1e-10"}) {
    const Outcome r = run(path("chain.log") + " " + bad + " --budget-mode both --json");
    EXPECT_NE(r.status, 0) << bad;
    EXPECT_NE(r.output.find("must be a finite number from 1e-9 to 1e9"), std::string::npos) << bad << "\n" << r.output;
    EXPECT_TRUE(json_rows(r.output).empty()) << bad << "\n" << r.output;
  }
  // Small ratios inside the range are kept as given, not rounded away.
  const Outcome r = run(path("chain.log") + " --sweep 1e-7:3e-7:1e-7 --json");
  ASSERT_EQ(r.status, 0) << r.output;
  std::vector<double> ratios;
  for (const auto& row : json_rows(r.output)) ratios.push_back(row["ratio"].get<double>());
  EXPECT_EQ(ratios, (std::vector<double>{1e-7, 2e-7, 3e-7}));
}

// One 20 GB constant and one op: 1e9 x its peak does not fit in 64 bits.
TEST_F(DtrSimCli, BudgetsPast64BitsAreErrorsNamingTheRatioAndPeak) {
  {
    std::ofstream out(path("big.log"));
    out << R"({"ANNOTATION":"START","INSTRUCTION":"ANNOTATE"})" << '\n'
        << R"({"INSTRUCTION":"CONSTANT","NAME":"w"})" << '\n'
        << R"({"INSTRUCTION":"MEMORY","MEMORY":"20000000000","NAME":"w"})" << '\n'
        << R"({"ARGS":["w"],"INSTRUCTION":"CALL","NAME":"f","RESULT":["y"],"TIME":"1000"})" << '\n'
        << R"({"INSTRUCTION":"MEMORY","MEMORY":"8","NAME":"y"})" << '\n'
        << R"({"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"y"})" << '\n';
  }
  for (const std::string option : {"--ratio 1e9", "--sweep 5e8:1e9:5e8"}) {
    const Outcome r = run(path("big.log") + " " + option + " --json");
    EXPECT_NE(r.status, 0) << option;
    EXPECT_NE(r.output.find("ratio 1000000000 of the bytes peak of 20000000008 bytes"), std::string::npos)
        << option << "\n" << r.output;
    EXPECT_NE(r.output.find("more than 64 bits hold"), std::string::npos) << r.output;
    EXPECT_TRUE(json_rows(r.output).empty()) << r.output;
  }
  const Outcome ok = run(path("big.log") + " --ratio 5e8 --json");  // 1e19 bytes: fits
  ASSERT_EQ(ok.status, 0) << ok.output;
  EXPECT_EQ(json_rows(ok.output).at(0)["budget_bytes"].get<std::uint64_t>(), 10000000004000000000ull);
}

// A ratio whose budget rounds to 0 bytes is an OOM row in both modes; the sweep goes on.
TEST_F(DtrSimCli, BudgetsThatRoundToZeroBytesAreOomRowsInBothModes) {
  const Outcome r = run(path("chain.log") + " --sweep 1e-9:0.5:0.5 --budget-mode both --json");
  ASSERT_EQ(r.status, 0) << r.output;
  const std::vector<nlohmann::json> rows = json_rows(r.output);
  ASSERT_EQ(rows.size(), 4u) << r.output;  // (1e-9, 0.5) x (bytes, device)
  for (const auto& row : rows) {
    if (row["ratio"].get<double>() != 1e-9) continue;
    EXPECT_FALSE(row["feasible"].get<bool>()) << row;
    EXPECT_EQ(row["budget_bytes"].get<std::uint64_t>(), 0u) << row;
  }
}

TEST_F(DtrSimCli, CsvThatCannotBeWrittenIsAnError) {
  Outcome r = run(path("chain.log") + " --ratio 0.5 --csv /dev/full");  // fails at the flush
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find(std::string("--csv: writing '/dev/full' failed: ") + std::strerror(ENOSPC)), std::string::npos)
      << r.output;
  r = run(path("chain.log") + " --ratio 0.5 --csv " + path("no-such-dir/out.csv"));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--csv: cannot open '" + path("no-such-dir/out.csv") + "' for writing: " +
                          std::strerror(ENOENT)),
            std::string::npos)
      << r.output;
}

// The tables or JSON rows lost on the way to stdout (a full disk) are a failure, said on stderr.
TEST_F(DtrSimCli, StdoutThatCannotBeWrittenIsAnError) {
  for (const std::string format : {"", " --json"}) {
    std::string command = std::string(DTR_SIM_PATH).append(" ").append(path("chain.log")).append(" --ratio 0.5");
    const Outcome r = run_command(command.insert(0, 1, '(').append(format).append(" > /dev/full)"));
    EXPECT_NE(r.status, 0) << format;
    EXPECT_NE(r.output.find(std::string("dtr-sim: writing to stdout failed: ") + std::strerror(ENOSPC)),
              std::string::npos)
        << format << "\n" << r.output;
  }
}

// 'all' beside other names adds them to the DTR paper's set (not ours, forecast); a name given twice runs once (it
// printed two tables, and 'all' beside another was "not a heuristic").
TEST_F(DtrSimCli, AllBesideOtherHeuristicsAndRepeatsRunEachOnce) {
  const Outcome r = run(path("chain.log") +
                        " --ratio 0.9 --heuristic lru --heuristic all --heuristic dtr-eq+window --heuristic lru --json");
  ASSERT_EQ(r.status, 0) << r.output;
  std::vector<std::string> ran;
  for (const auto& row : json_rows(r.output)) ran.push_back(row["heuristic"].get<std::string>());
  std::vector<std::string> expected{"lru"};
  for (const std::string& h : heuristic_names()) {
    if (h != "lru" && !h.starts_with("forecast") && !fragmentation_aware(h)) expected.push_back(h);
  }
  expected.push_back("dtr-eq+window");
  EXPECT_EQ(ran, expected);
}

// The extension picks the format: .png (any case) a PNG, .svg or none an SVG; another is refused up front
// (it used to be written as an SVG under that name), and leaves no file.
TEST_F(DtrSimCli, PlotFormatFollowsTheExtension) {
  DTR_SKIP_WITHOUT_GNUPLOT();
  const auto first_bytes = [&](const std::string& name) {
    std::ifstream in(path(name), std::ios::binary);
    std::string head(8, '\0');
    in.read(head.data(), 8);
    return head.substr(0, static_cast<std::size_t>(in.gcount()));
  };
  Outcome r = run(path("chain.log") + " --ratio 0.5 --plot " + path("upper.PNG"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(first_bytes("upper.PNG").substr(1, 3), "PNG");
  r = run(path("chain.log") + " --ratio 0.5 --plot " + path("plain"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(first_bytes("plain").find("<"), std::string::npos);  // an SVG's XML
  for (const std::string name : {"out.pdf", "out.jpg", "out.svgz"}) {
    r = run(path("chain.log") + " --ratio 0.5 --plot " + path(name));
    EXPECT_NE(r.status, 0) << name;
    EXPECT_NE(r.output.find("a plot is written as SVG (.svg, or no extension) or PNG (.png)"), std::string::npos)
        << r.output;
    EXPECT_FALSE(fs::exists(path(name))) << name;
  }
}

TEST_F(DtrSimCli, PlotThatCannotBeWrittenIsAnError) {
  DTR_SKIP_WITHOUT_GNUPLOT();
  Outcome r = run(path("chain.log") + " --ratio 0.5 --plot /dev/full");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find(std::string("--plot: writing '/dev/full' failed: ") + std::strerror(ENOSPC)),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists("/dev/full.gp"));  // no scratch files beside it
  r = run(path("chain.log") + " --ratio 0.5 --plot " + path("no-such-dir/out.svg"));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--plot: cannot open '" + path("no-such-dir/out.svg") + "' for writing: " +
                          std::strerror(ENOENT)),
            std::string::npos)
      << r.output;
}

// Names that would run commands if they reached a shell or gnuplot unquoted, each on its own: quotes that end
// a string, then gnuplot's system() or a newline and '!' (a shell command line), ';', backquotes (gnuplot
// substitutes them outside single-quoted strings), $(...), spaces. The plot goes where asked, and nothing else
// appears: no file made by a command, no scratch file.
// The flags rule: DTR_* variables that would change a replay are ignored (as --help says), so the table is the
// same whatever the environment.
TEST_F(DtrSimCli, DtrVariablesDoNotChangeTheReplay) {
  const std::string args = path("chain.log") + " --ratio 0.4 --json";
  const Outcome plain = run(args);
  ASSERT_EQ(plain.status, 0) << plain.output;
  const Outcome with_env = run_command("DTR_HEURISTIC=lru DTR_MEMORY_BUDGET=1KiB DTR_BUDGET_MODE=device "
                                       "DTR_THRASH_LIMIT=1.01 DTR_SEARCH=scan DTR_RECOMPUTE_ORDER=stable-last " + std::string(DTR_SIM_PATH) + " " + args);
  ASSERT_EQ(with_env.status, 0) << with_env.output;
  EXPECT_EQ(with_env.output, plain.output);
  EXPECT_NE(run("--help").output.find("Flags rule here"), std::string::npos);
}

TEST_F(DtrSimCli, PlotAndTraceNamesCannotInjectCommands) {
  DTR_SKIP_WITHOUT_GNUPLOT();
  struct Case {
    std::string trace;
    std::string plot;
  };
  const std::vector<Case> cases = {
      {"t1' . system('touch pwned-t1') . '.log", "ok.svg"},
      {"t2'\n!touch pwned-t2\n'.log", "ok.svg"},
      {"t3 `touch pwned-t3` $(touch pwned-t3b) ;x.log", "ok.svg"},
      {"chain.log", "p1';touch pwned-p1;'.svg"},
      {"chain.log", "p2 `touch pwned-p2` $(touch pwned-p2b) \"q\" ' . system('touch pwned-p2c') . '.svg"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("trace " + c.trace + ", plot " + c.plot);
    fs::rename(path("chain.log"), path(c.trace));
    const Outcome r = run_command("cd " + shell_quote(dir_.string()) + " && " + DTR_SIM_PATH + " " +
                                  shell_quote(c.trace) + " --sweep 0.3:1.0:0.35 --heuristic dtr-eq --heuristic lru --plot " +
                                  shell_quote(c.plot));
    EXPECT_EQ(r.status, 0) << r.output;
    std::set<std::string> files;
    for (const auto& entry : fs::directory_iterator(dir_)) files.insert(entry.path().filename().string());
    EXPECT_EQ(files, (std::set<std::string>{c.trace, c.plot}));
    std::ifstream svg(path(c.plot));
    std::stringstream text;
    text << svg.rdbuf();
    EXPECT_NE(text.str().find("<svg"), std::string::npos);
    EXPECT_NE(text.str().find("lru"), std::string::npos);
    if (c.trace.starts_with("t3")) {
      EXPECT_NE(text.str().find("$(touch pwned-t3b)"), std::string::npos);  // the title shows the name
    }
    fs::remove(path(c.plot));
    fs::rename(path(c.trace), path("chain.log"));
  }
}

TEST_F(DtrSimCli, GnuplotFailuresAreErrorsThatSayWhy) {
  const std::string arguments = path("chain.log") + " --ratio 0.5 --plot " + path("out.svg");
  fs::create_directories(dir_ / "bin");
  Outcome r = run_command("PATH=" + path("bin") + " " + DTR_SIM_PATH + " " + arguments);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--plot: gnuplot not found"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("scripts/setup.sh"), std::string::npos) << r.output;
  const auto fake_gnuplot = [&](const std::string& body) {
    std::ofstream(path("bin/gnuplot")) << "#!/bin/sh\n" << body << "\n";
    fs::permissions(path("bin/gnuplot"), fs::perms::owner_all);
    return run_command("PATH=" + path("bin") + " " + DTR_SIM_PATH + " " + arguments);
  };
  r = fake_gnuplot("exit 3");  // without reading its script: dtr-sim must not die of SIGPIPE
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--plot: gnuplot exited with status 3"), std::string::npos) << r.output;
  r = fake_gnuplot("kill -9 $$");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--plot: gnuplot was killed by signal 9"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(path("out.svg")));  // no plot, and no scratch files
  std::set<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir_)) files.insert(entry.path().filename().string());
  EXPECT_EQ(files, (std::set<std::string>{"chain.log", "bin"}));
}

}  // namespace
}  // namespace dtr::test
