#include "dtr_torch/wrapped_tensor.h"

#include <ATen/ATen.h>

#include <memory>
#include <span>

#include "dtr/check.h"
#include "dtr/computation.h"
#include "dtr/config.h"
#include "dtr/error.h"

namespace dtr::torch::detail {

namespace {

// Below autograd, as a backend: PrivateUse1. The device stays the CPU, so the autograd engine, factory ops
// and type checks treat a wrapper as the CPU tensor it stands for.
c10::DispatchKeySet wrapper_keys() { return c10::DispatchKeySet(c10::DispatchKey::PrivateUse1); }

}  // namespace

WrappedTensorImpl::WrappedTensorImpl(std::shared_ptr<AliasGroup> group, const Layout& layout)
    : c10::TensorImpl(wrapper_keys(), layout.dtype, c10::Device(c10::kCPU)), group_(std::move(group)) {
  set_layout(layout);
}

Layout WrappedTensorImpl::layout() const {
  return Layout{sizes().vec(), strides().vec(), storage_offset(), dtype()};
}

void WrappedTensorImpl::set_layout(const Layout& layout) {
  set_sizes_and_strides(layout.sizes, layout.strides, layout.offset);
  data_type_ = layout.dtype;
}

c10::intrusive_ptr<c10::TensorImpl> WrappedTensorImpl::shallow_copy_and_detach(
    const c10::VariableVersion& version_counter, bool allow_tensor_metadata_change) const {
  auto impl = c10::make_intrusive<WrappedTensorImpl>(group_, layout());
  impl->set_version_counter(version_counter);
  impl->set_allow_tensor_metadata_change(allow_tensor_metadata_change);
  return impl;
}

c10::intrusive_ptr<c10::TensorImpl> WrappedTensorImpl::shallow_copy_and_detach(
    c10::VariableVersion&& version_counter, bool allow_tensor_metadata_change) const {
  auto impl = c10::make_intrusive<WrappedTensorImpl>(group_, layout());
  impl->set_version_counter(std::move(version_counter));
  impl->set_allow_tensor_metadata_change(allow_tensor_metadata_change);
  return impl;
}

void WrappedTensorImpl::shallow_copy_from(const c10::intrusive_ptr<c10::TensorImpl>& impl) {
  auto* other = dynamic_cast<WrappedTensorImpl*>(impl.get());
  TORCH_CHECK(other != nullptr,
              "dtr-torch: a wrapped tensor's data can only be set to another wrapped tensor; wrap it first "
              "(dtr::torch::checkpoint)");
  group_ = other->group_;
  set_layout(other->layout());
}

void check_cpu_runtime(std::string_view caller, const std::shared_ptr<Runtime>& runtime) {
  DTR_CHECK(runtime != nullptr, InvalidArgument, caller, ": the runtime is null");
  DTR_CHECK(runtime->config().device.kind == DeviceKind::cpu, InvalidArgument, caller, ": the runtime runs on ",
            runtime->config().device.to_string(), "; dtr-torch holds CPU tensors in a CPU runtime");
}

WrappedTensorImpl* wrapped(const at::Tensor& t) {
  if (!t.defined() || !t.key_set().has(c10::DispatchKey::PrivateUse1)) return nullptr;
  return dynamic_cast<WrappedTensorImpl*>(t.unsafeGetTensorImpl());
}

at::Tensor make_wrapped(std::shared_ptr<AliasGroup> group, const Layout& layout) {
  return at::detail::make_tensor<WrappedTensorImpl>(std::move(group), layout);
}

Layout layout_of(const at::Tensor& t) {
  return Layout{t.sizes().vec(), t.strides().vec(), 0, t.dtype()};
}

std::size_t extent_bytes(const Layout& layout) {
  std::int64_t last = layout.offset;
  for (std::size_t d = 0; d < layout.sizes.size(); ++d) {
    if (layout.sizes[d] == 0) return 0;
    last += (layout.sizes[d] - 1) * layout.strides[d];
  }
  return static_cast<std::size_t>(last + 1) * layout.dtype.itemsize();
}

TensorMeta bytes_meta(std::size_t bytes) { return TensorMeta{Shape{static_cast<std::int64_t>(bytes)}, DType::uint8}; }

Tensor constant_bytes(Runtime& runtime, const void* data, std::size_t bytes) {
  return runtime.constant(bytes_meta(bytes), std::span<const std::uint8_t>(static_cast<const std::uint8_t*>(data), bytes));
}

namespace {

// Reads a value into plain memory: a computation with no outputs that copies its input out on its one run.
class ReadOut final : public Computation {
 public:
  explicit ReadOut(Layout layout) : layout_(std::move(layout)) {}
  std::string_view name() const override { return "dtr::decheckpoint"; }
  TensorMetas run_first(const KernelArgs& args) override {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    // The same strides where they describe a dense tensor; contiguous where they overlap (an expanded view).
    result_ = view_over(const_cast<void*>(args.inputs[0]), layout_).clone(at::MemoryFormat::Preserve);
    return {};
  }
  void run(const KernelArgs&) override {}
  at::Tensor result() const { return result_; }

 private:
  Layout layout_;
  at::Tensor result_;
};

}  // namespace

at::Tensor read_out(Runtime& runtime, const Tensor& value, const Layout& layout) {
  auto read = std::make_shared<ReadOut>(layout);
  runtime.call(read, std::span<const Tensor>(&value, 1));
  return read->result();
}

at::Tensor view_over(void* bytes, const Layout& layout) {
  auto* first = static_cast<char*>(bytes) + layout.offset * static_cast<std::int64_t>(layout.dtype.itemsize());
  return at::from_blob(first, layout.sizes, layout.strides,
                       at::TensorOptions().dtype(layout.dtype).device(c10::kCPU));
}

}  // namespace dtr::torch::detail
