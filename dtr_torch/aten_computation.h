// An aten op as a dtr::Computation: the op's handle and its boxed arguments, with each tensor argument
// replaced by the runtime input it reads (a layout over that input's bytes). The first run sizes the outputs
// (Computation::run_first); a recomputation calls the op again on the same bits, with the random state it
// first drew from, and must give the same bits. In-place and out= ops are functional here: the written
// tensors' bytes are cloned, updated, and become new outputs (copy-on-write); the caller moves their alias
// groups to the new values.
#pragma once

#include <ATen/core/ivalue.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ThreadLocalState.h>
#include <ATen/core/stack.h>

#include <optional>
#include <string>
#include <vector>

#include "dtr/computation.h"
#include "dtr_torch/wrapped_tensor.h"

namespace dtr::torch::detail {

// What a schema argument (or return) holds: a tensor list, a list of optional tensors, or neither. Decided by
// the declared type, not the value's tag: an empty Scalar[] and an empty Tensor?[] look alike.
enum class ListKind { none, tensors, optional_tensors };
ListKind list_kind(const c10::Argument& argument);

// Where a tensor argument sits in the boxed arguments: args[arg], or item `item` of a tensor list there.
struct ArgSlot {
  std::size_t arg = 0;
  std::int64_t item = -1;
};

// A tensor the op writes all of without reading it (zero_, bernoulli_, an out= argument) and that fills its
// whole alias group: it gets fresh bytes, not a copy of its old value, which the closure then never reads.
struct FreshArg {
  ArgSlot slot;
  Layout layout;
  std::size_t bytes = 0;  // its group's
};

class AtenComputation final : public Computation {
 public:
  // One input per entry of `inputs` (its slot and layout); `written[i]`: the op writes input i. `fresh`: the
  // written tensors it does not read.
  AtenComputation(const c10::OperatorHandle& op, std::vector<c10::IValue> args, std::vector<ArgSlot> slots,
                  std::vector<Layout> inputs, std::vector<bool> written, std::vector<FreshArg> fresh = {});

  std::string_view name() const override { return name_; }
  // Its scalar arguments (ints, reals, flags, int lists, strings: a pooling window, a reduction's dims) and
  // its inputs' and outputs' view layouts, hashed: the runtime sees only whole storages' bytes, and two calls
  // of one overload on the same storages may do different work.
  std::uint64_t cost_signature() const override;
  TensorMetas run_first(const KernelArgs& args) override;
  void run(const KernelArgs& args) override;

  // After the first run: the op's returns, tensors undefined (the caller wraps the outputs in their place).
  const std::vector<c10::IValue>& returns() const { return returns_; }
  // The layout of each output the runtime holds: the op's tensor results first (in return order, undefined
  // ones skipped), then each written input's new value (in input order), then each fresh argument's.
  const std::vector<Layout>& output_layouts() const { return output_layouts_; }
  // For each tensor result in return order: its output index, or -1 for an undefined tensor.
  const std::vector<std::int64_t>& result_outputs() const { return result_outputs_; }
  // The length of return k when it is a tensor list.
  std::size_t list_length(std::size_t k) const { return list_lengths_.at(k); }

 private:
  // Runs the op on `inputs` (the runtime's buffers); fills `results` with the bytes of each output.
  void execute(std::span<const void* const> inputs, std::vector<at::Tensor>& results, bool first);
  std::size_t written_count() const;

  c10::OperatorHandle op_;
  std::string name_;
  std::vector<c10::IValue> args_;
  std::vector<ArgSlot> slots_;
  std::vector<Layout> inputs_;
  std::vector<bool> written_;
  std::vector<FreshArg> fresh_;
  std::vector<std::size_t> group_bytes_;  // each input's whole buffer (a written input's copy takes it all)
  std::optional<at::Tensor> random_state_;  // the generator's state before the first run (random ops)
  std::optional<at::Generator> generator_;  // the generator a random op drew from
  at::ThreadLocalState thread_state_;        // grad mode, dispatch keys, autocast... as the op first ran
  std::vector<c10::IValue> returns_;
  std::vector<Layout> output_layouts_;
  std::vector<std::int64_t> result_outputs_;
  std::vector<std::size_t> list_lengths_;
  mutable std::optional<std::uint64_t> cost_signature_;  // hashed when first asked
  bool first_pending_ = false;     // run_first ran; run() has not copied its results yet
  std::vector<at::Tensor> kept_;  // the first run's outputs, until run() copies them
};

// Whether `op` draws random numbers (so its closure must replay the generator's state).
bool is_random(const c10::FunctionSchema& schema);

}  // namespace dtr::torch::detail
