// Parameter initialisation: a seeded generator and PyTorch's rules (torch.nn.init), on float32 constants.
// The rules match PyTorch's distributions and bounds, not its random streams: a model built here from a seed
// is reproducible here, and a PyTorch comparison loads the parameters rather than re-drawing them.
//
// Thread safety: a generator is used by one thread at a time.
#pragma once

#include <cstdint>
#include <random>

#include "dtr/nn/autograd.h"

namespace dtr::nn {

class Generator {
 public:
  explicit Generator(std::uint64_t seed) : engine_(seed) {}
  // Uniform in [0, 1), from 53 random bits (portable: no standard distribution, whose results vary by library).
  double uniform();
  // Standard normal (Box–Muller over two uniforms).
  double normal();

 private:
  std::mt19937_64 engine_;
};

// A float32 constant of `shape`: uniform in [-bound, bound), normal(0, std), or every element `value`.
Variable uniform_variable(Runtime& runtime, Generator& generator, Shape shape, double bound, bool requires_grad);
Variable normal_variable(Runtime& runtime, Generator& generator, Shape shape, double std, bool requires_grad);
Variable full_variable(Runtime& runtime, Shape shape, float value, bool requires_grad);

// Bounds of PyTorch's uniform rules: kaiming_uniform_(a) gives gain · √(3 / fan_in), gain = √(2 / (1 + a²));
// Linear and Conv2d use a = √5 for their weights (so 1/√fan_in) and 1/√fan_in for their biases.
double kaiming_uniform_bound(std::int64_t fan_in, double a);
// xavier_uniform_: √(6 / (fan_in + fan_out)).
double xavier_uniform_bound(std::int64_t fan_in, std::int64_t fan_out);

}  // namespace dtr::nn
