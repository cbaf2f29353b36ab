// State dicts (include/dtr/nn/state_dict.h) and their file format (docs/state-dict.md).
#include "dtr/nn/state_dict.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <array>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "dtr/check.h"

namespace dtr::nn {

namespace {

namespace fs = std::filesystem;
using dtr::detail::concat;

// Fields and values are written as the host holds them: every machine dtr builds for is little-endian.
static_assert(std::endian::native == std::endian::little,
              "the state-dict format is little-endian: this host needs byte swapping in nn/state_dict.cpp");

constexpr std::array<char, 8> kMagic = {'D', 'T', 'R', 'S', 'T', 'A', 'T', 'E'};
constexpr std::uint32_t kVersion = 1;
constexpr std::size_t kMaxNameBytes = 4096;
constexpr std::size_t kMaxRank = 8;
// The smallest entry: name length (4), a 1-byte name, dtype code (1), rank (1), byte count (8).
constexpr std::uint64_t kMinEntryBytes = 15;
constexpr std::uint64_t kChecksumBytes = 4;

// The format's own codes, not DType's values: reordering the enum must not change what files mean.
std::uint8_t dtype_code(DType dtype) {
  switch (dtype) {
    case DType::float32:
      return 1;
    case DType::float64:
      return 2;
    case DType::int64:
      return 3;
    case DType::uint8:
      break;
  }
  return 0;
}

std::optional<DType> dtype_of_code(std::uint8_t code) {
  for (const DType dtype : {DType::float32, DType::float64, DType::int64}) {
    if (dtype_code(dtype) == code) return dtype;
  }
  return std::nullopt;
}

std::string describe(const TensorMeta& meta) { return concat(to_string(meta.dtype), " ", to_string(meta.shape)); }
// A name read from a file as an error message can show it: a corrupt name may hold control bytes (a NUL would
// cut what() short), and may be 4096 bytes long.
std::string printable(std::string_view name) {
  std::string out;
  for (const char c : name.substr(0, 200)) {
    const auto byte = static_cast<unsigned char>(c);
    out += byte < 0x20 || byte == 0x7f ? fmt::format("\\x{:02x}", byte) : std::string(1, c);
  }
  return name.size() > 200 ? out + "..." : out;
}

std::string quoted(const fs::path& path) { return concat("'", path.string(), "'"); }
const char* reason(int error) {
  return error != 0 ? std::strerror(error) : "an I/O error";
}  // NOLINT(concurrency-mt-unsafe)

struct CloseFile {
  void operator()(std::FILE* file) const { std::fclose(file); }
};
using File = std::unique_ptr<std::FILE, CloseFile>;

// ---- writing ----

// The file being saved: a temporary beside the target (same folder, so the rename cannot cross file systems),
// renamed over the target by commit(); removed when destroyed uncommitted, so a failed save leaves no half file.
class PendingFile {
 public:
  explicit PendingFile(fs::path target) : target_(std::move(target)) {
    std::error_code ignored;
    DTR_CHECK(!fs::is_directory(target_, ignored), IoError, "save_state_dict: ", quoted(target_),
              " is a directory, not a file (", std::strerror(EISDIR), ")");  // NOLINT(concurrency-mt-unsafe)
    DTR_CHECK(target_.has_filename(), IoError, "save_state_dict: ", quoted(target_), " names no file");
    static std::atomic<std::uint64_t> counter{0};
    for (int attempt = 0;; ++attempt) {
      path_ = target_.parent_path() / concat(".", target_.filename().string(), ".tmp-", getpid(), "-", counter++);
      file_.reset(std::fopen(path_.c_str(), "wbx"));  // x: never truncate a file someone else is writing
      if (file_ != nullptr) break;
      const int error = errno;
      DTR_CHECK(error == EEXIST && attempt < 100, IoError, "save_state_dict: cannot write ", quoted(target_),
                ": creating the temporary file ", quoted(path_), " failed: ", reason(error));
    }
  }
  ~PendingFile() {
    file_.reset();
    if (!committed_) {
      std::error_code ignored;
      fs::remove(path_, ignored);
    }
  }
  PendingFile(const PendingFile&) = delete;
  PendingFile& operator=(const PendingFile&) = delete;

