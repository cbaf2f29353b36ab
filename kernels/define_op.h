// define_op: the one way an op of the table is defined (docs/contributing.md, "adding an op"):
//
//   const OpDef& relu() {
//     return kernels::define_op([] { return same_shape<1>("relu", without_attrs(kernels::Relu{})); });
//   }
//
// `build` runs once, on the op's first use (thread-safe, as a function-local static). define_op checks what
// every op needs (a name, a shape rule and a CPU kernel), attaches its CUDA kernel when this build has one
// (kernels/cuda/, found by the op's name), and keeps the definition for the life of the program. Each lambda
// is a type of its own, so each accessor gets a definition of its own. Internal to kernels/.
#pragma once

#include "dtr/op.h"

namespace dtr::kernels {

// `def` checked (dtr::InvalidArgument naming what is missing) and with its CUDA kernel.
OpDef finish_op(OpDef def);

template <typename Build>
const OpDef& define_op(Build build) {
  static const OpDef def = finish_op(build());
  return def;
}

}  // namespace dtr::kernels
