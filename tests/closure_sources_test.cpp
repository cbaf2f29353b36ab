// Closures from any source (include/dtr/computation.h): programs whose ops are plain C++ lambdas, not the op
// table, are evicted and recomputed exactly like the op table's, under every heuristic and budget mode, also
// with their buffers straight from a memory resource that is not ours (Config::buffers).
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <utility>

#include "test_helpers.h"
#include "test_resources.h"

namespace dtr::test {
namespace {

// The second source: a computation over a lambda that writes float outputs from float inputs. It counts its
// runs, so a test sees recomputations happen.
class Lambda final : public Computation {
 public:
  using Body = std::function<void(std::span<const float* const> in, std::span<const std::int64_t> in_numel,
                                  float* out, std::int64_t out_numel)>;
  Lambda(std::string name, Body body) : name_(std::move(name)), body_(std::move(body)) {}
  std::string_view name() const override { return name_; }
  void run(const KernelArgs& args) override {
    EXPECT_TRUE(args.attrs.items().empty());  // a computation carries its own arguments
    EXPECT_EQ(args.seed, 0u);
    SmallVector<const float*, 4> in;
    SmallVector<std::int64_t, 4> numel;
    for (std::size_t i = 0; i < args.inputs.size(); ++i) {
      in.push_back(args.input<float>(i));
      numel.push_back(args.input_meta[i].numel());
    }
    body_(in, numel, args.output<float>(0), args.output_meta[0].numel());
    runs += 1;
  }
  int runs = 0;

 private:
  std::string name_;
  Body body_;
};

// y = tanh(a x + b), elementwise over x (the first input), with a and b drawn per op.
std::shared_ptr<Lambda> affine_tanh(float a, float b) {
  return std::make_shared<Lambda>("affine_tanh", [a, b](auto in, auto numel, float* out, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) out[i] = std::tanh(a * in[0][i % numel[0]] + b);
  });
}

// y = x0 * x1 + x2 ... : every input read, cycled to the output's length.
std::shared_ptr<Lambda> mix_inputs() {
  return std::make_shared<Lambda>("mix", [](auto in, auto numel, float* out, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) {
      float v = in[0][i % numel[0]];
      for (std::size_t k = 1; k < in.size(); ++k) v = k % 2 == 1 ? v * in[k][i % numel[k]] : v + in[k][i % numel[k]];
      out[i] = v;
    }
  });
}

// One tensor as an input list (GCC 12 at -O3 misreads a one-element braced vector of tensors, bug 107852).
std::span<const Tensor> one(const Tensor& t) { return {&t, 1}; }

struct Observed {
  bool feasible = true;
  std::vector<std::vector<float>> reads;
  RuntimeStats stats;
  int runs = 0;  // lambda runs, first runs and recomputations
};

// A random program of lambda ops only (one op-table op joins when `with_op_table`): a forward pass that keeps
// its values, then a backward-like pass reading them in reverse, as training does.
Observed run_lambda_program(std::uint64_t seed, Config config, std::unique_ptr<MemoryResource> memory,
                            bool with_op_table = false) {
  std::mt19937_64 rng(seed);
  Runtime rt(std::move(config), std::move(memory));
  Observed obs;
  std::vector<std::shared_ptr<Lambda>> computations;
  auto record = [&](std::shared_ptr<Lambda> c, std::vector<Tensor> inputs, std::int64_t n) {
    computations.push_back(c);
    const TensorMeta out{{n}};
    return rt.call(std::move(c), inputs, std::span<const TensorMeta>(&out, 1)).front();
  };
  try {
    std::vector<float> init(256);
    for (float& v : init) v = std::uniform_real_distribution<float>(-1, 1)(rng);
    std::vector<Tensor> forward;
    forward.push_back(rt.constant(TensorMeta{{256}}, init));
    for (int layer = 0; layer < 40; ++layer) {
      const std::int64_t n = 64 * std::uniform_int_distribution<std::int64_t>(2, 6)(rng);
      const float a = std::uniform_real_distribution<float>(0.5f, 1.5f)(rng);
      const float b = std::uniform_real_distribution<float>(-0.2f, 0.2f)(rng);
      std::vector<Tensor> inputs;
      inputs.push_back(forward.back());
      if (layer >= 3 && rng() % 3 == 0) inputs.push_back(forward[forward.size() - 3]);  // a skip connection
      forward.push_back(inputs.size() == 1 ? record(affine_tanh(a, b), inputs, n) : record(mix_inputs(), inputs, n));
      if (with_op_table && layer % 7 == 6) forward.back() = rt.call1(ops::relu(), {forward.back()});
    }
    Tensor grad = forward.back();
    for (std::size_t k = forward.size() - 1; k-- > 0;) {
      grad = record(mix_inputs(), {grad, forward[k]}, forward[k].numel());
      if (k % 10 == 0) obs.reads.push_back(grad.to_host());
    }
    obs.reads.push_back(grad.to_host());
  } catch (const OutOfMemory&) {
    obs.feasible = false;
  }
  obs.stats = rt.stats();
  for (const auto& c : computations) obs.runs += c->runs;
  return obs;
}

