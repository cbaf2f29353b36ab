// The one boxed kernel behind every intercepted aten op (PrivateUse1): views become wrappers over their
// base's alias group (no runtime op), ops that write a plain tensor run eagerly on plain copies, and every
// other op is recorded as a closure (AtenComputation) and run by the wrappers' runtime.
#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/graph_task.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <mutex>

#include "dtr/check.h"
#include "dtr/error.h"
#include "dtr/small_vector.h"
#include "dtr/torch.h"
#include "dtr_torch/aten_computation.h"
#include "dtr_torch/collectives.h"
#include "dtr_torch/dispatch.h"
#include "dtr_torch/mirrors.h"
#include "dtr_torch/torch_memory.h"

namespace dtr::torch {

namespace {

// The runtimes in stress mode (set_evict_after_every_op); `count` spares every op the lock when there are none.
struct EvictingRuntimes {
  std::mutex mutex;
  std::vector<std::weak_ptr<Runtime>> runtimes;
  std::atomic<std::size_t> count{0};
};

EvictingRuntimes& evicting_runtimes() {
  static EvictingRuntimes instance;
  return instance;
}

}  // namespace

void set_evict_after_every_op(bool on, const std::shared_ptr<Runtime>& runtime) {
  DTR_CHECK(runtime != nullptr, InvalidArgument, "dtr::torch::set_evict_after_every_op: the runtime is null");
  EvictingRuntimes& e = evicting_runtimes();
  std::lock_guard lock(e.mutex);
  std::erase_if(e.runtimes, [&](const std::weak_ptr<Runtime>& r) { return r.expired() || r.lock() == runtime; });
  if (on) e.runtimes.push_back(runtime);
  e.count = e.runtimes.size();
}

bool evicts_after_every_op(const Runtime& runtime) {
  EvictingRuntimes& e = evicting_runtimes();
  if (e.count == 0) return false;
  std::lock_guard lock(e.mutex);
  return std::any_of(e.runtimes.begin(), e.runtimes.end(),
                     [&](const std::weak_ptr<Runtime>& r) { return r.lock().get() == &runtime; });
}

}  // namespace dtr::torch

