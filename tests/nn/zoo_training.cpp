#include "zoo_training.h"

#include <cstring>

#include "dtr/check.h"
#include "dtr/nn/checkpoint.h"
#include "dtr/nn/functional.h"
#include "dtr/ops.h"

namespace dtr::nn::test {

namespace {

template <typename T>
std::vector<std::uint8_t> bits_of(const Tensor& t) {
  const std::vector<T> values = t.to_host_as<T>();
  std::vector<std::uint8_t> bytes(values.size() * sizeof(T));
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

std::vector<std::uint8_t> bits(const Tensor& t) {
  return t.meta().dtype == DType::float64 ? bits_of<double>(t) : bits_of<float>(t);
}

}  // namespace

std::vector<std::string> zoo_case_names() {
  return {"mlp", "resnet", "transformer", "transformer_fused", "lstm", "unet", "densenet"};
}

ZooCase zoo_case(const std::string& name) {
  if (name == "mlp") {
    return {name, [](Runtime& rt, Generator& g) { return make_mlp(rt, g, MlpSpec{32, 96, 0.1}); }, 512};
  }
  if (name == "resnet") {
    return {name, [](Runtime& rt, Generator& g) { return make_resnet(rt, g, ResNetSpec{32, 4, 0.1}); }, 8};
  }
  if (name == "transformer") {
    return {name, [](Runtime& rt, Generator& g) { return make_transformer(rt, g, TransformerSpec{6, 16, 2, 7, 0.1}); }, 32};
  }
  // Without dropout the attention between the projections is one op (ops::attention); with it, the unfused ops.
  if (name == "transformer_fused") {
    // Its peak is lower (attention keeps only qkv): at 25% of it the constants and the head's product alone
    // fill the budget, so it runs at 30%.
    return {name, [](Runtime& rt, Generator& g) { return make_transformer(rt, g, TransformerSpec{6, 16, 2, 7, 0.0}); },
            32, {0.5, 0.3}};
  }
  if (name == "lstm") {
    // An RNN's backward needs each step's gates, recomputed from a chain of states: at 25% of the peak every
    // heuristic still recomputes that chain from far back, step after step, and passes the thrash limit. Since
    // autograd holds its waiting gradients and a recomputation pins the state below an upper layer's input
    // projection rather than the projection, `dtr`, `dtr-eq` and `forecast` hold 30% (40% before).
    return {name, [](Runtime& rt, Generator& g) { return make_lstm(rt, g, LstmSpec{32, 2, 0.1}); }, 32, {0.5, 0.3}};
  }
  if (name == "unet") {
    return {name, [](Runtime& rt, Generator& g) { return make_unet(rt, g, UNetSpec{4, 2, 0.1, 4}); }, 8};
  }
  if (name == "densenet") {
    return {name, [](Runtime& rt, Generator& g) { return make_densenet(rt, g, DenseNetSpec{4, 10, 3, 0.1}); }, 4};
  }
  DTR_THROW(InvalidArgument, "no zoo case '", name, "'");
}

TrainingRecord train_steps(const ZooCase& zoo, const RunOptions& options) {
  Config config;
  config.cost_model = CostModel::flops;  // deterministic choices: a failure reproduces
  config.budget_mode = BudgetMode::bytes;
  config.memory_budget = options.budget_bytes;
  config.heuristic = options.heuristic;
  config.search = options.search;
  TrainingRecord record;
  if (options.record_recomputations) {
    config.kernel_observer = [&record](const KernelRun& run) {
      if (!run.rematerialization) return;
      record.recomputed_ops.emplace(run.name);
      record.recomputed.insert(record.recomputed.end(), run.output_storages.begin(), run.output_storages.end());
    };
  }
  // A heuristic that needs more than 5x the step's compute has lost: it stops (dtr::Thrashing) instead of
  // spending the suite's time (at 10x the LSTM case took 72 s, at 5x 30 s); every budget keeps finishers.
  config.thrash_limit = 5.0;
  {
    Runtime rt(config);
    Generator init(1234);
    const std::shared_ptr<Sequential> model = zoo.build(rt, init);
    model->train();
    const std::vector<std::pair<std::string, Variable>> params = model->named_parameters();
    std::vector<Tensor> momentum;
    for (const auto& [name, p] : params) momentum.push_back(rt.constant(p.meta()));
    const Attrs sgd{{"lr", 0.05}, {"momentum", 0.9}};
    Generator data(99);
    for (int step = 0; step < options.steps; ++step) {
      const std::string suffix = "." + std::to_string(step);
      // Before the batch is loaded: the gradients' lineage holds the last batch, a constant, in memory.
      model->zero_grad(true);
      std::vector<float> pixels(static_cast<std::size_t>(zoo.batch * 28 * 28));
      for (float& v : pixels) v = static_cast<float>(data.uniform());
      std::vector<std::int64_t> labels(static_cast<std::size_t>(zoo.batch));
      for (std::int64_t& l : labels) l = static_cast<std::int64_t>(data.uniform() * 10);
      const Variable x = constant(rt, {zoo.batch, 1, 28, 28}, pixels);
      const Variable y(rt, rt.constant(TensorMeta{{zoo.batch}, DType::int64}, labels));
      const Variable logits = options.checkpoint_segments >= 0
                                  ? checkpoint_model(*model, options.checkpoint_segments, x)
                                  : model->forward(x);
      const Variable loss = cross_entropy(logits, y, 0.1);
      record.values["loss" + suffix] = bits(loss.data());
      loss.backward();
      for (std::size_t i = 0; i < params.size(); ++i) {
        const Tensor& g = params[i].second.grad();
        DTR_CHECK(g.defined(), InvalidArgument, params[i].first, " got no gradient");
        record.values["grad." + params[i].first + suffix] = bits(g);
        rt.assign(momentum[i], ops::sgd_momentum_buffer(), {momentum[i], g}, sgd);
        Tensor p = params[i].second.data();
        rt.assign(p, ops::sgd_apply(), {p, momentum[i]}, sgd);
      }
    }
    for (std::size_t i = 0; i < params.size(); ++i) {
      record.values["param." + params[i].first] = bits(params[i].second.data());
      record.values["momentum." + params[i].first] = bits(momentum[i]);
    }
    for (const auto& [name, b] : model->named_buffers()) record.values["buffer." + name] = bits(b.data());
    const RuntimeStats stats = rt.stats();
    record.peak_resident_bytes = stats.peak_resident_bytes;
    record.evictions = stats.evictions;
    record.rematerializations = stats.rematerializations;
    record.ops = stats.ops;
  }
  return record;
}

}  // namespace dtr::nn::test
