// What the trace generators (include/dtr/trace_generator.h) share: a seeded random source that gives the same
// numbers everywhere, a GPU-like cost model, and a builder that writes a program's instructions and then
// RELEASEs every name right after its last use, as a program that drops references promptly would.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dtr/check.h"
#include "dtr/sim.h"

namespace dtr::sim::generate {

// SplitMix64. std::uniform_*_distribution differ between standard libraries; this does not, so a seed names
// one trace on every platform.
class Random {
 public:
  explicit Random(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next();
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double uniform(double low, double high) { return low + (high - low) * uniform(); }
  std::uint32_t below(std::uint32_t n) { return static_cast<std::uint32_t>(uniform() * n); }  // [0, n)
  // `value` scaled by a factor drawn from [1 - spread, 1 + spread].
  double jitter(double value, double spread) { return value * uniform(1.0 - spread, 1.0 + spread); }

 private:
  std::uint64_t state_;
};

// Op times of a mid-range GPU, in whole nanoseconds as the logs have them: a launch, then whichever of
// arithmetic and memory traffic takes longer, jittered by ±15% (real kernels of one shape vary that much).
class CostModel {
 public:
  explicit CostModel(Random& random) : random_(random) {}
  double time_ns(double flops, double bytes_moved);

 private:
  static constexpr double kLaunchNs = 4000;
  static constexpr double kFlopsPerNs = 10e3;  // 10 TFLOP/s
  static constexpr double kBytesPerNs = 500;   // 500 GB/s
  Random& random_;
};

// A result of a CALL: its bytes, and -1 or the index of the argument it is a view of.
struct Output {
  std::uint64_t bytes = 0;
  std::int32_t alias = -1;
};

inline constexpr std::uint32_t kNoName = static_cast<std::uint32_t>(-1);

class TraceBuilder {
 public:
  explicit TraceBuilder(std::string source);

  std::uint32_t constant(std::uint64_t bytes);
  std::vector<std::uint32_t> call(std::string_view op, const std::vector<std::uint32_t>& args,
                                  const std::vector<Output>& outputs, double time_ns);
  std::uint32_t call(std::string_view op, const std::vector<std::uint32_t>& args, std::uint64_t bytes, double time_ns) {
    return call(op, args, std::vector<Output>{{bytes, -1}}, time_ns).front();
  }
  // In place: each mutated name holds the op's new value afterwards.
  void mutate(std::string_view op, const std::vector<std::uint32_t>& args, const std::vector<std::uint32_t>& mutated,
              double time_ns);
  void copy_from(std::uint32_t destination, std::uint32_t source);  // `destination = source`
  void annotate(std::string text);
  // The program still holds `name` when the trace ends (parameters, optimizer state): it gets no RELEASE.
  void keep(std::uint32_t name);

  std::uint64_t bytes(std::uint32_t name) const { return bytes_.at(name); }
  std::size_t name_count() const { return bytes_.size(); }

  // The trace, with a RELEASE after the last use of every name that is not kept, and the line numbers
  // write_trace will give each instruction. The builder is spent afterwards.
  Trace finish();

 private:
  std::uint32_t fresh_name(std::uint64_t bytes);
  void expect_defined(std::uint32_t name, std::string_view where) const;
  Instruction& push(Instruction::Kind kind);

  Trace trace_;
  std::vector<std::uint64_t> bytes_;  // by name: what it holds now
  std::vector<bool> kept_;
};

// A generator option outside [low, high]: an error naming the kind, the option and the accepted range.
template <typename T>
void check_option(std::string_view kind, std::string_view option, T value, T low, T high) {
  DTR_CHECK(value >= low && value <= high, InvalidArgument, kind, ": ", option, " = ", value,
            " is out of range; expected ", low, " to ", high);
}

// Bytes of a float32 tensor of `elements` elements.
inline std::uint64_t float_bytes(double elements) { return static_cast<std::uint64_t>(elements) * 4; }

// Options whose main size field is set so that `generate` makes about `ops` CALL and MUTATE instructions. Op
// counts grow linearly in the main size, so two small traces give the line to solve on.
template <typename Options, typename Field>
Options sized_for_ops(Options options, std::uint64_t ops, Field Options::*size, Field small, Field limit,
                      Trace (*generate)(const Options&)) {
  DTR_CHECK(ops > 0, InvalidArgument, "sized_for_ops: ops = 0; expected at least 1");
  auto calls_at = [&](Field value) {
    Options probe = options;
    probe.*size = value;
    return static_cast<double>(generate(probe).calls);
  };
  const double low = calls_at(small);
  const double high = calls_at(static_cast<Field>(2 * small));
  const double per_unit = (high - low) / static_cast<double>(small);
  DTR_CHECK(per_unit > 0, InvalidArgument, "sized_for_ops: the trace does not grow with its main size");
  const double fixed = low - per_unit * static_cast<double>(small);
  const double wanted = (static_cast<double>(ops) - fixed) / per_unit;
  options.*size = static_cast<Field>(wanted < 1 ? 1 : wanted > static_cast<double>(limit) ? limit : wanted + 0.5);
  return options;
}

}  // namespace dtr::sim::generate
