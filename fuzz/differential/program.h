// Random programs for differential testing (issue 16): a program mixes the runtime's ops (views, in-place
// updates, random ops, multi-output ops, handles dropped) with autograd (backward passes) and optimizer steps.
// Run without a budget it is the oracle; run under any budget, heuristic and budget mode it must read the
// same bits (differential.h). A program is plain data, so a failing one can be shrunk instruction by
// instruction and printed as a reproducer that parse_program reads back.
//
// Thread safety: plain values; the functions keep no state.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dtr::differential {

enum class OpKind : std::uint8_t {
  parameter,  // out = a leaf [x, y] that requires a gradient (values from the program's seed)
  input,      // out = a constant [x, y], no gradient
  add, sub, mul,             // out = a op b (same shape), through autograd
  relu, tanh, gelu, scale,   // out = op(a), through autograd
  matmul,     // out = a [m, k] @ b [k, n], through autograd
  sum_rows,   // out = sum of a over its first axis
  dropout,    // out = dropout(a, p = 0.25) in training mode: a random op under autograd
  split,      // out, out + 1 = a's rows [0, x) and [x, rows): two outputs
  concat,     // out = a and b stacked along the first axis
  transpose,  // out = a transposed (2-d)
  flatten,    // out = a reshaped to one axis
  uniform,    // out = uniform [0, 1) shaped as a: the runtime's random op, no autograd
  view_rows,  // out = a view of a's rows from x on (no copy, no autograd)
  assign,     // a = a + b in place (Runtime::assign); a has no gradient and is not a view
  evict,      // a's storage is evicted now if it can be (Runtime::evict), whatever the budget
  drop,       // a's handle is dropped
  read,       // a is read back to the host (an observation)
  backward,   // sum(a).backward(): the loss is observed, gradients accumulate into the parameters
  step,       // the optimizer steps over the parameters made so far, then zeroes their gradients
};

struct Instruction {
  OpKind kind = OpKind::input;
  std::uint32_t out = 0;  // the first value this instruction makes (ops that make none: unused)
  std::uint32_t a = 0;    // operands: value ids
  std::uint32_t b = 0;
  std::int64_t x = 0;     // sizes: parameter/input rows, split's first part, view_rows' first row
  std::int64_t y = 0;     // parameter/input columns
  bool operator==(const Instruction&) const = default;
};

enum class OptimizerKind : std::uint8_t { sgd, adam };

struct Program {
  std::uint64_t seed = 0;  // the values of parameters and inputs
  OptimizerKind optimizer = OptimizerKind::sgd;
  std::vector<Instruction> instructions;
};

struct GeneratorOptions {
  int length = 200;      // instructions
  int max_dim = 16;      // sizes drawn from [1, max_dim]
  int max_live = 40;     // handles dropped beyond this many live values
  // Training steps: the `length` instructions generated are a step's body, run `steps` times over the same
  // parameters (made once, first), each step on values of its own, dropped at its end but in the last step, as
  // training repeats one step; so the forecast heuristic forecasts (its steady state) from the second or third.
  int steps = 1;
  // Chains: a unary op (relu, tanh, gelu, scale, dropout) runs 1 to max_chain times in a row on its own result,
  // the inner values released as they are read, so that evicted regions grow deep (the walks' depth and marks);
  // 1 draws nothing, so a seed's program is what it was before chains.
  int max_chain = 1;
};

// The program of `seed`: the same seed is the same program on every machine.
Program generate(std::uint64_t seed, const GeneratorOptions& options = {});
// A program whose every choice is read from `bytes` (zeros once they run out): libFuzzer's input.
Program decode(std::span<const std::uint8_t> bytes, const GeneratorOptions& options = {});

// How many values an instruction makes (split 2, parameter..view_rows 1, the rest 0).
int outputs_of(OpKind kind);
const char* to_string(OpKind kind);

// One instruction a line ("v3 = matmul v1 v2", "v5 v6 = split v4 3", "assign v1 v2", "step"), after a header
// naming the seed and the optimizer. parse_program reads it back; a malformed line is a dtr::InvalidArgument
// naming `source` and the line.
std::string to_text(const Program& program);
Program parse_program(std::string_view text, const std::string& source);

}  // namespace dtr::differential
