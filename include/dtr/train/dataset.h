// Training data for dtr-train: Fashion-MNIST from Debian's dataset-fashion-mnist (gzipped IDX files, every
// header field checked), or synthetic images for quick runs and tests; normalised as torchvision's
// ToTensor() + Normalize(mean, std) does, and shuffled per epoch from a seed.
//
// Ownership: a Dataset owns its values. Thread safety: the functions are pure; a Dataset may be read by several
// threads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace dtr::train {

inline constexpr std::int64_t kImageSide = 28;
inline constexpr std::int64_t kImagePixels = kImageSide * kImageSide;
inline constexpr std::int64_t kClasses = 10;
// Fashion-MNIST's training-set pixel mean and standard deviation (pixels scaled to [0, 1]): the constants of
// torchvision's usual Normalize((0.2860,), (0.3530,)).
inline constexpr float kFashionMean = 0.2860F;
inline constexpr float kFashionStd = 0.3530F;

struct Dataset {
  std::string name;
  std::int64_t count = 0;
  std::vector<float> images;         // count × 784, normalised, row-major [count, 1, 28, 28]
  std::vector<std::int64_t> labels;  // count, each in [0, 10)
};

struct TrainTest {
  Dataset train;
  Dataset test;
};

// Where Debian's dataset-fashion-mnist puts the files.
std::filesystem::path default_fashion_mnist_dir();

// The four files train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz and
// t10k-labels-idx1-ubyte.gz from `dir`. Throws dtr::IoError naming the file and what is wrong: missing or
// unreadable (with how to install the package), not gzip, truncated, a wrong magic number, counts that differ
// between images and labels or from what the header says, dimensions other than 28 x 28, a label >= 10,
// bytes after the data.
TrainTest read_fashion_mnist(const std::filesystem::path& dir = default_fashion_mnist_dir());

// One IDX image file and its label file, as read_fashion_mnist checks them.
Dataset read_idx(const std::filesystem::path& images, const std::filesystem::path& labels, const std::string& name);

// Images of ten classes that a model can learn (each class a bright band at its own rows, plus noise),
// normalised like Fashion-MNIST, from `seed`.
TrainTest synthetic_data(std::uint64_t seed, std::int64_t train_count = 2048, std::int64_t test_count = 512);

// The order of the training images in `epoch` (0, 1, ...): a permutation of [0, count) from (seed, epoch),
// the same on every machine.
std::vector<std::int64_t> epoch_order(std::uint64_t seed, std::int64_t epoch, std::int64_t count);

}  // namespace dtr::train
