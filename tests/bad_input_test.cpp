// Bad input through the C++ API: sizes that do not fit in 64 bits, tensors that are undefined or another
// runtime's, files that cannot be written. Each is a clear error, never a crash or a silent wrong answer.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "test_helpers.h"
#include "test_resources.h"

namespace dtr::test {
namespace {

constexpr std::int64_t k2to32 = std::int64_t{1} << 32;
constexpr std::int64_t k2to62 = std::int64_t{1} << 62;

TEST(BadInput, ElementAndByteCountsThatDoNotFitAreShapeErrors) {
  // Before: [2^62] float32 got a 0-byte buffer (2^64 bytes wrapped) that its kernel then overran, and
  // [2^32, 2^32] became an empty tensor whose sum was 0.
  expect_error<ShapeError>([] { (void)TensorMeta{{k2to62}}.nbytes(); },
                           {"float32 tensor of shape [4611686018427387904]", "more bytes than 64 bits count"});
  expect_error<ShapeError>([] { (void)TensorMeta{{k2to32, k2to32}}.numel(); },
                           {"shape [4294967296, 4294967296]", "more elements than 64 bits count"});
  EXPECT_EQ((TensorMeta{{k2to62, 0, k2to62}}.numel()), 0);  // empty, whatever the other dimensions
  EXPECT_EQ((TensorMeta{{k2to62 / 2, 2}}.numel()), k2to62);
  EXPECT_EQ((TensorMeta{{k2to62 / 4}, DType::float32}.nbytes()), static_cast<std::size_t>(k2to62));

  Runtime rt(deterministic_config());
  const std::uint64_t before = allocations(rt);
  expect_error<ShapeError>([&] { rt.constant(TensorMeta{{k2to62}}); }, {"constant: ", "more bytes than 64 bits"});
  expect_error<ShapeError>([&] { rt.constant(TensorMeta{{k2to32, k2to32}}); }, {"more elements than 64 bits"});
  const Tensor x = rt.constant(TensorMeta{{1}}, std::vector<float>{1});
  expect_error<ShapeError>(
      [&] { rt.call1(ops::broadcast_to(), {x}, {{"shape", std::vector<std::int64_t>{k2to32, k2to32}}}); },
      {"op 'broadcast_to': output", "more elements than 64 bits"});
  expect_error<ShapeError>([&] { rt.view(x, {k2to32, k2to32}); }, {"more elements than 64 bits"});
  EXPECT_EQ(allocations(rt), before + 1);  // x's buffer alone
}

class Ignore final : public Computation {
 public:
  std::string_view name() const override { return "ignore"; }
  void run(const KernelArgs& /*args*/) override {}
};

TEST(BadInput, AComputationsOutputThatDoesNotFitIsAShapeError) {
  Runtime rt(deterministic_config());
  const TensorMeta huge{{k2to62}};
  expect_error<ShapeError>(
      [&] { rt.call(std::make_shared<Ignore>(), {}, std::span<const TensorMeta>(&huge, 1)); },
      {"op 'ignore': output", "more bytes than 64 bits"});
}

TEST(BadInput, UndefinedAndForeignTensorsAreNamedErrorsEverywhere) {
  Runtime rt(deterministic_config());
  Runtime other(deterministic_config());
  Tensor none;
  Tensor foreign = other.constant(TensorMeta{{2}}, std::vector<float>{1, 2});
  const Tensor x = rt.constant(TensorMeta{{2}}, std::vector<float>{1, 2});
  expect_error<InvalidArgument>([&] { rt.call1(ops::add(), {x, none}); }, {"op 'add': input 1 is undefined"});
  expect_error<InvalidArgument>([&] { rt.call1(ops::add(), {foreign, x}); },
                                {"op 'add': input 0 belongs to another runtime"});
  expect_error<InvalidArgument>([&] { rt.assign(none, ops::relu(), {x}); }, {"assign: the target is undefined"});
  expect_error<InvalidArgument>([&] { rt.assign(foreign, ops::relu(), {x}); },
                                {"assign: the target belongs to another runtime"});
  expect_error<InvalidArgument>([&] { rt.view(none, {2}); }, {"view: the tensor is undefined"});
  expect_error<InvalidArgument>([&] { rt.view(foreign, {2}); }, {"view: the tensor belongs to another runtime"});
  expect_error<InvalidArgument>([&] { rt.materialize(none); }, {"materialize: the tensor is undefined"});
  expect_error<InvalidArgument>([&] { rt.materialize(foreign); }, {"materialize: the tensor belongs to another"});
  expect_error<InvalidArgument>([&] { rt.evict(none); }, {"evict: the tensor is undefined"});
  expect_error<InvalidArgument>([&] { rt.evict(foreign); }, {"evict: the tensor belongs to another runtime"});
  expect_error<InvalidArgument>([&] { (void)none.meta(); }, {"the tensor is undefined"});
  expect_error<InvalidArgument>([&] { (void)none.to_host(); }, {"to_host: the tensor is undefined"});
  expect_error<InvalidArgument>([&] { (void)none.storage_bytes(); }, {"storage_bytes: the tensor is undefined"});
  EXPECT_FALSE(none.resident());
  EXPECT_FALSE(none.is_view());
  // The runtime is unharmed.
  EXPECT_EQ(rt.call1(ops::add(), {x, x}).to_host(), (std::vector<float>{2, 4}));
}

TEST(BadInput, MessagesUsersReadDoNotEndWithASourcePath) {
  Runtime rt(deterministic_config());
  const Tensor x = rt.constant(TensorMeta{{2}}, std::vector<float>{1, 2});
  try {
    rt.call1(ops::matmul(), {x, x});
    FAIL() << "no ShapeError";
  } catch (const ShapeError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find(".cpp"), std::string::npos) << message;
    EXPECT_EQ(message.find('['), message.find("[2]"));  // the shapes are the only brackets
    EXPECT_NE(std::string(e.file()).find("kernels/"), std::string::npos);  // the location stays for debugging
  }
  Config config = deterministic_config(64);
  Runtime tiny(config);
  try {
    tiny.constant(TensorMeta{{1024}});
    FAIL() << "no OutOfMemory";
  } catch (const OutOfMemory& e) {
    EXPECT_EQ(std::string(e.what()).find(".cpp"), std::string::npos) << e.what();
  }
}

TEST(BadInput, StatsAndTraceWriteErrorsAreReportedNotLost) {
  // /dev/full opens, takes writes into a buffer and fails at the flush: the failure must not vanish at close.
  ::testing::internal::CaptureStderr();
  {
    Config config = deterministic_config();
    config.stats_path = "/dev/full";
    config.trace_path = "/dev/full";
    Runtime rt(config);
    const Tensor x = rt.constant(TensorMeta{{2}}, std::vector<float>{1, 2});
    const Tensor y = rt.call1(ops::relu(), {x});
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("DTR_TRACE: writing '/dev/full' failed: No space left on device"), std::string::npos) << log;
  EXPECT_NE(log.find("DTR_STATS: writing '/dev/full' failed: No space left on device"), std::string::npos) << log;

  // A stats file in a folder that does not exist: the reason, not a silent nothing.
  ::testing::internal::CaptureStderr();
  {
    Config config = deterministic_config();
    config.stats_path = ::testing::TempDir() + "no-such-dir/stats.json";
    Runtime rt(config);
  }
  const std::string missing = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(missing.find("DTR_STATS: cannot write '" + ::testing::TempDir() +
                         "no-such-dir/stats.json': No such file or directory"),
            std::string::npos)
      << missing;
}

}  // namespace
}  // namespace dtr::test
