// Static checkpointing (include/dtr/nn/checkpoint.h): a backward node that reruns its function.
#include "dtr/nn/checkpoint.h"

#include <algorithm>
#include <cmath>

#include "dtr/check.h"
#include "dtr/nn/layers.h"

namespace dtr::nn {

namespace {

// The rerun's ops priced as the run's own recomputation (RuntimeStats::rerun_compute), however it ends.
class ProgramRerun {
 public:
  explicit ProgramRerun(Runtime& runtime) : runtime_(runtime) { runtime_.begin_program_rerun(); }
  ~ProgramRerun() { runtime_.end_program_rerun(); }
  ProgramRerun(const ProgramRerun&) = delete;
  ProgramRerun& operator=(const ProgramRerun&) = delete;

 private:
  Runtime& runtime_;
};

// Sets the runtime's random state for its lifetime, then puts back the one it found.
class RandomStateScope {
 public:
  RandomStateScope(Runtime& runtime, std::uint64_t state) : runtime_(runtime), saved_(runtime.random_state()) {
    runtime_.set_random_state(state);
  }
  ~RandomStateScope() { runtime_.set_random_state(saved_); }
  RandomStateScope(const RandomStateScope&) = delete;
  RandomStateScope& operator=(const RandomStateScope&) = delete;

 private:
  Runtime& runtime_;
  std::uint64_t saved_;
};

class CheckpointNode final : public detail::Node {
 public:
  CheckpointNode(Runtime& runtime, detail::Edges next, TensorMetas output_meta,
                 CheckpointFunction fn, std::vector<Tensor> inputs, std::vector<bool> input_requires_grad,
                 std::uint64_t random_state)
      : Node(runtime, std::move(next), std::move(output_meta)),
        fn_(std::move(fn)),
        inputs_(std::move(inputs)),
        input_requires_grad_(std::move(input_requires_grad)),
        random_state_(random_state) {}

  std::vector<Tensor> run_backward(std::vector<Tensor> output_grads) override {
    DTR_CHECK(!released_, InvalidArgument, "backward: the checkpointed segment's inputs were already freed by an "
              "earlier backward; pass retain_graph = true to the first backward to run backward through it again");
    std::vector<Variable> leaves;
    for (std::size_t i = 0; i < inputs_.size(); ++i) {
      leaves.push_back(detail::stand_in_leaf(runtime(), inputs_[i], input_requires_grad_[i]));
    }
    std::vector<Variable> outputs;
    {
      const RandomStateScope same_draws(runtime(), random_state_);
      const GradMode recording(true);
      const RecomputingForward rerun;
      const ProgramRerun priced(runtime());
      outputs = fn_(leaves);
    }
    DTR_CHECK(outputs.size() == output_grads.size(), InvalidArgument, "checkpoint: the rerun gave ", outputs.size(),
              " outputs, the first run ", output_grads.size());
    std::vector<Variable> roots;
    std::vector<Tensor> seeds;
    for (std::size_t o = 0; o < outputs.size(); ++o) {
      DTR_CHECK(outputs[o].meta() == output_meta()[o], InvalidArgument, "checkpoint: output ", o, " of the rerun is ",
                to_string(outputs[o].shape()), ", of the first run ", to_string(output_meta()[o].shape),
                ": the function is not deterministic");
      if (output_grads[o].defined() && outputs[o].requires_grad()) {
        roots.push_back(outputs[o]);
        seeds.push_back(std::move(output_grads[o]));
      }
    }
    outputs.clear();
    if (!roots.empty()) backward(roots, seeds);
    roots.clear();
    std::vector<Tensor> grads;
    for (const Variable& leaf : leaves) grads.push_back(leaf.requires_grad() ? leaf.grad() : Tensor());
    return grads;
  }

  void release() override {
    released_ = true;
    inputs_.clear();
  }

  std::string name() const override { return "checkpoint"; }

