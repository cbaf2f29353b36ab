// Ops that move elements without arithmetic, on any dtype: reshape, slice (and its backward), split, concat,
// transpose, permute. Row-major layout makes some of them views of their input (OpDef::views): a reshape
// always, a slice or a split when each part is one contiguous range (the dimensions outside the sliced one all
// 1: slicing dimension 0, for example). The others copy, so every tensor stays contiguous; split and concat copy
// their outer blocks (an image's channels, say) on the threads.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dtr/ops.h"
#include "kernels/cpu_threads.h"
#include "kernels/define_op.h"
#include "kernels/layout/layout_geometry.h"
#include "kernels/op_checks.h"

namespace dtr::ops {
namespace {

using kernels::around;
using kernels::bytes;
using kernels::concat_dim;
using kernels::permutation;
using kernels::product;
using kernels::slice_geometry;
using kernels::slice_is_contiguous;
using kernels::SliceGeometry;
using kernels::split_geometry;
using kernels::SplitGeometry;

// ---- reshape ----

Shape reshaped(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  const std::vector<std::int64_t>& wanted = attrs.get_ints("shape");
  kernels::check_arity("reshape", inputs, 1);
  Shape shape(wanted.begin(), wanted.end());
  std::int64_t known = 1;
  std::size_t inferred = shape.size();
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == -1 && inferred == shape.size()) {
      inferred = d;
      continue;
    }
    DTR_CHECK_SHAPES(shape[d] >= 0, "reshape", inputs, "needs dimensions >= 0 and at most one -1, not shape ",
                     to_string(shape));
    known *= shape[d];
  }
  const std::int64_t numel = inputs[0].numel();
  if (inferred < shape.size()) {
    DTR_CHECK_SHAPES(known > 0 && numel % known == 0, "reshape", inputs, "cannot infer the -1 in shape ",
                     to_string(shape));
    shape[inferred] = numel / known;
    known *= shape[inferred];
  }
  DTR_CHECK_SHAPES(known == numel, "reshape", inputs, "needs shape ", to_string(shape), " to hold ", numel,
                   " elements");
  return shape;
}

// ---- slice ----

// Copies the slice out of `full` (or, scattering, into it): block j of each outer block.
void copy_slice(const SliceGeometry& g, std::size_t element_bytes, const std::byte* from, std::byte* to,
                bool scatter) {
  const auto run = static_cast<std::size_t>(g.around.inner) * element_bytes;
  for (std::int64_t o = 0; o < g.around.outer; ++o) {
    for (std::int64_t j = 0; j < g.length; ++j) {
      const auto full = static_cast<std::size_t>(o * g.around.size + g.start + j * g.step) * run;
      const auto part = static_cast<std::size_t>(o * g.length + j) * run;
      if (scatter) {
        std::memcpy(to + full, from + part, run);
      } else {
        std::memcpy(to + part, from + full, run);
      }
    }
  }
}

TensorMetas infer_slice(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  kernels::check_arity("slice", inputs, 1);
  const SliceGeometry g = slice_geometry("slice", inputs, inputs[0].shape, attrs);
  TensorMeta out = inputs[0];
  out.shape[g.dim] = g.length;
  return {out};
}

Shape input_shape_attr(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  const std::vector<std::int64_t>& dims = attrs.get_ints("input_shape");
  Shape shape(dims.begin(), dims.end());
  DTR_CHECK_SHAPES(std::all_of(shape.begin(), shape.end(), [](std::int64_t d) { return d >= 0; }), "slice_backward",
                   inputs, "needs input_shape of dimensions >= 0, not input_shape ", to_string(shape));
  return shape;
}

TensorMetas infer_slice_backward(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  kernels::check_arity("slice_backward", inputs, 1);
  const Shape full = input_shape_attr(inputs, attrs);
  const SliceGeometry g = slice_geometry("slice_backward", inputs, full, attrs);
  Shape expected = full;
  expected[g.dim] = g.length;
  DTR_CHECK_SHAPES(inputs[0].shape == expected, "slice_backward", inputs, "needs a gradient of the slice's shape ",
                   to_string(expected), " (input_shape ", to_string(full), ")");
  return {TensorMeta{full, inputs[0].dtype}};
}

// ---- split ----

TensorMetas infer_split(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  const SplitGeometry g = split_geometry(inputs, attrs);
  TensorMetas outputs;
  for (const std::int64_t size : g.sizes) {
    TensorMeta part = inputs[0];
    part.shape[g.dim] = size;
    outputs.push_back(part);
  }
  return outputs;
}