namespace dtr::torch::detail {

namespace {


// Calls fn(slot, tensor) for every tensor argument (tensor lists' items included, undefined ones skipped).
template <typename Fn>
void for_each_tensor(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args, Fn&& fn) {
  for (std::size_t a = 0; a < args.size(); ++a) {
    const c10::IValue& v = args[a];
    const ListKind kind = a < schema.arguments().size() ? list_kind(schema.arguments()[a]) : ListKind::none;
    if (v.isTensor()) {
      if (v.toTensor().defined()) fn(ArgSlot{a, -1}, v.toTensor());
    } else if (kind != ListKind::none && !v.isNone()) {
      const auto list = v.toListRef();
      for (std::size_t i = 0; i < list.size(); ++i) {
        if (list[i].isTensor() && list[i].toTensor().defined()) {
          fn(ArgSlot{a, static_cast<std::int64_t>(i)}, list[i].toTensor());
        }
      }
    }
  }
}

bool writes(const c10::Argument& a) { return a.alias_info() != nullptr && a.alias_info()->isWrite(); }

// Ops that write every element of their first argument without reading it.
constexpr std::string_view kOverwriters[] = {
    "aten::zero_",     "aten::fill_",      "aten::normal_",     "aten::uniform_",    "aten::bernoulli_",
    "aten::random_",   "aten::exponential_", "aten::geometric_", "aten::cauchy_",     "aten::log_normal_",
    "aten::copy_"};

// Whether the op writes all of argument `arg` without reading it: an out= argument, or the self of an
// overwriting op.
bool overwrites(const c10::FunctionSchema& schema, std::size_t arg) {
  if (schema.arguments()[arg].is_out()) return true;
  if (arg != 0) return false;
  for (std::string_view name : kOverwriters) {
    if (schema.name() == name) return true;
  }
  return false;
}

// Whether `layout` covers every byte of a group of `bytes` bytes, each element once.
bool covers(const Layout& layout, std::size_t bytes) {
  std::int64_t numel = 1;
  for (std::int64_t size : layout.sizes) numel *= size;
  return layout.offset == 0 && extent_bytes(layout) == bytes &&
         static_cast<std::size_t>(numel) * layout.dtype.itemsize() == bytes;
}

// Arguments an op writes although its schema does not say so (PyTorch 1.13): native_batch_norm updates its
// running statistics (arguments 3 and 4) when training (argument 5); rrelu_with_noise draws its slopes into
// `noise` (argument 1) when training (argument 4). Treated as written, they are copied on write like any
// in-place update, so a recomputation never writes them again, nor into a value others read.
bool writes_unannotated(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args, std::size_t arg) {
  auto training = [&](std::size_t i) { return args.size() > i && args[i].isBool() && args[i].toBool(); };
  if (schema.name() == "aten::native_batch_norm" && schema.overload_name().empty()) {
    return (arg == 3 || arg == 4) && training(5);
  }
  if (schema.name() == "aten::rrelu_with_noise" && schema.overload_name().empty()) return arg == 1 && training(4);
  return false;
}

// The argument a return aliases: the one with the same alias set (`self` for add_, `out` for add.out).
std::optional<std::size_t> aliased_argument(const c10::FunctionSchema& schema, const c10::Argument& ret) {
  if (ret.alias_info() == nullptr) return std::nullopt;
  for (std::size_t a = 0; a < schema.arguments().size(); ++a) {
    const c10::AliasInfo* info = schema.arguments()[a].alias_info();
    if (info != nullptr && info->beforeSets() == ret.alias_info()->beforeSets()) return a;
  }
  return std::nullopt;
}

std::shared_ptr<Runtime> runtime_of_args(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args) {
  std::shared_ptr<Runtime> runtime;
  for_each_tensor(schema, args, [&](const ArgSlot&, const at::Tensor& t) {
    WrappedTensorImpl* w = wrapped(t);
    if (w == nullptr) return;
    if (runtime == nullptr) runtime = w->group()->runtime;
    TORCH_CHECK(runtime == w->group()->runtime, "dtr-torch: ", schema.name(),
                " mixes tensors of two dtr runtimes; decheckpoint one side first");
  });
  TORCH_CHECK(runtime != nullptr, "dtr-torch: ", schema.name(), " reached dtr-torch with no wrapped tensor");
  return runtime;
}

// A view op (its result aliases an argument, nothing is written): the result's layout comes from running the
// op on meta tensors laid out as the arguments; it shares the aliased argument's group. nullopt when the op
// turned out not to alias (then it runs as any other op).
std::optional<std::vector<c10::IValue>> try_view(const c10::OperatorHandle& op, const std::vector<c10::IValue>& args) {
  const c10::FunctionSchema& schema = op.schema();
  std::vector<c10::IValue> meta_args = args;
  std::vector<std::pair<c10::StorageImpl*, std::shared_ptr<AliasGroup>>> storages;
  bool ok = true;
  for_each_tensor(schema, args, [&](const ArgSlot& slot, const at::Tensor& t) {
    WrappedTensorImpl* w = wrapped(t);
    if (w == nullptr || slot.item >= 0) {
      ok = false;
      return;
    }
    const Layout layout = w->layout();
    const std::size_t bytes = w->group()->value.storage_bytes();
    at::Tensor storage = at::empty({static_cast<std::int64_t>(bytes)}, at::TensorOptions().dtype(at::kByte).device(c10::kMeta));
    at::Tensor m = at::empty({0}, at::TensorOptions().dtype(layout.dtype).device(c10::kMeta));
    m.set_(storage.storage(), layout.offset, layout.sizes, layout.strides);
    storages.emplace_back(m.storage().unsafeGetStorageImpl(), w->group());
    meta_args[slot.arg] = m;
  });
  if (!ok) return std::nullopt;
  {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    op.callBoxed(&meta_args);
  }
  std::vector<c10::IValue> results;
  auto wrap = [&](const at::Tensor& m) -> std::optional<at::Tensor> {
    if (m.is_conj() || m.is_neg()) return std::nullopt;  // a lazy conjugate: made real by the general path
    for (const auto& [impl, group] : storages) {
      if (m.storage().unsafeGetStorageImpl() == impl) {
        return make_wrapped(group, Layout{m.sizes().vec(), m.strides().vec(), m.storage_offset(), m.dtype()});
      }
    }
    return std::nullopt;
  };
  for (const c10::IValue& v : meta_args) {
    if (v.isTensor()) {
      auto w = wrap(v.toTensor());
      if (!w) return std::nullopt;
      results.emplace_back(*w);
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> list;
      for (const at::Tensor& m : v.toTensorList()) {
        auto w = wrap(m);
        if (!w) return std::nullopt;
        list.push_back(*w);
      }
      results.emplace_back(list);
    } else {
      results.push_back(v);
    }
  }
  return results;
}

// An op that writes a plain tensor (an optimizer's step on plain parameters with wrapped gradients): it runs
// now, on plain copies of the wrapped arguments, and is not recorded.
void run_plain(const c10::OperatorHandle& op, std::vector<c10::IValue> args, ::torch::jit::Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  for_each_tensor(schema, args, [&](const ArgSlot& slot, const at::Tensor& t) {
    if (wrapped(t) == nullptr) return;
    TORCH_CHECK(slot.item < 0, "dtr-torch: ", schema.name(),
                " writes a plain tensor and reads a list of wrapped ones; decheckpoint them first");
    // Its update would land in a temporary copy and be lost.
    TORCH_CHECK(!writes(schema.arguments()[slot.arg]), "dtr-torch: ", schema.name(),
                " writes both a plain tensor and a wrapped one; wrap the plain one (dtr::torch::checkpoint) or "
                "decheckpoint the wrapped one first");
  });
  std::vector<c10::IValue> plain = args;
  for (auto& v : plain) {
    if (v.isTensor() && wrapped(v.toTensor())) v = decheckpoint(v.toTensor());
  }
  {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    op.callBoxed(&plain);
  }
  for (auto& v : plain) stack->push_back(std::move(v));
}

}  // namespace

Tensor constant_of(const at::Tensor& plain, Runtime& runtime) {
  return constant_bytes(runtime, plain.data_ptr(), extent_bytes(layout_of(plain)));
}


void intercept(const c10::OperatorHandle& op, ::torch::jit::Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  const std::size_t n = schema.arguments().size();
  std::vector<c10::IValue> args(stack->end() - static_cast<std::ptrdiff_t>(n), stack->end());
  ::torch::jit::drop(*stack, n);
  if (is_collective(schema)) {
    run_collective(op, std::move(args), stack);
    return;
  }

  // Per argument: whether the op writes it (its schema says so, or writes_unannotated).
  SmallVector<bool, 16> writes_arg(n);  // inline: no allocation on the per-op path
  for (std::size_t a = 0; a < n; ++a) writes_arg[a] = writes(schema.arguments()[a]) || writes_unannotated(schema, args, a);
  const bool any_write = std::find(writes_arg.begin(), writes_arg.end(), true) != writes_arg.end();
  bool any_alias = false;
  for (const c10::Argument& r : schema.returns()) any_alias = any_alias || r.alias_info() != nullptr;
  std::shared_ptr<Runtime> runtime = runtime_of_args(schema, args);
  // set_ makes a tensor an alias of another storage: an alias group cannot be rebound so yet.
  TORCH_CHECK(schema.name() != "aten::set_", "dtr-torch: set_ on a wrapped tensor is not supported; "
              "decheckpoint it, or make a new tensor instead");

  if (any_alias && !any_write) {
    if (auto results = try_view(op, args)) {
      for (auto& v : *results) stack->push_back(std::move(v));
      return;
    }
  }

  // Plain tensors the op writes. An op that updates plain state beside fresh results (BatchNorm's running
  // statistics in a C++ module, whose buffers stay plain) is recorded as any other: the state is updated on
  // a copy, copied back into the plain tensor once, and the results stay evictable (run eagerly, they were
  // plain, and mirrored as constants when read). Any other write to a plain tensor (in place on it, an out=
  // argument, a list, beside a written wrapper) runs eagerly on plain copies of the wrapped arguments.
  bool writes_plain = false;
  bool records_plain_state = !any_alias;
  for_each_tensor(schema, args, [&](const ArgSlot& slot, const at::Tensor& t) {
    if (!writes_arg[slot.arg]) return;
    if (wrapped(t) != nullptr) {
      records_plain_state = false;
      return;
    }
    writes_plain = true;
    if (slot.item >= 0 || schema.arguments()[slot.arg].is_out()) records_plain_state = false;
  });
  if (writes_plain && !records_plain_state) {
    run_plain(op, std::move(args), stack);
    return;
  }

  // Inputs: wrapped tensors read their group's value; plain ones their mirror (a constant of their bytes).
  std::vector<Tensor> inputs;
  std::vector<ArgSlot> slots;
  std::vector<Layout> layouts;
  std::vector<bool> written;
  std::vector<WrappedTensorImpl*> targets;  // per input: the wrapper an in-place op writes, else nullptr
  std::vector<at::Tensor> plain_targets;    // per input: the plain tensor it writes, else undefined
  std::vector<FreshArg> fresh;
  std::vector<WrappedTensorImpl*> fresh_targets;
  for_each_tensor(schema, args, [&](const ArgSlot& slot, const at::Tensor& t) {
    const bool write = writes_arg[slot.arg];
    WrappedTensorImpl* w = wrapped(t);
    if (write && w != nullptr && slot.item < 0 && overwrites(schema, slot.arg)) {
      const Layout layout = w->layout();
      const std::size_t bytes = w->group()->value.storage_bytes();
      // A view is fully written, but the rest of its group is not: that needs the old value.
      if (covers(layout, bytes)) {
        fresh.push_back(FreshArg{slot, layout, bytes});
        fresh_targets.push_back(w);
        return;
      }
    }
    if (w == nullptr) {
      // A Python number made a tensor stays in the arguments as it is (type promotion tells it apart).
      if (!write && t.unsafeGetTensorImpl()->is_wrapped_number()) return;
      TORCH_CHECK(t.device().is_cpu() && t.layout() == c10::kStrided, "dtr-torch: ", schema.name(),
                  " mixes wrapped tensors with a ", t.device().str(), " tensor; only CPU tensors can be mixed in");
      inputs.push_back(mirror_of(t, runtime));
      layouts.push_back(Layout{t.sizes().vec(), t.strides().vec(), t.storage_offset(), t.dtype()});
    } else {
      inputs.push_back(w->group()->value);
      layouts.push_back(w->layout());
    }
    slots.push_back(slot);
    written.push_back(write);
    targets.push_back(write ? w : nullptr);
    plain_targets.push_back(write && w == nullptr ? t : at::Tensor());
  });
  // Each written tensor gets its own copy of its group: two in one group would each lose the other's update.
  std::vector<WrappedTensorImpl*> updated;  // in the computation's output order, after its results
  std::vector<at::Tensor> updated_plain;    // the same places: the plain tensor written there, if any
  for (std::size_t i = 0; i < targets.size(); ++i) {
    if (written[i]) {
      updated.push_back(targets[i]);
      updated_plain.push_back(plain_targets[i]);
    }
  }
  updated.insert(updated.end(), fresh_targets.begin(), fresh_targets.end());
  updated_plain.resize(updated.size());
  for (std::size_t i = 0; i < updated.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      const bool shared = updated[i] != nullptr && updated[j] != nullptr
                              ? updated[i]->group() == updated[j]->group()
                              : updated_plain[i].defined() && updated_plain[j].defined() &&
                                    updated_plain[i].is_alias_of(updated_plain[j]);
      TORCH_CHECK(!shared, "dtr-torch: ", schema.name(),
                  " writes two tensors that share a storage (views of one tensor, or one tensor twice); "
                  "this is not supported yet: write them in separate ops");
    }
  }

