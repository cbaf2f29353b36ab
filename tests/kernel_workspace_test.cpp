// KernelArgs::workspace: scratch memory a kernel asks the runtime for, under the budget, freed after.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kernels/dense/conv_onednn.h"
#include "test_helpers.h"
#include "test_resources.h"

namespace dtr::test {
namespace {

// y = x + 1, staged through `bytes` of workspace (as a cuDNN convolution stages through its own).
OpDef staged_increment(std::size_t bytes) {
  OpDef def;
  def.name = "staged_increment";
  def.infer = [](std::span<const TensorMeta> inputs, const Attrs&) { return TensorMetas{inputs[0]}; };
  def.cpu_kernel = [bytes](const KernelArgs& args) {
    DTR_CHECK(args.workspace != nullptr, InvalidArgument, "staged_increment needs a workspace");
    auto* scratch = static_cast<float*>(args.workspace->get(bytes));
    const std::int64_t n = args.output_meta[0].numel();
    for (std::int64_t i = 0; i < n; ++i) scratch[i % 4] = args.input<float>(0)[i] + 1;
    for (std::int64_t i = 0; i < n; ++i) args.output<float>(0)[i] = args.input<float>(0)[i] + 1;
    std::memset(scratch, 0xFF, bytes);  // the whole of it is writable
  };
  def.flops = [](std::span<const TensorMeta>, const Attrs&) { return 1.0; };
  return def;
}

TEST(KernelWorkspace, IsGivenDuringTheKernelAndFreedAfter) {
  const std::size_t bytes = std::size_t{1} << 20;
  const OpDef op = staged_increment(bytes);
  Runtime rt(deterministic_config());
  Tensor x = rt.constant(TensorMeta{{3}}, std::vector<float>{1, 2, 3});
  const std::uint64_t before = rt.allocator().stats().allocated_bytes.current;
  Tensor y = rt.call1(op, {x});
  EXPECT_EQ(y.to_host(), (std::vector<float>{2, 3, 4}));
  // The workspace was allocated (the peak saw it) and is gone: only y's buffer remains.
  EXPECT_GE(rt.allocator().stats().allocated_bytes.peak, before + bytes);
  EXPECT_LT(rt.allocator().stats().allocated_bytes.current, before + bytes);
}

TEST(KernelWorkspace, EvictsUnderTheBudgetAndRecomputationsGetOneToo) {
  const std::size_t bytes = 64 * 1024;
  const OpDef op = staged_increment(bytes);
  const auto run = [&](std::optional<std::uint64_t> budget) {
    Config config = deterministic_config(budget);
    config.budget_mode = BudgetMode::bytes;
    Runtime rt(config);
    Tensor x = rt.constant(TensorMeta{{4096}}, std::vector<float>(4096, 0.5F));
    std::vector<Tensor> chain{x};
    for (int i = 0; i < 12; ++i) chain.push_back(rt.call1(op, {chain.back()}));
    std::vector<float> all;
    for (const Tensor& t : chain) {
      const std::vector<float> v = t.to_host();
      all.insert(all.end(), v.begin(), v.end());
    }
    return std::pair{all, rt.stats().rematerializations};
  };
  const auto [reference, none] = run(std::nullopt);
  // Room for a few 16 KiB tensors and one workspace: most of the chain is evicted and recomputed.
  const auto [budgeted, recomputed] = run(std::uint64_t{6} * 16384 + bytes);
  EXPECT_EQ(none, 0u);
  EXPECT_GT(recomputed, 0u);
  EXPECT_TRUE(bitwise_equal(budgeted, reference));
}

TEST(KernelWorkspace, ThatDoesNotFitIsOutOfMemory) {
  const OpDef op = staged_increment(std::size_t{1} << 20);
  Config config = deterministic_config(std::uint64_t{64} * 1024);
  config.budget_mode = BudgetMode::bytes;
  Runtime rt(config);
  Tensor x = rt.constant(TensorMeta{{4}}, std::vector<float>{1, 2, 3, 4});
  EXPECT_THROW(rt.call1(op, {x}), OutOfMemory);
}

TEST(KernelWorkspace, AKernelCalledOutsideARuntimeHasNone) {
  const OpDef op = staged_increment(16);
  const TensorMeta meta{{1}};
  const float in = 1;
  float out = 0;
  const void* inputs[] = {&in};
  void* outputs[] = {&out};
  const Attrs attrs;
  const KernelArgs args{{&meta, 1}, inputs, {&meta, 1}, outputs, attrs};
  EXPECT_THROW(op.cpu_kernel(args), InvalidArgument);
}

// The float64 conv2d's column matrix (im2col) is workspace: the budget sees it, and it is gone after the call. A
// pointwise conv has none; outside a runtime the kernel uses its own buffer and computes the same bits.
TEST(KernelWorkspace, TheFloat64ConvolutionsColumnMatrixIsWorkspace) {
  const std::int64_t c = 4, h = 9, w = 7, o = 3;
  std::vector<double> image(static_cast<std::size_t>(c * h * w));
  for (std::size_t i = 0; i < image.size(); ++i) image[i] = static_cast<double>(i % 13) - 6.0;
  std::vector<double> kernel(static_cast<std::size_t>(o * c * 3 * 3));
  for (std::size_t i = 0; i < kernel.size(); ++i) kernel[i] = static_cast<double>(i % 5) * 0.25 - 0.5;
  const Attrs padded{{"padding", std::vector<std::int64_t>{1, 1}}};
  const std::uint64_t columns = sizeof(double) * c * 3 * 3 * h * w;  // [C·KH·KW, OH·OW], OH·OW = H·W

  Runtime rt(deterministic_config());
  const Tensor x = rt.constant(TensorMeta{{1, c, h, w}, DType::float64}, image);
  const Tensor weight = rt.constant(TensorMeta{{o, c, 3, 3}, DType::float64}, kernel);
  const std::uint64_t before = rt.allocator().stats().allocated_bytes.current;
  const Tensor y = rt.call1(ops::conv2d(), {x, weight}, padded);
  const std::vector<double> values = y.to_host_as<double>();
  const std::uint64_t output = sizeof(double) * o * h * w;
  EXPECT_GE(rt.allocator().stats().allocated_bytes.peak, before + output + columns);
  EXPECT_LT(rt.allocator().stats().allocated_bytes.current, before + output + columns);

  // The same kernel without a workspace: the same bits.
  const TensorMeta metas[] = {TensorMeta{{1, c, h, w}, DType::float64}, TensorMeta{{o, c, 3, 3}, DType::float64}};
  const TensorMeta out_meta{{1, o, h, w}, DType::float64};
  std::vector<double> direct(values.size(), -1.0);
  const void* inputs[] = {image.data(), kernel.data()};
  void* outputs[] = {direct.data()};
  ops::conv2d().cpu_kernel(KernelArgs{metas, inputs, {&out_meta, 1}, outputs, padded});
  EXPECT_EQ(std::memcmp(direct.data(), values.data(), values.size() * sizeof(double)), 0);

  // 1x1, stride 1, no padding: the input plane is the column matrix, no workspace.
  Runtime pointwise_rt(deterministic_config());
  const Tensor px = pointwise_rt.constant(TensorMeta{{1, c, h, w}, DType::float64}, image);
  const Tensor pw = pointwise_rt.constant(TensorMeta{{o, c, 1, 1}, DType::float64},
                                          std::vector<double>(static_cast<std::size_t>(o * c), 0.5));
  const Tensor py = pointwise_rt.call1(ops::conv2d(), {px, pw});
  // Nothing was allocated and freed: the peak is what is live, the inputs and the output.
  EXPECT_EQ(pointwise_rt.allocator().stats().allocated_bytes.peak,
            pointwise_rt.allocator().stats().allocated_bytes.current);
}

// A float32 convolution through oneDNN: its scratch (oneDNN's scratchpad, the operands reordered to and from
// oneDNN's layouts) is one workspace request, which the budget sees and which is gone after the call; outside
// a runtime the kernel uses its own buffer and computes the same bits. Each of the three ops.
TEST(KernelWorkspace, TheOneDnnConvolutionsScratchIsWorkspace) {
  const Shape x_shape{2, 16, 12, 10};
  const Shape w_shape{24, 16, 3, 3};
  const Shape y_shape{2, 24, 12, 10};
  const Attrs padded{{"padding", std::vector<std::int64_t>{1, 1}}};
  Attrs input_attrs = padded;
  input_attrs.set("input_shape", std::vector<std::int64_t>(x_shape.begin(), x_shape.end()));
  Attrs weight_attrs = padded;
  weight_attrs.set("weight_shape", std::vector<std::int64_t>(w_shape.begin(), w_shape.end()));
  struct Case {
    const OpDef& op;
    kernels::ConvOp kind;
    Shape a, b;
    const Attrs& attrs;
  };
  const Case cases[] = {{ops::conv2d(), kernels::ConvOp::forward, x_shape, w_shape, padded},
                        {ops::conv2d_backward_input(), kernels::ConvOp::backward_input, y_shape, w_shape, input_attrs},
                        {ops::conv2d_backward_weight(), kernels::ConvOp::backward_weight, y_shape, x_shape,
                         weight_attrs}};
  for (const Case& k : cases) {
    SCOPED_TRACE(k.op.name);
    const std::vector<TensorMeta> metas{TensorMeta{k.a}, TensorMeta{k.b}};
    const TensorMeta out_meta = k.op.infer(metas, k.attrs)[0];
    kernels::ConvGeometry g = k.kind == kernels::ConvOp::forward ? kernels::conv2d_geometry(metas, k.attrs)
                              : k.kind == kernels::ConvOp::backward_input
                                  ? kernels::conv2d_backward_input_geometry(metas, k.attrs)
                                  : kernels::conv2d_backward_weight_geometry(metas, k.attrs);
    const std::size_t scratch = kernels::onednn_conv_scratch_bytes(k.kind, g, false);
    EXPECT_GT(scratch, 0u);  // at least the reorders of the operands to oneDNN's blocked layouts
    std::vector<float> a(static_cast<std::size_t>(metas[0].numel()));
    std::vector<float> b(static_cast<std::size_t>(metas[1].numel()));
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 11) * 0.125F - 0.5F;
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 7) * 0.25F - 0.75F;