void expect_same(const Observed& oracle, const Observed& run) {
  ASSERT_EQ(run.reads.size(), oracle.reads.size());
  for (std::size_t i = 0; i < oracle.reads.size(); ++i) EXPECT_TRUE(bitwise_equal(run.reads[i], oracle.reads[i])) << i;
}

TEST(ClosureSources, LambdaProgramsMatchTheUnbudgetedRunUnderEveryHeuristicAndBudgetMode) {
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    const Observed oracle = run_lambda_program(seed, small_segments(Config{}), make_host_resource());
    ASSERT_TRUE(oracle.feasible);
    EXPECT_EQ(oracle.stats.rematerializations, 0u);
    for (const std::string& heuristic : heuristic_names()) {
      for (BudgetMode mode : {BudgetMode::bytes, BudgetMode::device}) {
        Config config = small_segments(Config{});
        config.heuristic = heuristic;
        config.budget_mode = mode;
        config.cost_model = CostModel::bytes;
        const std::uint64_t peak = mode == BudgetMode::bytes ? oracle.stats.peak_resident_bytes
                                                             : oracle.stats.peak_reserved_bytes;
        config.memory_budget = peak * 2 / 5;
        const Observed run = run_lambda_program(seed, config, make_host_resource());
        ASSERT_TRUE(run.feasible) << heuristic;
        SCOPED_TRACE(heuristic + (mode == BudgetMode::bytes ? " bytes" : " device"));
        expect_same(oracle, run);
        EXPECT_GT(run.stats.evictions, 0u);
        if (mode == BudgetMode::bytes) {
          EXPECT_LE(run.stats.peak_resident_bytes, *config.memory_budget);
        }
        // Recomputations ran the lambdas again: the runtime needed nothing but the Computation to replay.
        EXPECT_EQ(static_cast<std::uint64_t>(run.runs - oracle.runs), run.stats.rematerializations);
      }
    }
  }
}

TEST(ClosureSources, LambdaAndOpTableClosuresMixInOneLineage) {
  const Observed oracle = run_lambda_program(7, Config{}, make_host_resource(), /*with_op_table=*/true);
  Config config;
  config.cost_model = CostModel::bytes;  // deterministic: a measured overhead near the thrash limit would flake
  config.budget_mode = BudgetMode::bytes;
  config.memory_budget = oracle.stats.peak_resident_bytes / 3;
  const Observed run = run_lambda_program(7, config, make_host_resource(), true);
  ASSERT_TRUE(run.feasible);
  expect_same(oracle, run);
  EXPECT_GT(run.stats.rematerializations, 0u);
}

// Memory whose allocator is not ours: live blocks counted by the test, so the runtime's accounting is checked
// against what it really holds.
class ForeignMemory final : public MemoryResource {
 public:
  std::size_t capacity() const override { return std::size_t{1} << 40; }
  std::string name() const override { return "foreign"; }
  bool host_accessible() const override { return true; }
  std::optional<Device> device() const override { return Device{DeviceKind::cpu, 0}; }
  std::uint64_t live_bytes() const { return *live_; }
  std::shared_ptr<std::uint64_t> live_ = std::make_shared<std::uint64_t>(0);
  std::shared_ptr<std::uint64_t> peak_ = std::make_shared<std::uint64_t>(0);

 protected:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    void* p = ::operator new(bytes, std::align_val_t(alignment));
    sizes_[p] = {bytes, alignment};
    *live_ += bytes;
    *peak_ = std::max(*peak_, *live_);
    return p;
  }
  void do_deallocate(void* ptr, std::size_t bytes) override {
    const auto it = sizes_.find(ptr);
    ASSERT_NE(it, sizes_.end()) << "freed a pointer it does not hold";
    EXPECT_EQ(it->second.first, bytes);
    ::operator delete(ptr, std::align_val_t(it->second.second));
    *live_ -= bytes;
    sizes_.erase(it);
  }

 private:
  std::map<void*, std::pair<std::size_t, std::size_t>> sizes_;
};

