// dtr-torch's runtimes take their buffers from PyTorch's own CPU allocator (Config::buffers =
// memory_resource), and adopt the buffers an op's first run already wrote instead of copying them: a result
// is allocated and written once, as in plain PyTorch. The runtime accounts the bytes and evicts by them.
#pragma once

#include <ATen/Tensor.h>

#include <memory>

#include "dtr/memory_resource.h"

namespace dtr::torch::detail {

// A MemoryResource over PyTorch's CPU allocator that hands out offered buffers first: offers are taken in
// order, one per allocation on this thread; an allocation of exactly the offered bytes returns the offered
// `data`, kept alive by `owner` until deallocated; otherwise (or for a null offer) a fresh buffer. Buffers are aligned as PyTorch aligns them (64 bytes), not to
// kDefaultAlignment: only aten kernels run in them. Thread safety: offers are per thread; allocate and
// deallocate may be called from any thread.
std::unique_ptr<MemoryResource> make_torch_memory();

// Offers `data` (inside `owner`'s storage, `bytes` long) to this thread's next allocation; a null `data`
// holds an output's place without a buffer to adopt.
void offer_result(const at::Tensor& owner, const void* data, std::size_t bytes);
// Drops the offers nothing took (an op's results the runtime did not allocate, or another runtime's).
void clear_offers();

}  // namespace dtr::torch::detail
