// The one boxed kernel behind every intercepted aten op (PrivateUse1): views become wrappers over their
// base's alias group (no runtime op), ops that write a plain tensor run eagerly on plain copies, and every
// other op is recorded as a closure (AtenComputation) and run by the wrappers' runtime.
#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <cstring>
#include <mutex>
#include <unordered_map>

#include "dtr/check.h"
#include "dtr/error.h"
#include "dtr/torch.h"
#include "dtr_torch/aten_computation.h"
#include "dtr_torch/dispatch.h"

namespace dtr::torch::detail {

namespace {

TensorMeta bytes_meta(std::size_t bytes) { return TensorMeta{Shape{static_cast<std::int64_t>(bytes)}, DType::uint8}; }

// Calls fn(slot, tensor) for every tensor argument (tensor lists' items included, undefined ones skipped).
template <typename Fn>
void for_each_tensor(const std::vector<c10::IValue>& args, Fn&& fn) {
  for (std::size_t a = 0; a < args.size(); ++a) {
    const c10::IValue& v = args[a];
    if (v.isTensor()) {
      if (v.toTensor().defined()) fn(ArgSlot{a, -1}, v.toTensor());
    } else if (v.isTensorList()) {
      const auto list = v.toTensorList();
      for (std::size_t i = 0; i < list.size(); ++i) {
        const at::Tensor t = list.get(i);
        if (t.defined()) fn(ArgSlot{a, static_cast<std::int64_t>(i)}, t);
      }
    } else if (v.isList() && !v.isIntList() && !v.isDoubleList() && !v.isBoolList()) {
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

// Arguments an op writes although its schema does not say so (PyTorch 1.13): native_batch_norm updates its
// running statistics (arguments 3 and 4) in place when training (argument 5). Treated as written, they are
// copied on write like any in-place update, so that a recomputation never updates them again.
bool writes_unannotated(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args, std::size_t arg) {
  if (schema.name() != "aten::native_batch_norm" || schema.overload_name() != "") return false;
  return (arg == 3 || arg == 4) && args.size() > 5 && args[5].isBool() && args[5].toBool();
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
  for_each_tensor(args, [&](const ArgSlot&, const at::Tensor& t) {
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
  for_each_tensor(args, [&](const ArgSlot& slot, const at::Tensor& t) {
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
  (void)schema;
  return results;
}

// An op that writes a plain tensor (an optimizer's step on plain parameters with wrapped gradients): it runs
// now, on plain copies of the wrapped arguments, and is not recorded.
void run_plain(const c10::OperatorHandle& op, std::vector<c10::IValue> args, ::torch::jit::Stack* stack) {
  std::vector<c10::IValue> plain = args;
  for (auto& v : plain) {
    if (v.isTensor() && wrapped(v.toTensor())) v = decheckpoint(v.toTensor());
  }
  for_each_tensor(args, [&](const ArgSlot& slot, const at::Tensor& t) {
    if (slot.item >= 0 && wrapped(t)) {
      TORCH_CHECK(false, "dtr-torch: ", op.schema().name(),
                  " writes a plain tensor and reads a list of wrapped ones; decheckpoint them first");
    }
  });
  {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    op.callBoxed(&plain);
  }
  for (auto& v : plain) stack->push_back(std::move(v));
}

}  // namespace

Tensor constant_of(const at::Tensor& plain, Runtime& runtime) {
  const Layout layout = layout_of(plain);
  const std::size_t bytes = extent_bytes(layout);
  const auto* data = static_cast<const std::uint8_t*>(plain.data_ptr());
  return runtime.constant(bytes_meta(bytes), std::span<const std::uint8_t>(data, bytes));
}

namespace {

// Whether a runtime value holds the same bytes as a plain storage: a computation with no outputs.
class SameBytes final : public Computation {
 public:
  explicit SameBytes(const c10::Storage& plain) : plain_(plain) {}
  std::string_view name() const override { return "dtr::compare_mirror"; }
  TensorMetas run_first(const KernelArgs& args) override {
    const std::size_t bytes = args.input_meta[0].nbytes();
    same_ = bytes == plain_.nbytes() && (bytes == 0 || std::memcmp(args.inputs[0], plain_.data(), bytes) == 0);
    return {};
  }
  void run(const KernelArgs&) override {}
  bool same() const { return same_; }

 private:
  c10::Storage plain_;
  bool same_ = false;
};

// Plain tensors read by recorded ops (a C++ module's parameters and their views, labels) are mirrored in the
// runtime: one constant per plain storage, holding all its bytes, which serves every later op on any view of
// that storage while the storage holds the same bytes. The bytes are compared on every use, not a version
// counter: an update through `.data()` (libtorch's optimizers) leaves the parameter's version as it was.
// Mirrors of storages that died are dropped at the next lookups. An entry keeps its runtime alive
// (AliasGroup), so that no mirror outlives the runtime it lives in.
class Mirrors {
 public:
  Tensor get(const at::Tensor& plain, const std::shared_ptr<Runtime>& runtime) {
    std::lock_guard lock(mutex_);
    sweep();
    const c10::Storage& storage = plain.storage();
    const Key key{storage.unsafeGetStorageImpl(), runtime.get()};
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      Entry& e = it->second;
      if (!e.storage.expired() && e.data == storage.data() && e.nbytes == storage.nbytes()) {
        auto compare = std::make_shared<SameBytes>(storage);
        runtime->call(compare, std::span<const Tensor>(&e.group->value, 1));
        if (compare->same()) return e.group->value;
      }
      entries_.erase(it);
    }
    const auto* data = static_cast<const std::uint8_t*>(storage.data());
    auto group = std::make_shared<AliasGroup>(
        AliasGroup{runtime, runtime->constant(bytes_meta(storage.nbytes()), std::span<const std::uint8_t>(data, storage.nbytes()))});
    Tensor value = group->value;
    entries_.emplace(key, Entry{storage.getWeakStorageImpl(),
                                storage.data(), storage.nbytes(), std::move(group)});
    return value;
  }

 private:
  struct Key {
    const c10::StorageImpl* storage;
    const Runtime* runtime;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const {
      return std::hash<const void*>{}(k.storage) ^ (std::hash<const void*>{}(k.runtime) << 1);
    }
  };
  struct Entry {
    c10::weak_intrusive_ptr<c10::StorageImpl> storage;
    const void* data;
    std::size_t nbytes;
    std::shared_ptr<AliasGroup> group;
  };
  void sweep() {
    for (auto it = entries_.begin(); it != entries_.end();) {
      it = it->second.storage.expired() ? entries_.erase(it) : std::next(it);
    }
  }
  std::mutex mutex_;
  std::unordered_map<Key, Entry, KeyHash> entries_;
};

Mirrors& mirrors() {
  static Mirrors instance;
  return instance;
}

}  // namespace

void intercept(const c10::OperatorHandle& op, ::torch::jit::Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  const std::size_t n = schema.arguments().size();
  std::vector<c10::IValue> args(stack->end() - static_cast<std::ptrdiff_t>(n), stack->end());
  ::torch::jit::drop(*stack, n);

  bool any_write = false;
  for (std::size_t a = 0; a < schema.arguments().size(); ++a) {
    any_write = any_write || writes(schema.arguments()[a]) || writes_unannotated(schema, args, a);
  }
  bool any_alias = false;
  for (const c10::Argument& r : schema.returns()) any_alias = any_alias || r.alias_info() != nullptr;
  std::shared_ptr<Runtime> runtime = runtime_of_args(schema, args);

  if (any_alias && !any_write) {
    if (auto results = try_view(op, args)) {
      for (auto& v : *results) stack->push_back(std::move(v));
      return;
    }
  }

  // Inputs: wrapped tensors read their group's value; plain ones are copied in as constants.
  std::vector<Tensor> inputs;
  std::vector<ArgSlot> slots;
  std::vector<Layout> layouts;
  std::vector<bool> written;
  std::vector<WrappedTensorImpl*> targets;  // per input: the wrapper an in-place op writes, else nullptr
  bool writes_plain = false;
  for_each_tensor(args, [&](const ArgSlot& slot, const at::Tensor& t) {
    const bool write = writes(schema.arguments()[slot.arg]) || writes_unannotated(schema, args, slot.arg);
    WrappedTensorImpl* w = wrapped(t);
    if (w == nullptr) {
      if (write) writes_plain = true;
      // A Python number made a tensor stays in the arguments as it is (type promotion tells it apart).
      if (writes_plain || t.unsafeGetTensorImpl()->is_wrapped_number()) return;
      TORCH_CHECK(t.device().is_cpu() && t.layout() == c10::kStrided, "dtr-torch: ", schema.name(),
                  " mixes wrapped tensors with a ", t.device().str(), " tensor; only CPU tensors can be mixed in");
      inputs.push_back(mirrors().get(t, runtime));
      layouts.push_back(Layout{t.sizes().vec(), t.strides().vec(), t.storage_offset(), t.dtype()});
    } else {
      inputs.push_back(w->group()->value);
      layouts.push_back(w->layout());
    }
    slots.push_back(slot);
    written.push_back(write && w != nullptr);
    targets.push_back(write ? w : nullptr);
  });
  if (writes_plain) {
    run_plain(op, std::move(args), stack);
    return;
  }

  // The closure keeps the arguments without their tensors: it reads the runtime's values, not wrappers.
  std::vector<c10::IValue> saved = args;
  for (const ArgSlot& slot : slots) {
    if (slot.item < 0) {
      saved[slot.arg] = at::Tensor();
    }
  }
  for (auto& v : saved) {
    if (v.isTensorList()) {
      c10::List<at::Tensor> empty;
      for (std::size_t i = 0; i < v.toTensorList().size(); ++i) empty.push_back(at::Tensor());
      v = empty;
    } else if (v.isList() && !v.isIntList() && !v.isDoubleList() && !v.isBoolList()) {
      c10::List<c10::optional<at::Tensor>> empty;
      for (const c10::IValue& item : v.toListRef()) {
        empty.push_back(item.isNone() ? c10::optional<at::Tensor>() : c10::optional<at::Tensor>(at::Tensor()));
      }
      v = empty;
    }
  }
  auto computation = std::make_shared<AtenComputation>(op, std::move(saved), slots, layouts, written);
  std::vector<Tensor> outputs = runtime->call(computation, inputs);

  // In-place updates: each written wrapper's group takes its new value. Values updated with gradients off (an
  // optimizer's step) and constants stay constants: they are state, not activations.
  const std::size_t results = outputs.size() - static_cast<std::size_t>(std::count(written.begin(), written.end(), true));
  std::size_t next_written = results;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!written[i]) continue;
    WrappedTensorImpl* target = targets[i];
    Tensor value = outputs[next_written];
    AliasGroup& group = *target->group();
    const bool state = group.value.is_constant() || !c10::GradMode::is_enabled();
    if (state) {
      Tensor constant = group.value.is_constant() ? group.value : runtime->constant(value.meta());
      runtime->assign(constant, value);
      value = constant;
    }
    group.value = value;
    target->set_layout(computation->output_layouts()[next_written]);
    ++next_written;
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
}

}  // namespace dtr::torch::detail
