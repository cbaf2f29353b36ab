// Typed exceptions thrown by dtr. what() is the message users read; every dtr error also carries the source
// location that raised it (file(), line(), relative to the project), which DTR_LOG_LEVEL=debug logs.
//
// Thread safety: exception objects are immutable after construction.
#pragma once

#include <cstdint>
#include <new>
#include <stdexcept>
#include <string>

namespace dtr {

// Base of every dtr error except OutOfMemory (which derives from std::bad_alloc so that code written
// against the standard allocator contract catches it).
class Error : public std::runtime_error {
 public:
  Error(const std::string& message, const char* file, int line);
  const char* file() const noexcept { return file_; }
  int line() const noexcept { return line_; }

 private:
  const char* file_;
  int line_;
};

// A caller broke a documented precondition: a bad alignment, a foreign or double-freed pointer, ...
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

// A configuration value (an environment variable or its in-code equivalent) could not be parsed.
// The message names the variable and the accepted forms.
class ConfigError : public InvalidArgument {
 public:
  using InvalidArgument::InvalidArgument;
};

// Tensor shapes that an op cannot take (mismatched matmul, bad axis, ...). Raised when the op is called, before
// anything is allocated; the message names the op and the shapes.
class ShapeError : public InvalidArgument {
 public:
  using InvalidArgument::InvalidArgument;
};

// A trace (the DTR prototype's JSON-lines op log) that cannot be read: the message names the file, the line
// number and what was expected there.
class TraceError : public InvalidArgument {
 public:
  using InvalidArgument::InvalidArgument;
};

// Recomputation passed the thrash limit (Config::thrash_limit, DTR_THRASH_LIMIT): the budget is so tight that
// evicted tensors keep recomputing each other. Thrown from inside rematerialization, as soon as the limit is
// passed; the runtime stays usable (release tensors, raise the budget, run the next op). The message names the
// op being run and the one being recomputed, the budget, the overhead reached, the ops whose recomputation cost
// most so far (Runtime::recomputations_by_op) and what to try.
class Thrashing : public Error {
 public:
  using Error::Error;
};

// A file dtr was asked to write (DTR_TRACE, DTR_STATS, a tool's output) could not be opened or written: the
// message names the setting or option, the file and the operating system's reason.
class IoError : public Error {
 public:
  using Error::Error;
};

// A device was asked for that this build or this machine cannot provide, or a device call failed.
class DeviceError : public Error {
 public:
  using Error::Error;
};

// The memory state when an allocation failed; every field is in bytes. `budget_bytes` is 0 when no budget
// is set.
struct OutOfMemoryInfo {
  std::uint64_t requested_bytes = 0;
  std::uint64_t budget_bytes = 0;
  std::uint64_t capacity_bytes = 0;
  std::uint64_t reserved_bytes = 0;
  std::uint64_t allocated_bytes = 0;
  std::uint64_t largest_free_block_bytes = 0;
};

// An allocation could not be served within the budget or the device's capacity.
class OutOfMemory : public std::bad_alloc {
 public:
  OutOfMemory(std::string message, OutOfMemoryInfo info, const char* file, int line);
  const char* what() const noexcept override { return message_.c_str(); }
  const OutOfMemoryInfo& info() const noexcept { return info_; }
  const char* file() const noexcept { return file_; }
  int line() const noexcept { return line_; }

 private:
  std::string message_;
  OutOfMemoryInfo info_;
  const char* file_;
  int line_;
};

// "1.50 GiB (1610612736 bytes)": byte counts in error messages and logs.
std::string format_bytes(std::uint64_t bytes);

}  // namespace dtr
