// write_trace: parse_trace's inverse, in the authors' log format, and its errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>

#include "dtr/sim.h"
#include "dtr/trace_generator.h"
#include "test_helpers.h"

namespace dtr::test {
namespace {

namespace fs = std::filesystem;
using sim::Instruction;
using Kind = Instruction::Kind;


sim::Trace parsed(const std::string& text) {
  std::istringstream in(text);
  return sim::parse_trace(in, "written.log");
}

// Equal as programs: kinds, ops, names (as strings: ids depend on the order a reader meets them), sizes,
// times, aliases and mutated indices; line numbers too when asked.
void expect_same_program(const sim::Trace& expected, const sim::Trace& actual, bool compare_lines) {
  ASSERT_EQ(expected.instructions.size(), actual.instructions.size());
  EXPECT_EQ(expected.calls, actual.calls);
  auto names = [](const sim::Trace& t, const std::vector<std::uint32_t>& ids) {
    std::vector<std::string> out;
    for (std::uint32_t id : ids) out.push_back(t.names.at(id));
    return out;
  };
  for (std::size_t i = 0; i < expected.instructions.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "instruction " << i);
    const Instruction& e = expected.instructions[i];
    const Instruction& a = actual.instructions[i];
    ASSERT_EQ(e.kind, a.kind);
    if (compare_lines) {
      EXPECT_EQ(e.line, a.line);
    }
    EXPECT_EQ(e.op, a.op);
    EXPECT_EQ(e.time_ns, a.time_ns);
    EXPECT_EQ(names(expected, e.args), names(actual, a.args));
    EXPECT_EQ(e.mutated, a.mutated);
    if (e.kind == Kind::constant || e.kind == Kind::make_constant || e.kind == Kind::release || e.kind == Kind::copy ||
        e.kind == Kind::copy_from) {
      EXPECT_EQ(expected.names.at(e.name), actual.names.at(a.name));
    }
    if (e.kind == Kind::copy || e.kind == Kind::copy_from) {
      EXPECT_EQ(expected.names.at(e.source), actual.names.at(a.source));
    }
    if (e.kind == Kind::constant) {
      EXPECT_EQ(e.bytes, a.bytes);
    }
    ASSERT_EQ(e.results.size(), a.results.size());
    for (std::size_t r = 0; r < e.results.size(); ++r) {
      EXPECT_EQ(expected.names.at(e.results[r].name), actual.names.at(a.results[r].name));
      EXPECT_EQ(e.results[r].bytes, a.results[r].bytes);
      EXPECT_EQ(e.results[r].alias, a.results[r].alias);
    }
  }
}

// Every instruction kind, a multi-result CALL with a view, names that JSON must escape, and a fractional time.
sim::Trace hand_made() {
  sim::Trace t;
  t.source = "hand-made";
  t.names = {"w", "x \"quoted\"", "y\\back", "view", "w2", "ünïcode"};
  auto add = [&](Instruction in) {
    if (in.kind == Kind::call || in.kind == Kind::mutate) t.calls += 1;
    t.instructions.push_back(std::move(in));
  };
  Instruction constant;
  constant.kind = Kind::constant;
  constant.name = 0;
  constant.bytes = 1 << 20;
  add(constant);
  Instruction call;
  call.kind = Kind::call;
  call.op = "conv";
  call.args = {0};
  call.results = {{1, 4096, -1}, {3, 1 << 20, 0}};
  call.time_ns = 1234.5;
  add(call);
  Instruction mutate;
  mutate.kind = Kind::mutate;
  mutate.op = "add_";
  mutate.args = {1, 0};
  mutate.mutated = {0, 1};
  mutate.time_ns = 30;
  add(mutate);
  Instruction copy;
  copy.kind = Kind::copy;
  copy.name = 4;
  copy.source = 0;
  add(copy);
  Instruction annotate;
  annotate.kind = Kind::annotate;
  annotate.op = "BACKWARD";
  add(annotate);
  Instruction call2 = call;
  call2.op = "f";
  call2.args = {1, 4};
  call2.results = {{2, 0, -1}};
  call2.time_ns = 0;
  add(call2);
  Instruction copy_from;
  copy_from.kind = Kind::copy_from;
  copy_from.name = 4;
  copy_from.source = 2;
  add(copy_from);
  Instruction make_constant;
  make_constant.kind = Kind::make_constant;
  make_constant.name = 2;
  add(make_constant);
  Instruction constant2 = constant;
  constant2.name = 5;
  constant2.bytes = 7;
  add(constant2);
  for (std::uint32_t name : {0U, 1U, 3U, 4U}) {
    Instruction release;
    release.kind = Kind::release;
    release.name = name;
    add(release);
  }
  return t;
}

TEST(TraceWriter, RoundTripsEveryInstructionKind) {
  const sim::Trace original = hand_made();
  const std::string text = trace_text(original);
  const sim::Trace back = parsed(text);
  expect_same_program(original, back, /*compare_lines=*/false);
  EXPECT_EQ(trace_text(back), text);  // writing what was read changes nothing
}

TEST(TraceWriter, UsesTheAuthorsLayout) {
  const std::string text = trace_text(hand_made());
  std::istringstream lines(text);
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line, R"({"ANNOTATION":"START","INSTRUCTION":"ANNOTATE"})");
  std::getline(lines, line);
  EXPECT_EQ(line, R"({"INSTRUCTION":"CONSTANT","NAME":"w"})");
  std::getline(lines, line);
  EXPECT_EQ(line, R"({"INSTRUCTION":"MEMORY","MEMORY":"1048576","NAME":"w"})");
  std::getline(lines, line);  // numbers are strings, keys sorted as in the logs
  EXPECT_EQ(line,
            R"({"ARGS":["w"],"INSTRUCTION":"CALL","NAME":"conv","RESULT":["x \"quoted\"","view"],"TIME":"1234.5"})");
  std::getline(lines, line);
  EXPECT_EQ(line, R"({"INSTRUCTION":"MEMORY","MEMORY":"4096","NAME":"x \"quoted\""})");
  std::getline(lines, line);
  EXPECT_EQ(line, R"({"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"x \"quoted\""})");
  std::getline(lines, line);
  std::getline(lines, line);
  EXPECT_EQ(line, R"({"ALIAS":"0","INSTRUCTION":"ALIAS","NAME":"view"})");
  std::getline(lines, line);  // MUTATE indices are JSON numbers, as the logs have them
  EXPECT_EQ(line, R"({"ARGS":["x \"quoted\"","w"],"INSTRUCTION":"MUTATE","MUTATE":[0,1],"NAME":"add_","TIME":"30"})");
  std::getline(lines, line);
  EXPECT_EQ(line, R"({"DST":"w2","INSTRUCTION":"COPY","SRC":"w"})");
}

