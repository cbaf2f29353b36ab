// What every fuzz target checks (fuzz/README.md): a parser returns, or throws the dtr error its header
// documents, with a message of bounded length that says what it should. Anything else (another exception type,
// an overlong or empty message, a result that breaks the documented contract) is reported on stderr and ends
// the process with abort(), which libFuzzer and ctest both count as a failure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <string_view>
#include <typeinfo>

#include "dtr/error.h"

namespace dtr::fuzz {

// A message that echoes a value from the input must show a bounded prefix of it: whatever the input, no message
// is longer than this. DTR_FUZZ_MAX_MESSAGE=N changes the bound (0: no bound), e.g. to look past a known
// violation.
inline std::size_t max_message_bytes() {
  static const std::size_t bound = [] {
    const char* text = std::getenv("DTR_FUZZ_MAX_MESSAGE");  // NOLINT(concurrency-mt-unsafe): read once
    return text != nullptr ? static_cast<std::size_t>(std::strtoull(text, nullptr, 10)) : std::size_t{2048};
  }();
  return bound;
}

// For returns_or_throws where no exception at all is allowed.
struct Never : std::exception {};

[[noreturn]] inline void fail(std::string_view what, std::string_view detail = {}) {
  constexpr std::size_t kShown = 4096;  // of the detail (a message that broke its bound may be huge)
  std::fprintf(stderr, "\n==dtr-fuzz== CONTRACT VIOLATION: %.*s\n", static_cast<int>(what.size()), what.data());
  if (!detail.empty()) {
    const std::size_t shown = detail.size() < kShown ? detail.size() : kShown;
    std::fprintf(stderr, "==dtr-fuzz== %.*s%s\n", static_cast<int>(shown), detail.data(),
                 detail.size() > shown ? "... (cut)" : "");
    if (detail.size() > shown) std::fprintf(stderr, "==dtr-fuzz== (%zu bytes in all)\n", detail.size());
  }
  std::fflush(stderr);
  std::abort();
}

inline void require(bool condition, std::string_view what, std::string_view detail = {}) {
  if (!condition) fail(what, detail);
}

// The checks on a message every target makes; `must_contain` is something the message has to name (the
// variable, the file), empty for none.
inline void check_message(const char* message, std::string_view must_contain) {
  const std::string_view text(message);
  require(!text.empty(), "an error with an empty message");
  const std::size_t bound = max_message_bytes();
  if (bound != 0 && text.size() > bound) {
    fail("an error message of " + std::to_string(text.size()) + " bytes, over the bound of " + std::to_string(bound) +
             " (a value from the input echoed whole instead of a bounded prefix?)",
         text);
  }
  if (!must_contain.empty() && text.find(must_contain) == std::string_view::npos) {
    fail("an error message that does not name '" + std::string(must_contain) + "'", text);
  }
}

// Runs `parse`; returns whether it returned (true) or threw `Expected` (false, after the message checks). Any
// other exception is a contract violation: another dtr error type than the documented one, OutOfMemory,
// std::bad_alloc or any other std::exception.
// `also` is called with an Expected's message, for a target's own checks of it.
template <typename Expected, typename Parse, typename Also = void (*)(std::string_view)>
bool returns_or_throws(Parse&& parse, std::string_view must_contain, Also also = [](std::string_view) {}) {
  try {
    parse();
    return true;
  } catch (const Expected& e) {
    check_message(e.what(), must_contain);
    also(std::string_view(e.what()));
    return false;
  } catch (const dtr::Error& e) {
    fail(std::string("a dtr error of another type than the documented ") + typeid(Expected).name() + ": " +
             typeid(e).name(),
         e.what());
  } catch (const dtr::OutOfMemory& e) {
    fail("dtr::OutOfMemory from a parser", e.what());
  } catch (const std::bad_alloc& e) {
    fail("std::bad_alloc from a parser (an allocation sized by unchecked input?)", e.what());
  } catch (const std::exception& e) {
    fail(std::string("an exception that is not a dtr error: ") + typeid(e).name(), e.what());
  } catch (...) {
    fail("an exception that is not a std::exception");
  }
}

}  // namespace dtr::fuzz
