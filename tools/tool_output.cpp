// dtr's programs' output files (tools/tool_output.h).
#include "tool_output.h"

#include <fmt/format.h>

#include "dtr/check.h"
#include "dtr/error.h"

#include <array>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;  // posix_spawnp passes it on: gnuplot finds its fonts and terminals as usual

namespace dtr::tools {

namespace {

// A pipe whose ends are closed when it goes. Both ends are close-on-exec (the child gets only its dup2'd
// copies) and above 2, so that the child's dup2 onto 0 and 1 cannot clobber one another even when the program was
// started with a standard stream closed.
struct Pipe {
  int read = -1;
  int write = -1;
  Pipe() {
    std::array<int, 2> fds{};
    if (pipe2(fds.data(), O_CLOEXEC) != 0) {
      DTR_THROW(dtr::IoError, fmt::format("--plot: pipe: {}", std::strerror(errno)));
    }
    read = above_stdio(fds[0]);
    write = above_stdio(fds[1]);
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  ~Pipe() {
    close_read();
    close_write();
  }
  void close_read() { close_end(read); }
  void close_write() { close_end(write); }
  static void close_end(int& fd) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  static int above_stdio(int fd) {
    if (fd > 2) return fd;
    const int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    ::close(fd);
    return moved;
  }
};

// Feeds `script` to the child's stdin while collecting its stdout into `image`, both at once (neither side
// can fill a pipe and wait on the other). Returns an error, or "" once the child closed its stdout.
std::string exchange(Pipe& in, Pipe& out, const std::string& script, std::string& image) {
  if (in.write < 0 || out.read < 0) return "--plot: pipe: too many open files";
  fcntl(in.write, F_SETFL, O_NONBLOCK);
  std::size_t sent = 0;
  std::array<char, 65536> buffer{};
  while (out.read >= 0) {
    std::array<pollfd, 2> fds{pollfd{out.read, POLLIN, 0}, pollfd{in.write, POLLOUT, 0}};
    if (poll(fds.data(), in.write >= 0 ? 2 : 1, -1) < 0) {
      if (errno == EINTR) continue;
      return fmt::format("--plot: poll: {}", std::strerror(errno));
    }
    if (in.write >= 0 && fds[1].revents != 0) {
      const ssize_t n = ::write(in.write, script.data() + sent, script.size() - sent);
      if (n > 0) sent += static_cast<std::size_t>(n);
      // EPIPE: gnuplot stopped reading; its exit status says why.
      if ((n < 0 && errno != EAGAIN && errno != EINTR) || sent == script.size()) in.close_write();
    }
    if (fds[0].revents != 0) {
      const ssize_t n = ::read(out.read, buffer.data(), buffer.size());
      if (n > 0) {
        image.append(buffer.data(), static_cast<std::size_t>(n));
      } else if (n == 0) {
        out.close_read();
      } else if (errno != EINTR && errno != EAGAIN) {
        return fmt::format("--plot: reading gnuplot's output: {}", std::strerror(errno));
      }
    }
  }
  return "";
}

// Why a write to stdout first failed (0: it has not): ferror stays set, errno does not.
int stdout_errno = 0;

}  // namespace

void write_file(const std::string& option, const std::string& path, const std::string& contents) {
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) {
    DTR_THROW(dtr::IoError, fmt::format("{}: cannot open '{}' for writing: {}", option, path, std::strerror(errno)));
  }
  int error = 0;
  bool failed = std::fwrite(contents.data(), 1, contents.size(), file) != contents.size();
  if (failed) error = errno;
  if (std::fclose(file) != 0 && !failed) {
    failed = true;
    error = errno;
  }
  if (failed) {
    DTR_THROW(dtr::IoError, fmt::format("{}: writing '{}' failed: {}", option, path,
                                         error != 0 ? std::strerror(error) : "unknown error"));
  }
}

std::string gnuplot_quote(std::string_view text) {
  std::string quoted = "'";
  for (const char c : text) {
    if (c == '\'') {
      quoted += "''";
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      quoted += ' ';
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

std::string run_gnuplot(const std::string& script) {
  Pipe in;   // gnuplot's stdin
  Pipe out;  // gnuplot's stdout; its stderr stays the program's, where its messages belong
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in.read, STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out.write, STDOUT_FILENO);
  std::array<char*, 2> argv{const_cast<char*>("gnuplot"), nullptr};  // NOLINT: posix_spawnp's signature
  pid_t pid = 0;
  const int spawn_error = posix_spawnp(&pid, "gnuplot", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawn_error == ENOENT) {
    DTR_THROW(dtr::IoError, "--plot: gnuplot not found on PATH (scripts/setup.sh installs it)");
  }
  if (spawn_error != 0) {
    DTR_THROW(dtr::IoError, fmt::format("--plot: cannot run gnuplot: {}", std::strerror(spawn_error)));
  }
  in.close_read();
  out.close_write();
  // A gnuplot that exits early must make our writes fail with EPIPE, not kill the program (single-threaded here).
  struct sigaction ignore {};
  struct sigaction previous {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ignore, &previous);
  std::string image;
  const std::string error = exchange(in, out, script, image);
  in.close_write();
  out.close_read();
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  sigaction(SIGPIPE, &previous, nullptr);
  if (!error.empty()) DTR_THROW(dtr::IoError, error);
  if (WIFSIGNALED(status)) {
    DTR_THROW(dtr::IoError, fmt::format("--plot: gnuplot was killed by signal {}", WTERMSIG(status)));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    DTR_THROW(dtr::IoError, 
        fmt::format("--plot: gnuplot exited with status {} (its messages are above)", WEXITSTATUS(status)));
  }
  if (image.empty()) DTR_THROW(dtr::IoError, "--plot: gnuplot wrote no image");
  return image;
}

namespace {

// The extension of the path's last component, lower-cased, without its dot; "" when it has none.
std::string extension(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  const std::size_t dot = path.rfind('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash) || dot + 1 == path.size()) return "";
  std::string ext = path.substr(dot + 1);
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext;
}

}  // namespace

bool is_png(const std::string& path) { return extension(path) == "png"; }

std::string plot_path_error(const std::string& path) {
  const std::string ext = extension(path);
  if (ext.empty() || ext == "svg" || ext == "png") return "";
  return fmt::format("'{}': a plot is written as SVG (.svg, or no extension) or PNG (.png), not .{}", path, ext);
}

void flush_stdout() {
  if (std::fflush(stdout) != 0 && stdout_errno == 0) stdout_errno = errno;
}

std::string stdout_failure() {
  if (stdout_errno != 0) return std::strerror(stdout_errno);
  return std::ferror(stdout) != 0 ? "an earlier write failed" : "";
}

}  // namespace dtr::tools
