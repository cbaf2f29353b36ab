// The fully connected and sequence models of the zoo (include/dtr/nn/models.h): MLP, Transformer encoder, LSTM.
#include <memory>

#include "dtr/check.h"
#include "dtr/nn/layers.h"
#include "dtr/nn/models.h"

namespace dtr::nn {

namespace {

constexpr std::int64_t kSide = 28;  // Fashion-MNIST's images are 28 x 28

// [N, 1, 28, 28] -> [N, tokens, values]: rows, or patch x patch squares in row-major order.
class Tokens : public Module {
 public:
  explicit Tokens(std::int64_t patch) : patch_(patch) {}
  Variable forward(const Variable& x) override {
    const std::int64_t n = x.shape()[0];
    if (patch_ == 0) return reshape(x, {n, kSide, kSide});
    const std::int64_t cells = kSide / patch_;
    const Variable grid = permute(reshape(x, {n, cells, patch_, cells, patch_}), {0, 1, 3, 2, 4});
    return reshape(grid, {n, cells * cells, patch_ * patch_});
  }

 private:
  std::int64_t patch_;
};

// Tokens to `dim` values plus a learned position embedding (normal, std 0.02, as ViT's).
class TokenEmbedding : public Module {
 public:
  TokenEmbedding(Runtime& rt, Generator& gen, std::int64_t tokens, std::int64_t values, std::int64_t dim) {
    project_ = register_module("project", std::make_shared<Linear>(rt, gen, values, dim));
    position_ = register_parameter("position", normal_variable(rt, gen, {tokens, dim}, 0.02, true));
  }
  Variable forward(const Variable& x) override { return add(project_->forward(x), position_); }

 private:
  std::shared_ptr<Linear> project_;
  Variable position_;
};

// Post-norm: x = norm1(x + drop(attn(x))); x = norm2(x + drop(ff(x))), ff = linear2(drop(relu(linear1(x)))).
// Without dropout (or in eval mode) each residual sum is its projection's accumulation (ops::linear_add).
class EncoderLayer : public Module {
 public:
  EncoderLayer(Runtime& rt, Generator& gen, std::int64_t dim, std::int64_t heads, double dropout)
      : dropout_(dropout) {
    attention_ = register_module("self_attn", std::make_shared<MultiheadSelfAttention>(rt, gen, dim, heads, dropout));
    linear1_ = register_module("linear1", std::make_shared<Linear>(rt, gen, dim, 4 * dim));
    linear2_ = register_module("linear2", std::make_shared<Linear>(rt, gen, 4 * dim, dim));
    norm1_ = register_module("norm1", std::make_shared<LayerNorm>(rt, dim));
    norm2_ = register_module("norm2", std::make_shared<LayerNorm>(rt, dim));
  }

  Variable forward(const Variable& x) override {
    const bool on = is_training();
    if (dropout_ == 0.0 || !on) {  // no dropout before the residual sums: each accumulates onto its projection
      const Variable a = norm1_->forward(attention_->forward_add(x, x));
      return norm2_->forward(linear2_->forward_add(relu(linear1_->forward(a)), a));
    }
    const Variable a = norm1_->forward(add(x, dropout(attention_->forward(x), dropout_, on)));
    const Variable ff = linear2_->forward(dropout(relu(linear1_->forward(a)), dropout_, on));
    return norm2_->forward(add(a, dropout(ff, dropout_, on)));
  }

