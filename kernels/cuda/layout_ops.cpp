// CUDA kernels of the layout ops (reshape, slice, slice_backward, split, concat, transpose, permute, split2,
// concat2): argument unpacking and launches. Each op is one or more strided copies (layout.cu) whose walks come
// from the same geometry as the CPU kernels (kernels/layout_geometry.h); a walk that is one contiguous run on
// both sides is a cudaMemcpyAsync instead. Views are not in KernelArgs' outputs: an op whose outputs are all
// views has nothing to write. Every copy is enqueued on cuda::stream.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cuda_kernels.h"
#include "cuda_support.h"
#include "kernels/layout/layout_geometry.h"
#include "layout.h"

namespace dtr::kernels::cuda {
namespace {

// One contiguous device-to-device copy of `count` bytes; nothing for none.
void copy_bytes(const void* from, void* to, std::size_t count) {
  if (count == 0) return;
  DTR_CUDA_CHECK(cudaMemcpyAsync(to, from, count, cudaMemcpyDeviceToDevice, stream));
}

// Copies the elements of `shape` (row-major order) from `from` + `from_offset` at `from_strides` to `to` +
// `to_offset` at `to_strides` (offsets and strides in elements, strides >= 0). The walk drops size-1
// dimensions and merges neighbours contiguous on both sides (StridedWalk::append), so that a contiguous piece
// becomes one cudaMemcpyAsync and any other walk fits in max_walk_rank dimensions unless it truly needs more
// (InvalidArgument naming `op`).
void strided_copy(const char* op, std::size_t element_bytes, const Shape& shape, const Shape& from_strides,
                  const void* from, std::int64_t from_offset, const Shape& to_strides, void* to,
                  std::int64_t to_offset) {
  StridedCopy walk;  // operand 0 the source, 1 the destination
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) return;  // no element to move
    walk.append(op, shape[d], {from_strides[d], to_strides[d]});
  }
  const std::byte* first_from = bytes(from) + static_cast<std::size_t>(from_offset) * element_bytes;
  std::byte* first_to = bytes(to) + static_cast<std::size_t>(to_offset) * element_bytes;
  const int last = walk.rank - 1;
  if (walk.rank == 0 || (walk.rank == 1 && walk.strides[0][0] == 1 && walk.strides[1][0] == 1)) {
    copy_bytes(first_from, first_to, static_cast<std::size_t>(walk.count()) * element_bytes);
    return;
  }
  // Runs contiguous on both sides move as the widest word (up to 8 bytes) that every run length, stride and
  // start is a multiple of: the same bytes in fewer, wider loads and stores.
  std::size_t word = element_bytes;
  if (walk.strides[0][last] == 1 && walk.strides[1][last] == 1) {
    const auto fits = [&](std::size_t w) {
      const auto whole = [&](std::int64_t elements) {
        return (static_cast<std::size_t>(elements) * element_bytes) % w == 0;
      };
      bool ok = whole(walk.shape[last]) && reinterpret_cast<std::uintptr_t>(first_from) % w == 0 &&
                reinterpret_cast<std::uintptr_t>(first_to) % w == 0;
      for (int d = 0; ok && d < last; ++d) ok = whole(walk.strides[0][d]) && whole(walk.strides[1][d]);
      return ok;
    };
    for (std::size_t w = 8; w > element_bytes; w /= 2) {
      if (fits(w)) {
        word = w;
        break;
      }
    }
  }
  // Element counts and strides in words: the last dimension's run (stride 1 when widened) in words too.
  if (word != element_bytes) {
    const auto in_words = [&](std::int64_t elements) {
      return static_cast<std::int64_t>(static_cast<std::size_t>(elements) * element_bytes / word);
    };
    for (int d = 0; d < last; ++d) {
      walk.strides[0][d] = in_words(walk.strides[0][d]);
      walk.strides[1][d] = in_words(walk.strides[1][d]);
    }
    walk.shape[last] = in_words(walk.shape[last]);
  }
  launch_strided_copy(walk, word, first_from, first_to);
}

// ---- reshape ----

// Only ever a view: there is nothing to write unless a caller asks for a copy.
void reshape_cuda(const KernelArgs& args) {
  if (!args.outputs.empty()) copy_bytes(args.inputs[0], args.outputs[0], args.input_meta[0].nbytes());
}

// ---- slice ----

// The walk of a slice: [outer, length, inner] of the full tensor from element start · inner on, step · inner
// apart along the sliced dimension, against the contiguous slice.
struct SliceWalk {
  Shape shape;
  Shape full_strides;
  std::int64_t full_offset = 0;
  Shape part_strides;
};
SliceWalk slice_walk(const SliceGeometry& g) {
  const Around& a = g.around;
  return {{a.outer, g.length, a.inner},
          {a.size * a.inner, g.step * a.inner, 1},
          g.start * a.inner,
          {g.length * a.inner, a.inner, 1}};
}

