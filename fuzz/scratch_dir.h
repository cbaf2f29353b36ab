// A folder of this process's own for the targets whose parser reads a file (the state-dict loader, the IDX
// reader): made once under /dev/shm (memory, when there is one) or $TMPDIR or /tmp, reused by every input, and
// removed when the process exits normally (libFuzzer's crash paths leave it behind: its name says which process
// made it).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "fuzz_check.h"

namespace dtr::fuzz {

inline const std::filesystem::path& scratch_dir() {
  // Never destroyed: the exit handler that removes the folder runs after static destructors would have.
  static const std::filesystem::path* const dir = [] {
    namespace fs = std::filesystem;
    std::string base = "/tmp";
    if (const char* tmp = std::getenv("TMPDIR"); tmp != nullptr && *tmp != '\0') base = tmp;  // NOLINT
    std::error_code ec;
    if (fs::is_directory("/dev/shm", ec) && access("/dev/shm", W_OK) == 0) base = "/dev/shm";
    std::string pattern = base + "/dtr-fuzz-" + std::to_string(getpid()) + "-XXXXXX";
    require(mkdtemp(pattern.data()) != nullptr, "cannot make a scratch folder", pattern);
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(scratch_dir(), ignored);
    });
    return new fs::path(pattern);
  }();
  return *dir;
}

// Writes `bytes` to `path`, replacing what was there.
inline void write_file(const std::filesystem::path& path, const std::uint8_t* bytes, std::size_t size) {
  std::FILE* file = std::fopen(path.c_str(), "wb");
  require(file != nullptr, "cannot write a scratch file", path.string());
  const bool written = size == 0 || std::fwrite(bytes, 1, size, file) == size;
  require(std::fclose(file) == 0 && written, "cannot write a scratch file", path.string());
}

}  // namespace dtr::fuzz
