// DTR_COST_MODEL=measured: what each kind of kernel costs, learnt from its first runs. A kernel's signature is
// its computation's name, Computation::cost_signature (the op table's attributes) and its input and output
// shapes; a signature is timed on its first Config::timed_runs runs (DTR_TIMED_RUNS, 3 by default) and then costs
// the least of them, untimed.
// Why: timing a GPU kernel means waiting for the device before and after it, which leaves the GPU idle between
// kernels (docs/results/gpu.md: ResNet-32's step 43 ms timed, 23 ms not); training runs the same kernels
// every step, so a few timed runs price the rest, and the heuristics then see the same costs every step.
//
// Thread safety: as the runtime that owns it (one thread at a time).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>

#include "dtr/computation.h"
#include "dtr/op.h"

namespace dtr::detail {

class KernelTimes {
 public:
  // `timed_runs`: the runs a signature gets timed before its cost is the least of them; the first run of a
  // kernel pays for warming up (a cuDNN plan, a cold cache), the least of a few does not.
  explicit KernelTimes(std::uint32_t timed_runs) : timed_runs_(timed_runs) {}
  // Signatures remembered; past it (a program of ever-changing shapes) they are forgotten and learnt again.
  static constexpr std::size_t kMaxSignatures = std::size_t{1} << 16;

  // The signature's cost once it has been timed `timed_runs` times; nullopt: time this run and record() it.
  std::optional<std::uint64_t> learnt_ns(std::uint64_t signature) const;
  void record(std::uint64_t signature, std::uint64_t elapsed_ns);
  std::size_t signatures() const { return entries_.size(); }

 private:
  struct Entry {
    std::uint64_t least_ns = 0;
    std::uint32_t runs = 0;
  };
  std::uint32_t timed_runs_;
  std::unordered_map<std::uint64_t, Entry> entries_;
};

// The signature of one run of `computation` over `inputs` giving `outputs`.
std::uint64_t kernel_signature(const Computation& computation, std::span<const TensorMeta> inputs,
                               std::span<const TensorMeta> outputs);
// A hash of `attrs` (names and values), for OpComputation::cost_signature.
std::uint64_t hash_attrs(const Attrs& attrs);

}  // namespace dtr::detail
