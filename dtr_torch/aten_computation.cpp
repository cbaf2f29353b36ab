#include "dtr_torch/aten_computation.h"

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <ATen/core/Generator.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <mutex>
#include <string_view>

#include "dtr/check.h"
#include "dtr/error.h"
#include "dtr_torch/torch_memory.h"

namespace dtr::torch::detail {

namespace {

// Random ops without a Generator argument: they draw from the default generator.
constexpr std::string_view kRandomWithoutGenerator[] = {"aten::native_dropout", "aten::rand_like", "aten::randn_like",
                                                         "aten::randint_like", "aten::randperm"};


// The bytes an output holds: a result's elements from its first on, or a written tensor's whole storage.
struct OutputBytes {
  at::Tensor owner;
  const void* data = nullptr;
  std::size_t size = 0;
};

// A fresh copy of a tensor-list argument, so that filling it never touches the saved one.
c10::IValue fresh_list(const c10::IValue& saved, ListKind kind) {
  if (kind == ListKind::tensors) {
    c10::List<at::Tensor> list;
    for (const at::Tensor& t : saved.toTensorList()) list.push_back(t);
    return list;
  }
  c10::List<c10::optional<at::Tensor>> list;
  for (const c10::IValue& item : saved.toListRef()) {
    list.push_back(item.isNone() ? c10::optional<at::Tensor>() : c10::optional<at::Tensor>(item.toTensor()));
  }
  return list;
}

void set_slot(std::vector<c10::IValue>& stack, const ArgSlot& slot, at::Tensor t) {
  if (slot.item < 0) {
    stack[slot.arg] = std::move(t);
  } else if (stack[slot.arg].isTensorList()) {
    auto list = stack[slot.arg].toTensorList();
    list.set(static_cast<std::size_t>(slot.item), std::move(t));
  } else {
    auto list = stack[slot.arg].toOptionalTensorList();
    list.set(static_cast<std::size_t>(slot.item), c10::optional<at::Tensor>(std::move(t)));
  }
}

at::Generator generator_of(const std::vector<c10::IValue>& args, const c10::FunctionSchema& schema) {
  for (std::size_t i = 0; i < schema.arguments().size() && i < args.size(); ++i) {
    if (args[i].isGenerator()) return args[i].toGenerator();
  }
  (void)schema;
  return at::detail::getDefaultCPUGenerator();
}

// A result as the runtime keeps it: a strided CPU tensor whose bits are its values (a lazy conjugate or
// negative view is made real first).
at::Tensor plain_result(const at::Tensor& r, std::string_view op) {
  TORCH_CHECK(r.device().is_cpu(), "dtr-torch: ", op, " returned a ", r.device().str(),
              " tensor; decheckpoint its arguments before moving them off the CPU");
  TORCH_CHECK(r.layout() == c10::kStrided, "dtr-torch: ", op, " returned a ", r.layout(),
              " tensor; dtr-torch keeps strided tensors only: decheckpoint its arguments first");
  return r.is_conj() || r.is_neg() ? r.resolve_conj().resolve_neg() : r;
}

}  // namespace

ListKind list_kind(const c10::Argument& argument) {
  const auto list = argument.type()->cast<c10::ListType>();
  if (!list) return ListKind::none;
  const c10::TypePtr& element = list->getElementType();
  if (element->kind() == c10::TypeKind::TensorType) return ListKind::tensors;
  const auto optional = element->cast<c10::OptionalType>();
  if (optional && optional->getElementType()->kind() == c10::TypeKind::TensorType) {
    return ListKind::optional_tensors;
  }
  return ListKind::none;
}

bool is_random(const c10::FunctionSchema& schema) {
  for (const c10::Argument& a : schema.arguments()) {
    const c10::TypePtr& type = a.type();
    if (type->kind() == c10::TypeKind::GeneratorType) return true;
    if (auto optional = type->cast<c10::OptionalType>();
        optional && optional->getElementType()->kind() == c10::TypeKind::GeneratorType) {
      return true;
    }
  }
  for (std::string_view name : kRandomWithoutGenerator) {
    if (schema.name() == name) return true;
  }
  return false;
}

namespace {

// The scalars of one argument; tensors (their shapes are in the runtime's signature already), generators and
// the rest add only their position.
std::uint64_t mix_scalars(std::uint64_t h, const c10::IValue& v) {
  if (v.isInt()) return mix_signature(mix_signature(h, 1), static_cast<std::uint64_t>(v.toInt()));
  if (v.isDouble()) return mix_signature(mix_signature(h, 2), signature_bits(v.toDouble()));
  if (v.isBool()) return mix_signature(mix_signature(h, 3), v.toBool() ? 1 : 0);
  if (v.isNone()) return mix_signature(h, 4);
  if (v.isString()) return mix_signature(mix_signature(h, 5), std::hash<std::string_view>{}(v.toStringRef()));
  if (v.isIntList()) {
    h = mix_signature(h, 6);
    for (const std::int64_t x : v.toIntList()) h = mix_signature(h, static_cast<std::uint64_t>(x));
    return h;
  }
  if (v.isDoubleList()) {
    h = mix_signature(h, 7);
    for (const double x : v.toDoubleList()) h = mix_signature(h, signature_bits(x));
    return h;
  }
  if (v.isBoolList()) {
    h = mix_signature(h, 8);
    for (const bool x : v.toBoolList()) h = mix_signature(h, x ? 1 : 0);
    return h;
  }
  return mix_signature(h, 9);
}

std::uint64_t mix_layout(std::uint64_t h, const Layout& l) {
  h = mix_signature(h, static_cast<std::uint64_t>(c10::typeMetaToScalarType(l.dtype)));
  h = mix_signature(h, l.sizes.size());
  for (const std::int64_t d : l.sizes) h = mix_signature(h, static_cast<std::uint64_t>(d));
  for (const std::int64_t s : l.strides) h = mix_signature(h, static_cast<std::uint64_t>(s));
  return h;
}

}  // namespace

// The runtime sees each input and output as its whole storage's bytes (the alias group's value), so the views'
// shapes, strides and dtypes join the scalars here: `x[:1].sum()` and `x.sum()` read one storage. Asked for
// first by the first run, after run_first: the output layouts are known.
std::uint64_t AtenComputation::cost_signature() const {
  if (!cost_signature_) {
    std::uint64_t h = 0;
    for (const c10::IValue& v : args_) h = mix_scalars(h, v);
    for (const std::vector<Layout>* layouts : {&inputs_, &output_layouts_}) {
      h = mix_signature(h, layouts->size());
      for (const Layout& l : *layouts) h = mix_layout(h, l);
    }
    cost_signature_ = h;
  }
  return *cost_signature_;
}

AtenComputation::AtenComputation(const c10::OperatorHandle& op, std::vector<c10::IValue> args,
                                 std::vector<ArgSlot> slots, std::vector<Layout> inputs, std::vector<bool> written,
                                 std::vector<FreshArg> fresh)
    : op_(op),
      name_(op.schema().name() + (op.schema().overload_name().empty() ? "" : "." + op.schema().overload_name())),
      args_(std::move(args)),
      slots_(std::move(slots)),
      inputs_(std::move(inputs)),
      written_(std::move(written)),
      fresh_(std::move(fresh)),
      thread_state_() {
  if (is_random(op_.schema())) {
    generator_ = generator_of(args_, op_.schema());
    std::lock_guard<std::mutex> lock(generator_->mutex());
    random_state_ = generator_->get_state();
  }
}

void AtenComputation::execute(std::span<const void* const> inputs, std::vector<at::Tensor>& owners,
                              bool first) {
  // Inputs are plain CPU tensors over the runtime's buffers: the op runs on the CPU kernels, below autograd.
  // A recomputation runs under the thread state of the first run (grad mode, excluded dispatch keys, autocast),
  // whatever the thread is doing when the value is needed again.
  std::optional<at::ThreadLocalStateGuard> as_first;
  if (!first) as_first.emplace(thread_state_);
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  std::vector<c10::IValue> stack = args_;
  const auto& arguments = op_.schema().arguments();
  for (std::size_t a = 0; a < stack.size() && a < arguments.size(); ++a) {
    const ListKind kind = list_kind(arguments[a]);
    if (kind != ListKind::none && !stack[a].isNone()) stack[a] = fresh_list(stack[a], kind);
  }
  std::vector<at::Tensor> written_tensors(inputs_.size());
  for (std::size_t i = 0; i < inputs_.size(); ++i) {
    at::Tensor t;
    if (written_[i]) {
      // Copy-on-write: the op updates a resizable copy of the whole group, seen through the input's layout.
      const std::size_t bytes = group_bytes_[i];
      at::Tensor copy = at::empty({static_cast<std::int64_t>(bytes)}, at::TensorOptions().dtype(at::kByte));
      if (bytes > 0) std::memcpy(copy.data_ptr(), inputs[i], bytes);
      t = at::empty({0}, at::TensorOptions().dtype(inputs_[i].dtype));
      t.set_(copy.storage(), inputs_[i].offset, inputs_[i].sizes, inputs_[i].strides);
      written_tensors[i] = t;
    } else {
      t = view_over(const_cast<void*>(inputs[i]), inputs_[i]);
    }
    set_slot(stack, slots_[i], std::move(t));
  }
  std::vector<at::Tensor> fresh_tensors;
  for (const FreshArg& f : fresh_) {
    // Every element is written: uninitialised bytes never reach a result.
    at::Tensor bytes = at::empty({static_cast<std::int64_t>(f.bytes)}, at::TensorOptions().dtype(at::kByte));
    at::Tensor t = at::empty({0}, at::TensorOptions().dtype(f.layout.dtype));
    t.set_(bytes.storage(), f.layout.offset, f.layout.sizes, f.layout.strides);
    fresh_tensors.push_back(t);
    set_slot(stack, f.slot, std::move(t));
  }

  if (random_state_ && !first) {
    // Replay the draws of the first run, then leave the generator where the program has it. The generator's
    // lock is held only around its state: the op's kernel takes it too.
    at::Tensor now;
    {
      std::lock_guard<std::mutex> lock(generator_->mutex());
      now = generator_->get_state();
      generator_->set_state(*random_state_);
    }
    auto restore = [&] {
      std::lock_guard<std::mutex> lock(generator_->mutex());
      generator_->set_state(now);
    };
    try {
      op_.callBoxed(&stack);
    } catch (...) {
      restore();
      throw;
    }
    restore();
  } else {
    op_.callBoxed(&stack);
  }

  const auto& schema_returns = op_.schema().returns();
  owners.clear();
  std::vector<Layout> layouts;
  std::vector<std::int64_t> result_outputs;
  auto take = [&](const at::Tensor& r) {
    if (!r.defined()) {
      result_outputs.push_back(-1);
      return;
    }
    result_outputs.push_back(static_cast<std::int64_t>(owners.size()));
    owners.push_back(plain_result(r, name_));
    layouts.push_back(layout_of(owners.back()));
  };
  std::vector<std::size_t> list_lengths(stack.size(), 0);
  for (std::size_t k = 0; k < stack.size(); ++k) {
    const c10::AliasInfo* alias = k < schema_returns.size() ? schema_returns[k].alias_info() : nullptr;
    if (alias != nullptr && alias->isWrite()) continue;  // the written input itself
    const c10::IValue& v = stack[k];
    if (v.isTensor()) {
      take(v.toTensor());
    } else if (v.isNone() && k < schema_returns.size() && schema_returns[k].type()->cast<c10::OptionalType>()) {
      take(at::Tensor());  // an optional tensor result, absent
    } else if (v.isTensorList()) {
      list_lengths[k] = v.toTensorList().size();
      for (const at::Tensor& t : v.toTensorList()) take(t);
    }
  }
  for (std::size_t i = 0; i < inputs_.size(); ++i) {
    if (!written_[i]) continue;
    const at::Tensor& t = written_tensors[i];
    owners.push_back(t);
    layouts.push_back(Layout{t.sizes().vec(), t.strides().vec(), t.storage_offset(), t.dtype()});
  }
  for (const at::Tensor& t : fresh_tensors) {
    owners.push_back(t);
    layouts.push_back(Layout{t.sizes().vec(), t.strides().vec(), t.storage_offset(), t.dtype()});
  }
  if (first) {
    returns_.clear();
    for (const c10::IValue& v : stack) returns_.push_back(v.isTensor() || v.isList() ? c10::IValue() : v);
    output_layouts_ = std::move(layouts);
    result_outputs_ = std::move(result_outputs);
    list_lengths_ = std::move(list_lengths);
    return;
  }
  DTR_CHECK(layouts.size() == output_layouts_.size(), InvalidArgument, "dtr-torch: op '", name_, "' gave ",
            layouts.size(), " results when recomputed, ", output_layouts_.size(), " the first time");
  for (std::size_t j = 0; j < layouts.size(); ++j) {
    DTR_CHECK(layouts[j].sizes == output_layouts_[j].sizes && layouts[j].strides == output_layouts_[j].strides &&
                  layouts[j].offset == output_layouts_[j].offset && layouts[j].dtype == output_layouts_[j].dtype,
              InvalidArgument, "dtr-torch: op '", name_, "' laid out result ", j,
              " differently when recomputed than the first time");
  }
}

namespace {

OutputBytes bytes_of(const at::Tensor& owner, const Layout& layout, bool whole_storage) {
  if (whole_storage) return OutputBytes{owner, owner.storage().data(), owner.storage().nbytes()};
  return OutputBytes{owner, owner.data_ptr(), extent_bytes(Layout{layout.sizes, layout.strides, 0, layout.dtype})};
}

}  // namespace

TensorMetas AtenComputation::run_first(const KernelArgs& args) {
  group_bytes_.clear();
  for (const TensorMeta& m : args.input_meta) group_bytes_.push_back(m.nbytes());
  execute(args.inputs, kept_, /*first=*/true);
  first_pending_ = true;
  TensorMetas metas;
  const std::size_t results = kept_.size() - written_count();
  std::vector<const void*> offered;
  for (std::size_t j = 0; j < kept_.size(); ++j) {
    const OutputBytes out = bytes_of(kept_[j], output_layouts_[j], j >= results);
    metas.push_back(bytes_meta(out.size));
    // A runtime over PyTorch's allocator adopts the result as it is: no copy. Only memory PyTorch allocated
    // for it: not an input's buffer (from_blob, no allocator) a kernel returned, nor one offered already.
    const c10::Storage& storage = out.owner.storage();
    const bool adoptable =
        storage.allocator() != nullptr && std::find(offered.begin(), offered.end(), storage.data()) == offered.end();
    if (adoptable) offered.push_back(storage.data());
    offer_result(out.owner, adoptable ? out.data : nullptr, out.size);  // one offer per output, in order
  }
  return metas;
}

void AtenComputation::run(const KernelArgs& args) {
  std::vector<at::Tensor> fresh;
  std::vector<at::Tensor>* source = &kept_;
  if (!first_pending_) {
    group_bytes_.clear();
    for (const TensorMeta& m : args.input_meta) group_bytes_.push_back(m.nbytes());
    execute(args.inputs, fresh, /*first=*/false);
    source = &fresh;
  }
  const std::size_t results = source->size() - written_count();
  for (std::size_t j = 0; j < source->size(); ++j) {
    const OutputBytes out = bytes_of((*source)[j], output_layouts_[j], j >= results);
    DTR_CHECK(out.size == args.output_meta[j].nbytes(), InvalidArgument, "dtr-torch: op '", name_, "' result ", j,
              " has ", out.size, " bytes when recomputed, ", args.output_meta[j].nbytes(), " the first time");
    if (out.size > 0 && out.data != args.outputs[j]) std::memcpy(args.outputs[j], out.data, out.size);
  }
  kept_.clear();
  first_pending_ = false;
}

std::size_t AtenComputation::written_count() const {
  std::size_t n = 0;
  for (bool w : written_) n += w ? 1 : 0;
  return n + fresh_.size();
}

}  // namespace dtr::torch::detail
