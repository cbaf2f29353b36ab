// The lineage graph: storages (device buffers, or none while evicted) and the closures that produce them.
// Internal to runtime/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "dtr/computation.h"
#include "dtr/op.h"
#include "dtr/runtime.h"
#include "heuristics/storage_view.h"

namespace dtr::detail {

struct Closure;

// The unit of eviction. Owned by shared pointers from user handles and from the closures that read it.
struct Storage final : heuristics::StorageView {
  static constexpr std::size_t kNotResident = static_cast<std::size_t>(-1);

  Storage(Runtime::Impl& owner, std::uint64_t storage_id, TensorMeta tensor_meta)
      : runtime(owner), id(storage_id), meta(std::move(tensor_meta)), nbytes(meta.nbytes()) {}
  ~Storage() override;
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  Runtime::Impl& runtime;
  const std::uint64_t id;
  const TensorMeta meta;
  const std::size_t nbytes;
  std::byte* data = nullptr;  // nullptr while evicted
  bool in_memory = false;
  // Given its buffer by a recomputation whose kernel has not finished: the heuristics still see it evicted (as
  // in the DTR authors' runtime, an output joins memory when its op is done), and are told it is back then.
  bool restoring = false;
  std::shared_ptr<Closure> producer;  // nullptr: a constant
  std::size_t output_index = 0;
  int pins = 0;     // ops using it right now: never evicted while > 0
  // Pointers to its buffer held across an allocation (a kernel's arguments being gathered, or the kernel
  // running and asking for scratch): never moved by compaction while > 0. A pinned storage whose pointer no
  // one holds yet may move (an op's inputs while its outputs are allocated).
  int captured = 0;
  int handles = 0;  // live user handles
  bool handles_released = false;  // handles fell to 0 (StorageView::released); none can be made again
  double producer_cost = 0;
  std::uint64_t last_used = 0;
  // The closures that read it, each with the input slot it reads this storage through; a closure knows where
  // its entries are (Closure::dependent_at), so one dies in O(1) however many read this storage.
  struct Dependent {
    Closure* closure;
    std::uint32_t input;
  };
  SmallVector<Dependent, 2> dependents;  // most storages have one or two readers: no heap block for them
  std::size_t resident_slot = kNotResident;  // index in the runtime's list of evictable resident storages
  std::size_t unreported_slot = kNotResident;  // index in Runtime::Impl::unreported_evictions, while there
  // When it last became an eviction candidate (a runtime-wide arrival count; 0: not a candidate). Equal
  // scores go to the latest arrival, as in the DTR authors' runtime (its candidate list is in arrival order).
  std::uint64_t candidate_since = 0;
  // How many times it has become resident: a view made during an earlier residency is undone by the eviction.
  std::uint64_t residency = 0;
  // Views of it that ops made (OpDef::views), in creation order. A user handle names one by its index + 1.
  struct View {
    std::uint32_t base = 0;   // the view it was made from (index + 1); 0: the storage itself
    double cost = 0;          // its op's cost, paid again each time it is made again
    std::uint64_t made_in = 0;  // the residency it was last made in
  };
  std::vector<View> views;
  double view_cost = 0;  // the summed cost of the ops that made views of it (each op once): part of its cost
  // Forecasts (runtime/forecast.h), kept only for a heuristic that reads them: its structural signature (0:
  // none), the program clock at its birth, the ops clock at its last use, the program uses so far (offsets from
  // its birth), and the uses of the last storage of its signature with how far they have been passed.
  std::uint64_t signature = 0;
  std::uint64_t constant_key = 0;  // a constant's shape and dtype hash, while counted among the live ones
  std::uint64_t born = 0;
  std::uint64_t last_touch_ops = 0;  // the ops clock (recomputations included) at its last use
  std::vector<std::uint32_t> uses;
  std::shared_ptr<const std::vector<std::uint32_t>> forecast;
  std::uint32_t forecast_cursor = 0;
  // Whether, when the program made it, every input it was made from but the constants had a forecast use
  // still ahead: the program keeps them, so remaking it later costs its producer alone, as now.
  bool inputs_read_again = false;


