// dtr::Tensor's methods: a user handle's view of its storage.
#include "dtr/tensor.h"

#include "dtr/check.h"
#include "runtime/runtime_impl.h"

namespace dtr {

const TensorMeta& Tensor::meta() const {
  DTR_CHECK(defined(), InvalidArgument, "the tensor is undefined");
  return handle_->meta;
}

template <typename T>
std::vector<T> Tensor::to_host_as() const {
  DTR_CHECK(defined(), InvalidArgument, "to_host: the tensor is undefined");
  detail::Storage& s = *handle_->storage;
  DTR_CHECK(s.runtime.kernel_memory, InvalidArgument, "to_host: the tensor lives in simulated memory");
  DTR_CHECK(handle_->meta.dtype == DTypeOf<T>::value, InvalidArgument, "to_host: the tensor is ",
            to_string(handle_->meta.dtype), ", not ", to_string(DTypeOf<T>::value));
  const Runtime::Impl::CurrentOp reading(s.runtime, "to_host");  // an out-of-memory error names it
  if (s.runtime.forecaster) s.runtime.forecaster->program_read(s);
  s.runtime.materialize_view(s, handle_->view);
  std::vector<T> values(static_cast<std::size_t>(handle_->meta.numel()));
  s.runtime.backend->copy_to_host(values.data(), s.data + handle_->offset * sizeof(T), handle_->meta.nbytes());
  return values;
}

template std::vector<float> Tensor::to_host_as<float>() const;
template std::vector<double> Tensor::to_host_as<double>() const;
template std::vector<std::int64_t> Tensor::to_host_as<std::int64_t>() const;
template std::vector<std::uint8_t> Tensor::to_host_as<std::uint8_t>() const;

std::size_t Tensor::storage_bytes() const {
  DTR_CHECK(defined(), InvalidArgument, "storage_bytes: the tensor is undefined");
  return handle_->storage->nbytes;
}

bool Tensor::is_view() const {
  return defined() && (handle_->view != 0 || handle_->offset != 0 || !(handle_->meta == handle_->storage->meta));
}

bool Tensor::sole_reference() const {
  return defined() && handle_.use_count() == 1 && handle_->storage->handles == 1 && !is_view();
}

bool Tensor::is_constant() const { return defined() && handle_->storage->producer == nullptr; }

bool Tensor::resident() const { return defined() && handle_->storage->in_memory; }

}  // namespace dtr
