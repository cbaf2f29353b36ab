// dtr::FunctionRef<R(Args...)>: a non-owning reference to a callable, for a callback that lives no longer than
// the call it is passed to (a graph walk's visitor, a parallel loop's body). Two pointers, and unlike
// std::function it never allocates, however much the lambda captures. The callable must outlive it.
// Thread safety: calling it is as safe as calling the callable.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace dtr {

template <typename Signature>
class FunctionRef;

template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
 public:
  template <typename F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, FunctionRef> && std::is_invocable_r_v<R, F&, Args...>)
  FunctionRef(F&& f)  // NOLINT(google-explicit-constructor): passed as a lambda at every call site
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* object, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(object))(std::forward<Args>(args)...);
        }) {}
  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  void* object_;
  R (*call_)(void*, Args...);
};

}  // namespace dtr
