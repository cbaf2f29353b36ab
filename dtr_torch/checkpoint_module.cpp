// dtr::torch::checkpoint_module for C++ modules: their parameters and buffers become constants of the runtime
// (mirrors) at once, while the module keeps its plain tensors.
#include <torch/nn/module.h>

#include <unordered_set>
#include <utility>

#include "dtr/check.h"
#include "dtr/error.h"
#include "dtr/torch.h"
#include "dtr_torch/mirrors.h"
#include "dtr_torch/wrapped_tensor.h"

namespace dtr::torch {

namespace {

void check_mirrorable(const char* kind, const std::string& name, const at::Tensor& tensor) {
  DTR_CHECK(tensor.device().is_cpu() && tensor.layout() == c10::kStrided, InvalidArgument,
            "dtr::torch::checkpoint_module: ", kind, " '", name, "' is ", tensor.toString(), " on ",
            tensor.device().str(), "; dtr-torch holds strided CPU tensors only (move the module to the CPU first)");
}

}  // namespace

std::uint64_t checkpoint_module(::torch::nn::Module& module, const std::shared_ptr<Runtime>& runtime) {
  detail::check_cpu_runtime("dtr::torch::checkpoint_module", runtime);
  const auto parameters = module.named_parameters(/*recurse=*/true);
  const auto buffers = module.named_buffers(/*recurse=*/true);
  const std::pair<const char*, const decltype(parameters)*> kinds[] = {{"parameter", &parameters}, {"buffer", &buffers}};
  // Every tensor is checked before any is mirrored: a bad one leaves the runtime as it was.
  for (const auto& [kind, items] : kinds) {
    for (const auto& item : *items) {
      if (item.value().defined() && !is_checkpointed(item.value())) check_mirrorable(kind, item.key(), item.value());
    }
  }
  std::unordered_set<const c10::StorageImpl*> storages;  // tied weights and views share one mirror
  std::uint64_t bytes = 0;
  for (const auto& kind : kinds) {
    for (const auto& item : *kind.second) {
      const at::Tensor& tensor = item.value();
      if (!tensor.defined() || is_checkpointed(tensor)) continue;
      detail::mirror_of(tensor, runtime);
      if (storages.insert(tensor.storage().unsafeGetStorageImpl()).second) bytes += tensor.storage().nbytes();
    }
  }
  return bytes;
}

}  // namespace dtr::torch
