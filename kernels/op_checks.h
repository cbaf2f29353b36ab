// What the built-in ops' shape rules, cost counts and CPU kernels share. Every message names the op and the shapes it was
// given, so a ShapeError raised deep inside a model says which call was wrong.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dtr/check.h"
#include "dtr/op.h"

namespace dtr::kernels {

// "[2, 3] and [3]": the shapes of an op's inputs, for error messages; a dtype other than float32 is named
// ("int64 [4]").
std::string shapes_of(std::span<const TensorMeta> inputs);

// Throws dtr::ShapeError "op 'matmul' takes 2 inputs, got 3" unless there are `expected` inputs.
void check_arity(std::string_view op, std::span<const TensorMeta> inputs, std::size_t expected);

// Throws dtr::ShapeError "op '<op>' <requirement>, got <shapes>" unless `condition` holds.
#define DTR_CHECK_SHAPES(condition, op, inputs, ...)                                \
  DTR_CHECK(condition, ::dtr::ShapeError, "op '", op, "' ", __VA_ARGS__, ", got ", \
            ::dtr::kernels::shapes_of(inputs))

// The shape two shapes broadcast to (NumPy rules: right-aligned, each pair of dimensions equal or one of
// them 1); nullopt when they do not.
std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b);

// The strides (in elements) with which `in`, right-aligned against `out` as NumPy broadcasts, is walked
// while walking `out`: 0 along the dimensions it is broadcast over.
Shape broadcast_strides(const Shape& in, const Shape& out);

// The strides (in elements) of a contiguous row-major tensor of `shape`: the last dimension's is 1.
Shape contiguous_strides(const Shape& shape);

// Throws dtr::ShapeError unless inputs [first, last) all have one floating dtype (float32 or float64).
void check_floating(std::string_view op, std::span<const TensorMeta> inputs, std::size_t first = 0,
                    std::size_t last = static_cast<std::size_t>(-1));

// Calls fn(T{}) with T the C++ type of floating `dtype` (float or double), returning what it returns.
template <typename Fn>
decltype(auto) dispatch_floating(DType dtype, Fn&& fn) {
  if (dtype == DType::float64) return fn(double{});
  DTR_CHECK(dtype == DType::float32, ShapeError, "a kernel for float32 and float64 got ", to_string(dtype));
  return fn(float{});
}

// A CPU kernel for both floating dtypes from a generic one, `kernel(T{}, args)`; T is input 0's type.
template <typename Kernel>
auto floating_kernel(Kernel kernel) {
  return [kernel](const KernelArgs& args) {
    dispatch_floating(args.input_meta[0].dtype, [&](auto zero) { kernel(zero, args); });
  };
}

// `count` elements of scratch for a CPU kernel: its workspace when the runtime gives one (so the budget counts
// it, and the caching allocator reuses it), else `fallback`, resized; nullptr for none. Valid until the kernel
// returns.
template <typename T>
T* kernel_scratch(const KernelArgs& args, std::size_t count, std::vector<T>& fallback) {
  if (count == 0) return nullptr;
  if (args.workspace != nullptr) return static_cast<T*>(args.workspace->get(count * sizeof(T)));
  fallback.resize(count);
  return fallback.data();
}

// Room for `length` doubles, one buffer per thread, kept for the thread's life: a CPU softmax row keeps its
// exps there (softmax_row's `exps`) rather than taking each exp twice. Null past 65,536 (512 KiB a thread,
// memory the budget does not see): such a row takes each exp twice, the same bits.
inline double* exp_scratch(std::int64_t length) {
  if (length > (std::int64_t{1} << 16)) return nullptr;
  thread_local std::vector<double> room;
  if (room.size() < static_cast<std::size_t>(length)) room.resize(static_cast<std::size_t>(length));
  return room.data();
}

// The cost of an op that touches each element of its first input once. At least 1: the runtime ranks tensors
// by cost, and a zero would make recomputing an empty tensor's producer look free.
double numel_flops(std::span<const TensorMeta> inputs, const Attrs& attrs);
double at_least_one(double flops);

}  // namespace dtr::kernels
