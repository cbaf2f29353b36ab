// torch.distributed's collectives (c10d::broadcast_, allreduce_, allgather_, ...) on wrapped tensors.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <vector>

namespace dtr::torch::detail {

// Whether `schema` is a c10d collective.
bool is_collective(const c10::FunctionSchema& schema);

// Runs collective `op` on plain copies of its wrapped tensors and leaves its returns on `stack`, the copies
// replaced by their wrappers. The 1.13 schemas do not say that these ops write their tensors, and their
// kernels write them later, on the process group's thread: recorded as a pure op, a collective would write a
// runtime value behind its back (lost when evicted and recomputed, written after free when evicted first).
// So it is waited for, each wrapper then takes its copy's bytes (copy_: an overwrite, fresh bytes), and its
// Work comes back completed: collectives and receives on wrappers are synchronous. Sends only read: they are
// neither waited for nor written back.
void run_collective(const c10::OperatorHandle& op, std::vector<c10::IValue> args, ::torch::jit::Stack* stack);

}  // namespace dtr::torch::detail
