// The allocator's internal building blocks, against the standard library's.
#include <gtest/gtest.h>

#include <random>
#include <thread>
#include <unordered_map>
#include <vector>

#include "allocator/address_map.h"
#include "allocator/fast_mutex.h"

namespace dtr::detail {
namespace {

TEST(AddressMap, AgreesWithUnorderedMapOnRandomOperations) {
  AddressMap<int> map;
  std::unordered_map<std::uintptr_t, int> oracle;
  std::vector<std::uintptr_t> keys;
  std::mt19937_64 rng(11);
  for (int step = 0; step < 200'000; ++step) {
    if (keys.empty() || rng() % 5 < 3) {
      // Clustered keys (consecutive blocks of a segment) probe into each other's runs.
      const std::uintptr_t key = (std::uintptr_t{1} << 40) + 512 * (rng() % 50'000 + 1);
      if (oracle.count(key) != 0) continue;
      map.insert(key, step);
      oracle.emplace(key, step);
      keys.push_back(key);
    } else {
      const std::size_t k = rng() % keys.size();
      map.erase(keys[k]);
      oracle.erase(keys[k]);
      keys[k] = keys.back();
      keys.pop_back();
    }
    ASSERT_EQ(map.size(), oracle.size());
    if (step % 1000 == 0) {
      for (const auto& [key, value] : oracle) {
        const int* found = map.find(key);
        ASSERT_NE(found, nullptr);
        ASSERT_EQ(*found, value);
      }
      ASSERT_EQ(map.find(512), nullptr);
    }
  }
  for (std::uintptr_t key : keys) ASSERT_NE(map.find(key), nullptr);
}

TEST(FastMutex, ExcludesUnderContention) {
  FastMutex mutex;
  long counter = 0;  // deliberately not atomic: only the mutex protects it
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100'000; ++i) {
        std::lock_guard lock(mutex);
        ++counter;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(counter, 400'000);
  EXPECT_TRUE(mutex.try_lock());
  EXPECT_FALSE(mutex.try_lock());
  mutex.unlock();
}

}  // namespace
}  // namespace dtr::detail
