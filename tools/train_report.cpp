// dtr-train's output (tools/train_report.h).
#include "train_report.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "tool_output.h"

namespace dtr::tools {

namespace {

std::string duration(double seconds) {
  const auto s = static_cast<long long>(seconds + 0.5);
  return s >= 3600 ? fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60) : fmt::format("{}:{:02}", s / 60, s % 60);
}

std::string budget_text(const train::RowResult& row) {
  return row.strategy.budget ? format_bytes(*row.strategy.budget) : "none";
}

}  // namespace

std::string format_bytes(std::uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", value, units[unit]);
}

Progress::Progress(std::string title, std::int64_t total_steps, bool terminal, std::int64_t log_every)
    : title_(std::move(title)),
      total_(total_steps),
      terminal_(terminal),
      log_every_(std::max<std::int64_t>(1, log_every)),
      start_(std::chrono::steady_clock::now()) {}

void Progress::step(std::int64_t step, std::int64_t steps_per_epoch, const train::StepResult& result,
                    std::int64_t batch, const RuntimeStats& stats) {
  running_loss_ = step == 0 ? result.loss : 0.9 * running_loss_ + 0.1 * result.loss;
  running_correct_ += result.correct;
  running_seen_ += batch;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double eta = elapsed / static_cast<double>(step + 1) * static_cast<double>(total_ - step - 1);
  const std::string stats_text =
      fmt::format("loss {:.4f}  acc {:5.1f}%  {:.2f} s/step  peak {}  evictions {}  ETA {}", running_loss_,
                  100.0 * static_cast<double>(running_correct_) / static_cast<double>(running_seen_), result.seconds,
                  format_bytes(stats.peak_reserved_bytes), stats.evictions, duration(eta));
  const std::string where = fmt::format("epoch {} step {}/{}", result.epoch + 1, result.step_in_epoch + 1, steps_per_epoch);
  if (terminal_) {
    constexpr int kWidth = 20;
    const auto filled = static_cast<int>(kWidth * (step + 1) / std::max<std::int64_t>(1, total_));
    std::string bar(static_cast<std::size_t>(filled), '#');
    bar.resize(kWidth, '.');
    std::printf("\r\033[K%s [%s] %lld/%lld  %s  %s", title_.c_str(), bar.c_str(), static_cast<long long>(step + 1),
                static_cast<long long>(total_), where.c_str(), stats_text.c_str());
    open_line_ = true;
  } else if ((step + 1) % log_every_ == 0 || step + 1 == total_) {
    std::printf("%s: step %lld/%lld, %s, %s\n", title_.c_str(), static_cast<long long>(step + 1),
                static_cast<long long>(total_), where.c_str(), stats_text.c_str());
  }
  flush_stdout();
}

void Progress::finish() {
  if (open_line_) std::printf("\n");
  open_line_ = false;
  flush_stdout();
}

