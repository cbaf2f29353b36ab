/* The C API of dtr: link dtr as the allocator of a training binary written in any language.
 *
 * Every function uses the process-wide allocator of the default device (DTR_DEVICE; a GPU when one is present,
 * else the CPU), created on first use with the budget in DTR_MEMORY_BUDGET. Every function is thread-safe and
 * never lets an exception escape: failures return an error value and leave a message for dtr_last_error(). */
#ifndef DTR_DTR_C_H
#define DTR_DTR_C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dtr_stats {
  uint64_t allocated_bytes;      /* bytes in live blocks (rounded) */
  uint64_t reserved_bytes;       /* bytes held from the device */
  uint64_t peak_reserved_bytes;  /* high-water mark of reserved_bytes */
  uint64_t budget_bytes;         /* 0: no budget */
  uint64_t num_ooms;             /* allocations that failed for lack of memory */
  uint64_t peak_allocated_bytes;
  uint64_t requested_bytes;      /* bytes callers asked for, of live allocations */
  uint64_t active_blocks;
  uint64_t segments;
  uint64_t largest_free_block_bytes;
  double fragmentation;          /* 1 - largest free block / free bytes in segments */
} dtr_stats;

/* Caps reserved device memory at `bytes`; 0 removes the budget. Returns 0 on success, -1 when the budget is
 * below what is reserved even after the cache is emptied (the old budget stays) or the allocator cannot be
 * created. */
int dtr_set_budget(uint64_t bytes);

/* A block of at least `bytes`, aligned to 512 bytes; NULL for a zero-byte request, and NULL with
 * dtr_last_error() explaining when memory ran out. */
void* dtr_malloc(size_t bytes);

/* Frees a block from dtr_malloc. NULL does nothing. A pointer dtr did not hand out, or one already freed, is
 * ignored and leaves a message for dtr_last_error(). */
void dtr_free(void* ptr);

/* Returns every empty cached segment to the device. 0 on success, -1 on failure. */
int dtr_empty_cache(void);

/* Fills *out. Returns 0 on success, -1 when out is NULL or the allocator cannot be created. */
int dtr_get_stats(dtr_stats* out);

/* The message of the last failure on this thread ("" if none). Valid until the next dtr call on this thread. */
const char* dtr_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* DTR_DTR_C_H */
