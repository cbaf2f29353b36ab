#include "common/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <memory>
#include <string>

namespace dtr::detail {

spdlog::logger& logger() {
  static const std::shared_ptr<spdlog::logger> instance = [] {
    auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    auto log = std::make_shared<spdlog::logger>("dtr", sink);
    log->set_pattern("[dtr %L] %v");
    log->set_level(spdlog::level::warn);
    if (const char* text = std::getenv("DTR_LOG_LEVEL")) {  // NOLINT(concurrency-mt-unsafe): read once
      const auto level = spdlog::level::from_str(text);
      // from_str answers "off" for anything it does not know; only "off" itself may mean off.
      if (level != spdlog::level::off || std::string(text) == "off") {
        log->set_level(level);
      } else {
        log->error("DTR_LOG_LEVEL=\"{}\" is not a log level; expected trace, debug, info, warn, error, "
                   "critical or off; keeping warn",
                   text);
      }
    }
    return log;
  }();
  return *instance;
}

}  // namespace dtr::detail
