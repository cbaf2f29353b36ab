// How many recomputations each eviction heuristic costs, through the real runtime (issue 4, "proof that it
// matters"): the unit chain against Revolve's optimum, and random DAGs against each other.
//
//   dtr-bench-heuristic-quality [--chain N]... [--chain-passes P] [--placement B]... [--dags K] [--steps S]
//       [--heuristic H]...
//
// Defaults: chains of 1600 and 10000, 4 random DAGs of 400 steps, every heuristic. Prints Markdown tables
// (docs/results/heuristic-quality.md pastes them).
//
// Unit chain: x_{i+1} = relu(x_i) for i < N, then g = add(g, x_i) for i = N-1 .. 0, dropping x_i once read;
// every tensor 4 KiB, every op the same cost (cost model flops), clock ops, budget mode bytes, so a budget of
// B tensors is B * 4 KiB. Recomputations are closures replayed; Revolve's optimum for the same chain is taken
// with B - 3 checkpoint slots (the input x_0, the gradient, and the value being produced take the other
// three), as the DTR paper's simulator does. A run that passes 50 N recomputations (50 N P over all its
// passes) is stopped ("thrash"). With --chain-passes P the program runs P passes in one runtime and the last
// is counted: the steady state of a training loop, where `forecast` knows the pass before.
//
// With --placement B, for each chain and heuristic at a budget of B tensors, where the recomputations go: the
// values resident when the last pass's forward ends (its checkpoints), and the fewest recomputations that
// could reverse the pass from them: per segment between two checkpoints Revolve's count for its length, with
// the slots left beside the checkpoints before it (B - 4 less their number, at least 0), summed. Against the
// pass's own recomputations and Revolve's optimum, that tells what the forward's placement costs and what the
// reversal adds to it.
//
// Random DAGs: a forward pass where each step reads the previous value and, with probability 1/2, one of the
// 8 before it (skip connections), tensors of 1 to 4 KiB; then a backward pass reading each forward value
// in reverse, as a gradient would. Budgets are fractions of the unbudgeted peak of resident bytes.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "dtr/dtr.h"
#include "heuristics/heuristic.h"
#include "heuristics/revolve.h"

