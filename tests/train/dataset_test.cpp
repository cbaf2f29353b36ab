// Fashion-MNIST's IDX files as Debian installs them, every way a file can be wrong, synthetic data and the
// per-epoch order (include/dtr/train/dataset.h).
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "../test_helpers.h"
#include "dtr/train/dataset.h"

namespace dtr::train::test {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<unsigned char>;

void put32(Bytes& b, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) b.push_back(static_cast<unsigned char>(v >> shift));
}

// An IDX image file's bytes: magic 0x803, count, rows, columns, then the pixels (pixel i of image n = n + i).
Bytes idx_images(std::uint32_t count, std::uint32_t rows = 28, std::uint32_t columns = 28) {
  Bytes b;
  put32(b, 0x803);
  put32(b, count);
  put32(b, rows);
  put32(b, columns);
  for (std::uint32_t n = 0; n < count; ++n) {
    for (std::uint32_t i = 0; i < rows * columns; ++i) b.push_back(static_cast<unsigned char>((n + i) % 256));
  }
  return b;
}

Bytes idx_labels(std::uint32_t count) {
  Bytes b;
  put32(b, 0x801);
  put32(b, count);
  for (std::uint32_t n = 0; n < count; ++n) b.push_back(static_cast<unsigned char>(n % 10));
  return b;
}

class IdxFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dtr-idx-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path gzip(const std::string& name, const Bytes& bytes) {
    const fs::path path = dir_ / name;
    gzFile file = gzopen(path.c_str(), "wb");
    EXPECT_NE(file, nullptr);
    EXPECT_EQ(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
    gzclose(file);
    return path;
  }
  fs::path raw(const std::string& name, const Bytes& bytes) {
    const fs::path path = dir_ / name;
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                static_cast<std::streamsize>(bytes.size()));
    return path;
  }
  // Expects read_idx(images, labels) to throw dtr::IoError naming `file` and every one of `parts`.
  void expect_refused(const fs::path& images, const fs::path& labels, const fs::path& file,
                      std::initializer_list<std::string_view> parts) {
    try {
      read_idx(images, labels, "test");
      ADD_FAILURE() << "read " << images << " and " << labels;
    } catch (const IoError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(file.string()), std::string::npos) << message;
      for (const std::string_view part : parts) EXPECT_NE(message.find(part), std::string::npos) << message;
    }
  }

  fs::path dir_;
};

TEST_F(IdxFiles, AValidPairIsReadAndNormalisedAsTorchvisionDoes) {
  const Dataset d = read_idx(gzip("i.gz", idx_images(3)), gzip("l.gz", idx_labels(3)), "tiny");
  EXPECT_EQ(d.name, "tiny");
  ASSERT_EQ(d.count, 3);
  EXPECT_EQ(d.labels, (std::vector<std::int64_t>{0, 1, 2}));
  ASSERT_EQ(d.images.size(), 3U * 784);
  for (const std::size_t at : {0UL, 1UL, 784UL + 5, 2 * 784UL + 783}) {
    const std::size_t n = at / 784;
    const std::size_t i = at % 784;
    const float pixel = static_cast<float>((n + i) % 256);
    EXPECT_EQ(d.images[at], (pixel / 255.0F - kFashionMean) / kFashionStd) << at;  // bit for bit, in float32
  }
}

TEST_F(IdxFiles, UncompressedFilesAreReadToo) {
  const Dataset d = read_idx(raw("i", idx_images(2)), raw("l", idx_labels(2)), "raw");
  EXPECT_EQ(d.count, 2);
}

TEST_F(IdxFiles, EveryWrongFileIsAnIoErrorNamingItAndWhatIsWrong) {
  const fs::path images = gzip("images.gz", idx_images(4));
  const fs::path labels = gzip("labels.gz", idx_labels(4));
  expect_refused(dir_ / "missing.gz", labels, dir_ / "missing.gz", {"no such file", "apt install dataset-fashion-mnist"});
  expect_refused(dir_, labels, dir_, {"directory"});
  expect_refused(labels, labels, labels, {"magic number 0x801", "expected 0x803"});
  expect_refused(images, images, images, {"magic number 0x803", "expected 0x801"});
  expect_refused(gzip("short.gz", Bytes{0, 0, 8}), labels, dir_ / "short.gz", {"3 bytes", "header"});
  expect_refused(gzip("dims.gz", idx_images(4, 32, 32)), labels, dir_ / "dims.gz", {"32 x 32", "28 x 28"});
  Bytes truncated = idx_images(4);
  truncated.resize(truncated.size() - 100);
  expect_refused(gzip("trunc.gz", truncated), labels, dir_ / "trunc.gz", {"4 images", "truncated"});
  Bytes extra = idx_images(4);
  extra.push_back(7);
  expect_refused(gzip("extra.gz", extra), labels, dir_ / "extra.gz", {"bytes after the data"});
  expect_refused(images, gzip("l3.gz", idx_labels(3)), dir_ / "l3.gz", {"3 labels", "4 images"});
  Bytes bad_label = idx_labels(4);
  bad_label[8 + 2] = 10;
  expect_refused(images, gzip("bad.gz", bad_label), dir_ / "bad.gz", {"label 2", "is 10", "0 to 9"});
  Bytes labels_truncated = idx_labels(4);
  labels_truncated.pop_back();
  expect_refused(images, gzip("lt.gz", labels_truncated), dir_ / "lt.gz", {"truncated"});
}

