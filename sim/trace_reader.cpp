// The DTR prototype's JSON-lines op log (../shared/traces/README.md) into a Trace.
#include <nlohmann/json.hpp>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <istream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "dtr/check.h"
#include "dtr/sim.h"

namespace dtr::sim {
namespace {

using nlohmann::json;
using Kind = Instruction::Kind;

// A trace line may be up to this long; a longer one is refused (a file with no newlines would otherwise be
// read into memory whole).
constexpr std::size_t kMaxLineBytes = std::size_t{1} << 20;

// A value from the file as a message shows it: at most 80 characters, then how long it was.
std::string shown(const std::string& text) { return shown_value(text); }

// A JSON value as a message shows it: a scalar cut as any value; an array or object only by its size, never
// dumped (dump() recurses, and 100 000 nested arrays fit in a line: the stack overflowed).
std::string shown(const nlohmann::json& v) {
  if (v.is_array()) return "an array of " + std::to_string(v.size()) + " values";
  if (v.is_object()) return "an object of " + std::to_string(v.size()) + " fields";
  return shown_value(v.dump());
}

// Whether `k` is a whole number in [low, high): false for NaN (a cast of NaN to an integer is undefined).
bool whole_in(double k, double low, double high) { return k >= low && k < high && k == std::trunc(k); }

class Reader {
 public:
  explicit Reader(std::string source) { trace_.source = std::move(source); }

  void line(std::string_view text, std::uint32_t number) {
    line_ = number;
    if (text.find_first_not_of(" \t\r") == std::string_view::npos) return;  // blank lines are allowed
    const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) fail("expected a JSON object");
    const std::string instruction = string_field(j, "INSTRUCTION");
    if (!started_) {
      if (instruction == "ANNOTATE" && string_field(j, "ANNOTATION") == "START") started_ = true;
      return;
    }
    if (instruction == "MEMORY") return memory(j);
    if (instruction == "ALIAS") return alias(j);
    close_pending();
    Instruction in;
    in.line = number;
    if (instruction == "CONSTANT") {
      in.kind = Kind::constant;
      in.name = intern(string_field(j, "NAME"));
      pending_ = push(std::move(in));
    } else if (instruction == "CALL") {
      in.kind = Kind::call;
      in.op = string_field(j, "NAME");
      in.time_ns = number_field(j, "TIME");
      in.args = names_field(j, "ARGS");
      for (std::uint32_t r : names_field(j, "RESULT")) in.results.push_back(Instruction::Result{r, 0, -1});
      pending_ = push(std::move(in));
      pending_memory_.assign(trace_.instructions.back().results.size(), false);
    } else if (instruction == "MUTATE") {
      in.kind = Kind::mutate;
      in.op = string_field(j, "NAME");
      in.time_ns = number_field(j, "TIME");
      in.args = names_field(j, "ARGS");
      const json& m = field(j, "MUTATE");
      if (!m.is_array()) fail("MUTATE: expected a list of argument indices");
      for (const json& index : m) {
        const double k = number_value(index, "MUTATE");
        if (!whole_in(k, 0, static_cast<double>(in.args.size()))) {
          fail("MUTATE: index ", shown(index), " is not an index into its ", in.args.size(), " ARGS");
        }
        in.mutated.push_back(static_cast<std::uint32_t>(k));
      }
      push(std::move(in));
    } else if (instruction == "COPY" || instruction == "COPY_FROM") {
      in.kind = instruction == "COPY" ? Kind::copy : Kind::copy_from;
      in.name = intern(string_field(j, "DST"));
      in.source = intern(string_field(j, "SRC"));
      push(std::move(in));
    } else if (instruction == "MAKE_CONSTANT") {
      in.kind = Kind::make_constant;
      in.name = intern(string_field(j, "NAME"));
      push(std::move(in));
    } else if (instruction == "RELEASE") {
      in.kind = Kind::release;
      in.name = intern(string_field(j, "NAME"));
      push(std::move(in));
    } else if (instruction == "ANNOTATE") {
      in.kind = Kind::annotate;
      in.op = string_field(j, "ANNOTATION");
      push(std::move(in));
    } else {
      fail("unknown INSTRUCTION \"", shown(instruction),
           "\"; expected CONSTANT, MEMORY, ALIAS, CALL, MUTATE, COPY, COPY_FROM, MAKE_CONSTANT, RELEASE or ANNOTATE");
    }
  }

