// The CPU kernels' threads: a loop over independent items spread over OpenMP's threads, the pool oneDNN's
// convolutions run on (libgomp), where the build has it (GCC; kernels/cpu_threads_openmp.cpp), or run in the
// calling thread (kernels/cpu_threads_serial.cpp).
#pragma once

#include <algorithm>
#include <cstdint>

#include "dtr/function_ref.h"

namespace dtr::kernels {

// A kernel's loop body, not owned: the per-op path pays no allocation for a lambda that captures more than
// two references. It must not outlive the callable it refers to (the call it is passed to).
using ItemFn = FunctionRef<void(std::int64_t)>;

// Calls item(i) once for every i in [0, count), on one thread per i: a kernel that keeps each item's arithmetic
// inside item(i) gives the same bits whatever the thread count. `work` estimates the elements all the items
// touch together; below a few tens of thousands the loop stays in the calling thread (waking the pool costs
// more). item must not throw. Thread safety: callable from any thread (OpenMP nests it in one thread).
void parallel_for_items(std::int64_t count, std::int64_t work, ItemFn item);

// Calls range(begin, end) on consecutive blocks that cover [0, count) (16,384 elements each), the blocks spread
// over the threads as parallel_for_items's items: for elementwise kernels, where each element's value is its own.
template <typename Range>
void parallel_for_ranges(std::int64_t count, const Range& range) {
  constexpr std::int64_t kBlock = std::int64_t{1} << 14;
  const std::int64_t blocks = (count + kBlock - 1) / kBlock;
  parallel_for_items(blocks, count, [&](std::int64_t b) { range(b * kBlock, std::min(count, (b + 1) * kBlock)); });
}

}  // namespace dtr::kernels
