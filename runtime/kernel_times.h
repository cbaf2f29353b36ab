// DTR_COST_MODEL=measured: what each kind of kernel costs, learnt from its first runs. A kernel's signature is
// its computation's name, Computation::cost_signature (the op table's attributes) and its input and output
// shapes; of a signature's runs, the first N = Config::timed_runs (DTR_TIMED_RUNS, 3 by default) are timed, then
// the 2N-th, 4N-th, 8N-th, ...; every other run costs the least time seen so far, untimed. The later samples,
// ever sparser, correct a cost learnt in a cold first step (fresh pages, empty caches) at a cost that vanishes.
// Why: timing a GPU kernel means waiting for the device before and after it, which leaves the GPU idle between
// kernels (docs/results/gpu.md: ResNet-32's step 43 ms timing every kernel, 23 ms under the FLOP model, which
// times none); training runs the same kernels every step, so a few timed runs price the rest, and the
// heuristics see steadier costs.
//
// Thread safety: as the runtime that owns it (one thread at a time).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>

#include "dtr/computation.h"
#include "dtr/op.h"

namespace dtr::detail {

class KernelTimes {
 public:
  // `timed_runs`: N above, at least 1. The first run of a kernel pays for warming up (a cuDNN plan, a cold
  // cache); the least of a few does not.
  explicit KernelTimes(std::uint32_t timed_runs) : timed_runs_(std::max<std::uint32_t>(timed_runs, 1)) {}
  // Signatures remembered; past it (a program of ever-changing shapes) they are forgotten and learnt again.
  static constexpr std::size_t kMaxSignatures = std::size_t{1} << 16;

  // Called once per run of a kernel of `signature`, before it: the cost of this run when it goes untimed;
  // nullopt when this run is to be timed, and its time record()ed.
  std::optional<std::uint64_t> untimed_cost(std::uint64_t signature);
  // The time a run that untimed_cost said to time took.
  void record(std::uint64_t signature, std::uint64_t elapsed_ns);

 private:
  static constexpr std::uint64_t kNone = ~std::uint64_t{0};
  struct Entry {
    std::uint64_t least_ns = kNone;  // of the timed runs that finished
    std::uint64_t runs = 0;      // timed or not
  };
  bool timed(std::uint64_t run) const;  // whether the signature's run number `run` (from 1) is timed
  std::uint32_t timed_runs_;
  std::unordered_map<std::uint64_t, Entry> entries_;
};

// The signature of one run of `computation` over `inputs` giving `outputs`.
std::uint64_t kernel_signature(const Computation& computation, std::span<const TensorMeta> inputs,
                               std::span<const TensorMeta> outputs);
// A hash of `attrs` (names and values), for OpComputation::cost_signature.
std::uint64_t hash_attrs(const Attrs& attrs);

}  // namespace dtr::detail