  Trace finish() {
    close_pending();
    if (!started_) {
      line_ = 0;
      fail("no {\"INSTRUCTION\":\"ANNOTATE\",\"ANNOTATION\":\"START\"} line: nothing to replay");
    }
    return std::move(trace_);
  }

 private:
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);

  template <typename... Parts>
  [[noreturn]] void fail(const Parts&... parts) const {
    if (line_ == 0) DTR_THROW(TraceError, trace_.source, ": ", parts...);
    DTR_THROW(TraceError, trace_.source, ":", line_, ": ", parts...);
  }

  const json& field(const json& j, const char* key) const {
    const auto it = j.find(key);
    if (it == j.end()) fail("missing field \"", key, "\"");
    return *it;
  }

  std::string string_field(const json& j, const char* key) const {
    const json& v = field(j, key);
    if (!v.is_string()) fail("field \"", key, "\": expected a string, got ", shown(v));
    return v.get<std::string>();
  }

  // Numbers are strings in the prototype's logs ("1728"); plain JSON numbers are accepted too.
  double number_value(const json& v, const char* key) const {
    if (v.is_number()) return v.get<double>();
    if (v.is_string()) {
      const std::string& s = v.get_ref<const std::string&>();
      double value = 0;
      const auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), value);
      if (error == std::errc{} && end == s.data() + s.size() && !s.empty()) return value;
    }
    fail("field \"", key, "\": expected a number (or a string holding one), got ", shown(v));
  }

  double number_field(const json& j, const char* key) const {
    const double value = number_value(field(j, key), key);
    if (!(value >= 0) || value > 1e18) fail("field \"", key, "\": expected a non-negative number, got ", value);
    return value;
  }

  std::vector<std::uint32_t> names_field(const json& j, const char* key) {
    const json& v = field(j, key);
    if (!v.is_array()) fail("field \"", key, "\": expected a list of tensor names, got ", shown(v));
    std::vector<std::uint32_t> names;
    names.reserve(v.size());
    for (const json& name : v) {
      if (!name.is_string()) fail("field \"", key, "\": expected tensor names (strings), got ", shown(name));
      names.push_back(intern(name.get<std::string>()));
    }
    return names;
  }

  std::uint32_t intern(const std::string& name) {
    const auto [it, inserted] = ids_.try_emplace(name, static_cast<std::uint32_t>(trace_.names.size()));
    if (inserted) trace_.names.push_back(name);
    return it->second;
  }

  std::size_t push(Instruction in) {
    if (in.kind == Kind::call || in.kind == Kind::mutate) trace_.calls += 1;
    trace_.instructions.push_back(std::move(in));
    return trace_.instructions.size() - 1;
  }

  // MEMORY belongs to the CONSTANT just read, or to a result of the CALL just read.
  void memory(const json& j) {
    const std::uint32_t name = intern(string_field(j, "NAME"));
    const double bytes = number_field(j, "MEMORY");
    if (bytes != static_cast<double>(static_cast<std::uint64_t>(bytes))) fail("MEMORY: expected whole bytes");
    if (pending_ == kNone) fail("MEMORY for '", shown(trace_.names[name]), "' follows no CONSTANT or CALL");
    Instruction& in = trace_.instructions[pending_];
    if (in.kind == Kind::constant) {
      if (in.name != name) fail("MEMORY for '", shown(trace_.names[name]), "' follows CONSTANT '", shown(trace_.names[in.name]), "'");
      if (constant_has_memory_) fail("a second MEMORY line for CONSTANT '", shown(trace_.names[name]), "'");
      in.bytes = static_cast<std::uint64_t>(bytes);
      constant_has_memory_ = true;
      return;
    }
    const std::size_t r = result_index(in, name, "MEMORY");
    if (pending_memory_[r]) fail("a second MEMORY line for '", shown(trace_.names[name]), "'");
    in.results[r].bytes = static_cast<std::uint64_t>(bytes);
    pending_memory_[r] = true;
  }

  void alias(const json& j) {
    const std::uint32_t name = intern(string_field(j, "NAME"));
    const double k = number_value(field(j, "ALIAS"), "ALIAS");
    if (pending_ == kNone || trace_.instructions[pending_].kind != Kind::call) {
      fail("ALIAS for '", shown(trace_.names[name]), "' follows no CALL");
    }
    Instruction& in = trace_.instructions[pending_];
    const std::size_t r = result_index(in, name, "ALIAS");
    if (k != -1 && !whole_in(k, 0, static_cast<double>(in.args.size()))) {
      fail("ALIAS of '", shown(trace_.names[name]), "': expected -1 or an index into the CALL's ", in.args.size(), " ARGS, got ",
           k);
    }
    in.results[r].alias = static_cast<std::int32_t>(k);
  }

  std::size_t result_index(const Instruction& in, std::uint32_t name, const char* what) const {
    for (std::size_t r = 0; r < in.results.size(); ++r) {
      if (in.results[r].name == name) return r;
    }
    fail(what, " for '", shown(trace_.names[name]), "', which is not a RESULT of the CALL at line ", in.line);
  }

  // Once another instruction starts, the CONSTANT or CALL before it must have had all its MEMORY lines.
  void close_pending() {
    if (pending_ == kNone) return;
    const Instruction& in = trace_.instructions[pending_];
    if (in.kind == Kind::constant && !constant_has_memory_) {
      fail("CONSTANT '", shown(trace_.names[in.name]), "' at line ", in.line, " has no MEMORY line");
    }
    if (in.kind == Kind::call) {
      for (std::size_t r = 0; r < in.results.size(); ++r) {
        if (!pending_memory_[r]) {
          fail("result '", shown(trace_.names[in.results[r].name]), "' of the CALL at line ", in.line, " has no MEMORY line");
        }
      }
    }
    pending_ = kNone;
    constant_has_memory_ = false;
  }

  Trace trace_;
  std::unordered_map<std::string, std::uint32_t> ids_;
  bool started_ = false;
  std::uint32_t line_ = 0;
  std::size_t pending_ = kNone;  // the CONSTANT or CALL whose MEMORY and ALIAS lines may follow
  std::vector<bool> pending_memory_;
  bool constant_has_memory_ = false;
};

}  // namespace

