// The state-dict file (docs/state-dict.md): the documented example byte for byte, and every way a file can be
// bad or a save can fail: truncations, flipped bytes, foreign files, versions, impossible fields, trailing bytes,
// checksums, missing and unreadable files, directories, unwritable folders, a write that fails midway.
#include <sys/resource.h>
#include <sys/stat.h>

#include <cerrno>
#include <csignal>
#include <cstdio>

#include "../child_process.h"
#include "state_dict_helpers.h"

namespace dtr::nn::test {
namespace {

using dtr::test::expect_error;
using dtr::test::Outcome;
using dtr::test::run_unprivileged;

// docs/state-dict.md's example, as its hexdump shows it: "w", float32 [2] = {1.5, -0}; "n", int64 [] = 7.
const std::vector<std::uint8_t> kExample = {
    0x44, 0x54, 0x52, 0x53, 0x54, 0x41, 0x54, 0x45, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x77, 0x01, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x3f, 0x00,
    0x00, 0x00, 0x80, 0x01, 0x00, 0x00, 0x00, 0x6e, 0x03, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xa5, 0x34, 0x87, 0x7d};

std::string example_bytes() { return {kExample.begin(), kExample.end()}; }

using StateDictFile = ScratchFolder;

TEST_F(StateDictFile, TheDocumentedExampleIsWhatSaveWritesAndReadReads) {
  const StateDict dict = {{"w", rt_.constant(TensorMeta{{2}}, std::vector<float>{1.5f, -0.0f})},
                          {"n", rt_.constant(TensorMeta{{}, DType::int64}, std::vector<std::int64_t>{7})}};
  save_state_dict(dict, path("example.dtr"));
  EXPECT_TRUE(read_file(path("example.dtr")) == example_bytes());
  // The encoder the other tests build bad files with writes the same layout.
  EXPECT_TRUE(encode({{"w", 1, {2}, raw_values<float>({1.5f, -0.0f})}, {"n", 3, {}, raw_values<std::int64_t>({7})}}) ==
              example_bytes());
  write_file(path("doc.dtr"), example_bytes());
  expect_same_bits(dict, read_state_dict(rt_, path("doc.dtr")));

  // An entry without elements has no value bytes, and the checksum still covers everything before it.
  const StateDict empty = {{"w", rt_.constant(TensorMeta{{2}}, std::vector<float>{1.5f, -0.0f})},
                           {"e", rt_.constant(TensorMeta{{0, 3}}, std::span<const float>())},
                           {"n", rt_.constant(TensorMeta{{}, DType::int64}, std::vector<std::int64_t>{7})}};
  save_state_dict(empty, path("empty.dtr"));
  EXPECT_TRUE(read_file(path("empty.dtr")) == encode({{"w", 1, {2}, raw_values<float>({1.5f, -0.0f})},
                                                      {"e", 1, {0, 3}, ""},
                                                      {"n", 3, {}, raw_values<std::int64_t>({7})}}));
  expect_same_bits(empty, read_state_dict(rt_, path("empty.dtr")));
}

TEST_F(StateDictFile, EveryTruncationSaysWhere) {
  Net net(rt_, 1);
  save(net, path("net.dtr"));
  const std::string bytes = read_file(path("net.dtr"));
  ASSERT_GT(bytes.size(), 100u);
  for (std::size_t cut = 0; cut < bytes.size(); ++cut) {
    write_file(path("cut.dtr"), bytes.substr(0, cut));
    expect_error<IoError>([&] { read_state_dict(rt_, path("cut.dtr")); },
                          {path("cut.dtr").string(), "truncated", "at byte offset"});
  }
  expect_error<IoError>(
      [&] { read_state_dict(rt_, path("cut.dtr")); },
      {"truncated: the checksum needs 4 bytes, 3 are left", "at byte offset " + std::to_string(bytes.size() - 4)});
}

TEST_F(StateDictFile, EveryFlippedByteIsCaught) {
  Net net(rt_, 1);
  save(net, path("net.dtr"));
  const std::string bytes = read_file(path("net.dtr"));
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    for (const unsigned char mask : {0x01, 0x80}) {
      std::string flipped = bytes;
      flipped[i] = static_cast<char>(flipped[i] ^ mask);
      write_file(path("flipped.dtr"), flipped);
      SCOPED_TRACE("byte " + std::to_string(i) + " xor " + std::to_string(mask));
      // The last 12 bytes are steps's value and the checksum: only the checksum can tell.
      expect_error<IoError>(
          [&] { read_state_dict(rt_, path("flipped.dtr")); },
          {path("flipped.dtr").string(), i + 12 >= bytes.size() ? "checksum mismatch" : "at byte offset"});
    }
  }
}

TEST_F(StateDictFile, AForeignFileAnotherVersionAndAppendedBytesAreNamed) {
  const std::string valid = example_bytes();
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"PK\x03\x04" + valid.substr(4),
       {"not a dtr state dict: it starts with the bytes 50 4b 03 04 54 41 54 45", "at byte offset 0"}},
      {"just some text, long enough", {"not a dtr state dict"}},
      {"", {"truncated: the magic bytes needs 8 bytes, 0 are left (the file is 0 bytes long)"}},
      {encode({}, 2), {"format version 2 is not supported (this build reads version 1", "at byte offset 8"}},
      {encode({}, 0), {"format version 0 is not supported"}},
      {valid + "x", {"trailing bytes: 1 after the last entry", "at byte offset 74"}},
      {valid + std::string(100, '\0'), {"trailing bytes: 100 after the last entry"}},
      {encode({}) + std::string(4, '\0'), {"trailing bytes: 4 after the last entry", "at byte offset 20"}},
      // n's value (bytes 66 to 73) 7 → 8: only the checksum can tell.
      {valid.substr(0, 66) + "\x08" + valid.substr(67),
       {"checksum mismatch: the file says 7d8734a5", "at byte offset 74"}},
  };
  for (const auto& [bytes, parts] : cases) {
    write_file(path("bad.dtr"), bytes);
    try {
      read_state_dict(rt_, path("bad.dtr"));
      ADD_FAILURE() << "accepted: " << parts[0];
    } catch (const IoError& e) {
      EXPECT_NE(std::string(e.what()).find(path("bad.dtr").string()), std::string::npos) << e.what();
      for (const std::string& part : parts) EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  }
  // An empty dict is a valid file: the header, no entries, the checksum.
  write_file(path("empty.dtr"), encode({}));
  EXPECT_TRUE(read_state_dict(rt_, path("empty.dtr")).empty());
}

