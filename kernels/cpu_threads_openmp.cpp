// parallel_for_items on OpenMP (kernels/cpu_threads.h): the build links libgomp, whose threads oneDNN uses too,
// so the process keeps one pool and a kernel never competes with oneDNN's spinning workers for the cores.
#include <omp.h>

#include "kernels/cpu_threads.h"

namespace dtr::kernels {

namespace {
constexpr std::int64_t kMinParallelWork = 1 << 15;
}

void parallel_for_items(std::int64_t count, std::int64_t work, ItemFn item) {
  if (count < 2 || work < kMinParallelWork || omp_in_parallel() != 0) {
    for (std::int64_t i = 0; i < count; ++i) item(i);
    return;
  }
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < count; ++i) item(i);
}

}  // namespace dtr::kernels
