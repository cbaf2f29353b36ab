// Synthetic training traces, so that tests, benchmarks and demos need no recorded log: each generator is a
// deterministic function of its options (sizes and a seed) and returns a sim::Trace shaped like a real
// training step: forward ops, a loss, a backward pass that reads the incoming gradient and the tensors each
// op saved, parameter gradients and updates, and a RELEASE right after each name's last use, so that an
// unbudgeted replay peaks where a real program would. Sizes are bytes of float32 tensors derived from layer
// widths, times nanoseconds from a GPU-like cost model, both with seeded jitter. write_trace saves one.
//
// Each generator throws dtr::InvalidArgument naming the option, its value and the accepted range when an
// option is out of range. Thread safety: generators share no state.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "dtr/sim.h"

namespace dtr::sim {

// N layers of similar cost in a chain (the DTR paper's analysis case), each reading its input and weight.
struct ChainOptions {
  std::uint32_t layers = 64;                 // main size: about 3 ops per layer
  std::uint64_t activation_bytes = 1 << 20;  // per layer output, ±20%
  std::uint64_t seed = 1;
};

// A CIFAR-style ResNet: a stem, `stages` stages of residual blocks (conv, batch norm, relu, conv, batch norm,
// add of the skip connection, relu), the channels doubling and the image halving per stage, then pooling and
// a linear classifier. The defaults are ResNet-32's shape.
struct ResNetOptions {
  std::uint32_t blocks_per_stage = 5;  // main size: about 32 ops per block (96 per unit with 3 stages)
  std::uint32_t stages = 3;
  std::uint32_t channels = 16;  // of the first stage
  std::uint32_t batch = 64;
  std::uint32_t image_size = 32;
  std::uint64_t seed = 1;
};

// An LSTM language model unrolled over `steps` time steps with weights shared across them: per step a fused
// cell, an output projection and a cross-entropy loss; then backpropagation through time.
struct RnnOptions {
  std::uint32_t steps = 64;  // main size: about 24 ops per step, 14 more per extra layer
  std::uint32_t layers = 1;
  std::uint32_t hidden = 512;
  std::uint32_t input = 256;
  std::uint32_t vocabulary = 2048;
  std::uint32_t batch = 128;
  std::uint64_t seed = 1;
};

// An unrolled GAN (Metz et al., 2017): MLP generator and discriminator; `unroll` discriminator updates are
// taken with their graphs kept, so that the generator's loss, computed with the last of them, backpropagates
// through every update (second-order backward ops reading gradients, activations and weights of several
// steps: multi-input ops whose inputs share ancestry). About 10,000 ops with the defaults.
struct GanOptions {
  std::uint32_t unroll = 22;  // main size: about 460 ops per step with the default sizes
  std::uint32_t generator_layers = 4;
  std::uint32_t discriminator_layers = 8;
  std::uint32_t width = 512;   // hidden units of both networks
  std::uint32_t latent = 128;  // the generator's input
  std::uint32_t data = 784;    // a sample's size (28 x 28)
  std::uint32_t batch = 64;
  std::uint32_t iterations = 1;  // training iterations, each unrolled anew
  std::uint64_t seed = 1;
};

// A random DAG: each op reads 1 to max_inputs values among the `locality` most recent ones (now and then a
// parameter), some ops are views; the values nothing reads are summed into the loss; then the backward pass in
// reverse order, gradients summed where a value fed several ops, and in-place parameter updates.
struct DagOptions {
  std::uint32_t forward_ops = 1000;  // main size: forward ops (the trace has about 3.5 times as many ops)
  std::uint32_t max_inputs = 3;
  std::uint32_t locality = 16;
  std::uint32_t parameters = 32;
  std::uint64_t min_bytes = 256 << 10;
  std::uint64_t max_bytes = 4 << 20;
  std::uint64_t seed = 1;
};

Trace generate_chain(const ChainOptions& options);
Trace generate_resnet(const ResNetOptions& options);
Trace generate_rnn(const RnnOptions& options);
Trace generate_gan(const GanOptions& options);
Trace generate_dag(const DagOptions& options);

// `options` with the kind's main size set so that its trace has about `ops` CALL and MUTATE instructions (at
// least one unit of the main size: a trace smaller than that is not possible).
ChainOptions sized_for_ops(const ChainOptions& options, std::uint64_t ops);
ResNetOptions sized_for_ops(const ResNetOptions& options, std::uint64_t ops);
RnnOptions sized_for_ops(const RnnOptions& options, std::uint64_t ops);
GanOptions sized_for_ops(const GanOptions& options, std::uint64_t ops);
DagOptions sized_for_ops(const DagOptions& options, std::uint64_t ops);

// The kinds dtr-trace-gen knows, in the order its help lists them.
inline constexpr std::string_view kTraceKinds[] = {"chain", "resnet", "rnn", "gan", "dag"};

}  // namespace dtr::sim
