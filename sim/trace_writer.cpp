// A Trace back into the DTR prototype's JSON-lines op log (../shared/traces/README.md): parse_trace's inverse.
#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>

#include "dtr/check.h"
#include "dtr/sim.h"

namespace dtr::sim {
namespace {

using nlohmann::json;
using Kind = Instruction::Kind;

// The logs hold numbers as strings. The shortest form that reads back to the same double, so that a round trip
// through a file changes no time (whole nanoseconds print without a fraction: "1000").
std::string number(double value) { return fmt::format("{}", value); }
std::string number(std::uint64_t value) { return fmt::format("{}", value); }

class Writer {
 public:
  Writer(const Trace& trace, std::ostream& out) : trace_(trace), out_(out) {}

  void write() {
    emit({{"INSTRUCTION", "ANNOTATE"}, {"ANNOTATION", "START"}});
    for (const Instruction& in : trace_.instructions) instruction(in);
  }

 private:
  const std::string& name(std::uint32_t id, const Instruction& in) const {
    DTR_CHECK(id < trace_.names.size(), InvalidArgument, "write_trace: ", trace_.source, ": an instruction (from line ",
              in.line, ") names tensor #", id, " but the trace has ", trace_.names.size(), " names");
    return trace_.names[id];
  }

  json names(const std::vector<std::uint32_t>& ids, const Instruction& in) const {
    json list = json::array();
    for (std::uint32_t id : ids) list.push_back(name(id, in));
    return list;
  }

  void emit(const json& line) { out_ << line.dump() << '\n'; }

  void instruction(const Instruction& in) {
    switch (in.kind) {
      case Kind::constant:
        emit({{"INSTRUCTION", "CONSTANT"}, {"NAME", name(in.name, in)}});
        emit({{"INSTRUCTION", "MEMORY"}, {"NAME", name(in.name, in)}, {"MEMORY", number(in.bytes)}});
        return;
      case Kind::call: {
        json results = json::array();
        for (const Instruction::Result& r : in.results) results.push_back(name(r.name, in));
        emit({{"INSTRUCTION", "CALL"},
              {"NAME", in.op},
              {"ARGS", names(in.args, in)},
              {"RESULT", std::move(results)},
              {"TIME", number(in.time_ns)}});
        for (const Instruction::Result& r : in.results) {
          emit({{"INSTRUCTION", "MEMORY"}, {"NAME", name(r.name, in)}, {"MEMORY", number(r.bytes)}});
          emit({{"INSTRUCTION", "ALIAS"}, {"NAME", name(r.name, in)}, {"ALIAS", std::to_string(r.alias)}});
        }
        return;
      }
      case Kind::mutate:
        // MUTATE's indices are JSON numbers in the authors' logs, unlike every other number there.
        emit({{"INSTRUCTION", "MUTATE"},
              {"NAME", in.op},
              {"ARGS", names(in.args, in)},
              {"MUTATE", in.mutated},
              {"TIME", number(in.time_ns)}});
        return;
      case Kind::copy:
      case Kind::copy_from:
        emit({{"INSTRUCTION", in.kind == Kind::copy ? "COPY" : "COPY_FROM"},
              {"DST", name(in.name, in)},
              {"SRC", name(in.source, in)}});
        return;
      case Kind::make_constant:
        emit({{"INSTRUCTION", "MAKE_CONSTANT"}, {"NAME", name(in.name, in)}});
        return;
      case Kind::release:
        emit({{"INSTRUCTION", "RELEASE"}, {"NAME", name(in.name, in)}});
        return;
      case Kind::annotate:
        emit({{"INSTRUCTION", "ANNOTATE"}, {"ANNOTATION", in.op}});
        return;
    }
  }

  const Trace& trace_;
  std::ostream& out_;
};

}  // namespace

void write_trace(const Trace& trace, std::ostream& out) { Writer(trace, out).write(); }

void write_trace(const Trace& trace, const std::string& path) {
  errno = 0;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  DTR_CHECK(out.is_open(), IoError, path, ": cannot open the trace for writing: ",
            errno != 0 ? std::strerror(errno) : "unknown reason");  // NOLINT(concurrency-mt-unsafe)
  write_trace(trace, out);
  // A full disk shows only when the buffer is flushed: check after the last byte has gone out.
  out.flush();
  const int flush_error = errno;
  out.close();
  const int close_error = errno;
  DTR_CHECK(out.good(), IoError, path, ": writing the trace failed: ",
            flush_error != 0   ? std::strerror(flush_error)  // NOLINT(concurrency-mt-unsafe)
            : close_error != 0 ? std::strerror(close_error)  // NOLINT(concurrency-mt-unsafe)
                               : "unknown reason");
}

}  // namespace dtr::sim
