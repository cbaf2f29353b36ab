// FailingResource (include/dtr/failing_resource.h): an upstream whose allocations fail on a schedule.
#include "dtr/failing_resource.h"

#include "dtr/check.h"

namespace dtr {

FailingResource::FailingResource(std::unique_ptr<MemoryResource> upstream, FailureSchedule schedule)
    : upstream_(std::move(upstream)), schedule_(schedule), rng_(schedule.seed) {
  DTR_CHECK(upstream_ != nullptr, InvalidArgument, "FailingResource: the upstream is null");
  DTR_CHECK(schedule_.probability >= 0.0 && schedule_.probability <= 1.0, InvalidArgument,
            "FailingResource: probability ", schedule_.probability, " is not in [0, 1]");
}

std::uint64_t FailingResource::allocations() const {
  const std::lock_guard lock(mutex_);
  return allocations_;
}

std::uint64_t FailingResource::failures() const {
  const std::lock_guard lock(mutex_);
  return failures_;
}

std::uint64_t FailingResource::bytes_in_use() const {
  const std::lock_guard lock(mutex_);
  return in_use_;
}

void* FailingResource::do_allocate(std::size_t bytes, std::size_t alignment) {
  const std::lock_guard lock(mutex_);
  allocations_ += 1;
  const char* why = nullptr;
  if (schedule_.every_nth != 0 && allocations_ % schedule_.every_nth == 0) why = "every Nth";
  // Drawn for every allocation, so that the random pattern does not depend on the other conditions.
  const bool drawn = schedule_.probability > 0.0 &&
                     std::uniform_real_distribution<double>(0.0, 1.0)(rng_) < schedule_.probability;
  if (why == nullptr && drawn) why = "random";
  if (why == nullptr && schedule_.max_bytes && in_use_ + bytes > *schedule_.max_bytes) why = "past max_bytes";
  if (why != nullptr) {
    failures_ += 1;
    OutOfMemoryInfo info;
    info.requested_bytes = bytes;
    info.capacity_bytes = upstream_->capacity();
    info.allocated_bytes = in_use_;
    throw OutOfMemory(detail::concat(name(), ": allocation ", allocations_, " of ", format_bytes(bytes),
                                     " failed on purpose (fault injection: ", why, ")"),
                      info, __FILE__, __LINE__);
  }
  void* ptr = upstream_->allocate(bytes, alignment);
  in_use_ += bytes;
  return ptr;
}

void FailingResource::do_deallocate(void* ptr, std::size_t bytes) {
  const std::lock_guard lock(mutex_);
  upstream_->deallocate(ptr, bytes);  // throws, changing nothing, for a pointer it did not hand out
  in_use_ -= bytes;
}

}  // namespace dtr
