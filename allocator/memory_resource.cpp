#include "dtr/memory_resource.h"

#include "dtr/check.h"

namespace dtr {

void MemoryResource::throw_bad_alignment(std::size_t alignment) const {
  DTR_THROW(InvalidArgument, name(), ": alignment ", alignment, " is not a power of two of at most ", kMaxAlignment);
}

void MemoryResource::throw_null_with_size(std::size_t bytes) const {
  DTR_THROW(InvalidArgument, name(), ": deallocate(nullptr, ", bytes, ")");
}

}  // namespace dtr
