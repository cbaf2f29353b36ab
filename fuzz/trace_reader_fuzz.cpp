// Fuzz target: the trace reader, dtr::sim::parse_trace (include/dtr/sim.h, sim/trace_reader.cpp), and what
// runs on every trace it accepts: summarize() and write_trace().
//
// Input: the trace file's bytes. parse_trace returns or throws dtr::TraceError naming the file, in a message of
// bounded length. An accepted trace is summarized (a TraceError there too, or a summary), and written back with
// write_trace: that text must parse again, to the same instructions, names and summary (write_trace is
// documented as parse_trace's inverse).
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "dtr/sim.h"
#include "fuzz_check.h"

namespace {

using dtr::fuzz::require;
using dtr::sim::Instruction;
using dtr::sim::Trace;

const std::string kSource = "fuzz.log";

std::string describe(const Trace& trace, const Instruction& in) {
  std::ostringstream out;
  out << "the instruction from line " << in.line << " (kind " << static_cast<int>(in.kind) << ", op '"
      << in.op.substr(0, 80) << "') of " << trace.instructions.size();
  return out.str();
}

// The same instruction, names compared as strings (their ids may differ between two traces).
bool same(const Trace& a, const Instruction& x, const Trace& b, const Instruction& y) {
  const auto name = [](const Trace& t, std::uint32_t id) -> const std::string& { return t.names.at(id); };
  const auto names = [&](const Trace& t, const std::vector<std::uint32_t>& ids) {
    std::vector<std::string> out;
    for (const std::uint32_t id : ids) out.push_back(name(t, id));
    return out;
  };
  if (x.kind != y.kind || x.op != y.op || x.bytes != y.bytes || x.time_ns != y.time_ns || x.mutated != y.mutated) {
    return false;
  }
  if (names(a, x.args) != names(b, y.args) || x.results.size() != y.results.size()) return false;
  for (std::size_t r = 0; r < x.results.size(); ++r) {
    const Instruction::Result& p = x.results[r];
    const Instruction::Result& q = y.results[r];
    if (name(a, p.name) != name(b, q.name) || p.bytes != q.bytes || p.alias != q.alias) return false;
  }
  switch (x.kind) {
    case Instruction::Kind::constant:
    case Instruction::Kind::make_constant:
    case Instruction::Kind::release:
      return name(a, x.name) == name(b, y.name);
    case Instruction::Kind::copy:
    case Instruction::Kind::copy_from:
      return name(a, x.name) == name(b, y.name) && name(a, x.source) == name(b, y.source);
    default:
      return true;
  }
}

// Every id an instruction holds names an entry of trace.names; indices stay within their lists.
void check_well_formed(const Trace& trace) {
  std::uint64_t calls = 0;
  for (const Instruction& in : trace.instructions) {
    const auto check_id = [&](std::uint32_t id) {
      require(id < trace.names.size(), "parse_trace: a tensor id outside Trace::names", describe(trace, in));
    };
    using Kind = Instruction::Kind;
    if (in.kind == Kind::constant || in.kind == Kind::make_constant || in.kind == Kind::release || in.kind == Kind::copy ||
        in.kind == Kind::copy_from) {
      check_id(in.name);
    }
    if (in.kind == Kind::copy || in.kind == Kind::copy_from) check_id(in.source);
    for (const std::uint32_t id : in.args) check_id(id);
    for (const Instruction::Result& r : in.results) {
      check_id(r.name);
      require(r.alias >= -1 && r.alias < static_cast<std::int64_t>(in.args.size()),
              "parse_trace: an ALIAS that is neither -1 nor an index into ARGS", describe(trace, in));
    }
    for (const std::uint32_t k : in.mutated) {
      require(k < in.args.size(), "parse_trace: a MUTATE index outside ARGS", describe(trace, in));
    }
    require(in.time_ns >= 0, "parse_trace: a negative TIME", describe(trace, in));
    if (in.kind == Instruction::Kind::call || in.kind == Instruction::Kind::mutate) ++calls;
  }
  require(calls == trace.calls, "parse_trace: Trace::calls is not the number of CALL and MUTATE instructions");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Trace trace;
  {
    std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
    if (!dtr::fuzz::returns_or_throws<dtr::TraceError>([&] { trace = dtr::sim::parse_trace(in, kSource); },
                                                       kSource)) {
      return 0;
    }
  }
  check_well_formed(trace);
  dtr::sim::TraceSummary summary;
  const bool summarized =
      dtr::fuzz::returns_or_throws<dtr::TraceError>([&] { summary = dtr::sim::summarize(trace); }, kSource);

  // write_trace, then parse_trace: the same trace.
  std::ostringstream out;
  dtr::fuzz::returns_or_throws<dtr::fuzz::Never>([&] { dtr::sim::write_trace(trace, out); }, "");
  const std::string written = out.str();
  Trace again;
  {
    std::istringstream in(written);
    dtr::fuzz::returns_or_throws<dtr::fuzz::Never>([&] { again = dtr::sim::parse_trace(in, kSource); }, "");
  }
  require(again.instructions.size() == trace.instructions.size() && again.calls == trace.calls,
          "write_trace's text parses to another number of instructions", written);
  for (std::size_t i = 0; i < trace.instructions.size(); ++i) {
    require(same(trace, trace.instructions[i], again, again.instructions[i]),
            "write_trace's text parses to another instruction: " + describe(trace, trace.instructions[i]), written);
  }
  dtr::sim::TraceSummary summary_again;
  const bool summarized_again =
      dtr::fuzz::returns_or_throws<dtr::TraceError>([&] { summary_again = dtr::sim::summarize(again); }, kSource);
  require(summarized == summarized_again, "summarize accepts a trace but not its written form, or the reverse",
          written);
  if (summarized) {
    require(summary.peak_bytes == summary_again.peak_bytes && summary.constant_bytes == summary_again.constant_bytes &&
                summary.base_compute_ns == summary_again.base_compute_ns,
            "summarize gives another summary for the written trace", written);
  }
  return 0;
}
