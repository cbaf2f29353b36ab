// The rule of max pooling on the CPU: which cell of a window is its maximum. One definition for the kernels
// (kernels/dense/pool.cpp) and for the benchmark that times their 2x2 loop against this general search
// (bench/pool_bench.cpp).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/dense/window_geometry.h"

namespace dtr::kernels {

// Whether `candidate` replaces `best` as a window's maximum in window order: larger, or the first NaN (a NaN,
// once the maximum, stays it). The rule of every max pooling here.
template <typename T>
bool replaces(T best, T candidate) {
  return !std::isnan(best) && (candidate > best || std::isnan(candidate));
}

// The offset in `plane` of window (y, x)'s maximum: the first maximal cell in row-major window order, or
// the first NaN (NaN propagates). Padding never wins; every window holds an input cell.
template <typename T>
std::int64_t window_argmax(const PoolGeometry& g, const T* plane, std::int64_t y, std::int64_t x) {
  const auto better = [plane](std::int64_t best, std::int64_t offset) { return replaces(plane[best], plane[offset]); };
  const std::int64_t top = y * g.stride_h - g.pad_h;
  const std::int64_t left = x * g.stride_w - g.pad_w;
  if (top >= 0 && left >= 0 && top + g.kh <= g.h && left + g.kw <= g.w) {  // inside: no clipping to compute
    std::int64_t best = top * g.w + left;
    for (std::int64_t row = 0; row < g.kh; ++row) {
      const std::int64_t start = (top + row) * g.w + left;
      for (std::int64_t column = 0; column < g.kw; ++column) {
        if (better(best, start + column)) best = start + column;
      }
    }
    return best;
  }
  std::int64_t best = -1;
  g.for_window(y, x, [&](std::int64_t offset) {
    if (best < 0 || better(best, offset)) best = offset;
  });
  return best;
}

}  // namespace dtr::kernels