  void write(const void* data, std::size_t bytes) {
    // An empty tensor's buffer may be null, which fwrite may not take, and which zlib's crc32 answers with
    // its initial value, dropping everything summed so far.
    if (bytes == 0) return;
    crc_ = crc32_z(crc_, static_cast<const Bytef*>(data), bytes);
    if (std::fwrite(data, 1, bytes, file_.get()) != bytes) fail(errno);
  }
  template <typename T>
  void write_value(T value) {
    write(&value, sizeof value);
  }

  // The checksum, then the file made durable before the rename: after a crash the target holds the old
  // file or the new one, never an empty one.
  void commit() {
    const auto checksum = static_cast<std::uint32_t>(crc_);
    if (std::fwrite(&checksum, 1, sizeof checksum, file_.get()) != sizeof checksum) fail(errno);
    if (std::fflush(file_.get()) != 0) fail(errno);
    if (fsync(fileno(file_.get())) != 0) fail(errno);
    if (std::fclose(file_.release()) != 0) fail(errno);
    if (std::rename(path_.c_str(), target_.c_str()) != 0) fail(errno);
    committed_ = true;
  }

 private:
  [[noreturn]] void fail(int error) const {
    DTR_THROW(IoError, "save_state_dict: writing ", quoted(target_), " failed (through the temporary file ",
              quoted(path_), "): ", reason(error), "; ", quoted(target_), " is left as it was");
  }

  fs::path target_;
  fs::path path_;
  File file_;
  uLong crc_ = crc32_z(0, Z_NULL, 0);
  bool committed_ = false;
};

// Everything save_state_dict refuses, found before a file is made.
void check_savable(const StateDict& dict) {
  std::unordered_set<std::string_view> names;
  for (const auto& [name, tensor] : dict) {
    DTR_CHECK(!name.empty(), InvalidArgument, "save_state_dict: an entry has an empty name");
    DTR_CHECK(name.size() <= kMaxNameBytes, InvalidArgument, "save_state_dict: the name '", name.substr(0, 64),
              "...' is ", name.size(), " bytes long, over the format's limit of ", kMaxNameBytes);
    DTR_CHECK(names.insert(name).second, InvalidArgument, "save_state_dict: '", name, "' appears twice");
    DTR_CHECK(tensor.defined(), InvalidArgument, "save_state_dict: '", name, "' is undefined");
    DTR_CHECK(dtype_code(tensor.meta().dtype) != 0, InvalidArgument, "save_state_dict: '", name, "' is ",
              to_string(tensor.meta().dtype), "; the format holds float32, float64 and int64");
    DTR_CHECK(tensor.shape().size() <= kMaxRank, InvalidArgument, "save_state_dict: '", name, "' has rank ",
              tensor.shape().size(), ", over the format's limit of ", kMaxRank);
  }
}

template <typename T>
void write_values(PendingFile& out, const Tensor& tensor) {
  const std::vector<T> values = tensor.to_host_as<T>();
  out.write(values.data(), values.size() * sizeof(T));
}

// ---- reading ----

// A state-dict file read front to back: every read is checked against the file's length first, and
// everything read goes into the running checksum.
class FileReader {
 public:
  explicit FileReader(fs::path path) : path_(std::move(path)) {
    // Before the open, which would wait on a FIFO for a writer.
    std::error_code ignored;
    DTR_CHECK(!fs::is_other(fs::status(path_, ignored)), IoError, "read_state_dict: ", quoted(path_),
              " is not a regular file");
    file_.reset(std::fopen(path_.c_str(), "rb"));
    if (file_ == nullptr) {
      const int error = errno;
      DTR_THROW(IoError, "read_state_dict: cannot open ", quoted(path_), ": ", reason(error));
    }
    struct stat info {};
    if (fstat(fileno(file_.get()), &info) != 0) {
      const int error = errno;
      DTR_THROW(IoError, "read_state_dict: cannot read ", quoted(path_), ": ", reason(error));
    }
    // A directory opens on Linux and fails only at the first read: say what it is.
    DTR_CHECK(!S_ISDIR(info.st_mode), IoError, "read_state_dict: ", quoted(path_),
              " is a directory, not a state dict (", std::strerror(EISDIR), ")");  // NOLINT(concurrency-mt-unsafe)
    DTR_CHECK(S_ISREG(info.st_mode), IoError, "read_state_dict: ", quoted(path_),
              " is not a regular file (its length is needed to check the sizes it holds)");
    size_ = static_cast<std::uint64_t>(info.st_size);
  }

