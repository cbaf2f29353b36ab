// State dicts (include/dtr/nn/state_dict.h): the keys, bitwise round trips through a file, loading into another
// model (and another runtime), what copies of the variables see, strict and non-strict keys, meta mismatches,
// and the dicts save refuses. The file format's checks: state_dict_file_test.cpp.
#include <bit>
#include <limits>

#include "../test_helpers.h"
#include "dtr/nn/functional.h"
#include "state_dict_helpers.h"

namespace dtr::nn::test {
namespace {

using dtr::test::expect_error;

std::vector<std::string> keys(const StateDict& dict) {
  std::vector<std::string> names;
  for (const auto& [name, tensor] : dict) names.push_back(name);
  return names;
}

// Every class of float32: zeros of both signs, denormals, normals, infinities, quiet and signalling NaNs with
// payloads of both signs, then 65,536 patterns spread evenly over all 2^32.
std::vector<float> float32_patterns() {
  std::vector<std::uint32_t> bits = {0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007fffff, 0x00400000, 0x00800000,
                                     0x3f800000, 0x7f7fffff, 0xff7fffff, 0x7f800000, 0xff800000, 0x7fc00000, 0x7fc00001,
                                     0xffc12345, 0x7fffffff, 0x7f800001, 0xff800001, 0x7fbfffff, 0xffa5a5a5};
  for (std::uint32_t i = 0; i < 65536; ++i) bits.push_back(i * 65537u + (i & 0xff));
  std::vector<float> values;
  for (const std::uint32_t b : bits) values.push_back(std::bit_cast<float>(b));
  return values;
}

std::vector<double> float64_patterns() {
  std::vector<std::uint64_t> bits = {0x0000000000000000, 0x8000000000000000, 0x0000000000000001, 0x800fffffffffffff,
                                     0x0010000000000000, 0x3ff0000000000000, 0x7fefffffffffffff, 0x7ff0000000000000,
                                     0xfff0000000000000, 0x7ff8000000000000, 0x7ff8dead0000beef, 0xfff800000000abcd,
                                     0x7ff0000000000001, 0xfff7ffffffffffff};
  for (std::uint64_t i = 0; i < 4096; ++i) bits.push_back(i * 0x0010010010010011ull);
  std::vector<double> values;
  for (const std::uint64_t b : bits) values.push_back(std::bit_cast<double>(b));
  return values;
}

using StateDictTest = ScratchFolder;

TEST_F(StateDictTest, ParametersThenBuffersUnderDottedNames) {
  Net net(rt_, 1);
  const StateDict dict = state_dict(net);
  EXPECT_EQ(keys(dict), (std::vector<std::string>{"scale", "body.0.weight", "body.0.bias", "body.1.weight",
                                                  "body.1.bias", "running", "steps"}));
  EXPECT_EQ(dict[1].second.shape(), (Shape{3, 4}));
  EXPECT_EQ(dict[5].second.meta().dtype, DType::float64);
  EXPECT_EQ(dict[6].second.meta(), (TensorMeta{{}, DType::int64}));
  EXPECT_EQ(bytes_of(dict[0].second), bytes_of(net.scale.data()));
}

TEST_F(StateDictTest, RoundTripIsBitwiseForEveryDtypeAndRank) {
  const std::vector<float> f32 = float32_patterns();
  const std::vector<double> f64 = float64_patterns();
  const std::vector<std::int64_t> i64 = {
      std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max(), -1, 0, 1, 0x0123456789abcdef};
  const std::vector<float> one = {-0.0f};
  const std::vector<float> deep(256, 0.5f);
  const StateDict dict = {
      {"f32", rt_.constant(TensorMeta{{static_cast<std::int64_t>(f32.size()) / 4, 4}}, f32)},
      {"f64", rt_.constant(TensorMeta{{static_cast<std::int64_t>(f64.size())}, DType::float64}, f64)},
      {"i64", rt_.constant(TensorMeta{{2, 3}, DType::int64}, i64)},
      {"scalar", rt_.constant(TensorMeta{{}}, one)},
      {"empty", rt_.constant(TensorMeta{{0, 3}}, std::span<const float>())},
      {"rank8", rt_.constant(TensorMeta{{2, 2, 2, 2, 2, 2, 2, 2}}, deep)},
      {"unicode \xc3\xa9\xe2\x88\x82", rt_.constant(TensorMeta{{1}}, one)},
  };
  save_state_dict(dict, path("all.dtr"));
  EXPECT_EQ(listing(), std::vector<std::string>{"all.dtr"});  // the temporary file is gone

  Runtime other;
  const StateDict back = read_state_dict(other, path("all.dtr"));
  expect_same_bits(dict, back);
  // Each entry is a constant of the runtime it was read into: resident, never evicted.
  for (const auto& [name, tensor] : back) {
    EXPECT_TRUE(tensor.resident()) << name;
    EXPECT_FALSE(other.evict(tensor)) << name;
  }
  // Saving what was read gives the same file, byte for byte.
  save_state_dict(back, path("again.dtr"));
  EXPECT_TRUE(read_file(path("all.dtr")) == read_file(path("again.dtr")));
}

TEST_F(StateDictTest, LoadingIntoAModelBuiltWithAnotherSeedGivesIdenticalValues) {
  Net a(rt_, 1);
  Net b(rt_, 2);
  ASSERT_NE(bytes_of(a.scale.data()), bytes_of(b.scale.data()));
  ASSERT_NE(bytes_of(a.steps.data()), bytes_of(b.steps.data()));
  save(a, path("a.dtr"));
  load(b, path("a.dtr"));
  expect_same_bits(state_dict(a), state_dict(b));

  // Into a model of another runtime: the values are copied into that runtime, where ops can use them.
  Runtime other;
  Net c(other, 3);
  load_state_dict(c, state_dict(a));
  expect_same_bits(state_dict(a), state_dict(c));
  const Variable loss = sum(mul(c.scale, c.scale));
  loss.backward();
  EXPECT_TRUE(c.scale.grad().defined());
}

TEST_F(StateDictTest, CopiesOfTheVariablesTakenBeforeTheLoadSeeTheLoadedValues) {
  Net a(rt_, 1);
  Net b(rt_, 2);
  const std::vector<Variable> held = b.parameters();  // as an optimizer holds them
  const auto buffers = b.named_buffers();
  b.scale.set_grad(rt_.constant(b.scale.meta()));  // a gradient accumulated before the load is kept
  load_state_dict(b, state_dict(a));

  const std::vector<Variable> expected = a.parameters();
  ASSERT_EQ(held.size(), expected.size());
  for (std::size_t i = 0; i < held.size(); ++i) {
    EXPECT_EQ(bytes_of(held[i].data()), bytes_of(expected[i].data())) << i;
    EXPECT_TRUE(held[i].is_leaf()) << i;
    EXPECT_TRUE(held[i].requires_grad()) << i;
  }
  EXPECT_EQ(bytes_of(buffers[0].second.data()), bytes_of(a.running.data()));
  EXPECT_EQ(bytes_of(buffers[1].second.data()), bytes_of(a.steps.data()));
  EXPECT_FALSE(buffers[1].second.requires_grad());
  ASSERT_TRUE(b.scale.grad().defined());

  // Gradients reach the loaded parameter through the copies: d/dx sum(x * x) = 2x, added to the zeros.
  sum(mul(held[0], held[0])).backward();
  const std::vector<float> x = a.scale.to_host();
  const std::vector<float> grad = b.scale.grad().to_host();
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_EQ(grad[i], 2 * x[i]) << i;

  // The module and the dict share no value: an in-place update of b's parameter leaves a's alone.
  Tensor data = b.scale.data();
  rt_.assign(data, ops::add(), {data, data});
  EXPECT_EQ(b.scale.to_host()[0], 2 * x[0]);
  EXPECT_EQ(a.scale.to_host(), x);
}

TEST_F(StateDictTest, StrictListsMissingAndUnexpectedKeysAndLoadsNothing) {
  Net a(rt_, 1);
  Net b(rt_, 2);
  const StateDict before = state_dict(b);  // the values b's variables hold now (a load rebinds, never writes)
  StateDict dict = state_dict(a);
  std::erase_if(dict, [](const auto& entry) { return entry.first == "body.1.bias" || entry.first == "steps"; });
  dict.emplace_back("extra", rt_.constant(TensorMeta{{1}}, std::vector<float>{1}));
  expect_error<InvalidArgument>([&] { load_state_dict(b, dict); },
                                {"missing keys: body.1.bias, steps", "unexpected keys: extra", "nothing was loaded"});
  expect_same_bits(before, state_dict(b));

  // Not strict: the keys both have are loaded, the others left alone.
  load_state_dict(b, dict, false);
  const StateDict after = state_dict(b);
  const StateDict source = state_dict(a);
  for (std::size_t i = 0; i < after.size(); ++i) {
    const bool skipped = after[i].first == "body.1.bias" || after[i].first == "steps";
    EXPECT_EQ(bytes_of(after[i].second), bytes_of((skipped ? before : source)[i].second)) << after[i].first;
  }

  // A file's keys are checked the same way, and a module without variables still reads the file.
  save_state_dict(dict, path("partial.dtr"));
  expect_error<InvalidArgument>([&] { load(b, path("partial.dtr")); }, {"missing keys: body.1.bias, steps"});
  Sequential empty;
  expect_error<InvalidArgument>([&] { load(empty, path("partial.dtr")); }, {"unexpected keys: scale, body.0.weight"});
  load(empty, path("partial.dtr"), false);
}

TEST_F(StateDictTest, AShapeOrDtypeMismatchIsAnErrorEvenWhenNotStrict) {
  Net a(rt_, 1);
  Net b(rt_, 2);
  const StateDict before = state_dict(b);
  StateDict dict = state_dict(a);
  dict[1].second = rt_.constant(TensorMeta{{4, 3}}, std::vector<float>(12, 1.0f));  // body.0.weight
  dict[5].second = rt_.constant(TensorMeta{{2}}, std::vector<float>{1.0f, 2.0f});   // running, float64
  for (const bool strict : {true, false}) {
    expect_error<ShapeError>(
        [&] { load_state_dict(b, dict, strict); },
        {"'body.0.weight' is float32 [3, 4] in the module, float32 [4, 3] in the state dict",
         "'running' is float64 [2] in the module, float32 [2] in the state dict", "nothing was loaded"});
    expect_same_bits(before, state_dict(b));
  }
}

TEST_F(StateDictTest, RefusesDictsThatCannotBeSavedOrLoadedBeforeTouchingAnything) {
  Net a(rt_, 1);
  StateDict repeated = state_dict(a);
  repeated.push_back(repeated[0]);
  expect_error<InvalidArgument>([&] { load_state_dict(a, repeated); }, {"'scale' appears twice"});

  const Tensor one = rt_.constant(TensorMeta{{1}}, std::vector<float>{1});
  const std::vector<std::pair<StateDict, std::string>> refused = {
      {repeated, "'scale' appears twice"},
      {{{"", one}}, "an empty name"},
      {{{std::string(4097, 'k'), one}}, "4097 bytes long, over the format's limit of 4096"},
      {{{"undefined", Tensor()}}, "'undefined' is undefined"},
      {{{"bytes", rt_.constant(TensorMeta{{2}, DType::uint8})}}, "'bytes' is uint8"},
      {{{"deep", rt_.constant(TensorMeta{{1, 1, 1, 1, 1, 1, 1, 1, 1}})}}, "rank 9, over the format's limit of 8"},
  };
  for (const auto& [dict, message] : refused) {
    // (clang 14 cannot capture a structured binding implicitly)
    expect_error<InvalidArgument>([&, &dict = dict] { save_state_dict(dict, path("refused.dtr")); }, {message});
    EXPECT_TRUE(listing().empty()) << message;  // no file, not even a temporary one
  }
  // The longest name the format takes is saved and read back.
  save_state_dict({{std::string(4096, 'k'), one}}, path("long.dtr"));
  EXPECT_EQ(read_state_dict(rt_, path("long.dtr")).at(0).first, std::string(4096, 'k'));
}

}  // namespace
}  // namespace dtr::nn::test
