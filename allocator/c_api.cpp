// The C API: exceptions stop here and become return values plus a per-thread message.
#include <exception>
#include <string>

#include "dtr/caching_allocator.h"
#include "dtr/dtr_c.h"

namespace {

thread_local std::string last_error;

template <typename Body>
int guarded(Body&& body) noexcept {
  try {
    last_error.clear();
    body();
    return 0;
  } catch (const std::exception& e) {
    last_error = e.what();
  } catch (...) {
    last_error = "dtr: unknown error";
  }
  return -1;
}

}  // namespace

extern "C" {

int dtr_set_budget(uint64_t bytes) {
  return guarded([&] {
    dtr::default_allocator().set_budget(bytes == 0 ? std::nullopt : std::optional<std::uint64_t>(bytes));
  });
}

void* dtr_malloc(size_t bytes) {
  void* ptr = nullptr;
  guarded([&] { ptr = dtr::default_allocator().allocate(bytes); });
  return ptr;
}

void dtr_free(void* ptr) {
  guarded([&] { dtr::default_allocator().free(ptr); });
}

int dtr_empty_cache(void) {
  return guarded([] { dtr::default_allocator().empty_cache(); });
}

int dtr_get_stats(dtr_stats* out) {
  if (out == nullptr) {
    last_error = "dtr_get_stats: out is NULL";
    return -1;
  }
  return guarded([&] {
    const dtr::AllocatorStats s = dtr::default_allocator().stats();
    *out = dtr_stats{};
    out->allocated_bytes = s.allocated_bytes.current;
    out->reserved_bytes = s.reserved_bytes.current;
    out->peak_reserved_bytes = s.reserved_bytes.peak;
    out->budget_bytes = s.budget_bytes;
    out->num_ooms = s.num_ooms;
    out->peak_allocated_bytes = s.allocated_bytes.peak;
    out->requested_bytes = s.requested_bytes.current;
    out->active_blocks = s.active_blocks.current;
    out->segments = s.segments.current;
    out->largest_free_block_bytes = s.largest_free_block.current;
    out->fragmentation = s.fragmentation;
  });
}

const char* dtr_last_error(void) { return last_error.c_str(); }

}  // extern "C"
