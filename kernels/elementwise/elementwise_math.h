// The per-element arithmetic of the elementwise ops (binary arithmetic, activations and their backward ops,
// scale, dropout, the optimizer steps), one definition compiled by the CPU kernels and by the CUDA kernels
// (DTR_HOST_DEVICE), so both backends evaluate the same expressions in the same order and types. Each op is a
// functor generic in the element type T; attributes are its members, read and checked in double by the host
// (kernels/elementwise_attrs.h) and cast to T where the expression uses them. C++17, no dtr/op.h: nvcc
// compiles it.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/elementwise/counter_random.h"
#include "kernels/host_device.h"

namespace dtr::kernels {

// ---- binary arithmetic (broadcasting) ----

struct Add {
  template <typename T>
  DTR_HOST_DEVICE T operator()(T a, T b) const { return a + b; }
};
struct Sub {
  template <typename T>
  DTR_HOST_DEVICE T operator()(T a, T b) const { return a - b; }
};
struct Mul {
  template <typename T>
  DTR_HOST_DEVICE T operator()(T a, T b) const { return a * b; }
};
struct Div {
  template <typename T>
  DTR_HOST_DEVICE T operator()(T a, T b) const { return a / b; }
};

// ---- activations: forward f(x), backward f(grad, x) or f(grad, y) ----

// sqrt(2) / 2 and 1 / sqrt(2π) as std::numbers::sqrt2 / 2 and std::numbers::inv_sqrtpi / std::numbers::sqrt2
// compute them in double (elementwise.cpp checks that they are those values); <numbers> is C++20.
inline constexpr double kHalfSqrt2 = 1.41421356237309504880 / 2;
inline constexpr double kInvSqrt2Pi = 0.56418958354775628695 / 1.41421356237309504880;

// The standard normal's distribution and density, for gelu.
template <typename T>
DTR_HOST_DEVICE T normal_cdf(T x) {
  return T(0.5) * (T(1) + std::erf(x * T(kHalfSqrt2)));
}
template <typename T>
DTR_HOST_DEVICE T normal_pdf(T x) {
  return std::exp(T(-0.5) * x * x) * T(kInvSqrt2Pi);
}

// Written as a comparison with 0 being false for NaN, so NaN passes through as in PyTorch.
struct Relu {
  template <typename T>
  DTR_HOST_DEVICE T operator()(T x) const { return x < 0 ? T(0) : x; }
};
struct ReluBackward {
  template <typename T>
  DTR_HOST_DEVICE T operator()(T grad, T x) const { return x > 0 ? grad : T(0); }
};

struct Gelu {
  template <typename T>
  DTR_HOST_DEVICE T operator()(T x) const { return x * normal_cdf(x); }
};
struct GeluBackward {
  template <typename T>
  DTR_HOST_DEVICE T operator()(T grad, T x) const { return grad * (normal_cdf(x) + x * normal_pdf(x)); }
};

struct Tanh {
  template <typename T>
  DTR_HOST_DEVICE T operator()(T x) const { return std::tanh(x); }
};
// From the forward's output y.
struct TanhBackward {
  template <typename T>
  DTR_HOST_DEVICE T operator()(T grad, T y) const { return grad * (T(1) - y * y); }
};

// Either branch exponentiates a non-positive number: no overflow for large |x|.
struct Sigmoid {
  template <typename T>
  DTR_HOST_DEVICE T operator()(T x) const {
    if (x >= 0) return T(1) / (T(1) + std::exp(-x));
    const T e = std::exp(x);
    return e / (T(1) + e);
  }
};
// From the forward's output y.
struct SigmoidBackward {
  template <typename T>
  DTR_HOST_DEVICE T operator()(T grad, T y) const { return grad * y * (T(1) - y); }
};

// ---- the LSTM cell: gates [N, 4H] as i, f, g, o (torch.nn.LSTM's order) and c [N, H] ----

// From the activated gates i = σ(i'), f = σ(f'), g = tanh(g'), o = σ(o'): the cell state c' = f c + i g, in the
// order and types the unfused ops (mul, mul, add) evaluate it; the output is h = o tanh(c').
template <typename T>
DTR_HOST_DEVICE T lstm_cell_state(T i, T f, T g, T c) {
  return f * c + i * g;
}

// The cell's gradients at one element, from the activated gates, c, tanh(c') and the gradients gh of h and gc
// of c': with respect to the four pre-activation gates and to c.
template <typename T>
struct LstmCellGrads {
  T i, f, g, o, c;
};
template <typename T>
DTR_HOST_DEVICE LstmCellGrads<T> lstm_cell_grads(T gh, T gc, T i, T f, T g, T o, T c, T tanh_state) {
  const T dc = gc + gh * o * (T(1) - tanh_state * tanh_state);
  return {dc * g * i * (T(1) - i), dc * c * f * (T(1) - f), dc * i * (T(1) - g * g),
          gh * tanh_state * o * (T(1) - o), dc * f};
}

struct Scale {
  double factor = 1.0;
  template <typename T>
  DTR_HOST_DEVICE T operator()(T x) const { return x * static_cast<T>(factor); }
};

// ---- dropout ----

// 1 / (1 - p) in T, what a kept element is multiplied by.
template <typename T>
DTR_HOST_DEVICE T dropout_keep_scale(double p) {
  return static_cast<T>(1.0 / (1.0 - p));
}

// Element i of dropout's mask (1 kept, 0 dropped) for the stream `key`: drawn in double whatever T, so float32
// and float64 runs of one seed drop the same elements.
template <typename T>
DTR_HOST_DEVICE T dropout_mask(std::uint64_t key, std::int64_t i, double p) {
  return unit_uniform<double>(key, i) >= p ? T(1) : T(0);
}

// ---- optimizer steps: f(a, b, c) over the op's inputs, c = 0 when the op has no third input ----

// sgd_momentum_buffer(buf, grad[, param]): momentum · buf + (grad + weight_decay · param).
struct SgdMomentumBuffer {
  double momentum = 0.0, decay = 0.0;
  template <typename T>
  DTR_HOST_DEVICE T operator()(T buf, T grad, T param) const {
    return static_cast<T>(momentum) * buf + (grad + static_cast<T>(decay) * param);
  }
};

// sgd_apply(param, buf[, grad]): param - lr · buf, or with Nesterov param - lr · (g + momentum · buf) with
// g = grad + weight_decay · param.
struct SgdApply {
  double lr = 0.0;
  bool nesterov = false;
  double momentum = 0.0, decay = 0.0;
  template <typename T>
  DTR_HOST_DEVICE T operator()(T param, T buf, T grad) const {
    if (!nesterov) return param - static_cast<T>(lr) * buf;
    const T step = (grad + static_cast<T>(decay) * param) + static_cast<T>(momentum) * buf;
    return param - static_cast<T>(lr) * step;
  }
};

// adam_moment1(m, grad[, param]): beta1 · m + (1 - beta1) · g, g = grad + weight_decay · param.
struct AdamMoment1 {
  double beta1 = 0.9, decay = 0.0;
  template <typename T>
  DTR_HOST_DEVICE T operator()(T m, T grad, T param) const {
    const T g = grad + static_cast<T>(decay) * param;
    return static_cast<T>(beta1) * m + static_cast<T>(1.0 - beta1) * g;
  }
};

// adam_moment2(v, grad[, param]): beta2 · v + (1 - beta2) · g², g = grad + weight_decay · param.
struct AdamMoment2 {
  double beta2 = 0.999, decay = 0.0;
  template <typename T>
  DTR_HOST_DEVICE T operator()(T v, T grad, T param) const {
    const T g = grad + static_cast<T>(decay) * param;
    return static_cast<T>(beta2) * v + static_cast<T>(1.0 - beta2) * g * g;
  }
};

// adam_apply(param, m, v): param - step_size · m / (sqrt(v) / sqrt_correction2 + eps), the bias corrections
// folded into step_size = lr / (1 - beta1^step) and sqrt_correction2 = sqrt(1 - beta2^step) by the host.
struct AdamApply {
  double step_size = 0.0, sqrt_correction2 = 1.0, eps = 1e-8;
  template <typename T>
  DTR_HOST_DEVICE T operator()(T param, T m, T v) const {
    const T denominator = std::sqrt(v) / static_cast<T>(sqrt_correction2) + static_cast<T>(eps);
    return param - static_cast<T>(step_size) * (m / denominator);
  }
};

}  // namespace dtr::kernels
