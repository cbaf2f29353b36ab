#include "kernels/define_op.h"

#include "dtr/check.h"
#include "kernels/cuda/cuda_kernels.h"

namespace dtr::kernels {

OpDef finish_op(OpDef def) {
  DTR_CHECK(!def.name.empty(), InvalidArgument, "define_op: an op needs a name");
  DTR_CHECK(def.infer != nullptr, InvalidArgument, "define_op: op '", def.name, "' needs a shape rule (infer)");
  DTR_CHECK(def.cpu_kernel != nullptr, InvalidArgument, "define_op: op '", def.name,
            "' needs a CPU kernel (every op runs on the CPU)");
  return with_cuda_kernel(std::move(def));
}

}  // namespace dtr::kernels
