// Fashion-MNIST's IDX files (gzip, read with zlib), synthetic data and the per-epoch order
// (include/dtr/train/dataset.h).
#include "dtr/train/dataset.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <system_error>

#include "dtr/check.h"

namespace dtr::train {

namespace {

constexpr std::uint32_t kImagesMagic = 0x00000803;  // unsigned bytes, 3 dimensions
constexpr std::uint32_t kLabelsMagic = 0x00000801;  // unsigned bytes, 1 dimension

std::string install_hint() {
  return "Debian's dataset-fashion-mnist package installs these files (apt install dataset-fashion-mnist; "
         "scripts/setup.sh does); --data synthetic trains without them";
}

// The whole file, decompressed (a file that is not gzip is read as it is, as zlib's gzread does).
std::vector<unsigned char> read_gzip(const std::filesystem::path& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) {
    DTR_THROW(IoError, "cannot read '", path.string(), "': no such file. ", install_hint());
  }
  if (std::filesystem::is_directory(status)) {
    DTR_THROW(IoError, "cannot read '", path.string(), "': it is a directory, not an IDX file");
  }
  errno = 0;
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) {
    DTR_THROW(IoError, "cannot open '", path.string(), "': ", errno != 0 ? std::strerror(errno) : "out of memory",
              ". ", install_hint());
  }
  std::vector<unsigned char> bytes;
  std::vector<unsigned char> chunk(1 << 20);
  for (;;) {
    const int n = gzread(file, chunk.data(), static_cast<unsigned>(chunk.size()));
    if (n < 0) {
      int code = 0;
      const std::string why = gzerror(file, &code);
      gzclose(file);
      DTR_THROW(IoError, "cannot read '", path.string(), "': ",
                code == Z_ERRNO ? std::string(std::strerror(errno)) : "corrupt gzip data (" + why + ")");
    }
    if (n == 0) break;
    bytes.insert(bytes.end(), chunk.begin(), chunk.begin() + n);
  }
  int code = 0;
  const std::string why = gzerror(file, &code);
  gzclose(file);
  if (code != Z_OK) DTR_THROW(IoError, "cannot read '", path.string(), "': the gzip stream is truncated (", why, ")");
  return bytes;
}

std::uint32_t big_endian(const std::vector<unsigned char>& bytes, std::size_t at) {
  return (std::uint32_t{bytes[at]} << 24) | (std::uint32_t{bytes[at + 1]} << 16) | (std::uint32_t{bytes[at + 2]} << 8) |
         std::uint32_t{bytes[at + 3]};
}

// The header's fields after the magic, checked to fit the file: `dims` 32-bit big-endian counts.
std::vector<std::uint32_t> header(const std::vector<unsigned char>& bytes, const std::filesystem::path& path,
                                  std::uint32_t magic, std::size_t dims, const char* what) {
  if (bytes.size() >= 4) {  // the magic number first: it says best what a file is
    const std::uint32_t found = big_endian(bytes, 0);
    DTR_CHECK(found == magic, IoError, "'", path.string(), "' is not an IDX ", what, " file: magic number 0x",
              std::hex, found, ", expected 0x", magic, std::dec);
  }
  DTR_CHECK(bytes.size() >= 4 + 4 * dims, IoError, "'", path.string(), "' is not an IDX ", what, " file: ",
            bytes.size(), " bytes, fewer than its ", 4 + 4 * dims, "-byte header");
  std::vector<std::uint32_t> fields;
  for (std::size_t d = 0; d < dims; ++d) fields.push_back(big_endian(bytes, 4 + 4 * d));
  return fields;
}

}  // namespace

std::filesystem::path default_fashion_mnist_dir() { return "/usr/share/datasets/fashion-mnist"; }

