// The convolutional models of the zoo (include/dtr/nn/models.h): ResNet, U-Net, DenseNet-BC.
#include <memory>

#include "dtr/check.h"
#include "dtr/nn/layers.h"
#include "dtr/nn/models.h"

namespace dtr::nn {

namespace {

Conv2dSpec conv_spec(std::int64_t in, std::int64_t out, std::int64_t kernel, std::int64_t stride, bool bias) {
  Conv2dSpec spec;
  spec.in_channels = in;
  spec.out_channels = out;
  spec.kernel = {kernel, kernel};
  spec.options.stride = {stride, stride};
  spec.options.padding = {kernel / 2, kernel / 2};
  spec.bias = bias;
  return spec;
}

// conv-BN-ReLU.
std::shared_ptr<Sequential> conv_bn_relu(Runtime& rt, Generator& gen, std::int64_t in, std::int64_t out,
                                         std::int64_t stride = 1) {
  auto s = std::make_shared<Sequential>();
  s->push_back(std::make_shared<Conv2d>(rt, gen, conv_spec(in, out, 3, stride, false)));
  s->push_back(std::make_shared<BatchNorm2d>(rt, out));
  s->push_back(std::make_shared<ReLU>());
  return s;
}

// Global average pooling, optional dropout, the classifier.
std::shared_ptr<Sequential> classifier_head(Runtime& rt, Generator& gen, std::int64_t channels, double dropout) {
  auto head = std::make_shared<Sequential>();
  head->push_back(std::make_shared<GlobalAvgPool2d>());
  if (dropout > 0) head->push_back(std::make_shared<Dropout>(dropout));
  head->push_back(std::make_shared<Linear>(rt, gen, channels, 10));
  return head;
}

class BasicBlock : public Module {
 public:
  BasicBlock(Runtime& rt, Generator& gen, std::int64_t in, std::int64_t out, std::int64_t stride) {
    conv1_ = register_module("conv1", std::make_shared<Conv2d>(rt, gen, conv_spec(in, out, 3, stride, false)));
    bn1_ = register_module("bn1", std::make_shared<BatchNorm2d>(rt, out));
    conv2_ = register_module("conv2", std::make_shared<Conv2d>(rt, gen, conv_spec(out, out, 3, 1, false)));
    bn2_ = register_module("bn2", std::make_shared<BatchNorm2d>(rt, out));
    if (stride != 1 || in != out) {
      auto shortcut = std::make_shared<Sequential>();
      shortcut->push_back(std::make_shared<Conv2d>(rt, gen, conv_spec(in, out, 1, stride, false)));
      shortcut->push_back(std::make_shared<BatchNorm2d>(rt, out));
      shortcut_ = register_module("shortcut", shortcut);
    }
  }

  Variable forward(const Variable& x) override {
    const Variable y = conv2_->forward(bn1_->forward_relu(conv1_->forward(x)));
    return bn2_->forward_add_relu(y, shortcut_ ? shortcut_->forward(x) : x);
  }

 private:
  std::shared_ptr<Conv2d> conv1_;
  std::shared_ptr<BatchNorm2d> bn1_;
  std::shared_ptr<Conv2d> conv2_;
  std::shared_ptr<BatchNorm2d> bn2_;
  std::shared_ptr<Sequential> shortcut_;
};

// `convs` conv-BN-ReLU at `out` channels (two in the U-Net paper).
std::shared_ptr<Sequential> conv_block(Runtime& rt, Generator& gen, std::int64_t in, std::int64_t out,
                                       std::int64_t convs) {
  auto s = std::make_shared<Sequential>();
  for (std::int64_t i = 0; i < convs; ++i) s->push_back(conv_bn_relu(rt, gen, i == 0 ? in : out, out));
  return s;
}

// One level of the U: x (c channels) -> the inner levels on its pooled half -> 1x1 to c, upsampled, joined to x
// and convolved back to c. The innermost level is two convolutions to 2c.
class UNetLevel : public Module {
 public:
  UNetLevel(Runtime& rt, Generator& gen, std::int64_t channels, std::int64_t depth_below, std::int64_t convs) {
    if (depth_below == 0) {
      inner_ = register_module("bottom", conv_block(rt, gen, channels, 2 * channels, convs));
    } else {
      auto down = std::make_shared<Sequential>();
      down->push_back(conv_block(rt, gen, channels, 2 * channels, convs));
      down->push_back(std::make_shared<UNetLevel>(rt, gen, 2 * channels, depth_below - 1, convs));
      inner_ = register_module("inner", down);
    }
    reduce_ = register_module("reduce", std::make_shared<Conv2d>(rt, gen, conv_spec(2 * channels, channels, 1, 1, true)));
    merge_ = register_module("merge", conv_block(rt, gen, 2 * channels, channels, convs));
  }

  Variable forward(const Variable& x) override {
    const Variable below = inner_->forward(max_pool2d(x, {2, 2}));
    // The 1x1 convolution before the upsampling: the same function (a per-pixel map commutes with copying
    // pixels), on a quarter of the pixels, and no upsampled copy of `below`'s 2c channels to hold.
    const Variable up = upsample_nearest2d(reduce_->forward(below), 2);
    const Variable joined[] = {x, up};
    return merge_->forward(concat(joined, 1));
  }

