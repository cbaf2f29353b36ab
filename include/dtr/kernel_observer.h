// Watching the kernels a runtime runs (Config::kernel_observer): a profiler, an op counter, or a benchmark that
// records a training step and replays its kernels without the runtime (bench/train_step_bench.cpp).
//
// Thread safety: the observer is called on the runtime's thread, after each kernel run, first runs and
// recomputations alike. It must not call into the runtime that calls it.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>

#include "dtr/op.h"

namespace dtr {

struct KernelRun {
  std::string_view name;  // the op's name, or the computation's (include/dtr/computation.h)
  // For an op of the table (Runtime::call with an OpDef): the op, and args holds its attributes and captured
  // seed. Null for a computation from another source.
  const OpDef* op = nullptr;
  // The buffers the kernel read and wrote, contiguous, on the runtime's device (host memory on the CPU), and
  // its scratch memory: valid during the call only. The outputs hold the kernel's results.
  const KernelArgs& args;
  // Which storage each buffer belongs to: the runtime's storage ids, each unique in the runtime's life (0: a
  // recomputed output no tensor holds any more, given scratch memory for this run). Input i starts
  // input_offsets[i] elements into its storage (a view); outputs start at their storage's first element.
  std::span<const std::uint64_t> input_storages;
  std::span<const std::size_t> input_offsets;
  std::span<const std::uint64_t> output_storages;
  bool rematerialization = false;  // a recomputation of evicted outputs, not the program's own call
  double cost = 0;                 // what the runtime charged for it, in its cost model's unit
};

using KernelObserver = std::function<void(const KernelRun& run)>;

}  // namespace dtr
