// exit_probe MODE: a program that ends while dtr still has something to say (a log line, a stats file, a
// trace), as users' programs do. It prints a line to stdout without flushing and exits with status 3: the test
// (exit_test.cpp) checks that the line, dtr's message and the status all arrive, i.e. that nothing crashes at
// exit. Modes:
//   stats-unwritable  DTR_STATS names a file in a missing folder: the default runtime reports it at exit
//   tensor-at-exit    a global tensor outlives the default runtime: the warning, and no crash when it dies later
//   c-api-atexit      the C API used from an atexit handler (DTR_LOG_LEVEL=debug logs every segment)
//   runtime-at-exit   the default runtime first used from an atexit handler
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dtr/dtr.h"
#include "dtr/dtr_c.h"

namespace {

dtr::Tensor global_tensor;  // destroyed after the default runtime, which main() creates

void use_c_api_at_exit() {
  void* p = dtr_malloc(3u << 20);
  std::printf("atexit malloc %s\n", p != nullptr ? "ok" : dtr_last_error());
  dtr_free(p);
  dtr_free(reinterpret_cast<void*>(0x10));  // a foreign pointer: an error message, kept per thread
  std::printf("atexit error: %s\n", dtr_last_error());
}

void use_runtime_at_exit() {
  const dtr::Tensor t = dtr::default_runtime().constant(dtr::TensorMeta{{4}}, std::vector<float>{1, 2, 3, 4});
  std::printf("atexit sum %g\n", static_cast<double>(dtr::default_runtime().call1(dtr::ops::sum(), {t}).to_host()[0]));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: exit_probe stats-unwritable|tensor-at-exit|c-api-atexit|runtime-at-exit\n");
    return 2;
  }
  const std::string mode = argv[1];
  if (mode == "stats-unwritable") {
    const dtr::Tensor t = dtr::default_runtime().constant(dtr::TensorMeta{{4}}, std::vector<float>{1, 2, 3, 4});
    std::printf("program output\n");
  } else if (mode == "tensor-at-exit") {
    global_tensor = dtr::default_runtime().constant(dtr::TensorMeta{{4}}, std::vector<float>{1, 2, 3, 4});
    std::printf("program output\n");
  } else if (mode == "c-api-atexit") {
    std::atexit(use_c_api_at_exit);
    void* p = dtr_malloc(1024);  // the default allocator, and its logger, made before the handler runs
    dtr_free(p);
    std::printf("program output\n");
  } else if (mode == "runtime-at-exit") {
    std::atexit(use_runtime_at_exit);
    std::printf("program output\n");
  } else {
    std::fprintf(stderr, "exit_probe: unknown mode %s\n", mode.c_str());
    return 2;
  }
  return 3;
}
