// h_DTR^eq and h_LRU (design section 5). The rest of the family and the fast search come with the heuristics
// issue; they plug in behind the same interface.
#include <algorithm>
#include <deque>
#include <limits>

#include "dtr/check.h"
#include "heuristics/heuristic.h"

namespace dtr::heuristics {
namespace {

// Staleness: time since last use, at least 1 so that a storage used this instant still has a finite score.
double staleness(const StorageView& s, std::uint64_t now) {
  return static_cast<double>(now > s.last_access() ? now - s.last_access() : 0) + 1.0;
}

class LruHeuristic final : public Heuristic {
 public:
  std::string name() const override { return "lru"; }
  double score(StorageView& s, std::uint64_t now) override { return 1.0 / staleness(s, now); }
};

// h_DTR^eq: e*(t) approximated by the union-find classes of connected evicted storages, each class carrying
// the summed cost of its members. Evicting t unites it with its evicted neighbours' classes; rematerializing
// it subtracts its cost from its class (classes are never split, as in the DTR authors' prototype).
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

  void on_evict(StorageView& s) override {
    Node* node = s.heuristic_slot != nullptr ? find(static_cast<Node*>(s.heuristic_slot)) : nullptr;
    if (s.heuristic_slot == nullptr) {
      node = allocate_node();
      s.heuristic_slot = node;
    }
    node->cost += s.cost();
    auto unite = [&](StorageView& neighbour) {
      if (neighbour.evicted() && neighbour.heuristic_slot != nullptr) {
        node = merge(node, find(static_cast<Node*>(neighbour.heuristic_slot)));
      }
    };
    s.for_each_input(unite);
    s.for_each_dependent(unite);
  }

  void on_rematerialize(StorageView& s) override {
    if (s.heuristic_slot == nullptr) return;
    Node* root = find(static_cast<Node*>(s.heuristic_slot));
    root->cost = std::max(0.0, root->cost - s.cost());
    // The node stays in its class (other members' paths may run through it); the storage keeps the slot so
    // that a later eviction joins the same class again.
  }

  void on_destroy(StorageView& s) override {
    if (s.heuristic_slot == nullptr) return;
    Node* node = static_cast<Node*>(s.heuristic_slot);
    if (s.evicted()) {
      Node* root = find(node);
      root->cost = std::max(0.0, root->cost - s.cost());
    }
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

std::vector<std::string> heuristic_names() { return {"dtr-eq", "lru"}; }

std::unique_ptr<Heuristic> make_heuristic(std::string_view name, std::string_view variable) {
  if (name == "dtr-eq") return std::make_unique<DtrEqHeuristic>();
  if (name == "lru") return std::make_unique<LruHeuristic>();
  DTR_THROW(ConfigError, variable, "=\"", name, "\" is not a heuristic; expected dtr-eq or lru");
}

}  // namespace dtr::heuristics
