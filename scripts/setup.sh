#!/usr/bin/env bash
# Installs the Debian packages dtr builds with, when any is missing. Idempotent: does nothing when all are
# there. The CUDA toolkit is optional (DTR_WITH_CUDA=AUTO): it is used when found, never installed here.
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config
  libfmt-dev libspdlog-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenblas-dev
  libdnnl-dev ocl-icd-opencl-dev  # oneDNN; its CMake package needs OpenCL (its GPU runtime), only recommended
  zlib1g-dev
  gnuplot-nox
  dataset-fashion-mnist  # the data dtr-train trains on (/usr/share/datasets/fashion-mnist)
)

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
