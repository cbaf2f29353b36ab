// The interpreter of differential programs, the comparison with the oracle, and the minimizer.
#include "differential.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <typeinfo>

#include "dtr/error.h"
#include "dtr/nn/autograd.h"
#include "dtr/nn/functional.h"
#include "dtr/nn/optim.h"
#include "dtr/ops.h"
#include "dtr/runtime.h"

namespace dtr::differential {
namespace {

// A leaf's values depend on the program's seed and the leaf's id only, so that a shrunk program's leaves hold
// the values they held in the program it came from.
std::vector<float> leaf_values(std::uint64_t seed, std::uint32_t id, std::int64_t count) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ULL + id);
  std::uniform_real_distribution<float> uniform(-1.0F, 1.0F);
  std::vector<float> values(static_cast<std::size_t>(count));
  for (float& v : values) v = uniform(rng);
  return values;
}

class Interpreter {
 public:
  Interpreter(Runtime& runtime, const Program& program, Observation& observation)
      : rt_(runtime), program_(program), obs_(observation) {}

  void run() {
    for (const Instruction& in : program_.instructions) execute(in);
    for (const auto& [id, value] : values_) record("v" + std::to_string(id), value.data());
    for (std::size_t i = 0; i < parameters_.size(); ++i) {
      record("parameter " + std::to_string(i), parameters_[i].data());
      if (parameters_[i].grad().defined()) record("gradient " + std::to_string(i), parameters_[i].grad());
    }
    if (optimizer_) {
      for (const auto& [name, tensor] : optimizer_->named_state()) record("optimizer " + name, tensor);
    }
  }

 private:
  void record(std::string name, const Tensor& tensor) { obs_.values.emplace_back(std::move(name), tensor.to_host()); }
  const nn::Variable* find(std::uint32_t id) const {
    const auto it = values_.find(id);
    return it == values_.end() ? nullptr : &it->second;
  }
  void set(std::uint32_t id, nn::Variable value) { values_.insert_or_assign(id, std::move(value)); }

