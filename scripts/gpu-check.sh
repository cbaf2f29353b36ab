#!/usr/bin/env bash
# Device checks on a lent GPU machine (the `device` tool; docs/results/gpu.md), from binaries built here:
#
#   scripts/gpu-check.sh bundle    (here) packs build/release (or $DTR_GPU_BUILD)'s test and tool binaries and libdtr into
#                                  build/gpu/dtr.tar.gz, and the Debian libraries they need that the GPU
#                                  machine lacks (oneDNN, OpenBLAS, spdlog, fmt, ...) into build/gpu/syslibs.tar.gz
#   scripts/gpu-check.sh tests     (there) every test binary on the GPU (dtr-tests in 12 shards), then
#                                  dtr-train --compare (forecast, the default, and its dtr-eq rows) on ResNet-32, the
#                                  Transformer, the LSTM
#   scripts/gpu-check.sh cost      (there) the tests a GPU turns on, then step times under DTR_COST_MODEL=measured
#                                  and flops, with --compare
#   scripts/gpu-check.sh compare   (there) the tests a GPU turns on, then the --compare runs of `tests` (a
#                                  shorter check of a change to the heuristics or the runtime: under a minute)
#
# On the GPU machine, run it from the repository root with build/gpu carried (run's `carry`); everything it
# prints goes to $OUT/log-MODE.txt too. The binaries expect the checkout they were built in (their rpath and
# the paths compiled into the tests): `bundle` records its root in build/gpu/origin, and the device modes
# link that path to the carried tree when the two differ.
set -u -o pipefail  # a pipeline's status is its first failure: a test binary or dtr-train that timed out or
                   # crashed says so below, not only by printing fewer lines
mode="${1:-}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
B="$root/${DTR_GPU_BUILD:-build/release}"  # the build to carry (CUDA on); DTR_GPU_BUILD names another

if [ "$mode" = bundle ]; then
  set -e
  mkdir -p "$root/build/gpu"
  cd "$B"
  tar -czf "$root/build/gpu/dtr.tar.gz" tests/dtr-tests tests/dtr-nn-tests tests/dtr-train-tests \
    tests/dtr-c-api-env tests/dtr-exit-probe tools/dtr-train tools/dtr-sim tools/dtr-trace-gen libdtr.so*
  staging="$(mktemp -d)"
  mkdir -p "$staging/lib"
  # The shared libraries the binaries load from the system, except the C/C++ runtime and CUDA's own.
  ldd tests/dtr-tests tools/dtr-train libdtr.so | awk '$3 ~ /^\/(usr\/)?lib\// {print $3}' | sort -u |
    grep -vE '/lib(c|m|stdc\+\+|gcc_s|pthread|dl|rt|cuda|cublas|cublasLt|cudnn[a-z_]*|nvrtc|nvJitLink)\.so' |
    while read -r lib; do cp -L "$lib" "$staging/lib/"; done
  tar -czf "$root/build/gpu/syslibs.tar.gz" -C "$staging" lib
  rm -rf "$staging"
  echo "$root" > "$root/build/gpu/origin"
  ls -l "$root/build/gpu"
  exit 0
fi
case "$mode" in tests|cost|compare) ;; *) echo "usage: scripts/gpu-check.sh bundle|tests|cost|compare" >&2; exit 2 ;; esac

out="${OUT:-/tmp/out}"
mkdir -p "$out"
exec > >(tee "$out/log-$mode.txt") 2>&1
date -u
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
origin="$(cat "$root/build/gpu/origin")"
if [ "$root" != "$origin" ]; then mkdir -p "$(dirname "$origin")" && ln -sfn "$root" "$origin"; fi
mkdir -p "$B" && tar -xzf "$root/build/gpu/syslibs.tar.gz" -C "$B" && tar -xzf "$root/build/gpu/dtr.tar.gz" -C "$B"
cudalibs=$(dirname "$(find / -name 'libcublas.so.*' -not -path '/proc/*' 2>/dev/null | head -1)")
cudnnlibs=$(dirname "$(find / -name 'libcudnn.so.*' -not -path '/proc/*' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH="$B/lib:$cudalibs:$cudnnlibs:${LD_LIBRARY_PATH:-}"
"$B/tests/dtr-tests" --gtest_list_tests > /dev/null || { echo "dtr-tests does not load"; ldd "$B/tests/dtr-tests"; exit 1; }

# The tests a GPU turns on, and the measured cost model's.
gpu_tests() {
  timeout 120 "$B/tests/dtr-tests" --gtest_filter='BackendParity*:Device*:CudaKernels*:MeasuredCost*:*Cuda*' 2>&1 |
    grep -E '^\[  (PASSED|FAILED|SKIPPED) |Failure' | sort | uniq -c || echo "dtr-tests (GPU subset): exit status $?"
}
# dtr-train --compare (the default heuristic's rows, then dtr-eq's) on ResNet-32, the Transformer and the LSTM.
compare_runs() {
  cd "$root"
  for model in resnet transformer lstm; do
    echo "== dtr-train --model $model"; date -u
    timeout 80 "$B/tools/dtr-train" --model "$model" --data synthetic --steps 8 --compare 2>&1 | grep -E '^\||bitwise' ||
      echo "dtr-train --model $model: exit status $?"
  done
}

if [ "$mode" = tests ]; then
  cd "$B/tests"
  pids=()
  for i in $(seq 0 11); do
    GTEST_TOTAL_SHARDS=12 GTEST_SHARD_INDEX=$i timeout 300 ./dtr-tests > "$out/dtr-tests-$i.txt" 2>&1 & pids+=($!)
  done
  timeout 300 ./dtr-nn-tests > "$out/dtr-nn-tests.txt" 2>&1 & pids+=($!)
  timeout 300 ./dtr-train-tests > "$out/dtr-train-tests.txt" 2>&1 & pids+=($!)
  for p in "${pids[@]}"; do wait "$p"; echo "exit $?"; done
  grep -h -E "^\[  (PASSED|FAILED|SKIPPED) " "$out"/dtr-*.txt | sort | uniq -c
  compare_runs
elif [ "$mode" = compare ]; then
  gpu_tests
  compare_runs
else
  gpu_tests
  for m in resnet transformer; do
    for cm in measured flops; do
      echo "== $m, DTR_COST_MODEL=$cm --compare, 10 steps"; date -u
      DTR_COST_MODEL=$cm timeout 100 "$B/tools/dtr-train" --model "$m" --data synthetic --steps 10 --compare 2>&1 |
        grep -E '^\||stopped|bitwise'
    done
  done
fi
date -u