OutputViews split_views(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  const SplitGeometry g = split_geometry(inputs, attrs);
  OutputViews views(g.sizes.size());
  if (g.around.outer != 1) return views;
  std::int64_t offset = 0;
  for (std::size_t k = 0; k < g.sizes.size(); ++k) {
    views[k] = ViewOf{0, offset * g.around.inner};
    offset += g.sizes[k];
  }
  return views;
}

// The parts copied out of each outer block in turn; nothing to write when the parts are views.
void split_cpu(const KernelArgs& args) {
  if (args.outputs.empty()) return;
  const SplitGeometry g = split_geometry(args.input_meta, args.attrs);
  const std::size_t element_bytes = element_size(args.input_meta[0].dtype);
  const std::byte* input = bytes(args.inputs[0]);
  const auto block = static_cast<std::size_t>(args.input_meta[0].numel() / std::max<std::int64_t>(g.around.outer, 1)) *
                     element_bytes;
  kernels::parallel_for_items(g.around.outer, args.input_meta[0].numel(), [&](std::int64_t o) {
    const std::byte* in = input + static_cast<std::size_t>(o) * block;
    for (std::size_t k = 0; k < g.sizes.size(); ++k) {
      const auto run = static_cast<std::size_t>(g.sizes[k] * g.around.inner) * element_bytes;
      std::memcpy(bytes(args.outputs[k]) + static_cast<std::size_t>(o) * run, in, run);
      in += run;
    }
  });
}

// ---- concat ----

TensorMetas infer_concat(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  const std::size_t d = concat_dim(inputs, attrs);
  TensorMeta out = inputs[0];
  out.shape[d] = 0;
  for (const TensorMeta& in : inputs) out.shape[d] += in.shape[d];
  return {out};
}

void concat_cpu(const KernelArgs& args) {
  const std::size_t d = concat_dim(args.input_meta, args.attrs);
  const std::size_t element_bytes = element_size(args.input_meta[0].dtype);
  const std::int64_t outer = product(args.input_meta[0].shape, 0, d);
  const std::int64_t total = args.output_meta[0].numel();
  const auto block = static_cast<std::size_t>(total / std::max<std::int64_t>(outer, 1)) * element_bytes;
  kernels::parallel_for_items(outer, total, [&](std::int64_t o) {
    std::byte* out = bytes(args.outputs[0]) + static_cast<std::size_t>(o) * block;
    for (std::size_t k = 0; k < args.inputs.size(); ++k) {
      const Shape& shape = args.input_meta[k].shape;
      const auto run = static_cast<std::size_t>(product(shape, d, shape.size())) * element_bytes;
      std::memcpy(out, bytes(args.inputs[k]) + static_cast<std::size_t>(o) * run, run);
      out += run;
    }
  });
}

double concat_flops(std::span<const TensorMeta> inputs, const Attrs& /*attrs*/) {
  double total = 0;
  for (const TensorMeta& in : inputs) total += static_cast<double>(in.numel());
  return kernels::at_least_one(total);
}

// ---- transpose and permute ----

template <typename Element>
void permute_elements(const Element* in, Element* out, const Shape& out_shape, const Shape& in_strides) {
  const std::size_t rank = out_shape.size();
  const std::int64_t total = product(out_shape, 0, rank);
  if (total == 0) return;
  if (rank == 0) {
    out[0] = in[0];
    return;
  }
  // The last output dimension is the inner loop; an odometer walks the others, `base` its input offset.
  const std::int64_t inner = out_shape[rank - 1];
  const std::int64_t inner_stride = in_strides[rank - 1];
  Shape index(rank, 0);
  std::int64_t base = 0;
  for (std::int64_t o = 0; o < total; o += inner) {
    for (std::int64_t j = 0; j < inner; ++j) out[o + j] = in[base + j * inner_stride];
    for (std::size_t d = rank - 1; d-- > 0;) {
      base += in_strides[d];
      if (++index[d] < out_shape[d]) break;
      base -= in_strides[d] * out_shape[d];
      index[d] = 0;
    }
  }
}

