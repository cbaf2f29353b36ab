#include "dtr/budget.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <string>
#include <utility>

#include "dtr/check.h"

namespace dtr {

const char* const kMemoryBudgetForms =
    "a byte count (1500000000), a size with a unit (512MiB, 8GiB, 1.5GB; units B, KiB, MiB, GiB, TiB and "
    "decimal KB, MB, GB, TB), or a percentage of the device's capacity in (0%, 100%] (60%)";

namespace {

__extension__ using u128 = unsigned __int128;  // exact arithmetic on 64-bit byte counts

constexpr std::array<std::pair<const char*, std::uint64_t>, 9> kUnits = {{
    {"b", 1},
    {"kib", std::uint64_t{1} << 10},
    {"mib", std::uint64_t{1} << 20},
    {"gib", std::uint64_t{1} << 30},
    {"tib", std::uint64_t{1} << 40},
    {"kb", 1000},
    {"mb", 1000 * 1000},
    {"gb", 1000 * 1000 * 1000},
    {"tb", std::uint64_t{1000} * 1000 * 1000 * 1000},
}};

// A decimal number as integer / 10^scale, exactly.
struct Decimal {
  u128 integer = 0;  // all digits, fraction included
  u128 scale = 1;    // 10^(digits after the point)
  bool has_point = false;
};

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

std::string_view trim(std::string_view text) {
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return text;
}

// Reads digits[.digits] from the front of `text`; false if there is no digit or the number is too long.
bool read_decimal(std::string_view& text, Decimal& out) {
  if (text.empty() || text.front() < '0' || text.front() > '9') return false;
  std::size_t digits = 0;
  std::size_t i = 0;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '.' && !out.has_point) {
      out.has_point = true;
      continue;
    }
    if (c < '0' || c > '9') break;
    if (++digits > 30) return false;  // beyond any budget; also keeps the u128 arithmetic exact
    out.integer = out.integer * 10 + static_cast<unsigned>(c - '0');
    if (out.has_point) out.scale *= 10;
  }
  if (digits == 0 || (i > 0 && text[i - 1] == '.')) return false;
  text.remove_prefix(i);
  return true;
}

}  // namespace

std::uint64_t parse_memory_budget(std::string_view text, std::uint64_t capacity_bytes, std::string_view variable) {
  const std::string original(text);
  auto fail = [&](std::string_view why) {
    DTR_THROW(ConfigError, variable, "=\"", shown_value(original), "\" is not a memory budget (", why, "); expected ",
              kMemoryBudgetForms);
  };
  text = trim(text);
  if (text.empty()) fail("it is empty");
  if (text.front() == '-') fail("it is negative");
  Decimal number;
  if (!read_decimal(text, number)) fail("it does not start with a number");
  if (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  // Trailing zeros after the point change nothing ("50.000%" is 50%); what is left must fit in 64 bits, so
  // that its product with a capacity or a unit fits in 128 (30 digits times a capacity wrapped around).
  while (number.scale > 1 && number.integer % 10 == 0) {
    number.integer /= 10;
    number.scale /= 10;
  }
  if (number.integer > u128{UINT64_MAX}) fail("it has more than 19 significant digits");

  u128 bytes = 0;
  if (text.empty()) {
    if (number.has_point) fail("a byte count must be a whole number");
    bytes = number.integer;
  } else if (text == "%") {
    if (capacity_bytes == 0) fail("a percentage needs the device's capacity, which is unknown here");
    const u128 hundred = u128{100} * number.scale;
    if (number.integer == 0 || number.integer > hundred) fail("a percentage must be in (0, 100]");
    bytes = u128{capacity_bytes} * number.integer / hundred;
  } else {
    std::string unit(text);
    std::transform(unit.begin(), unit.end(), unit.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    const auto* found = std::find_if(kUnits.begin(), kUnits.end(), [&](const auto& u) { return unit == u.first; });
    if (found == kUnits.end()) fail("unknown unit '" + shown_value(text) + "'");
    bytes = number.integer * found->second / number.scale;
  }
  if (bytes == 0) fail("it is zero; unset the variable for no budget");
  if (bytes > u128{UINT64_MAX}) fail("it does not fit in 64 bits");
  return static_cast<std::uint64_t>(bytes);
}

std::optional<std::uint64_t> memory_budget_from_env(std::uint64_t capacity_bytes) {
  const char* value = std::getenv("DTR_MEMORY_BUDGET");  // NOLINT(concurrency-mt-unsafe): read-only use
  if (value == nullptr) return std::nullopt;
  return parse_memory_budget(value, capacity_bytes, "DTR_MEMORY_BUDGET");
}

}  // namespace dtr