  // An instruction whose operands were never made (a shrunk program) or no longer fit is skipped.
  void execute(const Instruction& in) {
    const nn::Variable* a = find(in.a);
    const nn::Variable* b = find(in.b);
    const auto rows = [](const nn::Variable* v) { return v->shape().empty() ? std::int64_t{0} : v->shape()[0]; };
    const auto matrix = [](const nn::Variable* v) { return v->shape().size() == 2; };
    switch (in.kind) {
      case OpKind::parameter:
      case OpKind::input: {
        const Shape shape = in.y == 0 ? Shape{in.x} : Shape{in.x, in.y};
        const std::vector<float> values = leaf_values(program_.seed, in.out, in.y == 0 ? in.x : in.x * in.y);
        nn::Variable leaf = nn::constant(rt_, shape, values, in.kind == OpKind::parameter);
        if (in.kind == OpKind::parameter) parameters_.push_back(leaf);
        set(in.out, std::move(leaf));
        return;
      }
      case OpKind::add:
      case OpKind::sub:
      case OpKind::mul:
        if (a == nullptr || b == nullptr || a->shape() != b->shape()) return;
        set(in.out, in.kind == OpKind::add   ? nn::add(*a, *b)
                    : in.kind == OpKind::sub ? nn::sub(*a, *b)
                                             : nn::mul(*a, *b));
        return;
      case OpKind::relu:
      case OpKind::tanh:
      case OpKind::gelu:
      case OpKind::scale:
      case OpKind::dropout:
        if (a == nullptr) return;
        set(in.out, in.kind == OpKind::relu   ? nn::relu(*a)
                    : in.kind == OpKind::tanh ? nn::tanh(*a)
                    : in.kind == OpKind::gelu ? nn::gelu(*a)
                    : in.kind == OpKind::scale ? nn::scale(*a, 0.5)
                                               : nn::dropout(*a, 0.25, true));
        return;
      case OpKind::matmul:
        if (a == nullptr || b == nullptr || !matrix(a) || !matrix(b) || a->shape()[1] != b->shape()[0]) return;
        set(in.out, nn::matmul(*a, *b));
        return;
      case OpKind::sum_rows:
        if (a == nullptr || !matrix(a)) return;
        set(in.out, nn::sum(*a, {0}));
        return;
      case OpKind::split: {
        if (a == nullptr || in.x < 1 || rows(a) <= in.x) return;
        std::vector<nn::Variable> parts = nn::split(*a, {in.x, rows(a) - in.x}, 0);
        set(in.out, parts[0]);
        set(in.out + 1, parts[1]);
        return;
      }
      case OpKind::concat: {
        if (a == nullptr || b == nullptr || a->shape().size() != b->shape().size() || a->shape().empty()) return;
        if (matrix(a) && a->shape()[1] != b->shape()[1]) return;
        const std::vector<nn::Variable> parts{*a, *b};
        set(in.out, nn::concat(parts, 0));
        return;
      }
      case OpKind::transpose:
        if (a == nullptr || !matrix(a)) return;
        set(in.out, nn::transpose(*a, 0, 1));
        return;
      case OpKind::flatten:
        if (a == nullptr) return;
        set(in.out, nn::reshape(*a, {a->numel()}));
        return;
      case OpKind::uniform:
        if (a == nullptr) return;
        set(in.out, nn::Variable(rt_, rt_.call1(ops::uniform(), {a->data()})));
        return;
      case OpKind::view_rows: {
        if (a == nullptr || in.x < 0 || rows(a) <= in.x) return;
        Shape shape = a->shape();
        const std::int64_t row_elements = a->numel() / shape[0];
        shape[0] -= in.x;
        set(in.out, nn::Variable(rt_, rt_.view(a->data(), shape, in.x * row_elements)));
        return;
      }
      case OpKind::assign: {
        if (a == nullptr || b == nullptr || a->requires_grad() || a->data().is_view() || a->shape() != b->shape()) {
          return;
        }
        Tensor target = a->data();  // a copy of the handle: assign updates every copy
        rt_.assign(target, ops::add(), {target, b->data()});
        return;
      }
      case OpKind::evict:
        if (a != nullptr) (void)rt_.evict(a->data());
        return;
      case OpKind::drop:
        values_.erase(in.a);
        return;
      case OpKind::read:
        if (a != nullptr) record("read v" + std::to_string(in.a), a->data());
        return;
      case OpKind::backward: {
        if (a == nullptr || !a->requires_grad()) return;
        const nn::Variable loss = nn::sum(*a);
        record("loss of v" + std::to_string(in.a), loss.data());
        loss.backward();
        // The graph is freed: what was computed from the parameters is a plain value from now on.
        for (auto& [id, value] : values_) {
          if (value.requires_grad() && !value.is_leaf()) value = value.detach();
        }
        return;
      }
      case OpKind::step:
        if (parameters_.empty()) return;
        if (!optimizer_) {
          if (program_.optimizer == OptimizerKind::sgd) {
            optimizer_ = std::make_unique<nn::SGD>(parameters_, nn::SGDOptions{0.1, 0.9, 0.01, false});
          } else {
            nn::AdamOptions options;
            options.lr = 0.01;
            options.weight_decay = 0.01;
            optimizer_ = std::make_unique<nn::Adam>(parameters_, options);
          }
        }
        optimizer_->step();
        optimizer_->zero_grad();
        return;
    }
  }

  Runtime& rt_;
  const Program& program_;
  Observation& obs_;
  std::map<std::uint32_t, nn::Variable> values_;
  std::vector<nn::Variable> parameters_;
  std::unique_ptr<nn::Optimizer> optimizer_;
};

