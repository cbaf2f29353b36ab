// The ops on variables (include/dtr/nn/functional.h).
#include "dtr/nn/functional.h"

#include <algorithm>

#include "dtr/check.h"
#include "dtr/ops.h"

namespace dtr::nn {

namespace {

Attrs axes_attrs(std::vector<std::int64_t> axes, bool keepdim) {
  Attrs attrs;
  if (!axes.empty()) attrs.set("axes", std::move(axes));
  if (keepdim) attrs.set("keepdim", std::int64_t{1});
  return attrs;
}

std::vector<std::int64_t> pair(std::array<std::int64_t, 2> values) { return {values[0], values[1]}; }

Attrs pool_attrs(std::array<std::int64_t, 2> kernel, std::optional<std::array<std::int64_t, 2>> stride,
                 std::array<std::int64_t, 2> padding) {
  return Attrs{{"kernel", pair(kernel)}, {"stride", pair(stride.value_or(kernel))}, {"padding", pair(padding)}};
}

}  // namespace

Variable constant(Runtime& runtime, Shape shape, std::span<const float> values, bool requires_grad) {
  return Variable(runtime, runtime.constant(TensorMeta{std::move(shape), DType::float32}, values), requires_grad);
}

Variable zeros(Runtime& runtime, TensorMeta meta, bool requires_grad) {
  return Variable(runtime, runtime.constant(std::move(meta)), requires_grad);
}

Variable add(const Variable& a, const Variable& b) { return apply1(ops::add(), {a, b}); }
Variable sub(const Variable& a, const Variable& b) { return apply1(ops::sub(), {a, b}); }
Variable mul(const Variable& a, const Variable& b) { return apply1(ops::mul(), {a, b}); }
Variable div(const Variable& a, const Variable& b) { return apply1(ops::div(), {a, b}); }
Variable scale(const Variable& x, double factor) { return apply1(ops::scale(), {x}, {{"factor", factor}}); }
Variable relu(const Variable& x) { return apply1(ops::relu(), {x}); }
Variable gelu(const Variable& x) { return apply1(ops::gelu(), {x}); }
Variable tanh(const Variable& x) { return apply1(ops::tanh(), {x}); }
Variable sigmoid(const Variable& x) { return apply1(ops::sigmoid(), {x}); }
std::vector<Variable> lstm_cell(const Variable& gates, const Variable& c) {
  const Variable inputs[] = {gates, c};
  return apply(ops::lstm_cell(), std::span<const Variable>(inputs));
}

Variable sum(const Variable& x, std::vector<std::int64_t> axes, bool keepdim) {
  return apply1(ops::sum(), {x}, axes_attrs(std::move(axes), keepdim));
}

Variable mean(const Variable& x, std::vector<std::int64_t> axes, bool keepdim) {
  return apply1(ops::mean(), {x}, axes_attrs(std::move(axes), keepdim));
}

Variable dropout(const Variable& x, double p, bool training) {
  if (!training || p == 0.0) return x;
  return apply(ops::dropout(), std::span<const Variable>(&x, 1), {{"p", p}}).front();
}

Variable matmul(const Variable& a, const Variable& b, bool transpose_a, bool transpose_b) {
  return apply1(ops::matmul(), {a, b},
                {{"transpose_a", std::int64_t{transpose_a}}, {"transpose_b", std::int64_t{transpose_b}}});
}

Variable bmm(const Variable& a, const Variable& b, bool transpose_a, bool transpose_b) {
  return apply1(ops::bmm(), {a, b},
                {{"transpose_a", std::int64_t{transpose_a}}, {"transpose_b", std::int64_t{transpose_b}}});
}

Variable attention(const Variable& qkv, std::int64_t heads) {
  return apply(ops::attention(), std::span<const Variable>(&qkv, 1), {{"heads", heads}})[0];
}

Variable linear_add(const Variable& x, const Variable& weight, const Variable& addend, const Variable& bias) {
  if (bias.defined()) return apply1(ops::linear_add(), {x, weight, addend, bias});
  return apply1(ops::linear_add(), {x, weight, addend});
}

Variable linear(const Variable& x, const Variable& weight, const Variable& bias) {
  if (bias.defined()) return apply1(ops::linear(), {x, weight, bias});
  return apply1(ops::linear(), {x, weight});
}

Variable conv2d(const Variable& x, const Variable& weight, const Variable& bias, const Conv2dOptions& options) {
  const Attrs attrs{{"stride", pair(options.stride)},
                    {"padding", pair(options.padding)},
                    {"dilation", pair(options.dilation)},
                    {"groups", options.groups}};
  if (bias.defined()) return apply1(ops::conv2d(), {x, weight, bias}, attrs);
  return apply1(ops::conv2d(), {x, weight}, attrs);
}

Variable max_pool2d(const Variable& x, std::array<std::int64_t, 2> kernel,
                    std::optional<std::array<std::int64_t, 2>> stride, std::array<std::int64_t, 2> padding) {
  return apply1(ops::max_pool2d(), {x}, pool_attrs(kernel, stride, padding));
}

Variable avg_pool2d(const Variable& x, std::array<std::int64_t, 2> kernel,
                    std::optional<std::array<std::int64_t, 2>> stride, std::array<std::int64_t, 2> padding) {
  return apply1(ops::avg_pool2d(), {x}, pool_attrs(kernel, stride, padding));
}

Variable global_avg_pool2d(const Variable& x) {
  DTR_CHECK(x.shape().size() == 4, ShapeError, "global_avg_pool2d: expected [N, C, H, W], got ", to_string(x.shape()));
  return mean(x, {2, 3});
}

Variable upsample_nearest2d(const Variable& x, std::int64_t factor) {
  DTR_CHECK(x.shape().size() == 4, ShapeError, "upsample_nearest2d: expected [N, C, H, W], got ",
            to_string(x.shape()));
  DTR_CHECK(factor >= 1, InvalidArgument, "upsample_nearest2d: factor ", factor, " (expected >= 1)");
  const Shape& s = x.shape();
  const Variable cells = reshape(x, {s[0], s[1], s[2], 1, s[3], 1});
  const Variable repeated =
      apply1(ops::broadcast_to(), {cells}, {{"shape", std::vector<std::int64_t>{s[0], s[1], s[2], factor, s[3], factor}}});
  return reshape(repeated, {s[0], s[1], s[2] * factor, s[3] * factor});
}

Variable softmax(const Variable& x, std::int64_t axis) { return apply1(ops::softmax(), {x}, {{"axis", axis}}); }
Variable log_softmax(const Variable& x, std::int64_t axis) {
  return apply1(ops::log_softmax(), {x}, {{"axis", axis}});
}

Variable cross_entropy(const Variable& logits, const Variable& labels, double label_smoothing) {
  DTR_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0, InvalidArgument, "cross_entropy: label_smoothing ",
            label_smoothing, " (expected a real in [0, 1])");
  const Variable nll = apply1(ops::cross_entropy(), {logits, labels});
  if (label_smoothing == 0.0) return nll;
  // -mean over every element of log softmax = the mean over rows of the mean over classes of -log softmax.
  const Variable uniform = scale(mean(log_softmax(logits, -1)), -label_smoothing);
  return add(scale(nll, 1.0 - label_smoothing), uniform);
}

