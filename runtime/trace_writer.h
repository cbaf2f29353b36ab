// DTR_TRACE: the run as the DTR prototype's JSON-lines log (../shared/traces/README.md), so that our runs
// replay in its simulator and in dtr-sim. Every number is written as a string, as the prototype does.
// Internal to runtime/; driven by the runtime's thread.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "common/output_file.h"

namespace dtr::detail {

class TraceWriter {
 public:
  // Opens `path` for writing and logs the START annotation; throws dtr::IoError if it cannot. A write that
  // fails later is logged once (with the reason) and ends the trace; so does a failure at close().
  explicit TraceWriter(const std::string& path);
  // Flushes and closes the file: "" when everything was written, else what failed.
  std::string close() { return out_.close(); }

  // A value with no producer: CONSTANT then MEMORY.
  void constant(std::uint64_t id, std::uint64_t bytes);
  // An op: CALL, then MEMORY and ALIAS for each result (`aliases`: the argument a result views; -1: none).
  // `time` is the op's cost.
  void call(std::string_view op, std::span<const std::uint64_t> args, std::span<const std::uint64_t> results,
            std::span<const std::uint64_t> result_bytes, std::span<const std::int64_t> aliases, double time);
  // A view `id` of `base`: a CALL to "view" whose result aliases its input 0 (no memory of its own).
  void view(std::uint64_t base, std::uint64_t id, std::uint64_t bytes);
  // `dst` now refers to the value `src` (an in-place update, copy-on-write).
  void copy_from(std::uint64_t dst, std::uint64_t src);
  // `id`'s storage became a constant (Runtime::make_constant): its lineage cut, never evicted again.
  void make_constant(std::uint64_t id);
  // A user reference died.
  void release(std::uint64_t id);

 private:
  static std::string name(std::uint64_t id) {
    std::string text = "x";
    text += std::to_string(id);
    return text;
  }
  void line(const nlohmann::json& j);
  OutputFile out_;
};

}  // namespace dtr::detail
