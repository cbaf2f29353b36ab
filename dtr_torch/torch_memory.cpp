#include "dtr_torch/torch_memory.h"

#include <c10/core/CPUAllocator.h>
#include <unistd.h>

#include <deque>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "dtr/check.h"
#include "dtr/error.h"

namespace dtr::torch::detail {

namespace {

struct Offer {
  at::Tensor owner;
  void* data;
  std::size_t bytes;
};

thread_local std::deque<Offer> offers;

class TorchMemory final : public MemoryResource {
 public:
  std::size_t capacity() const override {
    return static_cast<std::size_t>(::sysconf(_SC_PHYS_PAGES)) * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  }
  std::string name() const override { return "PyTorch's CPU allocator"; }
  bool host_accessible() const override { return true; }

 protected:
  void* do_allocate(std::size_t bytes, std::size_t /*alignment*/) override {
    Held held;
    void* ptr = nullptr;
    // Offers are positional: the first allocation after an op's first run is its first output's, and so on.
    // A result that cannot be adopted holds its place with a null offer, so no output takes another's buffer.
    std::optional<Offer> offer;
    if (!offers.empty()) {
      offer = std::move(offers.front());
      offers.pop_front();
    }
    if (offer && offer->data != nullptr && offer->bytes == bytes) {
      held.owner = std::move(offer->owner);
      ptr = offer->data;
    } else {
      held.fresh = c10::GetCPUAllocator()->allocate(bytes);  // throws c10::Error when the system has no more
      ptr = held.fresh.get();
    }
    std::lock_guard lock(mutex_);
    held_.emplace(ptr, std::move(held));
    return ptr;
  }

  void do_deallocate(void* ptr, std::size_t /*bytes*/) override {
    Held released;
    {
      std::lock_guard lock(mutex_);
      auto it = held_.find(ptr);
      if (it == held_.end()) DTR_THROW(InvalidArgument, "PyTorch's CPU allocator: ", ptr, " was not allocated here");
      released = std::move(it->second);
      held_.erase(it);
    }
  }

 private:
  struct Held {
    at::Tensor owner;     // an adopted result
    c10::DataPtr fresh;   // or a buffer of its own
  };
  std::mutex mutex_;
  std::unordered_map<void*, Held> held_;
};

}  // namespace

std::unique_ptr<MemoryResource> make_torch_memory() { return std::make_unique<TorchMemory>(); }

void offer_result(const at::Tensor& owner, const void* data, std::size_t bytes) {
  offers.push_back(Offer{owner, const_cast<void*>(data), bytes});
}

void clear_offers() { offers.clear(); }

}  // namespace dtr::torch::detail
