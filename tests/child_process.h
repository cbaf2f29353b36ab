// Child processes for the tests of bad input: shell quoting, and running as a user without root's reads.
#pragma once

#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>

#include "test_helpers.h"

namespace dtr::test {

// `text` as one word for /bin/sh, whatever it holds: single-quoted, each ' written as '\''.
inline std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (const char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// Runs `body` in a child process, its stdout and stderr captured and its return value the exit status, as a
// user who cannot read a mode-000 file: the tests run as root, where permissions do not stop reads, so a
// root child first becomes uid/gid 65534. nullopt: privileges could not be dropped.
inline std::optional<Outcome> run_unprivileged(const std::function<int()>& body) {
  constexpr int kCannotDrop = 77;
  std::array<int, 2> fds{};
  if (pipe(fds.data()) != 0) return Outcome{-1, "pipe failed"};
  std::fflush(nullptr);  // nothing buffered twice
  const pid_t pid = fork();
  if (pid < 0) return Outcome{-1, "fork failed"};
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    if (geteuid() == 0 && (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0)) _exit(kCannotDrop);
    const int code = body();
    std::fflush(nullptr);
    _exit(code);
  }
  close(fds[1]);
  Outcome r;
  std::array<char, 4096> buffer{};
  for (ssize_t n; (n = read(fds[0], buffer.data(), buffer.size())) != 0;) {
    if (n > 0) r.output.append(buffer.data(), static_cast<std::size_t>(n));
    if (n < 0 && errno != EINTR) break;
  }
  close(fds[0]);
  while (waitpid(pid, &r.status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(r.status) && WEXITSTATUS(r.status) == kCannotDrop) return std::nullopt;
  return r;
}

}  // namespace dtr::test