TEST_F(StateDictFile, ImpossibleFieldsAreRefusedBeforeAnythingIsAllocatedFromThem) {
  const std::string w = raw_values<float>({1, 2});
  constexpr std::int64_t kHuge = std::int64_t{1} << 40;
  // Entry 1 starts at byte 20: name length at 20, the name "w" at 24, the dtype code at 25, the rank at 26,
  // the dims from 27.
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {encode({{"w", 9, {2}, w}}),
       {"entry 1 of 1 ('w'): dtype code 9 is not one of 1 (float32), 2 (float64), 3 (int64)", "at byte offset 25"}},
      {encode({{"w", 0, {2}, w}}), {"dtype code 0 is not one of"}},
      // A name's control bytes are escaped in the message (a NUL would end what() there).
      {encode({{std::string("a\0\nb", 4), 9, {2}, w}}), {"entry 1 of 1 ('a\\x00\\x0ab'): dtype code 9"}},
      {encode({{"w", 1, {1, 1, 1, 1, 1, 1, 1, 1, 1}, raw_values<float>({1})}}),
       {"('w'): rank 9 is over the limit of 8", "at byte offset 26"}},
      {encode({{"w", 1, {2, -3}, w}}), {"('w'): dimension 1 is -3", "at byte offset 35"}},
      {encode({{"w", 1, {2}, w, std::nullopt, 12}}),
       {"('w'): a byte count of 12 for float32 [2], which takes 8", "at byte offset 35"}},
      {encode({{"w", 1, {kHuge}, w, std::nullopt, 4 * kHuge}}),
       {"truncated: entry 1 of 1 ('w')'s data needs 4398046511104 bytes", "at byte offset 43"}},
      {encode({{"w", 1, {kHuge, kHuge}, w}}),
       {"float32 [1099511627776, 1099511627776] holds more bytes than 64 bits count", "at byte offset 27"}},
      {encode({{"w", 1, {2}, w, 0}}),
       {"entry 1 of 1: a name length of 0 bytes, not within 1 to 4096", "at byte offset 20"}},
      {encode({{std::string(5000, 'k'), 1, {2}, w}}), {"a name length of 5000 bytes"}},
      {encode({{"w", 1, {2}, w, 0xffffffffu}}), {"a name length of 4294967295 bytes"}},
      {encode({{"w", 1, {2}, w}}, 1, std::uint64_t{1} << 62),
       {"an entry count of 4611686018427387904 cannot fit in the 31 bytes before the checksum", "at byte offset 12"}},
      {encode({{"w", 1, {2}, w}, {"w", 1, {2}, w}}), {"entry 2 of 2 ('w'): the name of entry 1 of 2 too"}},
  };
  for (const auto& [bytes, parts] : cases) {
    write_file(path("bad.dtr"), bytes);
    try {
      read_state_dict(rt_, path("bad.dtr"));
      ADD_FAILURE() << "accepted: " << parts[0];
    } catch (const IoError& e) {
      EXPECT_NE(std::string(e.what()).find(path("bad.dtr").string()), std::string::npos) << e.what();
      for (const std::string& part : parts) EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  }
}

