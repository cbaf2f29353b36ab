// The driver that builds a fuzz target without libFuzzer (DTR_FUZZ=OFF, any compiler): runs
// LLVMFuzzerTestOneInput once over each file named on the command line, and over every regular file of each
// folder named (sorted, not recursive). ctest runs it over fuzz/corpus/<target>/ as fuzz_corpus.<target>. A
// contract violation aborts (fuzz_check.h); a folder with no files is an error too, so that a corpus that went
// missing does not pass.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

bool run(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "corpus_main: cannot read %s\n", path.c_str());
    return false;
  }
  const std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  // An empty input gets a valid pointer, as libFuzzer gives it.
  static const std::uint8_t empty = 0;
  LLVMFuzzerTestOneInput(bytes.empty() ? &empty : reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE_OR_FOLDER...: runs the fuzz target once over each input\n", argv[0]);
    return 2;
  }
  std::size_t inputs = 0;
  for (int a = 1; a < argc; ++a) {
    const std::filesystem::path arg = argv[a];
    std::error_code ec;
    if (!std::filesystem::is_directory(arg, ec)) {
      if (!run(arg)) return 1;
      ++inputs;
      continue;
    }
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(arg)) {
      if (entry.is_regular_file()) files.push_back(entry.path());
    }
    if (files.empty()) {
      std::fprintf(stderr, "corpus_main: %s holds no files\n", arg.c_str());
      return 1;
    }
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      std::fprintf(stderr, "%s\n", file.c_str());
      if (!run(file)) return 1;
      ++inputs;
    }
  }
  std::printf("%zu inputs ran\n", inputs);
  return 0;
}
