// kernels/elementwise/vector_math.h, the float32 sigmoid and tanh and the float64 exp the CPU kernels run in
// lanes, at every width this CPU runs: against double (exp: long double) precision, on the values where IEEE
// has one answer (zeros, infinities, NaN, saturation), independent of where an element sits in the array (what
// rematerialization's bitwise results rely on), in place, and as the ops' float32 kernels (float64 keeps the
// scalar functors).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "dtr/ops.h"
#include "dtr/runtime.h"
#include "kernels/elementwise/elementwise_math.h"
#include "kernels/elementwise/vector_math.h"
#include "test_helpers.h"

namespace dtr::test {
namespace {

using Floats = std::vector<float>;
using Lanes = void (*)(const float*, float*, std::int64_t);

double sigmoid_reference(double x) { return 1.0 / (1.0 + std::exp(-x)); }

template <typename T>
std::vector<T> run_lanes(void (*lanes)(const T*, T*, std::int64_t), const std::vector<T>& in) {
  std::vector<T> out(in.size());
  lanes(in.data(), out.data(), static_cast<std::int64_t>(in.size()));
  return out;
}

// Every width of lanes this build and CPU run, and the one the kernels use, the widest, last.
const std::vector<kernels::VectorRoutines>& widths() {
  static const std::vector<kernels::VectorRoutines> all = kernels::runnable_vector_routines();
  return all;
}

std::string width_name(const kernels::VectorRoutines& r) {
  return r.bits == 0 ? std::string("scalar") : std::to_string(r.bits) + "-bit lanes";
}

// Values over the ranges where both functions change, and past where they saturate.
Floats sample_values() {
  Floats values;
  for (int i = -4000; i <= 4000; ++i) values.push_back(static_cast<float>(i) * 0.005F);  // [-20, 20]
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> wide(-120.0F, 120.0F);
  for (int i = 0; i < 2001; ++i) values.push_back(wide(gen));
  for (float tiny = 1e-30F; tiny < 1e-3F; tiny *= 10.0F) {
    values.push_back(tiny);
    values.push_back(-tiny);
  }
  return values;
}

// Within a few float32 ulps of the double result (libmvec's documented errors are 1-2 ulps), plus a floor
// where sigmoid's result is subnormal.
void expect_close(float got, double want, double x, const char* name) {
  const double ulp = std::abs(want) * std::numeric_limits<float>::epsilon();
  EXPECT_LE(std::abs(double{got} - want), 4 * ulp + 1e-44) << name << "(" << x << ") = " << got << ", want " << want;
}

TEST(VectorMath, SigmoidAndTanhAgreeWithDoublePrecision) {
  const Floats values = sample_values();
  for (const kernels::VectorRoutines& r : widths()) {
    SCOPED_TRACE(width_name(r));
    const Floats sigmoid = run_lanes(r.sigmoid, values);
    const Floats tanh = run_lanes(r.tanh, values);
    for (std::size_t i = 0; i < values.size(); ++i) {
      const double x = values[i];
      expect_close(sigmoid[i], sigmoid_reference(x), x, "sigmoid");
      expect_close(tanh[i], std::tanh(x), x, "tanh");
    }
  }
}

// Within a few double ulps of long double's exp (libmvec documents 4), over softmax's range (x - max <= 0)
// and past where exp overflows and underflows.
TEST(VectorMath, ExpAgreesWithLongDoublePrecision) {
  std::vector<double> values;
  for (int i = -8000; i <= 800; ++i) values.push_back(static_cast<double>(i) * 0.0937);  // [-750, 75]
  std::mt19937 gen(5);
  std::uniform_real_distribution<double> narrow(-1.0, 1.0);
  for (int i = 0; i < 2001; ++i) values.push_back(narrow(gen));
  for (const kernels::VectorRoutines& r : widths()) {
    SCOPED_TRACE(width_name(r));
    const std::vector<double> got = run_lanes(r.exp, values);
    for (std::size_t i = 0; i < values.size(); ++i) {
      const long double want = std::exp(static_cast<long double>(values[i]));
      const long double ulp = want * std::numeric_limits<double>::epsilon();
      EXPECT_LE(std::abs(static_cast<long double>(got[i]) - want), 4 * ulp + 1e-320L)
          << "exp(" << values[i] << ") = " << got[i];
    }
  }
}

void expect_exact_values(const kernels::VectorRoutines& r) {
  const float inf = std::numeric_limits<float>::infinity();
  const Floats in = {0.0F, -0.0F, inf, -inf, std::numeric_limits<float>::quiet_NaN(), 200.0F, -200.0F};
  const Floats sigmoid = run_lanes(r.sigmoid, in);
  const Floats tanh = run_lanes(r.tanh, in);
  EXPECT_EQ(sigmoid[0], 0.5F);
  EXPECT_EQ(sigmoid[1], 0.5F);
  EXPECT_EQ(sigmoid[2], 1.0F);
  EXPECT_EQ(sigmoid[3], 0.0F);
  EXPECT_TRUE(std::isnan(sigmoid[4]));
  EXPECT_EQ(sigmoid[5], 1.0F);
  EXPECT_EQ(sigmoid[6], 0.0F);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(tanh[0]), std::bit_cast<std::uint32_t>(0.0F));
  EXPECT_EQ(std::bit_cast<std::uint32_t>(tanh[1]), std::bit_cast<std::uint32_t>(-0.0F));  // the sign stays
  EXPECT_EQ(tanh[2], 1.0F);
  EXPECT_EQ(tanh[3], -1.0F);
  EXPECT_TRUE(std::isnan(tanh[4]));
  EXPECT_EQ(tanh[5], 1.0F);
  EXPECT_EQ(tanh[6], -1.0F);
  const double dinf = std::numeric_limits<double>::infinity();
  const std::vector<double> exp =
      run_lanes(r.exp, std::vector<double>{0.0, -0.0, dinf, -dinf, std::nan(""), 800.0, -800.0});
  EXPECT_EQ(exp[0], 1.0);
  EXPECT_EQ(exp[1], 1.0);
  EXPECT_EQ(exp[2], dinf);
  EXPECT_EQ(exp[3], 0.0);
  EXPECT_TRUE(std::isnan(exp[4]));
  EXPECT_EQ(exp[5], dinf);
  EXPECT_EQ(exp[6], 0.0);
}

TEST(VectorMath, ZerosInfinitiesAndNanGiveTheirExactValues) {
  for (const kernels::VectorRoutines& r : widths()) {
    SCOPED_TRACE(width_name(r));
    expect_exact_values(r);
  }
}

// An element's bits must not depend on where a kernel's block starts or ends (a short tail computed another
// way would differ from the same value inside a block).
template <typename T>
void expect_bits_independent_of_position(void (*lanes)(const T*, T*, std::int64_t)) {
  std::vector<T> values;
  std::mt19937 gen(11);
  std::uniform_real_distribution<T> dist(-9, 9);
  for (int i = 0; i < 41; ++i) values.push_back(dist(gen));
  const std::vector<T> whole = run_lanes(lanes, values);
  for (std::size_t start = 0; start < 17; ++start) {
    for (std::size_t count = 0; start + count <= values.size(); ++count) {
      std::vector<T> out(count);
      lanes(values.data() + start, out.data(), static_cast<std::int64_t>(count));
      if (count == 0) continue;  // (memcmp may not take an empty vector's null data)
      ASSERT_EQ(0, std::memcmp(out.data(), whole.data() + start, count * sizeof(T)))
          << "a run of " << count << " from offset " << start;
    }
  }
}

TEST(VectorMath, AnElementsBitsDoNotDependOnWhereItSits) {
  for (const kernels::VectorRoutines& r : widths()) {
    SCOPED_TRACE(width_name(r));
    expect_bits_independent_of_position(r.sigmoid);
    expect_bits_independent_of_position(r.tanh);
    expect_bits_independent_of_position(r.exp);
  }
}

TEST(VectorMath, InPlaceGivesTheSameBits) {
  const Floats values = sample_values();
  for (const kernels::VectorRoutines& r : widths()) {
    SCOPED_TRACE(width_name(r));
    for (const Lanes lanes : {r.sigmoid, r.tanh}) {
      Floats in_place = values;
      lanes(in_place.data(), in_place.data(), static_cast<std::int64_t>(in_place.size()));
      EXPECT_TRUE(bitwise_equal(in_place, run_lanes(lanes, values)));
    }
    const std::vector<double> doubles(values.begin(), values.end());
    std::vector<double> in_place = doubles;
    r.exp(in_place.data(), in_place.data(), static_cast<std::int64_t>(in_place.size()));
    EXPECT_EQ(0, std::memcmp(in_place.data(), run_lanes(r.exp, doubles).data(), doubles.size() * sizeof(double)));
  }
}

// The kernels use the widest lanes: the array functions are the last routines'.
TEST(VectorMath, TheArrayFunctionsAreTheWidestRoutines) {
  ASSERT_FALSE(widths().empty());
  const kernels::VectorRoutines& widest = widths().back();
  const Floats values = sample_values();
  EXPECT_TRUE(bitwise_equal(run_lanes(kernels::sigmoid_floats, values), run_lanes(widest.sigmoid, values)));
  EXPECT_TRUE(bitwise_equal(run_lanes(kernels::tanh_floats, values), run_lanes(widest.tanh, values)));
  const std::vector<double> doubles(values.begin(), values.end());
  EXPECT_EQ(0, std::memcmp(run_lanes(kernels::exp_doubles, doubles).data(), run_lanes(widest.exp, doubles).data(),
                           doubles.size() * sizeof(double)));
  for (std::size_t i = 1; i < widths().size(); ++i) EXPECT_GT(widths()[i].bits, widths()[i - 1].bits);
}

// The ops run these routines for float32 (over blocks, threads or not) and the scalar functors for float64.
TEST(VectorMath, TheOpsFloat32KernelsAreTheseRoutinesAndFloat64KeepsTheFunctors) {
  Runtime rt;
  Floats values;
  for (int i = 0; i < 70001; ++i) values.push_back(static_cast<float>(i % 997) * 0.02F - 10.0F);
  const auto n = static_cast<std::int64_t>(values.size());
  const Tensor x = rt.constant(TensorMeta{{n}, DType::float32}, std::span<const float>(values));
  EXPECT_TRUE(bitwise_equal(rt.call1(ops::sigmoid(), {x}).to_host(), run_lanes(kernels::sigmoid_floats, values)));
  EXPECT_TRUE(bitwise_equal(rt.call1(ops::tanh(), {x}).to_host(), run_lanes(kernels::tanh_floats, values)));

  std::vector<double> doubles(values.begin(), values.begin() + 1000);
  const Tensor xd = rt.constant(TensorMeta{{1000}, DType::float64}, std::span<const double>(doubles));
  const std::vector<double> sigmoid = rt.call1(ops::sigmoid(), {xd}).to_host_as<double>();
  const std::vector<double> tanh = rt.call1(ops::tanh(), {xd}).to_host_as<double>();
  for (std::size_t i = 0; i < doubles.size(); ++i) {
    EXPECT_EQ(sigmoid[i], kernels::Sigmoid{}(doubles[i]));
    EXPECT_EQ(tanh[i], kernels::Tanh{}(doubles[i]));
  }
}

}  // namespace
}  // namespace dtr::test
