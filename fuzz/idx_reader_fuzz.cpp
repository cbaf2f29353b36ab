// Fuzz target: the IDX reader, dtr::train::read_idx (include/dtr/train/dataset.h, train/dataset.cpp), which reads
// a gzipped image file and its label file (a file that is not gzip is read as it is).
//
// Input: byte 0 holds flags: bit 0 gzips the image file's bytes before they are written, bit 1 the label
// file's (so that mutations of the IDX contents reach the header checks behind the gzip layer; without them the
// bytes are written as they are, and mutations reach zlib's gzip parsing). Bytes 1 and 2: the image file's
// length L (little-endian, at most what is left). Then L bytes of the image file, and the label file to the
// end. read_idx returns or throws dtr::IoError naming one of the files, in a message of bounded length; a
// dataset it returns has count images of 28 x 28 and count labels in [0, 10).
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "dtr/train/dataset.h"
#include "fuzz_check.h"
#include "scratch_dir.h"

namespace {

using dtr::fuzz::require;

void write_gzip(const std::filesystem::path& path, const std::uint8_t* bytes, std::size_t size) {
  gzFile file = gzopen(path.c_str(), "wb");
  require(file != nullptr, "cannot write a scratch file", path.string());
  const bool written = size == 0 || gzwrite(file, bytes, static_cast<unsigned>(size)) == static_cast<int>(size);
  require(gzclose(file) == Z_OK && written, "cannot write a scratch file", path.string());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 3) return 0;
  const unsigned flags = data[0];
  const std::size_t rest = size - 3;
  const std::size_t image_bytes = std::min<std::size_t>(rest, data[1] | (std::size_t{data[2]} << 8));
  const std::uint8_t* images = data + 3;
  const std::uint8_t* labels = images + image_bytes;
  const std::size_t label_bytes = rest - image_bytes;

  const std::filesystem::path& dir = dtr::fuzz::scratch_dir();
  const std::filesystem::path images_path = dir / "images-idx3-ubyte.gz";
  const std::filesystem::path labels_path = dir / "labels-idx1-ubyte.gz";
  (flags & 1U ? write_gzip : dtr::fuzz::write_file)(images_path, images, image_bytes);
  (flags & 2U ? write_gzip : dtr::fuzz::write_file)(labels_path, labels, label_bytes);

  dtr::train::Dataset dataset;
  if (!dtr::fuzz::returns_or_throws<dtr::IoError>(
          [&] { dataset = dtr::train::read_idx(images_path, labels_path, "fuzz"); }, dir.string(),
          [&](std::string_view message) {
            require(message.find("'" + images_path.string() + "'") != std::string_view::npos ||
                        message.find("'" + labels_path.string() + "'") != std::string_view::npos,
                    "a read_idx message that names neither file (quoted)", message);
          })) {
    return 0;
  }
  const std::string what = std::to_string(dataset.count) + " images";
  require(dataset.name == "fuzz", "read_idx: the dataset's name is not the one given", dataset.name);
  require(dataset.count >= 0 && dataset.images.size() == static_cast<std::size_t>(dataset.count) * 784 &&
              dataset.labels.size() == static_cast<std::size_t>(dataset.count),
          "read_idx: a dataset whose images and labels are not count x 784 and count", what);
  for (const std::int64_t label : dataset.labels) {
    require(label >= 0 && label < dtr::train::kClasses, "read_idx: a label outside [0, 10)", what);
  }
  return 0;
}
