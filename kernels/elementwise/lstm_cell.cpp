// The fused LSTM cell and its backward op (include/dtr/ops.h): rows of the batch spread over the CPU kernels'
// threads, each row in chunks whose gates are activated by vector_math.h's routines (float32) or
// elementwise_math.h's functors (float64) — what the unfused sigmoid and tanh ops run, so the forward gives
// their bits — and then combined element by element by elementwise_math.h's cell expressions.
#include <algorithm>
#include <cstdint>

#include "dtr/ops.h"
#include "kernels/cpu_threads.h"
#include "kernels/define_op.h"
#include "kernels/elementwise/elementwise_math.h"
#include "kernels/elementwise/vector_math.h"
#include "kernels/op_checks.h"

namespace dtr::ops {
namespace {

// Columns of a row handled at once: the activated gates of a chunk stay in a few KiB of stack.
constexpr std::int64_t kChunk = 256;

void activate_sigmoid(const float* in, float* out, std::int64_t count) { kernels::sigmoid_floats(in, out, count); }
void activate_sigmoid(const double* in, double* out, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) out[i] = kernels::Sigmoid{}(in[i]);
}
void activate_tanh(const float* in, float* out, std::int64_t count) { kernels::tanh_floats(in, out, count); }
void activate_tanh(const double* in, double* out, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) out[i] = kernels::Tanh{}(in[i]);
}

// The activated gates of columns [k, k + count) of one row, and c' and tanh(c') from them.
template <typename T>
struct CellChunk {
  T i[kChunk], f[kChunk], g[kChunk], o[kChunk], state[kChunk], tanh_state[kChunk];

  void compute(const T* gates_row, const T* c_row, std::int64_t hidden, std::int64_t k, std::int64_t count) {
    activate_sigmoid(gates_row + k, i, count);
    activate_sigmoid(gates_row + hidden + k, f, count);
    activate_tanh(gates_row + 2 * hidden + k, g, count);
    activate_sigmoid(gates_row + 3 * hidden + k, o, count);
    for (std::int64_t j = 0; j < count; ++j) state[j] = kernels::lstm_cell_state(i[j], f[j], g[j], c_row[k + j]);
    activate_tanh(state, tanh_state, count);
  }
};

// Calls fn(row, k, count) over every chunk of every row, rows spread over the threads.
template <typename Fn>
void for_each_chunk(std::int64_t rows, std::int64_t hidden, Fn fn) {
  kernels::parallel_for_items(rows, rows * 4 * hidden, [&](std::int64_t row) {
    for (std::int64_t k = 0; k < hidden; k += kChunk) fn(row, k, std::min(kChunk, hidden - k));
  });
}

// gates [N, 4H] and c [N, H] of one floating dtype; `first` is the index of gates among the inputs.
std::int64_t checked_hidden(const char* name, std::span<const TensorMeta> inputs, std::size_t first) {
  const TensorMeta& gates = inputs[first];
  const TensorMeta& c = inputs[first + 1];
  DTR_CHECK_SHAPES(gates.shape.size() == 2 && c.shape.size() == 2 && gates.shape[0] == c.shape[0] &&
                       gates.shape[1] == 4 * c.shape[1],
                   name, inputs, "needs gates [N, 4H] and c [N, H]");
  return c.shape[1];
}

