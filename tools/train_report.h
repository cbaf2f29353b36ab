// What dtr-train prints: the progress of a run (a bar redrawn in place on a terminal, log lines otherwise),
// the --compare table, its CSV and plot, --max-batch's table, and JSON for --json.
//
// Thread safety: one thread at a time (they write to stdout).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "dtr/train/compare.h"

namespace dtr::tools {

// "1.5 GiB", "312.0 MiB", "12.0 KiB", "17 B".
std::string format_bytes(std::uint64_t bytes);

// A run's progress: one line per report, redrawn in place when stdout is a terminal; otherwise a plain line
// every `log_every` steps and at the last one.
class Progress {
 public:
  Progress(std::string title, std::int64_t total_steps, bool terminal, std::int64_t log_every);
  // After step `step` (0-based) of the run. `correct` counts the batch's right answers.
  void step(std::int64_t step, std::int64_t steps_per_epoch, const train::StepResult& result, std::int64_t batch,
            const RuntimeStats& stats);
  // Ends the line (on a terminal) before something else is printed.
  void finish();

 private:
  std::string title_;
  std::int64_t total_;
  bool terminal_;
  std::int64_t log_every_;
  std::chrono::steady_clock::time_point start_;
  double running_loss_ = 0;
  std::int64_t running_correct_ = 0;
  std::int64_t running_seen_ = 0;
  bool open_line_ = false;
};

// The --compare table: one row per strategy, losses checked bitwise against the first row.
void print_compare_table(const std::vector<train::RowResult>& rows, const std::string& title);
std::string compare_csv(const std::vector<train::RowResult>& rows);
// Slowdown against memory (peak reserved), one point per row, static checkpointing marked apart.
std::string compare_plot_script(const std::vector<train::RowResult>& rows, const std::string& title, bool png);
std::string compare_json(const std::vector<train::RowResult>& rows, const std::string& model, std::int64_t batch);

void print_max_batch_table(const std::vector<train::MaxBatchResult>& results, std::uint64_t budget);
std::string max_batch_json(const std::vector<train::MaxBatchResult>& results, std::uint64_t budget);

}  // namespace dtr::tools
