// What a training step pays for the runtime: one step of a zoo model (forward, backward, momentum SGD) through
// dtr::Runtime with no budget, against the same kernels called directly on buffers of their own. The direct
// program is the step itself, recorded once through Config::kernel_observer (every kernel with its op,
// attributes, seed, shapes and storages) and replayed with an allocator that only recycles freed buffers of the
// same size: no autograd, no lineage, no caching allocator. A first replay checks that every kernel writes the
// bits it wrote in the recorded step, so both sides do the same work. Rounds alternate the two and report the
// median of the per-round ratios (issue 14: bookkeeping at most 2% of the step on ResNet-32 and the
// Transformer, batch 128). Numbers: docs/results/training-step.md; how to run: docs/benchmarks.md.
#include <CLI/CLI.hpp>
#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench_main.h"
#include "dtr/dtr.h"
#include "dtr/nn/functional.h"
#include "dtr/nn/models.h"
#include "dtr/nn/optim.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

long minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

struct ModelChoice {
  std::string name;
  std::int64_t batch = 128;
  std::int64_t depth = 0;  // 0: the model's default
};

std::shared_ptr<dtr::nn::Sequential> build(dtr::Runtime& rt, const ModelChoice& m) {
  dtr::nn::Generator init(1);
  if (m.name == "resnet") return dtr::nn::make_resnet(rt, init, {.depth = m.depth > 0 ? m.depth : 32});
  if (m.name == "transformer") {
    return dtr::nn::make_transformer(rt, init, {.depth = m.depth > 0 ? m.depth : 4});
  }
  if (m.name == "mlp") return dtr::nn::make_mlp(rt, init, {.width = 1024, .depth = m.depth > 0 ? m.depth : 8});
  if (m.name == "lstm") return dtr::nn::make_lstm(rt, init, {.hidden = 256, .layers = m.depth > 0 ? m.depth : 2});
  if (m.name == "unet") return dtr::nn::make_unet(rt, init, {});
  if (m.name == "densenet") return dtr::nn::make_densenet(rt, init, {.layers = m.depth > 0 ? m.depth : 6});
  DTR_THROW(dtr::InvalidArgument, "dtr-bench-train-step: no model '", m.name, "'");
}

// Where a step's time outside its kernels goes: its three phases, each with its wall time, the runtime's
// measured kernel time and the ops the program called.
struct Phase {
  double seconds = 0;
  double kernel_seconds = 0;
  std::uint64_t ops = 0;
};
constexpr std::size_t kPhases = 3;
constexpr const char* kPhaseNames[kPhases] = {"forward and loss", "backward", "optimizer"};
using Phases = std::array<Phase, kPhases>;

// One model's training step in a runtime: a fixed batch, cross-entropy, momentum SGD.
class Trainer {
 public:
  Trainer(const ModelChoice& m, dtr::Config config) : rt_(std::move(config)), model_(build(rt_, m)) {
    model_->train();
    optimizer_ = std::make_unique<dtr::nn::SGD>(model_->parameters(), dtr::nn::SGDOptions{.lr = 0.01, .momentum = 0.9});
    dtr::nn::Generator data(2);
    std::vector<float> pixels(static_cast<std::size_t>(m.batch * 28 * 28));
    for (float& v : pixels) v = static_cast<float>(data.uniform());
    std::vector<std::int64_t> labels(static_cast<std::size_t>(m.batch));
    for (std::int64_t& l : labels) l = static_cast<std::int64_t>(data.uniform() * 10);
    x_ = dtr::nn::constant(rt_, {m.batch, 1, 28, 28}, pixels);
    y_ = dtr::nn::Variable(rt_, rt_.constant(dtr::TensorMeta{{m.batch}, dtr::DType::int64}, labels));
  }

