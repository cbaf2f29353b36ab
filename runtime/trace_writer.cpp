#include "runtime/trace_writer.h"

#include <nlohmann/json.hpp>

#include <cmath>

#include "dtr/check.h"

namespace dtr::detail {

TraceWriter::TraceWriter(const std::string& path) : out_(path) {
  DTR_CHECK(out_.good(), InvalidArgument, "DTR_TRACE: cannot write the trace file '", path, "'");
  out_ << nlohmann::json{{"INSTRUCTION", "ANNOTATE"}, {"ANNOTATION", "START"}}.dump() << '\n';
}

void TraceWriter::constant(std::uint64_t id, std::uint64_t bytes) {
  out_ << nlohmann::json{{"INSTRUCTION", "CONSTANT"}, {"NAME", name(id)}}.dump() << '\n';
  out_ << nlohmann::json{{"INSTRUCTION", "MEMORY"}, {"NAME", name(id)}, {"MEMORY", std::to_string(bytes)}}.dump()
       << '\n';
}

void TraceWriter::call(std::string_view op, std::span<const std::uint64_t> args,
                       std::span<const std::uint64_t> results, std::span<const std::uint64_t> result_bytes,
                       std::span<const std::int64_t> aliases, double time) {
  nlohmann::json arg_names = nlohmann::json::array();
  for (std::uint64_t id : args) arg_names.push_back(name(id));
  nlohmann::json result_names = nlohmann::json::array();
  for (std::uint64_t id : results) result_names.push_back(name(id));
  out_ << nlohmann::json{{"INSTRUCTION", "CALL"},
                         {"NAME", std::string(op)},
                         {"ARGS", arg_names},
                         {"RESULT", result_names},
                         {"TIME", std::to_string(static_cast<std::uint64_t>(std::llround(time)))}}
              .dump()
       << '\n';
  for (std::size_t i = 0; i < results.size(); ++i) {
    out_ << nlohmann::json{{"INSTRUCTION", "MEMORY"},
                           {"NAME", name(results[i])},
                           {"MEMORY", std::to_string(result_bytes[i])}}
                .dump()
         << '\n';
    out_ << nlohmann::json{{"INSTRUCTION", "ALIAS"}, {"NAME", name(results[i])}, {"ALIAS", std::to_string(aliases[i])}}
                .dump()
         << '\n';
  }
}

void TraceWriter::view(std::uint64_t base, std::uint64_t id, std::uint64_t bytes) {
  out_ << nlohmann::json{{"INSTRUCTION", "CALL"},
                         {"NAME", "view"},
                         {"ARGS", {name(base)}},
                         {"RESULT", {name(id)}},
                         {"TIME", "0"}}
              .dump()
       << '\n';
  out_ << nlohmann::json{{"INSTRUCTION", "MEMORY"}, {"NAME", name(id)}, {"MEMORY", std::to_string(bytes)}}.dump()
       << '\n';
  out_ << nlohmann::json{{"INSTRUCTION", "ALIAS"}, {"NAME", name(id)}, {"ALIAS", "0"}}.dump() << '\n';
}

void TraceWriter::copy_from(std::uint64_t dst, std::uint64_t src) {
  out_ << nlohmann::json{{"INSTRUCTION", "COPY_FROM"}, {"DST", name(dst)}, {"SRC", name(src)}}.dump() << '\n';
}

void TraceWriter::release(std::uint64_t id) {
  out_ << nlohmann::json{{"INSTRUCTION", "RELEASE"}, {"NAME", name(id)}}.dump() << '\n';
}

}  // namespace dtr::detail
