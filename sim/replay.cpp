// A trace replayed through the real Runtime over simulated memory (design section 6).
#include <algorithm>
#include <limits>
#include <cmath>
#include <unordered_map>

#include <fmt/format.h>

#include "dtr/check.h"
#include "dtr/memory_resource.h"
#include "dtr/runtime.h"
#include "dtr/sim.h"

namespace dtr::sim {
namespace {

using Kind = Instruction::Kind;

// A logged op: outputs of the logged sizes (opaque bytes) or views of the arguments the log says they alias,
// no kernel work, the logged time as its cost.
const OpDef& replay_op() {
  static const OpDef op{
      .name = "replay",
      .infer =
          [](std::span<const TensorMeta> inputs, const Attrs& attrs) {
            TensorMetas out;
            const auto& bytes = attrs.get_ints("bytes");
            const auto& aliases = attrs.get_ints("aliases");
            for (std::size_t i = 0; i < bytes.size(); ++i) {
              out.push_back(aliases[i] < 0 ? TensorMeta{{bytes[i]}, DType::uint8}
                                           : inputs[static_cast<std::size_t>(aliases[i])]);
            }
            return out;
          },
      .cpu_kernel = [](const KernelArgs& /*args*/) {},
      .flops = nullptr,
      .random = false,
      .known_cost = [](std::span<const TensorMeta> /*inputs*/, const Attrs& attrs) { return attrs.get_real("time"); },
      .touches_memory = false,
      .views =
          [](std::span<const TensorMeta> /*inputs*/, const Attrs& attrs) {
            OutputViews views;
            for (const std::int64_t alias : attrs.get_ints("aliases")) {
              if (alias < 0) {
                views.emplace_back();
              } else {
                views.emplace_back(ViewOf{static_cast<std::size_t>(alias), 0});
              }
            }
            return views;
          },
  };
  return op;
}

// The simulated device (nothing is allocated for real): 32 TiB. replay() refuses a trace whose unbudgeted peak
// is beyond it, rather than reporting it infeasible at every budget.
constexpr std::size_t kCapacity = std::size_t{1} << 45;

class Replayer {
 public:
  Replayer(const Trace& trace, const ReplayOptions& options, const TraceSummary& summary)
      : trace_(trace), options_(options),
        runtime_(config_for(options, summary.base_compute_ns), make_simulated_resource(kCapacity)) {
    live_.resize(trace.names.size());
    group_.resize(trace.names.size());
  }

  ReplayResult run() {
    ReplayResult result;
    try {
      for (const Instruction& in : trace_.instructions) {
        at_ = &in;
        step(in);
      }
      at_ = nullptr;
      // What the program still holds must exist at the end.
      for (const Tensor& t : live_) {
        if (t.defined()) runtime_.materialize(t);
      }
    } catch (const Thrashing&) {
      result.thrashed = true;  // the runtime stopped the cell at the recomputation that passed the limit
    } catch (const OutOfMemory& e) {
      result.feasible = false;
      // The runtime names its op 'replay': where in the trace, and the logged op, say which.
      std::string where = trace_.source;
      if (at_ == nullptr) {
        where += ": at the end, materializing what the program holds";
      } else {
        where += fmt::format(":{}", at_->line);
        if (!at_->op.empty()) where += fmt::format(": in op '{}'", at_->op);
      }
      result.failure = where + ": " + e.what();
    }
    // The program has ended: what it still holds dies before the statistics are read, so that the heuristic's
    // upkeep for those deaths (walks of the evicted regions for dtr and msps) is counted as search time.
    live_.clear();
    args_.clear();
    constants_.clear();
    const RuntimeStats stats = runtime_.stats();
    const AllocatorStats memory = runtime_.allocator().stats();
    result.base_compute_ns = stats.base_compute;
    result.remat_compute_ns = stats.remat_compute;
    result.evictions = stats.evictions;
    result.eager_evictions = stats.eager_evictions;
    result.rematerializations = stats.rematerializations;
    result.search_ns = stats.search_ns;
    result.peak_resident_bytes = stats.peak_resident_bytes;
    result.peak_reserved_bytes = memory.reserved_bytes.peak;
    result.peak_fragmentation = memory.peak_fragmentation;
    result.budget_bytes = options_.budget_bytes.value_or(0);
    // A heuristic that changed its rule (Heuristic::change_rule) restarts the runtime's count: the cell is
    // still judged on the whole of its recomputation, as every other heuristic's.
    const Config& config = runtime_.config();  // its thrash base is the whole trace's (config_for)
    if (config.thrash_limit && result.remat_compute_ns > (*config.thrash_limit - 1.0) * *config.thrash_base_compute) {
      result.thrashed = true;
    }
    return result;
  }

