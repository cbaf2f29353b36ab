#include "dtr/memory_resource.h"

#include <bit>

#include "dtr/check.h"

namespace dtr {

void* MemoryResource::allocate(std::size_t bytes, std::size_t alignment) {
  DTR_CHECK(std::has_single_bit(alignment) && alignment <= kMaxAlignment, InvalidArgument, name(),
            ": alignment ", alignment, " is not a power of two of at most ", kMaxAlignment);
  if (bytes == 0) return nullptr;
  return do_allocate(bytes, alignment);
}

void MemoryResource::deallocate(void* ptr, std::size_t bytes) {
  if (ptr == nullptr) {
    DTR_CHECK(bytes == 0, InvalidArgument, name(), ": deallocate(nullptr, ", bytes, ")");
    return;
  }
  do_deallocate(ptr, bytes);
}

}  // namespace dtr
