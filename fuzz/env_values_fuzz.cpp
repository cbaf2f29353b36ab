// Fuzz target: the parsers of DTR_* environment values (include/dtr/budget.h, config.h, device.h).
//
// Input: byte 0 picks the parser (its value modulo 10, in the order of kParsers); the rest is the value. For
// DTR_MEMORY_BUDGET, byte 1 picks the device capacity that percentages are of (kCapacities) and the value
// starts at byte 2. Each parser returns or throws dtr::ConfigError naming its variable, in a message of bounded
// length; what it returns is checked against the documented forms: a name reads back to itself, a number is
// in its documented range, and a budget is the bytes its text says (a reference computed in long double).
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "dtr/budget.h"
#include "dtr/config.h"
#include "dtr/device.h"
#include "fuzz_check.h"

namespace {

using dtr::fuzz::fail;
using dtr::fuzz::require;

constexpr std::uint64_t kCapacities[] = {0,           1,          100,          std::uint64_t{1} << 30,
                                         80ull << 30, 141ull << 30, std::uint64_t{1} << 63, UINT64_MAX};

std::string show(std::string_view text) { return "value \"" + std::string(text.substr(0, 200)) + "\""; }

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

// The budget `text` says, by the header's grammar, in long double (relative error about 1e-19): -1 when `text`
// is not of that grammar. `percent` is set for a percentage.
long double reference_budget(std::string_view text, std::uint64_t capacity, bool& percent) {
  percent = false;
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  std::size_t i = 0;
  while (i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.')) ++i;
  const std::string number(text.substr(0, i));
  if (number.empty() || number.front() == '.' || number.back() == '.' ||
      std::count(number.begin(), number.end(), '.') > 1) {
    return -1;
  }
  const long double value = std::strtold(number.c_str(), nullptr);
  std::string_view rest = text.substr(i);
  if (rest.empty()) return number.find('.') == std::string::npos ? value : -1;
  if (rest.front() == ' ') rest.remove_prefix(1);
  if (rest == "%") {
    percent = true;
    return static_cast<long double>(capacity) * value / 100;
  }
  std::string unit(rest);
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::pair<const char*, long double> units[] = {
      {"b", 1},     {"kib", 1024.0L}, {"mib", 1048576.0L}, {"gib", 1073741824.0L}, {"tib", 1099511627776.0L},
      {"kb", 1e3L}, {"mb", 1e6L},     {"gb", 1e9L},        {"tb", 1e12L}};
  for (const auto& [name, factor] : units) {
    if (unit == name) return value * factor;
  }
  return -1;
}

void check_budget(std::string_view text, std::uint64_t capacity) {
  std::uint64_t bytes = 0;
  const bool returned = dtr::fuzz::returns_or_throws<dtr::ConfigError>(
      [&] { bytes = dtr::parse_memory_budget(text, capacity); }, "DTR_MEMORY_BUDGET");
  if (!returned) return;
  const std::string what = show(text) + ", capacity " + std::to_string(capacity) + ": parsed as " +
                           std::to_string(bytes) + " bytes";
  require(bytes > 0, "parse_memory_budget returned 0 bytes (documented: zero is an error)", what);
  bool percent = false;
  const long double reference = reference_budget(text, capacity, percent);
  require(reference >= 0, "parse_memory_budget accepted a value outside the documented forms", what);
  require(!percent || capacity != 0, "a percentage accepted without a capacity", what);
  // The parser rounds down to whole bytes; the reference is within 1e-15 of the exact value.
  const long double exact_low = reference * (1 - 1e-15L) - 1;
  const long double exact_high = reference * (1 + 1e-15L);
  require(static_cast<long double>(bytes) >= exact_low && static_cast<long double>(bytes) <= exact_high,
          "parse_memory_budget's bytes are not what the text says (an overflow that wrapped?)",
          what + ", reference " + std::to_string(static_cast<double>(reference)));
}

// The enum parsers: an accepted value is the name to_string gives back.
template <typename Parse>
void check_name(std::string_view text, const char* variable, Parse parse) {
  const char* name = nullptr;
  if (!dtr::fuzz::returns_or_throws<dtr::ConfigError>([&] { name = dtr::to_string(parse(text)); }, variable)) return;
  require(text == name, std::string(variable) + ": an accepted value is not the name it parses to", show(text));
}

void check_size_floor(std::string_view text) {
  double floor = -1;
  if (!dtr::fuzz::returns_or_throws<dtr::ConfigError>([&] { floor = dtr::parse_size_floor(text); }, "DTR_SIZE_FLOOR")) {
    return;
  }
  require(std::isfinite(floor) && floor >= 0, "DTR_SIZE_FLOOR: accepted a value that is not a non-negative number",
          show(text));
}

void check_thrash_limit(std::string_view text) {
  std::optional<double> limit;
  if (!dtr::fuzz::returns_or_throws<dtr::ConfigError>([&] { limit = dtr::parse_thrash_limit(text); },
                                                      "DTR_THRASH_LIMIT")) {
    return;
  }
  require(limit.has_value() == (text != "off"), "DTR_THRASH_LIMIT: off is nullopt and nothing else is", show(text));
  require(!limit || (std::isfinite(*limit) && *limit >= 1), "DTR_THRASH_LIMIT: accepted a limit that is not >= 1",
          show(text));
}

void check_timed_runs(std::string_view text) {
  std::optional<std::uint32_t> runs;
  if (!dtr::fuzz::returns_or_throws<dtr::ConfigError>([&] { runs = dtr::parse_timed_runs(text); }, "DTR_TIMED_RUNS")) {
    return;
  }
  require(runs.has_value() == (text != "all"), "DTR_TIMED_RUNS: all is nullopt and nothing else is", show(text));
  require(!runs || (*runs >= 1 && *runs <= 1'000'000), "DTR_TIMED_RUNS: accepted a count outside 1..1000000",
          show(text));
}

void check_heuristic(std::string_view text) {
  std::string name;
  if (!dtr::fuzz::returns_or_throws<dtr::ConfigError>([&] { name = dtr::parse_heuristic(text); }, "DTR_HEURISTIC")) {
    return;
  }
  require(name == text, "DTR_HEURISTIC: the accepted name is not the value", show(text));
  // Any accepted name makes a heuristic, which says whether it evicts windows; that is not an error.
  dtr::fuzz::returns_or_throws<dtr::fuzz::Never>([&] { (void)dtr::fragmentation_aware(name); }, "");
}

void check_device(std::string_view text) {
  dtr::Device device;
  if (!dtr::fuzz::returns_or_throws<dtr::ConfigError>([&] { device = dtr::parse_device(text); }, "DTR_DEVICE")) return;
  require(device.index >= 0, "DTR_DEVICE: a negative index", show(text));
  dtr::Device again;
  dtr::fuzz::returns_or_throws<dtr::fuzz::Never>([&] { again = dtr::parse_device(device.to_string()); }, "");
  require(again == device, "DTR_DEVICE: a parsed device does not read back from its to_string()", show(text));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 12) {
    case 0:
      if (size < 2) return 0;
      check_budget(text.substr(1), kCapacities[data[1] % std::size(kCapacities)]);
      break;
    case 1:
      check_name(text, "DTR_COST_MODEL", [](std::string_view t) { return dtr::parse_cost_model(t); });
      break;
    case 2:
      check_name(text, "DTR_CLOCK", [](std::string_view t) { return dtr::parse_clock(t); });
      break;
    case 3:
      check_name(text, "DTR_BUDGET_MODE", [](std::string_view t) { return dtr::parse_budget_mode(t); });
      break;
    case 4:
      check_name(text, "DTR_INPLACE", [](std::string_view t) { return dtr::parse_inplace_mode(t); });
      break;
    case 5:
      check_name(text, "DTR_SEARCH", [](std::string_view t) { return dtr::parse_search(t); });
      break;
    case 6:
      check_size_floor(text);
      break;
    case 7:
      check_thrash_limit(text);
      break;
    case 8:
      check_heuristic(text);
      break;
    case 10:  // after the others, so that their corpus entries (first byte 0-9) keep their checks
      check_timed_runs(text);
      break;
    case 11:
      check_name(text, "DTR_RECOMPUTE_ORDER", [](std::string_view t) { return dtr::parse_recompute_order(t); });
      break;
    default:
      check_device(text);
      break;
  }
  return 0;
}
