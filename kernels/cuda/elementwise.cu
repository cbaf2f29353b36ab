// Device code of the elementwise ops (binary arithmetic with broadcasting, activations and their backward
// ops, scale, broadcast_to, sum/mean/sum_to, uniform, dropout, the optimizer steps). Every per-element
// expression is the CPU kernels' own (kernels/elementwise_math.h, kernels/counter_random.h), and this file is
// compiled with -fmad=false (kernels/CMakeLists.txt), as the CPU build has no FMA contraction: +, -, ·, / and
// sqrt give the CPU's bits, erf/exp/tanh agree to CUDA's documented ulps. Reductions sum in double in the
// CPU's order (one thread per output) unless an output sums many elements, then in a fixed tree order.
#include <cstdint>

#include "cuda_support.h"
#include "grid_stride.cuh"
#include "elementwise.h"

namespace dtr::kernels::cuda {
namespace {

// From this many elements per output on, a block shares each output's sum (a fixed tree order) instead of one
// thread summing it in the CPU's order. A function of the sizes only: a recomputation takes the same path.
constexpr std::int64_t block_reduce_from = 4096;

template <typename T, typename Fn>
__global__ void map_kernel(Fn fn, std::int64_t count, const T* x, T* y) {
  for (std::int64_t i = first_index(); i < count; i += grid_stride()) y[i] = fn(x[i]);
}

template <typename T, typename Fn>
__global__ void zip_kernel(Fn fn, std::int64_t count, const T* a, const T* b, T* y) {
  for (std::int64_t i = first_index(); i < count; i += grid_stride()) y[i] = fn(a[i], b[i]);
}

template <typename T, typename Fn>
__global__ void update_kernel(Fn fn, std::int64_t count, const T* a, const T* b, const T* c, T* y) {
  for (std::int64_t i = first_index(); i < count; i += grid_stride()) {
    y[i] = fn(a[i], b[i], c != nullptr ? c[i] : T(0));
  }
}

// The offsets in a and b of output element i of the walk.
__device__ inline void walk_offsets(const BroadcastWalk& w, std::int64_t i, std::int64_t& offset_a,
                                    std::int64_t& offset_b) {
  offset_a = 0;
  offset_b = 0;
  for (int d = w.rank - 1; d >= 0; --d) {
    const std::int64_t coordinate = i % w.shape[d];
    i /= w.shape[d];
    offset_a += coordinate * w.stride_a[d];
    offset_b += coordinate * w.stride_b[d];
  }
}

template <typename T, typename Fn>
__global__ void broadcast_binary_kernel(Fn fn, BroadcastWalk w, const T* a, const T* b, T* y) {
  for (std::int64_t i = first_index(); i < w.count; i += grid_stride()) {
    std::int64_t offset_a = 0;
    std::int64_t offset_b = 0;
    walk_offsets(w, i, offset_a, offset_b);
    y[i] = fn(a[offset_a], b[offset_b]);
  }
}

template <typename T>
__global__ void broadcast_copy_kernel(BroadcastWalk w, const T* x, T* y) {
  for (std::int64_t i = first_index(); i < w.count; i += grid_stride()) {
    std::int64_t offset = 0;
    std::int64_t unused = 0;
    walk_offsets(w, i, offset, unused);
    y[i] = x[offset];
  }
}

// The input offset where output o's elements start.
__device__ inline std::int64_t kept_offset(const ReduceWalk& w, std::int64_t o) {
  std::int64_t offset = 0;
  for (int d = w.kept_rank - 1; d >= 0; --d) {
    offset += (o % w.kept_shape[d]) * w.kept_stride[d];
    o /= w.kept_shape[d];
  }
  return offset;
}

// The offset of reduced element r from its output's start.
__device__ inline std::int64_t reduced_offset(const ReduceWalk& w, std::int64_t r) {
  std::int64_t offset = 0;
  for (int d = w.reduced_rank - 1; d >= 0; --d) {
    offset += (r % w.reduced_shape[d]) * w.reduced_stride[d];
    r /= w.reduced_shape[d];
  }
  return offset;
}

// One thread per output, its elements added in increasing input index order in double and rounded once, as
// kernels/reduce.cpp does: the CPU's bits. The innermost reduced dimension is the inner loop; the host gives
// the walk at least one reduced dimension.
template <typename T>
__global__ void reduce_sequential_kernel(ReduceWalk w, double factor, const T* x, T* y) {
  const int last = w.reduced_rank - 1;
  const std::int64_t inner = w.reduced_shape[last];
  const std::int64_t inner_stride = w.reduced_stride[last];
  for (std::int64_t o = first_index(); o < w.count; o += grid_stride()) {
    const T* start = x + kept_offset(w, o);
    double total = 0.0;
    for (std::int64_t outer = 0; outer < w.reduced_count; outer += inner) {
      const T* row = start + reduced_offset(w, outer);
      for (std::int64_t j = 0; j < inner; ++j) total += static_cast<double>(row[j * inner_stride]);
    }
    y[o] = static_cast<T>(total * factor);
  }
}

// One block per output: thread t sums elements t, t + block_size, ... in double, then the block adds the
// partial sums pairwise in a fixed tree. Deterministic (no atomics, the same order every run); not the CPU's
// order, which a long sum in double only changes in its last bits.
template <typename T>
__global__ void reduce_block_kernel(ReduceWalk w, double factor, const T* x, T* y) {
  __shared__ double partial[block_size];
  const int t = static_cast<int>(threadIdx.x);
  for (std::int64_t o = blockIdx.x; o < w.count; o += gridDim.x) {
    const T* start = x + kept_offset(w, o);
    double total = 0.0;
    for (std::int64_t r = t; r < w.reduced_count; r += block_size) {
      total += static_cast<double>(start[reduced_offset(w, r)]);
    }
    partial[t] = total;
    __syncthreads();
    for (int half = block_size / 2; half > 0; half /= 2) {
      if (t < half) partial[t] += partial[t + half];
      __syncthreads();
    }
    if (t == 0) y[o] = static_cast<T>(partial[0] * factor);
    __syncthreads();  // partial[0] is read before the next output overwrites it
  }
}

template <typename T>
__global__ void uniform_kernel(std::int64_t count, std::uint64_t key, T* y) {
  for (std::int64_t i = first_index(); i < count; i += grid_stride()) y[i] = unit_uniform<T>(key, i);
}

// The CPU's order: mask first, then x · mask · keep_scale from left to right.
template <typename T>
__global__ void dropout_kernel(std::int64_t count, std::uint64_t key, double p, T keep_scale, const T* x, T* y,
                               T* mask) {
  for (std::int64_t i = first_index(); i < count; i += grid_stride()) {
    const T m = dropout_mask<T>(key, i, p);
    mask[i] = m;
    y[i] = x[i] * m * keep_scale;
  }
}

}  // namespace

template <typename T, typename Fn>
void launch_map(Fn fn, std::int64_t count, const T* x, T* y) {
  if (count <= 0) return;
  map_kernel<T, Fn><<<blocks_for(count), block_size, 0, stream>>>(fn, count, x, y);
  DTR_CUDA_CHECK_LAUNCH();
}

template <typename T, typename Fn>
void launch_zip(Fn fn, std::int64_t count, const T* a, const T* b, T* y) {
  if (count <= 0) return;
  zip_kernel<T, Fn><<<blocks_for(count), block_size, 0, stream>>>(fn, count, a, b, y);
  DTR_CUDA_CHECK_LAUNCH();
}

template <typename T, typename Fn>
void launch_update(Fn fn, std::int64_t count, const T* a, const T* b, const T* c, T* y) {
  if (count <= 0) return;
  update_kernel<T, Fn><<<blocks_for(count), block_size, 0, stream>>>(fn, count, a, b, c, y);
  DTR_CUDA_CHECK_LAUNCH();
}

template <typename T, typename Fn>
void launch_broadcast_binary(Fn fn, const BroadcastWalk& walk, const T* a, const T* b, T* y) {
  if (walk.count <= 0) return;
  broadcast_binary_kernel<T, Fn><<<blocks_for(walk.count), block_size, 0, stream>>>(fn, walk, a, b, y);
  DTR_CUDA_CHECK_LAUNCH();
}

template <typename T>
void launch_broadcast_copy(const BroadcastWalk& walk, const T* x, T* y) {
  if (walk.count <= 0) return;
  broadcast_copy_kernel<T><<<blocks_for(walk.count), block_size, 0, stream>>>(walk, x, y);
  DTR_CUDA_CHECK_LAUNCH();
}

template <typename T>
void launch_reduce_sum(const ReduceWalk& walk, double factor, const T* x, T* y) {
  if (walk.count <= 0) return;
  if (walk.reduced_count >= block_reduce_from) {
    const unsigned int blocks = static_cast<unsigned int>(walk.count < 65535 ? walk.count : 65535);
    reduce_block_kernel<T><<<blocks, block_size, 0, stream>>>(walk, factor, x, y);
  } else {
    reduce_sequential_kernel<T><<<blocks_for(walk.count), block_size, 0, stream>>>(walk, factor, x, y);
  }
  DTR_CUDA_CHECK_LAUNCH();
}

template <typename T>
void launch_uniform(std::int64_t count, std::uint64_t key, T* y) {
  if (count <= 0) return;
  uniform_kernel<T><<<blocks_for(count), block_size, 0, stream>>>(count, key, y);
  DTR_CUDA_CHECK_LAUNCH();
}

template <typename T>
void launch_dropout(std::int64_t count, std::uint64_t key, double p, T keep_scale, const T* x, T* y, T* mask) {
  if (count <= 0) return;
  dropout_kernel<T><<<blocks_for(count), block_size, 0, stream>>>(count, key, p, keep_scale, x, y, mask);
  DTR_CUDA_CHECK_LAUNCH();
}

// The instantiations elementwise.h lists, for float and double.
#define DTR_FOR_FLOATING(MACRO, ...) MACRO(float, __VA_ARGS__) MACRO(double, __VA_ARGS__)
#define DTR_MAP(T, Fn) template void launch_map<T, Fn>(Fn, std::int64_t, const T*, T*);
#define DTR_ZIP(T, Fn) template void launch_zip<T, Fn>(Fn, std::int64_t, const T*, const T*, T*);
#define DTR_UPDATE(T, Fn) \
  template void launch_update<T, Fn>(Fn, std::int64_t, const T*, const T*, const T*, T*);
#define DTR_BROADCAST_BINARY(T, Fn) \
  template void launch_broadcast_binary<T, Fn>(Fn, const BroadcastWalk&, const T*, const T*, T*);
#define DTR_OTHERS(T, unused)                                                                              \
  template void launch_broadcast_copy<T>(const BroadcastWalk&, const T*, T*);                              \
  template void launch_reduce_sum<T>(const ReduceWalk&, double, const T*, T*);                            \
  template void launch_uniform<T>(std::int64_t, std::uint64_t, T*);                                        \
  template void launch_dropout<T>(std::int64_t, std::uint64_t, double, T, const T*, T*, T*);

DTR_FOR_FLOATING(DTR_MAP, Relu)
DTR_FOR_FLOATING(DTR_MAP, Gelu)
DTR_FOR_FLOATING(DTR_MAP, Tanh)
DTR_FOR_FLOATING(DTR_MAP, Sigmoid)
DTR_FOR_FLOATING(DTR_MAP, Scale)
DTR_FOR_FLOATING(DTR_ZIP, ReluBackward)
DTR_FOR_FLOATING(DTR_ZIP, GeluBackward)
DTR_FOR_FLOATING(DTR_ZIP, TanhBackward)
DTR_FOR_FLOATING(DTR_ZIP, SigmoidBackward)
DTR_FOR_FLOATING(DTR_ZIP, Add)
DTR_FOR_FLOATING(DTR_ZIP, Sub)
DTR_FOR_FLOATING(DTR_ZIP, Mul)
DTR_FOR_FLOATING(DTR_ZIP, Div)
DTR_FOR_FLOATING(DTR_BROADCAST_BINARY, Add)
DTR_FOR_FLOATING(DTR_BROADCAST_BINARY, Sub)
DTR_FOR_FLOATING(DTR_BROADCAST_BINARY, Mul)
DTR_FOR_FLOATING(DTR_BROADCAST_BINARY, Div)
DTR_FOR_FLOATING(DTR_UPDATE, SgdMomentumBuffer)
DTR_FOR_FLOATING(DTR_UPDATE, SgdApply)
DTR_FOR_FLOATING(DTR_UPDATE, AdamMoment1)
DTR_FOR_FLOATING(DTR_UPDATE, AdamMoment2)
DTR_FOR_FLOATING(DTR_UPDATE, AdamApply)
DTR_FOR_FLOATING(DTR_OTHERS, 0)

}  // namespace dtr::kernels::cuda
