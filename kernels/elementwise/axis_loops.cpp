// Broadcasts and sums over axes on merged dimensions (kernels/elementwise/axis_loops.h).
#include "kernels/elementwise/axis_loops.h"

#include <algorithm>
#include <vector>

#include "kernels/cpu_threads.h"
#include "kernels/op_checks.h"

namespace dtr::kernels {
namespace {

// At most this many items per loop: enough to balance the threads, few enough that an item's call is free.
constexpr std::int64_t kMaxItems = 256;
// A kept run that every thread walks a piece of, row after row, is cut in pieces of at least this many elements.
constexpr std::int64_t kLeastRun = 4096;

// Calls rows(first, last) on up to kMaxItems consecutive ranges covering [0, count), each at least `least` long
// (but for a shorter count), spread over the threads.
template <typename Rows>
void parallel_rows(std::int64_t count, std::int64_t work, const Rows& rows, std::int64_t least = 1) {
  const std::int64_t items = std::max<std::int64_t>(1, std::min(count / least, kMaxItems));
  parallel_for_items(items, work, [&](std::int64_t item) { rows(count * item / items, count * (item + 1) / items); });
}

// ---- broadcast_to -------------------------------------------------------------------------------------------

// The output's dimensions with the input's stride along each (0: repeated), extent-1 dimensions dropped and
// neighbours merged where both repeat or the outer one's stride spans the inner one.
struct RepeatDims {
  Shape extent;
  Shape stride;
};

RepeatDims merge_repeats(const Shape& in_shape, const Shape& out_shape) {
  const Shape strides = broadcast_strides(in_shape, out_shape);
  RepeatDims dims;
  for (std::size_t k = 0; k < out_shape.size(); ++k) {
    if (out_shape[k] == 1) continue;
    const std::int64_t s = strides[k];
    if (!dims.extent.empty()) {
      const std::int64_t outer = dims.stride.back();
      if ((outer == 0 && s == 0) || (s != 0 && outer == s * out_shape[k])) {
        dims.extent.back() *= out_shape[k];
        dims.stride.back() = s;
        continue;
      }
    }
    dims.extent.push_back(out_shape[k]);
    dims.stride.push_back(s);
  }
  return dims;
}

template <typename T>
class Repeater {
 public:
  explicit Repeater(const RepeatDims& dims) : dims_(dims), block_(contiguous_strides(dims.extent)) {}

  // Writes the output block of dimensions [k, rank) from x.
  void write(std::size_t k, const T* x, T* out) const {
    const std::int64_t n = dims_.extent[k];
    const std::int64_t s = dims_.stride[k];
    const std::size_t rank = dims_.extent.size();
    if (k + 1 == rank) {
      if (s == 0) {
        std::fill_n(out, n, *x);
      } else if (s == 1) {
        std::copy_n(x, n, out);
      } else {
        for (std::int64_t i = 0; i < n; ++i) out[i] = x[i * s];
      }
      return;
    }
    const std::int64_t block = block_[k];
    if (s == 0) {  // one block written, then copied
      write(k + 1, x, out);
      for (std::int64_t i = 1; i < n; ++i) std::copy_n(out, block, out + i * block);
      return;
    }
    if (k + 2 == rank && dims_.stride[k + 1] == 0) {  // each element repeated along the last dimension
      for (std::int64_t i = 0; i < n; ++i) std::fill_n(out + i * block, block, x[i * s]);
      return;
    }
    for (std::int64_t i = 0; i < n; ++i) write(k + 1, x + i * s, out + i * block);
  }

  std::int64_t block(std::size_t k) const { return block_[k]; }