Trace parse_trace(std::istream& in, const std::string& source) {
  Reader reader(source);
  std::vector<char> buffer(kMaxLineBytes + 1);  // a line, its newline dropped, and the terminating zero
  std::uint32_t number = 0;
  while (true) {
    in.getline(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const auto got = static_cast<std::size_t>(in.gcount());
    if (in.bad() || (in.fail() && got == 0)) break;  // a read error, or the end
    DTR_CHECK(!in.fail(), TraceError, source, ":", number + 1, ": the line is longer than ",
              kMaxLineBytes, " bytes (is this a trace, one JSON object per line?)");
    const bool ended = in.eof();  // the last line, with no newline after it
    reader.line(std::string_view(buffer.data(), ended ? got : got - 1), ++number);
    if (ended) break;
  }
  DTR_CHECK(!in.bad(), TraceError, source, ": read error after line ", number);
  return reader.finish();
}

Trace read_trace(const std::string& path) {
  // A directory opens on Linux and only fails at the first read: say what it is before trying.
  std::error_code ignored;
  DTR_CHECK(!std::filesystem::is_directory(path, ignored), TraceError, path, ": is a directory, not a trace file (",
            std::strerror(EISDIR), ")");
  errno = 0;
  std::ifstream in(path);
  if (!in.is_open()) {
    const int error = errno;  // set by the open(2) beneath the stream
    const char* reason = error != 0 ? std::strerror(error) : "unknown reason";
    if (error == ENOENT) DTR_THROW(TraceError, path, ": no such trace file (", reason, ")");
    if (error == EACCES) DTR_THROW(TraceError, path, ": the trace is not readable (", reason, ")");
    DTR_THROW(TraceError, path, ": cannot open the trace (", reason, ")");
  }
  return parse_trace(in, path);
}

}  // namespace dtr::sim
