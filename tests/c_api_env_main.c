/* c_api_env_main BYTES: one dtr_malloc through the C API's default allocator, which reads DTR_MEMORY_BUDGET and
 * DTR_DEVICE when it is created. Prints "ok" or the error; ctest runs it under different environments. */
#include <stdio.h>
#include <stdlib.h>

#include "dtr/dtr_c.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: c_api_env_main BYTES\n");
    return 2;
  }
  const size_t bytes = (size_t)strtoull(argv[1], NULL, 10);
  void* p = dtr_malloc(bytes);
  if (p == NULL) {
    printf("error: %s\n", dtr_last_error());
    return 1;
  }
  dtr_stats stats;
  if (dtr_get_stats(&stats) != 0) return 1;
  printf("ok: budget %llu, reserved %llu\n", (unsigned long long)stats.budget_bytes,
         (unsigned long long)stats.reserved_bytes);
  dtr_free(p);
  return 0;
}