void print_compare_table(const std::vector<train::RowResult>& rows, const std::string& title) {
  std::printf("\n%s\n\n", title.c_str());
  std::printf("| strategy | budget | peak reserved | peak resident | evictions | remats | extra compute | search "
              "| step (median) | slowdown | final loss | test accuracy |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const train::RowResult& row : rows) {
    if (!row.completed) {
      // The table names the kind of failure ("out of memory", "thrashing"); the whole message follows it.
      const std::string kind = row.failure.substr(0, row.failure.find(':'));
      std::printf("| %s | %s | %s | %s | | | | | | | stopped after %zu %s: %s | |\n", row.strategy.name.c_str(),
                  budget_text(row).c_str(), format_bytes(row.stats.peak_reserved_bytes).c_str(),
                  format_bytes(row.stats.peak_resident_bytes).c_str(), row.losses.size(),
                  row.losses.size() == 1 ? "step" : "steps", kind.c_str());
      continue;
    }
    std::printf("| %s | %s | %s | %s | %llu | %llu | %.1f%% | %.2f%% | %.3f s | %.2fx | %.6f | %s |\n",
                row.strategy.name.c_str(), budget_text(row).c_str(), format_bytes(row.stats.peak_reserved_bytes).c_str(),
                format_bytes(row.stats.peak_resident_bytes).c_str(),
                static_cast<unsigned long long>(row.stats.evictions),
                static_cast<unsigned long long>(row.stats.rematerializations), 100 * row.extra_compute(),
                100 * row.search_share(), row.median_step_seconds(), row.slowdown(rows.front()),
                row.losses.empty() ? 0.0 : static_cast<double>(row.losses.back()),
                row.test_accuracy >= 0 ? fmt::format("{:.2f}%", 100 * row.test_accuracy).c_str() : "-");
  }
  bool recomputed = false;
  for (const train::RowResult& row : rows) {
    if (row.recomputed_by_op.empty()) continue;
    if (!recomputed) std::printf("\nWhat DTR recomputed most (share of the row's recomputation):\n");
    recomputed = true;
    std::printf("- %s: %s\n", row.strategy.name.c_str(), describe_recomputations(row.recomputed_by_op, 3).c_str());
  }
  for (const train::RowResult& row : rows) {
    if (!row.completed) std::printf("\n%s stopped: %s\n", row.strategy.name.c_str(), row.failure.c_str());
  }
  std::printf("\n%s\n", train::losses_agree(rows)
                            ? "Losses: bitwise equal in every completed row, at every step."
                            : "Losses: DIFFER between rows (a bug: every strategy must compute the same steps).");
  flush_stdout();
}

std::string compare_csv(const std::vector<train::RowResult>& rows) {
  std::ostringstream out;
  out << "strategy,budget_bytes,completed,steps,peak_reserved_bytes,peak_resident_bytes,evictions,"
         "rematerializations,extra_compute,search_share,median_step_s,slowdown,final_loss,test_accuracy\n";
  for (const train::RowResult& row : rows) {
    out << '"' << row.strategy.name << "\"," << (row.strategy.budget ? std::to_string(*row.strategy.budget) : "")
        << ',' << (row.completed ? "true" : "false") << ',' << row.losses.size() << ','
        << row.stats.peak_reserved_bytes << ',' << row.stats.peak_resident_bytes << ',' << row.stats.evictions << ','
        << row.stats.rematerializations << ',' << fmt::format("{:.6f}", row.extra_compute()) << ','
        << fmt::format("{:.6f}", row.search_share()) << ',' << fmt::format("{:.6f}", row.median_step_seconds())
        << ',' << fmt::format("{:.4f}", row.slowdown(rows.front())) << ','
        << (row.losses.empty() ? "" : fmt::format("{:.9g}", row.losses.back())) << ','
        << (row.test_accuracy >= 0 ? fmt::format("{:.4f}", row.test_accuracy) : "") << '\n';
  }
  return out.str();
}

std::string compare_plot_script(const std::vector<train::RowResult>& rows, const std::string& title, bool png) {
  std::ostringstream gp;
  const train::RowResult& first = rows.front();
  const auto mib = [](std::uint64_t b) { return static_cast<double>(b) / (1 << 20); };
  gp << "$dtr << EOD\n";
  for (const train::RowResult& row : rows) {
    if (row.completed && row.strategy.checkpoint_segments < 0) {
      gp << mib(row.stats.peak_reserved_bytes) << ' ' << row.slowdown(first) << ' '
         << gnuplot_quote(row.strategy.name) << '\n';
    }
  }
  gp << "EOD\n$static << EOD\n";
  for (const train::RowResult& row : rows) {
    if (row.completed && row.strategy.checkpoint_segments >= 0) {
      gp << mib(row.stats.peak_reserved_bytes) << ' ' << row.slowdown(first) << ' '
         << gnuplot_quote(row.strategy.name) << '\n';
    }
  }
  gp << "EOD\n"
     << (png ? "set terminal pngcairo size 1000,625 font 'sans,11'\n"
             : "set terminal svg size 800,500 dynamic enhanced font 'sans,12'\n")
     << "set output\n"
     << "set title " << gnuplot_quote(title) << " noenhanced\n"
     << "set xlabel 'peak memory reserved (MiB)'\nset ylabel 'step time / unbudgeted step time'\n"
     << "set grid\nset key top right noenhanced\nset offsets graph 0.05, graph 0.15, graph 0.1, graph 0.1\n"
     << "plot $dtr using 1:2 with points pt 7 ps 1.5 title 'unbudgeted and DTR', \\\n"
     << "     $dtr using 1:2:3 with labels offset 0,1 notitle, \\\n"
     << "     $static using 1:2 with points pt 5 ps 1.8 title 'static checkpointing', \\\n"
     << "     $static using 1:2:3 with labels offset 0,-1 notitle\n";
  return gp.str();
}

