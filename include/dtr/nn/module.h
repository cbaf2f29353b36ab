// Modules (PyTorch's torch.nn.Module): a forward function with named parameters (leaf variables that require
// gradients), buffers (variables that do not: BatchNorm's running statistics) and child modules. Names are
// dotted paths in registration order ("blocks.0.conv1.weight"), the keys of a state dict
// (include/dtr/nn/state_dict.h).
//
// Ownership: a module owns its children (shared, so a model can hold a layer and a Sequential the same one);
// parameters are variables, shared with whoever reads them (optimizers). Thread safety: one thread at a time.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "dtr/nn/autograd.h"

namespace dtr::nn {

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  virtual Variable forward(const Variable& input) = 0;
  Variable operator()(const Variable& input) { return forward(input); }

  // This module's and its descendants', depth first in registration order.
  std::vector<std::pair<std::string, Variable>> named_parameters() const;
  std::vector<Variable> parameters() const;
  std::vector<std::pair<std::string, Variable>> named_buffers() const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const { return children_; }

  // Training mode (dropout draws, BatchNorm uses and updates batch statistics) or evaluation; recursive.
  void train(bool training = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Every parameter's gradient zeroed (a fresh zero constant: a gradient another variable shares is left
  // alone), or dropped when `set_to_none` (its memory freed at once).
  void zero_grad(bool set_to_none = false);

 protected:
  // Each returns what it registered; a repeated name or an undefined variable is dtr::InvalidArgument.
  Variable register_parameter(std::string name, Variable parameter);
  Variable register_buffer(std::string name, Variable buffer);
  template <typename M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> module) {
    add_child(std::move(name), module);
    return module;
  }

 private:
  void add_child(std::string name, std::shared_ptr<Module> module);
  void check_new_name(const std::string& name) const;

  std::vector<std::pair<std::string, Variable>> parameters_;
  std::vector<std::pair<std::string, Variable>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

// Calls `modules` one after the other on x, a BatchNorm2d directly followed by a ReLU as one op
// (BatchNorm2d::forward_relu: the bits, gradients and running statistics of the two calls, with one op and one
// stored output fewer). Sequential::forward and checkpoint_sequential's segments run their modules so.
Variable forward_in_order(std::span<const std::shared_ptr<Module>> modules, const Variable& x);

// Modules called one after the other (forward_in_order); children named "0", "1", ...
class Sequential : public Module {
 public:
  Sequential() = default;
  explicit Sequential(std::vector<std::shared_ptr<Module>> modules);
  void push_back(std::shared_ptr<Module> module);
  std::size_t size() const { return modules_.size(); }
  // dtr::InvalidArgument past the end.
  const std::shared_ptr<Module>& operator[](std::size_t i) const;
  const std::vector<std::shared_ptr<Module>>& modules() const { return modules_; }
  Variable forward(const Variable& input) override;

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

}  // namespace dtr::nn
