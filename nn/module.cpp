// Module and Sequential (include/dtr/nn/module.h).
#include "dtr/nn/module.h"

#include <algorithm>
#include <typeinfo>

#include "dtr/check.h"
#include "dtr/nn/layers.h"

namespace dtr::nn {

namespace {

template <typename List>
bool has_name(const List& list, const std::string& name) {
  return std::any_of(list.begin(), list.end(), [&](const auto& item) { return item.first == name; });
}

}  // namespace

void Module::check_new_name(const std::string& name) const {
  DTR_CHECK(!name.empty() && name.find('.') == std::string::npos, InvalidArgument, "module: the name '", name,
            "' is empty or holds a '.'");
  DTR_CHECK(!has_name(parameters_, name) && !has_name(buffers_, name) && !has_name(children_, name),
            InvalidArgument, "module: '", name, "' is registered already");
}

Variable Module::register_parameter(std::string name, Variable parameter) {
  check_new_name(name);
  DTR_CHECK(parameter.defined(), InvalidArgument, "register_parameter: '", name, "' is undefined");
  DTR_CHECK(parameter.is_leaf(), InvalidArgument, "register_parameter: '", name,
            "' is not a leaf (detach() it first)");
  parameter.set_requires_grad(true);
  parameters_.emplace_back(std::move(name), parameter);
  return parameter;
}

Variable Module::register_buffer(std::string name, Variable buffer) {
  check_new_name(name);
  DTR_CHECK(buffer.defined(), InvalidArgument, "register_buffer: '", name, "' is undefined");
  DTR_CHECK(!buffer.requires_grad(), InvalidArgument, "register_buffer: '", name, "' requires a gradient");
  buffers_.emplace_back(std::move(name), buffer);
  return buffer;
}

void Module::add_child(std::string name, std::shared_ptr<Module> module) {
  check_new_name(name);
  DTR_CHECK(module != nullptr, InvalidArgument, "register_module: '", name, "' is null");
  module->train(training_);
  children_.emplace_back(std::move(name), std::move(module));
}

std::vector<std::pair<std::string, Variable>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Variable>> result = parameters_;
  for (const auto& [name, child] : children_) {
    for (auto& [sub, p] : child->named_parameters()) result.emplace_back(name + "." + sub, std::move(p));
  }
  return result;
}

std::vector<Variable> Module::parameters() const {
  std::vector<Variable> result;
  for (auto& [name, p] : named_parameters()) result.push_back(std::move(p));
  return result;
}

std::vector<std::pair<std::string, Variable>> Module::named_buffers() const {
  std::vector<std::pair<std::string, Variable>> result = buffers_;
  for (const auto& [name, child] : children_) {
    for (auto& [sub, b] : child->named_buffers()) result.emplace_back(name + "." + sub, std::move(b));
  }
  return result;
}

void Module::train(bool training) {
  training_ = training;
  for (const auto& [name, child] : children_) child->train(training);
}

void Module::zero_grad(bool set_to_none) {
  for (auto& [name, p] : named_parameters()) {
    if (!p.grad().defined()) continue;
    p.set_grad(set_to_none ? Tensor() : p.runtime().constant(p.meta()));
  }
}

Sequential::Sequential(std::vector<std::shared_ptr<Module>> modules) {
  for (auto& m : modules) push_back(std::move(m));
}

const std::shared_ptr<Module>& Sequential::operator[](std::size_t i) const {
  DTR_CHECK(i < modules_.size(), InvalidArgument, "Sequential[", i, "]: it holds ", modules_.size(), " modules");
  return modules_[i];
}

void Sequential::push_back(std::shared_ptr<Module> module) {
  register_module(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

namespace {

bool is_relu(const Module& module) { return typeid(module) == typeid(ReLU); }

}  // namespace

Variable forward_in_order(std::span<const std::shared_ptr<Module>> modules, const Variable& x) {
  Variable y = x;
  for (std::size_t i = 0; i < modules.size(); ++i) {
    // Exact types only: a subclass may mean something else by forward.
    Module& here = *modules[i];
    const bool bn_relu = i + 1 < modules.size() && typeid(here) == typeid(BatchNorm2d) && is_relu(*modules[i + 1]);
    if (bn_relu) {
      y = static_cast<BatchNorm2d&>(here).forward_relu(y);
      ++i;
      continue;
    }
    y = here.forward(y);
  }
  return y;
}

Variable Sequential::forward(const Variable& input) { return forward_in_order(modules_, input); }

}  // namespace dtr::nn