std::string compare_json(const std::vector<train::RowResult>& rows, const std::string& model, std::int64_t batch) {
  nlohmann::json out;
  out["model"] = model;
  out["batch"] = batch;
  out["losses_bitwise_equal"] = train::losses_agree(rows);
  for (const train::RowResult& row : rows) {
    nlohmann::json r;
    r["strategy"] = row.strategy.name;
    r["budget_bytes"] = row.strategy.budget ? nlohmann::json(*row.strategy.budget) : nlohmann::json(nullptr);
    r["checkpoint_segments"] = row.strategy.checkpoint_segments;
    r["completed"] = row.completed;
    if (!row.completed) r["failure"] = row.failure;
    r["losses"] = row.losses;
    r["step_seconds"] = row.step_seconds;
    r["paired_step_seconds"] = row.paired_step_seconds;
    r["median_step_seconds"] = row.median_step_seconds();
    r["slowdown"] = row.slowdown(rows.front());
    r["peak_reserved_bytes"] = row.stats.peak_reserved_bytes;
    r["peak_resident_bytes"] = row.stats.peak_resident_bytes;
    r["evictions"] = row.stats.evictions;
    r["rematerializations"] = row.stats.rematerializations;
    r["relocations"] = row.stats.relocations;
    r["forecast_hits"] = row.stats.forecast_hits;
    r["extra_compute"] = row.extra_compute();
    r["search_share"] = row.search_share();
    r["recomputed_by_op"] = nlohmann::json::array();
    for (const OpRecomputations& o : row.recomputed_by_op) {
      r["recomputed_by_op"].push_back({{"op", o.op}, {"runs", o.runs}, {"cost", o.cost}});
    }
    r["test_accuracy"] = row.test_accuracy >= 0 ? nlohmann::json(row.test_accuracy) : nlohmann::json(nullptr);
    out["rows"].push_back(r);
  }
  return out.dump();
}

void print_max_batch_table(const std::vector<train::MaxBatchResult>& results, std::uint64_t budget) {
  std::printf("\nThe largest batch that trains a step within %s:\n\n", format_bytes(budget).c_str());
  std::printf("| strategy | largest batch | its peak | vs unbudgeted | steps tried |\n|---|---:|---:|---:|---:|\n");
  const std::int64_t base = results.empty() ? 0 : results.front().batch;
  for (const train::MaxBatchResult& r : results) {
    std::printf("| %s | %lld | %s | %s | %lld |\n", r.strategy.c_str(), static_cast<long long>(r.batch),
                r.batch > 0 ? format_bytes(r.peak_bytes).c_str() : "-",
                base > 0 ? fmt::format("{:.2f}x", static_cast<double>(r.batch) / static_cast<double>(base)).c_str() : "-",
                static_cast<long long>(r.probes));
  }
  flush_stdout();
}

std::string max_batch_json(const std::vector<train::MaxBatchResult>& results, std::uint64_t budget) {
  nlohmann::json out;
  out["budget_bytes"] = budget;
  for (const train::MaxBatchResult& r : results) {
    out["strategies"].push_back(
        {{"strategy", r.strategy}, {"batch", r.batch}, {"peak_bytes", r.peak_bytes}, {"probes", r.probes}});
  }
  return out.dump();
}

}  // namespace dtr::tools
