#!/usr/bin/env bash
# Installs the Debian packages dtr builds with, when any is missing. Idempotent: does nothing when all are
# there. The CUDA toolkit is optional (DTR_WITH_CUDA=AUTO): it is used when found, never installed here.
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config
  clang libclang-rt-14-dev  # the sanitizer build (scripts/test.sh asan): clang's sanitizers and libFuzzer
  libfmt-dev libspdlog-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenblas-dev
  libdnnl-dev ocl-icd-opencl-dev  # oneDNN; its CMake package needs OpenCL (its GPU runtime), only recommended
  zlib1g-dev
  gnuplot-nox
  dataset-fashion-mnist  # the data dtr-train trains on (/usr/share/datasets/fashion-mnist)
  # dtr-torch (-DDTR_WITH_TORCH=AUTO): libtorch to build against, Debian's PyTorch for its Python tests;
  # without the pthread OpenBLAS, torch's BLAS is 40x slower.
  libtorch-dev python3-torch libopenblas0-pthread
)
# --bench: accepted for older instructions; PyTorch, which bench/torch/ runs with, is installed anyway now.
if [ $# -gt 0 ] && [ "$1" != "--bench" ]; then
  echo "usage: scripts/setup.sh [--bench]" >&2
  exit 2
fi

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "dtr setup: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
