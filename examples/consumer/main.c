/* The C API through an installed dtr. */
#include <dtr/dtr_c.h>
#include <stdio.h>

int main(void) {
  if (dtr_set_budget(64u << 20) != 0) {
    fprintf(stderr, "dtr_set_budget: %s\n", dtr_last_error());
    return 1;
  }
  void* block = dtr_malloc(4096);
  dtr_stats stats;
  if (block == NULL || dtr_get_stats(&stats) != 0) {
    fprintf(stderr, "dtr: %s\n", dtr_last_error());
    return 1;
  }
  dtr_free(block);
  printf("dtr C API: reserved %llu of a %llu byte budget\n", (unsigned long long)stats.reserved_bytes,
         (unsigned long long)stats.budget_bytes);
  return stats.reserved_bytes <= stats.budget_bytes ? 0 : 1;
}
