// DTR_CHECK(condition, ExceptionType, message parts...): throw ExceptionType carrying file:line and the
// message parts streamed together when the condition is false. ExceptionType must take
// (std::string, const char* file, int line), as every dtr::Error does.
#pragma once

#include <sstream>
#include <string>
#include <utility>

#include "dtr/error.h"

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
