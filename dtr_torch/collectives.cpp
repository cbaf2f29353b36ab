#include "dtr_torch/collectives.h"

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <string_view>
#include <utility>

#include "dtr/torch.h"
#include "dtr_torch/wrapped_tensor.h"

namespace dtr::torch::detail {

namespace {

// Tensor, Tensor[] and Tensor[][] values with each tensor mapped by fn; any other value as it is.
template <typename Fn>
c10::IValue map_tensors(const c10::IValue& v, Fn&& fn) {
  if (v.isTensor()) return fn(v.toTensor());
  if (v.isTensorList()) {
    c10::List<at::Tensor> list;
    for (const at::Tensor& t : v.toTensorList()) list.push_back(fn(t));
    return list;
  }
  if (v.isList()) {
    const auto items = v.toListRef();
    if (!items.empty() && items[0].isTensorList()) {
      c10::List<c10::List<at::Tensor>> lists;
      for (const c10::IValue& item : items) {
        c10::List<at::Tensor> list;
        for (const at::Tensor& t : item.toTensorList()) list.push_back(fn(t));
        lists.push_back(list);
      }
      return lists;
    }
  }
  return v;
}

// What a collective that was waited for returns in its Work's place: waiting on the kernel's own Work again
// would, for a receive, wait for another message.
class CompletedWork final : public ::c10d::Work {
 public:
  CompletedWork() { finish(); }
};

}  // namespace

bool is_collective(const c10::FunctionSchema& schema) {
  return std::string_view(schema.name()).starts_with("c10d::");
}

void run_collective(const c10::OperatorHandle& op, std::vector<c10::IValue> args, ::torch::jit::Stack* stack) {
  std::vector<std::pair<at::Tensor, at::Tensor>> copies;  // (wrapper, its plain copy)
  auto plain_of = [&](const at::Tensor& t) -> at::Tensor {
    if (wrapped(t) == nullptr) return t;
    for (const auto& [w, p] : copies) {
      if (w.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return p;
    }
    at::Tensor p = decheckpoint(t);
    copies.emplace_back(t, p);
    return p;
  };
  auto wrapper_of = [&](const at::Tensor& t) -> at::Tensor {
    for (const auto& [w, p] : copies) {
      if (p.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return w;
    }
    return t;
  };
  std::vector<c10::IValue> plain;
  for (const c10::IValue& v : args) plain.push_back(map_tensors(v, plain_of));
  {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    op.callBoxed(&plain);
  }
  const std::string_view name = op.schema().name();
  if (!name.starts_with("c10d::send")) {
    for (c10::IValue& v : plain) {
      if (!v.isCustomClass()) continue;
      if (auto work = v.toCustomClass<::c10d::Work>()) {
        work->wait();
        v = c10::IValue(c10::intrusive_ptr<::c10d::Work>(c10::make_intrusive<CompletedWork>()));
      }
    }
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    for (auto& [w, p] : copies) w.copy_(p);
  }
  for (const c10::IValue& v : plain) stack->push_back(map_tensors(v, wrapper_of));
}

}  // namespace dtr::torch::detail
