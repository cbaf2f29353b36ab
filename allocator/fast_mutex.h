// A mutex whose uncontended lock and unlock are one atomic instruction each; glibc's pthread mutex spends about
// fifty instructions per lock/unlock on type dispatch, a quarter of a cached allocation. Contended threads spin
// briefly, then sleep on the futex behind std::atomic::wait. The three-state protocol is Drepper's
// ("Futexes Are Tricky"): 0 unlocked, 1 locked, 2 locked with possible sleepers. Satisfies Lockable.
#pragma once

#include <atomic>

namespace dtr::detail {

class FastMutex {
 public:
  void lock() {
    int state = kUnlocked;
    if (state_.compare_exchange_strong(state, kLocked, std::memory_order_acquire, std::memory_order_relaxed)) return;
    lock_contended(state);
  }

  bool try_lock() {
    int state = kUnlocked;
    return state_.compare_exchange_strong(state, kLocked, std::memory_order_acquire, std::memory_order_relaxed);
  }

  void unlock() {
    if (state_.exchange(kUnlocked, std::memory_order_release) == kSleepers) state_.notify_one();
  }

 private:
  static void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }

  static constexpr int kUnlocked = 0;
  static constexpr int kLocked = 1;
  static constexpr int kSleepers = 2;

  void lock_contended(int state) {
    for (int spin = 0; spin < 64 && state != kSleepers; ++spin) {
      cpu_relax();
      state = kUnlocked;
      if (state_.compare_exchange_weak(state, kLocked, std::memory_order_acquire, std::memory_order_relaxed)) return;
    }
    // Announce a sleeper; whoever unlocks will wake one. Taking the lock here leaves the state at 2, which at
    // worst costs one spurious wake-up.
    if (state != kSleepers) state = state_.exchange(kSleepers, std::memory_order_acquire);
    while (state != kUnlocked) {
      state_.wait(kSleepers, std::memory_order_relaxed);
      state = state_.exchange(kSleepers, std::memory_order_acquire);
    }
  }

  std::atomic<int> state_{kUnlocked};
};

}  // namespace dtr::detail