    Runtime rt(deterministic_config());
    const Tensor ta = rt.constant(metas[0], a);
    const Tensor tb = rt.constant(metas[1], b);
    const std::uint64_t before = rt.allocator().stats().allocated_bytes.current;
    const Tensor out = rt.call1(k.op, {ta, tb}, k.attrs);
    const std::vector<float> values = out.to_host();
    EXPECT_GE(rt.allocator().stats().allocated_bytes.peak, before + out_meta.nbytes() + scratch);
    EXPECT_LT(rt.allocator().stats().allocated_bytes.current, before + out_meta.nbytes() + scratch);

    std::vector<float> direct(values.size(), -1.0F);
    const void* inputs[] = {a.data(), b.data()};
    void* outputs[] = {direct.data()};
    k.op.cpu_kernel(KernelArgs{metas, inputs, {&out_meta, 1}, outputs, k.attrs});
    EXPECT_TRUE(bitwise_equal(direct, values));
  }
}

TEST(KernelWorkspace, AOneDnnConvolutionWhoseScratchDoesNotFitIsOutOfMemory) {
  const Shape x_shape{4, 16, 16, 16};
  const Shape w_shape{16, 16, 3, 3};
  const Attrs padded{{"padding", std::vector<std::int64_t>{1, 1}}};
  const std::vector<TensorMeta> metas{TensorMeta{x_shape}, TensorMeta{w_shape}};
  const std::size_t scratch =
      kernels::onednn_conv_scratch_bytes(kernels::ConvOp::forward, kernels::conv2d_geometry(metas, padded), false);
  const std::size_t tensors = 2 * metas[0].nbytes() + metas[1].nbytes();  // x, weight and y
  ASSERT_GT(scratch, 16 * KiB);
  const auto run = [&](std::uint64_t budget) {
    Runtime rt(deterministic_config(budget));
    const Tensor x = rt.constant(metas[0], std::vector<float>(static_cast<std::size_t>(metas[0].numel()), 0.5F));
    const Tensor w = rt.constant(metas[1], std::vector<float>(static_cast<std::size_t>(metas[1].numel()), 0.25F));
    return rt.call1(ops::conv2d(), {x, w}, padded).to_host();
  };
  EXPECT_THROW(run(tensors + scratch / 2), OutOfMemory);
  EXPECT_EQ(run(tensors + scratch + 64 * KiB), run(tensors + 4 * MiB));
}

}  // namespace
}  // namespace dtr::test
