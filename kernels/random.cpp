// Random ops. Each output element is a pure function of (seed, index), a counter-based generator: a
// rematerialization that replays the captured seed reproduces the first run's bits exactly, whatever order
// or thread computes the elements in, with no generator state to save.
#include <cstdint>
#include <limits>

#include "dtr/ops.h"
#include "op_checks.h"

namespace dtr::ops {
namespace {

// SplitMix64's output function (Steele, Lea and Flood, 2014): a bijective mixer whose outputs for consecutive
// inputs pass BigCrush.
std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30U)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27U)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31U);
}

// The output copies the shape and dtype of the input: a runtime-managed "like" tensor, so the op has the usual
// lineage.
TensorMetas infer_uniform(std::span<const TensorMeta> inputs, const Attrs& /*attrs*/) {
  kernels::check_arity("uniform", inputs, 1);
  kernels::check_floating("uniform", inputs);
  return {inputs[0]};
}

void uniform_cpu(const KernelArgs& args) {
  // The seed is mixed before the index is added, so that seeds s and s + 1 do not give the same stream shifted
  // by one element.
  const std::uint64_t key = splitmix64(args.seed);
  const std::int64_t count = args.output_meta[0].numel();
  kernels::dispatch_floating(args.output_meta[0].dtype, [&]<typename T>(T /*zero*/) {
    // The top bits fill the mantissa exactly (24 for float, 53 for double): every value is a multiple of
    // 2^-24 (2^-53) in [0, 1).
    constexpr unsigned kBits = std::numeric_limits<T>::digits;
    const T unit = T(1) / static_cast<T>(std::uint64_t{1} << kBits);
    T* out = args.output<T>(0);
    for (std::int64_t i = 0; i < count; ++i) {
      out[i] = static_cast<T>(splitmix64(key + static_cast<std::uint64_t>(i)) >> (64U - kBits)) * unit;
    }
  });
}

}  // namespace

const OpDef& uniform() {
  static const OpDef def{.name = "uniform",
                         .infer = infer_uniform,
                         .cpu_kernel = uniform_cpu,
                         .flops = kernels::numel_flops,
                         .random = true};
  return def;
}

}  // namespace dtr::ops
