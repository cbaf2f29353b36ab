// Ops as the runtime sees them: a name, a shape rule, a kernel per device, and cost counts for the
// deterministic cost models. A kernel sees raw contiguous buffers and shapes, nothing of lineage, so the same
// OpDef serves first runs and rematerializations, and later a PyTorch dispatcher can supply its own.
//
// Thread safety: OpDefs are immutable after construction and may be shared between threads and runtimes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "dtr/small_vector.h"

namespace dtr {

// Dimensions, outermost first. Up to 6 live inside the shape: no heap allocation for the ranks training uses.
using Shape = SmallVector<std::int64_t, 6>;

// float32: what training computes in. float64: the same ops in double precision (the gradient checks'
// reference). int64: integer labels and indices. uint8: bytes; the replayed ops of dtr-sim use it for tensors
// only the size of which matters. Each op's shape rule says which dtypes it takes.
enum class DType : std::uint8_t { float32, uint8, float64, int64 };

// The dtype whose elements are T: DTypeOf<float>::value is DType::float32.
template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::float32;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::float64;
};
template <>
struct DTypeOf<std::int64_t> {
  static constexpr DType value = DType::int64;
};
template <>
struct DTypeOf<std::uint8_t> {
  static constexpr DType value = DType::uint8;
};

std::size_t element_size(DType dtype);
const char* to_string(DType dtype);
std::string to_string(const Shape& shape);  // "[2, 3]"; "[]" for a scalar

// The shape and type of a contiguous tensor.
struct TensorMeta {
  Shape shape;
  DType dtype = DType::float32;

  // 1 for a scalar (shape []). Throws dtr::ShapeError on a negative dimension, and when the element count (or,
  // for nbytes, the byte count) does not fit in a signed 64-bit integer.
  std::int64_t numel() const;
  std::size_t nbytes() const;
  friend bool operator==(const TensorMeta&, const TensorMeta&) = default;
};

// An op's output shapes: most ops have one, a few several; none needs the heap.
using TensorMetas = SmallVector<TensorMeta, 4>;

// An op's attributes: named integers, reals and integer lists. Ordered by insertion; names are unique.
// Copies share one list until one of them is changed (copy on write): the runtime's closure and autograd's
// node each keep the call's attributes, and copying them must not cost an allocation per op.
// Thread safety: copies may be read from any thread; set() changes only the Attrs it is called on.
class Attrs {
 public:
  using Value = std::variant<std::int64_t, double, std::vector<std::int64_t>>;
  using Item = std::pair<std::string, Value>;

  Attrs() = default;
  Attrs(std::initializer_list<std::pair<std::string, Value>> values);  // a repeated name keeps its last value

  Attrs& set(const std::string& name, Value value);
  bool has(const std::string& name) const;
  // Each throws dtr::InvalidArgument naming the attribute when it is missing or of another type.
  std::int64_t get_int(const std::string& name) const;
  double get_real(const std::string& name) const;
  // The same, or `fallback` when the attribute is absent (still InvalidArgument when it has another type).
  std::int64_t get_int(const std::string& name, std::int64_t fallback) const;
  double get_real(const std::string& name, double fallback) const;
  // A 0/1 attribute: get_int(name, 0) != 0.
  bool get_flag(const std::string& name) const { return get_int(name, 0) != 0; }
  const std::vector<std::int64_t>& get_ints(const std::string& name) const;

  const std::vector<Item>& items() const;

 private:
  const Value& find(const std::string& name) const;
  std::shared_ptr<std::vector<Item>> values_;  // null when empty; shared by copies, cloned by set() when shared
};

// Scratch memory a kernel may ask for while it runs (a cuDNN convolution's workspace): on the kernel's
// device, from the runtime's allocator and within its budget, released when the kernel returns. A CUDA
// kernel's work is ordered on the device's stream, so the memory may be reused by whatever is enqueued after.
class Workspace {
 public:
  virtual ~Workspace() = default;
  // `bytes` of scratch, aligned for any element type; valid until the kernel returns. Throws
  // dtr::OutOfMemory when it does not fit in the budget (after evicting what the budget needs).
  virtual void* get(std::size_t bytes) = 0;
};

