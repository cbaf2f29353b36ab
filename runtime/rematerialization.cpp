// Rematerialization: evicted storages recomputed from their closures when something needs them, ancestors
// first, with an explicit stack (a chain of any length recomputes without growing the C stack); op-made views
// that an eviction undid are made again (design section 4).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/log.h"
#include "dtr/check.h"
#include "runtime/runtime_impl.h"

namespace dtr {

using detail::Closure;
using detail::Storage;

namespace {

// A closure whose inputs are being made ready (resident, their op-made views made, pinned): the op being
// called (its pins are the caller's, and the caller runs it), or a recomputation of `requested`.
struct Frame {
  // Per input: still to make ready; made ready but left unpinned (a frugal walk, until its recheck); or ready
  // and pinned by the frame.
  enum class Input : std::uint8_t { pending, unpinned, pinned };

  Frame(Runtime::Impl& runtime, Closure& c, const Storage* wanted, Runtime::Impl::Pins* caller_pins)
      : closure(&c), requested(wanted), own_pins(runtime), pins(caller_pins != nullptr ? caller_pins : &own_pins),
        boundary_pins(runtime), recomputation(caller_pins == nullptr) {}
  Closure* closure;
  const Storage* requested;  // the output this recomputation is for
  std::size_t next_input = 0;
  Runtime::Impl::Pins own_pins;
  Runtime::Impl::Pins* pins;
  // What deferred inputs are remade from, pinned while they wait (Walk::order_stable_last); released once every
  // input is ready, before the closure's outputs are allocated.
  Runtime::Impl::Pins boundary_pins;
  SmallVector<Input, 4> inputs;
  // The inputs' indices in the order they are made ready (Config::recompute_order); empty: the closure's order.
  SmallVector<std::uint32_t, 4> order;
  bool recomputation;
  bool reading = false;     // the input at next_input is being recomputed
  bool rechecked = false;   // a frugal frame's unpinned inputs were checked (and pinned) once all were made
};

}  // namespace

// A view that must be made again stamps its storage first, before the storage is recomputed.
void Runtime::Impl::materialize_view(Storage& s, std::uint32_t view) {
  if (view != 0 && !view_made(s, view)) touch(s);
  materialize(s);
  make_view(s, view);
}

// Each made-again view costs its op's cost again, a recomputation that needs no memory. The caller stamped `s`
// when it began to need the view (before recomputing `s`, if it was evicted).
void Runtime::Impl::make_view(Storage& s, std::uint32_t view) {
  SmallVector<std::uint32_t, 4> undone;  // innermost first
  for (std::uint32_t v = view; v != 0 && s.views[v - 1].made_in != s.residency; v = s.views[v - 1].base) {
    undone.push_back(v);
  }
  for (std::size_t i = undone.size(); i-- > 0;) {
    Storage::View& v = s.views[undone[i] - 1];
    pin(s);  // its op holds the storage while it runs
    op_clock += 1;
    compute_clock += v.cost;
    stats.remat_compute += v.cost;
    stats.rematerializations += 1;
    unpin(s);
    v.made_in = s.residency;
    check_thrashing("a view");
  }
}

void Runtime::Impl::count_recomputation(std::string_view op, double cost) {
  auto it = recomputed_ops.find(op);
  if (it == recomputed_ops.end()) {
    const std::string_view key = recomputed_ops.size() + 1 < kMaxProfiledOps ? op : kOtherOps;
    it = recomputed_ops.try_emplace(std::string(key)).first;
  }
  it->second.runs += 1;
  it->second.cost += cost;
}

std::vector<OpRecomputations> Runtime::Impl::recomputations_by_op() const {
  std::vector<OpRecomputations> ops;
  ops.reserve(recomputed_ops.size());
  for (const auto& [name, entry] : recomputed_ops) ops.push_back({name, entry.runs, entry.cost});
  std::stable_sort(ops.begin(), ops.end(), [](const OpRecomputations& a, const OpRecomputations& b) {
    return a.cost > b.cost;
  });
  return ops;
}

void Runtime::Impl::check_thrashing(std::string_view recomputing) {
  // Without a budget nothing evicts during a recomputation: recomputations come from the program's own
  // Runtime::evict calls, and cannot cascade.
  if (!config.memory_budget) return;
  const double base = std::max(stats.base_compute, config.thrash_base_compute.value_or(0.0));
  const double spent = stats.remat_compute - forgiven_remat;
  if (!rule_change_offered && spent > base) {
    // A cascade, most likely: a heuristic whose rule was a guess may take its other one. Every candidate is
    // keyed anew, and the thrash limit counts from here, so that the new rule is judged on its own.
    rule_change_offered = true;
    if (heuristic->change_rule()) {
      forgiven_remat = stats.remat_compute;
      detail::logger().info("dtr: recomputation passed the base compute running op '{}'; the heuristic {} "
                            "changed its rule for the rest of the run",
                            current_op.empty() ? std::string_view("?") : current_op, config.heuristic);
      if (index) {
        for (Storage* s : recomputable) {
          if (candidate(*s)) index->score_changed(*s);
        }
      }
      return;
    }
  }
  if (!config.thrash_limit || spent <= (*config.thrash_limit - 1.0) * base) return;
  forgiven_remat = stats.remat_compute;
  DTR_THROW(Thrashing, "dtr: thrashing running op '", current_op.empty() ? std::string_view("?") : current_op,
            "' (recomputing '", recomputing, "'): recomputation has cost ", base > 0 ? spent / base : spent,
            "x the base compute (overhead ", base > 0 ? (base + spent) / base : 0.0, ", past the thrash limit ",
            *config.thrash_limit, ") under a budget of ",
            config.memory_budget ? format_bytes(*config.memory_budget) : std::string("none"), " (",
            to_string(config.budget_mode), " mode) with heuristic ", config.heuristic, "; recomputed most: ",
            describe_recomputations(recomputations_by_op(), 3),
            ". Try a larger DTR_MEMORY_BUDGET or another DTR_HEURISTIC (forecast is the default); DTR_THRASH_LIMIT "
            "raises the limit (off removes it).");
}

namespace {

// The walk shared by a new op's inputs and a recomputation: each frame stamps all its closure's inputs, then
// pins the ready ones before any other is recomputed, so that no recomputation evicts them meanwhile (as the
// DTR authors' runtime locks them); then it recomputes the others in order, descending into a new frame for
// each evicted one; when all are ready, a recomputation frame runs its closure.
//
// A frugal walk pins less: a frame pins none of its inputs while it makes them ready (those ready when it
// began, and those it recomputes, stay evictable); once all have been made, it pins those still resident and
// remakes the ones evicted meanwhile, as a locking frame would. So frames deep in a recomputation no longer
// hold every ancestor frame's ready inputs (pins still add up along a chain of such remakings). The runtime
// falls back to it when the locking walk runs out of memory.
class Walk {
 public:
  enum class Pinning { lock_ready, frugal };