namespace {

using dtr::Tensor;

constexpr std::int64_t kChainElements = 1024;  // 4 KiB per chain tensor
constexpr double kThrashFactor = 50;           // stop a chain run past this many recomputations per step

using dtr::heuristics::revolve_recomputations;

// Device budgets count the allocator's segments: small ones (64 KiB) so that a DAG spans dozens of them and
// where its tensors land matters.
dtr::Config config_for(std::optional<std::uint64_t> budget, const std::string& heuristic,
                       dtr::BudgetMode mode = dtr::BudgetMode::bytes) {
  dtr::Config config;
  config.memory_budget = budget;
  config.budget_mode = mode;
  if (mode == dtr::BudgetMode::device) {
    config.allocator.small_request_limit = 16 * 1024;
    config.allocator.small_segment_bytes = 64 * 1024;
    config.allocator.large_segment_bytes = 128 * 1024;
    config.allocator.own_segment_threshold = 128 * 1024;
    config.allocator.own_segment_rounding = 64 * 1024;
  }
  config.heuristic = heuristic;
  config.cost_model = dtr::CostModel::flops;
  config.clock = dtr::ClockKind::ops;
  // This benchmark measures recomputations at budgets far past 2x overhead (Revolve's optimum included), and
  // counts its own thrashing (kThrashFactor): the runtime's limit is off.
  config.thrash_limit = std::nullopt;
  return config;
}

struct Outcome {
  bool feasible = false;
  bool thrashed = false;
  std::uint64_t recomputations = 0;
  std::uint64_t peak_resident = 0;
  std::uint64_t peak_reserved = 0;
};

// Runs `program` (which builds the forward pass, then walks backwards, asking `thrashing()` after each
// step) on a fresh runtime; it returns the final gradient, or an undefined tensor when it stopped thrashing.
template <typename Program>
Outcome measure(dtr::Config config, std::uint64_t cap, Program program) {
  dtr::Runtime rt(std::move(config));
  Outcome out;
  auto thrashing = [&] { return rt.stats().rematerializations > cap; };
  try {
    const Tensor last = program(rt, thrashing);
    out.thrashed = !last.defined();
    if (!out.thrashed) last.to_host();
    out.feasible = true;
  } catch (const dtr::OutOfMemory&) {
    out.feasible = false;
  }
  out.recomputations = rt.stats().rematerializations;
  out.peak_resident = rt.stats().peak_resident_bytes;
  out.peak_reserved = rt.allocator().stats().reserved_bytes.peak;
  return out;
}

// `passes` times the chain's forward and backward, each pass from a fresh input once the last one's values
// are gone, as training repeats its step; the recomputations reported are the last pass's (Revolve's
// optimum is per pass), so a heuristic that forecasts from earlier passes shows its steady state.
// `checkpoints`, if given: the chain values x_1 .. x_{n-1} resident when the last pass's forward ended.
Outcome run_chain(int n, std::optional<std::uint64_t> budget_tensors, const std::string& heuristic, int passes,
                  std::vector<int>* checkpoints = nullptr) {
  std::optional<std::uint64_t> budget;
  if (budget_tensors) budget = *budget_tensors * kChainElements * sizeof(float);
  const auto cap = static_cast<std::uint64_t>(kThrashFactor * n * passes);
  std::uint64_t before_last_pass = 0;
  Outcome out = measure(config_for(budget, heuristic), cap, [&](dtr::Runtime& rt, auto&& thrashing) {
    Tensor result;
    for (int pass = 0; pass < passes; ++pass) {
      before_last_pass = rt.stats().rematerializations;
      std::vector<Tensor> x;
      x.push_back(rt.constant(dtr::TensorMeta{{kChainElements}}, std::vector<float>(kChainElements, 1.0f)));
      for (int i = 0; i < n; ++i) x.push_back(rt.call1(dtr::ops::relu(), {x.back()}));
      if (checkpoints != nullptr && pass + 1 == passes) {
        checkpoints->clear();
        for (int i = 1; i < n; ++i) {
          if (x[static_cast<std::size_t>(i)].resident()) checkpoints->push_back(i);
        }
      }
      Tensor g = x.back();
      x.pop_back();
      for (int i = n - 1; i >= 0; --i) {
        g = rt.call1(dtr::ops::add(), {g, x[static_cast<std::size_t>(i)]});
        x.pop_back();
        if (thrashing()) return Tensor();
      }
      g.to_host();  // the pass's result read; then its lineage goes with it
      if (pass + 1 == passes) result = g;
    }
    return result;
  });
  if (out.feasible && !out.thrashed) out.recomputations -= before_last_pass;
  return out;
}

// A random DAG program with tensors of 1 to `max_kib` KiB; the same seed is the same program.
Outcome run_dag(std::uint64_t seed, int steps, std::optional<std::uint64_t> budget, const std::string& heuristic,
                dtr::BudgetMode mode = dtr::BudgetMode::bytes, std::uint64_t max_kib = 4) {
  const auto cap = static_cast<std::uint64_t>(kThrashFactor * steps);
  return measure(config_for(budget, heuristic, mode), cap, [=](dtr::Runtime& rt, auto&& thrashing) {
    std::mt19937_64 rng(seed);
    auto elements = [&] { return static_cast<std::int64_t>(256 * (1 + rng() % max_kib)); };
    const auto longest = static_cast<std::int64_t>(256 * max_kib);
    const Tensor pad = rt.constant(dtr::TensorMeta{{longest}}, std::vector<float>(static_cast<std::size_t>(longest), 0.5f));
    // `v` brought to `len` elements: a view of its first ones, or v followed by padding (a concat).
    auto fit = [&](const Tensor& v, std::int64_t len) {
      if (v.numel() == len) return v;
      if (v.numel() > len) return rt.view(v, {len});
      return rt.call1(dtr::ops::concat2(), {v, rt.view(pad, {len - v.numel()})});
    };
    std::vector<Tensor> x;
    const std::int64_t first = elements();
    x.push_back(rt.constant(dtr::TensorMeta{{first}}, std::vector<float>(static_cast<std::size_t>(first), 0.25f)));
    for (int i = 0; i < steps; ++i) {
      const std::int64_t len = elements();
      Tensor next = rt.call1(dtr::ops::relu(), {fit(x.back(), len)});
      if (rng() % 2 == 0 && x.size() > 1) {  // a skip connection from one of the 8 values before
        const std::size_t back = 1 + rng() % std::min<std::size_t>(8, x.size() - 1);
        next = rt.call1(dtr::ops::add(), {next, fit(x[x.size() - 1 - back], len)});
      }
      x.push_back(std::move(next));
    }
    Tensor g = rt.call1(dtr::ops::scale(), {x.back()}, dtr::Attrs{{"factor", 1.0}});
    for (std::size_t i = x.size(); i-- > 0;) {
      g = rt.call1(dtr::ops::add(), {fit(g, x[i].numel()), x[i]});
      x.pop_back();
      if (thrashing()) return Tensor();
    }
    return g;
  });
}

std::string cell(const Outcome& o) {
  if (!o.feasible) return "OOM";
  if (o.thrashed) return "thrash";
  return std::to_string(o.recomputations);
}

void chain_table(int n, int passes, const std::vector<std::string>& heuristics) {
  // The smallest budget (in tensors) at which any heuristic finishes.
  std::uint64_t smallest = 3;
  while (smallest < static_cast<std::uint64_t>(n)) {
    bool any = false;
    for (const std::string& h : heuristics) {
      const Outcome o = run_chain(n, smallest, h, passes);
      if (o.feasible && !o.thrashed) {
        any = true;
        break;
      }
    }
    if (any) break;
    ++smallest;
  }
  std::vector<std::uint64_t> budgets = {smallest};
  for (std::uint64_t b : {10, 20, 40, 60, 80, 120, 200, 400, 800, 1600, 3200, 10000}) {
    if (b > smallest && b <= static_cast<std::uint64_t>(n)) budgets.push_back(b);
  }
  const auto root = static_cast<std::uint64_t>(2 * std::sqrt(n));
  if (std::find(budgets.begin(), budgets.end(), root) == budgets.end() && root > smallest) budgets.push_back(root);
  std::sort(budgets.begin(), budgets.end());

  const std::string repeated =
      passes == 1 ? std::string() : ", pass " + std::to_string(passes) + " of " + std::to_string(passes);
  std::printf("\n### Unit chain, N = %d%s\n\nRecomputations (closures replayed) per budget; in brackets, the ratio to "
              "Revolve's optimum with budget − 3 slots. Smallest budget any heuristic finishes: %llu tensors.\n\n",
              n, repeated.c_str(), static_cast<unsigned long long>(smallest));
  std::printf("| budget (tensors) | Revolve |");
  for (const std::string& h : heuristics) std::printf(" %s |", h.c_str());
  std::printf("\n|---:|---:|");
  for (std::size_t i = 0; i < heuristics.size(); ++i) std::printf("---:|");
  std::printf("\n");
  for (std::uint64_t b : budgets) {
    const double optimum = revolve_recomputations(n, static_cast<int>(b) - 3);
    std::printf("| %llu | %.0f |", static_cast<unsigned long long>(b), optimum);
    for (const std::string& h : heuristics) {
      const Outcome o = run_chain(n, b, h, passes);
      if (o.feasible && !o.thrashed && optimum > 0) {
        std::printf(" %s (%.2f) |", cell(o).c_str(), static_cast<double>(o.recomputations) / optimum);
      } else {
        std::printf(" %s |", cell(o).c_str());
      }
    }
    std::printf("\n");
    std::fflush(stdout);
  }
}

// The fewest recomputations that reverse `length` chain values (x_a .. x_{a+length-1}, read last to first)
// from a stored x_a with `slots` more free: Revolve's count with the stored value's slot, plus the first
// sweep, which a segment reversed after the forward pays again.
double reversal_optimum(int length, int slots) {
  if (length <= 1) return 0;
  return revolve_recomputations(length, std::max(slots, 0) + 1) + (length - 1);
}

void placement_table(int n, int passes, const std::vector<std::uint64_t>& budgets,
                     const std::vector<std::string>& heuristics) {
  std::printf("\n### Unit chain, N = %d: the forward's checkpoints and the reversal\n\nPer budget and heuristic: the "
              "pass's recomputations; had it reversed optimally from the checkpoints its forward left (Revolve's "
              "count per segment); Revolve's optimum; the checkpoints (x_0 aside) and the first gaps between them, "
              "from x_0.\n\n",
              n);
  std::printf("| budget (tensors) | heuristic | recomputations | optimal from its checkpoints | Revolve | "
              "checkpoints | first gaps |\n|---:|---|---:|---:|---:|---:|---|\n");
  for (std::uint64_t b : budgets) {
    const double optimum = revolve_recomputations(n, static_cast<int>(b) - 3);
    for (const std::string& h : heuristics) {
      std::vector<int> checkpoints;
      const Outcome o = run_chain(n, b, h, passes, &checkpoints);
      if (!o.feasible || o.thrashed) {
        std::printf("| %llu | %s | %s | | %.0f | | |\n", static_cast<unsigned long long>(b), h.c_str(), cell(o).c_str(),
                    optimum);
        continue;
      }
      std::vector<int> bounds = {0};
      bounds.insert(bounds.end(), checkpoints.begin(), checkpoints.end());
      bounds.push_back(n);
      double from_checkpoints = 0;
      for (std::size_t k = 0; k + 1 < bounds.size(); ++k) {
        from_checkpoints += reversal_optimum(bounds[k + 1] - bounds[k], static_cast<int>(b) - 4 - static_cast<int>(k));
      }
      std::string gaps;
      for (std::size_t k = 0; k + 1 < bounds.size() && k < 6; ++k) {
        gaps += (gaps.empty() ? "" : ", ") + std::to_string(bounds[k + 1] - bounds[k]);
      }
      std::printf("| %llu | %s | %llu (%.2f) | %.0f (%.2f) | %.0f | %zu | %s |\n", static_cast<unsigned long long>(b),
                  h.c_str(), static_cast<unsigned long long>(o.recomputations),
                  static_cast<double>(o.recomputations) / optimum, from_checkpoints, from_checkpoints / optimum,
                  optimum, checkpoints.size(), gaps.c_str());
      std::fflush(stdout);
    }
  }
}

// A Markdown table's header: the first column, then one right-aligned column per heuristic.
void print_header(const char* first, const std::vector<std::string>& heuristics) {
  std::printf("| %s |", first);
  for (const std::string& h : heuristics) std::printf(" %s |", h.c_str());
  std::printf("\n|---:|");
  for (std::size_t i = 0; i < heuristics.size(); ++i) std::printf("---:|");
  std::printf("\n");
}

void dag_tables(int dags, int steps, const std::vector<std::string>& heuristics) {
  const std::vector<double> ratios = {0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.7, 1.0};
  for (int d = 1; d <= dags; ++d) {
    const auto seed = static_cast<std::uint64_t>(d);
    const Outcome unbudgeted = run_dag(seed, steps, std::nullopt, "dtr-eq");
    std::printf("\n### Random DAG %d (%d forward steps; unbudgeted peak %llu KiB)\n\nRecomputations per budget "
                "(fraction of the unbudgeted peak).\n\n",
                d, steps, static_cast<unsigned long long>(unbudgeted.peak_resident / 1024));
    print_header("budget", heuristics);
    for (double r : ratios) {
      const auto budget = static_cast<std::uint64_t>(r * static_cast<double>(unbudgeted.peak_resident));
      std::printf("| %.2f |", r);
      for (const std::string& h : heuristics) std::printf(" %s |", cell(run_dag(seed, steps, budget, h)).c_str());
      std::printf("\n");
      std::fflush(stdout);
    }
  }
}

// Under device budgets (the allocator's reserved bytes, fragmentation included), tensors of 1 to 16 KiB: the
// fragmentation-aware heuristics next to their bases.
void device_tables(int dags, int steps, const std::vector<std::string>& heuristics) {
  const std::vector<double> ratios = {0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.7};
  constexpr std::uint64_t kMaxKiB = 16;
  for (int d = 1; d <= dags; ++d) {
    const auto seed = static_cast<std::uint64_t>(100 + d);
    const Outcome unbudgeted =
        run_dag(seed, steps, std::nullopt, "dtr-eq", dtr::BudgetMode::device, kMaxKiB);
    std::printf("\n### Device budget, random DAG %d (%d forward steps, tensors of 1-16 KiB; unbudgeted peak %llu KiB "
                "reserved, %llu KiB resident)\n\nRecomputations per budget (fraction of the unbudgeted reserved "
                "peak).\n\n",
                d, steps, static_cast<unsigned long long>(unbudgeted.peak_reserved / 1024),
                static_cast<unsigned long long>(unbudgeted.peak_resident / 1024));
    print_header("budget", heuristics);
    for (double r : ratios) {
      const auto budget = static_cast<std::uint64_t>(r * static_cast<double>(unbudgeted.peak_reserved));
      std::printf("| %.2f |", r);
      for (const std::string& h : heuristics) {
        std::printf(" %s |", cell(run_dag(seed, steps, budget, h, dtr::BudgetMode::device, kMaxKiB)).c_str());
      }
      std::printf("\n");
      std::fflush(stdout);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Recomputations per eviction heuristic: the unit chain against Revolve, and random DAGs"};
  std::vector<int> chains = {1600, 10000};
  int chain_passes = 1;
  int dags = 4;
  int device_dags = 2;
  int steps = 400;
  std::vector<std::uint64_t> placements;
  std::vector<std::string> heuristics = dtr::heuristics::heuristic_names();
  std::vector<std::string> device_heuristics = {"dtr", "dtr+window", "dtr-eq", "dtr-eq+window", "dtr-local", "window",
                                                "lru", "lru+window"};
  app.add_option("--chain", chains, "chain lengths")->check(CLI::PositiveNumber);
  app.add_option("--chain-passes", chain_passes,
                 "forward and backward passes of each chain, as training repeats its step; the last is counted")
      ->check(CLI::Range(1, 100));
  app.add_option("--placement", placements,
                 "budgets (tensors) at which to show each chain's forward checkpoints and what reversing from them "
                 "costs against Revolve")
      ->check(CLI::Range(5, 1 << 30));
  app.add_option("--dags", dags, "number of random DAGs (bytes budgets)")->check(CLI::NonNegativeNumber);
  app.add_option("--device-dags", device_dags, "number of random DAGs under device budgets")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--steps", steps, "forward steps per random DAG")->check(CLI::PositiveNumber);
  app.add_option("--heuristic", heuristics, "heuristics for the chains and bytes-budget DAGs");
  app.add_option("--device-heuristic", device_heuristics, "heuristics for the device-budget DAGs");
  CLI11_PARSE(app, argc, argv);
  try {
    for (const std::string& h : heuristics) dtr::heuristics::make_heuristic(h, "--heuristic");
    for (const std::string& h : device_heuristics) dtr::heuristics::make_heuristic(h, "--device-heuristic");
  } catch (const dtr::ConfigError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  // Under bytes budgets nothing is fragmented: a window heuristic decides as its base does.
  std::erase_if(heuristics, [](const std::string& h) {
    return dtr::heuristics::make_heuristic(h)->fragmentation_aware();
  });
  for (int n : chains) chain_table(n, chain_passes, heuristics);
  if (!placements.empty()) {
    for (int n : chains) placement_table(n, chain_passes, placements, heuristics);
  }
  dag_tables(dags, steps, heuristics);
  device_tables(device_dags, steps, device_heuristics);
  return 0;
}
