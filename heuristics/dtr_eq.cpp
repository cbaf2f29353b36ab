// h_DTR^eq (design section 5): e*(t) approximated by the union-find classes of connected evicted storages, each
// class carrying the summed cost of its members. A resident storage's score needs the summed cost of the
// distinct classes next to it; that sum is kept up to date on every lineage event (each class knows the
// resident storages next to it, its boundary), so a score costs O(1) however many storages read this one: a
// weight read by every step of an unrolled RNN is no longer walked at every step (issue 16).
//
// A class's boundary can hold thousands of storages (classes never split, so in a long backward pass one class
// spans the evicted chain), and re-scoring all of them at every change of its cost made long chains quadratic.
// So a class publishes its cost: its boundary counts the published value, which follows the true cost exactly
// while the boundary is small (kExactBoundary) and otherwise once the two drift apart by more than kDrift; when
// classes merge, the one with the larger boundary keeps its published value and the smaller one's storages
// move over (small into large). Each boundary storage is then re-scored O(1/kDrift) times per doubling of
// the class, not at every event, and scans and the index read the same published values (one definition).
#include "heuristics/dtr_eq.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

#include "dtr/check.h"
#include "dtr/small_vector.h"

namespace dtr::heuristics {
namespace {

// The resident storages next to a class, each with the number of adjacencies (lineage edges, counted with
// multiplicity) between it and the class's evicted members: it leaves the boundary when the last one goes.
// Most boundaries are a chain's two ends, kept inline and searched linearly; a large one (the dependents of an
// evicted tensor that many ops read) also keeps a position map.
class Boundary {
 public:
  struct Entry {
    StorageView* storage;
    std::uint32_t edges;
  };

  const SmallVector<Entry, 4>& entries() const { return entries_; }
  std::size_t size() const { return entries_.size(); }

  // Adds `edges` adjacencies; true when `s` is new to the boundary.
  bool add(StorageView* s, std::uint32_t edges) {
    if (Entry* e = find(s)) {
      e->edges += edges;
      return false;
    }
    entries_.push_back({s, edges});
    if (!where_.empty()) {
      where_.emplace(s, entries_.size() - 1);
    } else if (entries_.size() > kLinear) {
      for (std::size_t i = 0; i < entries_.size(); ++i) where_.emplace(entries_[i].storage, i);
    }
    return true;
  }

  // Removes one adjacency; true when it was the last one, and `s` left.
  bool remove_edge(StorageView* s) {
    Entry* e = find(s);
    if (e == nullptr) return false;
    if (e->edges > 1) {
      e->edges -= 1;
      return false;
    }
    erase(s);
    return true;
  }

  // Removes `s` whatever its adjacencies; true when it was there.
  bool erase(StorageView* s) {
    Entry* e = find(s);
    if (e == nullptr) return false;
    const std::size_t at = static_cast<std::size_t>(e - entries_.data());
    if (!where_.empty()) where_.erase(s);
    if (at + 1 != entries_.size()) {
      entries_[at] = entries_.back();
      if (!where_.empty()) where_[entries_[at].storage] = at;
    }
    entries_.pop_back();
    return true;
  }

  void clear() {
    entries_.clear();
    where_.clear();
  }

 private:
  static constexpr std::size_t kLinear = 16;

  Entry* find(StorageView* s) {
    if (!where_.empty()) {
      const auto it = where_.find(s);
      return it == where_.end() ? nullptr : &entries_[it->second];
    }
    for (Entry& e : entries_) {
      if (e.storage == s) return &e;
    }
    return nullptr;
  }

  SmallVector<Entry, 4> entries_;  // inline up to 4: a chain's class has two ends
  std::unordered_map<StorageView*, std::size_t> where_;
};

// Invariants, for every class root R and every resident storage r:
//   r is in R's boundary  <=>  r is no constant and some evicted member of R is r's input or dependent (with
//                              the count of such edges);
//   r.heuristic_sum == the sum of R.published over the classes whose boundary holds r;
//   R.published == R.cost whenever R's boundary holds at most kExactBoundary storages after an event on R;
//   whenever R's boundary starts or stops holding at most kChainBoundary storages, the listener is told of
//   every storage on it (only_chain_classes_beside reads that).
// Evicting t gives it a fresh node united with its evicted neighbours' classes; rematerializing it subtracts its
// cost from its class and drops its node (classes are never split, as in the DTR authors' simulator).
class DtrEqHeuristic final : public EvictedClasses {
 public:
  // A boundary this small always counts its class's exact cost (the common case: a chain's two ends) ...
  static constexpr std::size_t kExactBoundary = 32;
  // ... a larger one once the cost has moved by more than this fraction of the published value.
  static constexpr double kDrift = 1.0 / 16.0;