 private:
  static Config config_for(const ReplayOptions& options, double base_compute_ns) {
    Config config;
    config.thrash_limit = options.thrash_limit;
    config.thrash_base_compute = base_compute_ns;
    config.memory_budget = options.budget_bytes;
    config.budget_mode = options.budget_mode;
    config.heuristic = options.heuristic;
    config.search = options.search;
    config.recompute_order = options.recompute_order;
    config.allocator.expandable_segments = options.expandable_segments;
    config.clock = ClockKind::compute;
    config.cost_model = CostModel::flops;  // unused: replayed ops carry their logged cost
    return config;
  }

  const Tensor& named(std::uint32_t name, const Instruction& in) const {
    const Tensor& t = live_[name];
    DTR_CHECK(t.defined(), TraceError, trace_.source, ":", in.line, ": '", trace_.names[name],
              "' is not live here (never defined, or released)");
    return t;
  }

  void step(const Instruction& in) {
    switch (in.kind) {
      case Kind::constant:
        bind(in.name, runtime_.constant(TensorMeta{{static_cast<std::int64_t>(in.bytes)}, DType::uint8}));
        // Kept through a handle of its own: an assign through the name's handle must not move it too.
        if (options_.keep_constants) constants_.push_back(runtime_.view(live_[in.name], live_[in.name].shape(), 0));
        return;
      case Kind::call: return call(in);
      case Kind::mutate: return mutate(in);
      case Kind::copy: return share(in.name, in.source, in);
      case Kind::copy_from: return copy_from(in);
      case Kind::make_constant: return make_constant(in);
      case Kind::release: return unbind(in.name);  // a release of a dead name is ignored
      case Kind::annotate: return;
    }
  }

  // The tensors `in`'s ARGS name, into args_.
  void gather_args(const Instruction& in) {
    args_.clear();
    for (std::uint32_t a : in.args) args_.push_back(named(a, in));
  }

  void call(const Instruction& in) {
    gather_args(in);
    std::vector<std::int64_t> bytes;
    std::vector<std::int64_t> aliases;
    for (const Instruction::Result& r : in.results) {
      bytes.push_back(static_cast<std::int64_t>(r.bytes));
      aliases.push_back(r.alias);
    }
    const std::vector<Tensor> outputs = runtime_.call(
        replay_op(), args_, Attrs{{"bytes", std::move(bytes)}, {"aliases", std::move(aliases)}, {"time", in.time_ns}});
    args_.clear();  // held until the next op, the inputs would outlive their RELEASE (and all they need)
    for (std::size_t i = 0; i < outputs.size(); ++i) bind(in.results[i].name, outputs[i]);
  }

  // Names hold Tensors, and a Tensor copy shares its handle: a name's handle group counts the names that share
  // it, so that a reassignment knows whether it may update the handle (every name on it would follow).
  void bind(std::uint32_t name, Tensor tensor) {
    unbind(name);
    live_[name] = std::move(tensor);
    group_[name] = static_cast<std::uint32_t>(group_names_.size());
    group_names_.push_back(1);
  }
  void share(std::uint32_t name, std::uint32_t source, const Instruction& in) {
    Tensor tensor = named(source, in);
    if (name == source) return;
    unbind(name);
    live_[name] = std::move(tensor);
    group_[name] = group_[source];
    group_names_[group_[name]] += 1;
  }
  void unbind(std::uint32_t name) {
    if (!live_[name].defined()) return;
    live_[name] = Tensor();
    group_names_[group_[name]] -= 1;
  }

  // A reassignment. Where the name holds, alone, a value of the same size, as in the logs dtr-train writes (an
  // in-place update: Runtime::assign), it is replayed as the run did it, by Runtime::assign, so that a new
  // parameter value becomes a constant as it did in the run instead of keeping a lineage back through every
  // earlier step. Otherwise the name just takes the value (the DTR prototype's COPY_FROM).
  void copy_from(const Instruction& in) {
    const Tensor& source = named(in.source, in);
    Tensor& target = live_[in.name];
    if (in.name != in.source && target.defined() && group_names_[group_[in.name]] == 1 && !target.is_view() &&
        !source.is_view() && target.meta() == source.meta()) {
      runtime_.assign(target, source);
    } else {
      share(in.name, in.source, in);
    }
  }