 private:
  CheckpointFunction fn_;
  std::vector<Tensor> inputs_;
  std::vector<bool> input_requires_grad_;
  std::uint64_t random_state_;
  bool released_ = false;
};

}  // namespace

std::vector<Variable> checkpoint(const CheckpointFunction& fn, std::span<const Variable> inputs) {
  DTR_CHECK(fn != nullptr, InvalidArgument, "checkpoint: the function is null");
  DTR_CHECK(!inputs.empty(), InvalidArgument, "checkpoint: at least one input is needed (its runtime runs the rerun)");
  if (!grad_enabled()) return fn(inputs);
  Runtime& runtime = inputs[0].runtime();
  const std::uint64_t random_state = runtime.random_state();
  std::vector<Variable> detached;
  for (const Variable& in : inputs) detached.push_back(in.detach());
  std::vector<Variable> outputs;
  {
    const NoGrad no_graph;
    outputs = fn(detached);
  }
  detail::Edges next;
  std::vector<Tensor> kept;
  std::vector<bool> requires_grad;
  for (const Variable& in : inputs) {
    next.push_back(detail::edge_of(in));
    kept.push_back(in.data());
    requires_grad.push_back(in.requires_grad());
  }
  std::vector<Tensor> results;
  TensorMetas metas;
  for (const Variable& out : outputs) {
    DTR_CHECK(out.defined(), InvalidArgument, "checkpoint: the function returned an undefined variable");
    results.push_back(out.data());
    metas.push_back(out.meta());
  }
  outputs.clear();
  auto node = std::make_shared<CheckpointNode>(runtime, std::move(next), std::move(metas), fn, std::move(kept),
                                               std::move(requires_grad), random_state);
  return detail::attach(runtime, std::move(results), node);
}

Variable checkpoint(const std::function<Variable(const Variable&)>& fn, const Variable& input) {
  DTR_CHECK(fn != nullptr, InvalidArgument, "checkpoint: the function is null");
  const CheckpointFunction wrapped = [fn](std::span<const Variable> in) { return std::vector<Variable>{fn(in[0])}; };
  return checkpoint(wrapped, std::span<const Variable>(&input, 1)).front();
}

std::int64_t sqrt_segments(std::int64_t modules) {
  return std::max<std::int64_t>(1, std::llround(std::sqrt(static_cast<double>(modules))));
}

Variable checkpoint_sequential(std::span<const std::shared_ptr<Module>> modules, std::int64_t segments,
                               const Variable& input) {
  const auto n = static_cast<std::int64_t>(modules.size());
  DTR_CHECK(n >= 1, InvalidArgument, "checkpoint_sequential: no modules");
  DTR_CHECK(segments >= 0 && segments <= n, InvalidArgument, "checkpoint_sequential: ", segments, " segments for ", n,
            " modules (expected 0 for round(sqrt(N)), or 1 to N)");
  if (segments == 0) segments = sqrt_segments(n);
  const std::int64_t size = n / segments;
  const auto run = [modules](std::int64_t begin, std::int64_t end) {
    return [modules, begin, end](const Variable& x) {
      return forward_in_order(std::span(modules).subspan(static_cast<std::size_t>(begin),
                                                         static_cast<std::size_t>(end - begin)),
                              x);
    };
  };
  Variable x = input;
  std::int64_t begin = 0;
  for (std::int64_t s = 0; s + 1 < segments; ++s, begin += size) x = checkpoint(run(begin, begin + size), x);
  return run(begin, n)(x);
}

Variable checkpoint_sequential(const Sequential& model, std::int64_t segments, const Variable& input) {
  return checkpoint_sequential(model.modules(), segments, input);
}

Variable checkpoint_model(const Sequential& model, std::int64_t segments, const Variable& input) {
  const auto is_lstm = [](const std::shared_ptr<Module>& m) { return dynamic_cast<LSTM*>(m.get()) != nullptr; };
  if (std::ranges::none_of(model.modules(), is_lstm)) return checkpoint_sequential(model, segments, input);
  Variable y = input;
  for (const std::shared_ptr<Module>& m : model.modules()) {
    auto* lstm = dynamic_cast<LSTM*>(m.get());
    y = lstm != nullptr ? lstm->forward_checkpointed(y, segments) : m->forward(y);
  }
  return y;
}

}  // namespace dtr::nn
