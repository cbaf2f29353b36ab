// Revolve's optimum (Griewank & Walther): the fewest recomputations that reverse a uniform chain of n steps
// with s checkpoint slots, the yardstick for DTR on chains (design section 9). Used by the chain test and the
// heuristic-quality benchmark.
#pragma once

#include <cmath>

namespace dtr::heuristics {

// beta(s, r) = C(s + r, s), saturating far above any n we use.
inline double revolve_beta(int s, int r) {
  double value = 1;
  for (int i = 1; i <= s; ++i) value = value * (r + i) / i;
  return value;
}

// r the least with beta(s, r) >= n; forward steps t* = r*n - beta(s + 1, r - 1); recomputations t* - (n - 1).
// Infinite without a slot.
inline double revolve_recomputations(int n, int s) {
  if (s < 1) return INFINITY;
  int r = 0;
  while (revolve_beta(s, r) < n) ++r;
  return r * static_cast<double>(n) - revolve_beta(s + 1, r - 1) - (n - 1);
}

}  // namespace dtr::heuristics