void slice_cuda(const KernelArgs& args) {
  if (args.outputs.empty()) return;  // a view
  const SliceGeometry g = slice_geometry("slice", args.input_meta, args.input_meta[0].shape, args.attrs);
  const SliceWalk w = slice_walk(g);
  strided_copy("slice", element_size(args.input_meta[0].dtype), w.shape, w.full_strides, args.inputs[0],
               w.full_offset, w.part_strides, args.outputs[0], 0);
}

// Zeros everywhere, then the gradient scattered into the slice's place.
void slice_backward_cuda(const KernelArgs& args) {
  const TensorMeta& out = args.output_meta[0];
  // All-zero bytes are 0 in every dtype.
  if (out.nbytes() > 0) DTR_CUDA_CHECK(cudaMemsetAsync(args.outputs[0], 0, out.nbytes(), stream));
  const SliceGeometry g = slice_geometry("slice_backward", args.input_meta, out.shape, args.attrs);
  const SliceWalk w = slice_walk(g);
  strided_copy("slice_backward", element_size(out.dtype), w.shape, w.part_strides, args.inputs[0], 0,
               w.full_strides, args.outputs[0], w.full_offset);
}

// ---- split and concat ----

// Part k of a split ([outer, sizes[k], inner]) out of the whole, from its first row on; nothing to write when
// the parts are views.
void split_cuda(const KernelArgs& args) {
  if (args.outputs.empty()) return;
  const SplitGeometry g = split_geometry(args.input_meta, args.attrs);
  const std::size_t element_bytes = element_size(args.input_meta[0].dtype);
  const Around& a = g.around;
  std::int64_t row = 0;
  for (std::size_t k = 0; k < g.sizes.size(); ++k) {
    strided_copy("split", element_bytes, {a.outer, g.sizes[k], a.inner}, {a.size * a.inner, a.inner, 1},
                 args.inputs[0], row * a.inner, {g.sizes[k] * a.inner, a.inner, 1}, args.outputs[k], 0);
    row += g.sizes[k];
  }
}

// Input k ([outer, size_k, inner]) into its rows of the output.
void concat_cuda(const KernelArgs& args) {
  const std::size_t d = concat_dim(args.input_meta, args.attrs);
  const std::size_t element_bytes = element_size(args.input_meta[0].dtype);
  const Around whole = around(args.output_meta[0].shape, d);
  std::int64_t row = 0;
  for (std::size_t k = 0; k < args.inputs.size(); ++k) {
    const std::int64_t size = args.input_meta[k].shape[d];
    strided_copy("concat", element_bytes, {whole.outer, size, whole.inner}, {size * whole.inner, whole.inner, 1},
                 args.inputs[k], 0, {whole.size * whole.inner, whole.inner, 1}, args.outputs[0], row * whole.inner);
    row += size;
  }
}

// Dimension-0 halves: each part one contiguous range.
void split2_cuda(const KernelArgs& args) {
  const std::size_t first = args.output_meta[0].nbytes();
  copy_bytes(args.inputs[0], args.outputs[0], first);
  copy_bytes(bytes(args.inputs[0]) + first, args.outputs[1], args.output_meta[1].nbytes());
}

void concat2_cuda(const KernelArgs& args) {
  const std::size_t first = args.input_meta[0].nbytes();
  copy_bytes(args.inputs[0], args.outputs[0], first);
  copy_bytes(args.inputs[1], bytes(args.outputs[0]) + first, args.input_meta[1].nbytes());
}

// ---- transpose and permute ----

// The output in its own order, each element read from the input at the permuted strides.
Kernel permuting(const char* name) {
  return [name](const KernelArgs& args) {
    const std::vector<std::size_t> perm = permutation(name, args.input_meta, args.attrs);
    const Shape from_strides = permuted_strides(args.input_meta[0].shape, perm);
    const Shape& out_shape = args.output_meta[0].shape;
    strided_copy(name, element_size(args.input_meta[0].dtype), out_shape, from_strides, args.inputs[0], 0,
                 contiguous_strides(out_shape), args.outputs[0], 0);
  };
}

}  // namespace

void add_layout_kernels(KernelTable& table) {
  table["reshape"] = reshape_cuda;
  table["slice"] = slice_cuda;
  table["slice_backward"] = slice_backward_cuda;
  table["split"] = split_cuda;
  table["concat"] = concat_cuda;
  table["transpose"] = permuting("transpose");
  table["permute"] = permuting("permute");
  table["split2"] = split2_cuda;
  table["concat2"] = concat2_cuda;
}

}  // namespace dtr::kernels::cuda