  // heuristics::StorageView
  std::size_t bytes() const override { return nbytes; }
  double cost() const override { return producer_cost; }
  std::uint64_t last_access() const override { return last_used; }
  bool evicted() const override { return !in_memory || restoring; }
  bool constant() const override { return producer == nullptr; }
  bool released() const override { return handles_released; }
  double forecast_distance() override;
  bool forecast_unread() override;
  std::optional<std::uint64_t> forecast_deadline() override;
  std::uint64_t last_use_op() const override { return last_touch_ops; }
  bool made_before() const override { return forecast != nullptr; }
  bool read_by_program() const override { return !uses.empty(); }
  std::uint64_t ops_run_at_last_use() const override;
  void for_each_input(heuristics::NeighbourVisitor visit) override;
  void for_each_dependent(heuristics::NeighbourVisitor visit) override;
};

// One recorded op: enough to run it again. Holds its inputs (lineage stays alive) and weak references to its
// outputs (a dead output is recomputed into scratch memory when its siblings are). What it runs is a
// dtr::Computation from any source; the lineage needs nothing else of the op.
struct Closure {
  Closure() = default;
  Closure(const Closure&) = delete;
  Closure& operator=(const Closure&) = delete;
  ~Closure();
  // Adds it to its inputs' dependents (once its first run succeeded).
  void register_dependent();

  Computation* computation = nullptr;  // owned by the closure type below that holds it
  // Inline capacities fit most ops: one heap block per closure.
  SmallVector<std::shared_ptr<Storage>, 3> inputs;
  SmallVector<TensorMeta, 3> input_meta;   // the input as the op saw it: a view may cover part of its storage
  SmallVector<std::size_t, 3> input_offset;  // in elements, from the start of the storage
  SmallVector<std::uint32_t, 3> input_view;  // the op-made view of the storage it read (Storage::views); 0: none
  // Per input: where this closure's entry is in the input's Storage::dependents (empty until it is registered,
  // once it ran).
  SmallVector<std::uint32_t, 3> dependent_at;
  // The outputs with a buffer of their own (not views; the computation writes these), in output order.
  SmallVector<Storage*, 2> outputs;          // nullptr once that output's storage died
  SmallVector<TensorMeta, 2> output_meta;
  double cost = 0;  // of its first run
};

// A closure that holds its computation inline: the op table's closures, one block each.
template <typename C>
struct ClosureWith final : Closure {
  template <typename... Args>
  explicit ClosureWith(Args&&... args) : body(std::forward<Args>(args)...) {
    computation = &body;
  }
  C body;
};

// A closure over a computation its source shares (Runtime::call with a dtr::Computation).
struct SharedClosure final : Closure {
  explicit SharedClosure(std::shared_ptr<Computation> c) : held(std::move(c)) { computation = held.get(); }
  std::shared_ptr<Computation> held;
};

// One user handle of a storage: the whole storage, or a contiguous view of part of it.
struct TensorHandle {
  explicit TensorHandle(std::shared_ptr<Storage> s);
  TensorHandle(std::shared_ptr<Storage> s, std::uint64_t view_id, TensorMeta view_meta, std::size_t view_offset,
               std::uint32_t op_view = 0);
  ~TensorHandle();
  TensorHandle(const TensorHandle&) = delete;
  TensorHandle& operator=(const TensorHandle&) = delete;
  std::shared_ptr<Storage> storage;
  std::uint64_t id;     // the name in traces: the storage's id, or the view's own
  TensorMeta meta;
  std::size_t offset;   // in elements
  std::uint32_t view;   // an op-made view of the storage (Storage::views index + 1), made again when used; 0: none
};
}  // namespace dtr::detail
