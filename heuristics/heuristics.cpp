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

double bytes_of(const StorageView& s) { return static_cast<double>(std::max<std::size_t>(s.bytes(), 1)); }

// b of a ScoreKey: the staleness now - b is now - last access + 1.
double stale_base(const StorageView& s) { return static_cast<double>(s.last_access()) - 1.0; }

class LruHeuristic final : public Heuristic {
 public:
  std::string name() const override { return "lru"; }
  ScoreKey key(StorageView& s) override { return {1.0, stale_base(s)}; }
};

// h_size = 1/m: the largest goes first.
class SizeHeuristic final : public Heuristic {
 public:
  std::string name() const override { return "size"; }
  bool timeless() const override { return true; }
  ScoreKey key(StorageView& s) override { return {1.0 / bytes_of(s), 0.0}; }
};

// h_DTR^local = c0/(m·s): the DTR score without the neighbourhood.
class DtrLocalHeuristic final : public Heuristic {
 public:
  std::string name() const override { return "dtr-local"; }
  ScoreKey key(StorageView& s) override { return {s.cost() / bytes_of(s), stale_base(s)}; }
};

// A seeded uniform draw per decision: the floor every other heuristic should beat. No index: every decision
// draws anew.
class RandomHeuristic final : public Heuristic {
 public:
  explicit RandomHeuristic(std::uint64_t seed) : seed_(seed), rng_(seed) {}
  std::string name() const override { return seed_ == kDefaultRandomSeed ? "random" : "random:" + std::to_string(seed_); }
  bool indexable() const override { return false; }
  ScoreKey key(StorageView& /*s*/) override { return {0.5, 0.0}; }
  double score(StorageView& /*s*/, std::uint64_t /*now*/) override {
    return std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  }

 private:
  std::uint64_t seed_;
  std::mt19937_64 rng_;
};

// Base of the heuristics that walk the evicted lineage: one walk counter for every walk, so that marks never
// collide, and the notification of the resident storages next to a changed evicted region.
class WalkingHeuristic : public Heuristic {
 public:
  bool scores_walk_lineage() const override { return true; }

 protected:
  std::uint64_t next_mark() { return ++marks_; }

  // Sums c0 over the evicted storages reachable from `s` through evicted storages only: its inputs' side
  // (what recomputing `s` would recompute) and, when `dependents` is set, its dependents' side too (what
  // could no longer be recomputed without it). Each storage counts once.
  double evicted_reach_cost(StorageView& s, bool dependents) {
    const std::uint64_t mark = next_mark();
    double cost = 0;
    stack_.clear();
    s.heuristic_mark = mark;
    auto visit = [&](StorageView& n) {
      if (!n.evicted() || n.heuristic_mark == mark) return;
      n.heuristic_mark = mark;
      cost += n.cost();
      stack_.push_back(&n);
    };
    s.for_each_input(visit);
    while (!stack_.empty()) {
      StorageView* n = stack_.back();
      stack_.pop_back();
      n->for_each_input(visit);
    }
    if (dependents) {
      s.for_each_dependent(visit);
      while (!stack_.empty()) {
        StorageView* n = stack_.back();
        stack_.pop_back();
        n->for_each_dependent(visit);
      }
    }
    return cost;
  }

  // Tells the listener about every resident storage next to the evicted region around `s` (walking from `s`
  // through evicted storages, both ways): those whose evicted reach may have changed when `s` did.
  void notify_region(StorageView& s) {
    if (listener() == nullptr) return;
    const std::uint64_t mark = next_mark();
    std::vector<StorageView*> dirty;
    stack_.clear();
    s.heuristic_mark = mark;
    stack_.push_back(&s);
    auto visit = [&](StorageView& n) {
      if (n.heuristic_mark == mark) return;
      n.heuristic_mark = mark;
      (n.evicted() ? stack_ : dirty).push_back(&n);
    };
    while (!stack_.empty()) {
      StorageView* n = stack_.back();
      stack_.pop_back();
      n->for_each_input(visit);
      n->for_each_dependent(visit);
    }
    for (StorageView* r : dirty) listener()->score_changed(*r);  // after the walk: listeners walk too
  }

 private:
  std::uint64_t marks_ = 0;
  std::vector<StorageView*> stack_;
};

