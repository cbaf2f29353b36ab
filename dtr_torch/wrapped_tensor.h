// The wrapper: a storage-less TensorImpl under the PrivateUse1 dispatch key whose value lives in a
// dtr::Runtime. Sizes, strides and offset are the TensorImpl's own (shape queries never touch the runtime);
// the bytes are an AliasGroup's: one runtime tensor shared by a tensor, its views and its shallow copies, so
// that an in-place update through any of them is seen by all (copy-on-write: the group takes a new value,
// closures keep the old one).
#pragma once

#include <ATen/Tensor.h>
#include <c10/core/TensorImpl.h>

#include <memory>
#include <string_view>

#include "dtr/runtime.h"

namespace dtr::torch::detail {

// One storage's value: the bytes of a runtime tensor (uint8, [nbytes]). Replaced, never written in place.
struct AliasGroup {
  std::shared_ptr<Runtime> runtime;
  Tensor value;
  // Written in place with gradients off outside backward before (dispatch.cpp: the second such update makes
  // the value a constant).
  bool updated_without_grad = false;
};

// Where a strided tensor's elements are in its group's bytes.
struct Layout {
  std::vector<std::int64_t> sizes;
  std::vector<std::int64_t> strides;
  std::int64_t offset = 0;  // in elements
  caffe2::TypeMeta dtype;
};

class WrappedTensorImpl final : public c10::TensorImpl {
 public:
  WrappedTensorImpl(std::shared_ptr<AliasGroup> group, const Layout& layout);

  const std::shared_ptr<AliasGroup>& group() const { return group_; }
  Layout layout() const;
  // Takes a new layout (an out= op that resized its output).
  void set_layout(const Layout& layout);

  c10::intrusive_ptr<c10::TensorImpl> shallow_copy_and_detach(const c10::VariableVersion& version_counter,
                                                              bool allow_tensor_metadata_change) const override;
  c10::intrusive_ptr<c10::TensorImpl> shallow_copy_and_detach(c10::VariableVersion&& version_counter,
                                                              bool allow_tensor_metadata_change) const override;
  void shallow_copy_from(const c10::intrusive_ptr<c10::TensorImpl>& impl) override;

 private:
  const char* tensorimpl_type_name() const override { return "dtr::torch::WrappedTensorImpl"; }
  std::shared_ptr<AliasGroup> group_;
};

// InvalidArgument naming `caller` unless `runtime` can hold dtr-torch's tensors: not null, on the CPU.
void check_cpu_runtime(std::string_view caller, const std::shared_ptr<Runtime>& runtime);
// The wrapper behind `t`, or nullptr for any other tensor.
WrappedTensorImpl* wrapped(const at::Tensor& t);
// A new wrapper over `group` with `layout`.
at::Tensor make_wrapped(std::shared_ptr<AliasGroup> group, const Layout& layout);
// The layout of a plain strided tensor, with its offset taken from its data pointer's element (0).
Layout layout_of(const at::Tensor& t);
// Bytes from the first element to one past the last element `layout` reaches (0 when empty).
std::size_t extent_bytes(const Layout& layout);
// The runtime's view of any storage: its bytes, as uint8 [bytes].
TensorMeta bytes_meta(std::size_t bytes);
// A constant in `runtime` holding `bytes` bytes copied from `data`.
Tensor constant_bytes(Runtime& runtime, const void* data, std::size_t bytes);
// A plain CPU tensor with the elements `layout` reaches in runtime value `value` (made resident, or
// recomputed, by a runtime op that only reads it): the same strides where they describe a dense tensor.
at::Tensor read_out(Runtime& runtime, const Tensor& value, const Layout& layout);
// A CPU tensor with `layout` over `bytes` (the group's bytes), not owning them.
at::Tensor view_over(void* bytes, const Layout& layout);

}  // namespace dtr::torch::detail
