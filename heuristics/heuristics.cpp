// The DTR family of eviction heuristics (design section 5): h_DTR with the exact evicted neighbourhood, its
// union-find approximation h_DTR^eq, and the simpler ones the DTR paper compares them with.
#include <algorithm>
#include <charconv>
#include <deque>
#include <limits>
#include <random>
#include <vector>

#include "dtr/check.h"
#include "heuristics/heuristic.h"

namespace dtr::heuristics {
namespace {

// Staleness: time since last use, at least 1 so that a storage used this instant still has a finite score.
double staleness(const StorageView& s, std::uint64_t now) {
  return static_cast<double>(now > s.last_access() ? now - s.last_access() : 0) + 1.0;
}

double bytes_of(const StorageView& s) { return static_cast<double>(std::max<std::size_t>(s.bytes(), 1)); }

class LruHeuristic final : public Heuristic {
 public:
  std::string name() const override { return "lru"; }
  double score(StorageView& s, std::uint64_t now) override { return 1.0 / staleness(s, now); }
};

// h_size = 1/m: the largest goes first.
class SizeHeuristic final : public Heuristic {
 public:
  std::string name() const override { return "size"; }
  double score(StorageView& s, std::uint64_t /*now*/) override { return 1.0 / bytes_of(s); }
};

// h_DTR^local = c0/(m·s): the DTR score without the neighbourhood.
class DtrLocalHeuristic final : public Heuristic {
 public:
  std::string name() const override { return "dtr-local"; }
  double score(StorageView& s, std::uint64_t now) override { return s.cost() / (bytes_of(s) * staleness(s, now)); }
};

// A seeded uniform draw per decision: the floor every other heuristic should beat.
class RandomHeuristic final : public Heuristic {
 public:
  explicit RandomHeuristic(std::uint64_t seed) : seed_(seed), rng_(seed) {}
  std::string name() const override { return seed_ == kDefaultRandomSeed ? "random" : "random:" + std::to_string(seed_); }
  double score(StorageView& /*s*/, std::uint64_t /*now*/) override {
    return std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  }

 private:
  std::uint64_t seed_;
  std::mt19937_64 rng_;
};

// Sums c0 over the evicted storages reachable from `s` through evicted storages only: its inputs' side
// (what recomputing `s` would recompute) and, when `dependents` is set, its dependents' side too (what
// could no longer be recomputed without it). `mark` is a fresh walk number; each storage counts once.
double evicted_reach_cost(StorageView& s, std::uint64_t mark, bool dependents) {
  double cost = 0;
  std::vector<StorageView*> stack;
  s.heuristic_mark = mark;
  auto visit = [&](StorageView& n) {
    if (!n.evicted() || n.heuristic_mark == mark) return;
    n.heuristic_mark = mark;
    cost += n.cost();
    stack.push_back(&n);
  };
  s.for_each_input(visit);
  while (!stack.empty()) {
    StorageView* n = stack.back();
    stack.pop_back();
    n->for_each_input(visit);
  }
  if (dependents) {
    s.for_each_dependent(visit);
    while (!stack.empty()) {
      StorageView* n = stack.back();
      stack.pop_back();
      n->for_each_dependent(visit);
    }
  }
  return cost;
}

// h_DTR = (c0 + Σ_{e*(t)} c0) / (m·s) with the exact e*: evicted ancestors reached through evicted storages,
// plus evicted descendants likewise. Exact, and a graph walk per score.
class DtrHeuristic final : public Heuristic {
 public:
  std::string name() const override { return "dtr"; }
  double score(StorageView& s, std::uint64_t now) override {
    const double cost = s.cost() + evicted_reach_cost(s, ++walks_, /*dependents=*/true);
    return cost / (bytes_of(s) * staleness(s, now));
  }

 private:
  std::uint64_t walks_ = 0;
};

// h_MSPS = (c0 + Σ evicted ancestors' c0) / m (Peng et al., Capuchin): the cost of bringing it back per byte
// freed, with no staleness.
class MspsHeuristic final : public Heuristic {
 public:
  std::string name() const override { return "msps"; }
  double score(StorageView& s, std::uint64_t /*now*/) override {
    return (s.cost() + evicted_reach_cost(s, ++walks_, /*dependents=*/false)) / bytes_of(s);
  }

 private:
  std::uint64_t walks_ = 0;
};

// h_DTR^eq: e*(t) approximated by the union-find classes of connected evicted storages, each class carrying
// the summed cost of its members. Evicting t gives it a fresh node united with its evicted neighbours'
// classes; rematerializing it subtracts its cost from its class and drops its node (classes are never split,
// as in the DTR authors' simulator).
class DtrEqHeuristic final : public Heuristic {
 public:
  std::string name() const override { return "dtr-eq"; }

  double score(StorageView& s, std::uint64_t now) override {
    double cost = s.cost();
    ++epoch_;
    auto add_class = [&](StorageView& neighbour) {
      if (!neighbour.evicted() || neighbour.heuristic_slot == nullptr) return;
      Node* root = find(static_cast<Node*>(neighbour.heuristic_slot));
      if (root->seen == epoch_) return;  // each class counts once
      root->seen = epoch_;
      cost += root->cost;
    };
    s.for_each_input(add_class);
    s.for_each_dependent(add_class);
    return cost / (static_cast<double>(std::max<std::size_t>(s.bytes(), 1)) * staleness(s, now));
  }

