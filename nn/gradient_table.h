// The gradient rule table and what the rules of each op family share. Internal to nn/.
#pragma once

#include <initializer_list>
#include <unordered_map>
#include <vector>

#include "dtr/gradients.h"
#include "dtr/ops.h"

namespace dtr::nn {

// Each rule with what it reads; a family file adds its ops with add().
class GradientTable {
 public:
  struct Entry {
    GradientRule rule;
    SavedForBackward saved;
  };
  void add(const OpDef& op, SavedForBackward saved, GradientRule rule) { entries_[&op] = Entry{std::move(rule), saved}; }
  const Entry* find(const OpDef& op) const {
    const auto found = entries_.find(&op);
    return found == entries_.end() ? nullptr : &found->second;
  }

 private:
  std::unordered_map<const OpDef*, Entry> entries_;
};

// Bit masks for SavedForBackward: bits(0, 2) reads inputs (or outputs) 0 and 2.
constexpr std::uint32_t bits() { return 0; }
template <typename... More>
constexpr std::uint32_t bits(std::uint32_t first, More... more) {
  return (1U << first) | bits(static_cast<std::uint32_t>(more)...);
}

// Each op family adds its rules, one file per family, named as in kernels/ and kernels/cuda/.
void add_elementwise_rules(GradientTable& table);     // arithmetic, activations, reductions, broadcasts, dropout
void add_dense_rules(GradientTable& table);           // matrix products, convolution, pooling
void add_normalization_rules(GradientTable& table);   // softmax, losses, normalizations, embedding
void add_layout_rules(GradientTable& table);          // reshape, slice, split, concat, transpose, permute

// The output gradient i, or zeros of output i's shape when it is undefined.
Tensor output_grad(const GradientContext& context, std::size_t i);
// One-output op on the context's runtime.
Tensor call(const GradientContext& context, const OpDef& op, std::initializer_list<Tensor> inputs,
            const Attrs& attrs = {});
// `grad` summed down to `shape` when a broadcast made it larger; `grad` itself otherwise.
Tensor reduce_to(const GradientContext& context, const Tensor& grad, const Shape& shape);
// The shapes of input i and output i.
inline const Shape& input_shape(const GradientContext& context, std::size_t i) { return context.input_meta[i].shape; }
inline const Shape& output_shape(const GradientContext& context, std::size_t i) { return context.output_meta[i].shape; }
// An int-list attribute value from a shape.
std::vector<std::int64_t> to_ints(const Shape& shape);

}  // namespace dtr::nn