  // The closure keeps the arguments without their tensors: it reads the runtime's values, not wrappers.
  std::vector<c10::IValue> saved = args;
  for (std::size_t a = 0; a < saved.size(); ++a) {
    c10::IValue& v = saved[a];
    const ListKind kind = a < schema.arguments().size() ? list_kind(schema.arguments()[a]) : ListKind::none;
    if (kind == ListKind::tensors && !v.isNone()) {
      c10::List<at::Tensor> empty;
      for (std::size_t i = 0; i < v.toListRef().size(); ++i) empty.push_back(at::Tensor());
      v = empty;
    } else if (kind == ListKind::optional_tensors && !v.isNone()) {
      c10::List<c10::optional<at::Tensor>> empty;
      for (const c10::IValue& item : v.toListRef()) {
        empty.push_back(item.isNone() ? c10::optional<at::Tensor>() : c10::optional<at::Tensor>(at::Tensor()));
      }
      v = empty;
    }
  }
  for (const ArgSlot& slot : slots) {
    if (slot.item < 0) saved[slot.arg] = at::Tensor();
  }
  for (const FreshArg& f : fresh) saved[f.slot.arg] = at::Tensor();  // a wrapper here would hold its own lineage
  auto computation = std::make_shared<AtenComputation>(op, std::move(saved), slots, layouts, written, std::move(fresh));
  std::vector<Tensor> outputs;
  try {
    outputs = runtime->call(computation, inputs);
  } catch (...) {
    clear_offers();
    throw;
  }
  clear_offers();

