// Programs that end while dtr still has something to say: a log line, a stats file, a tensor outliving the
// default runtime, the C API from an atexit handler. Run in fresh processes (dtr-exit-probe): the program's own
// output, dtr's message and the program's exit status must all arrive. Before, each of these crashed at exit
// (the logger, a function-local static, died first) and the buffered output was lost.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <initializer_list>
#include <string>
#include <string_view>

#include "test_helpers.h"

namespace dtr::test {
namespace {

// Runs the probe in `mode` under `environment` and expects a normal exit with the program's status (3), the
// program's own line, and every one of `parts` in its output (stdout and stderr).
void expect_clean_exit(const std::string& environment, const std::string& mode,
                       std::initializer_list<std::string_view> parts) {
  const Outcome r = run_command("env " + environment + " " + DTR_EXIT_PROBE_PATH + " " + mode);
  ASSERT_TRUE(WIFEXITED(r.status)) << "did not exit normally (status " << r.status << ")\n" << r.output;
  EXPECT_EQ(WEXITSTATUS(r.status), 3) << r.output;
  EXPECT_NE(r.output.find("program output"), std::string::npos) << "the program's output was lost\n" << r.output;
  for (const std::string_view part : parts) {
    EXPECT_NE(r.output.find(part), std::string::npos) << "missing: " << part << "\n" << r.output;
  }
}

TEST(Exit, AnUnwritableStatsPathIsReportedAtExit) {
  expect_clean_exit("DTR_DEVICE=cpu DTR_STATS=/nonexistent-dir/stats.json", "stats-unwritable",
                    {"DTR_STATS: cannot write '/nonexistent-dir/stats.json': No such file or directory"});
}

TEST(Exit, StatsOnAFullDiskAreReportedAtExit) {
  expect_clean_exit("DTR_DEVICE=cpu DTR_STATS=/dev/full", "stats-unwritable",
                    {"DTR_STATS: writing '/dev/full' failed: No space left on device"});
}

TEST(Exit, ATensorStillReferencedAtExitIsWarnedAboutAndDiesQuietly) {
  expect_clean_exit("DTR_DEVICE=cpu", "tensor-at-exit",
                    {"runtime destroyed while 1 storage(s) are still referenced by tensors"});
}

TEST(Exit, TheCApiWorksFromAnAtexitHandlerAndLogsThere) {
  expect_clean_exit("DTR_DEVICE=cpu DTR_LOG_LEVEL=debug", "c-api-atexit",
                    {"atexit malloc ok", "atexit error: caching(host): free(0x10): the pointer was not allocated",
                     "[dtr D] host: reserved a large segment",  // logged from the handler
                     // At debug level errors also name where they were raised, relative to the project.
                     "raised at allocator/caching_allocator.cpp:"});
}

TEST(Exit, TheDefaultRuntimeWorksFromAnAtexitHandler) {
  expect_clean_exit("DTR_DEVICE=cpu", "runtime-at-exit", {"atexit sum 10"});
}

}  // namespace
}  // namespace dtr::test