Variable mse_loss(const Variable& a, const Variable& b) {
  const Variable d = sub(a, b);
  return mean(mul(d, d));
}

Variable layer_norm(const Variable& x, const Variable& weight, const Variable& bias, double eps,
                    std::int64_t normalized_rank) {
  const Variable inputs[] = {x, weight, bias};
  return apply(ops::layer_norm(), inputs, {{"eps", eps}, {"normalized_rank", normalized_rank}}).front();
}

Variable embedding(const Variable& weight, const Variable& indices) {
  return apply1(ops::embedding(), {weight, indices});
}

Variable reshape(const Variable& x, std::vector<std::int64_t> shape) {
  return apply1(ops::reshape(), {x}, {{"shape", std::move(shape)}});
}

Variable flatten(const Variable& x, std::int64_t start_dim) {
  const Shape& s = x.shape();
  const auto rank = static_cast<std::int64_t>(s.size());
  const std::int64_t start = start_dim < 0 ? start_dim + rank : start_dim;
  DTR_CHECK(start >= 0 && start < std::max<std::int64_t>(rank, 1), ShapeError, "flatten: start_dim ", start_dim,
            " out of range for ", to_string(s));
  std::vector<std::int64_t> shape(s.begin(), s.begin() + start);
  std::int64_t rest = 1;
  for (std::int64_t d = start; d < rank; ++d) rest *= s[static_cast<std::size_t>(d)];
  shape.push_back(rest);
  return reshape(x, std::move(shape));
}

Variable transpose(const Variable& x, std::int64_t dim0, std::int64_t dim1) {
  return apply1(ops::transpose(), {x}, {{"dim0", dim0}, {"dim1", dim1}});
}

Variable permute(const Variable& x, std::vector<std::int64_t> dims) {
  return apply1(ops::permute(), {x}, {{"dims", std::move(dims)}});
}

Variable concat(std::span<const Variable> parts, std::int64_t dim) { return apply1(ops::concat(), parts, {{"dim", dim}}); }

std::vector<Variable> split(const Variable& x, std::vector<std::int64_t> sizes, std::int64_t dim) {
  return apply(ops::split(), std::span<const Variable>(&x, 1), {{"dim", dim}, {"sizes", std::move(sizes)}});
}

Variable slice(const Variable& x, std::int64_t dim, std::int64_t start, std::int64_t end, std::int64_t step) {
  return apply1(ops::slice(), {x}, {{"dim", dim}, {"start", start}, {"end", end}, {"step", step}});
}

}  // namespace dtr::nn