  // In-place updates: each written wrapper's group takes its new value. State becomes a constant: it is not
  // worth a lineage back through every step. State is a constant updated (a parameter), or a value updated
  // in place with gradients off outside backward for the second time (an optimizer's buffers, from their
  // second update). A first such update keeps its lineage: a reentrant torch.utils.checkpoint runs its
  // segment under no_grad, and an in-place activation there (ReLU(inplace=True)) must stay evictable.
  // Every new value is made ready before any group takes it, so an error leaves the op unapplied.
  const std::size_t results = outputs.size() - updated.size();
  const bool state_update = !c10::GradMode::is_enabled() && ::torch::autograd::get_current_graph_task_exec_info() == nullptr;
  std::vector<Tensor> values;
  std::vector<at::Tensor> plain_values;  // a written plain tensor's new bytes, read out of the runtime
  for (std::size_t k = 0; k < updated.size(); ++k) {
    Tensor value = outputs[results + k];
    if (updated[k] == nullptr) {
      plain_values.push_back(read_out(*runtime, value, computation->output_layouts()[results + k]));
      values.emplace_back();
      continue;
    }
    plain_values.emplace_back();
    const AliasGroup& group = *updated[k]->group();
    if (group.value.is_constant() || (state_update && group.updated_without_grad)) runtime->make_constant(value);
    values.push_back(std::move(value));
  }
  for (std::size_t k = 0; k < updated.size(); ++k) {
    if (updated[k] == nullptr) {
      at::AutoDispatchBelowADInplaceOrView below_autograd;
      updated_plain[k].copy_(plain_values[k]);  // as the kernel would have: in place, the version kept
      continue;
    }
    updated[k]->group()->updated_without_grad = updated[k]->group()->updated_without_grad || state_update;
    updated[k]->group()->value = std::move(values[k]);
    updated[k]->set_layout(computation->output_layouts()[results + k]);
  }

