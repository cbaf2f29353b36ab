#include "sim/trace_builder.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace dtr::sim::generate {

using Kind = Instruction::Kind;

std::uint64_t Random::next() {
  std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double CostModel::time_ns(double flops, double bytes_moved) {
  const double busy = std::max(flops / kFlopsPerNs, bytes_moved / kBytesPerNs);
  return std::round(random_.jitter(kLaunchNs + busy, 0.15));
}

TraceBuilder::TraceBuilder(std::string source) { trace_.source = std::move(source); }

std::uint32_t TraceBuilder::fresh_name(std::uint64_t bytes) {
  const auto name = static_cast<std::uint32_t>(bytes_.size());
  trace_.names.push_back(fmt::format("x{}", name));
  bytes_.push_back(bytes);
  kept_.push_back(false);
  return name;
}

void TraceBuilder::expect_defined(std::uint32_t name, std::string_view where) const {
  // A generator bug, not bad input: every name a generator uses comes from this builder.
  DTR_CHECK(name < bytes_.size(), InvalidArgument, trace_.source, ": ", where, " uses tensor #", name,
            ", which was never defined");
}

Instruction& TraceBuilder::push(Kind kind) {
  Instruction& in = trace_.instructions.emplace_back();
  in.kind = kind;
  return in;
}

std::uint32_t TraceBuilder::constant(std::uint64_t bytes) {
  const std::uint32_t name = fresh_name(bytes);
  Instruction& in = push(Kind::constant);
  in.name = name;
  in.bytes = bytes;
  return name;
}

std::vector<std::uint32_t> TraceBuilder::call(std::string_view op, const std::vector<std::uint32_t>& args,
                                              const std::vector<Output>& outputs, double time_ns) {
  for (std::uint32_t a : args) expect_defined(a, op);
  std::vector<std::uint32_t> names;
  std::vector<Instruction::Result> results;
  for (const Output& o : outputs) {
    DTR_CHECK(o.alias < static_cast<std::int32_t>(args.size()), InvalidArgument, trace_.source, ": ", op,
              " aliases argument ", o.alias, " of ", args.size());
    names.push_back(fresh_name(o.bytes));
    results.push_back(Instruction::Result{names.back(), o.bytes, o.alias});
  }
  Instruction& in = push(Kind::call);
  in.op = op;
  in.args = args;
  in.results = std::move(results);
  in.time_ns = time_ns;
  return names;
}

void TraceBuilder::mutate(std::string_view op, const std::vector<std::uint32_t>& args,
                          const std::vector<std::uint32_t>& mutated, double time_ns) {
  for (std::uint32_t a : args) expect_defined(a, op);
  Instruction& in = push(Kind::mutate);
  in.op = op;
  in.args = args;
  in.mutated = mutated;
  in.time_ns = time_ns;
}

void TraceBuilder::copy_from(std::uint32_t destination, std::uint32_t source) {
  expect_defined(destination, "COPY_FROM");
  expect_defined(source, "COPY_FROM");
  bytes_[destination] = bytes_[source];
  Instruction& in = push(Kind::copy_from);
  in.name = destination;
  in.source = source;
}

void TraceBuilder::annotate(std::string text) { push(Kind::annotate).op = std::move(text); }

void TraceBuilder::keep(std::uint32_t name) {
  expect_defined(name, "keep");
  kept_[name] = true;
}

Trace TraceBuilder::finish() {
  // The last instruction that touches each name: after it, a program holding references only as long as it
  // needs them drops the name.
  constexpr std::size_t kUntouched = static_cast<std::size_t>(-1);
  std::vector<std::size_t> last_touch(bytes_.size(), kUntouched);
  std::vector<Instruction>& program = trace_.instructions;
  for (std::size_t i = 0; i < program.size(); ++i) {
    const Instruction& in = program[i];
    auto touch = [&](std::uint32_t name) { last_touch[name] = i; };
    switch (in.kind) {
      case Kind::constant:
      case Kind::make_constant:
      case Kind::release:
        touch(in.name);
        break;
      case Kind::copy:
      case Kind::copy_from:
        touch(in.name);
        touch(in.source);
        break;
      case Kind::call:
      case Kind::mutate:
        for (std::uint32_t a : in.args) touch(a);
        for (const Instruction::Result& r : in.results) touch(r.name);
        break;
      case Kind::annotate:
        break;
    }
  }
  std::vector<std::vector<std::uint32_t>> releases_after(program.size());
  for (std::uint32_t name = 0; name < last_touch.size(); ++name) {
    if (!kept_[name] && last_touch[name] != kUntouched) releases_after[last_touch[name]].push_back(name);
  }

  std::vector<Instruction> released;
  released.reserve(program.size() + bytes_.size());
  std::uint32_t line = 2;  // write_trace puts the START annotation on line 1
  auto append = [&](Instruction in) {
    in.line = line;
    line += 1 + static_cast<std::uint32_t>(in.kind == Kind::constant ? 1 : 2 * in.results.size());
    if (in.kind == Kind::call || in.kind == Kind::mutate) trace_.calls += 1;
    released.push_back(std::move(in));
  };
  for (std::size_t i = 0; i < program.size(); ++i) {
    append(std::move(program[i]));
    for (std::uint32_t name : releases_after[i]) {
      Instruction release;
      release.kind = Kind::release;
      release.name = name;
      append(std::move(release));
    }
  }
  program = std::move(released);
  return std::move(trace_);
}

}  // namespace dtr::sim::generate
