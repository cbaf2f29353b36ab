// The geometry of the layout ops (slice, slice_backward, split, concat, transpose, permute): what each derives
// from its shapes and attributes, with every check of its shape rule. The CPU kernels (layout.cpp), the shape
// rules and the CUDA kernels' argument unpacking (cuda/layout_ops.cpp) all read it from here, so they cannot
// disagree.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "dtr/op.h"
#include "kernels/op_checks.h"

namespace dtr::kernels {

// The product of dimensions [first, last) of `shape`.
inline std::int64_t product(const Shape& shape, std::size_t first, std::size_t last) {
  std::int64_t p = 1;
  for (std::size_t d = first; d < last; ++d) p *= shape[d];
  return p;
}

// `dim` (negative counts from the end) as an index into a shape of rank `rank`; ShapeError when out of range.
inline std::size_t normalize_dim(std::string_view op, std::span<const TensorMeta> inputs, std::int64_t dim,
                                 std::size_t rank) {
  const auto r = static_cast<std::int64_t>(rank);
  DTR_CHECK_SHAPES(dim >= -r && dim < r, op, inputs, "has dim ", dim, " out of range for rank ", rank);
  return static_cast<std::size_t>(dim < 0 ? dim + r : dim);
}

// A shape split around dimension d: `outer` blocks of `size` slices of `inner` elements each.
struct Around {
  std::int64_t outer = 1;
  std::int64_t size = 1;
  std::int64_t inner = 1;
};
inline Around around(const Shape& shape, std::size_t d) {
  return {product(shape, 0, d), shape[d], product(shape, d + 1, shape.size())};
}

// ---- slice ----

// Which elements a slice takes along its dimension: Python's rules (negative indices count from the end,
// out-of-range indices clamp), step >= 1.
struct SliceGeometry {
  std::size_t dim = 0;
  Around around;
  std::int64_t start = 0;
  std::int64_t step = 1;
  std::int64_t length = 0;
};

inline SliceGeometry slice_geometry(std::string_view op, std::span<const TensorMeta> inputs, const Shape& shape,
                                    const Attrs& attrs) {
  SliceGeometry g;
  const std::int64_t dim = attrs.get_int("dim");
  std::int64_t start = attrs.get_int("start");
  std::int64_t end = attrs.get_int("end");
  g.step = attrs.get_int("step", 1);
  DTR_CHECK_SHAPES(!shape.empty(), op, inputs, "needs a tensor of rank >= 1 (shape ", to_string(shape), ")");
  g.dim = normalize_dim(op, inputs, dim, shape.size());
  DTR_CHECK_SHAPES(g.step >= 1, op, inputs, "needs step >= 1, not step ", g.step);
  g.around = around(shape, g.dim);
  const std::int64_t size = g.around.size;
  const auto clamp_index = [size](std::int64_t i) { return std::clamp(i < 0 ? i + size : i, std::int64_t{0}, size); };
  start = clamp_index(start);
  end = clamp_index(end);
  g.start = start;
  g.length = end > start ? (end - start + g.step - 1) / g.step : 0;
  return g;
}

// A slice is one contiguous range when nothing lies outside the sliced dimension and it takes a run.
inline bool slice_is_contiguous(const SliceGeometry& g) {
  return g.around.outer == 1 && (g.step == 1 || g.length <= 1);
}

// ---- split ----

struct SplitGeometry {
  std::size_t dim = 0;
  Around around;
  std::vector<std::int64_t> sizes;
};

inline SplitGeometry split_geometry(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  SplitGeometry g;
  const std::int64_t dim = attrs.get_int("dim");
  g.sizes = attrs.get_ints("sizes");
  check_arity("split", inputs, 1);
  const Shape& shape = inputs[0].shape;
  DTR_CHECK_SHAPES(!shape.empty(), "split", inputs, "needs a tensor of rank >= 1");
  g.dim = normalize_dim("split", inputs, dim, shape.size());
  g.around = around(shape, g.dim);
  const bool valid =
      !g.sizes.empty() && std::all_of(g.sizes.begin(), g.sizes.end(), [](std::int64_t s) { return s >= 0; });
  DTR_CHECK_SHAPES(valid && std::accumulate(g.sizes.begin(), g.sizes.end(), std::int64_t{0}) == g.around.size, "split",
                   inputs, "needs sizes >= 0 adding up to dimension ", g.dim, " (", g.around.size, "), not sizes ",
                   to_string(Shape(g.sizes.begin(), g.sizes.end())));
  return g;
}

// ---- concat ----

// The dimension concat joins its inputs along; ShapeError unless they differ only there.
inline std::size_t concat_dim(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  const std::int64_t dim = attrs.get_int("dim");
  DTR_CHECK(!inputs.empty(), ShapeError, "op 'concat' takes at least 1 input, got 0");
  const Shape& first = inputs[0].shape;
  DTR_CHECK_SHAPES(!first.empty(), "concat", inputs, "needs tensors of rank >= 1");
  const std::size_t d = normalize_dim("concat", inputs, dim, first.size());
  for (const TensorMeta& in : inputs) {
    bool fits = in.dtype == inputs[0].dtype && in.shape.size() == first.size();
    for (std::size_t k = 0; fits && k < first.size(); ++k) fits = k == d || in.shape[k] == first[k];
    DTR_CHECK_SHAPES(fits, "concat", inputs, "needs tensors of one dtype and rank that differ only in dimension ", d);
  }
  return d;
}

// ---- transpose and permute ----

// Output dimension i is input dimension perm[i].
inline std::vector<std::size_t> permutation(std::string_view op, std::span<const TensorMeta> inputs,
                                            const Attrs& attrs) {
  const std::size_t rank = inputs[0].shape.size();
  std::vector<std::size_t> perm(rank);
  std::iota(perm.begin(), perm.end(), std::size_t{0});
  if (op == "transpose") {
    const std::int64_t dim0 = attrs.get_int("dim0");
    const std::int64_t dim1 = attrs.get_int("dim1");
    std::swap(perm[normalize_dim(op, inputs, dim0, rank)], perm[normalize_dim(op, inputs, dim1, rank)]);
    return perm;
  }
  const std::vector<std::int64_t>& dims = attrs.get_ints("dims");
  DTR_CHECK_SHAPES(dims.size() == rank, op, inputs, "needs dims naming each of the ", rank,
                   " dimensions once, not dims ", to_string(Shape(dims.begin(), dims.end())));
  std::vector<bool> seen(rank, false);
  for (std::size_t i = 0; i < rank; ++i) {
    perm[i] = normalize_dim(op, inputs, dims[i], rank);
    DTR_CHECK_SHAPES(!seen[perm[i]], op, inputs, "needs dims naming each of the ", rank,
                     " dimensions once, not dims ", to_string(Shape(dims.begin(), dims.end())));
    seen[perm[i]] = true;
  }
  return perm;
}

// A buffer as the bytes layout ops move, whatever its dtype.
inline const std::byte* bytes(const void* p) { return static_cast<const std::byte*>(p); }
inline std::byte* bytes(void* p) { return static_cast<std::byte*>(p); }

// The input strides (in elements) of a permute's output dimensions: output dimension i walks input
// dimension perm[i] of the contiguous `in_shape`.
inline Shape permuted_strides(const Shape& in_shape, const std::vector<std::size_t>& perm) {
  const Shape contiguous = contiguous_strides(in_shape);
  Shape strides(perm.size(), 0);
  for (std::size_t i = 0; i < perm.size(); ++i) strides[i] = contiguous[perm[i]];
  return strides;
}

}  // namespace dtr::kernels