  // Returns: the op's own values, tensors replaced by wrappers over the outputs; a written argument's alias
  // returns the argument itself.
  const auto& result_outputs = computation->result_outputs();
  std::size_t next_result = 0;
  auto wrap_next = [&]() -> at::Tensor {
    const std::int64_t j = result_outputs.at(next_result++);
    if (j < 0) return at::Tensor();
    auto group = std::make_shared<AliasGroup>(AliasGroup{runtime, outputs[static_cast<std::size_t>(j)]});
    return make_wrapped(std::move(group), computation->output_layouts()[static_cast<std::size_t>(j)]);
  };
  const auto& returns = computation->returns();
  for (std::size_t k = 0; k < schema.returns().size(); ++k) {
    const c10::Argument& ret = schema.returns()[k];
    if (ret.alias_info() != nullptr && ret.alias_info()->isWrite()) {
      const auto a = aliased_argument(schema, ret);
      TORCH_CHECK(a.has_value(), "dtr-torch: ", schema.name(), ": cannot tell which argument return ", k, " is");
      stack->push_back(args[*a]);
      continue;
    }
    const c10::IValue& v = returns.at(k);
    if (ret.type()->kind() == c10::TypeKind::TensorType ||
        (ret.type()->cast<c10::OptionalType>() &&
         ret.type()->cast<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::TensorType)) {
      stack->push_back(wrap_next());
    } else if (auto list = ret.type()->cast<c10::ListType>();
               list && list->getElementType()->kind() == c10::TypeKind::TensorType) {
      c10::List<at::Tensor> wrapped_list;
      for (std::size_t i = 0; i < computation->list_length(k); ++i) wrapped_list.push_back(wrap_next());
      stack->push_back(wrapped_list);
    } else {
      stack->push_back(v);
    }
  }
  if (evicts_after_every_op(*runtime)) runtime->evict_all();
}

}  // namespace dtr::torch::detail