  // A fresh node each time: the storage joins the classes of its evicted neighbours now, not the class it
  // was in before it was last rematerialized (that class may have drifted far from it).
  void on_evict(StorageView& s) override {
    DTR_CHECK(s.heuristic_slot == nullptr, InvalidArgument, "dtr-eq: a storage was evicted twice");
    Node* node = allocate_node();
    s.heuristic_slot = node;
    node->cost = s.cost();
    auto unite = [&](StorageView& neighbour) {
      if (neighbour.evicted() && neighbour.heuristic_slot != nullptr) {
        node = merge(node, find(static_cast<Node*>(neighbour.heuristic_slot)));
      }
    };
    s.for_each_input(unite);
    s.for_each_dependent(unite);
  }

  // The storage leaves its class: the class no longer counts its cost (classes are never split, as in the
  // DTR authors' simulator) and its node stays only as long as other members' paths run through it.
  void on_rematerialize(StorageView& s) override { on_destroy(s); }

  void on_destroy(StorageView& s) override {
    if (s.heuristic_slot == nullptr) return;  // never evicted, or back in memory
    Node* node = static_cast<Node*>(s.heuristic_slot);
    Node* root = find(node);
    root->cost = std::max(0.0, root->cost - s.cost());
    s.heuristic_slot = nullptr;
    unref(node);
  }

  std::size_t live_slots() const override { return live_nodes_; }

 private:
  // A node is referenced by its storage (until the storage dies) and by the nodes whose parent it is; it is
  // recycled when neither is left, so the forest stays as large as the evicted lineage, not the run.
  struct Node {
    Node* parent = nullptr;  // nullptr: a root
    double cost = 0.0;       // meaningful at roots
    std::uint32_t rank = 0;
    std::uint32_t refs = 0;
    std::uint64_t seen = 0;
  };

  Node* allocate_node() {
    Node* node = nullptr;
    if (free_ != nullptr) {
      node = free_;
      free_ = free_->parent;
      *node = Node{};
    } else {
      node = &nodes_.emplace_back();
    }
    node->refs = 1;  // its storage
    live_nodes_ += 1;
    return node;
  }

  // Drops one reference; a node left with none goes back to the free list, releasing its parent in turn.
  void unref(Node* node) {
    while (node != nullptr && --node->refs == 0) {
      Node* parent = node->parent;
      node->parent = free_;
      free_ = node;
      live_nodes_ -= 1;
      node = parent;
    }
  }

  Node* find(Node* node) {
    Node* root = node;
    while (root->parent != nullptr) root = root->parent;
    // Path compression: each node on the path now points at the root. A node that loses its last child this
    // way (and has no storage) is recycled once its own link is moved, so nothing is read after it is freed.
    while (node != root) {
      Node* next = node->parent;
      if (next != root) {
        node->parent = root;
        root->refs += 1;
        next->refs -= 1;  // may reach 0: `next` is visited next and recycled then
      }
      if (node->refs == 0) unref_released(node);
      node = next;
    }
    return root;
  }

  // `node` (whose parent is a root that keeps other references) has no references left: recycle it.
  void unref_released(Node* node) {
    node->refs = 1;
    unref(node);
  }

  static Node* merge(Node* a, Node* b) {
    if (a == b) return a;
    if (a->rank < b->rank) std::swap(a, b);
    b->parent = a;
    a->refs += 1;
    a->cost += b->cost;
    if (a->rank == b->rank) ++a->rank;
    return a;
  }

  std::deque<Node> nodes_;
  Node* free_ = nullptr;  // recycled nodes, linked through `parent`
  std::size_t live_nodes_ = 0;
  std::uint64_t epoch_ = 0;
};

}  // namespace

std::vector<std::string> heuristic_names() { return {"dtr", "dtr-eq", "dtr-local", "lru", "size", "msps", "random"}; }

std::unique_ptr<Heuristic> make_heuristic(std::string_view name, std::string_view variable) {
  if (name == "dtr") return std::make_unique<DtrHeuristic>();
  if (name == "dtr-eq") return std::make_unique<DtrEqHeuristic>();
  if (name == "dtr-local") return std::make_unique<DtrLocalHeuristic>();
  if (name == "lru") return std::make_unique<LruHeuristic>();
  if (name == "size") return std::make_unique<SizeHeuristic>();
  if (name == "msps") return std::make_unique<MspsHeuristic>();
  if (name == "random") return std::make_unique<RandomHeuristic>(kDefaultRandomSeed);
  if (name.starts_with("random:")) {
    const std::string_view digits = name.substr(7);
    std::uint64_t seed = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), seed);
    if (error == std::errc{} && end == digits.data() + digits.size() && !digits.empty()) {
      return std::make_unique<RandomHeuristic>(seed);
    }
  }
  DTR_THROW(ConfigError, variable, "=\"", name,
            "\" is not a heuristic; expected dtr, dtr-eq, dtr-local, lru, size, msps, random or random:SEED");
}

}  // namespace dtr::heuristics
