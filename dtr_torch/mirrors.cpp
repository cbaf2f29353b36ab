#include "dtr_torch/mirrors.h"

#include <c10/core/Storage.h>

#include <cstring>
#include <mutex>
#include <span>
#include <unordered_map>

#include "dtr/computation.h"
#include "dtr_torch/wrapped_tensor.h"

namespace dtr::torch::detail {

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
// Mirrors of storages that died, and of runtimes that nothing but mirrors holds, are dropped by a sweep that
// runs once every as many lookups as the last sweep kept mirrors (amortized O(1) a lookup: a sweep on every
// lookup made an op's cost grow with the model's parameter count). An entry keeps its runtime alive
// (AliasGroup), so that no mirror outlives the runtime it lives in.
class Mirrors {
 public:
  Tensor get(const at::Tensor& plain, const std::shared_ptr<Runtime>& runtime) {
    std::lock_guard lock(mutex_);
    if (++lookups_since_sweep_ > kept_by_last_sweep_) sweep();
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
    auto group = std::make_shared<AliasGroup>(AliasGroup{runtime, constant_bytes(*runtime, storage.data(), storage.nbytes())});
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
  // Drops the mirrors of storages that died, and those of runtimes nothing but mirrors holds any more.
  void sweep() {
    lookups_since_sweep_ = 0;
    std::unordered_map<const Runtime*, long> held_here;
    for (const auto& [key, entry] : entries_) held_here[key.runtime] += 1;
    for (auto it = entries_.begin(); it != entries_.end();) {
      const bool runtime_unused = it->second.group->runtime.use_count() <= held_here[it->first.runtime];
      it = it->second.storage.expired() || runtime_unused ? entries_.erase(it) : std::next(it);
    }
    kept_by_last_sweep_ = entries_.size();
  }
  std::mutex mutex_;
  std::unordered_map<Key, Entry, KeyHash> entries_;
  // A sweep after as many lookups as the last one kept: it reads at most twice that many entries (each lookup
  // adds at most one), so O(1) a lookup. Not the current count, which grows with the lookups that add.
  std::size_t lookups_since_sweep_ = 0;
  std::size_t kept_by_last_sweep_ = 0;
};

Mirrors& mirrors() {
  static Mirrors instance;
  return instance;
}

}  // namespace

Tensor mirror_of(const at::Tensor& plain, const std::shared_ptr<Runtime>& runtime) {
  return mirrors().get(plain, runtime);
}

}  // namespace dtr::torch::detail
