// Assertions and small builders the test files share.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "dtr/dtr.h"

namespace dtr::test {

// A program run by the shell, as a user runs it: its exit status (as pclose gives it) and its output.
struct Outcome {
  int status = 0;
  std::string output;  // stdout and stderr
};

inline Outcome run_command(const std::string& command) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");  // NOLINT(cert-env33-c): runs the program under test
  if (pipe == nullptr) return {-1, "popen failed"};
  Outcome r;
  std::array<char, 4096> buffer{};
  while (std::fgets(buffer.data(), static_cast<int>(buffer.size()), pipe) != nullptr) r.output += buffer.data();
  r.status = pclose(pipe);
  return r;
}

// Whether `program` is on PATH. The tests of a tool's plots need gnuplot, which scripts/setup.sh installs; they
// skip without it, so that a machine given only the binaries (a lent GPU machine) runs the rest.
inline bool program_installed(const std::string& program) {
  return run_command("command -v " + program + " >/dev/null").status == 0;
}
// For a test that is all about a plot; a test that also checks other output drops only its plot checks.
#define DTR_SKIP_WITHOUT_GNUPLOT()                                                                           \
  do {                                                                                                       \
    if (!::dtr::test::program_installed("gnuplot")) {                                                        \
      GTEST_SKIP() << "gnuplot is not installed (scripts/setup.sh installs it)";                             \
    }                                                                                                        \
  } while (false)

// Expects `fn` to throw an `E` whose message contains every one of `parts`.
template <typename E, typename Fn>
void expect_error(Fn&& fn, std::initializer_list<std::string_view> parts) {
  try {
    fn();
    ADD_FAILURE() << "nothing was thrown";
  } catch (const E& e) {
    const std::string_view message = e.what();
    for (const std::string_view part : parts) EXPECT_NE(message.find(part), std::string_view::npos) << message;
  }
}

// A trace as sim::write_trace writes it.
inline std::string trace_text(const sim::Trace& trace) {
  std::ostringstream out;
  sim::write_trace(trace, out);
  return out.str();
}

// Bit for bit, not within a tolerance: recomputations must reproduce the first run exactly.
inline bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A float32 constant of `shape` holding start, start + 0.25, start + 0.5, ...
inline Tensor constant(Runtime& rt, Shape shape, float start) {
  TensorMeta meta{std::move(shape)};
  std::vector<float> values(static_cast<std::size_t>(meta.numel()));
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = start + 0.25f * static_cast<float>(i);
  return rt.constant(meta, values);
}

// amplitude · sin(seed + step · i) for i < count: smooth, signed, distinct values for a kernel's inputs.
inline std::vector<double> sine_values(std::size_t count, double seed, double amplitude, double step = 0.37) {
  std::vector<double> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = amplitude * std::sin(seed + step * static_cast<double>(i));
  return v;
}

// A float32 or float64 constant of `shape` holding `values` (rounded to float32 for float32).
inline Tensor floating_constant(Runtime& rt, Shape shape, DType dtype, const std::vector<double>& values) {
  if (dtype == DType::float64) return rt.constant(TensorMeta{std::move(shape), dtype}, values);
  return rt.constant(TensorMeta{std::move(shape), dtype}, std::vector<float>(values.begin(), values.end()));
}

// A floating tensor's values as doubles, whatever its dtype.
inline std::vector<double> floating_values(const Tensor& t) {
  if (t.meta().dtype == DType::float64) return t.to_host_as<double>();
  const std::vector<float> f = t.to_host();
  return {f.begin(), f.end()};
}

inline std::uint64_t allocations(Runtime& rt) { return rt.allocator().stats().num_allocations; }

}  // namespace dtr::test
