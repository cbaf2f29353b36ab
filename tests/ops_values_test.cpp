// Known values of the arithmetic ops on small hand-computed cases, through the runtime, in float32 and
// float64: broadcasting, activations and their backward ops, transposed and batched products, linear,
// reductions over axes, sum_to and broadcast_to; and the dtype rules.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "test_resources.h"

namespace dtr::test {
namespace {

template <typename T>
class OpsValues : public ::testing::Test {
 protected:
  Tensor make(Shape shape, std::vector<T> values) {
    return rt.constant(TensorMeta{std::move(shape), DTypeOf<T>::value}, values);
  }
  std::vector<T> run(const OpDef& op, std::initializer_list<Tensor> inputs, const Attrs& attrs = {}) {
    return rt.call1(op, inputs, attrs).template to_host_as<T>();
  }
  Shape shape_of(const OpDef& op, std::initializer_list<Tensor> inputs, const Attrs& attrs = {}) {
    return rt.call1(op, inputs, attrs).shape();
  }
  Runtime rt{deterministic_config()};
};

using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(OpsValues, FloatTypes);

TYPED_TEST(OpsValues, BinaryOpsBroadcastRowsColumnsAndScalars) {
  using T = TypeParam;
  const Tensor m = this->make({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor row = this->make({3}, {10, 20, 30});
  const Tensor col = this->make({2, 1}, {100, 200});
  const Tensor scalar = this->make({}, {2});
  EXPECT_EQ(this->run(ops::add(), {m, row}), (std::vector<T>{11, 22, 33, 14, 25, 36}));
  EXPECT_EQ(this->run(ops::sub(), {col, m}), (std::vector<T>{99, 98, 97, 196, 195, 194}));
  EXPECT_EQ(this->run(ops::mul(), {m, scalar}), (std::vector<T>{2, 4, 6, 8, 10, 12}));
  EXPECT_EQ(this->run(ops::div(), {row, col}), (std::vector<T>{T(10) / 100, T(20) / 100, T(30) / 100,
                                                               T(10) / 200, T(20) / 200, T(30) / 200}));
  // [2, 1] with [3]: both broadcast.
  EXPECT_EQ(this->shape_of(ops::add(), {col, row}), (Shape{2, 3}));
  EXPECT_EQ(this->run(ops::add(), {col, row}), (std::vector<T>{110, 120, 130, 210, 220, 230}));
  // A rank-3 broadcast with a middle unit dimension.
  const Tensor a = this->make({2, 1, 2}, {1, 2, 3, 4});
  const Tensor b = this->make({3, 1}, {10, 20, 30});
  EXPECT_EQ(this->run(ops::add(), {a, b}),
            (std::vector<T>{11, 12, 21, 22, 31, 32, 13, 14, 23, 24, 33, 34}));
}

TYPED_TEST(OpsValues, ActivationsAndTheirBackwardOps) {
  using T = TypeParam;
  const Tensor x = this->make({4}, {-2, -0.5, 0, 1.5});
  const Tensor g = this->make({4}, {1, 2, 3, 4});
  const std::vector<T> relu = this->run(ops::relu(), {x});
  EXPECT_EQ(relu, (std::vector<T>{0, 0, 0, T(1.5)}));
  EXPECT_EQ(this->run(ops::relu_backward(), {g, x}), (std::vector<T>{0, 0, 0, 4}));  // 0 at x = 0
  const std::vector<T> tanh = this->run(ops::tanh(), {x});
  const std::vector<T> sigmoid = this->run(ops::sigmoid(), {x});
  const std::vector<T> gelu = this->run(ops::gelu(), {x});
  const Tensor y_tanh = this->make({4}, tanh);
  const Tensor y_sigmoid = this->make({4}, sigmoid);
  const std::vector<T> tanh_back = this->run(ops::tanh_backward(), {g, y_tanh});
  const std::vector<T> sigmoid_back = this->run(ops::sigmoid_backward(), {g, y_sigmoid});
  const std::vector<T> gelu_back = this->run(ops::gelu_backward(), {g, x});
  const double tol = std::is_same_v<T, float> ? 1e-6 : 1e-15;
  const double xs[] = {-2, -0.5, 0, 1.5};
  for (int i = 0; i < 4; ++i) {
    const double v = xs[i];
    const double cdf = 0.5 * (1 + std::erf(v / std::sqrt(2.0)));
    const double pdf = std::exp(-v * v / 2) / std::sqrt(2 * M_PI);
    const double s = 1 / (1 + std::exp(-v));
    EXPECT_NEAR(tanh[i], std::tanh(v), tol);
    EXPECT_NEAR(sigmoid[i], s, tol);
    EXPECT_NEAR(gelu[i], v * cdf, tol * 2);
    EXPECT_NEAR(tanh_back[i], (i + 1) * (1 - double(tanh[i]) * double(tanh[i])), tol * 8);
    EXPECT_NEAR(sigmoid_back[i], (i + 1) * double(sigmoid[i]) * (1 - double(sigmoid[i])), tol * 8);
    EXPECT_NEAR(gelu_back[i], (i + 1) * (cdf + v * pdf), tol * 8);
  }
  // sigmoid does not overflow far from 0.
  const std::vector<T> far = this->run(ops::sigmoid(), {this->make({2}, {-1000, 1000})});
  EXPECT_EQ(far, (std::vector<T>{0, 1}));
}

TYPED_TEST(OpsValues, MatmulTransposesBatchesAndLinear) {
  using T = TypeParam;
  const Tensor a = this->make({2, 3}, {1, 2, 3, 4, 5, 6});        // [m, k]
  const Tensor at = this->make({3, 2}, {1, 4, 2, 5, 3, 6});       // the same, stored transposed
  const Tensor b = this->make({3, 2}, {7, 8, 9, 10, 11, 12});     // [k, n]
  const Tensor bt = this->make({2, 3}, {7, 9, 11, 8, 10, 12});    // the same, stored transposed
  const std::vector<T> expected{58, 64, 139, 154};
  const Attrs ta{{"transpose_a", std::int64_t{1}}};
  const Attrs tb{{"transpose_b", std::int64_t{1}}};
  const Attrs both{{"transpose_a", std::int64_t{1}}, {"transpose_b", std::int64_t{1}}};
  EXPECT_EQ(this->run(ops::matmul(), {a, b}), expected);
  EXPECT_EQ(this->run(ops::matmul(), {at, b}, ta), expected);
  EXPECT_EQ(this->run(ops::matmul(), {a, bt}, tb), expected);
  EXPECT_EQ(this->run(ops::matmul(), {at, bt}, both), expected);
  // Two batches: the second is the first times 2 on the left.
  const Tensor a2 = this->make({2, 2, 3}, {1, 2, 3, 4, 5, 6, 2, 4, 6, 8, 10, 12});
  const Tensor b2 = this->make({2, 3, 2}, {7, 8, 9, 10, 11, 12, 7, 8, 9, 10, 11, 12});
  EXPECT_EQ(this->shape_of(ops::bmm(), {a2, b2}), (Shape{2, 2, 2}));
  EXPECT_EQ(this->run(ops::bmm(), {a2, b2}), (std::vector<T>{58, 64, 139, 154, 116, 128, 278, 308}));
  // linear: x [2, 3] by weight [2, 3] (rows are output features) plus bias, and a rank-3 input.
  const Tensor w = this->make({2, 3}, {1, 0, -1, 0.5, 0.5, 0.5});
  const Tensor bias = this->make({2}, {10, -10});
  EXPECT_EQ(this->run(ops::linear(), {a, w}), (std::vector<T>{-2, 3, -2, T(7.5)}));
  EXPECT_EQ(this->run(ops::linear(), {a, w, bias}), (std::vector<T>{8, -7, 8, T(-2.5)}));
  const Tensor x3 = this->make({2, 1, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(this->shape_of(ops::linear(), {x3, w, bias}), (Shape{2, 1, 2}));
  // linear_add: the same maps onto an addend, with and without the bias.
  const Tensor addend = this->make({2, 2}, {1, 2, -3, T(0.5)});
  EXPECT_EQ(this->run(ops::linear_add(), {a, w, addend}), (std::vector<T>{-1, 5, -5, 8}));
  EXPECT_EQ(this->run(ops::linear_add(), {a, w, addend, bias}), (std::vector<T>{9, -5, 5, -2}));
  EXPECT_EQ(this->shape_of(ops::linear_add(), {x3, w, this->make({2, 1, 2}, {0, 0, 0, 0}), bias}), (Shape{2, 1, 2}));
}

TYPED_TEST(OpsValues, ReductionsOverAxesWithAndWithoutKeepdim) {
  using T = TypeParam;
  const Tensor x = this->make({2, 2, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  const Attrs outer{{"axes", std::vector<std::int64_t>{0, 2}}};
  EXPECT_EQ(this->shape_of(ops::sum(), {x}, outer), (Shape{2}));
  EXPECT_EQ(this->run(ops::sum(), {x}, outer), (std::vector<T>{1 + 2 + 3 + 7 + 8 + 9, 4 + 5 + 6 + 10 + 11 + 12}));
  Attrs keep = outer;
  keep.set("keepdim", std::int64_t{1});
  EXPECT_EQ(this->shape_of(ops::mean(), {x}, keep), (Shape{1, 2, 1}));
  EXPECT_EQ(this->run(ops::mean(), {x}, keep), (std::vector<T>{5, 8}));
  EXPECT_EQ(this->run(ops::mean(), {x}), (std::vector<T>{T(6.5)}));
  EXPECT_EQ(this->run(ops::sum(), {x}, {{"axes", std::vector<std::int64_t>{}}}),
            this->run(ops::scale(), {x}, {{"factor", 1.0}}));  // no axes: nothing reduced
  // sum_to undoes broadcast_to's repetition by summing it.
  const Tensor col = this->make({2, 1}, {1, 2});
  const Tensor spread = this->rt.call1(ops::broadcast_to(), {col}, {{"shape", std::vector<std::int64_t>{3, 2, 2}}});
  EXPECT_EQ(spread.template to_host_as<T>(), (std::vector<T>{1, 1, 2, 2, 1, 1, 2, 2, 1, 1, 2, 2}));
  EXPECT_EQ(this->run(ops::sum_to(), {spread}, {{"shape", std::vector<std::int64_t>{2, 1}}}), (std::vector<T>{6, 12}));
  EXPECT_EQ(this->run(ops::sum_to(), {spread}, {{"shape", std::vector<std::int64_t>{2}}}), (std::vector<T>{9, 9}));
}

TEST(OpsErrors, ShapeAndDtypeErrorsNameTheOpAndTheShapes) {
  Runtime rt(deterministic_config());
  const Tensor f = rt.constant(TensorMeta{{2, 3}}, std::vector<float>(6, 1.0F));
  const Tensor d = rt.constant(TensorMeta{{2, 3}, DType::float64}, std::vector<double>(6, 1.0));
  const Tensor i = rt.constant(TensorMeta{{3}, DType::int64}, std::vector<std::int64_t>{0, 1, 2});
  const Tensor v4 = rt.constant(TensorMeta{{4}}, std::vector<float>(4, 1.0F));
  const auto expect = [](auto&& fn, const std::string& part) {
    try {
      fn();
      ADD_FAILURE() << "no error; expected " << part;
    } catch (const ShapeError& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  expect([&] { rt.call1(ops::add(), {f, d}); }, "op 'add' takes float32 or float64 inputs of one dtype, got [2, 3] and float64 [2, 3]");
  expect([&] { rt.call1(ops::relu(), {i}); }, "op 'relu' takes float32 or float64 inputs of one dtype, got int64 [3]");
  expect([&] { rt.call1(ops::add(), {f, v4}); }, "op 'add' needs shapes that broadcast (NumPy rules), got [2, 3] and [4]");
  expect([&] { rt.call1(ops::matmul(), {f, f}, {{"transpose_b", std::int64_t{0}}}); }, "op 'matmul' multiplies [m, k] by [k, n]");
  expect([&] { rt.call1(ops::bmm(), {f, f}); }, "op 'bmm' multiplies two batches");
  expect([&] { rt.call1(ops::linear(), {f, v4}); }, "op 'linear' maps an input [..., in] by a weight [out, in]");
  expect([&] { rt.call1(ops::linear(), {f, f, v4}); }, "op 'linear' adds a bias [out]");
  expect([&] { rt.call1(ops::linear_add(), {f, v4, f}); }, "op 'linear_add' maps an input [..., in] by a weight [out, in]");
  expect([&] { rt.call1(ops::linear_add(), {f, f, v4}); }, "op 'linear_add' adds an addend of the output's shape [2, 2]");
  expect([&] { rt.call1(ops::linear_add(), {f, f, rt.constant(TensorMeta{{2, 2}}, std::vector<float>(4)), v4}); },
         "op 'linear_add' adds a bias [out]");
  expect([&] { rt.call1(ops::sum(), {f}, {{"axes", std::vector<std::int64_t>{1, -1}}}); }, "op 'sum' names axis -1 twice");
  expect([&] { rt.call1(ops::sum_to(), {f}, {{"shape", std::vector<std::int64_t>{4}}}); }, "op 'sum_to' sums down to a shape [4]");
  expect([&] { rt.call1(ops::broadcast_to(), {f}, {{"shape", std::vector<std::int64_t>{3}}}); }, "op 'broadcast_to' broadcasts to a shape [3]");
  // Typed constants and reads check the dtype.
  EXPECT_THROW(rt.constant(TensorMeta{{3}}, std::vector<double>(3, 1.0)), InvalidArgument);
  EXPECT_THROW(rt.constant(TensorMeta{{3}, DType::int64}, std::vector<float>(3, 1.0F)), InvalidArgument);
  EXPECT_THROW(d.to_host(), InvalidArgument);
  EXPECT_THROW(f.to_host_as<double>(), InvalidArgument);
  EXPECT_EQ(i.to_host_as<std::int64_t>(), (std::vector<std::int64_t>{0, 1, 2}));
}

}  // namespace
}  // namespace dtr::test