  std::uint64_t offset() const { return offset_; }
  std::uint64_t left() const { return size_ - offset_; }
  uLong crc() const { return crc_; }

  // Throws unless `bytes` more are there: called before allocating room for them.
  void require(std::uint64_t bytes, std::string_view what) const {
    if (bytes > left()) {
      fail(offset_, concat("truncated: ", what, " needs ", bytes, " bytes, ", left(), " are left (the file is ", size_,
                           " bytes long)"));
    }
  }

  void read(void* out, std::uint64_t bytes, std::string_view what) {
    require(bytes, what);
    if (bytes == 0) return;  // as PendingFile::write
    if (std::fread(out, 1, bytes, file_.get()) != bytes) {
      const int error = errno;
      fail(offset_, std::ferror(file_.get()) != 0
                        ? concat("reading ", what, " failed: ", reason(error))
                        : concat("truncated: the file ended while reading ", what, " (did it shrink meanwhile?)"));
    }
    crc_ = crc32_z(crc_, static_cast<const Bytef*>(out), bytes);
    offset_ += bytes;
  }
  template <typename T>
  T read_value(std::string_view what) {
    T value{};
    read(&value, sizeof value, what);
    return value;
  }

  [[noreturn]] void fail(std::uint64_t at, const std::string& problem) const {
    DTR_THROW(IoError, "read_state_dict: ", quoted(path_), ": ", problem, " (at byte offset ", at, ")");
  }