TEST(ClosureSources, BuffersFromAForeignAllocatorAreAccountedInBytesMode) {
  const Observed oracle = run_lambda_program(11, Config{}, make_host_resource());
  for (const std::string& heuristic : {std::string("dtr-eq"), std::string("lru"), std::string("dtr")}) {
    Config config;
    config.heuristic = heuristic;
    config.buffers = BufferSource::memory_resource;
    config.budget_mode = BudgetMode::bytes;
    config.memory_budget = oracle.stats.peak_resident_bytes / 3;
    config.thrash_limit = std::nullopt;  // a tight budget, whatever it costs: this test is about memory
    auto foreign = std::make_unique<ForeignMemory>();
    const auto live = foreign->live_;
    const auto peak = foreign->peak_;
    const Observed run = run_lambda_program(11, config, std::move(foreign));
    ASSERT_TRUE(run.feasible) << heuristic;
    expect_same(oracle, run);
    EXPECT_GT(run.stats.evictions, 0u);
    // What the foreign allocator handed out never passed the budget, and all of it came back.
    EXPECT_LE(*peak, *config.memory_budget);
    EXPECT_EQ(*peak, run.stats.peak_resident_bytes);
    EXPECT_EQ(run.stats.peak_reserved_bytes, run.stats.peak_resident_bytes);
    EXPECT_EQ(*live, 0u);
  }
}

TEST(ClosureSources, ForeignBuffersTakeOnlyBytesBudgetsAndHaveNoCachingAllocator) {
  Config config;
  config.buffers = BufferSource::memory_resource;
  config.budget_mode = BudgetMode::device;
  config.memory_budget = 1 << 20;
  expect_error<ConfigError>([&] { Runtime rt(config, std::make_unique<ForeignMemory>()); },
                            {"Config::buffers = memory_resource", "foreign", "budget_mode to bytes"});
  config.memory_budget.reset();  // device mode without a budget caps nothing: accepted
  Runtime rt(config, std::make_unique<ForeignMemory>());
  expect_error<InvalidArgument>([&] { rt.allocator(); }, {"foreign directly", "no caching allocator"});
  const Tensor x = rt.constant(TensorMeta{{4}}, std::vector<float>{1, 2, 3, 4});
  EXPECT_EQ(rt.call1(ops::relu(), {x}).to_host(), (std::vector<float>{1, 2, 3, 4}));
}

TEST(ClosureSources, BadCallsAreClearErrors) {
  Runtime rt;
  Runtime other;
  const TensorMeta out{{4}};
  const std::span<const TensorMeta> outs(&out, 1);
  const Tensor x = rt.constant(TensorMeta{{4}}, std::vector<float>{1, 2, 3, 4});
  expect_error<InvalidArgument>([&] { rt.call(nullptr, one(x), outs); }, {"computation is null"});
  expect_error<InvalidArgument>([&] { rt.call(affine_tanh(1, 0), one(Tensor()), outs); },
                                {"op 'affine_tanh': input 0 is undefined"});
  const Tensor foreign = other.constant(TensorMeta{{4}}, std::vector<float>{1, 2, 3, 4});
  expect_error<InvalidArgument>([&] { rt.call(affine_tanh(1, 0), std::vector<Tensor>{x, foreign}, outs); },
                                {"op 'affine_tanh': input 1 belongs to another runtime"});
  // Over simulated memory a computation that touches its buffers cannot run.
  Runtime simulated(Config{}, make_simulated_resource(std::size_t{1} << 30));
  const Tensor s = simulated.constant(TensorMeta{{4}});
  expect_error<InvalidArgument>([&] { simulated.call(affine_tanh(1, 0), one(s), outs); },
                                {"op 'affine_tanh' runs a kernel", "simulated"});
}

// A source that learns its outputs' shapes by running (PyTorch's dispatcher): "keep the positive elements",
// whose output length depends on the values. run_first runs it into its own memory; run() writes the kept
// result the first time and runs it again for a recomputation.
class KeepPositive final : public Computation {
 public:
  std::string_view name() const override { return "keep_positive"; }
  TensorMetas run_first(const KernelArgs& args) override {
    EXPECT_TRUE(args.outputs.empty());
    kept_ = select(args);
    pending_ = true;
    first_runs += 1;
    return {TensorMeta{{static_cast<std::int64_t>(kept_.size())}}};
  }
  void run(const KernelArgs& args) override {
    const std::vector<float> values = pending_ ? std::exchange(kept_, {}) : select(args);
    pending_ = false;
    ASSERT_EQ(static_cast<std::int64_t>(values.size()), args.output_meta[0].numel());
    std::memcpy(args.outputs[0], values.data(), values.size() * sizeof(float));
    runs += 1;
  }
  int first_runs = 0;
  int runs = 0;

