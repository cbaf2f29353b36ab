#include "common/log.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/base_sink.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

namespace dtr::detail {
namespace {

// stderr, written and flushed line by line, with its own lock: nothing it uses is a static of spdlog's, which
// static destruction may already have destroyed when dtr logs at exit.
class StderrSink final : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t line;
    formatter_->format(msg, line);
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
  }
  void flush_() override { std::fflush(stderr); }
};

spdlog::logger* make_logger() {
  auto log = new spdlog::logger("dtr", std::make_shared<StderrSink>());  // NOLINT(cppcoreguidelines-owning-memory)
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
}

}  // namespace

spdlog::logger& logger() {
  // Never destroyed: runtimes, allocators and C API calls log during static destruction and from atexit
  // handlers, after a function-local static would have died.
  static spdlog::logger* const instance = make_logger();
  return *instance;
}

}  // namespace dtr::detail