  // A value the run made a constant (Runtime::make_constant: autograd's waiting gradients) is made one here
  // too, so that the replay cuts its lineage where the run did; through a view, the storage it views.
  void make_constant(const Instruction& in) { runtime_.make_constant(named(in.name, in)); }

  // In place, modelled as copy-on-write: a new op whose outputs replace the mutated arguments' names.
  void mutate(const Instruction& in) {
    gather_args(in);
    std::vector<std::int64_t> bytes;
    for (std::uint32_t k : in.mutated) bytes.push_back(static_cast<std::int64_t>(args_[k].storage_bytes()));
    std::vector<std::int64_t> aliases(bytes.size(), -1);
    const std::vector<Tensor> outputs = runtime_.call(
        replay_op(), args_, Attrs{{"bytes", std::move(bytes)}, {"aliases", std::move(aliases)}, {"time", in.time_ns}});
    args_.clear();
    for (std::size_t i = 0; i < in.mutated.size(); ++i) bind(in.args[in.mutated[i]], outputs[i]);
  }

  const Trace& trace_;
  const ReplayOptions& options_;
  Runtime runtime_;
  std::vector<Tensor> live_;  // by name: the tensor the name holds now (undefined: none)
  std::vector<std::uint32_t> group_;        // by name: its handle group, while it holds a tensor
  std::vector<std::uint32_t> group_names_;  // by handle group: how many names hold its handle
  std::vector<Tensor> args_;
  std::vector<Tensor> constants_;  // held to the end (ReplayOptions::keep_constants)
  const Instruction* at_ = nullptr;  // the instruction being replayed, for a failure's message
};

}  // namespace

TraceSummary summarize(const Trace& trace) {
  // Storages by index; each name holds one reference to its storage. Nothing but sizes and counts.
  std::vector<std::uint64_t> size;
  std::vector<std::uint64_t> references;
  std::vector<bool> constant;  // a CONSTANT's storage
  std::vector<bool> made_constant;  // a result made a constant by MAKE_CONSTANT: resident, but not a CONSTANT
  std::vector<std::int64_t> storage_of(trace.names.size(), -1);  // by name; -1: not live
  TraceSummary summary;
  std::uint64_t live = 0;
  std::uint64_t live_constants = 0;  // bytes of the constants some name still holds
  const Instruction* at = nullptr;  // the instruction being summed, for an overflow's message
  auto add = [&](std::uint64_t& sum, std::uint64_t bytes) {
    DTR_CHECK(sum <= std::numeric_limits<std::uint64_t>::max() - bytes, TraceError, trace.source, ":",
              at != nullptr ? at->line : 0, ": the trace's tensors sum past 2^64 bytes");
    sum += bytes;
  };
  auto create = [&](std::uint64_t bytes, bool is_constant) {
    size.push_back(bytes);
    references.push_back(0);
    constant.push_back(is_constant);
    made_constant.push_back(false);
    add(live, bytes);
    if (is_constant) live_constants += bytes;
    return static_cast<std::int64_t>(size.size() - 1);
  };
  auto drop = [&](std::int64_t storage) {
    const auto s = static_cast<std::size_t>(storage);
    if (--references[s] != 0) return;
    live -= size[s];
    if (constant[s] || made_constant[s]) live_constants -= size[s];
  };
  auto bind = [&](std::uint32_t name, std::int64_t storage) {
    const std::int64_t old = storage_of[name];
    references[static_cast<std::size_t>(storage)] += 1;
    storage_of[name] = storage;
    if (old >= 0) drop(old);
  };
  auto release = [&](std::uint32_t name) {
    const std::int64_t old = storage_of[name];
    if (old < 0) return;
    storage_of[name] = -1;
    drop(old);
  };
  // An op needs its distinct inputs and outputs at once, beside every constant resident then.
  std::vector<std::int64_t> used;  // reused: every replay summarizes its trace first
  auto count_floor = [&](const std::vector<std::int64_t>& inputs, const std::vector<std::int64_t>& outputs) {
    used.assign(inputs.begin(), inputs.end());
    used.insert(used.end(), outputs.begin(), outputs.end());
    std::sort(used.begin(), used.end());
    used.erase(std::unique(used.begin(), used.end()), used.end());
    std::uint64_t others = 0;        // the op's storages that are not CONSTANTs
    std::uint64_t not_resident = 0;  // those that are not made constants either (already in live_constants)
    for (const std::int64_t u : used) {
      const auto k = static_cast<std::size_t>(u);
      if (constant[k]) continue;
      others += size[k];
      if (!made_constant[k]) not_resident += size[k];
    }
    std::uint64_t with_resident = not_resident;
    add(with_resident, live_constants);
    std::uint64_t with_all = others;
    add(with_all, summary.constant_bytes);
    summary.floor_bytes = std::max(summary.floor_bytes, with_resident);
    summary.floor_bytes_constants_kept = std::max(summary.floor_bytes_constants_kept, with_all);
  };
  auto storage_named = [&](std::uint32_t name, const Instruction& in) {
    DTR_CHECK(storage_of[name] >= 0, TraceError, trace.source, ":", in.line, ": '", shown_value(trace.names[name]),
              "' is not live here (never defined, or released)");
    return storage_of[name];
  };
  for (const Instruction& in : trace.instructions) {
    at = &in;
    switch (in.kind) {
      case Kind::constant:
        add(summary.constant_bytes, in.bytes);
        bind(in.name, create(in.bytes, true));
        summary.peak_bytes = std::max(summary.peak_bytes, live);
        count_floor({}, {});
        break;
      case Kind::call: {
        summary.base_compute_ns += in.time_ns;
        std::vector<std::int64_t> args;
        for (std::uint32_t a : in.args) args.push_back(storage_named(a, in));
        std::vector<std::int64_t> results;
        for (const Instruction::Result& r : in.results) {
          results.push_back(r.alias < 0 ? create(r.bytes, false) : args[static_cast<std::size_t>(r.alias)]);
        }
        summary.peak_bytes = std::max(summary.peak_bytes, live);
        count_floor(args, results);
        for (std::size_t i = 0; i < results.size(); ++i) bind(in.results[i].name, results[i]);
        break;
      }
      case Kind::mutate: {
        summary.base_compute_ns += in.time_ns;
        std::vector<std::int64_t> outputs;
        std::vector<std::int64_t> args;
        for (std::uint32_t a : in.args) args.push_back(storage_named(a, in));
        for (std::uint32_t k : in.mutated) outputs.push_back(create(size[static_cast<std::size_t>(args[k])], false));
        summary.peak_bytes = std::max(summary.peak_bytes, live);
        count_floor(args, outputs);
        for (std::size_t i = 0; i < outputs.size(); ++i) bind(in.args[in.mutated[i]], outputs[i]);
        break;
      }
      case Kind::copy:
      case Kind::copy_from: bind(in.name, storage_named(in.source, in)); break;
      case Kind::make_constant: {
        const auto s = static_cast<std::size_t>(storage_named(in.name, in));
        if (!constant[s] && !made_constant[s]) {
          made_constant[s] = true;
          live_constants += size[s];
        }
        break;
      }
      case Kind::release: release(in.name); break;
      case Kind::annotate: break;
    }
  }
  return summary;
}

ReplayResult replay(const Trace& trace, const ReplayOptions& options) {
  DTR_CHECK(!options.thrash_limit || (std::isfinite(*options.thrash_limit) && *options.thrash_limit >= 1),
            InvalidArgument, "replay: ReplayOptions::thrash_limit ", options.thrash_limit.value_or(0),
            " must be a finite overhead factor >= 1, or nullopt for none");
  if (options.budget_bytes == std::uint64_t{0}) {
    // Nothing fits in 0 bytes, and the caching allocator refuses such a budget outright: like any run that
    // does not fit, a result, so that a sweep whose smallest ratios round to 0 bytes goes on.
    parse_heuristic(options.heuristic, "ReplayOptions::heuristic");  // bad options still throw
    ReplayResult result;
    result.feasible = false;
    result.failure = "out of memory: the budget rounds to 0 bytes, which holds nothing (ReplayOptions::budget_bytes "
                     "= 0; nullopt is no budget)";
    return result;
  }
  const TraceSummary summary = summarize(trace);  // one pass: the peak checked here, the base compute below
  DTR_CHECK(summary.peak_bytes <= kCapacity, TraceError, trace.source, ": the unbudgeted peak, ",
            format_bytes(summary.peak_bytes), ", is beyond the simulated device's ", format_bytes(kCapacity),
            ": traces up to that replay");
  Replayer replayer(trace, options, summary);
  return replayer.run();
}

}  // namespace dtr::sim
