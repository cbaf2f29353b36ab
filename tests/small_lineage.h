// A seven-storage lineage for heuristic tests: a diamond (t1 feeds t2 and t3, which t4 reads) beside a branch.
#pragma once

#include <vector>

#include "fake_storage.h"
#include "heuristics/heuristic.h"

namespace dtr::test {

// t0 a constant; t1 = f(t0), t2 = f(t1), t3 = f(t1), t4 = f(t2, t3), t5 = f(t3), t6 = f(t4, t5).
struct SmallLineage {
  std::vector<FakeStorage> t = std::vector<FakeStorage>(7);
  SmallLineage() {
    auto edge = [&](int from, int to) { link(t[from], t[to]); };
    edge(0, 1);
    edge(1, 2);
    edge(1, 3);
    edge(2, 4);
    edge(3, 4);
    edge(3, 5);
    edge(4, 6);
    edge(5, 6);
  }
  void evict(heuristics::Heuristic& h, int i) {
    t[i].is_evicted = true;
    h.on_evict(t[i]);
  }
};

}  // namespace dtr::test
