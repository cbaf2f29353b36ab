// Memory resources: where device (or host) bytes come from. A resource is a small interface in the spirit of
// RMM's device_memory_resource; the caching allocator is itself a resource over an upstream one, so
// resources stack.
//
// Contract shared by every resource (tests/memory_resource_contract_test.cpp checks it for each one):
// - allocate(bytes, alignment) returns a pointer aligned to `alignment` (a power of two, at most
//   kMaxAlignment) that overlaps no other live allocation of the resource, or throws dtr::OutOfMemory.
//   allocate(0, ...) returns nullptr and changes nothing.
// - deallocate(ptr, bytes) takes back a pointer this resource returned, with the size it was asked for.
//   deallocate(nullptr, 0) does nothing. A pointer the resource did not hand out, one already freed, or a
//   size that does not match throws dtr::InvalidArgument and leaves the resource unchanged.
// - capacity() is the most bytes the resource could ever hand out at once (the device's memory).
// - All member functions are thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "dtr/device.h"

namespace dtr {

class MemoryResource {
 public:
  // The alignment the caching allocator guarantees and the one allocate() uses by default.
  static constexpr std::size_t kDefaultAlignment = 512;
  // The largest alignment a caller may ask for: what cudaMalloc'd segments and 512 B block rounding give.
  static constexpr std::size_t kMaxAlignment = 512;

  MemoryResource() = default;
  MemoryResource(const MemoryResource&) = delete;
  MemoryResource& operator=(const MemoryResource&) = delete;
  virtual ~MemoryResource() = default;

  // Inline: they run on every allocation; the checks are a few instructions.
  void* allocate(std::size_t bytes, std::size_t alignment = kDefaultAlignment) {
    if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > kMaxAlignment) {
      throw_bad_alignment(alignment);
    }
    return bytes == 0 ? nullptr : do_allocate(bytes, alignment);
  }
  void deallocate(void* ptr, std::size_t bytes) {
    if (ptr != nullptr) {
      do_deallocate(ptr, bytes);
    } else if (bytes != 0) {
      throw_null_with_size(bytes);
    }
  }

  virtual std::size_t capacity() const = 0;
  virtual std::string name() const = 0;
  // True when the CPU may read and write the memory this resource hands out.
  virtual bool host_accessible() const = 0;
  // The device whose kernels can work in this memory: cpu for host memory, cuda:N for a GPU's, nullopt for
  // memory no kernel may touch (simulated). By default: cpu when host_accessible(), else nullopt.
  virtual std::optional<Device> device() const;

  // Virtual memory, for the caching allocator's expandable segments: an address range reserved with nothing
  // behind it, whose pages are then backed (mapped) and given back (unmapped) one run at a time. A resource
  // that can returns true from maps_pages() and overrides the calls below (move_pages() optionally); the
  // defaults throw dtr::InvalidArgument. Mapped bytes count against capacity(); a reserved range does not.
  virtual bool maps_pages() const { return false; }
  // The granularity of map() and unmap(): the host's page size, a GPU's 2 MiB; 0 when maps_pages() is false.
  virtual std::size_t page_bytes() const { return 0; }
  // A range of `bytes` (a multiple of page_bytes()) with nothing mapped, aligned to at least 2 MiB;
  // throws dtr::OutOfMemory when no address range that large is left.
  virtual void* reserve_range(std::size_t bytes);
  // Gives back a range from reserve_range(), with the size it was reserved with; it must have nothing mapped.
  virtual void release_range(void* base, std::size_t bytes);
  // Backs [ptr, ptr + bytes), which lies inside a reserved range and is unmapped; returns false, mapping
  // nothing, when the memory is full.
  virtual bool map(void* ptr, std::size_t bytes);
  // Gives back the memory behind [ptr, ptr + bytes), which map() backed; its contents are lost.
  virtual void unmap(void* ptr, std::size_t bytes);
  // Moves the memory behind a prefix of [from, from + bytes) (mapped) under the same prefix of [to, to + bytes)
  // (unmapped, inside a reserved range, not overlapping `from`) without giving it back: the caching allocator
  // takes cached pages for a new block so, where unmap() and map() would hand the memory to the system and
  // take it again (on the host: a page fault and zeroing per page). Returns the bytes moved, whole pages;
  // afterwards that prefix of `from` is unmapped and of `to` mapped, its contents unspecified. 0 when the
  // resource cannot move pages (the default): the caller unmaps and maps.
  virtual std::size_t move_pages(void* from, void* to, std::size_t bytes);

 protected:
  // Called with bytes > 0 and a valid alignment.
  virtual void* do_allocate(std::size_t bytes, std::size_t alignment) = 0;
  // Called with ptr != nullptr.
  virtual void do_deallocate(void* ptr, std::size_t bytes) = 0;

 private:
  [[noreturn]] void throw_bad_alignment(std::size_t alignment) const;  // dtr::InvalidArgument
  [[noreturn]] void throw_null_with_size(std::size_t bytes) const;     // dtr::InvalidArgument
};

// Page-aligned host memory from the C heap. Capacity: the machine's physical memory.
// Tracks its live allocations so that foreign pointers and double frees are reported, not undefined.
std::unique_ptr<MemoryResource> make_host_resource();

// Addresses from a virtual range of `capacity` bytes; no memory is reserved or touched, and the pointers must
// never be dereferenced. The simulator replays traces of a 12 GB GPU on a small machine with it.
std::unique_ptr<MemoryResource> make_simulated_resource(std::size_t capacity);

// cudaMalloc/cudaFree on one CUDA device: the only code in dtr that calls them. Throws dtr::DeviceError when
// dtr was built without CUDA or the device does not exist.
std::unique_ptr<MemoryResource> make_cuda_resource(int device = 0);

// The memory kernels on `device` work in: make_host_resource() for cpu, make_cuda_resource(N) for cuda:N.
std::unique_ptr<MemoryResource> make_device_resource(const Device& device);

}  // namespace dtr