 private:
  const RepeatDims& dims_;
  Shape block_;
};

// ---- sums over axes -----------------------------------------------------------------------------------------

// The input's dimensions, extent-1 ones dropped and neighbours merged where both are summed or both kept (so
// that the two kinds alternate), with the output's stride along each kept one (0 along summed ones).
struct SumDims {
  Shape extent;
  AxisMask summed;
  Shape out_stride;
  Shape in_block;
};

SumDims merge_sums(const Shape& shape, const AxisMask& mask) {
  SumDims dims;
  for (std::size_t k = 0; k < shape.size(); ++k) {
    if (shape[k] == 1) continue;
    if (!dims.extent.empty() && dims.summed.back() == mask[k]) {
      dims.extent.back() *= shape[k];
    } else {
      dims.extent.push_back(shape[k]);
      dims.summed.push_back(mask[k]);
    }
  }
  dims.in_block = contiguous_strides(dims.extent);
  dims.out_stride = Shape(dims.extent.size(), 0);
  std::int64_t stride = 1;
  for (std::size_t k = dims.extent.size(); k-- > 0;) {
    if (dims.summed[k]) continue;
    dims.out_stride[k] = stride;
    stride *= dims.extent[k];
  }
  return dims;
}

// Rows [first, last) of `length` elements (row r at x + r · pitch), each summed in order into total[r · stride]
// (stride > 0: one output a row). Four rows at a time: four independent chains of additions, each row's
// order unchanged.
template <typename T>
void sum_rows(const T* x, std::int64_t pitch, std::int64_t length, double* total, std::int64_t stride,
              std::int64_t first, std::int64_t last) {
  std::int64_t r = first;
  for (; r + 4 <= last; r += 4) {
    const T* a = x + r * pitch;
    double ta = total[r * stride], tb = total[(r + 1) * stride];
    double tc = total[(r + 2) * stride], td = total[(r + 3) * stride];
    for (std::int64_t j = 0; j < length; ++j) {
      ta += static_cast<double>(a[j]);
      tb += static_cast<double>(a[pitch + j]);
      tc += static_cast<double>(a[2 * pitch + j]);
      td += static_cast<double>(a[3 * pitch + j]);
    }
    total[r * stride] = ta;
    total[(r + 1) * stride] = tb;
    total[(r + 2) * stride] = tc;
    total[(r + 3) * stride] = td;
  }
  for (; r < last; ++r) {
    const T* row = x + r * pitch;
    double t = total[r * stride];
    for (std::int64_t j = 0; j < length; ++j) t += static_cast<double>(row[j]);
    total[r * stride] = t;
  }
}

// Adds the input block of dimensions [k, rank) into its outputs' totals, in increasing index order.
template <typename T>
void add_block(const SumDims& dims, std::size_t k, const T* x, double* total) {
  const std::size_t rank = dims.extent.size();
  const std::int64_t n = dims.extent[k];
  if (k + 1 == rank) {
    if (dims.summed[k]) {
      double t = *total;
      for (std::int64_t j = 0; j < n; ++j) t += static_cast<double>(x[j]);
      *total = t;
    } else {
      for (std::int64_t j = 0; j < n; ++j) total[j] += static_cast<double>(x[j]);
    }
    return;
  }
  const std::int64_t block = dims.in_block[k];
  const std::int64_t stride = dims.out_stride[k];
  if (k + 2 == rank) {  // the last two dimensions in place: one kept, one summed
    if (dims.summed[k + 1]) {
      sum_rows(x, block, block, total, stride, 0, n);
    } else {
      for (std::int64_t i = 0; i < n; ++i) {
        const T* row = x + i * block;
        for (std::int64_t j = 0; j < block; ++j) total[j] += static_cast<double>(row[j]);
      }
    }
    return;
  }
  for (std::int64_t i = 0; i < n; ++i) add_block(dims, k + 1, x + i * block, total + i * stride);
}

}  // namespace

template <typename T>
void broadcast_copy(const T* x, const Shape& in_shape, T* out, const Shape& out_shape) {
  const std::int64_t count = TensorMeta{out_shape}.numel();
  if (count == 0) return;
  const RepeatDims dims = merge_repeats(in_shape, out_shape);
  if (dims.extent.empty()) {
    out[0] = x[0];
    return;
  }
  const std::int64_t s = dims.stride[0];
  if (dims.extent.size() == 1) {
    parallel_for_ranges(count, [&](std::int64_t first, std::int64_t last) {
      for (std::int64_t i = first; i < last; ++i) out[i] = x[i * s];
    });
    return;
  }
  const Repeater<T> repeater(dims);
  const std::int64_t block = repeater.block(0);
  parallel_rows(dims.extent[0], count, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t r = first; r < last; ++r) repeater.write(1, x + r * s, out + r * block);
  });
}