 private:
  double dropout_;
  std::shared_ptr<MultiheadSelfAttention> attention_;
  std::shared_ptr<Linear> linear1_;
  std::shared_ptr<Linear> linear2_;
  std::shared_ptr<LayerNorm> norm1_;
  std::shared_ptr<LayerNorm> norm2_;
};

// [N, T, D] -> [N, D]: the mean over tokens.
class TokenMean : public Module {
 public:
  Variable forward(const Variable& x) override { return mean(x, {1}); }
};

}  // namespace

std::shared_ptr<Sequential> make_mlp(Runtime& rt, Generator& gen, const MlpSpec& spec) {
  DTR_CHECK(spec.width > 0 && spec.depth >= 1 && spec.dropout >= 0 && spec.dropout < 1, InvalidArgument,
            "MLP: width ", spec.width, ", depth ", spec.depth, ", dropout ", spec.dropout,
            " (expected width > 0, depth >= 1, dropout in [0, 1))");
  auto model = std::make_shared<Sequential>();
  model->push_back(std::make_shared<Flatten>());
  std::int64_t in = kSide * kSide;
  for (std::int64_t layer = 0; layer < spec.depth; ++layer) {
    auto block = std::make_shared<Sequential>();
    block->push_back(std::make_shared<Linear>(rt, gen, in, spec.width));
    block->push_back(std::make_shared<ReLU>());
    if (spec.dropout > 0) block->push_back(std::make_shared<Dropout>(spec.dropout));
    model->push_back(block);
    in = spec.width;
  }
  model->push_back(std::make_shared<Linear>(rt, gen, in, 10));
  return model;
}

std::shared_ptr<Sequential> make_transformer(Runtime& rt, Generator& gen, const TransformerSpec& spec) {
  DTR_CHECK(spec.patch == 0 || (spec.patch > 0 && kSide % spec.patch == 0), InvalidArgument, "Transformer: patch ",
            spec.patch, " (expected 0 for rows, or a divisor of 28)");
  DTR_CHECK(spec.depth >= 1 && spec.dropout >= 0 && spec.dropout < 1, InvalidArgument, "Transformer: depth ",
            spec.depth, ", dropout ", spec.dropout, " (expected depth >= 1, dropout in [0, 1))");
  const std::int64_t tokens = spec.patch == 0 ? kSide : (kSide / spec.patch) * (kSide / spec.patch);
  const std::int64_t values = spec.patch == 0 ? kSide : spec.patch * spec.patch;
  auto model = std::make_shared<Sequential>();
  model->push_back(std::make_shared<Tokens>(spec.patch));
  model->push_back(std::make_shared<TokenEmbedding>(rt, gen, tokens, values, spec.dim));
  for (std::int64_t layer = 0; layer < spec.depth; ++layer) {
    model->push_back(std::make_shared<EncoderLayer>(rt, gen, spec.dim, spec.heads, spec.dropout));
  }
  model->push_back(std::make_shared<TokenMean>());
  if (spec.dropout > 0) model->push_back(std::make_shared<Dropout>(spec.dropout));
  model->push_back(std::make_shared<Linear>(rt, gen, spec.dim, 10));
  return model;
}

std::shared_ptr<Sequential> make_lstm(Runtime& rt, Generator& gen, const LstmSpec& spec) {
  DTR_CHECK(spec.hidden > 0 && spec.layers >= 1 && spec.dropout >= 0 && spec.dropout < 1, InvalidArgument,
            "LSTM model: hidden ", spec.hidden, ", layers ", spec.layers, ", dropout ", spec.dropout,
            " (expected hidden > 0, layers >= 1, dropout in [0, 1))");
  auto model = std::make_shared<Sequential>();
  model->push_back(std::make_shared<Tokens>(0));
  model->push_back(std::make_shared<LSTM>(rt, gen, kSide, spec.hidden, spec.layers, /*last_step_only=*/true));
  if (spec.dropout > 0) model->push_back(std::make_shared<Dropout>(spec.dropout));
  model->push_back(std::make_shared<Linear>(rt, gen, spec.hidden, 10));
  return model;
}

std::vector<std::string> model_names() { return {"mlp", "resnet", "transformer", "lstm", "unet", "densenet"}; }

std::shared_ptr<Sequential> make_model(Runtime& rt, Generator& gen, const std::string& name, const ZooOptions& o) {
  const auto pick = [](std::int64_t given, std::int64_t fallback) { return given != 0 ? given : fallback; };
  if (name == "mlp") {
    const MlpSpec d;
    return make_mlp(rt, gen, {pick(o.width, d.width), pick(o.depth, d.depth), o.dropout});
  }
  if (name == "resnet") {
    const ResNetSpec d;
    return make_resnet(rt, gen, {pick(o.depth, d.depth), pick(o.width, d.width), o.dropout});
  }
  if (name == "transformer") {
    const TransformerSpec d;
    return make_transformer(rt, gen, {pick(o.depth, d.depth), pick(o.width, d.dim), d.heads, d.patch, o.dropout});
  }
  if (name == "lstm") {
    const LstmSpec d;
    return make_lstm(rt, gen, {pick(o.width, d.hidden), pick(o.depth, d.layers), o.dropout});
  }
  if (name == "unet") {
    const UNetSpec d;
    return make_unet(rt, gen, {pick(o.width, d.width), pick(o.depth, d.levels), o.dropout, d.convs});
  }
  if (name == "densenet") {
    const DenseNetSpec d;
    return make_densenet(rt, gen, {pick(o.width, d.growth), pick(o.depth, d.layers), d.blocks, o.dropout});
  }
  std::string names;
  for (const std::string& n : model_names()) names += (names.empty() ? "" : ", ") + n;
  DTR_THROW(InvalidArgument, "no zoo model '", name, "' (expected one of ", names, ")");
}

}  // namespace dtr::nn
