// dtr-torch: DTR for PyTorch programs, as a libtorch plug-in (no fork). A tensor wrapped by checkpoint() lives
// in a dtr::Runtime: every aten op on it is recorded as a closure (op + boxed arguments) and run; under the
// runtime's budget its value may be evicted and is recomputed from that closure when an op needs it again.
// Results are bitwise those of plain PyTorch on the CPU (the same kernels on the same inputs). docs/torch.md.
//
// Part of the optional dtr_torch library (-DDTR_WITH_TORCH); the core library never includes it.
// Thread safety: a runtime is used by one thread at a time; wrapped tensors of one runtime must not be used
// from two threads at once.
#pragma once

#include <ATen/Tensor.h>

#include <cstdint>
#include <memory>
#include <optional>

#include "dtr/config.h"
#include "dtr/runtime.h"

namespace torch::nn {
class Module;
}

namespace dtr::torch {

// A runtime for wrapped tensors: `config`, with its buffers from PyTorch's CPU allocator, where an op's
// results are adopted as they are, not copied (Config::buffers = memory_resource), and so its budget counted
// in resident bytes (BudgetMode::bytes), whatever `config` says of those two; the device is the CPU.
std::shared_ptr<Runtime> make_runtime(Config config = {});

// The runtime that checkpoint() uses when given none: make_runtime of the DTR_* variables, built on first use
// (Config::from_env; a percentage budget is of host memory). Shared: every wrapped tensor keeps its runtime
// alive. A malformed variable throws dtr::ConfigError (and the next call tries again).
std::shared_ptr<Runtime> default_runtime();

// A wrapped copy of `tensor` (a CPU tensor of any dtype and layout) in `runtime`: a constant (never evicted),
// with the same sizes, strides, dtype and requires_grad. A wrapped tensor is returned as is.
// dtr::InvalidArgument for an undefined, non-CPU or non-strided tensor.
at::Tensor checkpoint(const at::Tensor& tensor, const std::shared_ptr<Runtime>& runtime = default_runtime());
// A plain CPU tensor with the value of `tensor` (recomputed if it was evicted); a plain tensor is returned as
// is. The copy keeps sizes and strides; it does not require gradients.
at::Tensor decheckpoint(const at::Tensor& tensor);
// Makes every parameter and buffer of `module` (and of its submodules) a constant of `runtime` now: a mirror
// of its storage (the runtime's copy of its bytes, which every op reading it uses while the bytes stay the
// same; an update through .data(), as libtorch's optimizers make, is seen on the next read). The module keeps
// its plain tensors: a C++ module's forward reads member fields, which share their TensorImpl with the
// registry and cannot be swapped for wrappers (set_data refuses another type), so unlike Python's
// dtr_torch.checkpoint_module nothing is replaced and an optimizer built before stays valid. Without this
// call the same mirrors are made lazily, by the first op that reads each tensor; with it the runtime holds
// (and its budget counts) the module's state before the first step. Returns the bytes of the module's state
// the runtime now holds: its distinct storages (tied weights and views once; a second call returns the same).
// Already wrapped and undefined tensors are skipped.
// dtr::InvalidArgument for a null or non-CPU runtime, or a tensor that is not a strided CPU tensor (named;
// nothing is mirrored then). dtr::OutOfMemory when the budget cannot hold the state: the storages mirrored
// before stay held (constants) until they die. Thread safety: as the runtime's.
std::uint64_t checkpoint_module(::torch::nn::Module& module,
                                const std::shared_ptr<Runtime>& runtime = default_runtime());
// Whether `tensor` is a dtr-torch wrapper.
bool is_checkpointed(const at::Tensor& tensor);
// The runtime a wrapped tensor lives in; nullptr for a plain tensor.
std::shared_ptr<Runtime> runtime_of(const at::Tensor& tensor);

// Sets the budget of `runtime` in bytes (nullopt: none); Runtime::set_memory_budget's rules.
void set_budget(std::optional<std::uint64_t> bytes, Runtime& runtime = *default_runtime());
// Stress mode, for tests: after every op on its wrappers, `runtime` evicts every value it can
// (Runtime::evict_all), so every value an op reads again comes back by recomputation. Slow; off by default.
// dtr::InvalidArgument for a null runtime.
void set_evict_after_every_op(bool on, const std::shared_ptr<Runtime>& runtime = default_runtime());
bool evicts_after_every_op(const Runtime& runtime);
// The counters of `runtime` (dtr::RuntimeStats).
RuntimeStats stats(const Runtime& runtime = *default_runtime());

// The number of aten operators dtr-torch intercepts (those without a CompositeImplicitAutograd kernel: the
// others decompose into these before they reach it). Registration happens when the library is loaded.
std::size_t intercepted_operator_count();

}  // namespace dtr::torch