// h_DTR = (c0 + Σ_{e*(t)} c0) / (m·s) with the exact e*: evicted ancestors reached through evicted storages,
// plus evicted descendants likewise. Exact, and a graph walk per score.
class DtrHeuristic final : public WalkingHeuristic {
 public:
  std::string name() const override { return "dtr"; }
  ScoreKey key(StorageView& s) override {
    return {(s.cost() + evicted_reach_cost(s, /*dependents=*/true)) / bytes_of(s), stale_base(s)};
  }
  void on_evict(StorageView& s) override { notify_region(s); }
  void on_rematerialize(StorageView& s) override { notify_region(s); }
  void on_destroy(StorageView& s) override {
    if (s.evicted()) notify_region(s);
  }
};

// h_MSPS = (c0 + Σ evicted ancestors' c0) / m (Peng et al., Capuchin): the cost of bringing it back per byte
// freed, with no staleness.
class MspsHeuristic final : public WalkingHeuristic {
 public:
  std::string name() const override { return "msps"; }
  bool timeless() const override { return true; }
  ScoreKey key(StorageView& s) override {
    return {(s.cost() + evicted_reach_cost(s, /*dependents=*/false)) / bytes_of(s), 0.0};
  }
  void on_evict(StorageView& s) override { notify_region(s); }
  void on_rematerialize(StorageView& s) override { notify_region(s); }
  void on_destroy(StorageView& s) override {
    if (s.evicted()) notify_region(s);
  }
};

// h_DTR^eq: e*(t) approximated by the union-find classes of connected evicted storages, each class carrying
// the summed cost of its members. Evicting t gives it a fresh node united with its evicted neighbours'
// classes; rematerializing it subtracts its cost from its class and drops its node (classes are never split,
// as in the DTR authors' simulator).
class DtrEqHeuristic final : public Heuristic {
 public:
  std::string name() const override { return "dtr-eq"; }
  bool scores_walk_lineage() const override { return true; }  // its neighbours and their classes' roots

  ScoreKey key(StorageView& s) override {
    double cost = s.cost();
    ++epoch_;
    auto add_class = [&](StorageView& neighbour) {
      if (!neighbour.evicted() || neighbour.heuristic_slot == nullptr) return;
      Node* root = find(slot(neighbour));
      if (root->seen == epoch_) return;  // each class counts once
      root->seen = epoch_;
      cost += root->cost;
    };
    s.for_each_input(add_class);
    s.for_each_dependent(add_class);
    return {cost / bytes_of(s), stale_base(s)};
  }

  // A fresh node each time: the storage joins the classes of its evicted neighbours now, not the class it
  // was in before it was last rematerialized (that class may have drifted far from it).
  void on_evict(StorageView& s) override {
    DTR_CHECK(s.heuristic_slot == nullptr, InvalidArgument, "dtr-eq: a storage was evicted twice");
    Node* node = allocate_node();
    s.heuristic_slot = node;
    node->cost = s.cost();
    auto unite = [&](StorageView& neighbour) {
      if (neighbour.evicted() && neighbour.heuristic_slot != nullptr) node = merge(node, find(slot(neighbour)));
    };
    s.for_each_input(unite);
    s.for_each_dependent(unite);
    if (!tracking()) return;
    Boundary& boundary = boundary_of(node);  // `s` was on it while resident; its resident neighbours are now
    boundary.erase(&s);
    auto add = [&](StorageView& n) {
      if (!n.evicted()) boundary.insert(&n);
    };
    s.for_each_input(add);
    s.for_each_dependent(add);
    notify(boundary, nullptr);
  }

  // The storage leaves its class: the class no longer counts its cost (classes are never split, as in the
  // DTR authors' simulator) and its node stays only as long as other members' paths run through it.
  void on_rematerialize(StorageView& s) override {
    leave_class(s);
    if (!tracking()) return;
    auto add = [&](StorageView& n) {  // resident again: next to its evicted neighbours' classes
      if (n.evicted() && n.heuristic_slot != nullptr) boundary_of(find(slot(n))).insert(&s);
    };
    s.for_each_input(add);
    s.for_each_dependent(add);
  }

  void on_destroy(StorageView& s) override {
    if (s.heuristic_slot != nullptr) {  // an evicted member
      leave_class(s);
      return;
    }
    if (!tracking()) return;  // resident at its death: off the boundaries it is on
    auto drop = [&](StorageView& n) {
      if (n.evicted() && n.heuristic_slot != nullptr) boundary_of(find(slot(n))).erase(&s);
    };
    s.for_each_input(drop);
    s.for_each_dependent(drop);
  }

