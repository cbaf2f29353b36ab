// Page-aligned host memory. The CPU backend's device memory, and the upstream of its caching allocator.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "allocation_registry.h"
#include "dtr/check.h"
#include "dtr/memory_resource.h"

namespace dtr {
namespace {

std::size_t page_size() { return static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)); }

std::size_t physical_memory() {
  return static_cast<std::size_t>(::sysconf(_SC_PHYS_PAGES)) * page_size();
}

class HostResource final : public MemoryResource {
 public:
  std::size_t capacity() const override { return capacity_; }
  std::string name() const override { return "host"; }
  bool host_accessible() const override { return true; }

 protected:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    if (bytes > capacity_) {
      throw_oom(bytes, __FILE__, __LINE__);
    }
    void* ptr = nullptr;
    if (::posix_memalign(&ptr, std::max(alignment, page_), bytes) != 0 || ptr == nullptr) {
      throw_oom(bytes, __FILE__, __LINE__);
    }
    registry_.add(ptr, bytes);
    return ptr;
  }

  void do_deallocate(void* ptr, std::size_t bytes) override {
    registry_.remove(ptr, bytes, "host");
    std::free(ptr);  // NOLINT(cppcoreguidelines-no-malloc): paired with posix_memalign
  }

 private:
  [[noreturn]] void throw_oom(std::size_t bytes, const char* file, int line) const {
    OutOfMemoryInfo info;
    info.requested_bytes = bytes;
    info.capacity_bytes = capacity_;
    info.allocated_bytes = registry_.live_bytes();
    throw OutOfMemory(detail::concat("host: out of memory allocating ", format_bytes(bytes), " (",
                                     format_bytes(info.allocated_bytes), " allocated of ",
                                     format_bytes(capacity_), ")"),
                      info, file, line);
  }

  const std::size_t page_ = page_size();
  const std::size_t capacity_ = physical_memory();
  detail::AllocationRegistry registry_;
};

}  // namespace

std::unique_ptr<MemoryResource> make_host_resource() { return std::make_unique<HostResource>(); }

}  // namespace dtr
