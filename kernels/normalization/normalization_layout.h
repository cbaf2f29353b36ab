// What the softmax and normalization ops derive from their shapes and attributes (the softmax axis, batch
// norm's channels, eps, the running-statistic update's attributes), with the checks of their shape rules.
// The CPU kernels (softmax.cpp, normalization.cpp) and the CUDA kernels' argument unpacking
// (cuda/normalization_ops.cpp) read them from here, so they cannot disagree.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <string>

#include "dtr/check.h"
#include "dtr/op.h"
#include "kernels/op_checks.h"
#include "kernels/normalization/running_stat.h"

namespace dtr::kernels {

// A tensor seen as [outer, length, inner] around the softmax axis: element (o, k, i) is at
// (o * length + k) * inner + i.
struct AxisLayout {
  std::int64_t outer = 1;
  std::int64_t length = 1;
  std::int64_t inner = 1;
};

// Attribute "axis" (default -1, the last), checked against input 0's rank.
inline AxisLayout axis_layout(const std::string& op, std::span<const TensorMeta> inputs, const Attrs& attrs) {
  const Shape& shape = inputs[0].shape;
  const auto rank = static_cast<std::int64_t>(shape.size());
  const std::int64_t axis = attrs.get_int("axis", -1);
  DTR_CHECK_SHAPES(rank >= 1, op, inputs, "needs an input of rank 1 or more");
  DTR_CHECK_SHAPES(axis >= -rank && axis < rank, op, inputs, "has axis ", axis, " outside [", -rank, ", ", rank, ")");
  const auto a = static_cast<std::size_t>(axis < 0 ? axis + rank : axis);
  AxisLayout layout;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (d < a) layout.outer *= shape[d];
    if (d == a) layout.length = shape[d];
    if (d > a) layout.inner *= shape[d];
  }
  return layout;
}

// Attribute `name` (default 1e-5), added to the variance before the square root; must be >= 0.
inline double eps_of(const std::string& op, const Attrs& attrs, const std::string& name = "eps") {
  const double eps = attrs.has(name) ? attrs.get_real(name) : 1e-5;
  DTR_CHECK(eps >= 0.0 && std::isfinite(eps), InvalidArgument, "op '", op, "': attribute '", name, "' is ", eps,
            ", not a finite value >= 0");
  return eps;
}

// batch_norm_normalize's attribute "relu": 0 (default) or 1, relu applied to y in the same pass.
inline bool relu_of(const std::string& op, const Attrs& attrs) {
  const std::int64_t relu = attrs.get_int("relu", 0);
  DTR_CHECK(relu == 0 || relu == 1, InvalidArgument, "op '", op, "': attribute 'relu' is ", relu, ", not 0 or 1");
  return relu == 1;
}

// x [N, C, ...] seen as [N, C, S]: element (n, c, s) at (n C + c) S + s.
struct ChannelLayout {
  std::int64_t n = 1;
  std::int64_t c = 1;
  std::int64_t s = 1;
  std::int64_t count() const { return n * s; }  // elements per channel
  template <typename Fn>
  void for_each_in_channel(std::int64_t channel, Fn fn) const {
    for (std::int64_t i = 0; i < n; ++i) {
      for (std::int64_t j = 0; j < s; ++j) fn((i * c + channel) * s + j);
    }
  }
};

// Checks x [N, C, ...] at inputs[0] (at least one element per channel when `need_elements`) and that every
// input in [first_channel, last) is [C].
inline ChannelLayout channel_layout(const std::string& op, std::span<const TensorMeta> inputs,
                                    std::span<const TensorMeta> all, std::size_t first_channel, bool need_elements) {
  const Shape& x = inputs[0].shape;
  DTR_CHECK_SHAPES(x.size() >= 2, op, all, "needs x [N, C, ...]");
  ChannelLayout l{x[0], x[1], 1};
  for (std::size_t d = 2; d < x.size(); ++d) l.s *= x[d];
  DTR_CHECK_SHAPES(!need_elements || l.count() >= 1, op, all, "needs at least one element per channel");
  for (std::size_t i = first_channel; i < inputs.size(); ++i) {
    DTR_CHECK_SHAPES(inputs[i].shape == Shape{l.c}, op, all, "needs per-channel inputs of shape [", l.c,
                     "] for x [N, C, ...]");
  }
  return l;
}

// running_stat_update's attributes, checked: momentum in [0, 1]; unbiased_count n >= 2 when given;
// invstd_eps >= 0 when given.
inline RunningStat running_stat_of(const Attrs& attrs) {
  RunningStat u;
  if (attrs.has("momentum")) u.momentum = attrs.get_real("momentum");
  DTR_CHECK(u.momentum >= 0.0 && u.momentum <= 1.0, InvalidArgument,
            "op 'running_stat_update': attribute 'momentum' is ", u.momentum, ", not in [0, 1]");
  if (attrs.has("unbiased_count")) {
    const std::int64_t n = attrs.get_int("unbiased_count");
    DTR_CHECK(n >= 2, InvalidArgument, "op 'running_stat_update': attribute 'unbiased_count' is ", n, ", not >= 2");
    u.correction = static_cast<double>(n) / static_cast<double>(n - 1);
  }
  if (attrs.has("invstd_eps")) {
    u.from_invstd = true;
    u.invstd_eps = eps_of("running_stat_update", attrs, "invstd_eps");
  }
  return u;
}

}  // namespace dtr::kernels