 private:
  std::shared_ptr<Sequential> inner_;
  std::shared_ptr<Conv2d> reduce_;
  std::shared_ptr<Sequential> merge_;
};

class DenseLayer : public Module {
 public:
  DenseLayer(Runtime& rt, Generator& gen, std::int64_t in, std::int64_t growth) {
    auto s = std::make_shared<Sequential>();
    s->push_back(std::make_shared<BatchNorm2d>(rt, in));
    s->push_back(std::make_shared<ReLU>());
    s->push_back(std::make_shared<Conv2d>(rt, gen, conv_spec(in, 4 * growth, 1, 1, false)));
    s->push_back(std::make_shared<BatchNorm2d>(rt, 4 * growth));
    s->push_back(std::make_shared<ReLU>());
    s->push_back(std::make_shared<Conv2d>(rt, gen, conv_spec(4 * growth, growth, 3, 1, false)));
    body_ = register_module("body", s);
  }

  Variable forward(const Variable& x) override {
    const Variable joined[] = {x, body_->forward(x)};
    return concat(joined, 1);
  }

 private:
  std::shared_ptr<Sequential> body_;
};

}  // namespace

std::shared_ptr<Sequential> make_resnet(Runtime& rt, Generator& gen, const ResNetSpec& spec) {
  DTR_CHECK(spec.depth >= 8 && (spec.depth - 2) % 6 == 0 && spec.width > 0, InvalidArgument, "ResNet: depth ",
            spec.depth, ", width ", spec.width, " (expected depth 6n + 2 with n >= 1: 20, 32, 56, 110, 1202; width > 0)");
  const std::int64_t blocks = (spec.depth - 2) / 6;
  auto model = std::make_shared<Sequential>();
  model->push_back(conv_bn_relu(rt, gen, 1, spec.width));
  std::int64_t channels = spec.width;
  for (std::int64_t stage = 0; stage < 3; ++stage) {
    const std::int64_t out = spec.width << stage;
    for (std::int64_t b = 0; b < blocks; ++b) {
      model->push_back(std::make_shared<BasicBlock>(rt, gen, channels, out, b == 0 && stage > 0 ? 2 : 1));
      channels = out;
    }
  }
  model->push_back(classifier_head(rt, gen, channels, spec.dropout));
  return model;
}

std::shared_ptr<Sequential> make_unet(Runtime& rt, Generator& gen, const UNetSpec& spec) {
  DTR_CHECK(spec.width > 0 && spec.levels >= 1 && spec.levels <= 2 && spec.convs >= 1, InvalidArgument,
            "U-Net: width ", spec.width, ", levels ", spec.levels, ", convs ", spec.convs,
            " (expected width > 0, levels 1 or 2: 28 halves twice, convs >= 1)");
  auto model = std::make_shared<Sequential>();
  model->push_back(conv_block(rt, gen, 1, spec.width, spec.convs));
  model->push_back(std::make_shared<UNetLevel>(rt, gen, spec.width, spec.levels - 1, spec.convs));
  Conv2dSpec head = conv_spec(spec.width, 10, 1, 1, true);
  if (spec.dropout > 0) model->push_back(std::make_shared<Dropout>(spec.dropout));
  model->push_back(std::make_shared<Conv2d>(rt, gen, head));  // per-pixel class scores
  model->push_back(std::make_shared<GlobalAvgPool2d>());
  return model;
}

std::shared_ptr<Sequential> make_densenet(Runtime& rt, Generator& gen, const DenseNetSpec& spec) {
  DTR_CHECK(spec.growth > 0 && spec.layers > 0 && spec.blocks >= 1 && spec.blocks <= 3, InvalidArgument,
            "DenseNet: growth ", spec.growth, ", layers ", spec.layers, ", blocks ", spec.blocks,
            " (expected growth, layers > 0 and 1 to 3 blocks)");
  auto model = std::make_shared<Sequential>();
  std::int64_t channels = 2 * spec.growth;
  auto stem = std::make_shared<Sequential>();
  stem->push_back(std::make_shared<Conv2d>(rt, gen, conv_spec(1, channels, 3, 1, false)));
  model->push_back(stem);
  for (std::int64_t block = 0; block < spec.blocks; ++block) {
    for (std::int64_t layer = 0; layer < spec.layers; ++layer) {
      model->push_back(std::make_shared<DenseLayer>(rt, gen, channels, spec.growth));
      channels += spec.growth;
    }
    if (block + 1 < spec.blocks) {
      auto transition = std::make_shared<Sequential>();
      transition->push_back(std::make_shared<BatchNorm2d>(rt, channels));
      transition->push_back(std::make_shared<ReLU>());
      transition->push_back(std::make_shared<Conv2d>(rt, gen, conv_spec(channels, channels / 2, 1, 1, false)));
      transition->push_back(std::make_shared<AvgPool2d>(std::array<std::int64_t, 2>{2, 2}));
      model->push_back(transition);
      channels /= 2;
    }
  }
  auto head = std::make_shared<Sequential>();
  head->push_back(std::make_shared<BatchNorm2d>(rt, channels));
  head->push_back(std::make_shared<ReLU>());
  model->push_back(head);
  model->push_back(classifier_head(rt, gen, channels, spec.dropout));
  return model;
}

}  // namespace dtr::nn