  void on_cut(StorageView& s) override {
    if (!tracking()) return;
    // Its inputs stop being its neighbours: it stays on the boundaries of its evicted dependents' classes only.
    auto drop = [&](StorageView& n) {
      if (n.evicted() && n.heuristic_slot != nullptr) boundary_of(find(slot(n))).erase(&s);
    };
    auto add = [&](StorageView& n) {
      if (n.evicted() && n.heuristic_slot != nullptr) boundary_of(find(slot(n))).insert(&s);
    };
    s.for_each_input(drop);
    s.for_each_dependent(add);
  }

  std::size_t live_slots() const override { return live_nodes_; }

 private:
  // Boundaries are small (a class's frontier: two storages on a chain), so a vector with linear search beats
  // a hash set, which allocates per element.
  struct Boundary {
    std::vector<StorageView*> members;
    void insert(StorageView* s) {
      if (std::find(members.begin(), members.end(), s) == members.end()) members.push_back(s);
    }
    void erase(StorageView* s) {
      auto it = std::find(members.begin(), members.end(), s);
      if (it == members.end()) return;
      *it = members.back();
      members.pop_back();
    }
    std::size_t size() const { return members.size(); }
  };

  // A node is referenced by its storage (until the storage leaves the class) and by the nodes whose parent it
  // is; it is recycled when neither is left, so the forest stays as large as the evicted lineage, not the run.
  struct Node {
    Node* parent = nullptr;  // nullptr: a root
    double cost = 0.0;       // meaningful at roots
    std::uint32_t rank = 0;
    std::uint32_t refs = 0;
    std::uint64_t seen = 0;
    // At roots, while an index listens: the resident storages next to an evicted member of the class (the
    // scores that count the class's cost), so that a cost change tells exactly them.
    std::unique_ptr<Boundary> boundary;
  };

  static Node* slot(StorageView& s) { return static_cast<Node*>(s.heuristic_slot); }
  bool tracking() const { return listener() != nullptr; }

  Boundary& boundary_of(Node* root) {
    if (root->boundary == nullptr) {
      if (spare_boundaries_.empty()) {
        root->boundary = std::make_unique<Boundary>();
      } else {
        root->boundary = std::move(spare_boundaries_.back());
        spare_boundaries_.pop_back();
      }
    }
    return *root->boundary;
  }

  // A boundary no class needs any more, kept with its capacity for the next (an eviction makes a class, and
  // allocating its boundary cost a fifth of a decision).
  void release(std::unique_ptr<Boundary>& boundary) {
    if (boundary == nullptr) return;
    boundary->members.clear();
    spare_boundaries_.push_back(std::move(boundary));
    boundary.reset();
  }

  // Whether a resident storage is still next to an evicted member of the class rooted at `root`.
  bool next_to_class(StorageView& r, Node* root) {
    bool found = false;
    auto check = [&](StorageView& n) {
      if (!found && n.evicted() && n.heuristic_slot != nullptr && find(slot(n)) == root) found = true;
    };
    r.for_each_input(check);
    r.for_each_dependent(check);
    return found;
  }

  void leave_class(StorageView& s) {
    Node* node = slot(s);
    Node* root = find(node);
    root->cost = std::max(0.0, root->cost - s.cost());
    s.heuristic_slot = nullptr;
    if (tracking()) {
      Boundary& boundary = boundary_of(root);
      // Its neighbours stay only if another member is next to them, whether resident or not: a boundary holds
      // only storages next to the class, or one that lost that adjacency would be left behind when it dies
      // (UBSan found one, out of memory but not a member, on the device-budget oracle with dtr-eq+window).
      auto check = [&](StorageView& r) {
        if (!next_to_class(r, root)) boundary.erase(&r);
      };
      s.for_each_input(check);
      s.for_each_dependent(check);
      notify(boundary, &s);  // the class's cost fell, and `s`'s neighbours lost it
    }
    unref(node);
  }

