// dtr-alloc-demo: the allocation pattern of a training step (forward activations kept for the backward pass,
// gradients, workspaces) replayed through the caching allocator, first without a budget and then under
// budgets below that run's peak. A toy reclaimer stands in for the runtime: it frees the least recently used
// activation when the allocator asks for room, and the backward pass allocates it again when it needs it
// (where the real runtime will recompute it). Prints what the allocator held and did in each run.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <list>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "dtr/dtr.h"

namespace {

struct Network {
  std::vector<std::size_t> activation_bytes;  // one per layer
  std::size_t workspace_bytes = 0;
};

Network make_network(int layers, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::size_t> mib(1, 8);
  Network net;
  for (int i = 0; i < layers; ++i) net.activation_bytes.push_back(mib(rng) << 20);
  net.workspace_bytes = 256u << 10;
  return net;
}

// Frees resident, unpinned activations, least recently used first.
class ToyReclaimer final : public dtr::Reclaimer {
 public:
  ToyReclaimer(dtr::CachingAllocator& alloc, const Network& net)
      : alloc_(alloc), net_(net), blocks_(net.activation_bytes.size(), nullptr) {}

  void* get(std::size_t layer) {  // resident after the call; reallocated if it was evicted
    if (blocks_[layer] == nullptr) {
      pinned_ = layer;
      blocks_[layer] = alloc_.allocate(net_.activation_bytes[layer]);
      pinned_.reset();
      if (produced_[layer]) ++reallocations;
      produced_[layer] = true;
    }
    forget(layer);
    where_[layer] = lru_.insert(lru_.end(), layer);
    return blocks_[layer];
  }
  void release(std::size_t layer) {
    forget(layer);
    alloc_.free(blocks_[layer]);
    blocks_[layer] = nullptr;
  }
  void pin(std::optional<std::size_t> layer) { pinned_ = layer; }
  // A new step computes new activations: allocating them again is not a re-allocation.
  void new_step() { std::fill(produced_.begin(), produced_.end(), false); }

  std::size_t reclaim(const dtr::ReclaimRequest&) override {
    for (auto it = lru_.begin(); it != lru_.end(); ++it) {
      if (pinned_ && *it == *pinned_) continue;
      const std::size_t victim = *it;
      forget(victim);
      alloc_.free(blocks_[victim]);
      blocks_[victim] = nullptr;
      ++evictions;
      return net_.activation_bytes[victim];
    }
    return 0;
  }

  int evictions = 0;
  int reallocations = 0;

 private:
  dtr::CachingAllocator& alloc_;
  const Network& net_;
  std::vector<void*> blocks_;
  std::vector<bool> produced_ = std::vector<bool>(blocks_.size(), false);
  std::list<std::size_t> lru_;
  // Each layer's place in lru_ (lru_.end(): not in it), so that a use moves it in O(1): a list search made
  // --layers 100000 quadratic.
  std::vector<std::list<std::size_t>::iterator> where_ = std::vector<std::list<std::size_t>::iterator>(blocks_.size(), lru_.end());
  std::optional<std::size_t> pinned_;