 private:
  static std::vector<float> select(const KernelArgs& args) {
    std::vector<float> out;
    for (std::int64_t i = 0; i < args.input_meta[0].numel(); ++i) {
      if (args.input<float>(0)[i] > 0) out.push_back(args.input<float>(0)[i]);
    }
    return out;
  }
  std::vector<float> kept_;
  bool pending_ = false;  // run_first's result not written yet
};

// A computation with no outputs: it only reads its input (a copy out of the runtime, a comparison).
class Sum final : public Computation {
 public:
  std::string_view name() const override { return "sum_to_host"; }
  TensorMetas run_first(const KernelArgs& args) override {
    total = 0;
    for (std::int64_t i = 0; i < args.input_meta[0].numel(); ++i) total += args.input<float>(0)[i];
    return {};
  }
  void run(const KernelArgs&) override {}
  float total = 0;
};

TEST(ClosureSources, AComputationCanSizeItsOutputsByRunning) {
  Config config;
  config.budget_mode = BudgetMode::bytes;
  config.thrash_limit = std::nullopt;
  Runtime rt(config);
  const Tensor x = rt.constant(TensorMeta{{6}}, std::vector<float>{1, -2, 3, -4, 5, 6});
  auto keep = std::make_shared<KeepPositive>();
  const Tensor y = rt.call(keep, one(x)).front();
  EXPECT_EQ(y.shape(), (Shape{4}));
  EXPECT_EQ(y.to_host(), (std::vector<float>{1, 3, 5, 6}));
  EXPECT_EQ(keep->first_runs, 1);
  EXPECT_EQ(keep->runs, 1);
  EXPECT_FALSE(y.is_constant());
  EXPECT_TRUE(x.is_constant());
  // Evicted, it is recomputed by run() alone.
  ASSERT_TRUE(rt.evict(y));
  EXPECT_EQ(y.to_host(), (std::vector<float>{1, 3, 5, 6}));
  EXPECT_EQ(keep->first_runs, 1);
  EXPECT_EQ(keep->runs, 2);
  EXPECT_EQ(rt.stats().rematerializations, 1u);
  // No outputs: it reads a recomputed input, and nothing of it stays.
  ASSERT_TRUE(rt.evict(y));
  auto sum = std::make_shared<Sum>();
  EXPECT_TRUE(rt.call(sum, one(y)).empty());
  EXPECT_FLOAT_EQ(sum->total, 15);
  EXPECT_EQ(rt.footprint().storages, 2u);
  // A computation that cannot size its outputs says so.
  expect_error<InvalidArgument>([&] { rt.call(affine_tanh(1, 0), one(x)); },
                                {"op 'affine_tanh' cannot size its outputs by running"});
  // Bytes of any dtype come in as uint8 constants.
  const std::vector<std::uint8_t> bytes{1, 2, 3};
  const Tensor b = rt.constant(TensorMeta{{3}, DType::uint8}, bytes);
  EXPECT_EQ(b.to_host_as<std::uint8_t>(), bytes);
}

TEST(ClosureSources, AComputedValueCanBecomeAConstant) {
  Config config;
  config.thrash_limit = std::nullopt;
  Runtime rt(config);
  const TensorMeta out{{8}};
  const Tensor x = rt.constant(TensorMeta{{8}}, std::vector<float>(8, 0.25f));
  auto op = affine_tanh(2, 0);
  const Tensor y = rt.call(op, one(x), std::span<const TensorMeta>(&out, 1)).front();
  ASSERT_TRUE(rt.evict(y));
  rt.make_constant(y);  // recomputed first: a constant has no producer to remake it from
  EXPECT_EQ(op->runs, 2);
  EXPECT_TRUE(y.is_constant());
  EXPECT_TRUE(y.resident());
  EXPECT_FALSE(rt.evict(y));
  EXPECT_FLOAT_EQ(y.to_host()[3], std::tanh(0.5f));
  rt.make_constant(y);  // already one: nothing to do
  EXPECT_EQ(op->runs, 2);
  expect_error<InvalidArgument>([&] { rt.make_constant(Tensor()); }, {"make_constant: the value"});
  // Through a view: the storage it views becomes the constant (remade first, with the view).
  const Tensor z = rt.call(op, one(x), std::span<const TensorMeta>(&out, 1)).front();
  const Tensor view = rt.view(z, Shape{4}, 4);
  ASSERT_TRUE(rt.evict(z));
  rt.make_constant(view);
  EXPECT_EQ(op->runs, 4);
  EXPECT_TRUE(z.is_constant());
  EXPECT_TRUE(view.is_constant());
  EXPECT_FALSE(rt.evict(z));
  EXPECT_FLOAT_EQ(view.to_host()[0], std::tanh(0.5f));
}

