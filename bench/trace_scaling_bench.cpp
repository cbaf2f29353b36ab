// dtr-bench-trace-scaling: replay time per op against trace size, per program shape and heuristic (issue 16:
// no superlinear blow-up). Each shape is generated at --ops, 2x, 4x, ... and replayed under a budget of
// --ratio of its unbudgeted peak; a flat row (growth near 1) is what the issue asks for. The baseline of each
// row is the same heuristic on the smallest trace of the same shape, measured in the same run.
//
//   dtr-bench-trace-scaling [--ops 10000] [--doublings 3] [--ratio 0.5] [--repeat 3] [--shape S ...]
//                           [--heuristic H ...]
//
// Shapes: chain (the DTR paper's), fan-out (a chain whose every op, forward and backward, also reads one shared
// computed tensor: an unrolled RNN's weight), rnn, dag, resnet. Times are medians of --repeat replays; a cell
// that passed the thrash limit (2x) or ran out of memory is marked, its time covering the ops it ran.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "dtr/dtr.h"

namespace {

using dtr::sim::Instruction;
using dtr::sim::Trace;

// x[i+1] = f(x[i], w) for `layers` layers, w = t(w0) computed once, then the backward pass in reverse, each
// op reading the incoming gradient, the saved activation and w; every name released after its last use.
Trace fan_out_trace(std::uint64_t ops) {
  const std::uint64_t layers = std::max<std::uint64_t>(ops / 2, 1);
  Trace trace;
  trace.source = "fan-out";
  auto name = [&](const std::string& n) {
    trace.names.push_back(n);
    return static_cast<std::uint32_t>(trace.names.size() - 1);
  };
  auto constant = [&](std::uint32_t n, std::uint64_t bytes) {
    Instruction i;
    i.kind = Instruction::Kind::constant;
    i.name = n;
    i.bytes = bytes;
    trace.instructions.push_back(std::move(i));
  };
  auto call = [&](const char* op, std::vector<std::uint32_t> args, std::uint32_t result, double ns) {
    Instruction i;
    i.kind = Instruction::Kind::call;
    i.op = op;
    i.args = std::move(args);
    i.results.push_back({result, 64 << 10, -1});
    i.time_ns = ns;
    trace.instructions.push_back(std::move(i));
    trace.calls += 1;
  };
  auto release = [&](std::uint32_t n) {
    Instruction i;
    i.kind = Instruction::Kind::release;
    i.name = n;
    trace.instructions.push_back(std::move(i));
  };
  const std::uint32_t w0 = name("w0");
  constant(w0, 4096);
  const std::uint32_t w = name("w");
  call("t", {w0}, w, 100);
  std::vector<std::uint32_t> x{name("x0")};
  constant(x[0], 64 << 10);
  for (std::uint64_t i = 0; i < layers; ++i) {
    x.push_back(name("x" + std::to_string(i + 1)));
    call("f", {x[i], w}, x.back(), 1000);
  }
  std::uint32_t grad = x.back();
  for (std::uint64_t i = layers; i > 0; --i) {
    const std::uint32_t g = name("g" + std::to_string(i - 1));
    call("f_backward", {grad, x[i - 1], w}, g, 2000);
    release(grad);
    if (grad != x[i]) release(x[i]);
    grad = g;
  }
  return trace;
}

Trace make_trace(const std::string& shape, std::uint64_t ops) {
  using namespace dtr::sim;
  if (shape == "chain") return generate_chain(sized_for_ops(ChainOptions{}, ops));
  if (shape == "fan-out") return fan_out_trace(ops);
  if (shape == "rnn") return generate_rnn(sized_for_ops(RnnOptions{}, ops));
  if (shape == "dag") return generate_dag(sized_for_ops(DagOptions{}, ops));
  if (shape == "resnet") return generate_resnet(sized_for_ops(ResNetOptions{}, ops));
  throw CLI::ValidationError("--shape", shape + " is not a shape (chain, fan-out, rnn, dag, resnet)");
}

struct Cell {
  double seconds = 0;
  std::string status;  // "" fitted; "thrash"; "OOM"
};

Cell measure(const Trace& trace, const dtr::sim::ReplayOptions& options, int repeat) {
  std::vector<double> times;
  Cell cell;
  for (int r = 0; r < repeat; ++r) {
    const auto start = std::chrono::steady_clock::now();
    const dtr::sim::ReplayResult result = dtr::sim::replay(trace, options);
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    cell.status = result.thrashed ? "thrash" : !result.feasible ? "OOM" : "";
  }
  std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2), times.end());
  cell.seconds = times[times.size() / 2];
  return cell;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dtr-bench-trace-scaling: replay time per op against trace size, per shape and heuristic"};
  std::uint64_t ops = 10000;
  int doublings = 3;
  double ratio = 0.5;
  int repeat = 3;
  std::vector<std::string> shapes{"chain", "fan-out", "rnn", "dag", "resnet"};
  std::vector<std::string> heuristics{"dtr-eq", "dtr", "msps", "dtr-local", "lru", "size"};
  app.add_option("--ops", ops, "ops of the smallest trace")->check(CLI::Range(100, 10000000));
  app.add_option("--doublings", doublings, "how many times the size doubles")->check(CLI::Range(1, 8));
  app.add_option("--ratio", ratio, "budget as a ratio of each trace's unbudgeted peak")->check(CLI::Range(0.01, 1.0));
  app.add_option("--repeat", repeat, "replays per cell (the median is shown)")->check(CLI::Range(1, 50));
  app.add_option("--shape", shapes, "chain, fan-out, rnn, dag, resnet (repeatable)");
  app.add_option("--heuristic", heuristics, "heuristics (repeatable)");
  CLI11_PARSE(app, argc, argv);

  std::printf("budget %.2f of each trace's unbudgeted peak, bytes mode, thrash limit 2; median of %d replays\n",
              ratio, repeat);
  for (const std::string& shape : shapes) {
    std::vector<Trace> traces;
    for (int d = 0; d <= doublings; ++d) traces.push_back(make_trace(shape, ops << d));
    std::printf("\n%s\n%-10s", shape.c_str(), "heuristic");
    for (const Trace& t : traces) std::printf(" %9llu ops", static_cast<unsigned long long>(t.calls));
    std::printf("   growth (us/op, largest / smallest)\n");
    for (const std::string& h : heuristics) {
      std::printf("%-10s", h.c_str());
      double first = 0;
      double last = 0;
      for (const Trace& t : traces) {
        dtr::sim::ReplayOptions options;
        options.heuristic = h;
        options.budget_bytes = static_cast<std::uint64_t>(ratio * static_cast<double>(dtr::sim::summarize(t).peak_bytes));
        const Cell cell = measure(t, options, repeat);
        const double per_op = cell.seconds * 1e6 / static_cast<double>(t.calls);
        if (first == 0) first = per_op;
        last = per_op;
        std::printf(" %7.2f%-6s", per_op, cell.status.empty() ? " us" : (" " + cell.status).c_str());
        std::fflush(stdout);
      }
      std::printf("   %.2fx\n", last / first);
    }
  }
  return 0;
}