  // Starts at `root`: the op being called (its pins are the caller's, and the caller runs it), or the
  // recomputation of `requested`.
  Walk(Runtime::Impl& runtime, Closure& root, const Storage* requested, Runtime::Impl::Pins* caller_pins,
       Pinning pinning)
      : runtime_(runtime), frugal_(pinning == Pinning::frugal),
        stable_last_(runtime.config.recompute_order == RecomputeOrder::stable_last),
        root_(runtime, root, requested, caller_pins) {
    begin(root_);
    stack_.push_back(&root_);
  }

  void finish() {
    while (!stack_.empty()) {
      Frame& frame = *stack_.back();
      if (descend(frame)) continue;
      frame.boundary_pins.release_from(0);
      Closure& c = *frame.closure;
      const bool needed = std::any_of(c.outputs.begin(), c.outputs.end(),
                                      [](const Storage* out) { return out != nullptr && !out->in_memory; });
      if (frame.recomputation && needed) runtime_.run(c, /*rematerializing=*/true, frame.requested);
      stack_.pop_back();
      if (&frame != &root_) deeper_.pop_back();
    }
  }

 private:
  // The frame stamps all its closure's inputs, then pins the ready ones (unless frugal).
  void begin(Frame& frame) {
    Closure& c = *frame.closure;
    for (const auto& in : c.inputs) runtime_.touch(*in);
    std::ptrdiff_t pending = 0;
    for (std::size_t i = 0; i < c.inputs.size(); ++i) {
      Storage& in = *c.inputs[i];
      if (!Runtime::Impl::view_made(in, c.input_view[i])) {
        frame.inputs.push_back(Frame::Input::pending);
        pending += 1;
      } else if (frugal_) {
        frame.inputs.push_back(Frame::Input::unpinned);
      } else {
        frame.pins->add(in);
        frame.inputs.push_back(Frame::Input::pinned);
      }
    }
    if (stable_last_ && pending > 1 && pending <= kMaxReordered) order_stable_last(frame);
  }

  // Ordering compares each evicted input's ancestry with every other's: a frame with more pending inputs than
  // this (a concatenation of hundreds) keeps the closure's order rather than pay the square of their number.
  static constexpr std::ptrdiff_t kMaxReordered = 16;

