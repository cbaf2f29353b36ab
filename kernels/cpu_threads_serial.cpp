// parallel_for_items without OpenMP (kernels/cpu_threads.h): builds whose compiler would bring another OpenMP
// runtime than oneDNN's (clang's libomp, in the sanitizer builds) run every item in the calling thread.
#include "kernels/cpu_threads.h"

namespace dtr::kernels {

void parallel_for_items(std::int64_t count, std::int64_t /*work*/, ItemFn item) {
  for (std::int64_t i = 0; i < count; ++i) item(i);
}

}  // namespace dtr::kernels
