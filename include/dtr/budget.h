// Memory budgets as users write them: DTR_MEMORY_BUDGET=8GiB, 512MiB, 1500000000, 1.5GB or 60% (of the
// device's capacity).
//
// Thread safety: every function is thread-safe (the environment is only read).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace dtr {

// The forms a budget may take, for error messages.
extern const char* const kMemoryBudgetForms;

// Parses a budget into bytes. `capacity_bytes` resolves percentages; a percentage with capacity 0 (unknown)
// is an error. Accepted: a positive integer byte count; a positive decimal number followed by a unit
// (B, KiB, MiB, GiB, TiB, or decimal KB, MB, GB, TB; case-insensitive, one optional space before the unit);
// a percentage in (0, 100] followed by '%'. Anything else (empty, negative, zero, "8 gigs", "150%", a value
// that overflows 64 bits) throws dtr::ConfigError naming `variable` and the accepted forms.
std::uint64_t parse_memory_budget(std::string_view text, std::uint64_t capacity_bytes,
                                  std::string_view variable = "DTR_MEMORY_BUDGET");

// The budget in DTR_MEMORY_BUDGET, or nullopt when the variable is unset (no budget). Set but malformed
// (empty included) throws dtr::ConfigError.
std::optional<std::uint64_t> memory_budget_from_env(std::uint64_t capacity_bytes);

}  // namespace dtr
