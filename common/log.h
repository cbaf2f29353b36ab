// The library's logger ("dtr", on stderr). Its level comes from DTR_LOG_LEVEL (trace, debug, info, warn,
// error, critical, off; default warn); a malformed value is reported once and the default kept.
#pragma once

#include <spdlog/logger.h>

namespace dtr::detail {

spdlog::logger& logger();

}  // namespace dtr::detail
