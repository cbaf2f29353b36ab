// "Compiled with CUDA" and "a GPU is present" are separate questions; both are answered, and asking for a GPU
// that is not there is a clear error.
#include <gtest/gtest.h>

#include "env_guard.h"
#include "test_helpers.h"
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

TEST(Device, TheCpuFallbackOfACudaBuildIsLoggedOnce) {
  // A fresh process with DTR_DEVICE unset whose default allocator asks for the default device.
  const Outcome r = run_command("env -u DTR_DEVICE " DTR_C_API_ENV_PATH " 4096");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("ok: budget 0"), std::string::npos) << r.output;
  const std::string line = "DTR_DEVICE is unset and no GPU is usable (" + cuda::unavailable_reason() + "); running on the CPU";
  std::size_t count = 0;
  for (std::size_t at = r.output.find(line); at != std::string::npos; at = r.output.find(line, at + 1)) ++count;
  // Logged exactly when the build has CUDA and the machine no GPU; a CPU-only build has nothing to fall from.
  EXPECT_EQ(count, cuda::is_compiled() && cuda::device_count() == 0 ? 1U : 0U) << r.output;
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