  std::string name() const override { return "dtr-eq"; }
  bool scores_walk_lineage() const override { return true; }  // its upkeep walks neighbours and their classes

  bool only_chain_classes_beside(StorageView& s) override {
    bool chains = true;
    auto look = [&](StorageView& n) {
      if (chains && member(n)) chains = chain_like(find(slot(n)));
    };
    s.for_each_input(look);
    s.for_each_dependent(look);
    return chains;
  }

  ScoreKey key(StorageView& s) override {
    // The kept sum, added to and taken from as classes change, can round below 0 where it should be 0: a score
    // is never below the storage's own cost (Heuristic::score_floor rests on it).
    const double neighbourhood =
        member(s) || s.evicted() ? walked_neighbourhood(s) : std::max(s.heuristic_sum, 0.0);
    return {(s.cost() + neighbourhood) / bytes_of(s), stale_base(s)};
  }

  // A fresh node each time: the storage joins the classes of its evicted neighbours now, not the class it
  // was in before it was last rematerialized (that class may have drifted far from it).
  void on_evict(StorageView& s) override {
    DTR_CHECK(s.heuristic_slot == nullptr, InvalidArgument, "dtr-eq: a storage was evicted twice");
    ++epoch_;
    roots_.clear();
    auto gather = [&](StorageView& n) {
      if (!member(n)) return;
      Node* root = find(slot(n));
      if (root->seen == epoch_) return;
      root->seen = epoch_;
      roots_.push_back(root);
    };
    s.for_each_input(gather);
    s.for_each_dependent(gather);
    begin_event();
    Node* node = allocate_node();
    s.heuristic_slot = node;
    node->cost = s.cost();
    // The class with the largest boundary keeps its boundary and published cost; the storages of the others
    // stop counting theirs and count the keeper's (once, if they were next to both).
    Node* keeper = node;
    for (Node* root : roots_) {
      if (keeper == node || boundary_size(root) > boundary_size(keeper)) keeper = root;
    }
    Boundary& boundary = boundary_of(keeper);
    const bool was_chain = chain_like(keeper);
    const double published = keeper->published;
    for (Node* root : roots_) {
      if (root == keeper || root->boundary == nullptr) continue;
      for (const Boundary::Entry& e : root->boundary->entries()) {
        e.storage->heuristic_sum -= root->published;
        if (boundary.add(e.storage, e.edges)) e.storage->heuristic_sum += published;
        dirty(*e.storage);
      }
      release(root->boundary);
    }
    std::unique_ptr<Boundary> kept = std::move(keeper->boundary);
    Node* root = node;
    for (Node* r : roots_) root = link(root, r);
    root->boundary = std::move(kept);
    root->published = published;
    // `s` leaves the boundary (it is a member now); its resident neighbours join it.
    boundary.erase(&s);
    auto join = [&](StorageView& n) {
      if (!bordering(n)) return;
      if (boundary.add(&n, 1)) {
        n.heuristic_sum += published;
        dirty(n);
      }
    };
    s.for_each_input(join);
    s.for_each_dependent(join);
    publish(root);
    if (chain_like(root) != was_chain) dirty_boundary(root);
    notify_dirty();
  }

  // The storage leaves its class, and joins, resident, the boundaries of its evicted neighbours' classes.
  void on_rematerialize(StorageView& s) override {
    leave_class(s);
    s.heuristic_sum = 0.0;
    begin_event();
    auto join = [&](StorageView& n) {
      if (!member(n)) return;
      Node* root = find(slot(n));
      const bool was_chain = chain_like(root);
      if (boundary_of(root).add(&s, 1)) s.heuristic_sum += root->published;
      if (chain_like(root) != was_chain) dirty_boundary(root);
    };
    s.for_each_input(join);
    s.for_each_dependent(join);
    notify_dirty();
  }

  void on_destroy(StorageView& s) override {
    if (s.heuristic_slot != nullptr) {  // an evicted member
      leave_class(s);
      return;
    }
    if (live_nodes_ == 0) return;  // no class: on no boundary (the common case without a budget)
    begin_event();
    auto drop = [&](StorageView& n) {
      if (!member(n)) return;
      Node* root = find(slot(n));
      const bool was_chain = chain_like(root);
      boundary_of(root).erase(&s);
      if (chain_like(root) != was_chain) dirty_boundary(root);
    };
    s.for_each_input(drop);
    s.for_each_dependent(drop);
    notify_dirty();
  }

  // It becomes a constant, whose score no one asks for: off every boundary (a weight read by every step
  // would otherwise be told of every change to the classes along the chain).
  void on_cut(StorageView& s) override { on_destroy(s); }

  std::size_t live_slots() const override { return live_nodes_; }

