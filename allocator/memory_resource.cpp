#include "dtr/memory_resource.h"

#include "dtr/check.h"

namespace dtr {

std::optional<Device> MemoryResource::device() const {
  return host_accessible() ? std::optional<Device>(Device{DeviceKind::cpu, 0}) : std::nullopt;
}

std::unique_ptr<MemoryResource> make_device_resource(const Device& device) {
  return device.kind == DeviceKind::cpu ? make_host_resource() : make_cuda_resource(device.index);
}

void* MemoryResource::reserve_range(std::size_t bytes) {
  DTR_THROW(InvalidArgument, name(), ": reserve_range(", bytes, "): this resource does not map pages (maps_pages())");
}

void MemoryResource::release_range(void* base, std::size_t bytes) {
  DTR_THROW(InvalidArgument, name(), ": release_range(", base, ", ", bytes, "): this resource does not map pages");
}

bool MemoryResource::map(void* ptr, std::size_t bytes) {
  DTR_THROW(InvalidArgument, name(), ": map(", ptr, ", ", bytes, "): this resource does not map pages");
}

void MemoryResource::unmap(void* ptr, std::size_t bytes) {
  DTR_THROW(InvalidArgument, name(), ": unmap(", ptr, ", ", bytes, "): this resource does not map pages");
}

std::size_t MemoryResource::move_pages(void* from, void* to, std::size_t bytes) {
  DTR_CHECK(maps_pages(), InvalidArgument, name(), ": move_pages(", from, ", ", to, ", ", bytes,
            "): this resource does not map pages");
  return 0;
}

void MemoryResource::throw_bad_alignment(std::size_t alignment) const {
  DTR_THROW(InvalidArgument, name(), ": alignment ", alignment, " is not a power of two of at most ", kMaxAlignment);
}

void MemoryResource::throw_null_with_size(std::size_t bytes) const {
  DTR_THROW(InvalidArgument, name(), ": deallocate(nullptr, ", bytes, ")");
}

}  // namespace dtr
