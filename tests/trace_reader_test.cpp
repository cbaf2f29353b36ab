// The trace reader: every instruction kind, every malformed-line error with its line number, and garbage
// that must give a TraceError, never a crash.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "child_process.h"
#include "dtr/sim.h"
#include "test_resources.h"

namespace dtr::test {
namespace {

using sim::Instruction;
using Kind = Instruction::Kind;

sim::Trace parse(const std::string& text) {
  std::istringstream in(text);
  return sim::parse_trace(in, "test.log");
}

const std::string kValid = R"({"INSTRUCTION":"CONSTANT","NAME":"before-start"}
{"ANNOTATION":"START","INSTRUCTION":"ANNOTATE"}
{"INSTRUCTION":"CONSTANT","NAME":"x1"}
{"INSTRUCTION":"MEMORY","MEMORY":"1024","NAME":"x1"}
{"DST":"x2","INSTRUCTION":"COPY","SRC":"x1"}
{"ARGS":["x1","x2"],"INSTRUCTION":"CALL","NAME":"conv","RESULT":["x3","x4"],"TIME":"700"}
{"INSTRUCTION":"MEMORY","MEMORY":"2048","NAME":"x3"}
{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"x3"}
{"INSTRUCTION":"MEMORY","MEMORY":"1024","NAME":"x4"}
{"ALIAS":"1","INSTRUCTION":"ALIAS","NAME":"x4"}

{"ANNOTATION":"BACKWARD","INSTRUCTION":"ANNOTATE"}
{"ARGS":["x3","x1"],"INSTRUCTION":"MUTATE","MUTATE":[0],"NAME":"add_","TIME":"30"}
{"DST":"x2","INSTRUCTION":"COPY_FROM","SRC":"x3"}
{"INSTRUCTION":"RELEASE","NAME":"x4"}
)";

TEST(TraceReader, ReadsEveryInstructionKindAfterStart) {
  const sim::Trace t = parse(kValid);
  EXPECT_EQ(t.source, "test.log");
  ASSERT_EQ(t.instructions.size(), 7u);
  EXPECT_EQ(t.calls, 2u);
  const auto name = [&](std::uint32_t id) { return t.names.at(id); };
  const Instruction& constant = t.instructions[0];
  EXPECT_EQ(constant.kind, Kind::constant);
  EXPECT_EQ(name(constant.name), "x1");
  EXPECT_EQ(constant.bytes, 1024u);
  EXPECT_EQ(constant.line, 3u);
  EXPECT_EQ(t.instructions[1].kind, Kind::copy);
  EXPECT_EQ(name(t.instructions[1].name), "x2");
  EXPECT_EQ(name(t.instructions[1].source), "x1");
  const Instruction& call = t.instructions[2];
  EXPECT_EQ(call.kind, Kind::call);
  EXPECT_EQ(call.op, "conv");
  EXPECT_EQ(call.time_ns, 700.0);
  ASSERT_EQ(call.args.size(), 2u);
  EXPECT_EQ(name(call.args[1]), "x2");
  ASSERT_EQ(call.results.size(), 2u);
  EXPECT_EQ(name(call.results[0].name), "x3");
  EXPECT_EQ(call.results[0].bytes, 2048u);
  EXPECT_EQ(call.results[0].alias, -1);
  EXPECT_EQ(call.results[1].alias, 1);
  EXPECT_EQ(t.instructions[3].kind, Kind::annotate);
  EXPECT_EQ(t.instructions[3].op, "BACKWARD");
  const Instruction& mutate = t.instructions[4];
  EXPECT_EQ(mutate.kind, Kind::mutate);
  EXPECT_EQ(mutate.op, "add_");
  EXPECT_EQ(mutate.mutated, (std::vector<std::uint32_t>{0}));
  EXPECT_EQ(mutate.line, 13u);  // blank lines count
  EXPECT_EQ(t.instructions[5].kind, Kind::copy_from);
  EXPECT_EQ(t.instructions[6].kind, Kind::release);
}

TEST(TraceReader, AcceptsPlainJsonNumbers) {
  const sim::Trace t = parse(R"({"ANNOTATION":"START","INSTRUCTION":"ANNOTATE"}
{"INSTRUCTION":"CONSTANT","NAME":"a"}
{"INSTRUCTION":"MEMORY","MEMORY":64,"NAME":"a"}
{"ARGS":["a"],"INSTRUCTION":"CALL","NAME":"f","RESULT":["b"],"TIME":5}
{"INSTRUCTION":"MEMORY","MEMORY":8,"NAME":"b"}
{"ALIAS":-1,"INSTRUCTION":"ALIAS","NAME":"b"}
)");
  ASSERT_EQ(t.instructions.size(), 2u);
  EXPECT_EQ(t.instructions[0].bytes, 64u);
  EXPECT_EQ(t.instructions[1].time_ns, 5.0);
}

// Each malformed trace: the error names the file, the line and what was expected.
TEST(TraceReader, MalformedLinesNameTheLineAndWhatWasExpected) {
  const std::string start = "{\"ANNOTATION\":\"START\",\"INSTRUCTION\":\"ANNOTATE\"}\n";
  const std::string constant = "{\"INSTRUCTION\":\"CONSTANT\",\"NAME\":\"a\"}\n{\"INSTRUCTION\":\"MEMORY\",\"MEMORY\":\"4\",\"NAME\":\"a\"}\n";
  struct Case {
    std::string text;
    std::string where;
    std::string what;
  };
  const std::vector<Case> cases = {
      {"{\"INSTRUCTION\":\"CALL\"}\n", "test.log: ", "no {\"INSTRUCTION\":\"ANNOTATE\",\"ANNOTATION\":\"START\"}"},
      {start + "not json\n", "test.log:2: ", "expected a JSON object"},
      {start + "[1, 2]\n", "test.log:2: ", "expected a JSON object"},
      {start + "{\"NAME\":\"a\"}\n", "test.log:2: ", "missing field \"INSTRUCTION\""},
      {start + "{\"INSTRUCTION\":\"JUMP\"}\n", "test.log:2: ", "unknown INSTRUCTION \"JUMP\"; expected CONSTANT"},
      {start + "{\"INSTRUCTION\":\"CONSTANT\",\"NAME\":7}\n", "test.log:2: ", "field \"NAME\": expected a string"},
      {start + "{\"INSTRUCTION\":\"CONSTANT\",\"NAME\":\"a\"}\n{\"INSTRUCTION\":\"RELEASE\",\"NAME\":\"a\"}\n",
       "test.log:3: ", "CONSTANT 'a' at line 2 has no MEMORY line"},
      {start + "{\"INSTRUCTION\":\"MEMORY\",\"MEMORY\":\"4\",\"NAME\":\"a\"}\n", "test.log:2: ",
       "MEMORY for 'a' follows no CONSTANT or CALL"},
      {start + constant + "{\"INSTRUCTION\":\"MEMORY\",\"MEMORY\":\"4\",\"NAME\":\"a\"}\n", "test.log:4: ",
       "a second MEMORY line for CONSTANT 'a'"},
      {start + "{\"INSTRUCTION\":\"CONSTANT\",\"NAME\":\"a\"}\n{\"INSTRUCTION\":\"MEMORY\",\"MEMORY\":\"-4\",\"NAME\":\"a\"}\n",
       "test.log:3: ", "expected a non-negative number"},
      {start + "{\"INSTRUCTION\":\"CONSTANT\",\"NAME\":\"a\"}\n{\"INSTRUCTION\":\"MEMORY\",\"MEMORY\":\"4.5\",\"NAME\":\"a\"}\n",
       "test.log:3: ", "expected whole bytes"},
      {start + "{\"INSTRUCTION\":\"CONSTANT\",\"NAME\":\"a\"}\n{\"INSTRUCTION\":\"MEMORY\",\"MEMORY\":\"four\",\"NAME\":\"a\"}\n",
       "test.log:3: ", "expected a number (or a string holding one)"},
      {start + constant + "{\"ARGS\":[\"a\"],\"INSTRUCTION\":\"CALL\",\"NAME\":\"f\",\"RESULT\":[\"b\"],\"TIME\":\"1\"}\n"
                          "{\"INSTRUCTION\":\"RELEASE\",\"NAME\":\"a\"}\n",
       "test.log:5: ", "result 'b' of the CALL at line 4 has no MEMORY line"},
      {start + constant + "{\"ARGS\":[\"a\"],\"INSTRUCTION\":\"CALL\",\"NAME\":\"f\",\"RESULT\":[\"b\"],\"TIME\":\"1\"}\n"
                          "{\"INSTRUCTION\":\"MEMORY\",\"MEMORY\":\"4\",\"NAME\":\"c\"}\n",
       "test.log:5: ", "MEMORY for 'c', which is not a RESULT of the CALL at line 4"},
      {start + constant + "{\"ARGS\":[\"a\"],\"INSTRUCTION\":\"CALL\",\"NAME\":\"f\",\"RESULT\":[\"b\"],\"TIME\":\"1\"}\n"
                          "{\"INSTRUCTION\":\"MEMORY\",\"MEMORY\":\"4\",\"NAME\":\"b\"}\n{\"ALIAS\":\"3\",\"INSTRUCTION\":\"ALIAS\",\"NAME\":\"b\"}\n",
       "test.log:6: ", "expected -1 or an index into the CALL's 1 ARGS"},
      {start + constant + "{\"ALIAS\":\"-1\",\"INSTRUCTION\":\"ALIAS\",\"NAME\":\"a\"}\n", "test.log:4: ",
       "ALIAS for 'a' follows no CALL"},
      {start + constant + "{\"ARGS\":\"a\",\"INSTRUCTION\":\"CALL\",\"NAME\":\"f\",\"RESULT\":[],\"TIME\":\"1\"}\n",
       "test.log:4: ", "field \"ARGS\": expected a list of tensor names"},
      {start + constant + "{\"ARGS\":[\"a\"],\"INSTRUCTION\":\"MUTATE\",\"NAME\":\"f_\",\"MUTATE\":[1],\"TIME\":\"1\"}\n",
       "test.log:4: ", "MUTATE: index 1 is not an index into its 1 ARGS"},
      {start + constant + "{\"ARGS\":[\"a\"],\"INSTRUCTION\":\"CALL\",\"NAME\":\"f\",\"RESULT\":[],\"TIME\":\"-3\"}\n",
       "test.log:4: ", "field \"TIME\": expected a non-negative number"},
      {start + "{\"DST\":\"b\",\"INSTRUCTION\":\"COPY\"}\n", "test.log:2: ", "missing field \"SRC\""},
  };
  for (const Case& c : cases) {
    try {
      parse(c.text);
      ADD_FAILURE() << "accepted:\n" << c.text;
    } catch (const TraceError& e) {
      const std::string message = e.what();
      EXPECT_EQ(message.rfind(c.where, 0), 0u) << message << "\nexpected to start with: " << c.where;
      EXPECT_NE(message.find(c.what), std::string::npos) << message << "\nexpected: " << c.what;
    }
  }
}

// A trace path that cannot be read says why: missing, unreadable or a directory, with the OS's reason.
class TraceReaderPaths : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("dtr-trace-paths-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "ok.log") << kValid;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  std::filesystem::path dir_;
};

TEST_F(TraceReaderPaths, AReadableFileIsRead) { EXPECT_EQ(sim::read_trace(path("ok.log")).instructions.size(), 7u); }

TEST_F(TraceReaderPaths, MissingFileSaysSo) {
  expect_error<TraceError>([&] { sim::read_trace(path("missing.log")); },
                           {path("missing.log") + ": no such trace file", std::strerror(ENOENT)});
}

TEST_F(TraceReaderPaths, DirectorySaysSo) {
  expect_error<TraceError>([&] { sim::read_trace(dir_.string()); },
                           {dir_.string() + ": is a directory, not a trace file", std::strerror(EISDIR)});
}

TEST_F(TraceReaderPaths, UnreadableFileSaysSo) {
  std::filesystem::permissions(path("ok.log"), std::filesystem::perms::none);
  const std::optional<Outcome> r = run_unprivileged([&] {
    try {
      sim::read_trace(path("ok.log"));
      std::printf("accepted\n");
      return 1;
    } catch (const TraceError& e) {
      std::printf("%s\n", e.what());
      return 0;
    }
  });
  if (!r) GTEST_SKIP() << "running as root and cannot become uid 65534: nothing stops root's reads";
  EXPECT_EQ(r->status, 0) << r->output;
  EXPECT_NE(r->output.find(path("ok.log") + ": the trace is not readable"), std::string::npos) << r->output;
  EXPECT_NE(r->output.find(std::strerror(EACCES)), std::string::npos) << r->output;
}

// Garbage and mutated valid traces: a TraceError or a trace, nothing else (ASan watches the rest).
// A file with no newline (/dev/zero, a binary) must not be read into memory whole: a line past 1 MiB is an
// error naming its line; lines up to the cap, and a last line with no newline, still parse.
TEST(TraceReader, ALineLongerThanTheCapIsRefusedAndLongValuesAreShownCut) {
  const std::string start = "{\"ANNOTATION\":\"START\",\"INSTRUCTION\":\"ANNOTATE\"}\n";
  const std::string huge(std::size_t{1} << 21, 'x');
  try {
    parse(start + huge);
    ADD_FAILURE() << "a 2 MiB line was read";
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("test.log:2: the line is longer than 1048576 bytes"), std::string::npos)
        << e.what();
  }
  // Just under the cap: an ordinary (bad) line, whose long value the message shows cut to a prefix.
  const std::string value(std::size_t{1} << 19, 'y');
  try {
    parse(start + "{\"INSTRUCTION\":\"" + value + "\"}");
    ADD_FAILURE() << "an unknown instruction was read";
  } catch (const TraceError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("test.log:2: unknown INSTRUCTION"), std::string::npos) << what.substr(0, 200);
    EXPECT_NE(what.find("(524288 characters)"), std::string::npos) << what.substr(0, 200);
    EXPECT_LT(what.size(), 400u);
  }
  // The last line needs no newline.
  const sim::Trace t = parse(start + "{\"INSTRUCTION\":\"CONSTANT\",\"NAME\":\"a\"}\n"
                                     "{\"INSTRUCTION\":\"MEMORY\",\"MEMORY\":\"8\",\"NAME\":\"a\"}");
  ASSERT_EQ(t.instructions.size(), 1u);
  EXPECT_EQ(t.instructions[0].bytes, 8u);
}