 private:
  // A node is referenced by its storage (until the storage leaves the class) and by the nodes whose parent it
  // is; it is recycled when neither is left, so the forest stays as large as the evicted lineage, not the run.
  struct Node {
    Node* parent = nullptr;  // nullptr: a root
    double cost = 0.0;       // at roots: the summed cost of the members
    double published = 0.0;  // at roots: the cost the boundary counts
    std::uint32_t rank = 0;
    std::uint32_t refs = 0;
    std::uint64_t seen = 0;
    std::unique_ptr<Boundary> boundary;  // at roots: the resident storages next to the class
  };

  static Node* slot(StorageView& s) { return static_cast<Node*>(s.heuristic_slot); }
  // A member holds a node until it is told it is back (on_rematerialize): a recomputed output is resident
  // before that, and counting it as resident then would put it on a boundary twice.
  static bool member(StorageView& n) { return n.heuristic_slot != nullptr; }
  // Resident as the boundaries count it: in memory, told so, and no constant.
  static bool bordering(StorageView& n) { return n.heuristic_slot == nullptr && !n.evicted() && !n.constant(); }
  static std::size_t boundary_size(const Node* root) { return root->boundary == nullptr ? 0 : root->boundary->size(); }
  static bool chain_like(const Node* root) { return boundary_size(root) <= kChainBoundary; }

  // An evicted storage's neighbourhood (no one keeps its sum): each class next to it once.
  double walked_neighbourhood(StorageView& s) {
    double cost = 0.0;
    ++epoch_;
    auto add_class = [&](StorageView& n) {
      if (!member(n)) return;
      Node* root = find(slot(n));
      if (root->seen == epoch_) return;
      root->seen = epoch_;
      cost += root->published;
    };
    s.for_each_input(add_class);
    s.for_each_dependent(add_class);
    return cost;
  }

  // The boundary counts the class's true cost if it is small or has drifted too far from what it counts.
  void publish(Node* root) {
    const double cost = root->cost;
    const double change = cost - root->published;
    if (change == 0.0) return;
    const std::size_t size = boundary_size(root);
    if (size > kExactBoundary && std::abs(change) <= kDrift * std::max(cost, root->published)) return;
    if (size != 0) {
      for (const Boundary::Entry& e : root->boundary->entries()) {
        e.storage->heuristic_sum += change;
        dirty(*e.storage);
      }
    }
    root->published = cost;
  }

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
    boundary->clear();
    spare_boundaries_.push_back(std::move(boundary));
    boundary.reset();
  }

  void leave_class(StorageView& s) {
    Node* node = slot(s);
    Node* root = find(node);
    root->cost = std::max(0.0, root->cost - s.cost());
    s.heuristic_slot = nullptr;
    begin_event();
    // Its resident neighbours lose its edges; those with no other edge to the class leave the boundary (and
    // stop counting it). A boundary holds only storages next to the class, or one that lost that adjacency
    // would be left behind when it dies (UBSan found one).
    Boundary& boundary = boundary_of(root);
    const bool was_chain = chain_like(root);
    auto drop = [&](StorageView& n) {
      if (!bordering(n)) return;
      if (boundary.remove_edge(&n)) n.heuristic_sum -= root->published;
      dirty(n);
    };
    s.for_each_input(drop);
    s.for_each_dependent(drop);
    publish(root);
    if (chain_like(root) != was_chain) dirty_boundary(root);
    notify_dirty();
    unref(node);
  }

  // The storages whose score an event changed, each once, told to the listener when the event is over.
  void begin_event() {
    mark_ = ++marks_;
    dirty_.clear();
  }
  void dirty(StorageView& s) {
    if (listener() == nullptr || s.heuristic_mark == mark_) return;
    s.heuristic_mark = mark_;
    dirty_.push_back(&s);
  }
  // Every storage on the class's boundary (its class became a chain's, or stopped being one).
  void dirty_boundary(Node* root) {
    if (root->boundary == nullptr) return;
    for (const Boundary::Entry& e : root->boundary->entries()) dirty(*e.storage);
  }
  void notify_dirty() {
    for (StorageView* r : dirty_) listener()->score_changed(*r);
    dirty_.clear();
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

  // Unites two roots by rank, adding up their costs; the caller places the boundary and published cost.
  Node* link(Node* a, Node* b) {
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
  std::uint64_t marks_ = 0;
  std::uint64_t mark_ = 0;
  std::vector<Node*> roots_;
  std::vector<StorageView*> dirty_;
  std::vector<std::unique_ptr<Boundary>> spare_boundaries_;
};

}  // namespace

std::unique_ptr<EvictedClasses> make_dtr_eq_classes() { return std::make_unique<DtrEqHeuristic>(); }
std::unique_ptr<Heuristic> make_dtr_eq_heuristic() { return make_dtr_eq_classes(); }

}  // namespace dtr::heuristics