TEST(TraceWriter, RoundTripsGeneratedTracesLineForLine) {
  sim::GanOptions gan;
  gan.unroll = 2;
  sim::DagOptions dag;
  dag.forward_ops = 300;
  sim::ResNetOptions resnet;
  resnet.blocks_per_stage = 1;
  for (const sim::Trace& trace : {sim::generate_chain({}), sim::generate_resnet(resnet), sim::generate_rnn({}),
                                  sim::generate_gan(gan), sim::generate_dag(dag)}) {
    SCOPED_TRACE(trace.source);
    // The generators number lines as the writer lays them out, so errors in a replay point into the file.
    expect_same_program(trace, parsed(trace_text(trace)), /*compare_lines=*/true);
  }
}

TEST(TraceWriter, WritesFilesAndNamesTheFileAndReasonWhenItCannot) {
  const fs::path path = fs::temp_directory_path() / "dtr-trace-writer-test.log";
  sim::write_trace(hand_made(), path.string());
  expect_same_program(hand_made(), sim::read_trace(path.string()), false);
  fs::remove(path);

  expect_error<IoError>([] { sim::write_trace(hand_made(), "/nonexistent-dir/trace.log"); },
                      {"/nonexistent-dir/trace.log", "cannot open", "No such file or directory"});
  if (fs::exists("/dev/full")) {  // a full disk shows only when the buffer is flushed
    expect_error<IoError>([] { sim::write_trace(sim::generate_chain({}), "/dev/full"); },
                        {"/dev/full", "writing the trace failed", "No space left on device"});
  }
}

TEST(TraceWriter, RejectsANameOutsideTheTable) {
  sim::Trace t = hand_made();
  t.instructions[1].args = {17};
  std::ostringstream out;
  expect_error<InvalidArgument>([&] { sim::write_trace(t, out); }, {"tensor #17", "6 names"});
}

}  // namespace
}  // namespace dtr::test