OpDef permuting(const std::string& name) {
  OpDef def;
  def.name = name;
  def.infer = [name](std::span<const TensorMeta> inputs, const Attrs& attrs) {
    kernels::check_arity(name, inputs, 1);
    const std::vector<std::size_t> perm = permutation(name, inputs, attrs);
    TensorMeta out = inputs[0];
    for (std::size_t i = 0; i < perm.size(); ++i) out.shape[i] = inputs[0].shape[perm[i]];
    return TensorMetas{out};
  };
  def.cpu_kernel = [name](const KernelArgs& args) {
    const std::vector<std::size_t> perm = permutation(name, args.input_meta, args.attrs);
    const Shape strides = kernels::permuted_strides(args.input_meta[0].shape, perm);
    const Shape& out_shape = args.output_meta[0].shape;
    // By element size: every dtype is 1, 4 or 8 bytes.
    switch (element_size(args.input_meta[0].dtype)) {
      case 1:
        permute_elements(args.input<std::uint8_t>(0), args.output<std::uint8_t>(0), out_shape, strides);
        break;
      case 4:
        permute_elements(args.input<std::uint32_t>(0), args.output<std::uint32_t>(0), out_shape, strides);
        break;
      default:
        permute_elements(args.input<std::uint64_t>(0), args.output<std::uint64_t>(0), out_shape, strides);
        break;
    }
  };
  def.flops = kernels::numel_flops;
  return def;
}

}  // namespace

const OpDef& reshape() {
  return kernels::define_op([] {
    return OpDef{
        .name = "reshape",
        .infer =
            [](std::span<const TensorMeta> inputs, const Attrs& attrs) {
              return TensorMetas{TensorMeta{reshaped(inputs, attrs), inputs[0].dtype}};
            },
        // Only ever a view: there is nothing to write unless a caller asks for a copy.
        .cpu_kernel =
            [](const KernelArgs& args) {
              if (!args.outputs.empty()) std::memcpy(args.outputs[0], args.inputs[0], args.input_meta[0].nbytes());
            },
        .flops = [](std::span<const TensorMeta>, const Attrs&) { return 1.0; },
        .views =
            [](std::span<const TensorMeta>, const Attrs&) {
              return OutputViews{ViewOf{0, 0}};
            },
    };
  });
}

const OpDef& slice() {
  return kernels::define_op([] {
    return OpDef{
        .name = "slice",
        .infer = infer_slice,
        .cpu_kernel =
            [](const KernelArgs& args) {
              if (args.outputs.empty()) return;  // a view
              const SliceGeometry g = slice_geometry("slice", args.input_meta, args.input_meta[0].shape, args.attrs);
              copy_slice(g, element_size(args.input_meta[0].dtype), bytes(args.inputs[0]), bytes(args.outputs[0]),
                         false);
            },
        // A copy moves each output element once; a view costs a step.
        .flops =
            [](std::span<const TensorMeta> inputs, const Attrs& attrs) {
              const SliceGeometry g = slice_geometry("slice", inputs, inputs[0].shape, attrs);
              return slice_is_contiguous(g)
                         ? 1.0
                         : kernels::at_least_one(static_cast<double>(g.around.outer * g.length * g.around.inner));
            },
        .views =
            [](std::span<const TensorMeta> inputs, const Attrs& attrs) {
              const SliceGeometry g = slice_geometry("slice", inputs, inputs[0].shape, attrs);
              if (!slice_is_contiguous(g)) return OutputViews{std::nullopt};
              return OutputViews{ViewOf{0, g.start * g.around.inner}};
            },
    };
  });
}

const OpDef& slice_backward() {
  return kernels::define_op([] {
    return OpDef{
        .name = "slice_backward",
        .infer = infer_slice_backward,
        .cpu_kernel =
            [](const KernelArgs& args) {
              const TensorMeta& out = args.output_meta[0];
              std::memset(args.outputs[0], 0, out.nbytes());  // all-zero bytes are 0 in every dtype
              const SliceGeometry g = slice_geometry("slice_backward", args.input_meta, out.shape, args.attrs);
              copy_slice(g, element_size(out.dtype), bytes(args.inputs[0]), bytes(args.outputs[0]), true);
            },
        .flops =
            [](std::span<const TensorMeta> inputs, const Attrs& attrs) {
              return kernels::at_least_one(static_cast<double>(TensorMeta{input_shape_attr(inputs, attrs)}.numel()));
            },
    };
  });
}

const OpDef& split() {
  return kernels::define_op([] {
    return OpDef{
        .name = "split",
        .infer = infer_split,
        .cpu_kernel = split_cpu,
        .flops =
            [](std::span<const TensorMeta> inputs, const Attrs& attrs) {
              return split_geometry(inputs, attrs).around.outer == 1 ? 1.0 : kernels::numel_flops(inputs, attrs);
            },
        .views = split_views,
    };
  });
}

const OpDef& concat() {
  return kernels::define_op(
      [] { return OpDef{.name = "concat", .infer = infer_concat, .cpu_kernel = concat_cpu, .flops = concat_flops}; });
}

const OpDef& transpose() {
  return kernels::define_op([] { return permuting("transpose"); });
}

const OpDef& permute() {
  return kernels::define_op([] { return permuting("permute"); });
}

}  // namespace dtr::ops
