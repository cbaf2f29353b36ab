// The block reductions of the normalization family's device code (normalization.cu: layer norm's weight and bias
// gradients; batch_norm.cu: batch norm's statistics and gradient sums): a block of reduce_block threads shares one
// long sum, every thread adding a fixed strided subset in order, then the block adding the partial sums in a fixed
// tree. No atomics, and the split depends on compile-time constants only: the same inputs give the same bits.
#pragma once

#include <cstdint>

#include "normalization.h"

namespace dtr::kernels::cuda {

// Threads of a block that reduces one batch-norm channel or one tile of layer-norm columns, and how many
// elements' loads each thread issues together. A sum's order depends on reduce_block, so it is a compile-time
// constant, the same on every launch. ResNet's batch norms have 16-64 channels of up to 10^5 elements, so
// only 16-64 SMs are busy: many loads in flight per SM is what speeds them up (on an H200, batch_norm of
// [128, 16, 32, 32] floats took 0.10 ms so, 68 ms with one thread per channel).
constexpr int reduce_block = 512;
constexpr int reduce_unroll = 8;
static_assert((reduce_block & (reduce_block - 1)) == 0, "block_sum's tree halves the block");

// The sum of the block's `value`s, to every thread: partial[t] += partial[t + half] for half = reduce_block / 2,
// ..., 1. A fixed pairwise tree and no atomics: the same inputs give the same bits on every run.
__device__ inline double block_sum(double value, double* partial) {
  const int t = static_cast<int>(threadIdx.x);
  partial[t] = value;
  __syncthreads();
  for (int half = reduce_block / 2; half > 0; half /= 2) {
    if (t < half) partial[t] += partial[t + half];
    __syncthreads();
  }
  const double total = partial[0];
  __syncthreads();  // every thread has read partial[0] before the next block_sum overwrites it
  return total;
}

// Thread t's share of channel `channel`, whose element j < n · s is at ((j / s) c + channel) s + j % s:
// j = t, t + reduce_block, t + 2 · reduce_block, ..., in increasing order, so that consecutive threads read
// consecutive addresses within a plane of s (coalesced). For each j, `load(e)` reads the element's inputs and
// `use(e, value)` consumes them; the loads of reduce_unroll consecutive j's are issued before their uses, so
// that they are in flight together, and the uses keep the order of j.
template <typename Load, typename Use>
__device__ void for_thread_elements(const ChannelShape& l, std::int64_t channel, Load load, Use use) {
  if (l.n <= 0 || l.s <= 0) return;
  using Value = decltype(load(std::int64_t{0}));
  // j = i s + k with k < s; j += reduce_block is (i, k) += (step_i, step_k) with a carry, no division.
  const std::int64_t step_i = reduce_block / l.s;
  const std::int64_t step_k = reduce_block % l.s;
  std::int64_t i = threadIdx.x / l.s;
  std::int64_t k = threadIdx.x % l.s;
  while (i < l.n) {
    std::int64_t e[reduce_unroll];  // -1 past the channel's end
    Value v[reduce_unroll]{};
#pragma unroll
    for (int u = 0; u < reduce_unroll; ++u) {
      e[u] = i < l.n ? (i * l.c + channel) * l.s + k : -1;
      if (e[u] >= 0) v[u] = load(e[u]);
      i += step_i;
      k += step_k;
      if (k >= l.s) {
        k -= l.s;
        ++i;
      }
    }
#pragma unroll
    for (int u = 0; u < reduce_unroll; ++u) {
      if (e[u] >= 0) use(e[u], v[u]);
    }
  }
}

// Blocks for `units` channels or column tiles of the block reductions, one each up to blocks_for's cap (the
// kernels stride over the rest). Which block reduces a unit does not change its sums.
inline unsigned int reduce_blocks(std::int64_t units) {
  return static_cast<unsigned int>(units < 1 ? 1 : units > 65535 ? 65535 : units);
}

}  // namespace dtr::kernels::cuda