  // Tells the listener about every storage of `boundary` and every resident neighbour of `left`.
  void notify(const Boundary& boundary, StorageView* left) {
    const std::uint64_t mark = ++marks_;
    dirty_.clear();
    for (StorageView* r : boundary.members) {
      r->heuristic_mark = mark;
      dirty_.push_back(r);
    }
    if (left != nullptr) {
      auto visit = [&](StorageView& n) {
        if (n.evicted() || n.heuristic_mark == mark) return;
        n.heuristic_mark = mark;
        dirty_.push_back(&n);
      };
      left->for_each_input(visit);
      left->for_each_dependent(visit);
    }
    for (StorageView* r : dirty_) listener()->score_changed(*r);
  }

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
      release(node->boundary);
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
      if (node->refs == 0) {
        node->refs = 1;
        unref(node);
      }
      node = next;
    }
    return root;
  }

  // Unites two classes (roots); the boundaries merge, the smaller into the larger.
  Node* merge(Node* a, Node* b) {
    if (a == b) return a;
    if (a->rank < b->rank) std::swap(a, b);
    b->parent = a;
    a->refs += 1;
    a->cost += b->cost;
    if (a->rank == b->rank) ++a->rank;
    if (b->boundary != nullptr) {
      if (a->boundary == nullptr || a->boundary->size() < b->boundary->size()) a->boundary.swap(b->boundary);
      if (b->boundary != nullptr) {  // the smaller into the larger, without duplicates (marks: one pass each)
        const std::uint64_t mark = ++marks_;
        for (StorageView* r : a->boundary->members) r->heuristic_mark = mark;
        for (StorageView* r : b->boundary->members) {
          if (r->heuristic_mark != mark) a->boundary->members.push_back(r);
        }
      }
      release(b->boundary);
    }
    return a;
  }

  std::deque<Node> nodes_;
  Node* free_ = nullptr;  // recycled nodes, linked through `parent`
  std::size_t live_nodes_ = 0;
  std::uint64_t epoch_ = 0;
  std::uint64_t marks_ = 0;
  std::vector<StorageView*> dirty_;
  std::vector<std::unique_ptr<Boundary>> spare_boundaries_;
};

// Fragmentation-aware: `base`'s scores, and windows of blocks under a device budget (the runtime asks
// fragmentation_aware()). Every event and listener goes to `base`, which keeps the state.
class WindowHeuristic final : public Heuristic {
 public:
  WindowHeuristic(std::string name, std::unique_ptr<Heuristic> base) : name_(std::move(name)), base_(std::move(base)) {}
  std::string name() const override { return name_; }
  bool indexable() const override { return base_->indexable(); }
  bool timeless() const override { return base_->timeless(); }
  bool scores_walk_lineage() const override { return base_->scores_walk_lineage(); }
  bool fragmentation_aware() const override { return true; }
  ScoreKey key(StorageView& s) override { return base_->key(s); }
  double score(StorageView& s, std::uint64_t now) override { return base_->score(s, now); }
  void on_evict(StorageView& s) override { base_->on_evict(s); }
  void on_rematerialize(StorageView& s) override { base_->on_rematerialize(s); }
  void on_destroy(StorageView& s) override { base_->on_destroy(s); }
  void on_cut(StorageView& s) override { base_->on_cut(s); }
  std::size_t live_slots() const override { return base_->live_slots(); }
  void set_listener(ScoreListener* listener) override { base_->set_listener(listener); }

 private:
  std::string name_;
  std::unique_ptr<Heuristic> base_;
};

constexpr std::string_view kWindowSuffix = "+window";

std::unique_ptr<Heuristic> make_plain_heuristic(std::string_view name) {
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
  return nullptr;
}

}  // namespace

std::vector<std::string> heuristic_names() {
  return {"dtr", "dtr-eq", "dtr-local", "lru", "size", "msps", "random", "window", "dtr-eq+window"};
}

std::unique_ptr<Heuristic> make_heuristic(std::string_view name, std::string_view variable) {
  std::unique_ptr<Heuristic> heuristic;
  if (name == "window") {
    heuristic = std::make_unique<WindowHeuristic>("window", make_plain_heuristic("dtr-local"));
  } else if (name.ends_with(kWindowSuffix)) {
    if (auto base = make_plain_heuristic(name.substr(0, name.size() - kWindowSuffix.size()))) {
      heuristic = std::make_unique<WindowHeuristic>(std::string(name), std::move(base));
    }
  } else {
    heuristic = make_plain_heuristic(name);
  }
  DTR_CHECK(heuristic != nullptr, ConfigError, variable, "=\"", name,
            "\" is not a heuristic; expected dtr, dtr-eq, dtr-local, lru, size, msps, random, random:SEED, window, "
            "or any of these but window followed by +window (dtr-eq+window)");
  return heuristic;
}

}  // namespace dtr::heuristics