  // The inputs whose remaking cannot grow by waiting go last, deepest first: those whose evicted ancestry ends
  // at constants and pinned storages only (or at one storage pinned now, when it is smaller than the input:
  // holds_less_deferred), none an ancestor of another input. Remade after the others, such an
  // input is not held through their remaking (an RNN's state chain, remade in the closure's order, would hold
  // the step's input slice at every level it goes down). The others keep the closure's order: remade later,
  // what they are remade from might have been evicted meanwhile.
  void order_stable_last(Frame& frame) {
    const Closure& c = *frame.closure;
    struct Evicted {
      std::uint32_t input;
      Ancestry ancestry;
      Boundary boundary;  // what it is remade from that could be evicted meanwhile, unless pinned now
      std::size_t bytes;  // of its evicted ancestry
      bool deferred;
    };
    std::vector<Evicted> evicted;
    for (std::uint32_t i = 0; i < c.inputs.size(); ++i) {
      if (frame.inputs[i] != Frame::Input::pending || c.inputs[i]->in_memory) continue;
      Evicted e{i, {}, {}, 0, false};
      e.deferred = evicted_ancestry(*c.inputs[i], e.ancestry, e.boundary) ||
                   holds_less_deferred(*c.inputs[i], e.boundary);
      for (const Storage* a : e.ancestry) e.bytes += a->nbytes;
      evicted.push_back(std::move(e));
    }
    for (Evicted& e : evicted) {
      const Storage* s = c.inputs[e.input].get();
      for (const Evicted& other : evicted) {
        if (c.inputs[other.input].get() != s &&
            std::find(other.ancestry.begin(), other.ancestry.end(), s) != other.ancestry.end()) {
          e.deferred = false;
        }
      }
      // Deferred with a boundary: pinned now, so that the input cannot grow while it waits.
      if (e.deferred && e.boundary.only != nullptr) frame.boundary_pins.add(*e.boundary.only);
    }
    for (std::uint32_t i = 0; i < c.inputs.size(); ++i) {
      const auto it = std::find_if(evicted.begin(), evicted.end(), [&](const Evicted& e) { return e.input == i; });
      if (it == evicted.end() || !it->deferred) frame.order.push_back(i);
    }
    std::erase_if(evicted, [](const Evicted& e) { return !e.deferred; });
    std::stable_sort(evicted.begin(), evicted.end(),
                     [](const Evicted& a, const Evicted& b) { return a.bytes > b.bytes; });
    for (const Evicted& e : evicted) frame.order.push_back(e.input);
  }

  // Collects the evicted storages remaking `s` would remake, itself first, up to kAncestryCap (enough to tell a
  // chain from a leaf without walking a whole evicted network at every frame). True when they are all found
  // and are remade from constants and pinned storages only: nothing can be evicted from under them.
  static constexpr std::size_t kAncestryCap = 64;
  using Ancestry = SmallVector<const Storage*, 16>;
  // The resident storages an evicted ancestry is remade from that are neither constants nor pinned: only
  // whether there is none, one (which) or several matters (holds_less_deferred).
  struct Boundary {
    Storage* only = nullptr;  // the one, while there is exactly one
    bool several = false;
    bool complete = true;  // false: the ancestry passed kAncestryCap
  };
  static bool evicted_ancestry(const Storage& s, Ancestry& found, Boundary& boundary) {
    found.push_back(&s);  // breadth first: found[next..] still to visit
    for (std::size_t next = 0; next < found.size(); ++next) {
      if (found[next]->producer == nullptr) continue;
      for (const auto& in : found[next]->producer->inputs) {
        if (in->in_memory) {
          const bool held = in->producer == nullptr || in->pins > 0;
          if (!held && in.get() != boundary.only) {
            boundary.several = boundary.several || boundary.only != nullptr;
            boundary.only = in.get();
          }
          continue;
        }
        if (std::find(found.begin(), found.end(), in.get()) != found.end()) continue;
        if (found.size() == kAncestryCap) {
          boundary.complete = false;
          return false;
        }
        found.push_back(in.get());
      }
    }
    return boundary.only == nullptr;
  }

  // An input remade from one storage that could be evicted meanwhile can still wait if that storage is pinned
  // instead: worth it when it is fewer bytes than the input, which the frame would otherwise hold pinned while it
  // remakes the others (an upper RNN layer's input projection, 4x the state below it that it reads). One
  // storage only: pinning several sources (a PyTorch-autograd MLP's, through dtr-torch) lost budgets that hold
  // without the rule. Not in a frugal walk, which pins as little as it can.
  bool holds_less_deferred(const Storage& input, const Boundary& boundary) const {
    return !frugal_ && boundary.complete && !boundary.several && boundary.only != nullptr &&
           boundary.only->nbytes < input.nbytes;
  }