TEST_F(IdxFiles, CorruptAndTruncatedGzipStreamsAreRefused) {
  const fs::path good = gzip("good.gz", idx_images(50));
  std::ifstream in(good, std::ios::binary);
  Bytes compressed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(compressed.size(), 40U);
  Bytes cut(compressed.begin(), compressed.begin() + static_cast<std::ptrdiff_t>(compressed.size() / 2));
  expect_refused(raw("cut.gz", cut), good, dir_ / "cut.gz", {"truncated"});
  Bytes flipped = compressed;
  for (std::size_t i = 20; i < 40; ++i) flipped[i] ^= 0x5a;
  expect_refused(raw("flipped.gz", flipped), good, dir_ / "flipped.gz", {"cannot read"});
}

TEST(FashionMnist, TheDebianPackageHoldsSixtyAndTenThousandImages) {
  if (!fs::exists(default_fashion_mnist_dir() / "train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << default_fashion_mnist_dir() << " is missing (apt install dataset-fashion-mnist)";
  }
  const TrainTest data = read_fashion_mnist();
  EXPECT_EQ(data.train.count, 60000);
  EXPECT_EQ(data.test.count, 10000);
  EXPECT_EQ(data.train.labels[0], 9);  // the first training image is an ankle boot
  std::vector<int> per_class(10);
  for (const std::int64_t l : data.train.labels) per_class[static_cast<std::size_t>(l)] += 1;
  EXPECT_EQ(per_class, std::vector<int>(10, 6000));
  // Normalised by the training set's own mean and deviation: mean about 0, deviation about 1.
  double sum = 0;
  double squares = 0;
  for (const float v : data.train.images) {
    sum += v;
    squares += static_cast<double>(v) * v;
  }
  const double n = static_cast<double>(data.train.images.size());
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(std::sqrt(squares / n - (sum / n) * (sum / n)), 1.0, 0.01);
}

TEST(FashionMnist, AMissingFolderSaysHowToInstallThePackage) {
  dtr::test::expect_error<IoError>([] { read_fashion_mnist("/nonexistent/fashion"); },
                                   {"/nonexistent/fashion/train-images-idx3-ubyte.gz", "apt install dataset-fashion-mnist",
                                    "--data synthetic"});
}

TEST(SyntheticData, IsReproducibleBalancedAndNormalised) {
  const TrainTest a = synthetic_data(5, 300, 100);
  const TrainTest b = synthetic_data(5, 300, 100);
  const TrainTest c = synthetic_data(6, 300, 100);
  EXPECT_EQ(a.train.count, 300);
  EXPECT_EQ(a.test.count, 100);
  EXPECT_EQ(a.train.images, b.train.images);
  EXPECT_EQ(a.train.labels, b.train.labels);
  EXPECT_NE(a.train.images, c.train.images);
  std::set<std::int64_t> classes(a.train.labels.begin(), a.train.labels.end());
  EXPECT_EQ(classes.size(), 10U);
  EXPECT_EQ(*classes.rbegin(), 9);
  dtr::test::expect_error<InvalidArgument>([] { synthetic_data(1, 0, 10); }, {"0 training"});
}

TEST(EpochOrder, IsAPermutationFixedBySeedAndEpoch) {
  const std::vector<std::int64_t> e0 = epoch_order(3, 0, 1000);
  std::vector<std::int64_t> sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  for (std::int64_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[static_cast<std::size_t>(i)], i);
  EXPECT_EQ(epoch_order(3, 0, 1000), e0);
  EXPECT_NE(epoch_order(3, 1, 1000), e0);
  EXPECT_NE(epoch_order(4, 0, 1000), e0);
  std::vector<std::int64_t> identity(1000);
  for (std::int64_t i = 0; i < 1000; ++i) identity[static_cast<std::size_t>(i)] = i;
  EXPECT_NE(e0, identity);
}

}  // namespace
}  // namespace dtr::train::test
