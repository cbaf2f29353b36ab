// A bare loop of cached allocate/free pairs for instruction counting, where Google Benchmark's own machinery
// would blur the count:
//   valgrind --tool=callgrind ./build/bench/dtr-bench-pair-loop [bytes] [pairs]
// Instructions per pair = callgrind's total / pairs (setup is a few thousand instructions).
#include <cstdio>
#include <cstdlib>

#include "dtr/caching_allocator.h"

int main(int argc, char** argv) {
  const std::size_t bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 512;
  const long pairs = argc > 2 ? std::strtol(argv[2], nullptr, 10) : 200000;
  dtr::CachingAllocator alloc(dtr::make_host_resource());
  alloc.deallocate(alloc.allocate(bytes), bytes);  // the segment is cached from here on
  for (long i = 0; i < pairs; ++i) {
    void* p = alloc.allocate(bytes);
    asm volatile("" : : "r"(p) : "memory");  // keep the pair
    alloc.deallocate(p, bytes);
  }
  std::printf("%ld pairs of %zu bytes, %llu device allocation(s)\n", pairs, bytes,
              static_cast<unsigned long long>(alloc.stats().num_device_allocations));
  return 0;
}
