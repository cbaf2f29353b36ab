// kernels/elementwise/axis_loops.h, the loops of broadcast_to and of the sums over axes, against the index
// formulas they implement: every pattern of repeated, copied, summed and kept dimensions (merged or not, with
// extent-1 and empty dimensions), small and large enough to be spread over the threads. A sum must add each
// output's inputs in increasing index order in double (its bits say so: the values make every order give other
// bits), whatever the thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "dtr/ops.h"
#include "dtr/runtime.h"
#include "kernels/elementwise/axis_loops.h"
#include "test_helpers.h"
#include "test_resources.h"

namespace dtr::test {
namespace {

std::int64_t numel_of(const Shape& shape) { return TensorMeta{shape}.numel(); }

// The index of element `linear` of a row-major tensor of `shape`, one entry per dimension.
Shape unravel(std::int64_t linear, const Shape& shape) {
  Shape index(shape.size(), 0);
  for (std::size_t d = shape.size(); d-- > 0;) {
    index[d] = linear % shape[d];
    linear /= shape[d];
  }
  return index;
}

// The input element an output element of a broadcast reads: each output index, modulo the input's extent.
template <typename T>
std::vector<T> broadcast_reference(const std::vector<T>& x, const Shape& in, const Shape& out) {
  std::vector<T> result(static_cast<std::size_t>(numel_of(out)));
  const std::size_t lead = out.size() - in.size();
  for (std::int64_t o = 0; o < numel_of(out); ++o) {
    const Shape index = unravel(o, out);
    std::int64_t offset = 0;
    for (std::size_t d = lead; d < out.size(); ++d) {
      const std::int64_t extent = in[d - lead];
      offset = offset * extent + (extent == 1 ? 0 : index[d]);
    }
    result[static_cast<std::size_t>(o)] = x[static_cast<std::size_t>(offset)];
  }
  return result;
}

// Each output's inputs added in increasing index order in double, then scaled and rounded once.
template <typename T>
std::vector<T> sum_reference(const std::vector<T>& x, const Shape& shape, const kernels::AxisMask& mask,
                             double factor) {
  std::int64_t out_count = 1;
  for (std::size_t d = 0; d < shape.size(); ++d) out_count *= mask[d] ? 1 : shape[d];
  std::vector<double> totals(static_cast<std::size_t>(out_count), 0.0);
  for (std::int64_t i = 0; i < numel_of(shape); ++i) {
    const Shape index = unravel(i, shape);
    std::int64_t o = 0;
    for (std::size_t d = 0; d < shape.size(); ++d) {
      if (!mask[d]) o = o * shape[d] + index[d];
    }
    totals[static_cast<std::size_t>(o)] += static_cast<double>(x[static_cast<std::size_t>(i)]);
  }
  std::vector<T> result;
  for (const double t : totals) result.push_back(static_cast<T>(t * factor));
  return result;
}

// Values whose sums depend on the order they are added in (magnitudes 1e-3 to 1e7, both signs).
template <typename T>
std::vector<T> order_sensitive(std::int64_t count, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> mantissa(-1.0, 1.0);
  std::uniform_int_distribution<int> exponent(-3, 7);
  std::vector<T> x(static_cast<std::size_t>(count));
  for (T& v : x) v = static_cast<T>(mantissa(rng) * std::pow(10.0, exponent(rng)));
  return x;
}

// A random shape of rank 0 to 6 (extents 0 to 5, mostly above 1), and which of its dimensions the other side
// lacks (a broadcast's repeated dimensions, a sum's summed ones).
struct Pattern {
  Shape shape;
  kernels::AxisMask marked;
};

Pattern random_pattern(std::mt19937_64& rng, bool allow_empty) {
  std::uniform_int_distribution<int> rank(0, 6);
  std::uniform_int_distribution<int> extent(allow_empty ? 0 : 1, 5);
  std::bernoulli_distribution coin(0.5);
  Pattern p;
  const int r = rank(rng);
  for (int d = 0; d < r; ++d) {
    p.shape.push_back(extent(rng));
    p.marked.push_back(coin(rng));
  }
  return p;
}

// Large patterns, each spread over the threads: U-Net's upsampling and its gradient, a bias's row sums, a
// global average pool's gradient, and others with the repeated / summed dimensions first, last and between.
std::vector<Pattern> large_patterns() {
  return {
      {{64, 32, 14, 2, 14, 2}, {false, false, false, true, false, true}},
      {{512, 640}, {true, false}},
      {{640, 512}, {false, true}},
      {{16, 64, 7, 7}, {false, false, true, true}},
      {{7, 64, 300}, {true, false, true}},
      {{3, 5, 4096}, {true, true, false}},
      {{300, 7, 64}, {false, true, false}},
      {{1, 70000}, {false, true}},
      {{70000}, {true}},
      {{70000}, {false}},
  };
}

template <typename T>
void check_broadcast(const Pattern& p, std::mt19937_64& rng) {
  Shape in;  // the output's shape with the marked dimensions 1, and with leading marked ones dropped
  bool leading = true;
  for (std::size_t d = 0; d < p.shape.size(); ++d) {
    if (leading && p.marked[d]) continue;
    leading = false;
    in.push_back(p.marked[d] ? 1 : p.shape[d]);
  }
  const std::vector<T> x = order_sensitive<T>(numel_of(in), rng);
  std::vector<T> out(static_cast<std::size_t>(numel_of(p.shape)), T(-1));
  kernels::broadcast_copy(x.data(), in, out.data(), p.shape);
  EXPECT_EQ(out, broadcast_reference(x, in, p.shape)) << to_string(in) << " -> " << to_string(p.shape);
}

template <typename T>
void check_sum(const Pattern& p, double factor, std::mt19937_64& rng) {
  const std::vector<T> x = order_sensitive<T>(numel_of(p.shape), rng);
  const std::vector<T> want = sum_reference(x, p.shape, p.marked, factor);
  std::vector<T> out(want.size(), T(-1));
  kernels::sum_over_axes(x.data(), p.shape, p.marked, out.data(), static_cast<std::int64_t>(out.size()), factor);
  EXPECT_EQ(out, want) << to_string(p.shape);
}

TEST(AxisLoops, BroadcastsCopyWhatTheIndexFormulaReads) {
  std::mt19937_64 rng(11);
  for (int round = 0; round < 400; ++round) {
    const Pattern p = random_pattern(rng, /*allow_empty=*/true);
    check_broadcast<float>(p, rng);
    check_broadcast<double>(p, rng);
  }
  for (const Pattern& p : large_patterns()) check_broadcast<float>(p, rng);
}

TEST(AxisLoops, SumsAddEachOutputsInputsInIndexOrderInDouble) {
  std::mt19937_64 rng(12);
  for (int round = 0; round < 400; ++round) {
    const Pattern p = random_pattern(rng, /*allow_empty=*/true);
    check_sum<float>(p, 1.0, rng);
    check_sum<double>(p, 0.25, rng);
  }
  for (const Pattern& p : large_patterns()) {
    check_sum<float>(p, 1.0, rng);
    check_sum<double>(p, 1.0 / 3.0, rng);
  }
}

// What the ops run: U-Net's nearest upsampling (reshape, broadcast_to, reshape) and its gradient (sum_to), as
// the op table calls them.
TEST(AxisLoops, BroadcastToAndSumToOpsRunTheseLoops) {
  Runtime rt(deterministic_config());
  std::mt19937_64 rng(13);
  const Shape in{32, 8, 7, 1, 7, 1};
  const Shape out{32, 8, 7, 2, 7, 2};
  const std::vector<float> x = order_sensitive<float>(numel_of(in), rng);
  const Tensor up = rt.call1(ops::broadcast_to(), {rt.constant(TensorMeta{in, DType::float32}, x)},
                             {{"shape", std::vector<std::int64_t>(out.begin(), out.end())}});
  EXPECT_EQ(up.to_host(), broadcast_reference(x, in, out));
  const std::vector<float> g = order_sensitive<float>(numel_of(out), rng);
  const Tensor down = rt.call1(ops::sum_to(), {rt.constant(TensorMeta{out, DType::float32}, g)},
                               {{"shape", std::vector<std::int64_t>(in.begin(), in.end())}});
  EXPECT_EQ(down.to_host(), sum_reference(g, out, {false, false, false, true, false, true}, 1.0));
}

}  // namespace
}  // namespace dtr::test