  // Gradients are dropped (set_to_none), not zeroed: zeroing is work the direct replay would not do.
  float step() {
    optimizer_->zero_grad(/*set_to_none=*/true);
    start_bytes_ = rt_.resident_bytes();
    begin_phase();
    const dtr::nn::Variable loss = dtr::nn::cross_entropy(model_->forward(x_), y_);
    end_phase(0);
    saved_bytes_ = rt_.resident_bytes() - start_bytes_;
    begin_phase();
    loss.backward();
    end_phase(1);
    begin_phase();
    optimizer_->step();
    const float value = loss.to_host()[0];
    end_phase(2);
    return value;
  }
  // Of the last step.
  const Phases& phases() const { return phases_; }

  dtr::Runtime& runtime() { return rt_; }
  // Of the last step: what was resident when it began (parameters, momentum, the batch), and what its forward
  // added (the activations autograd saved, and the loss).
  std::uint64_t start_bytes() const { return start_bytes_; }
  std::uint64_t saved_bytes() const { return saved_bytes_; }

 private:
  dtr::Runtime rt_;
  std::shared_ptr<dtr::nn::Sequential> model_;
  std::unique_ptr<dtr::nn::SGD> optimizer_;
  dtr::nn::Variable x_;
  dtr::nn::Variable y_;
  std::uint64_t start_bytes_ = 0;
  std::uint64_t saved_bytes_ = 0;
  Phases phases_{};
  Clock::time_point phase_start_{};
  double phase_kernels_ = 0;
  std::uint64_t phase_ops_ = 0;

  void begin_phase() {
    phase_kernels_ = rt_.stats().base_compute;
    phase_ops_ = rt_.stats().ops;
    phase_start_ = Clock::now();
  }
  void end_phase(std::size_t i) {
    const double seconds = seconds_since(phase_start_);
    phases_[i] = Phase{seconds, (rt_.stats().base_compute - phase_kernels_) * 1e-9, rt_.stats().ops - phase_ops_};
  }
};

