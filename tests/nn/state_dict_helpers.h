// What the state-dict tests share: a small model, bitwise comparisons, a scratch folder, and an encoder that
// writes the file format of docs/state-dict.md field by field, independently of nn/state_dict.cpp.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dtr/dtr.h"
#include "dtr/nn/init.h"
#include "dtr/nn/module.h"
#include "dtr/nn/state_dict.h"

namespace dtr::nn::test {

namespace fs = std::filesystem;

// A layer: a weight and a bias drawn from the generator.
class Affine : public Module {
 public:
  Affine(Runtime& rt, Generator& generator, std::int64_t in, std::int64_t out) {
    register_parameter("weight", uniform_variable(rt, generator, {out, in}, 0.5, true));
    register_parameter("bias", uniform_variable(rt, generator, {out}, 0.5, true));
  }
  Variable forward(const Variable& x) override { return x; }
};

// A model whose keys are scale, body.0.weight, body.0.bias, body.1.weight, body.1.bias (float32
// parameters, one nested two deep), then the buffers running (float64) and steps (an int64 scalar); every
// value depends on the seed.
class Net : public Module {
 public:
  Net(Runtime& rt, std::uint64_t seed) {
    Generator generator(seed);
    scale = register_parameter("scale", normal_variable(rt, generator, {3}, 1.0, true));
    register_module("body",
                    std::make_shared<Sequential>(std::vector<std::shared_ptr<Module>>{
                        std::make_shared<Affine>(rt, generator, 4, 3), std::make_shared<Affine>(rt, generator, 3, 2)}));
    const std::vector<double> running_values{generator.uniform(), generator.normal()};
    running = register_buffer("running", Variable(rt, rt.constant(TensorMeta{{2}, DType::float64}, running_values)));
    const std::vector<std::int64_t> steps_values{static_cast<std::int64_t>(seed) * 1000 + 7};
    steps = register_buffer("steps", Variable(rt, rt.constant(TensorMeta{{}, DType::int64}, steps_values)));
  }
  Variable forward(const Variable& x) override { return x; }

  Variable scale;
  Variable running;
  Variable steps;
};

// A tensor's raw bytes, whatever its dtype.
inline std::string bytes_of(const Tensor& t) {
  auto raw = [](const auto& values) {
    return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(values[0]));
  };
  switch (t.meta().dtype) {
    case DType::float32:
      return raw(t.to_host_as<float>());
    case DType::float64:
      return raw(t.to_host_as<double>());
    case DType::int64:
      return raw(t.to_host_as<std::int64_t>());
    case DType::uint8:
      return raw(t.to_host_as<std::uint8_t>());
  }
  return {};
}

// The same names, in the same order, with the same metas and the same bits.
inline void expect_same_bits(const StateDict& expected, const StateDict& actual) {
  ASSERT_EQ(expected.size(), actual.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(expected[i].first, actual[i].first);
    EXPECT_EQ(expected[i].second.meta(), actual[i].second.meta()) << expected[i].first;
    EXPECT_TRUE(bytes_of(expected[i].second) == bytes_of(actual[i].second)) << expected[i].first;
  }
}

inline std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A fresh folder per test (others may read and enter it: the unprivileged checks run as another user).
class ScratchFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dtr-state-dict-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
  }
  void TearDown() override {
    std::error_code ignored;
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::add, ignored);
    fs::remove_all(dir_, ignored);
  }
  fs::path path(const std::string& name) const { return dir_ / name; }
  // The names in the folder: no temporary file may be left behind.
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir_)) names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  fs::path dir_;
  Runtime rt_;
};

// ---- the format, written by hand ----

template <typename T>
void put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

// One entry as the file holds it; the optional fields override what the others imply, to write bad files.
struct RawEntry {
  std::string name;
  std::uint8_t dtype_code = 1;
  std::vector<std::int64_t> dims;
  std::string data;
  std::optional<std::uint32_t> name_length = std::nullopt;
  std::optional<std::uint64_t> byte_count = std::nullopt;
};

inline std::string with_checksum(std::string body) {
  put(body, static_cast<std::uint32_t>(crc32_z(0, reinterpret_cast<const Bytef*>(body.data()), body.size())));
  return body;
}

inline std::string encode(const std::vector<RawEntry>& entries, std::uint32_t version = 1,
                          std::optional<std::uint64_t> count = std::nullopt) {
  std::string out = "DTRSTATE";
  put(out, version);
  put(out, count.value_or(entries.size()));
  for (const RawEntry& e : entries) {
    put(out, e.name_length.value_or(static_cast<std::uint32_t>(e.name.size())));
    out += e.name;
    put(out, e.dtype_code);
    put(out, static_cast<std::uint8_t>(e.dims.size()));
    for (const std::int64_t d : e.dims) put(out, d);
    put(out, e.byte_count.value_or(e.data.size()));
    out += e.data;
  }
  return with_checksum(out);
}

template <typename T>
std::string raw_values(std::initializer_list<T> values) {
  std::string out;
  for (const T v : values) put(out, v);
  return out;
}

}  // namespace dtr::nn::test
