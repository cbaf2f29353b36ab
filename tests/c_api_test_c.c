/* The C API exercised from a C translation unit. Each function returns NULL on success or what went wrong;
 * c_api_test.cpp runs them as GoogleTest cases. They share the process-wide allocator, so each one leaves it
 * as it found it (no budget, nothing allocated by the test). */
#include <stdio.h>
#include <string.h>

#include "dtr/dtr_c.h"

#define REQUIRE(condition)                                                      \
  do {                                                                          \
    if (!(condition)) {                                                         \
      snprintf(failure, sizeof failure, "%s:%d: %s (dtr_last_error: %s)",       \
               __FILE__, __LINE__, #condition, dtr_last_error());               \
      return failure;                                                           \
    }                                                                           \
  } while (0)

static char failure[2048];

const char* dtr_c_test_malloc_free(void) {
  dtr_stats before, during, after;
  REQUIRE(dtr_get_stats(&before) == 0);
  unsigned char* p = (unsigned char*)dtr_malloc(1000);
  REQUIRE(p != NULL);
  REQUIRE(((size_t)p) % 512 == 0);
  REQUIRE(strcmp(dtr_last_error(), "") == 0);
  REQUIRE(dtr_get_stats(&during) == 0);
  REQUIRE(during.allocated_bytes == before.allocated_bytes + 1024);
  REQUIRE(during.requested_bytes == before.requested_bytes + 1000);
  REQUIRE(during.active_blocks == before.active_blocks + 1);
  REQUIRE(during.reserved_bytes >= during.allocated_bytes);
  REQUIRE(during.peak_reserved_bytes >= during.reserved_bytes);
  dtr_free(p);
  REQUIRE(dtr_get_stats(&after) == 0);
  REQUIRE(after.allocated_bytes == before.allocated_bytes);
  dtr_free(NULL);
  REQUIRE(strcmp(dtr_last_error(), "") == 0);
  return NULL;
}

const char* dtr_c_test_budget_and_oom(void) {
  dtr_stats stats;
  REQUIRE(dtr_empty_cache() == 0);
  REQUIRE(dtr_set_budget(4u << 20) == 0);
  REQUIRE(dtr_get_stats(&stats) == 0);
  REQUIRE(stats.budget_bytes == (4u << 20));
  const unsigned long long ooms = stats.num_ooms;
  void* fits = dtr_malloc(1u << 20);
  REQUIRE(fits != NULL);
  void* too_big = dtr_malloc(5u << 20);
  REQUIRE(too_big == NULL);
  REQUIRE(strstr(dtr_last_error(), "out of memory") != NULL);
  REQUIRE(strstr(dtr_last_error(), "larger than the budget") != NULL);
  REQUIRE(dtr_get_stats(&stats) == 0);
  REQUIRE(stats.num_ooms == ooms + 1);
  REQUIRE(stats.reserved_bytes <= (4u << 20));
  /* A budget below what is in use is refused and the old one stays. */
  REQUIRE(dtr_set_budget(512) == -1);
  REQUIRE(strstr(dtr_last_error(), "cannot set a budget") != NULL);
  REQUIRE(dtr_get_stats(&stats) == 0);
  REQUIRE(stats.budget_bytes == (4u << 20));
  dtr_free(fits);
  REQUIRE(dtr_set_budget(0) == 0);
  REQUIRE(dtr_get_stats(&stats) == 0);
  REQUIRE(stats.budget_bytes == 0);
  return NULL;
}

const char* dtr_c_test_bad_input(void) {
  int on_the_stack = 0;
  REQUIRE(dtr_malloc(0) == NULL);
  REQUIRE(strcmp(dtr_last_error(), "") == 0);
  dtr_free(&on_the_stack);
  REQUIRE(strstr(dtr_last_error(), "not allocated by this allocator") != NULL);
  void* p = dtr_malloc(64);
  REQUIRE(p != NULL);
  dtr_free(p);
  dtr_free(p); /* double free: reported, ignored */
  REQUIRE(strstr(dtr_last_error(), "already freed") != NULL);
  REQUIRE(dtr_get_stats(NULL) == -1);
  REQUIRE(strstr(dtr_last_error(), "NULL") != NULL);
  REQUIRE(dtr_malloc((size_t)-1) == NULL);
  REQUIRE(strstr(dtr_last_error(), "out of memory") != NULL);
  return NULL;
}