  void forget(std::size_t layer) {
    if (where_[layer] == lru_.end()) return;
    lru_.erase(where_[layer]);
    where_[layer] = lru_.end();
  }
};

// One forward and backward pass; throws dtr::OutOfMemory if the budget cannot hold it.
void train_step(dtr::CachingAllocator& alloc, ToyReclaimer& acts, const Network& net) {
  const std::size_t layers = net.activation_bytes.size();
  acts.new_step();
  for (std::size_t i = 0; i < layers; ++i) {
    if (i > 0) acts.get(i - 1);  // the layer reads its input
    acts.pin(i > 0 ? std::optional(i - 1) : std::nullopt);
    alloc.free(alloc.allocate(net.workspace_bytes));
    acts.get(i);
    acts.pin(std::nullopt);
  }
  void* grad = alloc.allocate(net.activation_bytes[layers - 1]);
  for (std::size_t i = layers; i-- > 0;) {
    acts.get(i);
    acts.pin(i);
    void* grad_in = alloc.allocate(net.activation_bytes[i > 0 ? i - 1 : 0]);
    alloc.free(grad);
    grad = grad_in;
    acts.release(i);
    acts.pin(std::nullopt);
  }
  alloc.free(grad);
}

struct RunResult {
  bool feasible = true;
  int evictions = 0;
  int reallocations = 0;
  dtr::AllocatorStats stats;
  std::string error;
};

RunResult run(dtr::MemoryResource& device, std::optional<std::uint64_t> budget, const Network& net, int steps) {
  dtr::CachingAllocatorOptions options;
  options.budget_bytes = budget;
  dtr::CachingAllocator alloc(device, options);
  RunResult result;
  {
    ToyReclaimer acts(alloc, net);
    alloc.set_reclaimer(&acts);
    try {
      for (int s = 0; s < steps; ++s) train_step(alloc, acts, net);
    } catch (const dtr::OutOfMemory& e) {
      result.feasible = false;
      result.error = e.what();
    }
    alloc.set_reclaimer(nullptr);
    result.evictions = acts.evictions;
    result.reallocations = acts.reallocations;
  }
  result.stats = alloc.stats();
  return result;
}

double mib(std::uint64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

std::string ratio_label(double ratio) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2fx", ratio);
  return text;
}

std::string fmt_mib(std::uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", mib(bytes));
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dtr-alloc-demo: a training step's allocations through dtr's caching allocator under budgets"};
  int layers = 32;
  int steps = 3;
  std::vector<double> ratios = {1.0, 0.75, 0.5, 0.35, 0.25};
  std::string budget_text;
  std::string device_text;
  bool json = false;
  app.add_option("--layers", layers, "layers in the toy network")->check(CLI::Range(2, 100000));
  app.add_option("--steps", steps, "training steps per run")->check(CLI::Range(1, 1000));
  app.add_option("--ratios", ratios, "budgets as fractions of the unbudgeted peak")->check(CLI::Range(0.01, 10.0));
  app.add_option("--budget", budget_text, "one budget instead of --ratios (DTR_MEMORY_BUDGET forms: 64MiB, 60%)");
  app.add_option("--device", device_text, "cpu, cuda or cuda:N (default: DTR_DEVICE, else a GPU if present)");
  app.add_flag("--json", json, "print the last run's allocator stats as JSON");
  CLI11_PARSE(app, argc, argv);

  try {
    const dtr::Device device = device_text.empty() ? dtr::default_device() : dtr::parse_device(device_text, "--device");
    auto resource = device.kind == dtr::DeviceKind::cuda ? dtr::make_cuda_resource(device.index)
                                                         : dtr::make_host_resource();
    const Network net = make_network(layers, 2021);
    std::printf("dtr %s on %s: %d layers, %d step(s)\n\n", DTR_VERSION_STRING, resource->name().c_str(), layers,
                steps);

    const RunResult baseline = run(*resource, std::nullopt, net, steps);
    const std::uint64_t peak = baseline.stats.reserved_bytes.peak;
    std::vector<std::pair<std::string, std::optional<std::uint64_t>>> budgets = {{"none", std::nullopt}};
    if (!budget_text.empty()) {
      budgets.emplace_back(budget_text, dtr::parse_memory_budget(budget_text, resource->capacity(), "--budget"));
    } else {
      for (double r : ratios) {
        budgets.emplace_back(ratio_label(r), static_cast<std::uint64_t>(r * double(peak)));
      }
    }

    std::printf("%-8s %12s %14s %15s %10s %10s %14s %14s\n", "budget", "budget MiB", "peak reserved",
                "peak allocated", "evictions", "re-allocs", "peak frag.", "device allocs");
    RunResult last;
    std::string first_error;
    for (const auto& [label, bytes] : budgets) {
      last = bytes ? run(*resource, bytes, net, steps) : baseline;
      const auto& s = last.stats;
      if (!last.feasible) {
        std::printf("%-8s %12.1f %14s\n", label.c_str(), mib(*bytes), "out of memory");
        if (first_error.empty()) first_error = last.error;
        continue;
      }
      std::printf("%-8s %12s %14.1f %15.1f %10d %10d %13.1f%% %14llu\n", label.c_str(),
                  bytes ? fmt_mib(*bytes).c_str() : "-", mib(s.reserved_bytes.peak),
                  mib(s.allocated_bytes.peak), last.evictions, last.reallocations, 100.0 * s.peak_fragmentation,
                  static_cast<unsigned long long>(s.num_device_allocations));
    }
    std::printf("\nPeak reserved never passes the budget: the budget caps the bytes held from the device.\n");
    if (!first_error.empty()) std::printf("\nThe first run that did not fit said:\n%s\n", first_error.c_str());
    if (json) std::printf("\n%s\n", dtr::to_json(last.stats).c_str());
  } catch (const dtr::Error& e) {
    std::fprintf(stderr, "dtr-alloc-demo: %s\n", e.what());
    return 2;
  }
  return 0;
}
