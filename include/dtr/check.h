// DTR_CHECK(condition, ExceptionType, message parts...): throw ExceptionType carrying file:line and the
// message parts streamed together when the condition is false. ExceptionType must take
// (std::string, const char* file, int line), as every dtr::Error does.
#pragma once

#include <sstream>
#include <string>
#include <string_view>
#include <utility>

#include "dtr/error.h"

namespace dtr {

// A value from the user's input as an error message shows it: whole up to 80 characters, else its first 80
// and its length, so that no message grows with the input (a 1 MiB trace name, a runaway variable).
inline std::string shown_value(std::string_view text) {
  constexpr std::size_t kShown = 80;
  if (text.size() <= kShown) return std::string(text);
  return std::string(text.substr(0, kShown)) + "... (" + std::to_string(text.size()) + " characters)";
}

}  // namespace dtr

namespace dtr::detail {

template <typename... Parts>
std::string concat(Parts&&... parts) {
  std::ostringstream out;
  (out << ... << std::forward<Parts>(parts));
  return out.str();
}

}  // namespace dtr::detail

#define DTR_THROW(ExceptionType, ...) \
  throw ExceptionType(::dtr::detail::concat(__VA_ARGS__), __FILE__, __LINE__)

#define DTR_CHECK(condition, ExceptionType, ...) \
  do {                                           \
    if (!(condition)) {                          \
      DTR_THROW(ExceptionType, __VA_ARGS__);     \
    }                                            \
  } while (false)