TEST(ClosureSources, EvictAllEvictsEveryCandidateAndNothingElse) {
  Config config;
  config.thrash_limit = std::nullopt;
  Runtime rt(config);
  const TensorMeta meta{{8}};
  const std::vector<std::shared_ptr<Lambda>> ops = {affine_tanh(2, 0), affine_tanh(3, 1)};
  std::vector<Tensor> chain = {rt.constant(meta, std::vector<float>(8, 0.25f))};
  for (const auto& op : ops) chain.push_back(rt.call(op, one(chain.back()), std::span<const TensorMeta>(&meta, 1)).front());
  EXPECT_EQ(rt.evict_all(), 2u);
  EXPECT_TRUE(chain[0].resident());  // a constant stays
  EXPECT_FALSE(chain[1].resident());
  EXPECT_FALSE(chain[2].resident());
  EXPECT_EQ(rt.stats().evictions, 0u);  // counted there are the heuristic's choices only
  EXPECT_EQ(rt.evict_all(), 0u);        // nothing left to evict
  EXPECT_FLOAT_EQ(chain[2].to_host()[0], std::tanh(3.0f * std::tanh(0.5f) + 1.0f));  // back by recomputation
  for (const auto& op : ops) EXPECT_EQ(op->runs, 2);
}

TEST(ClosureSources, PeaksStartOverFromWhatIsHeldNow) {
  Runtime rt;
  const TensorMeta out{{1024}};
  Tensor big = rt.constant(TensorMeta{{1024}}, std::vector<float>(1024, 1.0f));
  const Tensor small = rt.constant(TensorMeta{{16}}, std::vector<float>(16, 1.0f));
  EXPECT_EQ(rt.stats().peak_resident_bytes, 1040u * 4);
  big = Tensor();
  EXPECT_EQ(rt.stats().peak_resident_bytes, 1040u * 4);  // a high-water mark
  const std::uint64_t reserved = rt.allocator().stats().reserved_bytes.current;
  rt.reset_peak_stats();
  EXPECT_EQ(rt.stats().peak_resident_bytes, 16u * 4);
  EXPECT_EQ(rt.stats().peak_reserved_bytes, reserved);
  const Tensor y = rt.call(affine_tanh(1, 0), one(small), std::span<const TensorMeta>(&out, 1)).front();
  EXPECT_EQ(rt.stats().peak_resident_bytes, 1040u * 4);
}

TEST(ClosureSources, AComputationThatThrowsLeavesTheRuntimeUsable) {
  Config config;
  config.budget_mode = BudgetMode::bytes;
  config.memory_budget = 1 << 20;
  // One op recomputed once costs about its own time again, so a timed overhead near 2 could pass the limit.
  config.thrash_limit = std::nullopt;
  Runtime rt(config);
  const TensorMeta out{{256}};
  const Tensor x = rt.constant(TensorMeta{{256}}, std::vector<float>(256, 0.5f));
  auto failing = std::make_shared<Lambda>("fails", [](auto, auto, float*, std::int64_t) {
    throw std::runtime_error("kernel failed");
  });
  EXPECT_THROW(rt.call(failing, one(x), std::span<const TensorMeta>(&out, 1)), std::runtime_error);
  EXPECT_EQ(rt.resident_bytes(), x.storage_bytes());  // the failed op's output is gone
  const Tensor y = rt.call(affine_tanh(1, 0), one(x), std::span<const TensorMeta>(&out, 1)).front();
  EXPECT_TRUE(rt.evict(y));  // pins of the failed op were all released: y is a candidate again
  EXPECT_FLOAT_EQ(y.to_host()[0], std::tanh(0.5f));
}

}  // namespace
}  // namespace dtr::test
