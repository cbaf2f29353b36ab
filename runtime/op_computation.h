// The op table as a source of closures: an OpDef with the attributes it was called with and its captured
// random seed, run on the runtime's backend. Internal to runtime/; other sources implement dtr::Computation
// themselves (include/dtr/computation.h).
//
// Thread safety: as the runtime that owns it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "dtr/computation.h"
#include "dtr/op.h"
#include "runtime/backend.h"
#include "runtime/kernel_times.h"

namespace dtr::detail {

class OpComputation final : public Computation {
 public:
  OpComputation(const OpDef& op, Attrs attrs, std::uint64_t seed, Backend& backend)
      : op_(op), attrs_(std::move(attrs)), seed_(seed), backend_(backend) {}

  std::string_view name() const override { return op_.name; }
  void run(const KernelArgs& args) override { backend_.run(op_, with_attrs(args)); }
  std::optional<double> known_cost(std::span<const TensorMeta> inputs) const override {
    if (!op_.known_cost) return std::nullopt;
    return op_.known_cost(inputs, attrs_);
  }
  double flops(std::span<const TensorMeta> inputs) const override {
    return op_.flops ? op_.flops(inputs, attrs_) : 1.0;
  }
  std::uint64_t cost_signature() const override {
    if (!attrs_hash_) attrs_hash_ = hash_attrs(attrs_);
    return *attrs_hash_;
  }
  // OpDef::check_values, which the runtime calls on the first run's resident inputs before any output exists.
  bool checks_values() const { return op_.check_values != nullptr; }
  void check_values(const KernelArgs& args) const { op_.check_values(with_attrs(args)); }
  bool touches_memory() const override { return op_.touches_memory; }
  const OpDef& op() const { return op_; }
  // The runtime's arguments with this call's attributes and seed, which the kernels read.
  KernelArgs with_attrs(const KernelArgs& args) const {
    return KernelArgs{args.input_meta, args.inputs, args.output_meta, args.outputs, attrs_, seed_, args.workspace};
  }

 private:

  const OpDef& op_;
  const Attrs attrs_;
  const std::uint64_t seed_;
  Backend& backend_;
  mutable std::optional<std::uint64_t> attrs_hash_;  // cost_signature, hashed when first asked
};

}  // namespace dtr::detail
