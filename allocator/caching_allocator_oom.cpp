// The caching allocator's out-of-memory report: what was asked, what the budget, the segments and the free
// blocks held, and what to try. Off the hot path.
#include "caching_allocator_state.h"

namespace dtr {
namespace {

std::string percent(double fraction) { return detail::concat(static_cast<int>(fraction * 1000 + 0.5) / 10.0, "%"); }

}  // namespace

OutOfMemory CachingAllocator::State::out_of_memory(const Request& r, Cause cause, const std::string& resource_name) {
  auto& st = stats;
  st.num_ooms += 1;
  OutOfMemoryInfo info;
  info.requested_bytes = r.bytes;
  info.budget_bytes = budget.value_or(0);
  info.capacity_bytes = upstream_capacity;
  info.reserved_bytes = st.reserved_bytes.current;
  info.allocated_bytes = st.allocated_bytes.current;
  info.largest_free_block_bytes = st.largest_free_block.current;
  const std::uint64_t free_in_segments = info.reserved_bytes - info.allocated_bytes;
  std::string message = detail::concat(
      "dtr: out of memory: cannot allocate ", format_bytes(r.bytes), " from ", resource_name, ": it needs a ",
      to_string(r.pool), "-pool block of ", format_bytes(r.rounded), ". Budget: ",
      budget ? format_bytes(*budget) : std::string("none"), "; reserved ", format_bytes(info.reserved_bytes),
      " in ", st.segments.current, " segment(s): allocated ", format_bytes(info.allocated_bytes), " in ",
      st.active_blocks.current, " block(s), reserved but free ", format_bytes(free_in_segments),
      " (largest free block ", format_bytes(info.largest_free_block_bytes), ", fragmentation ",
      percent(fragmentation()), "); device capacity ", format_bytes(info.capacity_bytes), ".");
  switch (cause) {
    case Cause::too_large:
      message += r.rounded > info.capacity_bytes
                     ? " The request alone is larger than the device. Try: split the tensor or use a larger device."
                     : " The request alone is larger than the budget. Try: raise DTR_MEMORY_BUDGET (or "
                       "dtr_set_budget / CachingAllocator::set_budget) above " +
                           format_bytes(r.rounded) + ".";
      break;
    case Cause::no_reclaimer:
    case Cause::no_progress:
      message += cause == Cause::no_reclaimer
                     ? " No Reclaimer is registered, so nothing could be evicted."
                     : " The Reclaimer could free nothing more: everything left is in use (pinned or constant).";
      if (cause == Cause::no_progress && options.compaction != Compaction::off) {
        message += " Moving the blocks it allows to move (compaction) could not make room either.";
      }
      if (free_in_segments >= r.rounded) {
        message += " Enough bytes are free inside segments but no free block is large enough "
                   "(fragmentation).";
      }
      message += " Try: raise DTR_MEMORY_BUDGET, lower the batch size, free tensors no longer needed, or run "
                 "under the dtr runtime so that tensors can be evicted and recomputed.";
      break;
  }
  detail::logger().info("{}", message);
  return OutOfMemory(std::move(message), info, __FILE__, __LINE__);
}

}  // namespace dtr
