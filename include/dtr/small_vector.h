// dtr::SmallVector<T, N>: a vector whose first N elements live inside the object. Shapes, an op's inputs and
// outputs, pins: the runtime's per-op lists are short, and allocating each on the heap was most of its
// per-op bookkeeping (docs/results/runtime-overhead.md). Past N elements it moves to the heap and behaves like std::vector.
//
// Contiguous (data(), pointers as iterators), so std::span and the ranges algorithms accept it.
// Thread safety: as std::vector.
#pragma once

#include <algorithm>
#include <cstring>
#include <cstddef>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace dtr {

template <typename T, std::size_t N>
class SmallVector {
  static_assert(N > 0, "a SmallVector keeps at least one element inline");
  static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__, "over-aligned element types are not supported");

 public:
  using value_type = T;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using reference = T&;
  using const_reference = const T&;
  using pointer = T*;
  using const_pointer = const T*;
  using iterator = T*;
  using const_iterator = const T*;

  SmallVector() noexcept = default;
  SmallVector(std::initializer_list<T> values) { append(values.begin(), values.end()); }
  template <std::input_iterator It>
  SmallVector(It first, It last) {
    append(first, last);
  }
  explicit SmallVector(size_type count, const T& value = T()) { resize(count, value); }
  SmallVector(const SmallVector& other) { append(other.begin(), other.end()); }
  SmallVector(SmallVector&& other) noexcept(std::is_nothrow_move_constructible_v<T>) { take(other); }
  ~SmallVector() { release(); }

  SmallVector& operator=(const SmallVector& other) {
    if (this != &other) {
      clear();
      append(other.begin(), other.end());
    }
    return *this;
  }
  SmallVector& operator=(SmallVector&& other) noexcept(std::is_nothrow_move_constructible_v<T>) {
    if (this != &other) {
      release();
      take(other);
    }
    return *this;
  }
  SmallVector& operator=(std::initializer_list<T> values) {
    clear();
    append(values.begin(), values.end());
    return *this;
  }

  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  size_type size() const noexcept { return size_; }
  size_type capacity() const noexcept { return capacity_; }
  bool empty() const noexcept { return size_ == 0; }
  // Whether the elements live inside the object (no heap memory held).
  bool is_inline() const noexcept { return data_ == inline_data(); }

  iterator begin() noexcept { return data_; }
  iterator end() noexcept { return data_ + size_; }
  const_iterator begin() const noexcept { return data_; }
  const_iterator end() const noexcept { return data_ + size_; }

  T& operator[](size_type i) noexcept { return data_[i]; }
  const T& operator[](size_type i) const noexcept { return data_[i]; }
  T& front() noexcept { return data_[0]; }
  const T& front() const noexcept { return data_[0]; }
  T& back() noexcept { return data_[size_ - 1]; }
  const T& back() const noexcept { return data_[size_ - 1]; }

  void reserve(size_type count) {
    if (count > capacity_) grow(count);
  }

  template <typename... Args>
  T& emplace_back(Args&&... args) {
    if (size_ == capacity_) grow(size_ + 1);
    T* slot = std::construct_at(data_ + size_, std::forward<Args>(args)...);
    ++size_;
    return *slot;
  }
  void push_back(const T& value) { emplace_back(value); }
  void push_back(T&& value) { emplace_back(std::move(value)); }
  void pop_back() noexcept {
    --size_;
    std::destroy_at(data_ + size_);
  }

  // Removes the element at `pos`; returns the iterator to the one after it.
  iterator erase(const_iterator pos) {
    T* at = data_ + (pos - data_);
    std::move(at + 1, end(), at);
    pop_back();
    return at;
  }
  // Inserts `value` before `pos`; returns the iterator to it.
  iterator insert(const_iterator pos, T value) {
    const difference_type index = pos - data_;
    emplace_back(std::move(value));
    std::rotate(data_ + index, end() - 1, end());
    return data_ + index;
  }

  void resize(size_type count, const T& value = T()) {
    if (count < size_) {
      std::destroy(data_ + count, data_ + size_);
      size_ = count;
      return;
    }
    reserve(count);
    std::uninitialized_fill(data_ + size_, data_ + count, value);
    size_ = count;
  }

  void clear() noexcept {
    std::destroy(data_, data_ + size_);
    size_ = 0;
  }

  template <typename It>
  void append(It first, It last) {
    if constexpr (std::contiguous_iterator<It> && std::is_trivially_copyable_v<T> &&
                  std::is_same_v<std::iter_value_t<It>, T>) {
      // Shapes and pointer lists: one memcpy (this is on every op's path, several times).
      const auto count = static_cast<size_type>(last - first);
      reserve(size_ + count);
      if (count > 0) std::memcpy(static_cast<void*>(data_ + size_), std::to_address(first), count * sizeof(T));
      size_ += count;
    } else {
      if constexpr (std::forward_iterator<It>) reserve(size_ + static_cast<size_type>(std::distance(first, last)));
      for (; first != last; ++first) emplace_back(*first);
    }
  }

  friend bool operator==(const SmallVector& a, const SmallVector& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  T* inline_data() noexcept { return std::launder(reinterpret_cast<T*>(inline_)); }
  const T* inline_data() const noexcept { return std::launder(reinterpret_cast<const T*>(inline_)); }

  void grow(size_type min_capacity) {
    const size_type new_capacity = std::max(min_capacity, 2 * capacity_);
    T* fresh = static_cast<T*>(::operator new(new_capacity * sizeof(T)));
    if constexpr (std::is_nothrow_move_constructible_v<T>) {
      std::uninitialized_move(data_, data_ + size_, fresh);
    } else {
      try {
        std::uninitialized_copy(data_, data_ + size_, fresh);
      } catch (...) {
        ::operator delete(fresh);
        throw;
      }
    }
    std::destroy(data_, data_ + size_);
    if (!is_inline()) ::operator delete(data_);
    data_ = fresh;
    capacity_ = new_capacity;
  }

  // Destroys the elements and gives back heap memory: the object is empty and inline afterwards.
  void release() noexcept {
    clear();
    if (!is_inline()) ::operator delete(data_);
    data_ = inline_data();
    capacity_ = N;
  }

  // Takes `other`'s elements (its heap block when it has one), leaving it empty and inline. *this is empty
  // and inline on entry.
  void take(SmallVector& other) noexcept(std::is_nothrow_move_constructible_v<T>) {
    if (other.is_inline()) {
      std::uninitialized_move(other.begin(), other.end(), data_);
      size_ = other.size_;
      other.clear();
    } else {
      data_ = other.data_;
      size_ = other.size_;
      capacity_ = other.capacity_;
      other.data_ = other.inline_data();
      other.size_ = 0;
      other.capacity_ = N;
    }
  }

  T* data_ = inline_data();
  size_type size_ = 0;
  size_type capacity_ = N;
  alignas(T) unsigned char inline_[N * sizeof(T)];
};

}  // namespace dtr
