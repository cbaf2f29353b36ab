// Programs that end while dtr still has something to say: a log line, a stats file, a tensor outliving the
// default runtime, the C API from an atexit handler. Run in fresh processes (dtr-exit-probe): the program's own
// output, dtr's message and the program's exit status must all arrive. Before, each of these crashed at exit
// (the logger, a function-local static, died first) and the buffered output was lost.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <string>

#include "test_helpers.h"

namespace dtr::test {
namespace {

struct Probe {
  int exit_status = -1;  // -1: did not exit normally (a crash)
  std::string output;
};

Probe probe(const std::string& environment, const std::string& mode) {
  const Outcome r = run_command("env " + environment + " " + DTR_EXIT_PROBE_PATH + " " + mode);
  return Probe{WIFEXITED(r.status) ? WEXITSTATUS(r.status) : -1, r.output};
}

void expect_contains(const std::string& output, const std::string& part) {
  EXPECT_NE(output.find(part), std::string::npos) << "missing: " << part << "\n" << output;
}

TEST(Exit, AnUnwritableStatsPathIsReportedAtExit) {
  const Probe p = probe("DTR_DEVICE=cpu DTR_STATS=/nonexistent-dir/stats.json", "stats-unwritable");
  EXPECT_EQ(p.exit_status, 3);
  expect_contains(p.output, "program output");
  expect_contains(p.output, "DTR_STATS: cannot write '/nonexistent-dir/stats.json': No such file or directory");
}

TEST(Exit, StatsOnAFullDiskAreReportedAtExit) {
  const Probe p = probe("DTR_DEVICE=cpu DTR_STATS=/dev/full", "stats-unwritable");
  EXPECT_EQ(p.exit_status, 3);
  expect_contains(p.output, "program output");
  expect_contains(p.output, "DTR_STATS: writing '/dev/full' failed: No space left on device");
}

TEST(Exit, ATensorStillReferencedAtExitIsWarnedAboutAndDiesQuietly) {
  const Probe p = probe("DTR_DEVICE=cpu", "tensor-at-exit");
  EXPECT_EQ(p.exit_status, 3);
  expect_contains(p.output, "program output");
  expect_contains(p.output, "runtime destroyed while 1 storage(s) are still referenced by tensors");
}

TEST(Exit, TheCApiWorksFromAnAtexitHandlerAndLogsThere) {
  const Probe p = probe("DTR_DEVICE=cpu DTR_LOG_LEVEL=debug", "c-api-atexit");
  EXPECT_EQ(p.exit_status, 3);
  expect_contains(p.output, "program output");
  expect_contains(p.output, "atexit malloc ok");
  expect_contains(p.output, "atexit error: caching(host): free(0x10): the pointer was not allocated");
  expect_contains(p.output, "[dtr D] host: reserved a large segment");  // logged from the handler
  // At debug level errors also name where they were raised, relative to the project.
  expect_contains(p.output, "raised at allocator/caching_allocator.cpp:");
}

TEST(Exit, TheDefaultRuntimeWorksFromAnAtexitHandler) {
  const Probe p = probe("DTR_DEVICE=cpu", "runtime-at-exit");
  EXPECT_EQ(p.exit_status, 3);
  expect_contains(p.output, "program output");
  expect_contains(p.output, "atexit sum 10");
}

}  // namespace
}  // namespace dtr::test