template <typename T>
void sum_over_axes(const T* x, const Shape& shape, const AxisMask& mask, T* out, std::int64_t out_count,
                   double factor) {
  std::vector<double> totals(static_cast<std::size_t>(out_count), 0.0);
  const std::int64_t count = TensorMeta{shape}.numel();
  const SumDims dims = merge_sums(shape, mask);
  double* total = totals.data();
  if (count > 0 && dims.extent.empty()) {
    total[0] += static_cast<double>(x[0]);  // one element: += keeps -0 becoming +0, as every sum does
  } else if (count > 0 && dims.extent.size() == 1) {
    if (dims.summed[0]) {
      add_block(dims, 0, x, total);  // one output: its sum stays in one thread
    } else {
      parallel_for_ranges(count, [&](std::int64_t first, std::int64_t last) {
        for (std::int64_t j = first; j < last; ++j) total[j] += static_cast<double>(x[j]);
      });
    }
  } else if (count > 0 && !dims.summed[0]) {  // the threads split the outermost (kept) dimension
    const std::int64_t block = dims.in_block[0];
    const std::int64_t stride = dims.out_stride[0];
    parallel_rows(dims.extent[0], count, [&](std::int64_t first, std::int64_t last) {
      if (dims.extent.size() == 2) {  // kept rows, each summed
        sum_rows(x, block, block, total, stride, first, last);
        return;
      }
      for (std::int64_t r = first; r < last; ++r) add_block(dims, 1, x + r * block, total + r * stride);
    });
  } else if (count > 0 && dims.extent.size() == 2) {  // summed rows of one kept run: the threads split the run
    const std::int64_t rows = dims.extent[0];
    const std::int64_t run = dims.extent[1];
    // In pieces of a few cache lines at least: each thread walks every row.
    parallel_rows(run, count, [x, total, rows, run](std::int64_t first, std::int64_t last) {
      double* const piece = total + first;
      const std::int64_t length = last - first;
      for (std::int64_t i = 0; i < rows; ++i) {
        const T* row = x + i * run + first;
        for (std::int64_t j = 0; j < length; ++j) piece[j] += static_cast<double>(row[j]);
      }
    }, kLeastRun);
  } else if (count > 0) {  // summed, then kept: the threads split the kept dimension, each over every summed row
    const std::int64_t rows = dims.extent[0];
    const std::int64_t row_block = dims.in_block[0];
    const std::int64_t block = dims.in_block[1];
    const std::int64_t stride = dims.out_stride[1];
    parallel_rows(dims.extent[1], count, [&](std::int64_t first, std::int64_t last) {
      for (std::int64_t i = 0; i < rows; ++i) {
        for (std::int64_t r = first; r < last; ++r) {
          add_block(dims, 2, x + i * row_block + r * block, total + r * stride);
        }
      }
    });
  }
  parallel_for_ranges(out_count, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t o = first; o < last; ++o) out[o] = static_cast<T>(total[o] * factor);
  });
}

template void broadcast_copy<float>(const float*, const Shape&, float*, const Shape&);
template void broadcast_copy<double>(const double*, const Shape&, double*, const Shape&);
template void sum_over_axes<float>(const float*, const Shape&, const AxisMask&, float*, std::int64_t, double);
template void sum_over_axes<double>(const double*, const Shape&, const AxisMask&, double*, std::int64_t, double);

}  // namespace dtr::kernels