// FNV-1a over a buffer: the replay's outputs against the recorded step's.
std::uint64_t hash_bytes(const void* data, std::size_t bytes) {
  std::uint64_t h = 1469598103934665603ull;
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// A training step's kernels, recorded from the runtime and replayed without it.
class RecordedStep {
 public:
  // Config::kernel_observer: called for each kernel run of the recorded step.
  void observe(const dtr::KernelRun& run) {
    if (run.op == nullptr || run.rematerialization) {
      DTR_THROW(dtr::InvalidArgument, "dtr-bench-train-step: the step ran '", run.name,
                run.op == nullptr ? "', not an op of the table" : "' again (a recomputation)");
    }
    Kernel k{run.op, run.args.attrs, run.args.seed, {}, {}, {}, {}, {}, {}};
    const std::size_t index = kernels_.size();
    for (std::size_t i = 0; i < run.args.inputs.size(); ++i) {
      const dtr::TensorMeta& meta = run.args.input_meta[i];
      const std::size_t offset = run.input_offsets[i] * dtr::element_size(meta.dtype);
      Buffer& b = buffer(run.input_storages[i]);
      if (b.first_write < 0) {
        // A constant (parameters, the batch, the optimizer's state): its value, read from the runtime's buffer.
        const auto* base = static_cast<const std::byte*>(run.args.inputs[i]) - offset;
        if (offset + meta.nbytes() > b.initial.size()) b.initial.assign(base, base + offset + meta.nbytes());
        b.bytes = std::max(b.bytes, offset + meta.nbytes());
      }
      b.last_use = index;
      k.in_meta.push_back(meta);
      k.inputs.push_back(index_of(run.input_storages[i]));
      k.in_offsets.push_back(offset);
    }
    for (std::size_t i = 0; i < run.args.outputs.size(); ++i) {
      const dtr::TensorMeta& meta = run.args.output_meta[i];
      Buffer& b = buffer(run.output_storages[i]);
      b.first_write = static_cast<std::int64_t>(index);
      b.bytes = meta.nbytes();
      b.address = reinterpret_cast<std::uintptr_t>(run.args.outputs[i]);
      b.last_use = index;
      k.out_meta.push_back(meta);
      k.outputs.push_back(index_of(run.output_storages[i]));
      k.out_hashes.push_back(hash_bytes(run.args.outputs[i], meta.nbytes()));
    }
    kernels_.push_back(std::move(k));
  }

  // After the recording: when each buffer is allocated and freed in the replay, and, with `same_addresses`,
  // where: each buffer the step wrote goes where the runtime's allocator put it (its offset within an arena
  // that spans each run of overlapping buffers, on the same offset within a page), so the kernels meet the
  // caches as they met them in the runtime; else each comes from a pool of freed buffers of its size.
  void plan(bool same_addresses) {
    allocate_before_.assign(kernels_.size(), {});
    free_after_.assign(kernels_.size(), {});
    for (std::size_t id = 0; id < buffers_.size(); ++id) {
      const Buffer& b = buffers_[id];
      if (b.first_write < 0) continue;  // constants live through the replay
      allocate_before_[static_cast<std::size_t>(b.first_write)].push_back(id);
      free_after_[b.last_use].push_back(id);
    }
    if (same_addresses) place_as_recorded();
  }

  std::size_t kernels() const { return kernels_.size(); }
  // Of the last replay: the sum of its kernels' times.
  double kernel_seconds() const { return kernel_seconds_; }

  // The step's kernels on buffers of their own. With `verify`, each output is compared with the recorded bits;
  // returns how many differed. Each kernel is timed as the runtime times it (kernel_seconds()), so that both
  // sides' time outside their kernels can be compared.
  std::size_t replay(bool verify) {
    kernel_seconds_ = 0;
    if (constants_.empty()) {
      for (const Buffer& b : buffers_) {
        constants_.push_back(b.first_write < 0 ? allocate(b.bytes) : nullptr);
        if (b.first_write < 0 && !b.initial.empty()) std::memcpy(constants_.back(), b.initial.data(), b.initial.size());
      }
      live_ = constants_;
    }
    std::size_t differing = 0;
    std::vector<const void*> in;
    std::vector<void*> out;
    for (std::size_t k = 0; k < kernels_.size(); ++k) {
      const Kernel& kernel = kernels_[k];
      for (std::size_t id : allocate_before_[k]) {
        live_[id] = placed_.empty() ? allocate(buffers_[id].bytes) : placed_[id];
      }
      in.clear();
      out.clear();
      for (std::size_t i = 0; i < kernel.inputs.size(); ++i) {
        in.push_back(static_cast<const std::byte*>(live_[kernel.inputs[i]]) + kernel.in_offsets[i]);
      }
      for (std::size_t id : kernel.outputs) out.push_back(live_[id]);
      workspace_.next = 0;
      const auto start = Clock::now();
      kernel.op->cpu_kernel(dtr::KernelArgs{kernel.in_meta, in, kernel.out_meta, out, kernel.attrs, kernel.seed,
                                            &workspace_});
      kernel_seconds_ += seconds_since(start);
      if (verify) {
        for (std::size_t i = 0; i < out.size(); ++i) {
          differing += hash_bytes(out[i], kernel.out_meta[i].nbytes()) != kernel.out_hashes[i] ? 1 : 0;
        }
      }
      for (std::size_t id : free_after_[k]) {
        if (placed_.empty()) release(live_[id], buffers_[id].bytes);
        live_[id] = nullptr;
      }
    }
    return differing;
  }

  ~RecordedStep() {
    for (void* p : constants_) ::operator delete(p, std::align_val_t{64});
    for (auto& [bytes, list] : free_) {
      for (void* p : list) ::operator delete(p, std::align_val_t{64});
    }
    for (void* p : arenas_) ::operator delete(p, std::align_val_t{kPage});
  }

 private:
  struct Kernel {
    const dtr::OpDef* op;
    dtr::Attrs attrs;
    std::uint64_t seed;
    std::vector<dtr::TensorMeta> in_meta;
    std::vector<std::size_t> inputs;      // buffer indices
    std::vector<std::size_t> in_offsets;  // bytes into the buffer
    std::vector<dtr::TensorMeta> out_meta;
    std::vector<std::size_t> outputs;
    std::vector<std::uint64_t> out_hashes;
  };
  struct Buffer {
    std::size_t bytes = 0;
    std::int64_t first_write = -1;  // the kernel that first writes it; -1: a constant
    std::size_t last_use = 0;
    std::vector<std::byte> initial;  // a constant's value
    std::uintptr_t address = 0;      // where the recorded step wrote it (a buffer the step made)
  };
  static constexpr std::size_t kPage = 4096;
  // Scratch memory for a kernel: the i-th request of a kernel gets the i-th buffer, grown as needed.
  struct ReplayWorkspace final : dtr::Workspace {
    void* get(std::size_t bytes) override {
      if (next == buffers.size()) buffers.emplace_back();
      std::vector<std::byte>& b = buffers[next++];
      if (b.size() < bytes) b.resize(bytes);
      return b.data();
    }
    std::vector<std::vector<std::byte>> buffers;
    std::size_t next = 0;
  };

  std::size_t index_of(std::uint64_t storage) {
    const auto [it, added] = ids_.try_emplace(storage, buffers_.size());
    if (added) buffers_.emplace_back();
    return it->second;
  }
  Buffer& buffer(std::uint64_t storage) { return buffers_[index_of(storage)]; }

  // Freed buffers are kept by size and handed out again: the direct program's whole allocator.
  void* allocate(std::size_t bytes) {
    auto& list = free_[bytes];
    if (!list.empty()) {
      void* p = list.back();
      list.pop_back();
      return p;
    }
    return ::operator new(std::max<std::size_t>(bytes, 1), std::align_val_t{64});
  }
  void release(void* p, std::size_t bytes) { free_[bytes].push_back(p); }

  // The recorded addresses of the step's own buffers, sorted, cut into runs that overlap or touch; one arena a
  // run. Buffers that shared memory at different times in the runtime share it in the replay.
  void place_as_recorded() {
    std::vector<std::size_t> order;
    for (std::size_t id = 0; id < buffers_.size(); ++id) {
      if (buffers_[id].first_write >= 0) order.push_back(id);
    }
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return buffers_[a].address < buffers_[b].address;
    });
    placed_.assign(buffers_.size(), nullptr);
    for (std::size_t first = 0; first < order.size();) {
      const std::uintptr_t start = buffers_[order[first]].address / kPage * kPage;
      std::uintptr_t end = 0;
      std::size_t last = first;
      for (; last < order.size() && (last == first || buffers_[order[last]].address <= end); ++last) {
        const Buffer& b = buffers_[order[last]];
        end = std::max<std::uintptr_t>(end, b.address + std::max<std::size_t>(b.bytes, 1));
      }
      auto* arena = static_cast<std::byte*>(::operator new((end - start + kPage - 1) / kPage * kPage,
                                                           std::align_val_t{kPage}));
      arenas_.push_back(arena);
      for (std::size_t i = first; i < last; ++i) placed_[order[i]] = arena + (buffers_[order[i]].address - start);
      first = last;
    }
  }

  std::vector<Kernel> kernels_;
  std::vector<Buffer> buffers_;
  std::unordered_map<std::uint64_t, std::size_t> ids_;
  std::vector<std::vector<std::size_t>> allocate_before_;
  std::vector<std::vector<std::size_t>> free_after_;
  std::vector<void*> constants_;
  std::vector<void*> live_;
  std::unordered_map<std::size_t, std::vector<void*>> free_;
  std::vector<void*> placed_;  // per buffer with same_addresses; empty: the size pools
  std::vector<void*> arenas_;
  ReplayWorkspace workspace_;
  double kernel_seconds_ = 0;
};

