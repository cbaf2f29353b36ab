// The CPU kernels' threads: a loop over independent items spread over OpenMP's threads, the pool oneDNN's
// convolutions run on (libgomp), where the build has it (GCC; kernels/cpu_threads_openmp.cpp), or run in the
// calling thread (kernels/cpu_threads_serial.cpp).
#pragma once

#include <cstdint>
#include <functional>

namespace dtr::kernels {

// Calls item(i) once for every i in [0, count), on one thread per i: a kernel that keeps each item's arithmetic
// inside item(i) gives the same bits whatever the thread count. `work` estimates the elements all the items
// touch together; below a few tens of thousands the loop stays in the calling thread (waking the pool costs
// more). item must not throw. Thread safety: callable from any thread (OpenMP nests it in one thread).
void parallel_for_items(std::int64_t count, std::int64_t work, const std::function<void(std::int64_t)>& item);

}  // namespace dtr::kernels