TEST_F(StateDictFile, AMissingFileADirectoryAFifoAndAnUnreadableFileSaySo) {
  expect_error<IoError>([&] { read_state_dict(rt_, path("absent.dtr")); },
                        {"cannot open '" + path("absent.dtr").string() + "'", std::strerror(ENOENT)});
  expect_error<IoError>([&] { read_state_dict(rt_, dir_); },
                        {dir_.string() + "' is a directory", std::strerror(EISDIR)});
  Net net(rt_, 1);
  expect_error<IoError>([&] { load(net, dir_); }, {"is a directory"});
  expect_error<IoError>([&] { save(net, dir_); }, {"save_state_dict: '" + dir_.string() + "' is a directory"});
  // Neither a FIFO (whose open would wait for a writer) nor a device is read.
  ASSERT_EQ(mkfifo(path("fifo").c_str(), 0600), 0);
  expect_error<IoError>([&] { read_state_dict(rt_, path("fifo")); },
                        {"'" + path("fifo").string() + "' is not a regular file"});
  expect_error<IoError>([&] { read_state_dict(rt_, "/dev/null"); }, {"'/dev/null' is not a regular file"});

  save(net, path("locked.dtr"));
  fs::permissions(path("locked.dtr"), fs::perms::none);
  const std::optional<Outcome> r = run_unprivileged([&] {
    try {
      read_state_dict(rt_, path("locked.dtr"));  // fails at the open, before the runtime is touched
      std::printf("accepted\n");
      return 1;
    } catch (const IoError& e) {
      std::printf("%s\n", e.what());
      return 0;
    }
  });
  if (!r) GTEST_SKIP() << "running as root and cannot become uid 65534: nothing stops root's reads";
  EXPECT_EQ(r->status, 0) << r->output;
  EXPECT_NE(r->output.find("cannot open '" + path("locked.dtr").string() + "': " + std::strerror(EACCES)),
            std::string::npos)
      << r->output;
}

TEST_F(StateDictFile, SavingIntoAFolderThatCannotBeWrittenSaysSo) {
  Net net(rt_, 1);
  expect_error<IoError>([&] { save(net, path("absent") / "net.dtr"); },
                        {"creating the temporary file", std::strerror(ENOENT)});
  fs::create_directory(path("locked"));
  fs::permissions(path("locked"), fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                                      fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  constexpr int kWritable = 2;
  const std::optional<Outcome> r = run_unprivileged([&] {
    if (access(path("locked").c_str(), W_OK) == 0) return kWritable;  // permissions do not bind this user
    try {
      save(net, path("locked") / "net.dtr");  // fails making the temporary file, before the runtime is touched
      std::printf("saved\n");
      return 1;
    } catch (const IoError& e) {
      std::printf("%s\n", e.what());
      return 0;
    }
  });
  if (!r) GTEST_SKIP() << "running as root and cannot become uid 65534: a read-only folder is writable to root";
  if (WIFEXITED(r->status) && WEXITSTATUS(r->status) == kWritable) GTEST_SKIP() << "the folder is writable anyway";
  EXPECT_EQ(r->status, 0) << r->output;
  EXPECT_NE(r->output.find("save_state_dict: cannot write '" + (path("locked") / "net.dtr").string() + "'"),
            std::string::npos)
      << r->output;
  EXPECT_NE(r->output.find(std::strerror(EACCES)), std::string::npos) << r->output;
  EXPECT_TRUE(fs::is_empty(path("locked")));
}

// A file-size limit makes writes fail midway (EFBIG) as a full disk would, for this process alone.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &previous_);
    previous_handler_ = std::signal(SIGXFSZ, SIG_IGN);  // the write fails instead of killing the process
    rlimit limit = previous_;
    limit.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &limit);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &previous_);
    std::signal(SIGXFSZ, previous_handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit previous_{};
  void (*previous_handler_)(int) = nullptr;
};

TEST_F(StateDictFile, AFailedSaveLeavesTheExistingFileAsItWasAndNoTemporaryFile) {
  Net net(rt_, 1);
  save(net, path("model.dtr"));
  const std::string before = read_file(path("model.dtr"));
  const StateDict big = {{"big", rt_.constant(TensorMeta{{100000}}, std::vector<float>(100000, 0.25f))}};
  {
    const FileSizeLimit limit(4096);
    expect_error<IoError>([&] { save_state_dict(big, path("model.dtr")); },
                          {"save_state_dict: writing '" + path("model.dtr").string() + "' failed", std::strerror(EFBIG),
                           "is left as it was"});
  }
  EXPECT_TRUE(read_file(path("model.dtr")) == before);
  EXPECT_EQ(listing(), std::vector<std::string>{"model.dtr"});

  // A save that succeeds replaces the file whole.
  save_state_dict(big, path("model.dtr"));
  expect_same_bits(big, read_state_dict(rt_, path("model.dtr")));
  EXPECT_EQ(listing(), std::vector<std::string>{"model.dtr"});
}

}  // namespace
}  // namespace dtr::nn::test
