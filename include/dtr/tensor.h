// dtr::Tensor: a user's handle to a value the runtime computed or was given. Copies share the value. While
// any handle to it lives, the value stays reachable: it may be evicted and is recomputed when read. When the
// last handle dies, its memory goes at once (eager eviction); it stays in the lineage while later values
// still need it for their own recomputation.
//
// Thread safety: a tensor belongs to its runtime's thread.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "dtr/op.h"

namespace dtr {

class Runtime;

namespace detail {
struct TensorHandle;
}

class Tensor {
 public:
  Tensor() = default;  // undefined: holds nothing

  bool defined() const { return handle_ != nullptr; }
  const TensorMeta& meta() const;
  const Shape& shape() const { return meta().shape; }
  std::int64_t numel() const { return meta().numel(); }

  // The values, rematerializing them if they were evicted: to_host() for float32, to_host_as<T>() for any
  // dtype (T its C++ type: float, double, std::int64_t, std::uint8_t). dtr::InvalidArgument when T is not
  // the tensor's type, or the tensor lives in simulated memory.
  std::vector<float> to_host() const { return to_host_as<float>(); }
  template <typename T>
  std::vector<T> to_host_as() const;
  // Whether it is a view of part or all of another tensor's storage (Runtime::view).
  bool is_view() const;
  // Whether it is a constant: a value with no producer (Runtime::constant, or a value assigned to a constant),
  // never evicted.
  bool is_constant() const;
  // Whether the values are in memory now (false once evicted, until they are recomputed).
  bool resident() const;
  // The bytes of the storage it is (a view: the storage it is part of).
  std::size_t storage_bytes() const;
  // Whether this is the only reference to its values: no copy of this Tensor (copies alias one handle), no
  // other tensor or view on its storage, and not a view itself. What lets a caller take a value over instead
  // of copying it, as autograd does with a leaf's first gradient (PyTorch's AccumulateGrad steals one too).
  bool sole_reference() const;

 private:
  friend class Runtime;
  explicit Tensor(std::shared_ptr<detail::TensorHandle> handle) : handle_(std::move(handle)) {}
  std::shared_ptr<detail::TensorHandle> handle_;
};

extern template std::vector<float> Tensor::to_host_as<float>() const;
extern template std::vector<double> Tensor::to_host_as<double>() const;
extern template std::vector<std::int64_t> Tensor::to_host_as<std::int64_t>() const;
extern template std::vector<std::uint8_t> Tensor::to_host_as<std::uint8_t>() const;

}  // namespace dtr