  // Makes the frame's next inputs ready; true when it pushed a frame for an evicted one.
  bool descend(Frame& frame) {
    Closure& c = *frame.closure;
    for (; frame.next_input < c.inputs.size(); frame.next_input += 1) {
      const std::size_t k = frame.order.empty() ? frame.next_input : frame.order[frame.next_input];
      if (frame.inputs[k] != Frame::Input::pending) continue;
      Storage& in = *c.inputs[k];
      const std::uint32_t view = c.input_view[k];
      if (!frame.reading && view != 0) runtime_.touch(in);  // remaking a view reads its storage, from now
      frame.reading = true;
      if (!in.in_memory) {
        deeper_.push_back(std::make_unique<Frame>(runtime_, *in.producer, &in, nullptr));
        begin(*deeper_.back());
        stack_.push_back(deeper_.back().get());
        return true;
      }
      runtime_.make_view(in, view);
      if (frugal_ && !frame.rechecked) {
        frame.inputs[k] = Frame::Input::unpinned;
      } else {
        frame.pins->add(in);
        frame.inputs[k] = Frame::Input::pinned;
      }
      frame.reading = false;
    }
    if (!frugal_ || frame.rechecked) return false;
    // Every input has been made once: pin those still resident, and make again those evicted meanwhile (with
    // everything else pinned, as a locking walk would).
    frame.rechecked = true;
    bool lost = false;
    for (std::size_t i = 0; i < c.inputs.size(); ++i) {
      if (frame.inputs[i] != Frame::Input::unpinned) continue;
      Storage& in = *c.inputs[i];
      if (Runtime::Impl::view_made(in, c.input_view[i])) {
        frame.pins->add(in);
        frame.inputs[i] = Frame::Input::pinned;
      } else {
        frame.inputs[i] = Frame::Input::pending;
        lost = true;
      }
    }
    if (!lost) return false;
    frame.next_input = 0;  // the lost ones, in the frame's order (the others are no longer pending)
    return descend(frame);
  }

  Runtime::Impl& runtime_;
  const bool frugal_;
  const bool stable_last_;
  // Frames of recomputations below the root, on the heap only when there are some (an op whose inputs are all
  // resident allocates nothing). Declared before root_: an exception releases the root's pins first.
  std::vector<std::unique_ptr<Frame>> deeper_;
  Frame root_;
  SmallVector<Frame*, 8> stack_;
};

}  // namespace

// The runtime's own OutOfMemory under a budget (the budget, or memory below it, could not fit what the walk
// held pinned) is worth a frugal walk. Without a budget the memory itself is full; an OutOfMemory a user's
// computation or kernel observer threw is theirs.
bool Runtime::Impl::retry_pinning_less(const OutOfMemory& e) const {
  return config.memory_budget && e.info().budget_bytes == *config.memory_budget;
}

namespace {

// Makes `root`'s inputs ready (and runs it, for a recomputation of `requested`) with a locking walk, and once
// more with a frugal one if that runs out of memory in a way pinning less can help; the caller's pins added
// by the failed walk are released first. What the locking walk recomputed before it failed stays resident
// (and evictable): the frugal walk goes on from there.
void walk_with_retry(Runtime::Impl& runtime, Closure& root, const Storage* requested,
                     Runtime::Impl::Pins* caller_pins) {
  const std::size_t held = caller_pins != nullptr ? caller_pins->size() : 0;
  try {
    Walk(runtime, root, requested, caller_pins, Walk::Pinning::lock_ready).finish();
    return;
  } catch (const OutOfMemory& e) {
    if (!runtime.retry_pinning_less(e)) throw;
  }
  if (caller_pins != nullptr) caller_pins->release_from(held);
  if (requested != nullptr && requested->in_memory) return;
  Walk(runtime, root, requested, caller_pins, Walk::Pinning::frugal).finish();
}

}  // namespace

void Runtime::Impl::materialize(Storage& target) {
  if (target.in_memory) {
    touch(target);
    return;
  }
  walk_with_retry(*this, *target.producer, &target, nullptr);
}

void Runtime::Impl::acquire_inputs(Closure& c, Pins& pins) { walk_with_retry(*this, c, nullptr, &pins); }

std::string describe_recomputations(std::span<const OpRecomputations> ops, std::size_t count) {
  double total = 0;
  for (const OpRecomputations& o : ops) total += o.cost;
  std::string text;
  for (std::size_t i = 0; i < ops.size() && i < count; ++i) {
    if (!text.empty()) text += ", ";
    const double percent = total > 0 ? std::round(1000.0 * ops[i].cost / total) / 10.0 : 0.0;
    text += detail::concat(ops[i].op, " ", percent, "% (", ops[i].runs, ops[i].runs == 1 ? " run)" : " runs)");
  }
  return text;
}

}  // namespace dtr
