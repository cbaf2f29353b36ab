// The counter-based generator the random ops share: every draw is a pure function of (seed, element index),
// so a rematerialization that replays the captured seed gets the first run's bits, in any order, with no
// generator state to save. Host and device code (DTR_HOST_DEVICE): a GPU draws the CPU's values.
#pragma once

#include <cstdint>
#include <limits>

#include "kernels/host_device.h"

namespace dtr::kernels {

// SplitMix64's output function (Steele, Lea and Flood, 2014): a bijective mixer whose outputs for consecutive
// inputs pass BigCrush.
DTR_HOST_DEVICE inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30U)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27U)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31U);
}

// The stream of a seed. The seed is mixed before the index is added, so that seeds s and s + 1 do not give
// the same stream shifted by one element.
DTR_HOST_DEVICE inline std::uint64_t stream_key(std::uint64_t seed) { return splitmix64(seed); }

// Draw `index` of the stream `key`, uniform in [0, 1): the top bits fill T's mantissa exactly (24 for float,
// 53 for double), so every value is a multiple of 2^-24 (2^-53).
template <typename T>
DTR_HOST_DEVICE T unit_uniform(std::uint64_t key, std::int64_t index) {
  constexpr unsigned kBits = std::numeric_limits<T>::digits;
  const T unit = T(1) / static_cast<T>(std::uint64_t{1} << kBits);
  return static_cast<T>(splitmix64(key + static_cast<std::uint64_t>(index)) >> (64U - kBits)) * unit;
}

}  // namespace dtr::kernels
