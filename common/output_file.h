// A file dtr writes for a user (DTR_TRACE, DTR_STATS): its write errors are reported with the operating
// system's reason, never lost at close. Internal to dtr.
//
// Thread safety: one thread at a time.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace dtr::detail {

class OutputFile {
 public:
  // Opens `path` for writing, truncating it; throws dtr::IoError naming `setting` (e.g. "DTR_TRACE"), the path
  // and the reason.
  OutputFile(std::string setting, std::string path);
  // Closes the file; a failure not yet reported is logged.
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // Appends `text`. The first failure is logged once ("...; nothing more is written") and later writes are
  // dropped: false from then on.
  bool write(std::string_view text);
  // Flushes and closes; returns "" when everything was written, else the message (which is also logged).
  std::string close();
  const std::string& path() const { return path_; }

 private:
  std::string fail(int error);

  std::string setting_;
  std::string path_;
  std::FILE* file_ = nullptr;
  std::string failure_;
};

}  // namespace dtr::detail
