// dtr::FunctionRef: calls the callable it refers to, with the arguments forwarded and the result returned,
// without copying it.
#include "dtr/function_ref.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace dtr::test {
namespace {

int call_twice(FunctionRef<int(int)> f, int x) { return f(f(x)); }

TEST(FunctionRef, CallsTheCallableItRefersTo) {
  int calls = 0;
  const auto add_calls = [&calls](int x) { return x + ++calls; };  // a const lambda with a capture
  EXPECT_EQ(call_twice(add_calls, 10), 13);                       // (10 + 1) + 2
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(call_twice([](int x) { return 2 * x; }, 3), 12);  // a temporary lives through the call
}

TEST(FunctionRef, ForwardsArgumentsAndSeesTheCallablesState) {
  struct Counter {
    int total = 0;
    void operator()(std::unique_ptr<int> p, const std::string& s) { total += *p + static_cast<int>(s.size()); }
  } counter;
  const FunctionRef<void(std::unique_ptr<int>, const std::string&)> ref(counter);
  ref(std::make_unique<int>(5), "abc");  // a move-only argument is moved through
  ref(std::make_unique<int>(1), "");
  EXPECT_EQ(counter.total, 9);  // not a copy: the referred object changed
  const FunctionRef<void(std::unique_ptr<int>, const std::string&)> copy = ref;
  copy(std::make_unique<int>(1), "x");
  EXPECT_EQ(counter.total, 11);
}

}  // namespace
}  // namespace dtr::test
