// The C API: exceptions stop here and become return values plus a per-thread message.
#include <array>
#include <cstring>
#include <exception>
#include <string_view>

#include "dtr/caching_allocator.h"
#include "dtr/dtr_c.h"

namespace {

// Each thread's last message, in a plain array: C callers may call in from atexit handlers, which run after the
// thread's thread_local objects with destructors (a std::string) are gone. Longer messages are cut with "...".
constexpr std::size_t kMessageBytes = 2048;
thread_local std::array<char, kMessageBytes> last_error{};

void set_last_error(std::string_view message) {
  const std::size_t room = last_error.size() - 1;
  if (message.size() <= room) {
    std::memcpy(last_error.data(), message.data(), message.size());
    last_error[message.size()] = '\0';
    return;
  }
  std::memcpy(last_error.data(), message.data(), room - 3);
  std::memcpy(last_error.data() + room - 3, "...", 4);
}

template <typename Body>
int guarded(Body&& body) noexcept {
  try {
    last_error[0] = '\0';
    body();
    return 0;
  } catch (const std::exception& e) {
    set_last_error(e.what());
  } catch (...) {
    set_last_error("dtr: unknown error");
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
    set_last_error("dtr_get_stats: out is NULL");
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

const char* dtr_last_error(void) { return last_error.data(); }

}  // extern "C"