Dataset read_idx(const std::filesystem::path& images_path, const std::filesystem::path& labels_path,
                 const std::string& name) {
  const std::vector<unsigned char> images = read_gzip(images_path);
  const std::vector<std::uint32_t> dims = header(images, images_path, kImagesMagic, 3, "image");
  DTR_CHECK(dims[1] == kImageSide && dims[2] == kImageSide, IoError, "'", images_path.string(), "': images of ",
            dims[1], " x ", dims[2], " pixels, expected 28 x 28");
  const std::size_t pixels = std::size_t{dims[0]} * kImagePixels;
  DTR_CHECK(images.size() == 16 + pixels, IoError, "'", images_path.string(), "': the header says ", dims[0],
            " images (", pixels, " bytes of pixels), the file holds ", images.size() - 16,
            images.size() < 16 + pixels ? " (truncated)" : " (bytes after the data)");
  const std::vector<unsigned char> labels = read_gzip(labels_path);
  const std::vector<std::uint32_t> count = header(labels, labels_path, kLabelsMagic, 1, "label");
  DTR_CHECK(labels.size() == 8 + std::size_t{count[0]}, IoError, "'", labels_path.string(), "': the header says ",
            count[0], " labels, the file holds ", labels.size() - 8,
            labels.size() < 8 + std::size_t{count[0]} ? " (truncated)" : " (bytes after the data)");
  DTR_CHECK(count[0] == dims[0], IoError, "'", labels_path.string(), "' holds ", count[0], " labels for the ",
            dims[0], " images of '", images_path.string(), "'");
  Dataset data;
  data.name = name;
  data.count = dims[0];
  data.labels.resize(count[0]);
  for (std::size_t i = 0; i < count[0]; ++i) {
    const unsigned label = labels[8 + i];
    DTR_CHECK(label < kClasses, IoError, "'", labels_path.string(), "': label ", i, " (byte offset ", 8 + i, ") is ",
              label, ", expected 0 to 9");
    data.labels[i] = label;
  }
  // torchvision: ToTensor() (x / 255) then Normalize(mean, std) ((x - mean) / std), in float32.
  data.images.resize(pixels);
  for (std::size_t i = 0; i < pixels; ++i) {
    data.images[i] = (static_cast<float>(images[16 + i]) / 255.0F - kFashionMean) / kFashionStd;
  }
  return data;
}

TrainTest read_fashion_mnist(const std::filesystem::path& dir) {
  TrainTest data;
  data.train = read_idx(dir / "train-images-idx3-ubyte.gz", dir / "train-labels-idx1-ubyte.gz", "fashion-mnist train");
  data.test = read_idx(dir / "t10k-images-idx3-ubyte.gz", dir / "t10k-labels-idx1-ubyte.gz", "fashion-mnist test");
  return data;
}

TrainTest synthetic_data(std::uint64_t seed, std::int64_t train_count, std::int64_t test_count) {
  DTR_CHECK(train_count > 0 && test_count > 0, InvalidArgument, "synthetic data: ", train_count, " training and ",
            test_count, " test images (expected > 0)");
  std::mt19937_64 engine(seed);
  const auto make = [&](std::int64_t count, const char* name) {
    Dataset data;
    data.name = name;
    data.count = count;
    data.images.resize(static_cast<std::size_t>(count * kImagePixels));
    data.labels.resize(static_cast<std::size_t>(count));
    for (std::int64_t n = 0; n < count; ++n) {
      const auto label = static_cast<std::int64_t>(engine() % kClasses);
      data.labels[static_cast<std::size_t>(n)] = label;
      for (std::int64_t p = 0; p < kImagePixels; ++p) {
        const std::int64_t row = p / kImageSide;
        const bool band = row >= 2 + 2 * label && row < 5 + 2 * label;  // rows 2 + 2c to 4 + 2c
        const float noise = static_cast<float>(engine() >> 40) / static_cast<float>(1 << 24) * 0.4F;
        const float pixel = (band ? 0.6F : 0.0F) + noise;
        data.images[static_cast<std::size_t>(n * kImagePixels + p)] = (pixel - kFashionMean) / kFashionStd;
      }
    }
    return data;
  };
  TrainTest data;
  data.train = make(train_count, "synthetic train");
  data.test = make(test_count, "synthetic test");
  return data;
}

std::vector<std::int64_t> epoch_order(std::uint64_t seed, std::int64_t epoch, std::int64_t count) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) order[static_cast<std::size_t>(i)] = i;
  std::mt19937_64 engine(seed * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(epoch) + 1);
  for (std::int64_t i = count - 1; i > 0; --i) {  // Fisher-Yates; the modulo's bias is below 2^-40 here
    const auto j = static_cast<std::int64_t>(engine() % static_cast<std::uint64_t>(i + 1));
    std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(j)]);
  }
  return order;
}

}  // namespace dtr::train