// The peak a budget of `config`'s mode is measured against.
std::uint64_t peak_of(const Observation& observation, const RunConfig& config) {
  return config.mode == BudgetMode::bytes ? observation.peak_resident_bytes : observation.peak_reserved_bytes;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

std::string describe(const RunConfig& config) {
  std::ostringstream out;
  out << "budget ";
  if (config.budget) {
    out << *config.budget << " bytes";
  } else {
    out << "none";
  }
  out << ", DTR_BUDGET_MODE=" << to_string(config.mode) << ", DTR_HEURISTIC=" << config.heuristic
      << ", DTR_INPLACE=" << to_string(config.inplace) << ", DTR_SEARCH=" << to_string(config.search)
      << ", DTR_RECOMPUTE_ORDER=" << to_string(config.recompute_order)
      << ", DTR_EXPANDABLE_SEGMENTS=" << (config.expandable_segments ? 1 : 0)
      << ", DTR_COMPACTION=" << to_string(config.compaction);
  return out.str();
}

Config runtime_config(const RunConfig& config) {
  Config c;
  c.memory_budget = config.budget;
  c.budget_mode = config.mode;
  c.heuristic = config.heuristic;
  c.inplace = config.inplace;
  c.search = config.search;
  c.recompute_order = config.recompute_order;
  c.cost_model = CostModel::flops;
  c.clock = ClockKind::ops;
  c.thrash_limit = std::nullopt;
  c.allocator.small_request_limit = 4 * 1024;
  c.allocator.small_segment_bytes = 16 * 1024;
  c.allocator.large_segment_bytes = 32 * 1024;
  c.allocator.own_segment_threshold = 32 * 1024;
  c.allocator.own_segment_rounding = 16 * 1024;
  c.allocator.expandable_segments = config.expandable_segments;  // the host's 4 KiB pages
  c.allocator.compaction = config.compaction;
  return c;
}

Observation run(const Program& program, const RunConfig& config) {
  Observation obs;
  Runtime rt(runtime_config(config));
  {
    Interpreter interpreter(rt, program, obs);
    try {
      interpreter.run();
    } catch (const OutOfMemory&) {
      obs.feasible = false;
    } catch (const std::exception& e) {
      obs.error = std::string(typeid(e).name()) + ": " + e.what();
    }
  }  // every handle dies here
  const RuntimeStats stats = rt.stats();
  obs.peak_resident_bytes = stats.peak_resident_bytes;
  obs.peak_reserved_bytes = rt.allocator().stats().reserved_bytes.peak;
  obs.evictions = stats.evictions;
  obs.rematerializations = stats.rematerializations;
  obs.forecast_hits = stats.forecast_hits;
  obs.relocations = stats.relocations;
  obs.allocated_at_end = rt.allocator().stats().allocated_bytes.current;
  return obs;
}

std::string compare(const Observation& oracle, const Observation& observed, const RunConfig& config) {
  std::ostringstream out;
  if (!observed.error.empty()) return "threw " + observed.error;
  if (observed.allocated_at_end != 0) {
    out << observed.allocated_at_end << " bytes still allocated after every handle died";
    return out.str();
  }
  if (config.budget) {
    const std::uint64_t peak =
        config.mode == BudgetMode::bytes ? observed.peak_resident_bytes : observed.peak_reserved_bytes;
    if (peak > *config.budget) {
      out << "peak " << peak << " bytes over the budget of " << *config.budget;
      return out.str();
    }
  }
  if (!observed.feasible) return "";  // ran out of memory: what it read before may stop anywhere
  if (observed.values.size() != oracle.values.size()) {
    out << "read " << observed.values.size() << " values, the oracle " << oracle.values.size();
    return out.str();
  }
  for (std::size_t i = 0; i < oracle.values.size(); ++i) {
    if (observed.values[i].first != oracle.values[i].first || !same_bits(observed.values[i].second,
                                                                         oracle.values[i].second)) {
      out << "observation " << i << " (" << observed.values[i].first << ") differs from the oracle's ("
          << oracle.values[i].first << ")";
      return out.str();
    }
  }
  return "";
}

RunConfig with_other_search(RunConfig config) {
  config.search = config.search == EvictionSearch::index ? EvictionSearch::scan : EvictionSearch::index;
  return config;
}

std::string compare_searches(const Observation& observed, const Observation& other, const RunConfig& config) {
  const auto differs = [&](const char* what, std::uint64_t mine, std::uint64_t theirs) {
    std::ostringstream out;
    out << "with DTR_SEARCH=" << to_string(config.search) << ", " << mine << " " << what << "; with "
        << to_string(with_other_search(config).search) << ", " << theirs << ": the index and the scan decided "
        << "differently";
    return out.str();
  };
  if (observed.feasible != other.feasible) return differs("feasible (1: fits)", observed.feasible, other.feasible);
  if (observed.evictions != other.evictions) return differs("evictions", observed.evictions, other.evictions);
  if (observed.rematerializations != other.rematerializations) {
    return differs("rematerializations", observed.rematerializations, other.rematerializations);
  }
  if (observed.peak_resident_bytes != other.peak_resident_bytes) {
    return differs("bytes peak resident", observed.peak_resident_bytes, other.peak_resident_bytes);
  }
  if (observed.peak_reserved_bytes != other.peak_reserved_bytes) {
    return differs("bytes peak reserved", observed.peak_reserved_bytes, other.peak_reserved_bytes);
  }
  return "";
}

namespace {

// The unbudgeted run itself went wrong (threw, ran out of memory, kept bytes): no oracle to compare with.
std::optional<Failure> oracle_failure(const Observation& oracle) {
  if (oracle.error.empty() && oracle.feasible && oracle.allocated_at_end == 0) return std::nullopt;
  std::ostringstream what;
  what << "the oracle failed: ";
  if (!oracle.error.empty()) {
    what << "threw " << oracle.error;
  } else if (oracle.allocated_at_end != 0) {
    what << oracle.allocated_at_end << " bytes still allocated after every handle died";
  } else {
    what << "ran out of memory without a budget";
  }
  return Failure{RunConfig{}, what.str()};
}

// What `observed` (under `config`) does wrong against the oracle, and then, with `searches_agree`, against the
// other search's run; empty if nothing.
std::string check_run(const Program& program, const Observation& oracle, const Observation& observed,
                      const RunConfig& config, bool searches_agree) {
  std::string what = compare(oracle, observed, config);
  if (what.empty() && searches_agree && config.budget) {
    what = compare_searches(observed, run(program, with_other_search(config)), config);
  }
  return what;
}

}  // namespace

std::optional<Failure> check(const Program& program, std::span<const RunConfig> configs, bool searches_agree) {
  const Observation oracle = run(program, RunConfig{});
  if (std::optional<Failure> failure = oracle_failure(oracle)) return failure;
  for (const RunConfig& config : configs) {
    std::string what = check_run(program, oracle, run(program, config), config, searches_agree);
    if (!what.empty()) return Failure{config, std::move(what)};
  }
  return std::nullopt;
}

std::vector<RunConfig> random_configs(std::uint64_t seed, const Observation& oracle, int count,
                                      const std::vector<std::string>& drawn_from) {
  std::mt19937_64 rng(seed ^ 0xD1B54A32D192ED03ULL);
  // Its own generator, so that a seed's other choices are those it had before compaction was drawn.
  std::mt19937_64 compaction_rng(seed ^ 0x94D049BB133111EBULL);
  const std::vector<std::string> heuristics = drawn_from.empty() ? heuristic_names() : drawn_from;
  std::vector<RunConfig> configs;
  for (int i = 0; i < count; ++i) {
    RunConfig config;
    // One draw for both, so that a seed's other choices are those it had before expandable segments.
    const std::uint64_t mode_draw = rng() % 4;
    config.mode = mode_draw % 2 == 0 ? BudgetMode::bytes : BudgetMode::device;
    config.expandable_segments = config.mode == BudgetMode::device && mode_draw >= 2;
    config.heuristic = heuristics[rng() % heuristics.size()];
    config.inplace = rng() % 2 == 0 ? InplaceMode::copy_on_write : InplaceMode::pin_dependents;
    config.search = rng() % 2 == 0 ? EvictionSearch::index : EvictionSearch::scan;
    config.recompute_order = rng() % 2 == 0 ? RecomputeOrder::stable_last : RecomputeOrder::inputs;
    constexpr std::array<Compaction, 3> kCompactions{Compaction::last_resort, Compaction::first, Compaction::off};
    config.compaction = kCompactions[compaction_rng() % kCompactions.size()];
    const double ratio = std::uniform_real_distribution<double>(0.15, 0.95)(rng);
    config.budget =
        std::max<std::uint64_t>(1, static_cast<std::uint64_t>(ratio * static_cast<double>(peak_of(oracle, config))));
    configs.push_back(std::move(config));
  }
  return configs;
}

Program minimize(const Program& program, const std::function<bool(const Program&)>& fails) {
  Program best = program;
  std::size_t chunk = std::max<std::size_t>(1, best.instructions.size() / 2);
  while (true) {
    bool shrunk = false;
    for (std::size_t begin = 0; begin < best.instructions.size();) {
      Program candidate = best;
      const auto first = candidate.instructions.begin() + static_cast<std::ptrdiff_t>(begin);
      const std::size_t end = std::min(begin + chunk, candidate.instructions.size());
      candidate.instructions.erase(first, candidate.instructions.begin() + static_cast<std::ptrdiff_t>(end));
      if (fails(candidate)) {
        best = std::move(candidate);  // the same `begin` now names the next chunk
        shrunk = true;
      } else {
        begin += chunk;
      }
    }
    if (chunk == 1 && !shrunk) return best;
    if (!shrunk) chunk = std::max<std::size_t>(1, chunk / 2);
  }
}

void CampaignReport::add_counts(const CampaignReport& other) {
  programs += other.programs;
  runs += other.runs;
  feasible_runs += other.feasible_runs;
  runs_with_evictions += other.runs_with_evictions;
  evictions += other.evictions;
  rematerializations += other.rematerializations;
  forecast_hits += other.forecast_hits;
  runs_with_forecasts += other.runs_with_forecasts;
  relocations += other.relocations;
}

CampaignReport run_campaign(const CampaignOptions& options) {
  CampaignReport report;
  for (int i = 0; i < options.programs; ++i) {
    const std::uint64_t seed = options.first_seed + static_cast<std::uint64_t>(i);
    const Program program = generate(seed, options.generator);
    ++report.programs;
    const Observation oracle = run(program, RunConfig{});
    std::optional<Failure> failure = oracle_failure(oracle);
    const std::vector<RunConfig> configs = random_configs(seed, oracle, options.configs, options.heuristics);
    for (std::size_t k = 0; k < configs.size() && !failure; ++k) {
      const Observation observed = run(program, configs[k]);
      ++report.runs;
      report.feasible_runs += observed.feasible ? 1 : 0;
      report.runs_with_evictions += observed.evictions > 0 ? 1 : 0;
      report.evictions += observed.evictions;
      report.rematerializations += observed.rematerializations;
      report.forecast_hits += observed.forecast_hits;
      report.runs_with_forecasts += observed.forecast_hits > 0 ? 1 : 0;
      report.relocations += observed.relocations;
      if (std::string what = check_run(program, oracle, observed, configs[k], options.searches_agree);
          !what.empty()) {
        failure = Failure{configs[k], std::move(what)};
      }
    }
    if (failure) {
      report.failure = failure;
      report.failing_seed = seed;
      report.reproducer = program;
      if (options.minimize) {
        // A shrunk program needs less memory: it is tried under the failing budget and under the same
        // fraction of its own peak, whichever still fails.
        const RunConfig config = failure->config;
        const double ratio = config.budget ? static_cast<double>(*config.budget) /
                                                 static_cast<double>(std::max<std::uint64_t>(1, peak_of(oracle, config)))
                                           : 0.0;
        std::optional<Failure> last = failure;
        report.reproducer = minimize(program, [&](const Program& candidate) {
          std::vector<RunConfig> tries;
          if (config.budget) {
            tries.push_back(config);
            const Observation own = run(candidate, RunConfig{});
            RunConfig scaled = config;
            scaled.budget = std::max<std::uint64_t>(
                1, static_cast<std::uint64_t>(ratio * static_cast<double>(peak_of(own, config))));
            if (scaled.budget != config.budget) tries.push_back(scaled);
          }
          if (tries.empty()) {
            last = check(candidate, {}, options.searches_agree);
            return last.has_value();
          }
          for (const RunConfig& attempt : tries) {
            if (auto found = check(candidate, std::span<const RunConfig>(&attempt, 1), options.searches_agree)) {
              last = std::move(found);
              return true;
            }
          }
          return false;
        });
        report.failure = last;
      }
      return report;
    }
  }
  return report;
}

std::string reproducer_text(const CampaignReport& report) {
  if (!report.failure) return "";
  std::ostringstream out;
  out << "program " << report.failing_seed << " fails under " << describe(report.failure->config) << ": "
      << report.failure->what << "\n"
      << "reproducer (" << report.reproducer.instructions.size() << " instructions):\n"
      << to_text(report.reproducer);
  return out.str();
}

}  // namespace dtr::differential