// Found by fuzz/trace_reader_fuzz.cpp: "nan" reads as a number, and was cast to an index (undefined
// behaviour); a 150 000-deep array in a field was dumped into the message recursively (a stack overflow);
// tensor names up to the line's length were echoed whole.
TEST(TraceReader, NanIndicesDeepValuesAndLongNamesAreClearBoundedErrors) {
  const std::string start = "{\"ANNOTATION\":\"START\",\"INSTRUCTION\":\"ANNOTATE\"}\n"
                            "{\"INSTRUCTION\":\"CONSTANT\",\"NAME\":\"a\"}\n"
                            "{\"INSTRUCTION\":\"MEMORY\",\"MEMORY\":\"4\",\"NAME\":\"a\"}\n";
  const auto message = [](const std::string& text) {
    try {
      parse(text);
    } catch (const TraceError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(start + "{\"ARGS\":[\"a\"],\"INSTRUCTION\":\"CALL\",\"NAME\":\"f\",\"RESULT\":[\"b\"],\"TIME\":\"1\"}\n"
                            "{\"INSTRUCTION\":\"MEMORY\",\"MEMORY\":\"4\",\"NAME\":\"b\"}\n"
                            "{\"ALIAS\":\"nan\",\"INSTRUCTION\":\"ALIAS\",\"NAME\":\"b\"}\n")
                .find("test.log:6: ALIAS of 'b': expected -1 or an index into the CALL's 1 ARGS, got nan"),
            std::string::npos);
  EXPECT_NE(message(start + "{\"ARGS\":[\"a\"],\"INSTRUCTION\":\"MUTATE\",\"MUTATE\":[\"nan\"],\"NAME\":\"f_\",\"TIME\":\"1\"}\n")
                .find("test.log:4: MUTATE: index \"nan\" is not an index into its 1 ARGS"),
            std::string::npos);
  const std::string deep = std::string(150000, '[') + std::string(150000, ']');
  EXPECT_NE(message(start + "{\"INSTRUCTION\":\"CONSTANT\",\"NAME\":" + deep + "}\n")
                .find("test.log:4: field \"NAME\": expected a string, got an array of 1 values"),
            std::string::npos);
  const std::string name(5000, 'n');
  const std::string memory_alone = message(start + "{\"INSTRUCTION\":\"MEMORY\",\"MEMORY\":\"4\",\"NAME\":\"" + name + "\"}\n");
  EXPECT_NE(memory_alone.find("MEMORY for 'nnnn"), std::string::npos) << memory_alone.substr(0, 300);
  EXPECT_NE(memory_alone.find("(5000 characters)'"), std::string::npos) << memory_alone.substr(0, 300);
  EXPECT_LT(memory_alone.size(), 400u);
}

TEST(TraceReader, FuzzedInputGivesATraceErrorOrATrace) {
  std::mt19937_64 rng(99);
  const std::string alphabet = "{}[]\":,0123456789-.abcxyzINSTRUCTIONCALLMEMORYALIAS \n\\";
  int errors = 0;
  int parsed = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string text = kValid;
    if (round % 3 == 0) {
      text.clear();
      const auto length = rng() % 400;
      for (std::size_t i = 0; i < length; ++i) text += alphabet[rng() % alphabet.size()];
    } else {
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits && !text.empty(); ++e) {
        const std::size_t at = rng() % text.size();
        switch (rng() % 3) {
          case 0: text.erase(at, 1 + rng() % 8); break;
          case 1: text.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
          default: text[at] = alphabet[rng() % alphabet.size()]; break;
        }
      }
    }
    try {
      parse(text);
      ++parsed;
    } catch (const TraceError&) {
      ++errors;
    }
  }
  EXPECT_GT(errors, 1000);
  EXPECT_GT(parsed, 0);
}

}  // namespace
}  // namespace dtr::test