struct Result {
  std::string model;
  std::int64_t batch = 0;
  std::size_t kernels = 0;
  std::size_t differing = 0;
  double runtime_s = 0;       // median step time through the runtime
  double direct_s = 0;        // median step time of the direct replay
  double bookkeeping = 0;     // median over rounds of (runtime - direct) / runtime
  double outside_kernels = 0; // median over rounds of (step - the runtime's measured kernel time) / step
  // Median over rounds of (runtime's time outside its kernels - the direct replay's) / runtime step: the
  // bookkeeping without the kernels' own run-to-run spread.
  double outside_difference = 0;
  std::uint64_t start_bytes = 0;  // resident when a step begins
  std::uint64_t saved_bytes = 0;  // added by its forward
  std::uint64_t peak_bytes = 0;   // the runtime's peak resident bytes
  // Per phase: ops called, and the median over rounds of its time outside measured kernels (seconds).
  std::array<std::uint64_t, kPhases> phase_ops{};
  std::array<double, kPhases> phase_outside{};
};

Result measure(const ModelChoice& m, int rounds, bool same_addresses) {
  Result r{m.name, m.batch};
  // The recording runtime has the observer; the timed one has none, as users run it.
  RecordedStep recorded;
  {
    bool recording = false;
    dtr::Config config;
    config.kernel_observer = [&](const dtr::KernelRun& run) {
      if (recording) recorded.observe(run);
    };
    Trainer once(m, config);
    // The first step creates the optimizer's state; the second is the steady one, recorded.
    once.step();
    recording = true;
    once.step();
  }
  recorded.plan(same_addresses);
  r.kernels = recorded.kernels();
  r.differing = recorded.replay(/*verify=*/true);

  // Every kernel timed (not only each signature's first runs): the step's time outside its kernels subtracts
  // this step's own kernel times.
  dtr::Config timed_config;
  timed_config.timed_runs = std::nullopt;
  Trainer trainer(m, timed_config);
  trainer.step();
  trainer.step();
  std::vector<double> runtime_times, direct_times, ratios, outside, outside_difference;
  std::array<std::vector<double>, kPhases> phase_outside;
  for (int round = 0; round < rounds; ++round) {
    // The order alternates, so that a drift of the machine's speed within a round favours neither side.
    double direct = 0;
    double direct_outside = 0;
    long direct_faults = 0;
    const auto run_direct = [&] {
      const long before = minor_faults();
      const auto start = Clock::now();
      recorded.replay(false);
      direct = seconds_since(start);
      direct_outside = direct - recorded.kernel_seconds();
      direct_faults = minor_faults() - before;
    };
    if (round % 2 == 1) run_direct();
    const double kernels_before = trainer.runtime().stats().base_compute;
    const long faults_before = minor_faults();
    const auto start = Clock::now();
    trainer.step();
    const double through = seconds_since(start);
    const long runtime_faults = minor_faults() - faults_before;
    const double kernel_s = (trainer.runtime().stats().base_compute - kernels_before) * 1e-9;
    if (round % 2 == 0) run_direct();
    runtime_times.push_back(through);
    direct_times.push_back(direct);
    ratios.push_back((through - direct) / through);
    outside.push_back((through - kernel_s) / through);
    outside_difference.push_back((through - kernel_s - direct_outside) / through);
    for (std::size_t i = 0; i < kPhases; ++i) {
      const Phase& phase = trainer.phases()[i];
      phase_outside[i].push_back(phase.seconds - phase.kernel_seconds);
      r.phase_ops[i] = phase.ops;
    }
    std::printf("  %s round %d: runtime %.1f ms (%ld page faults), direct %.1f ms (%ld), bookkeeping %+.2f%%, "
                "outside kernels %.2f%% (direct's %.2f%%)\n", m.name.c_str(), round + 1, through * 1e3, runtime_faults,
                direct * 1e3, direct_faults, 100 * ratios.back(), 100 * outside.back(), 100 * direct_outside / direct);
    std::fflush(stdout);
  }
  r.start_bytes = trainer.start_bytes();
  r.saved_bytes = trainer.saved_bytes();
  r.peak_bytes = trainer.runtime().stats().peak_resident_bytes;
  r.runtime_s = dtr::bench::median(runtime_times);
  r.direct_s = dtr::bench::median(direct_times);
  r.bookkeeping = dtr::bench::median(ratios);
  r.outside_kernels = dtr::bench::median(outside);
  r.outside_difference = dtr::bench::median(outside_difference);
  for (std::size_t i = 0; i < kPhases; ++i) r.phase_outside[i] = dtr::bench::median(phase_outside[i]);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dtr-bench-train-step: a training step through the runtime (no budget) against its kernels called "
               "directly"};
  std::vector<std::string> models{"resnet", "transformer"};
  std::int64_t batch = 128;
  std::int64_t depth = 0;
  int rounds = 7;
  app.add_option("--model", models, "zoo models (resnet, transformer, mlp, lstm, unet, densenet)")->capture_default_str();
  app.add_option("--batch", batch, "batch size")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--depth", depth, "the model's depth (0: ResNet-32, a 4-layer Transformer, ...)")->capture_default_str();
  app.add_option("--rounds", rounds, "paired rounds (runtime step, then direct step)")->capture_default_str()->check(CLI::PositiveNumber);
  std::string placement = "recorded";
  app.add_option("--direct-buffers", placement,
                 "where the direct replay puts the buffers the step writes: where the runtime put them (recorded), "
                 "or in pools of freed buffers of each size (pools)")
      ->capture_default_str()
      ->check(CLI::IsMember({"recorded", "pools"}));
  int profile_steps = 0;
  app.add_option("--profile-steps", profile_steps,
                 "only run this many steps through the runtime (under perf, say), no direct replay, no table");
  CLI11_PARSE(app, argc, argv);
  try {
    if (profile_steps > 0) {
      for (const std::string& name : models) {
        Trainer trainer({name, batch, depth}, dtr::Config{});
        for (int i = 0; i < profile_steps; ++i) trainer.step();
      }
      return 0;
    }
    std::vector<Result> results;
    for (const std::string& name : models) results.push_back(measure({name, batch, depth}, rounds, placement == "recorded"));
    std::printf("\n| model | batch | kernels | replay bitwise | runtime step (median) | direct step (median) | "
                "bookkeeping (median of rounds) | step outside measured kernels | outside kernels, runtime minus direct |\n"
                "|---|---:|---:|---|---:|---:|---:|---:|---:|\n");
    for (const Result& r : results) {
      std::printf("| %s | %lld | %zu | %s | %.1f ms | %.1f ms | %+.2f%% | %.2f%% | %+.2f%% |\n", r.model.c_str(),
                  static_cast<long long>(r.batch), r.kernels, r.differing == 0 ? "yes" : "NO", r.runtime_s * 1e3,
                  r.direct_s * 1e3, 100 * r.bookkeeping, 100 * r.outside_kernels, 100 * r.outside_difference);
    }
    std::printf("\n| model | phase | ops called | outside measured kernels (median) | per op |\n"
                "|---|---|---:|---:|---:|\n");
    for (const Result& r : results) {
      for (std::size_t i = 0; i < kPhases; ++i) {
        const double per_op = r.phase_ops[i] > 0 ? r.phase_outside[i] / static_cast<double>(r.phase_ops[i]) : 0;
        std::printf("| %s | %s | %llu | %.2f ms | %.1f us |\n", r.model.c_str(), kPhaseNames[i],
                    static_cast<unsigned long long>(r.phase_ops[i]), r.phase_outside[i] * 1e3, per_op * 1e6);
      }
    }
    std::printf("\n| model | batch | resident at a step's start | added by the forward (saved) | peak resident | peak over start |\n"
                "|---|---:|---:|---:|---:|---:|\n");
    for (const Result& r : results) {
      const auto mib = [](std::uint64_t b) { return static_cast<double>(b) / (1 << 20); };
      std::printf("| %s | %lld | %.1f MiB | %.1f MiB | %.1f MiB | %.1f MiB |\n", r.model.c_str(),
                  static_cast<long long>(r.batch), mib(r.start_bytes), mib(r.saved_bytes), mib(r.peak_bytes),
                  mib(r.peak_bytes - r.start_bytes));
    }
    return std::all_of(results.begin(), results.end(), [](const Result& r) { return r.differing == 0; }) ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
