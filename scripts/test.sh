#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test.
#   scripts/test.sh           the release build's tests (and the install + find_package consumer test)
#   scripts/test.sh asan      the same tests built by clang with AddressSanitizer and UndefinedBehaviorSanitizer,
#                             and each libFuzzer target (fuzz/) run for 20 seconds
#   scripts/test.sh tsan      the same tests built with ThreadSanitizer
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mode="${1:-release}"
"$root/scripts/setup.sh"
case "$mode" in
  release)
    build_dir="$root/build/release"
    options=(-DCMAKE_BUILD_TYPE=Release)
    ;;
  asan)
    build_dir="$root/build/asan-clang"  # not build/asan: a cache made by another compiler cannot be reused
    # -O1 and line tables only (-g1): the reports keep their file:line stacks, and the build takes half the time.
    # clang: a second compiler's warnings, and libFuzzer, so the fuzz targets fuzz (ctest fuzz_run.*) beside the
    # tests; libdtr gets edge counters only (the top-level CMakeLists.txt), which the tests barely feel.
    options=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
             -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++
             -DDTR_SANITIZE=address,undefined -DDTR_FUZZ=ON -DDTR_FUZZ_SECONDS=20 -DDTR_BUILD_BENCHMARKS=OFF
             # clang 14 cannot compile libtorch 1.13's headers as C++20 (ATen/core/List.h moves a vector of the
             # incomplete c10::IValue): dtr-torch is built and tested by the release build (g++) only.
             -DDTR_WITH_TORCH=OFF)
    # The CUDA driver maps memory where ASan keeps its shadow gap; without a GPU this changes nothing.
    export ASAN_OPTIONS="protect_shadow_gap=0:detect_leaks=1:abort_on_error=1:${ASAN_OPTIONS:-}"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
    ;;
  tsan)
    build_dir="$root/build/tsan"
    # dtr-torch off: libtorch is not built with ThreadSanitizer, whose reports inside it would be noise. The scalar
    # sigmoid and tanh (kernels/elementwise/vector_math.h), which no other build compiles, so they keep building.
    options=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DDTR_SANITIZE=thread -DDTR_BUILD_BENCHMARKS=OFF -DDTR_WITH_CUDA=OFF
             -DDTR_WITH_TORCH=OFF -DDTR_VECTOR_MATH=OFF)
    ;;
  *)
    echo "usage: scripts/test.sh [release|asan|tsan]" >&2
    exit 2
    ;;
esac
"$root/scripts/build.sh" "$build_dir" "${options[@]}"
ctest --test-dir "$build_dir" --output-on-failure --parallel "$(nproc)"