 private:
  fs::path path_;
  File file_;
  std::uint64_t size_ = 0;
  std::uint64_t offset_ = 0;
  uLong crc_ = crc32_z(0, Z_NULL, 0);
};

template <typename T>
Tensor read_values(FileReader& in, Runtime& runtime, const TensorMeta& meta, const std::string& what) {
  std::vector<T> values(static_cast<std::size_t>(meta.numel()));
  in.read(values.data(), values.size() * sizeof(T), what);
  return runtime.constant(meta, std::span<const T>(values));
}

void read_header(FileReader& in) {
  std::array<char, kMagic.size()> magic{};
  in.read(magic.data(), magic.size(), "the magic bytes");
  if (magic != kMagic) {
    in.fail(0,
            fmt::format("not a dtr state dict: it starts with the bytes {:02x}, not \"DTRSTATE\"",
                        fmt::join(std::span(reinterpret_cast<const std::uint8_t*>(magic.data()), magic.size()), " ")));
  }
  const std::uint64_t version_at = in.offset();
  const auto version = in.read_value<std::uint32_t>("the format version");
  if (version != kVersion) {
    in.fail(version_at, concat("format version ", version, " is not supported (this build reads version ", kVersion,
                               "; a newer dtr may read it)"));
  }
}

// One entry, every field checked before the next is trusted; `seen` maps the names read so far to their entry.
std::pair<std::string, Tensor> read_entry(FileReader& in, Runtime& runtime, const std::string& entry,
                                          std::unordered_map<std::string, std::string>& seen) {
  const std::uint64_t start = in.offset();
  const auto length = in.read_value<std::uint32_t>(entry + "'s name length");
  if (length == 0 || length > kMaxNameBytes) {
    in.fail(start, concat(entry, ": a name length of ", length, " bytes, not within 1 to ", kMaxNameBytes));
  }
  std::string name(length, '\0');
  in.read(name.data(), length, entry + "'s name");
  const std::string label = concat(entry, " ('", printable(name), "')");
  const auto [previous, fresh] = seen.emplace(name, entry);
  if (!fresh) in.fail(start + 4, concat(label, ": the name of ", previous->second, " too"));

  const std::uint64_t code_at = in.offset();
  const auto code = in.read_value<std::uint8_t>(label + "'s dtype code");
  const std::optional<DType> dtype = dtype_of_code(code);
  if (!dtype) {
    in.fail(code_at, concat(label, ": dtype code ", static_cast<int>(code),
                            " is not one of 1 (float32), 2 (float64), 3 (int64)"));
  }
  const std::uint64_t rank_at = in.offset();
  const auto rank = in.read_value<std::uint8_t>(label + "'s rank");
  if (rank > kMaxRank) {
    in.fail(rank_at, concat(label, ": rank ", static_cast<int>(rank), " is over the limit of ", kMaxRank));
  }
  TensorMeta meta{{}, *dtype};
  const std::uint64_t dims_at = in.offset();
  for (int i = 0; i < rank; ++i) {
    const std::uint64_t at = in.offset();
    const auto dim = in.read_value<std::int64_t>(label + "'s dims");
    if (dim < 0) in.fail(at, concat(label, ": dimension ", i, " is ", dim));
    meta.shape.push_back(dim);
  }
  std::uint64_t expected = 0;
  try {
    expected = meta.nbytes();
  } catch (const ShapeError&) {
    in.fail(dims_at, concat(label, ": ", describe(meta), " holds more bytes than 64 bits count"));
  }
  const std::uint64_t bytes_at = in.offset();
  const auto bytes = in.read_value<std::uint64_t>(label + "'s byte count");
  if (bytes != expected) {
    in.fail(bytes_at, concat(label, ": a byte count of ", bytes, " for ", describe(meta), ", which takes ", expected));
  }
  const std::string what = label + "'s data";
  in.require(bytes, what);  // before the values' vector is allocated
  switch (meta.dtype) {
    case DType::float32:
      return {std::move(name), read_values<float>(in, runtime, meta, what)};
    case DType::float64:
      return {std::move(name), read_values<double>(in, runtime, meta, what)};
    default:
      return {std::move(name), read_values<std::int64_t>(in, runtime, meta, what)};
  }
}

// ---- loading ----

// `value` as a new constant of `runtime` (which may be another runtime than its own), so the module and the
// dict never share a value: an in-place update of one (Runtime::assign) would otherwise change the other.
Tensor copy_constant(Runtime& runtime, const Tensor& value, const std::string& key) {
  const TensorMeta& meta = value.meta();
  switch (meta.dtype) {
    case DType::float32:
      return runtime.constant(meta, value.to_host_as<float>());
    case DType::float64:
      return runtime.constant(meta, value.to_host_as<double>());
    case DType::int64:
      return runtime.constant(meta, value.to_host_as<std::int64_t>());
    case DType::uint8:
      break;
  }
  DTR_THROW(InvalidArgument, "load_state_dict: '", key, "' is uint8: constants hold float32, float64 or int64");
}

std::string join(const std::vector<std::string>& items) { return fmt::format("{}", fmt::join(items, ", ")); }

// load_state_dict; the values of `owned` (the runtime load() read the file into) are the dict's alone and
// are adopted, not copied.
void load_entries(Module& module, const StateDict& dict, bool strict, const Runtime* owned) {
  std::unordered_map<std::string_view, const Tensor*> by_name;
  for (const auto& [name, tensor] : dict) {
    DTR_CHECK(by_name.emplace(name, &tensor).second, InvalidArgument, "load_state_dict: '", name,
              "' appears twice in the state dict");
    DTR_CHECK(tensor.defined(), InvalidArgument, "load_state_dict: '", name, "' is undefined in the state dict");
  }
  std::vector<std::pair<std::string, Variable>> targets = module.named_parameters();
  for (auto& buffer : module.named_buffers()) targets.push_back(std::move(buffer));

  std::vector<std::string> missing;
  std::vector<std::string> mismatched;
  std::unordered_set<std::string_view> known;
  std::vector<std::pair<const std::pair<std::string, Variable>*, const Tensor*>> matched;
  for (const auto& target : targets) {
    const auto& [name, variable] = target;
    known.insert(name);
    const auto found = by_name.find(name);
    if (found == by_name.end()) {
      missing.push_back(name);
    } else if (found->second->meta() != variable.meta()) {
      mismatched.push_back(concat("'", name, "' is ", describe(variable.meta()), " in the module, ",
                                  describe(found->second->meta()), " in the state dict"));
    } else {
      matched.emplace_back(&target, found->second);
    }
  }
  std::vector<std::string> unexpected;
  for (const auto& [name, tensor] : dict) {
    if (!known.contains(name)) unexpected.push_back(name);
  }
  std::string key_problems;
  if (strict && !missing.empty()) key_problems += concat("; missing keys: ", join(missing));
  if (strict && !unexpected.empty()) key_problems += concat("; unexpected keys: ", join(unexpected));
  DTR_CHECK(mismatched.empty(), ShapeError, "load_state_dict: ", fmt::format("{}", fmt::join(mismatched, "; ")),
            key_problems, "; nothing was loaded");
  DTR_CHECK(key_problems.empty(), InvalidArgument, "load_state_dict: ", key_problems.substr(2),
            " (strict = false loads the keys both have); nothing was loaded");

  // Every value first (a copy can fail), then the rebinds, which cannot: a failed load changes nothing.
  std::vector<Tensor> values;
  for (const auto& [target, tensor] : matched) {
    Runtime& runtime = target->second.runtime();
    values.push_back(&runtime == owned ? *tensor : copy_constant(runtime, *tensor, target->first));
  }
  const NoGrad no_grad;  // a leaf that requires a gradient is rebound only outside autograd's sight
  for (std::size_t i = 0; i < matched.size(); ++i) {
    Variable variable = matched[i].first->second;  // a copy shares the variable's state
    variable.rebind(Variable(variable.runtime(), std::move(values[i])));
  }
}

}  // namespace

StateDict state_dict(const Module& module) {
  StateDict dict;
  for (auto& [name, parameter] : module.named_parameters()) dict.emplace_back(std::move(name), parameter.data());
  for (auto& [name, buffer] : module.named_buffers()) dict.emplace_back(std::move(name), buffer.data());
  return dict;
}

void save_state_dict(const StateDict& dict, const fs::path& path) {
  check_savable(dict);
  PendingFile out(path);
  out.write(kMagic.data(), kMagic.size());
  out.write_value(kVersion);
  out.write_value(static_cast<std::uint64_t>(dict.size()));
  for (const auto& [name, tensor] : dict) {
    const TensorMeta& meta = tensor.meta();
    out.write_value(static_cast<std::uint32_t>(name.size()));
    out.write(name.data(), name.size());
    out.write_value(dtype_code(meta.dtype));
    out.write_value(static_cast<std::uint8_t>(meta.shape.size()));
    for (const std::int64_t dim : meta.shape) out.write_value(dim);
    out.write_value(static_cast<std::uint64_t>(meta.nbytes()));
    switch (meta.dtype) {
      case DType::float32:
        write_values<float>(out, tensor);
        break;
      case DType::float64:
        write_values<double>(out, tensor);
        break;
      default:
        write_values<std::int64_t>(out, tensor);
        break;
    }
  }
  out.commit();
}

StateDict read_state_dict(Runtime& runtime, const fs::path& path) {
  FileReader in(path);
  read_header(in);
  const std::uint64_t count_at = in.offset();
  const auto count = in.read_value<std::uint64_t>("the entry count");
  const std::uint64_t room = in.left() > kChecksumBytes ? in.left() - kChecksumBytes : 0;
  if (count > room / kMinEntryBytes) {
    in.fail(count_at, concat("an entry count of ", count, " cannot fit in the ", room,
                             " bytes before the checksum (an entry takes at least ", kMinEntryBytes,
                             "): the file is truncated or corrupt"));
  }
  StateDict dict;
  std::unordered_map<std::string, std::string> seen;
  for (std::uint64_t i = 0; i < count; ++i) {
    dict.push_back(read_entry(in, runtime, concat("entry ", i + 1, " of ", count), seen));
  }
  if (in.left() > kChecksumBytes) {
    in.fail(in.offset(), concat("trailing bytes: ", in.left() - kChecksumBytes,
                                " after the last entry, where only the ", kChecksumBytes, "-byte checksum belongs"));
  }
  const uLong computed = in.crc();
  const std::uint64_t checksum_at = in.offset();
  const auto stored = in.read_value<std::uint32_t>("the checksum");
  if (stored != computed) {
    in.fail(checksum_at, fmt::format("checksum mismatch: the file says {:08x}, its contents give {:08x} (the file is "
                                     "corrupt)",
                                     stored, computed));
  }
  return dict;
}

void load_state_dict(Module& module, const StateDict& dict, bool strict) {
  load_entries(module, dict, strict, nullptr);
}

void save(const Module& module, const fs::path& path) { save_state_dict(state_dict(module), path); }

void load(Module& module, const fs::path& path, bool strict) {
  Runtime* runtime = nullptr;
  for (const auto& [name, parameter] : module.named_parameters()) {
    runtime = &parameter.runtime();
    break;
  }
  for (const auto& [name, buffer] : module.named_buffers()) {
    if (runtime == nullptr) runtime = &buffer.runtime();
  }
  if (runtime == nullptr) {
    Runtime scratch;  // the module has no variables: the file is still read, checked and its keys compared
    load_entries(module, read_state_dict(scratch, path), strict, &scratch);
    return;
  }
  load_entries(module, read_state_dict(*runtime, path), strict, runtime);
}

}  // namespace dtr::nn
