// Lookup of the built-in ops by name.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <span>

#include "dtr/check.h"
#include "dtr/ops.h"

namespace dtr {
namespace {

std::span<const OpDef* const> all_ops() {
  static const std::array table = {
      // elementwise
      &ops::add(), &ops::sub(), &ops::mul(), &ops::div(), &ops::relu(), &ops::relu_backward(), &ops::gelu(),
      &ops::gelu_backward(), &ops::tanh(), &ops::tanh_backward(), &ops::sigmoid(), &ops::sigmoid_backward(),
      &ops::lstm_cell(), &ops::lstm_cell_backward(),
      &ops::scale(), &ops::sum(), &ops::mean(), &ops::sum_to(), &ops::broadcast_to(), &ops::uniform(),
      &ops::dropout(), &ops::sgd_momentum_buffer(), &ops::sgd_apply(), &ops::adam_moment1(), &ops::adam_moment2(),
      &ops::adam_apply(),
      // dense
      &ops::matmul(), &ops::bmm(), &ops::linear(), &ops::linear_add(), &ops::attention(), &ops::attention_backward(), &ops::conv2d(), &ops::conv2d_backward_input(),
      &ops::conv2d_backward_weight(), &ops::max_pool2d(), &ops::max_pool2d_backward(), &ops::avg_pool2d(),
      &ops::avg_pool2d_backward(),
      // normalization
      &ops::softmax(), &ops::log_softmax(), &ops::softmax_backward(), &ops::log_softmax_backward(),
      &ops::cross_entropy(), &ops::cross_entropy_backward(), &ops::layer_norm(), &ops::layer_norm_backward(),
      &ops::batch_norm(), &ops::batch_norm_backward(), &ops::batch_norm_stats(), &ops::batch_norm_normalize(),
      &ops::batch_norm_eval(), &ops::batch_norm_eval_backward(),
      &ops::running_stat_update(), &ops::embedding(), &ops::embedding_backward(),
      // layout
      &ops::reshape(), &ops::slice(), &ops::slice_backward(), &ops::split(), &ops::concat(), &ops::transpose(),
      &ops::permute(), &ops::split2(), &ops::concat2()};
  return table;
}

}  // namespace

const OpDef& find_op(std::string_view name) {
  for (const OpDef* op : all_ops()) {
    if (op->name == name) return *op;
  }
  DTR_THROW(InvalidArgument, "unknown op '", name,
            "'; known ops: ", fmt::format("{}", fmt::join(op_names(), ", ")));
}

std::vector<std::string> op_names() {
  std::vector<std::string> names;
  for (const OpDef* op : all_ops()) names.push_back(op->name);
  return names;
}

}  // namespace dtr
