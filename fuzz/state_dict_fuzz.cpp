// Fuzz target: the state-dict loader, dtr::nn::read_state_dict (include/dtr/nn/state_dict.h, nn/state_dict.cpp;
// the format: docs/state-dict.md).
//
// Input: the file's bytes, written to a scratch file (read_state_dict reads a path). Each input is read twice
// when its last 4 bytes are not the CRC-32 of the rest: as it is (a checksum mismatch at the latest), and with
// the checksum made right, so that mutated entries reach the end of the reader and its success path.
// read_state_dict returns or throws dtr::IoError, in a message of bounded length that starts
// "read_state_dict: '<path>': " and ends "(at byte offset <n>)", n within the file. A dict it returns is saved
// again with save_state_dict: the format has one encoding per dict, so the bytes must be the input's.
#include <zlib.h>

#include <charconv>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "dtr/nn/state_dict.h"
#include "dtr/runtime.h"
#include "fuzz_check.h"
#include "scratch_dir.h"

namespace {

using dtr::fuzz::require;

void check_file(const std::uint8_t* data, std::size_t size) {
  const std::filesystem::path& dir = dtr::fuzz::scratch_dir();
  const std::filesystem::path input = dir / "input.dtr";
  dtr::fuzz::write_file(input, data, size);
  const std::string prefix = "read_state_dict: '" + input.string() + "': ";

  dtr::Runtime runtime;  // declared before the dict: tensors must not outlive their runtime
  dtr::nn::StateDict dict;
  const auto message_checks = [&](std::string_view message) {
    require(message.starts_with(prefix), "a read_state_dict message that does not start with its documented prefix",
            message);
    constexpr std::string_view kOffset = "(at byte offset ";
    const std::size_t at = message.rfind(kOffset);
    require(at != std::string_view::npos && message.ends_with(")"),
            "a read_state_dict message that does not end with (at byte offset N)", message);
    std::uint64_t offset = 0;
    const char* first = message.data() + at + kOffset.size();
    const char* last = message.data() + message.size() - 1;
    const auto [end, error] = std::from_chars(first, last, offset);
    require(error == std::errc{} && end == last && offset <= size,
            "a read_state_dict message whose byte offset is not one within the file", message);
  };
  if (!dtr::fuzz::returns_or_throws<dtr::IoError>([&] { dict = dtr::nn::read_state_dict(runtime, input); }, prefix,
                                                  message_checks)) {
    return;
  }

  const std::filesystem::path output = dir / "saved.dtr";
  dtr::fuzz::returns_or_throws<dtr::fuzz::Never>([&] { dtr::nn::save_state_dict(dict, output); }, "");
  std::ifstream saved(output, std::ios::binary);
  const std::vector<std::uint8_t> bytes{std::istreambuf_iterator<char>(saved), std::istreambuf_iterator<char>()};
  require(bytes.size() == size && std::memcmp(bytes.data(), data, size) == 0,
          "a dict read_state_dict accepted saves to other bytes than the file it came from",
          std::to_string(size) + " bytes read, " + std::to_string(bytes.size()) + " written");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  check_file(data, size);
  if (size < 4) return 0;
  const auto crc = static_cast<std::uint32_t>(crc32_z(crc32_z(0, Z_NULL, 0), data, size - 4));
  std::uint32_t stored = 0;
  std::memcpy(&stored, data + size - 4, 4);  // little-endian, as the host (nn/state_dict.cpp asserts it)
  if (stored == crc) return 0;
  std::vector<std::uint8_t> fixed(data, data + size);
  std::memcpy(fixed.data() + size - 4, &crc, 4);
  check_file(fixed.data(), fixed.size());
  return 0;
}