// What a kernel gets: contiguous buffers with their shapes and dtypes. `seed` is the op's captured random
// state (0 for deterministic ops): the same seed must give the same bits.
struct KernelArgs {
  std::span<const TensorMeta> input_meta;
  std::span<const void* const> inputs;
  std::span<const TensorMeta> output_meta;
  std::span<void* const> outputs;
  const Attrs& attrs;
  std::uint64_t seed = 0;
  // Scratch memory on the kernel's device; nullptr where none can be had (a kernel called outside a runtime),
  // and then a kernel that needs scratch throws dtr::InvalidArgument.
  Workspace* workspace = nullptr;

  // Buffer i as elements of T, which must be the C++ type of its dtype.
  template <typename T>
  const T* input(std::size_t i) const {
    return static_cast<const T*>(inputs[i]);
  }
  template <typename T>
  T* output(std::size_t i) const {
    return static_cast<T*>(outputs[i]);
  }
};

// An output that is a view of one of the op's inputs (a reshape, a run of rows): no buffer of its own, its
// elements are that input's from `offset` on.
struct ViewOf {
  std::size_t input = 0;
  std::int64_t offset = 0;  // in elements, from the start of the input
};
// Per output: the input it views, or nullopt for an output with its own buffer.
using OutputViews = SmallVector<std::optional<ViewOf>, 2>;

struct OpDef {
  std::string name;
  // Output shapes from input shapes; throws dtr::ShapeError naming the op and the shapes when they do not fit.
  std::function<TensorMetas(std::span<const TensorMeta> inputs, const Attrs& attrs)> infer;
  std::function<void(const KernelArgs& args)> cpu_kernel;
  // The same computation on a CUDA device, or nullptr when the op has none (a runtime on a CUDA device then
  // refuses the op with dtr::DeviceError). The buffers are device memory of the current device; the kernel
  // enqueues its work on that device's default stream, where the runtime orders every kernel and copy, and
  // may return before the work is done. It must be deterministic as the CPU kernel is (no atomics on floats),
  // but need not give the CPU kernel's bits: backend parity is checked to a tolerance.
  std::function<void(const KernelArgs& args)> cuda_kernel = nullptr;
  // Floating-point operations, for DTR_COST_MODEL=flops.
  std::function<double(std::span<const TensorMeta> inputs, const Attrs& attrs)> flops;
  // True when the op draws random numbers: the runtime captures a seed in its closure.
  bool random = false;
  // When set, the op's cost under every cost model (a replayed op costs the time its log recorded).
  std::function<double(std::span<const TensorMeta> inputs, const Attrs& attrs)> known_cost = nullptr;
  // False for a kernel that touches no buffer (a replayed op): such an op also runs over simulated memory,
  // and takes tensors of any dtype; the others need memory their kernels can touch (host or CUDA device
  // memory, not simulated) and take the dtypes their shape rule accepts (see DType).
  bool touches_memory = true;
  // When set, the outputs it maps to a ViewOf are views of inputs. The kernel writes only the other outputs
  // (KernelArgs holds those alone). The op's cost joins the viewed storage's cost: a recomputation of that
  // storage undoes the view, which is made again (and its cost paid again) when it is next used.
  std::function<OutputViews(std::span<const TensorMeta> inputs, const Attrs& attrs)> views = nullptr;
  // When set, checks what a shape rule cannot see: input values (label and index ranges). The runtime calls
  // it with the inputs resident and no outputs (KernelArgs::outputs empty), before any output is allocated;
  // it throws dtr::ShapeError naming the op and what is wrong.
  std::function<void(const KernelArgs& args)> check_values = nullptr;
  // True when the output may be written over the first input's buffer: each output element reads only the
  // first input's element at the same index (an elementwise op or an optimizer's update), and the kernel fails,
  // if ever, before it writes. Runtime::assign then updates its target in place where nothing else reads the
  // old value (docs/runtime.md, "In-place updates"), as PyTorch's optimizers do, instead of taking a new buffer
  // and leaving the old one's hole among the activations.
  bool overwrites_first_input = false;
};

}  // namespace dtr
