// dtr-torch's public functions, its registration with the dispatcher, and the same functions as the
// operators torch.ops.dtr.* for Python (python/dtr_torch).
#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <cstring>
#include <mutex>

#include "dtr/config.h"
#include "dtr/check.h"
#include "dtr/error.h"
#include "dtr/memory_resource.h"
#include "dtr/torch.h"
#include "dtr_torch/dispatch.h"
#include "dtr_torch/torch_memory.h"
#include "dtr_torch/wrapped_tensor.h"

namespace dtr::torch {

using detail::AliasGroup;
using detail::Layout;
using detail::wrapped;

namespace {

struct Registrations {
  std::vector<c10::RegistrationHandleRAII> handles;
};

}  // namespace

void intercepted(const c10::OperatorHandle& op, ::torch::jit::Stack* stack) { detail::intercept(op, stack); }

namespace {

// One kernel per aten op without a CompositeImplicitAutograd kernel: a backend fallback alone is outranked
// by CompositeExplicitAutograd kernels and would see few ops.
Registrations register_all() {
  Registrations r;
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const c10::OperatorName& name : dispatcher.getAllOpNames()) {
    auto op = dispatcher.findOp(name);
    if (!op || op->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd)) continue;
    if (op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) continue;
    if (name.name.rfind("dtr::", 0) == 0) continue;
    r.handles.push_back(dispatcher.registerImpl(name, c10::DispatchKey::PrivateUse1,
                                                c10::KernelFunction::makeFromBoxedFunction<&intercepted>(),
                                                c10::nullopt, nullptr, "dtr-torch"));
  }
  return r;
}

Registrations& registrations() {
  static Registrations r = register_all();
  return r;
}

// At load: the library's static initializers run after libtorch's, which registered the aten ops.
const bool registered = (registrations(), true);

}  // namespace

std::shared_ptr<Runtime> make_runtime(Config config) {
  config.device = Device{};
  config.buffers = BufferSource::memory_resource;
  config.budget_mode = BudgetMode::bytes;
  return std::make_shared<Runtime>(std::move(config), detail::make_torch_memory());
}

std::shared_ptr<Runtime> default_runtime() {
  static std::mutex mutex;
  static std::shared_ptr<Runtime> instance;
  std::lock_guard lock(mutex);
  if (instance == nullptr) instance = make_runtime(Config::from_env(detail::make_torch_memory()->capacity()));
  return instance;
}

at::Tensor checkpoint(const at::Tensor& tensor, const std::shared_ptr<Runtime>& runtime) {
  DTR_CHECK(tensor.defined(), InvalidArgument, "dtr::torch::checkpoint: the tensor is undefined");
  if (wrapped(tensor) != nullptr) return tensor;
  detail::check_cpu_runtime("dtr::torch::checkpoint", runtime);
  DTR_CHECK(tensor.device().is_cpu() && tensor.layout() == c10::kStrided, InvalidArgument,
            "dtr::torch::checkpoint: only strided CPU tensors can be wrapped; this one is ", tensor.toString(),
            " on ", tensor.device().str());
  // A lazy conjugate or negative view is made real: the wrapper holds values, not a flag on them.
  const at::Tensor values = tensor.is_conj() || tensor.is_neg() ? tensor.resolve_conj().resolve_neg() : tensor;
  auto group = std::make_shared<AliasGroup>(AliasGroup{runtime, detail::constant_of(values, *runtime)});
  at::Tensor result = detail::make_wrapped(std::move(group), detail::layout_of(values));
  if (tensor.requires_grad()) result.set_requires_grad(true);
  return result;
}

at::Tensor decheckpoint(const at::Tensor& tensor) {
  detail::WrappedTensorImpl* w = wrapped(tensor);
  if (w == nullptr) return tensor;
  return detail::read_out(*w->group()->runtime, w->group()->value, w->layout());
}

bool is_checkpointed(const at::Tensor& tensor) { return wrapped(tensor) != nullptr; }

std::shared_ptr<Runtime> runtime_of(const at::Tensor& tensor) {
  detail::WrappedTensorImpl* w = wrapped(tensor);
  return w != nullptr ? w->group()->runtime : nullptr;
}

void set_budget(std::optional<std::uint64_t> bytes, Runtime& runtime) { runtime.set_memory_budget(bytes); }

RuntimeStats stats(const Runtime& runtime) { return runtime.stats(); }

std::size_t intercepted_operator_count() { return registrations().handles.size(); }

}  // namespace dtr::torch

// Ops registered after dtr-torch was loaded (extensions, tests) reach it through the backend fallback, unless
// a composite kernel of theirs outranks it.
TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&dtr::torch::intercepted>());
}
// Their autograd key falls through to it, as AutogradCPU's does for CPU tensors (libtorch 1.13 leaves
// AutogradPrivateUse1 without a fallback).
TORCH_LIBRARY_IMPL(_, AutogradPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

// For Python: torch.ops.dtr.checkpoint(t), ... on the default runtime.
TORCH_LIBRARY(dtr, m) {
  m.def("checkpoint(Tensor t) -> Tensor", [](const at::Tensor& t) { return dtr::torch::checkpoint(t); });
  m.def("decheckpoint(Tensor t) -> Tensor", [](const at::Tensor& t) { return dtr::torch::decheckpoint(t); });
  m.def("is_checkpointed(Tensor t) -> bool", [](const at::Tensor& t) { return dtr::torch::is_checkpointed(t); });
  m.def("set_budget(int bytes) -> ()", [](std::int64_t bytes) {
    dtr::torch::set_budget(bytes > 0 ? std::optional<std::uint64_t>(static_cast<std::uint64_t>(bytes)) : std::nullopt);
  });
  m.def("stats() -> str", []() { return dtr::to_json(dtr::torch::stats()); });
  m.def("reset_peak_stats() -> ()", []() { dtr::torch::default_runtime()->reset_peak_stats(); });
  m.def("set_evict_after_every_op(bool on) -> ()", [](bool on) { dtr::torch::set_evict_after_every_op(on); });
}
