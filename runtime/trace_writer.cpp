#include "runtime/trace_writer.h"

#include <nlohmann/json.hpp>

#include <cmath>

#include "dtr/check.h"

namespace dtr::detail {

TraceWriter::TraceWriter(const std::string& path) : out_("DTR_TRACE", path) {
  line(nlohmann::json{{"INSTRUCTION", "ANNOTATE"}, {"ANNOTATION", "START"}});
}

void TraceWriter::line(const nlohmann::json& j) {
  std::string text = j.dump();
  text += '\n';
  out_.write(text);
}

void TraceWriter::constant(std::uint64_t id, std::uint64_t bytes) {
  line(nlohmann::json{{"INSTRUCTION", "CONSTANT"}, {"NAME", name(id)}});
  line(nlohmann::json{{"INSTRUCTION", "MEMORY"}, {"NAME", name(id)}, {"MEMORY", std::to_string(bytes)}});
}

void TraceWriter::call(std::string_view op, std::span<const std::uint64_t> args,
                       std::span<const std::uint64_t> results, std::span<const std::uint64_t> result_bytes,
                       std::span<const std::int64_t> aliases, double time) {
  nlohmann::json arg_names = nlohmann::json::array();
  for (std::uint64_t id : args) arg_names.push_back(name(id));
  nlohmann::json result_names = nlohmann::json::array();
  for (std::uint64_t id : results) result_names.push_back(name(id));
  line(nlohmann::json{{"INSTRUCTION", "CALL"},
                      {"NAME", std::string(op)},
                      {"ARGS", arg_names},
                      {"RESULT", result_names},
                      {"TIME", std::to_string(static_cast<std::uint64_t>(std::llround(time)))}});
  for (std::size_t i = 0; i < results.size(); ++i) {
    line(nlohmann::json{
        {"INSTRUCTION", "MEMORY"}, {"NAME", name(results[i])}, {"MEMORY", std::to_string(result_bytes[i])}});
    line(nlohmann::json{{"INSTRUCTION", "ALIAS"}, {"NAME", name(results[i])}, {"ALIAS", std::to_string(aliases[i])}});
  }
}

void TraceWriter::view(std::uint64_t base, std::uint64_t id, std::uint64_t bytes) {
  line(nlohmann::json{
      {"INSTRUCTION", "CALL"}, {"NAME", "view"}, {"ARGS", {name(base)}}, {"RESULT", {name(id)}}, {"TIME", "0"}});
  line(nlohmann::json{{"INSTRUCTION", "MEMORY"}, {"NAME", name(id)}, {"MEMORY", std::to_string(bytes)}});
  line(nlohmann::json{{"INSTRUCTION", "ALIAS"}, {"NAME", name(id)}, {"ALIAS", "0"}});
}

void TraceWriter::copy_from(std::uint64_t dst, std::uint64_t src) {
  line(nlohmann::json{{"INSTRUCTION", "COPY_FROM"}, {"DST", name(dst)}, {"SRC", name(src)}});
}

void TraceWriter::make_constant(std::uint64_t id) {
  line(nlohmann::json{{"INSTRUCTION", "MAKE_CONSTANT"}, {"NAME", name(id)}});
}

void TraceWriter::release(std::uint64_t id) {
  line(nlohmann::json{{"INSTRUCTION", "RELEASE"}, {"NAME", name(id)}});
}

}  // namespace dtr::detail
