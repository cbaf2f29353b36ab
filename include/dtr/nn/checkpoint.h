// Static checkpointing (Chen et al. 2016), the baseline DTR is compared with, as PyTorch's
// torch.utils.checkpoint: a checkpointed function runs its forward without recording a graph, keeping only its
// inputs; backward reruns it (with the random state it first saw, so dropout draws the same masks, and with
// recomputing_forward() set, so BatchNorm's running statistics are updated once per forward, never by the
// rerun), then backpropagates through the rerun. Unlike PyTorch's reentrant checkpoint, parameters inside a
// checkpointed function get their gradients even when no input requires one (the first segment of a model).
//
// It needs no budget: with the runtime's budget off, DTR and static checkpointing compare in one binary. Under a
// budget both act: the checkpoint frees what it does not keep, and the runtime may still evict and recompute
// what remains (the kept inputs, the rerun's activations) when memory runs short.
//
// Thread safety: as the variables' runtime (one thread at a time).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "dtr/nn/autograd.h"
#include "dtr/nn/module.h"

namespace dtr::nn {

using CheckpointFunction = std::function<std::vector<Variable>(std::span<const Variable> inputs)>;

// fn(inputs), keeping only the inputs for the backward. Without grad mode, just fn(inputs). fn must be
// deterministic given its inputs and the random state (every op of the table is).
std::vector<Variable> checkpoint(const CheckpointFunction& fn, std::span<const Variable> inputs);
Variable checkpoint(const std::function<Variable(const Variable&)>& fn, const Variable& input);

// The modules applied in order, cut into `segments` runs of ⌊N / segments⌋ modules (the last takes the rest):
// every run but the last checkpointed, the last run kept as usual, as torch.utils.checkpoint.checkpoint_sequential.
// segments = 0 chooses round(√N) (Chen et al.). dtr::InvalidArgument for segments outside [0, N].
Variable checkpoint_sequential(std::span<const std::shared_ptr<Module>> modules, std::int64_t segments,
                               const Variable& input);
Variable checkpoint_sequential(const Sequential& model, std::int64_t segments, const Variable& input);
// Static checkpointing of a whole model, where its depth is: checkpoint_sequential over the modules, except in
// a model holding an LSTM, whose depth is its time steps (checkpointing [LSTM, Linear] by modules would keep
// everything): there the LSTM runs LSTM::forward_checkpointed(segments) and the other modules as usual. What
// dtr-train's static checkpointing row runs. dtr::InvalidArgument as the function it calls.
Variable checkpoint_model(const Sequential& model, std::int64_t segments, const Variable& input);
// round(√n), at least 1.
std::int64_t sqrt_segments(std::int64_t modules);

}  // namespace dtr::nn
