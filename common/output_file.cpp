#include "common/output_file.h"

#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "dtr/check.h"

namespace dtr::detail {

OutputFile::OutputFile(std::string setting, std::string path) : setting_(std::move(setting)), path_(std::move(path)) {
  file_ = std::fopen(path_.c_str(), "w");
  DTR_CHECK(file_ != nullptr, IoError, setting_, ": cannot write '", path_, "': ", std::strerror(errno));
}

OutputFile::~OutputFile() { close(); }

bool OutputFile::write(std::string_view text) {
  if (file_ == nullptr || !failure_.empty()) return false;
  if (std::fwrite(text.data(), 1, text.size(), file_) != text.size()) {
    fail(errno);
    return false;
  }
  return true;
}

std::string OutputFile::close() {
  if (file_ == nullptr) return failure_;
  errno = 0;
  const bool flushed = std::fflush(file_) == 0 && std::ferror(file_) == 0;
  const int flush_error = errno;
  const bool closed = std::fclose(file_) == 0;
  const int close_error = errno;
  file_ = nullptr;
  if (failure_.empty() && (!flushed || !closed)) fail(!flushed ? flush_error : close_error);
  return failure_;
}

std::string OutputFile::fail(int error) {
  failure_ = concat(setting_, ": writing '", path_, "' failed: ", error != 0 ? std::strerror(error) : "an I/O error",
                    "; nothing more is written to it");
  logger().error("{}", failure_);
  return failure_;
}

}  // namespace dtr::detail
