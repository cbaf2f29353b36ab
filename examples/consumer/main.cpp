// Allocates under a budget through an installed dtr and prints what the allocator holds.
#include <dtr/dtr.h>

#include <cstdio>

int main() {
  dtr::CachingAllocatorOptions options;
  options.budget_bytes = 64u << 20;
  dtr::CachingAllocator allocator(dtr::make_host_resource(), options);
  void* block = allocator.allocate(1u << 20);
  const dtr::AllocatorStats stats = allocator.stats();
  allocator.deallocate(block, 1u << 20);
  std::printf("dtr %s: allocated %llu bytes, reserved %llu of a %llu byte budget\n", DTR_VERSION_STRING,
              static_cast<unsigned long long>(stats.allocated_bytes.current),
              static_cast<unsigned long long>(stats.reserved_bytes.current),
              static_cast<unsigned long long>(stats.budget_bytes));
  return stats.reserved_bytes.current > 0 && stats.reserved_bytes.current <= stats.budget_bytes ? 0 : 1;
}
