// The model zoo: the architectures of the DTR paper's evaluation, sized by their specs, for Fashion-MNIST-shaped
// input ([N, 1, 28, 28] float32 images) and 10 classes (logits [N, 10]). Each model is a Sequential of stages
// with one input and one output (a stem, blocks, a head), so that checkpoint_sequential
// (include/dtr/nn/checkpoint.h) can cut it anywhere between stages. `dropout` > 0 adds dropout before the
// classifier (and, for the MLP and the Transformer, inside the blocks, where PyTorch's models have it).
//
// Ownership and thread safety: as Module (include/dtr/nn/module.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dtr/nn/init.h"
#include "dtr/nn/module.h"

namespace dtr::nn {

// flatten, then `depth` blocks Linear(width) + ReLU (+ Dropout), then Linear(width, 10).
struct MlpSpec {
  std::int64_t width = 256;
  std::int64_t depth = 4;
  double dropout = 0.0;
};
std::shared_ptr<Sequential> make_mlp(Runtime& runtime, Generator& generator, const MlpSpec& spec);

// ResNet-N in the CIFAR style (He et al. 2016, section 4.2): N = 6n + 2 layers; a 3x3 stem of `width` channels,
// three stages of n basic blocks (conv-BN-ReLU-conv-BN, plus the shortcut, ReLU) at width, 2 width, 4 width
// channels, the last two starting with stride 2 (28 -> 14 -> 7) and a 1x1 convolution + BN shortcut; then
// global average pooling and Linear(4 width, 10). depth: 20, 32, 44, 56, 110, 1202, ...
struct ResNetSpec {
  std::int64_t depth = 20;
  std::int64_t width = 16;
  double dropout = 0.0;
};
std::shared_ptr<Sequential> make_resnet(Runtime& runtime, Generator& generator, const ResNetSpec& spec);

// A Transformer encoder (post-norm, as torch.nn.TransformerEncoderLayer): tokens are the image's rows (patch 0:
// 28 tokens of 28 values) or its patch x patch squares; Linear to `dim` plus a learned position embedding;
// `depth` layers of self-attention with `heads` heads and a ReLU feed-forward of 4 dim; the mean over tokens;
// Linear(dim, 10).
struct TransformerSpec {
  std::int64_t depth = 4;
  std::int64_t dim = 64;
  std::int64_t heads = 4;
  std::int64_t patch = 0;  // 0: rows; else a divisor of 28
  double dropout = 0.0;
};
std::shared_ptr<Sequential> make_transformer(Runtime& runtime, Generator& generator, const TransformerSpec& spec);

// Sequential MNIST by rows: the 28 rows as 28 steps of 28 values through an LSTM of `layers` stacked layers of
// `hidden` units (one module: checkpoint_sequential cuts around it, not inside), the last step's hidden state
// to Linear(hidden, 10).
struct LstmSpec {
  std::int64_t hidden = 128;
  std::int64_t layers = 1;
  double dropout = 0.0;
};
std::shared_ptr<Sequential> make_lstm(Runtime& runtime, Generator& generator, const LstmSpec& spec);

// A small U-Net (Ronneberger et al. 2015): `levels` (1 or 2: 28 is divisible by 4, not 8) of `convs` (2 in the
// paper) 3x3 conv-BN-ReLU at `width`·2^level channels, max-pooled on the way down, 1x1-convolved to half the
// channels, nearest-upsampled and concatenated with the skip on the way up (the 1x1 convolution before the
// upsampling: the same function as after it, on a quarter of the pixels); a 1x1 convolution to 10 per-pixel
// class scores (the segmentation head), averaged over the image into the logits.
struct UNetSpec {
  std::int64_t width = 16;
  std::int64_t levels = 2;
  double dropout = 0.0;
  std::int64_t convs = 2;
};
std::shared_ptr<Sequential> make_unet(Runtime& runtime, Generator& generator, const UNetSpec& spec);

// DenseNet-BC (Huang et al. 2017): a 3x3 stem of 2 growth channels, `blocks` dense blocks of `layers` bottleneck
// layers (BN-ReLU-1x1 conv to 4 growth, BN-ReLU-3x3 conv to growth, concatenated to the input), transitions
// halving the channels (BN-ReLU-1x1 conv, 2x2 average pooling) between blocks; BN-ReLU, global average pooling,
// Linear(channels, 10).
struct DenseNetSpec {
  std::int64_t growth = 12;
  std::int64_t layers = 4;
  std::int64_t blocks = 3;  // at most 3: 28 -> 14 -> 7
  double dropout = 0.0;
};
std::shared_ptr<Sequential> make_densenet(Runtime& runtime, Generator& generator, const DenseNetSpec& spec);

// The zoo's names: "mlp", "resnet", "transformer", "lstm", "unet", "densenet".
std::vector<std::string> model_names();

// A zoo model by name, sized by the two knobs a command line gives (0 keeps the spec's default): `depth` is
// the MLP's and the Transformer's layers, ResNet's N, the LSTM's layers, the U-Net's levels, DenseNet's layers
// per block; `width` the MLP's width, ResNet's and the U-Net's first channels, the Transformer's dim, the
// LSTM's hidden units, DenseNet's growth rate. dtr::InvalidArgument for another name (listing the names) and
// for sizes the model refuses.
struct ZooOptions {
  std::int64_t depth = 0;
  std::int64_t width = 0;
  double dropout = 0.0;
};
std::shared_ptr<Sequential> make_model(Runtime& runtime, Generator& generator, const std::string& name,
                                       const ZooOptions& options = {});

}  // namespace dtr::nn
