// Embedding lookup and its scatter-add backward: rows of a weight [V, D] picked by int64 indices. Index
// ranges are values, not shapes: check_values rejects one outside [0, V) before any output is allocated.
#include <algorithm>
#include <cstdint>
#include <span>
#include <string_view>

#include "dtr/ops.h"
#include "kernels/define_op.h"
#include "kernels/op_checks.h"

namespace dtr::ops {
namespace {

// Throws ShapeError naming the op, the shapes and the first index outside [0, rows).
void check_indices(std::string_view op, const KernelArgs& args, std::size_t indices_input, std::int64_t rows) {
  const std::int64_t* indices = args.input<std::int64_t>(indices_input);
  const std::int64_t count = args.input_meta[indices_input].numel();
  for (std::int64_t p = 0; p < count; ++p) {
    DTR_CHECK_SHAPES(indices[p] >= 0 && indices[p] < rows, op, args.input_meta, "needs indices in [0, ", rows,
                     "), index ", indices[p], " at position ", p);
  }
}

TensorMetas infer_embedding(std::span<const TensorMeta> inputs, const Attrs& /*attrs*/) {
  kernels::check_arity("embedding", inputs, 2);
  kernels::check_floating("embedding", inputs, 0, 1);
  DTR_CHECK_SHAPES(inputs[0].shape.size() == 2 && inputs[1].dtype == DType::int64, "embedding", inputs,
                   "needs a weight [V, D] and int64 indices");
  TensorMeta out{inputs[1].shape, inputs[0].dtype};
  out.shape.push_back(inputs[0].shape[1]);
  return {out};
}

void embedding_cpu(const KernelArgs& args) {
  const std::int64_t dim = args.input_meta[0].shape[1];
  const std::int64_t count = args.input_meta[1].numel();
  const std::int64_t* indices = args.input<std::int64_t>(1);
  kernels::dispatch_floating(args.input_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    const T* weight = args.input<T>(0);
    T* out = args.output<T>(0);
    for (std::int64_t p = 0; p < count; ++p) std::copy_n(weight + indices[p] * dim, dim, out + p * dim);
  });
}

TensorMetas infer_embedding_backward(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  kernels::check_arity("embedding_backward", inputs, 2);
  const std::int64_t rows = attrs.get_int("num_embeddings");
  kernels::check_floating("embedding_backward", inputs, 0, 1);
  const Shape& grad = inputs[0].shape;
  const Shape& indices = inputs[1].shape;
  DTR_CHECK_SHAPES(inputs[1].dtype == DType::int64 && grad.size() == indices.size() + 1 &&
                       std::equal(indices.begin(), indices.end(), grad.begin()),
                   "embedding_backward", inputs, "needs a gradient [..., D] and int64 indices [...]");
  DTR_CHECK_SHAPES(rows >= 0, "embedding_backward", inputs, "needs num_embeddings >= 0, not ", rows);
  return {TensorMeta{{rows, grad.back()}, inputs[0].dtype}};
}

// Row indices[p] of the result accumulates gradient row p, for p in increasing order: a fixed order, so
// repeated indices sum to the same bits on every run.
void embedding_backward_cpu(const KernelArgs& args) {
  const TensorMeta& out_meta = args.output_meta[0];
  const std::int64_t dim = out_meta.shape[1];
  const std::int64_t count = args.input_meta[1].numel();
  const std::int64_t* indices = args.input<std::int64_t>(1);
  kernels::dispatch_floating(out_meta.dtype, [&]<typename T>(T /*zero*/) {
    const T* grad = args.input<T>(0);
    T* out = args.output<T>(0);
    std::fill_n(out, out_meta.numel(), T(0));
    for (std::int64_t p = 0; p < count; ++p) {
      T* row = out + indices[p] * dim;
      for (std::int64_t j = 0; j < dim; ++j) row[j] += grad[p * dim + j];
    }
  });
}

}  // namespace

const OpDef& embedding() {
  return kernels::define_op([] {
    return OpDef{
        .name = "embedding",
        .infer = infer_embedding,
        .cpu_kernel = embedding_cpu,
        .flops =
            [](std::span<const TensorMeta> inputs, const Attrs&) {
              return kernels::at_least_one(static_cast<double>(inputs[1].numel() * inputs[0].shape[1]));
            },
        .check_values =
            [](const KernelArgs& args) { check_indices("embedding", args, 1, args.input_meta[0].shape[0]); },
    };
  });
}

const OpDef& embedding_backward() {
  return kernels::define_op([] {
    return OpDef{
        .name = "embedding_backward",
        .infer = infer_embedding_backward,
        .cpu_kernel = embedding_backward_cpu,
        .flops = kernels::numel_flops,
        .check_values =
            [](const KernelArgs& args) {
              check_indices("embedding_backward", args, 1, args.attrs.get_int("num_embeddings"));
            },
    };
  });
}

}  // namespace dtr::ops
