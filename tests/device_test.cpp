// "Compiled with CUDA" and "a GPU is present" are separate questions; both are answered, and asking for a GPU
// that is not there is a clear error.
#include <gtest/gtest.h>

#include "env_guard.h"
#include "test_resources.h"

namespace dtr::test {
namespace {

TEST(Device, ParsesTheAcceptedForms) {
  EXPECT_EQ(parse_device("cpu"), (Device{DeviceKind::cpu, 0}));
  EXPECT_EQ(parse_device("cuda"), (Device{DeviceKind::cuda, 0}));
  EXPECT_EQ(parse_device("cuda:3"), (Device{DeviceKind::cuda, 3}));
  EXPECT_EQ(parse_device("cuda:3").to_string(), "cuda:3");
  EXPECT_EQ(parse_device("cpu").to_string(), "cpu");
  for (const char* bad : {"", "gpu", "cuda:", "cuda:-1", "cuda:x", "cuda:1x", "CPU", "cuda:99999999999"}) {
    try {
      parse_device(bad);
      ADD_FAILURE() << "accepted \"" << bad << "\"";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("DTR_DEVICE"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("cpu, cuda or cuda:N"), std::string::npos) << e.what();
    }
  }
}

TEST(Device, CompiledWithCudaMatchesTheBuild) {
  EXPECT_EQ(cuda::is_compiled(), DTR_TEST_EXPECT_CUDA != 0);
  if (!cuda::is_compiled()) {
    EXPECT_EQ(cuda::device_count(), 0);
  }
}

TEST(Device, WithoutAGpuEverythingSaysWhy) {
  if (gpu_present()) GTEST_SKIP() << "a GPU is present";
  EXPECT_EQ(cuda::device_count(), 0);
  EXPECT_FALSE(cuda::unavailable_reason().empty());
  try {
    make_cuda_resource(0);
    FAIL() << "expected dtr::DeviceError";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:0 was requested"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(cuda::unavailable_reason()), std::string::npos) << e.what();
  }
  {
    EnvGuard env("DTR_DEVICE", nullptr);
    EXPECT_EQ(default_device(), (Device{DeviceKind::cpu, 0}));  // falls back, with a log line
  }
  {
    EnvGuard env("DTR_DEVICE", "cuda");
    EXPECT_THROW(default_device(), DeviceError);
  }
}

TEST(Device, DefaultDeviceHonoursTheEnvironment) {
  {
    EnvGuard env("DTR_DEVICE", "cpu");
    EXPECT_EQ(default_device(), (Device{DeviceKind::cpu, 0}));
  }
  {
    EnvGuard env("DTR_DEVICE", "tpu");
    EXPECT_THROW(default_device(), ConfigError);
  }
  {
    EnvGuard env("DTR_DEVICE", "cuda:4096");
    EXPECT_THROW(default_device(), DeviceError);
  }
}

TEST(Device, GpuResourceServesDeviceMemory) {
  DTR_SKIP_WITHOUT_GPU();
  auto gpu = make_cuda_resource(0);
  EXPECT_EQ(gpu->name(), "cuda:0");
  EXPECT_FALSE(gpu->host_accessible());
  CachingAllocator alloc(*gpu);
  void* p = alloc.allocate(3 * MiB);
  EXPECT_EQ(alloc.stats().reserved_bytes.current, 20 * MiB);
  alloc.free(p);
  EXPECT_THROW(make_cuda_resource(cuda::device_count()), DeviceError);
}

}  // namespace
}  // namespace dtr::test
