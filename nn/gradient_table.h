// The gradient rule table and what the rules of each op family share. Internal to nn/.
#pragma once

#include <initializer_list>
#include <unordered_map>
#include <vector>

#include "dtr/gradients.h"
#include "dtr/ops.h"

namespace dtr::nn {

using GradientTable = std::unordered_map<const OpDef*, GradientRule>;

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
// `grad` summed down to `like`'s shape when a broadcast made it larger; `grad` itself otherwise.
Tensor reduce_to(const GradientContext& context, const Tensor& grad, const Tensor& like);
// An int-list attribute value from a shape.
std::vector<std::int64_t> to_ints(const Shape& shape);

}  // namespace dtr::nn
