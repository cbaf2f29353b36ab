// dtr-sim: replays a training trace through the real runtime over simulated memory, at budgets given as
// ratios of the unbudgeted peak, for one heuristic or all of them (docs/simulator.md).
//
//   dtr-sim TRACE [--ratio R | --sweep 0.1:1.0:0.05] [--heuristic H|all]... [--budget-mode bytes|device|both]
//           [--json] [--csv FILE] [--plot FILE.svg]
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "dtr/dtr.h"
#include "tool_output.h"

namespace {

using dtr::tools::flush_stdout;
using dtr::tools::gnuplot_quote;
using dtr::tools::run_gnuplot;
using dtr::tools::write_file;

struct Row {
  std::string heuristic;
  double ratio = 0;
  dtr::BudgetMode mode = dtr::BudgetMode::bytes;
  dtr::sim::ReplayResult result;
  std::uint64_t floor_bytes = 0;  // the trace's (sim::TraceSummary), under the replay's constants choice
};

// The accepted budget ratios, of the unbudgeted peak (docs/simulator.md).
constexpr double kMinRatio = 1e-9;
constexpr double kMaxRatio = 1e9;

// The one check of every budget, for --ratio and each --sweep ratio alike: the ratio is a finite number in
// [kMinRatio, kMaxRatio], and ratio x peak fits in 64 bits (casting a larger double to uint64 is UB).
std::uint64_t budget_bytes(const std::string& option, double ratio, std::uint64_t peak, dtr::BudgetMode mode) {
  if (!(ratio >= kMinRatio && ratio <= kMaxRatio)) {  // NaN fails both comparisons
    throw CLI::ValidationError(option, fmt::format("ratio {}: a budget ratio must be a finite number from 1e-9 to "
                                                   "1e9 (of the unbudgeted peak)",
                                                   ratio));
  }
  const double budget = ratio * static_cast<double>(peak);  // at most 1e9 x 2^64: finite
  if (!(budget < 0x1p64)) {
    throw CLI::ValidationError(option, fmt::format("ratio {} of the {} peak of {} bytes is {:.4g} bytes, more than 64 "
                                                   "bits hold (at most {}); use a smaller ratio",
                                                   ratio, dtr::to_string(mode), peak, budget,
                                                   std::numeric_limits<std::uint64_t>::max()));
  }
  return static_cast<std::uint64_t>(budget);
}

// "0.1:1.0:0.05": from, to (inclusive, up to rounding), step. budget_bytes decides which ratios are budgets.
std::vector<double> parse_sweep(const std::string& text) {
  double from = 0;
  double to = 0;
  double step = 0;
  char extra = 0;
  if (std::sscanf(text.c_str(), "%lf:%lf:%lf%c", &from, &to, &step, &extra) != 3 || !std::isfinite(from) ||
      !std::isfinite(to) || !(to >= from) || !(step > 0) || !std::isfinite(step)) {
    throw CLI::ValidationError("--sweep", "expected FROM:TO:STEP with FROM <= TO and STEP > 0, ratios from 1e-9 "
                                          "to 1e9, got '" + text + "'");
  }
  // FROM + i x STEP carries binary rounding error (0.1 + 2 x 0.1 is not 0.3): rounded to 6 digits below the
  // finer of FROM and STEP, and never coarser than 1e-6, so that small ratios are not rounded away.
  const double finest = from != 0 ? std::min(std::abs(from), step) : step;
  const int digits = std::clamp(6 - static_cast<int>(std::floor(std::log10(finest))), 6, 22);
  double scale = 1;
  for (int d = 0; d < digits; ++d) scale *= 10;  // exact up to 1e22
  std::vector<double> ratios;
  for (int i = 0;; ++i) {
    const double r = from + i * step;
    if (r > to + step * 1e-6) break;
    const double rounded = std::round(r * scale) / scale;
    ratios.push_back(std::isfinite(rounded) ? rounded : r);
    if (ratios.size() > 10000) throw CLI::ValidationError("--sweep", "more than 10000 ratios");
  }
  return ratios;
}

std::string cell(const Row& row) {
  if (!row.result.feasible) return "OOM";
  if (row.result.thrashed) return "thrash";
  return fmt::format("{:.3f}", row.result.overhead());
}

nlohmann::json to_json(const Row& row) {
  const auto& r = row.result;
  nlohmann::json j{{"heuristic", row.heuristic},
                   {"ratio", row.ratio},
                   {"budget_bytes", r.budget_bytes},
                   {"budget_mode", dtr::to_string(row.mode)},
                   {"feasible", r.feasible},
                   {"thrashed", r.thrashed},
                   {"overhead", r.overhead()},
                   {"base_compute_ns", r.base_compute_ns},
                   {"remat_compute_ns", r.remat_compute_ns},
                   {"evictions", r.evictions},
                   {"rematerializations", r.rematerializations},
                   {"peak_bytes", row.mode == dtr::BudgetMode::bytes ? r.peak_resident_bytes : r.peak_reserved_bytes},
                   {"floor_bytes", row.floor_bytes}};
  if (!r.feasible) j["failure"] = r.failure;  // why it did not fit: the op, the bytes, what was resident
  return j;
}

// Bytes for a table column: MiB below 10 GiB, else GiB.
std::string compact_bytes(std::uint64_t bytes) {
  const double mib = static_cast<double>(bytes) / (1024.0 * 1024.0);
  return mib < 10240 ? fmt::format("{:.1f} MiB", mib) : fmt::format("{:.2f} GiB", mib / 1024.0);
}

// At the peak, the share of the reserved segments that held no tensor: what the caching allocator cost.
double fragmentation(const dtr::sim::ReplayResult& r) {
  if (r.peak_reserved_bytes == 0) return 0;
  return 1.0 - static_cast<double>(r.peak_resident_bytes) / static_cast<double>(r.peak_reserved_bytes);
}

void print_table(const std::vector<Row>& rows, const std::string& heuristic, dtr::BudgetMode mode) {
  std::printf("\n%s, %s budget\n", heuristic.c_str(), dtr::to_string(mode));
  std::printf("%6s %12s %8s %9s %9s %7s %13s %13s %6s\n", "ratio", "budget", "feasible", "overhead", "evictions",
              "remats", "peak resident", "peak reserved", "frag");
  const Row* oom = nullptr;  // the largest ratio that ran out of memory: its failure goes under the table
  for (const Row& row : rows) {
    if (row.heuristic != heuristic || row.mode != mode) continue;
    const auto& r = row.result;
    if (!r.feasible && (oom == nullptr || row.ratio > oom->ratio)) oom = &row;
    // Ratios below 0.001 (down to 1e-9) in exponent form: three decimals would print them all as 0.000.
    const std::string ratio = row.ratio >= 1e-3 ? fmt::format("{:6.3f}", row.ratio) : fmt::format("{:6.1e}", row.ratio);
    std::printf("%s %12s %8s %9s %9llu %7llu %13s %13s %5.1f%%\n", ratio.c_str(), compact_bytes(r.budget_bytes).c_str(),
                r.feasible ? (r.thrashed ? "thrash" : "yes") : "OOM", cell(row).c_str(),
                static_cast<unsigned long long>(r.evictions), static_cast<unsigned long long>(r.rematerializations),
                compact_bytes(r.peak_resident_bytes).c_str(), compact_bytes(r.peak_reserved_bytes).c_str(),
                100.0 * fragmentation(r));
  }
  if (oom != nullptr) std::printf("out of memory at %g: %s\n", oom->ratio, oom->result.failure.c_str());
}

void write_csv(const std::string& path, const std::vector<Row>& rows) {
  std::ostringstream out;
  out << "heuristic,ratio,budget_bytes,budget_mode,feasible,thrashed,overhead,base_compute_ns,remat_compute_ns,"
         "evictions,rematerializations,peak_bytes,floor_bytes\n";
  for (const Row& row : rows) {
    const nlohmann::json j = to_json(row);
    out << row.heuristic << ',' << row.ratio << ',' << j["budget_bytes"] << ',' << dtr::to_string(row.mode) << ','
        << (row.result.feasible ? "true" : "false") << ',' << (row.result.thrashed ? "true" : "false") << ','
        << fmt::format("{:.6f}", row.result.overhead()) << ',' << fmt::format("{:.0f}", row.result.base_compute_ns)
        << ',' << fmt::format("{:.0f}", row.result.remat_compute_ns) << ',' << row.result.evictions << ','
        << row.result.rematerializations << ',' << j["peak_bytes"] << ',' << row.floor_bytes << '\n';
  }
  write_file("--csv", path, out.str());
}

// Overhead against budget ratio, one line per heuristic (and budget mode): Fig. 2 of the DTR paper. OOMs
// and thrashes leave gaps in a line: it shows where the heuristic fits. The data are inline datablocks and
// the image goes to gnuplot's stdout, so that no path appears in the script.
std::string plot_script(bool png, const std::string& title, const std::vector<Row>& rows,
                        const std::vector<std::string>& heuristics, const std::vector<dtr::BudgetMode>& modes) {
  std::ostringstream gp;
  std::string plot = "plot ";
  std::size_t index = 0;
  for (dtr::BudgetMode mode : modes) {
    for (const std::string& h : heuristics) {
      // One datablock per line: an all-gap line cannot shift the others, as `index` in one block would.
      gp << "$s" << index << " << EOD\n";
      for (const Row& row : rows) {
        if (row.heuristic != h || row.mode != mode) continue;
        if (row.result.feasible && !row.result.thrashed) {
          gp << row.ratio << ' ' << row.result.overhead() << '\n';
        } else {
          gp << '\n';  // a gap in the line where it does not fit
        }
      }
      gp << "EOD\n";
      if (index > 0) plot += ", \\\n     ";
      plot += fmt::format("$s{} with linespoints title {}", index,
                          gnuplot_quote(modes.size() > 1 ? h + " (" + dtr::to_string(mode) + ")" : h));
      ++index;
    }
  }
  gp << (png ? "set terminal pngcairo size 1000,625 font 'sans,11'\n"
             : "set terminal svg size 800,500 dynamic enhanced font 'sans,12'\n")
     << "set output\n"  // to stdout
     << "set title " << gnuplot_quote(title) << " noenhanced\n"
     << "set xlabel 'memory budget (ratio of the unbudgeted peak)'\n"
     << "set ylabel 'compute overhead'\n"
     << "set xrange [0:1.05]\nset yrange [0.98:2.02]\nset key top right noenhanced\nset grid\n"
     << plot << "\n";
  return gp.str();
}

// The image is written only once gnuplot has made it: a failed plot leaves no file, and no scratch files.
void write_plot(const std::string& path, const std::string& title, const std::vector<Row>& rows,
                const std::vector<std::string>& heuristics, const std::vector<dtr::BudgetMode>& modes) {
  const bool png = dtr::tools::is_png(path);
  write_file("--plot", path, run_gnuplot(plot_script(png, title, rows, heuristics, modes)));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dtr-sim: replay a training trace (the DTR prototype's JSON-lines log) under memory budgets"};
  app.footer("Flags rule here: a replay reads no DTR_* variable but DTR_LOG_LEVEL (DTR_MEMORY_BUDGET, "
             "DTR_HEURISTIC, DTR_BUDGET_MODE, DTR_THRASH_LIMIT... are the flags above), so the same command gives the "
             "same table whatever the environment.");
  std::string trace_path;
  std::optional<double> ratio;
  std::string sweep;
  std::vector<std::string> heuristics = {"dtr-eq"};
  std::string mode_text = "bytes";
  std::string search_text = "index";
  std::string order_text = "inputs";
  std::string constants_text = "kept";
  std::string thrash_text = "2";
  bool json = false;
  bool expandable = false;
  std::string csv_path;
  std::string plot_path;
  app.add_option("trace", trace_path, "the trace file")->required();
  auto* ratio_option =
      app.add_option("--ratio", ratio, "one budget, as a ratio of the unbudgeted peak, from 1e-9 to 1e9 (default 0.5)");
  app.add_option("--sweep", sweep, "budgets FROM:TO:STEP as ratios of the unbudgeted peak (e.g. 0.1:1.0:0.05)")
      ->excludes(ratio_option);
  app.add_option("--heuristic", heuristics,
                 "a heuristic (repeatable; each runs once), or 'all' (those of the DTR paper), alone or beside others");
  app.add_option("--budget-mode", mode_text,
                 "bytes (sum of live tensor bytes, as the DTR authors count), device (the caching allocator's "
                 "reserved bytes: fragmentation included), or both")
      ->check(CLI::IsMember({"bytes", "device", "both"}));
  app.add_option("--constants", constants_text,
                 "kept (every CONSTANT resident to the end, as the DTR authors' simulator pins them; the default) or "
                 "freed (a released constant goes once nothing needs it, as in a real run: dtr-train --trace logs, "
                 "whose batches and gradients are new constants at every step)")
      ->check(CLI::IsMember({"kept", "freed"}));
  app.add_option("--search", search_text, "index (the default) or scan: how the runtime finds the lowest score")
      ->check(CLI::IsMember({"index", "scan"}));
  app.add_option("--recompute-order", order_text,
                 "inputs (the default, as the DTR authors' runtime) or stable-last (the runtime's default): in which "
                 "order a recomputation remakes its evicted inputs")
      ->check(CLI::IsMember({"inputs", "stable-last"}));
  app.add_option("--thrash-limit", thrash_text,
                 "stop a cell as 'thrash' as soon as its overhead passes this factor of the trace's base compute "
                 "(default 2, as the DTR authors; off: never)");
  app.add_flag("--expandable-segments", expandable,
               "device budgets: the caching allocator maps pages of one address range for its large blocks (as "
               "PyTorch's expandable_segments:True) instead of reserving whole segments");
  app.add_flag("--json", json, "print one JSON object per (heuristic, ratio) instead of tables");
  app.add_option("--csv", csv_path, "also write every row to this CSV file");
  app.add_option("--plot", plot_path, "also draw overhead vs budget ratio to this SVG (or .png) file (gnuplot)")
      ->check(dtr::tools::plot_path_error, "FILE.svg or FILE.png");
  CLI11_PARSE(app, argc, argv);

  try {
    std::vector<double> ratios = sweep.empty() ? std::vector<double>{ratio.value_or(0.5)} : parse_sweep(sweep);
    const std::optional<double> thrash_limit = dtr::parse_thrash_limit(thrash_text, "--thrash-limit");
    const dtr::EvictionSearch search = dtr::parse_search(search_text, "--search");
    const dtr::RecomputeOrder order = dtr::parse_recompute_order(order_text, "--recompute-order");
    // 'all' is the DTR paper's set (every named heuristic but the fragmentation-aware ones and ours, forecast and
    // forecast+reversal), beside any other named; a heuristic named twice runs once.
    std::vector<std::string> chosen;
    for (const std::string& h : heuristics) {
      std::vector<std::string> names{h};
      if (h == "all") {
        names = dtr::heuristic_names();
        std::erase_if(names,
                      [](const std::string& n) { return dtr::fragmentation_aware(n) || n.starts_with("forecast"); });
      }
      for (std::string& n : names) {
        if (std::find(chosen.begin(), chosen.end(), n) == chosen.end()) chosen.push_back(std::move(n));
      }
    }
    heuristics = std::move(chosen);
    for (const std::string& h : heuristics) dtr::parse_heuristic(h, "--heuristic");
    std::vector<dtr::BudgetMode> modes;
    if (mode_text != "device") modes.push_back(dtr::BudgetMode::bytes);
    if (mode_text != "bytes") modes.push_back(dtr::BudgetMode::device);

    const dtr::sim::Trace trace = dtr::sim::read_trace(trace_path);
    const dtr::sim::TraceSummary summary = dtr::sim::summarize(trace);
    // Device budgets are ratios of the reserved peak of an unbudgeted replay through the caching allocator.
    dtr::sim::ReplayOptions unbudgeted;
    unbudgeted.budget_mode = dtr::BudgetMode::device;
    unbudgeted.expandable_segments = expandable;
    const dtr::sim::ReplayResult reference = dtr::sim::replay(trace, unbudgeted);
    const std::uint64_t floor =
        constants_text == "kept" ? summary.floor_bytes_constants_kept : summary.floor_bytes;
    if (!json) {
      std::printf("%s: %zu instructions, %llu ops; unbudgeted peak %llu bytes of tensors (%llu reserved by the "
                  "caching allocator), base compute %.3f ms\n",
                  trace_path.c_str(), trace.instructions.size(), static_cast<unsigned long long>(trace.calls),
                  static_cast<unsigned long long>(summary.peak_bytes),
                  static_cast<unsigned long long>(reference.peak_reserved_bytes), summary.base_compute_ns / 1e6);
      std::printf("floor %llu bytes (the most one op needs at once with the constants then resident; no budget "
                  "below it fits): %.3f of the peak, %.3f of the reserved peak\n",
                  static_cast<unsigned long long>(floor),
                  static_cast<double>(floor) / static_cast<double>(std::max<std::uint64_t>(summary.peak_bytes, 1)),
                  static_cast<double>(floor) /
                      static_cast<double>(std::max<std::uint64_t>(reference.peak_reserved_bytes, 1)));
    }
    // Every budget is checked before the first replay: a bad ratio stops the run, not its last rows.
    const std::string ratio_flag = sweep.empty() ? "--ratio" : "--sweep";
    std::vector<std::vector<std::uint64_t>> budgets;  // by mode, then ratio
    for (dtr::BudgetMode mode : modes) {
      const std::uint64_t peak = mode == dtr::BudgetMode::bytes ? summary.peak_bytes : reference.peak_reserved_bytes;
      budgets.emplace_back();
      for (double r : ratios) budgets.back().push_back(budget_bytes(ratio_flag, r, peak, mode));
    }
    std::vector<Row> rows;
    for (std::size_t m = 0; m < modes.size(); ++m) {
      const dtr::BudgetMode mode = modes[m];
      for (const std::string& h : heuristics) {
        for (std::size_t i = 0; i < ratios.size(); ++i) {
          const double r = ratios[i];
          dtr::sim::ReplayOptions options;
          options.budget_bytes = budgets[m][i];  // 0 bytes: an OOM row (sim::replay)
          options.budget_mode = mode;
          options.heuristic = h;
          options.search = search;
          options.recompute_order = order;
          options.expandable_segments = expandable;
          options.keep_constants = constants_text == "kept";
          options.thrash_limit = thrash_limit;  // the runtime stops the cell at the recomputation past it
          Row row{h, r, mode, dtr::sim::replay(trace, options), floor};
          if (json) std::printf("%s\n", to_json(row).dump().c_str());
          flush_stdout();
          rows.push_back(std::move(row));
        }
        if (!json) print_table(rows, h, mode);
        flush_stdout();
      }
    }
    if (!csv_path.empty()) write_csv(csv_path, rows);
    if (!plot_path.empty()) {
      const std::string title = std::filesystem::path(trace_path).filename().string() + ": compute overhead per memory budget";
      write_plot(plot_path, title, rows, heuristics, modes);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dtr-sim: %s\n", e.what());
    return 1;
  }
  // Tables or rows lost on the way to stdout (a full disk, a closed stdout) are a failure, not exit status 0.
  flush_stdout();
  if (const std::string failure = dtr::tools::stdout_failure(); !failure.empty()) {
    std::fprintf(stderr, "dtr-sim: writing to stdout failed: %s\n", failure.c_str());
    return 1;
  }
  return 0;
}
