// A test op over simulated memory (what dtr-sim replays): it touches no memory and costs its "cost" attribute;
// its output is a new buffer of "bytes" bytes (default: its first input's element count) or, with "view" set,
// a view of its first input.
#pragma once

#include "dtr/op.h"

namespace dtr::test {

inline const OpDef& timed_op() {
  static const OpDef op{
      .name = "timed",
      .infer =
          [](std::span<const TensorMeta> in, const Attrs& attrs) {
            if (attrs.has("view")) return TensorMetas{in[0]};
            const std::int64_t bytes = attrs.has("bytes") ? attrs.get_int("bytes") : in[0].numel();
            return TensorMetas{TensorMeta{{bytes}, DType::uint8}};
          },
      .cpu_kernel = [](const KernelArgs&) {},
      .flops = nullptr,
      .known_cost = [](std::span<const TensorMeta>, const Attrs& attrs) { return attrs.get_real("cost"); },
      .touches_memory = false,
      .views =
          [](std::span<const TensorMeta>, const Attrs& attrs) {
            OutputViews views(1);
            if (attrs.has("view")) views[0] = ViewOf{0, 0};
            return views;
          },
  };
  return op;
}

}  // namespace dtr::test
