// dtr::Computation: what a closure replays. A closure is "write my outputs from my inputs" (this interface)
// plus its inputs, its cost and its outputs' shapes, which the runtime keeps; eviction, rematerialization and
// the heuristics need nothing else of an op. The op table (OpDef + attributes, Runtime::call(const OpDef&, ...))
// is one source of computations; any other source (PyTorch's dispatcher, a test's lambda) implements this
// interface and records its ops with Runtime::call(std::shared_ptr<Computation>, ...). docs/runtime.md,
// "Closures from any source".
//
// Ownership: the runtime shares the computation with the caller and keeps it while the lineage needs it (until
// every output is dead and no closure reads them). Thread safety: called on the runtime's thread only.
#pragma once

#include <bit>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "dtr/op.h"

namespace dtr {

// Mixes `value` into `seed`, for Computation::cost_signature: order-sensitive and well spread (splitmix64's
// finaliser over the sum), so a signature folded from several values rarely collides.
constexpr std::uint64_t mix_signature(std::uint64_t seed, std::uint64_t value) {
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ULL + value;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}
// A real's bits, to mix into a signature (-0.0 and 0.0 differ: at worst one more timed run).
constexpr std::uint64_t signature_bits(double value) { return std::bit_cast<std::uint64_t>(value); }

class Computation {
 public:
  virtual ~Computation() = default;

  // The op's name, for error messages, stats and DTR_TRACE.
  virtual std::string_view name() const = 0;
  // Writes every output (args.outputs, contiguous, shaped as args.output_meta, on the runtime's device) from
  // the inputs (args.inputs, shaped as args.input_meta). Called for the first run and again for each
  // recomputation: the same inputs must give the same bits. args.attrs is empty and args.seed 0 (a computation
  // carries its own arguments and random state); args.workspace gives scratch memory under the budget.
  virtual void run(const KernelArgs& args) = 0;
  // Its cost when known without running it (a replayed log's time): then its cost under every cost model.
  // nullopt (the default): measured (DTR_COST_MODEL=measured) or counted (flops, bytes).
  virtual std::optional<double> known_cost(std::span<const TensorMeta> /*inputs*/) const { return std::nullopt; }
  // Floating-point operations, for DTR_COST_MODEL=flops (at least 1 is used).
  virtual double flops(std::span<const TensorMeta> /*inputs*/) const { return 1.0; }
  // What, beside its name and its input and output shapes, makes this computation's running time (the op
  // table's attributes: a convolution's stride), as a hash; 0 (the default) when nothing does. Under
  // DTR_COST_MODEL=measured, runs that agree on all four share one cost, timed on their first few runs
  // (docs/runtime.md, "Cost model and clock").
  virtual std::uint64_t cost_signature() const { return 0; }
  // For a source that cannot tell its outputs' shapes without running the op (PyTorch's dispatcher): called
  // once, by Runtime::call without output shapes, with the inputs resident (args.outputs empty, no
  // workspace). It runs the op into memory of its own, keeps the results and returns their shapes; the runtime
  // then allocates the outputs under the budget and calls run(), whose first call writes the kept results and
  // whose later calls (recomputations) run the op again. The kept results are outside the budget for that
  // moment. Default: dtr::InvalidArgument (the computation must be called with its output shapes).
  virtual TensorMetas run_first(const KernelArgs& args);
  // False for a computation that touches no buffer (a replay with logged costs): only such computations run
  // over simulated memory.
  virtual bool touches_memory() const { return true; }
};

}  // namespace dtr
