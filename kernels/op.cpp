#include "dtr/op.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>

#include "dtr/check.h"

namespace dtr {

std::size_t element_size(DType dtype) {
  switch (dtype) {
    case DType::float32:
      return sizeof(float);
    case DType::uint8:
      return 1;
    case DType::float64:
      return sizeof(double);
    case DType::int64:
      return sizeof(std::int64_t);
  }
  DTR_THROW(InvalidArgument, "unknown dtype ", static_cast<int>(dtype));
}

const char* to_string(DType dtype) {
  switch (dtype) {
    case DType::float32:
      return "float32";
    case DType::uint8:
      return "uint8";
    case DType::float64:
      return "float64";
    case DType::int64:
      return "int64";
  }
  DTR_THROW(InvalidArgument, "unknown dtype ", static_cast<int>(dtype));
}

std::string to_string(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

std::int64_t TensorMeta::numel() const {
  std::int64_t count = 1;
  bool negative = false;
  bool overflow = false;
  for (const std::int64_t dim : shape) {
    negative = negative || dim < 0;
    overflow = __builtin_mul_overflow(count, dim, &count) || overflow;
  }
  DTR_CHECK(!negative, ShapeError, "shape ", to_string(shape), " has a negative dimension");
  if (!overflow) return count;
  for (const std::int64_t dim : shape) {
    if (dim == 0) return 0;  // empty, however large the other dimensions
  }
  DTR_THROW(ShapeError, "shape ", to_string(shape), " has more elements than 64 bits count (2^63 - 1 at most)");
}

std::size_t TensorMeta::nbytes() const {
  std::int64_t bytes = 0;
  DTR_CHECK(!__builtin_mul_overflow(numel(), static_cast<std::int64_t>(element_size(dtype)), &bytes), ShapeError,
            to_string(dtype), " tensor of shape ", to_string(shape),
            " has more bytes than 64 bits count (2^63 - 1 at most)");
  return static_cast<std::size_t>(bytes);
}

namespace {

// Names for the alternatives of Attrs::Value, in its order, for type mismatch messages.
constexpr std::array<const char*, std::variant_size_v<Attrs::Value>> kValueTypeNames = {"an int", "a real",
                                                                                        "an int list"};

// One lookup for const and mutable access alike.
template <typename Values>
auto find_entry(Values& values, const std::string& name) {
  return std::ranges::find(values, name, &Attrs::Item::first);
}

const std::vector<Attrs::Item> no_items;

template <typename T>
const T& get_as(const Attrs::Value& value, const std::string& name) {
  const T* typed = std::get_if<T>(&value);
  DTR_CHECK(typed != nullptr, InvalidArgument, "attribute '", name, "' is ", kValueTypeNames[value.index()],
            ", not ", kValueTypeNames[Attrs::Value(std::in_place_type<T>).index()]);
  return *typed;
}

}  // namespace

Attrs::Attrs(std::initializer_list<std::pair<std::string, Value>> values) {
  if (values.size() == 0) return;
  values_ = std::make_shared<std::vector<Item>>();
  values_->reserve(values.size());  // one block for the list, not one per growth
  for (const auto& [name, value] : values) set(name, value);
}

Attrs& Attrs::set(const std::string& name, Value value) {
  if (values_ == nullptr) {
    values_ = std::make_shared<std::vector<Item>>();
  } else if (values_.use_count() > 1) {  // another copy sees the list: change a list of our own
    values_ = std::make_shared<std::vector<Item>>(*values_);
  }
  const auto existing = find_entry(*values_, name);
  if (existing != values_->end()) {
    existing->second = std::move(value);
  } else {
    values_->emplace_back(name, std::move(value));
  }
  return *this;
}

const std::vector<Attrs::Item>& Attrs::items() const { return values_ == nullptr ? no_items : *values_; }

bool Attrs::has(const std::string& name) const {
  const std::vector<Item>& values = items();
  return find_entry(values, name) != values.end();
}

const Attrs::Value& Attrs::find(const std::string& name) const {
  const std::vector<Item>& values = items();
  const auto found = find_entry(values, name);
  DTR_CHECK(found != values.end(), InvalidArgument, "attribute '", name, "' is missing");
  return found->second;
}

std::int64_t Attrs::get_int(const std::string& name) const { return get_as<std::int64_t>(find(name), name); }

double Attrs::get_real(const std::string& name) const { return get_as<double>(find(name), name); }
std::int64_t Attrs::get_int(const std::string& name, std::int64_t fallback) const {
  return has(name) ? get_int(name) : fallback;
}
double Attrs::get_real(const std::string& name, double fallback) const {
  return has(name) ? get_real(name) : fallback;
}

const std::vector<std::int64_t>& Attrs::get_ints(const std::string& name) const {
  return get_as<std::vector<std::int64_t>>(find(name), name);
}

}  // namespace dtr
