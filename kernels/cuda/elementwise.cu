// Device code of the elementwise ops (binary arithmetic with broadcasting, activations and their backward
// ops, the fused LSTM cell, scale, broadcast_to, sum/mean/sum_to, uniform, dropout, the optimizer steps). Every per-element
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

template <typename T, typename Fn>
__global__ void broadcast_binary_kernel(Fn fn, BroadcastWalk w, std::int64_t count, const T* a, const T* b, T* y) {
  for (std::int64_t i = first_index(); i < count; i += grid_stride()) {
    std::int64_t offsets[2];
    w.offsets(i, offsets);
    y[i] = fn(a[offsets[0]], b[offsets[1]]);
  }
}

template <typename T>
__global__ void broadcast_copy_kernel(BroadcastWalk w, std::int64_t count, const T* x, T* y) {
  for (std::int64_t i = first_index(); i < count; i += grid_stride()) {
    std::int64_t offsets[2];
    w.offsets(i, offsets);
    y[i] = x[offsets[0]];
  }
}

// The offset of walk element i in its only operand.
__device__ inline std::int64_t offset_of(const StridedWalk<1>& w, std::int64_t i) {
  std::int64_t offset[1];
  w.offsets(i, offset);
  return offset[0];
}

// One thread per output, its elements added in increasing input index order in double and rounded once, as
// kernels/reduce.cpp does: the CPU's bits. The innermost reduced dimension is the inner loop; the host gives
// the walk at least one reduced dimension.
template <typename T>
__global__ void reduce_sequential_kernel(ReduceWalk w, std::int64_t count, std::int64_t reduced_count, double factor,
                                         const T* x, T* y) {
  const int last = w.reduced.rank - 1;
  const std::int64_t inner = w.reduced.shape[last];
  const std::int64_t inner_stride = w.reduced.strides[0][last];
  for (std::int64_t o = first_index(); o < count; o += grid_stride()) {
    const T* start = x + offset_of(w.kept, o);
    double total = 0.0;
    for (std::int64_t outer = 0; outer < reduced_count; outer += inner) {
      const T* row = start + offset_of(w.reduced, outer);
      for (std::int64_t j = 0; j < inner; ++j) total += static_cast<double>(row[j * inner_stride]);
    }
    y[o] = static_cast<T>(total * factor);
  }
}

// One block per output: thread t sums elements t, t + block_size, ... in double, then the block adds the
// partial sums pairwise in a fixed tree. Deterministic (no atomics, the same order every run); not the CPU's
// order, which a long sum in double only changes in its last bits.
template <typename T>
__global__ void reduce_block_kernel(ReduceWalk w, std::int64_t count, std::int64_t reduced_count, double factor,
                                    const T* x, T* y) {
  __shared__ double partial[block_size];
  const int t = static_cast<int>(threadIdx.x);
  for (std::int64_t o = blockIdx.x; o < count; o += gridDim.x) {
    const T* start = x + offset_of(w.kept, o);
    double total = 0.0;
    for (std::int64_t r = t; r < reduced_count; r += block_size) {
      total += static_cast<double>(start[offset_of(w.reduced, r)]);
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

// The activated gates of element e of c (row e / hidden, column e % hidden).
template <typename T>
struct CellGates {
  T i, f, g, o;
  __device__ CellGates(const T* gates, std::int64_t hidden, std::int64_t e) {
    const T* row = gates + (e / hidden) * 4 * hidden + e % hidden;
    i = Sigmoid{}(row[0]);
    f = Sigmoid{}(row[hidden]);
    g = Tanh{}(row[2 * hidden]);
    o = Sigmoid{}(row[3 * hidden]);
  }
};

template <typename T>
__global__ void lstm_cell_kernel(std::int64_t count, std::int64_t hidden, const T* gates, const T* c, T* h,
                                 T* c_next) {
  for (std::int64_t e = first_index(); e < count; e += grid_stride()) {
    const CellGates<T> a(gates, hidden, e);
    const T state = lstm_cell_state(a.i, a.f, a.g, c[e]);
    c_next[e] = state;
    h[e] = a.o * Tanh{}(state);
  }
}

template <typename T>
__global__ void lstm_cell_backward_kernel(std::int64_t count, std::int64_t hidden, const T* grad_h,
                                          const T* grad_state, const T* gates, const T* c, T* grad_gates,
                                          T* grad_c) {
  for (std::int64_t e = first_index(); e < count; e += grid_stride()) {
    const CellGates<T> a(gates, hidden, e);
    const T tanh_state = Tanh{}(lstm_cell_state(a.i, a.f, a.g, c[e]));
    const LstmCellGrads<T> d = lstm_cell_grads(grad_h[e], grad_state[e], a.i, a.f, a.g, a.o, c[e], tanh_state);
    T* row = grad_gates + (e / hidden) * 4 * hidden + e % hidden;
    row[0] = d.i;
    row[hidden] = d.f;
    row[2 * hidden] = d.g;
    row[3 * hidden] = d.o;
    grad_c[e] = d.c;
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
  const std::int64_t count = walk.count();
  if (count <= 0) return;
  broadcast_binary_kernel<T, Fn><<<blocks_for(count), block_size, 0, stream>>>(fn, walk, count, a, b, y);
  DTR_CUDA_CHECK_LAUNCH();
}

template <typename T>
void launch_broadcast_copy(const BroadcastWalk& walk, const T* x, T* y) {
  const std::int64_t count = walk.count();
  if (count <= 0) return;
  broadcast_copy_kernel<T><<<blocks_for(count), block_size, 0, stream>>>(walk, count, x, y);
  DTR_CUDA_CHECK_LAUNCH();
}

template <typename T>
void launch_reduce_sum(const ReduceWalk& walk, double factor, const T* x, T* y) {
  const std::int64_t count = walk.kept.count();
  const std::int64_t reduced_count = walk.reduced.count();
  if (count <= 0) return;
  if (reduced_count >= block_reduce_from) {
    const unsigned int blocks = static_cast<unsigned int>(count < 65535 ? count : 65535);
    reduce_block_kernel<T><<<blocks, block_size, 0, stream>>>(walk, count, reduced_count, factor, x, y);
  } else {
    reduce_sequential_kernel<T><<<blocks_for(count), block_size, 0, stream>>>(walk, count, reduced_count, factor,
                                                                              x, y);
  }
  DTR_CUDA_CHECK_LAUNCH();
}

template <typename T>
void launch_lstm_cell(std::int64_t rows, std::int64_t hidden, const T* gates, const T* c, T* h, T* c_next) {
  const std::int64_t count = rows * hidden;
  if (count <= 0) return;
  lstm_cell_kernel<T><<<blocks_for(count), block_size, 0, stream>>>(count, hidden, gates, c, h, c_next);
  DTR_CUDA_CHECK_LAUNCH();
}

template <typename T>
void launch_lstm_cell_backward(std::int64_t rows, std::int64_t hidden, const T* grad_h, const T* grad_state,
                               const T* gates, const T* c, T* grad_gates, T* grad_c) {
  const std::int64_t count = rows * hidden;
  if (count <= 0) return;
  lstm_cell_backward_kernel<T><<<blocks_for(count), block_size, 0, stream>>>(count, hidden, grad_h, grad_state,
                                                                             gates, c, grad_gates, grad_c);
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
  template void launch_lstm_cell<T>(std::int64_t, std::int64_t, const T*, const T*, T*, T*);               \
  template void launch_lstm_cell_backward<T>(std::int64_t, std::int64_t, const T*, const T*, const T*,     \
                                             const T*, T*, T*);                                            \
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
