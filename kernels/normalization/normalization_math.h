// The per-row arithmetic of softmax, log-softmax, cross-entropy and layer norm (forward and backward), one
// definition compiled by the CPU kernels (softmax.cpp, normalization.cpp: a loop over rows) and by the CUDA
// kernels (cuda/normalization.cu: one thread per row), so both backends run the same expressions in the same
// order (but for the CPU's softmax exps, taken in vector lanes: ExpsOneByOne below). Every row is reduced in
// increasing index order in double and rounded once per element. C++17, no dtr/op.h: nvcc compiles it.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/host_device.h"

namespace dtr::kernels {

// ---- softmax and cross-entropy: a row is x[k · stride], k in [0, length) ----

// Exps in place over a run of values (x - max), each from its own value alone: std::exp one at a time (the
// CUDA kernels', and the default), or the CPU kernels' lanes (vector_math.h's ExpsInLanes). Either way a row
// gives the same bits whether its exps are taken in one run or in several.
struct ExpsOneByOne {
  DTR_HOST_DEVICE void operator()(double* values, std::int64_t count) const {
    for (std::int64_t k = 0; k < count; ++k) values[k] = std::exp(values[k]);
  }
};

// Runs of this many exps where a row has no room for all of its own (a thread's stack).
constexpr std::int64_t kExpRun = 16;

// e[k] = exp(x[(first + k) · stride] - max) for k in [0, count), through `exps_of`: the one place a row's exps
// are taken, so the sum's pass and softmax's second pass give each element the same bits.
template <typename T, typename Exps>
DTR_HOST_DEVICE void shifted_exps(const T* x, std::int64_t first, std::int64_t count, std::int64_t stride,
                                  double max, double* e, Exps exps_of) {
  for (std::int64_t k = 0; k < count; ++k) e[k] = static_cast<double>(x[(first + k) * stride]) - max;
  exps_of(e, count);
}

// The row's max and Σ exp(x - max); each exp(x - max) also into exps[k] when `exps` is not null (then in one
// run, else in runs of kExpRun). The comparison keeps the running max unless it is less than x (as std::max
// does), so a NaN is skipped by the max and shows in the sum.
template <typename T, typename Exps = ExpsOneByOne>
DTR_HOST_DEVICE void max_and_exp_sum(const T* x, std::int64_t length, std::int64_t stride, double& max, double& sum,
                                     double* exps = nullptr, Exps exps_of = {}) {
  max = -HUGE_VAL;  // -∞ (numeric_limits is not callable from device code)
  for (std::int64_t k = 0; k < length; ++k) {
    const double v = static_cast<double>(x[k * stride]);
    max = max < v ? v : max;
  }
  sum = 0.0;
  if (exps != nullptr) {
    shifted_exps(x, 0, length, stride, max, exps, exps_of);
    for (std::int64_t k = 0; k < length; ++k) sum += exps[k];
    return;
  }
  double run[kExpRun];
  for (std::int64_t first = 0; first < length; first += kExpRun) {
    const std::int64_t count = length - first < kExpRun ? length - first : kExpRun;
    shifted_exps(x, first, count, stride, max, run, exps_of);
    for (std::int64_t k = 0; k < count; ++k) sum += run[k];
  }
}

// y = softmax(x), or log_softmax(x) when `log`, over one row; the max is subtracted first so large logits do
// not overflow. `exps`, when not null, is room for `length` doubles: softmax then takes each exp once (the CPU
// kernels; a CUDA thread has no such room and takes it twice, the same value).
template <typename T, typename Exps = ExpsOneByOne>
DTR_HOST_DEVICE void softmax_row(const T* x, T* y, std::int64_t length, std::int64_t stride, bool log,
                                 double* exps = nullptr, Exps exps_of = {}) {
  double max = 0.0;
  double sum = 0.0;
  if (log) exps = nullptr;
  max_and_exp_sum(x, length, stride, max, sum, exps, exps_of);
  if (log) {
    const double log_sum = std::log(sum);
    for (std::int64_t k = 0; k < length; ++k) {
      y[k * stride] = static_cast<T>(static_cast<double>(x[k * stride]) - max - log_sum);
    }
    return;
  }
  if (exps != nullptr) {
    for (std::int64_t k = 0; k < length; ++k) y[k * stride] = static_cast<T>(exps[k] / sum);
    return;
  }
  double run[kExpRun];
  for (std::int64_t first = 0; first < length; first += kExpRun) {
    const std::int64_t count = length - first < kExpRun ? length - first : kExpRun;
    shifted_exps(x, first, count, stride, max, run, exps_of);
    for (std::int64_t k = 0; k < count; ++k) y[(first + k) * stride] = static_cast<T>(run[k] / sum);
  }
}

// From the forward's output y: softmax_backward dx = y (g - Σ g y); log_softmax_backward dx = g - exp(y) Σ g.
template <typename T>
DTR_HOST_DEVICE void softmax_backward_row(const T* g, const T* y, T* dx, std::int64_t length, std::int64_t stride,
                                          bool log) {
  double total = 0.0;
  for (std::int64_t k = 0; k < length; ++k) {
    const std::int64_t e = k * stride;
    total += log ? static_cast<double>(g[e]) : static_cast<double>(g[e]) * static_cast<double>(y[e]);
  }
  for (std::int64_t k = 0; k < length; ++k) {
    const std::int64_t e = k * stride;
    const double ge = g[e];
    const double ye = y[e];
    dx[e] = static_cast<T>(log ? ge - std::exp(ye) * total : ye * (ge - total));
  }
}

// One row's cross-entropy term log Σ exp(x) - x[label], by the stable log-sum-exp; `label` in [0, classes).
template <typename T>
DTR_HOST_DEVICE double cross_entropy_term(const T* x, std::int64_t classes, std::int64_t label) {
  double max = 0.0;
  double sum = 0.0;
  max_and_exp_sum(x, classes, 1, max, sum);
  return std::log(sum) + max - static_cast<double>(x[label]);
}

// dx = scale · (softmax(x) - onehot(label)) over one row, scale = grad / N.
template <typename T>
DTR_HOST_DEVICE void cross_entropy_backward_row(const T* x, std::int64_t classes, std::int64_t label, double scale,
                                                T* dx) {
  double max = 0.0;
  double sum = 0.0;
  max_and_exp_sum(x, classes, 1, max, sum);
  for (std::int64_t k = 0; k < classes; ++k) {
    const double p = std::exp(static_cast<double>(x[k]) - max) / sum;
    dx[k] = static_cast<T>(scale * (p - (k == label ? 1.0 : 0.0)));
  }
}

// ---- layer norm: a row is d contiguous elements ----

// y = (x - mean) · invstd · w + b with two-pass statistics (mean, then the biased mean of squared deviations:
// no cancellation); the row's mean and invstd are returned through `mean` and `invstd`.
template <typename T>
DTR_HOST_DEVICE void layer_norm_row(const T* x, const T* w, const T* b, std::int64_t d, double eps, T* y, T& mean,
                                    T& invstd) {
  double sum = 0.0;
  for (std::int64_t k = 0; k < d; ++k) sum += static_cast<double>(x[k]);
  const double m = sum / static_cast<double>(d);
  double squares = 0.0;
  for (std::int64_t k = 0; k < d; ++k) squares += (x[k] - m) * (x[k] - m);
  const double s = 1.0 / std::sqrt(squares / static_cast<double>(d) + eps);
  for (std::int64_t k = 0; k < d; ++k) y[k] = static_cast<T>((x[k] - m) * s * w[k] + b[k]);
  mean = static_cast<T>(m);
  invstd = static_cast<T>(s);
}

// With x̂ = (x - mean) invstd and h = g · w: dx = invstd (h - mean(h) - x̂ mean(h x̂)) over one row. (The
// weight and bias gradients sum g x̂ and g over rows, column by column: the callers' loops.)
template <typename T>
DTR_HOST_DEVICE void layer_norm_backward_row(const T* g, const T* x, const T* w, double mean, double invstd,
                                             std::int64_t d, T* dx) {
  double h_sum = 0.0;
  double hx_sum = 0.0;
  for (std::int64_t k = 0; k < d; ++k) {
    const double xhat = (x[k] - mean) * invstd;
    const double h = static_cast<double>(g[k]) * w[k];
    h_sum += h;
    hx_sum += h * xhat;
  }
  const double h_mean = h_sum / static_cast<double>(d);
  const double hx_mean = hx_sum / static_cast<double>(d);
  for (std::int64_t k = 0; k < d; ++k) {
    const double xhat = (x[k] - mean) * invstd;
    dx[k] = static_cast<T>(invstd * (static_cast<double>(g[k]) * w[k] - h_mean - xhat * hx_mean));
  }
}

}  // namespace dtr::kernels