OpDef lstm_cell_op() {
  OpDef def;
  def.name = "lstm_cell";
  def.infer = [](std::span<const TensorMeta> inputs, const Attrs& /*attrs*/) {
    kernels::check_arity("lstm_cell", inputs, 2);
    kernels::check_floating("lstm_cell", inputs);
    static_cast<void>(checked_hidden("lstm_cell", inputs, 0));
    return TensorMetas{inputs[1], inputs[1]};
  };
  def.cpu_kernel = kernels::floating_kernel([]<typename T>(T /*zero*/, const KernelArgs& args) {
    const std::int64_t rows = args.input_meta[1].shape[0];
    const std::int64_t hidden = args.input_meta[1].shape[1];
    const T* gates = args.input<T>(0);
    const T* c = args.input<T>(1);
    T* h = args.output<T>(0);
    T* c_next = args.output<T>(1);
    for_each_chunk(rows, hidden, [&](std::int64_t row, std::int64_t k, std::int64_t count) {
      CellChunk<T> chunk;
      chunk.compute(gates + row * 4 * hidden, c + row * hidden, hidden, k, count);
      T* h_row = h + row * hidden + k;
      T* c_row = c_next + row * hidden + k;
      for (std::int64_t j = 0; j < count; ++j) {
        h_row[j] = chunk.o[j] * chunk.tanh_state[j];
        c_row[j] = chunk.state[j];
      }
    });
  });
  // Per element: four activations, the state's two products and sum, its tanh and the output's product.
  def.flops = [](std::span<const TensorMeta> inputs, const Attrs& /*attrs*/) {
    return kernels::at_least_one(10.0 * static_cast<double>(inputs[1].numel()));
  };
  return def;
}

OpDef lstm_cell_backward_op() {
  OpDef def;
  def.name = "lstm_cell_backward";
  def.infer = [](std::span<const TensorMeta> inputs, const Attrs& /*attrs*/) {
    kernels::check_arity("lstm_cell_backward", inputs, 4);
    kernels::check_floating("lstm_cell_backward", inputs);
    static_cast<void>(checked_hidden("lstm_cell_backward", inputs, 2));
    DTR_CHECK_SHAPES(inputs[0].shape == inputs[3].shape && inputs[1].shape == inputs[3].shape, "lstm_cell_backward",
                     inputs, "needs grad_h and grad_c' of c's shape");
    return TensorMetas{inputs[2], inputs[3]};
  };
  def.cpu_kernel = kernels::floating_kernel([]<typename T>(T /*zero*/, const KernelArgs& args) {
    const std::int64_t rows = args.input_meta[3].shape[0];
    const std::int64_t hidden = args.input_meta[3].shape[1];
    const T* grad_h = args.input<T>(0);
    const T* grad_state = args.input<T>(1);
    const T* gates = args.input<T>(2);
    const T* c = args.input<T>(3);
    T* grad_gates = args.output<T>(0);
    T* grad_c = args.output<T>(1);
    for_each_chunk(rows, hidden, [&](std::int64_t row, std::int64_t k, std::int64_t count) {
      CellChunk<T> chunk;
      const T* c_row = c + row * hidden + k;
      chunk.compute(gates + row * 4 * hidden, c + row * hidden, hidden, k, count);
      T* gg = grad_gates + row * 4 * hidden + k;
      for (std::int64_t j = 0; j < count; ++j) {
        const std::int64_t e = row * hidden + k + j;
        const auto d = kernels::lstm_cell_grads(grad_h[e], grad_state[e], chunk.i[j], chunk.f[j], chunk.g[j],
                                                chunk.o[j], c_row[j], chunk.tanh_state[j]);
        gg[j] = d.i;
        gg[hidden + j] = d.f;
        gg[2 * hidden + j] = d.g;
        gg[3 * hidden + j] = d.o;
        grad_c[e] = d.c;
      }
    });
  });
  // The forward's work again, and the gradients' products.
  def.flops = [](std::span<const TensorMeta> inputs, const Attrs& /*attrs*/) {
    return kernels::at_least_one(30.0 * static_cast<double>(inputs[3].numel()));
  };
  return def;
}

}  // namespace

// A lambda each: define_op keeps one definition per callable type.
const OpDef& lstm_cell() {
  return kernels::define_op([] { return lstm_cell_op(); });
}
const OpDef& lstm_cell_backward() {
  return kernels::define_op([] { return lstm_cell_backward_op(); });
}

}  // namespace dtr::ops
