// Fault injection: a MemoryResource adaptor that fails allocations on a schedule, so that tests (and users
// hardening their own programs) can check that every allocation failure surfaces as dtr::OutOfMemory or is
// recovered from, and that nothing leaks or stays pinned afterwards.
//
// Ownership: the adaptor owns its upstream. Thread safety: every member function is thread-safe (a mutex).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>

#include "dtr/memory_resource.h"

namespace dtr {

// When allocations fail; the conditions add up (an allocation fails if any says so).
struct FailureSchedule {
  std::uint64_t every_nth = 0;              // the Nth, 2Nth, ... allocation fails (0: none)
  double probability = 0.0;                 // each allocation fails with this probability, drawn from `seed`
  std::uint64_t seed = 1;
  std::optional<std::uint64_t> max_bytes;   // an allocation that would hold more than this in all fails
};

class FailingResource final : public MemoryResource {
 public:
  // Throws dtr::InvalidArgument for a null upstream or a probability outside [0, 1].
  FailingResource(std::unique_ptr<MemoryResource> upstream, FailureSchedule schedule);

  std::size_t capacity() const override { return upstream_->capacity(); }
  std::string name() const override { return "failing(" + upstream_->name() + ")"; }
  bool host_accessible() const override { return upstream_->host_accessible(); }
  std::optional<Device> device() const override { return upstream_->device(); }

  std::uint64_t allocations() const;  // asked for so far (failed ones included)
  std::uint64_t failures() const;     // failed on purpose so far
  std::uint64_t bytes_in_use() const; // handed out and not yet given back

 protected:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override;
  void do_deallocate(void* ptr, std::size_t bytes) override;

 private:
  std::unique_ptr<MemoryResource> upstream_;
  const FailureSchedule schedule_;
  mutable std::mutex mutex_;
  std::mt19937_64 rng_;
  std::uint64_t allocations_ = 0;
  std::uint64_t failures_ = 0;
  std::uint64_t in_use_ = 0;
};

}  // namespace dtr
