// dtr-train: trains a zoo model on Fashion-MNIST (or synthetic data) under a memory budget, and compares DTR
// with static checkpointing on the same steps (docs/training.md).
//
//   dtr-train [--model resnet|mlp|transformer|lstm|unet|densenet] [--depth N] [--width W] [--batch B]
//             [--steps S | --epochs E] [--budget 60%|2GiB] [--heuristic H] [--checkpoint none|static[:SEGMENTS]]
//             [--data fashion-mnist|synthetic] [--optimizer sgd|adam] [--lr X] [--seed N] [--compare]
//             [--max-batch] [--json] [--csv FILE] [--plot FILE.svg] [--trace FILE] [--save FILE] [--load FILE]
//
// With no arguments: ResNet-32, batch 128, Fashion-MNIST, --compare, as many steps as fit in about five minutes.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>

#include "dtr/budget.h"
#include "dtr/memory_resource.h"
#include "dtr/train/compare.h"
#include "tool_output.h"
#include "train_report.h"

namespace {

using dtr::tools::flush_stdout;
using dtr::tools::format_bytes;

struct Flags {
  std::string model = "resnet";
  std::int64_t depth = 0;
  std::int64_t width = 0;
  std::int64_t batch = 128;
  std::optional<std::int64_t> steps;
  std::optional<std::int64_t> epochs;
  std::optional<std::int64_t> rounds;
  std::string budget;
  std::string heuristic;
  std::string checkpoint = "none";
  std::string data = "fashion-mnist";
  std::string data_dir = dtr::train::default_fashion_mnist_dir().string();
  std::string optimizer = "sgd";
  double lr = 0;
  std::uint64_t seed = 0;
  bool compare = false;
  bool max_batch = false;
  bool json = false;
  std::string csv;
  std::string plot;
  std::string trace;
  std::string save;
  std::string load;
  double time_budget = 300;
  std::string compare_heuristics = "dtr-eq";
};

// "none" -> -1, "static" -> 0 (round(√N)), "static:K" -> K.
std::int64_t parse_checkpoint(const std::string& text) {
  if (text == "none") return -1;
  if (text == "static") return 0;
  if (text.rfind("static:", 0) == 0) {
    const std::string k = text.substr(7);
    if (!k.empty() && k.size() < 10 && std::all_of(k.begin(), k.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      const std::int64_t segments = std::stoll(k);
      if (segments > 0) return segments;
    }
  }
  throw CLI::ValidationError("--checkpoint", "'" + text + "': expected none, static (round(sqrt(N)) segments) or "
                                             "static:SEGMENTS with SEGMENTS a positive integer");
}

dtr::train::TrainOptions train_options(const Flags& f, const dtr::Config& base) {
  dtr::train::TrainOptions o;
  o.model = f.model;
  o.zoo.depth = f.depth != 0 ? f.depth : (f.model == "resnet" ? 32 : 0);  // ResNet-32 by default
  o.zoo.width = f.width;
  o.batch = f.batch;
  o.optimizer = f.optimizer;
  o.lr = f.lr;
  o.seed = f.seed;
  o.checkpoint_segments = parse_checkpoint(f.checkpoint);
  o.runtime = base;
  dtr::train::check(o);
  return o;
}

std::string model_title(const dtr::train::TrainOptions& o, const dtr::train::TrainTest& data) {
  const std::string depth = o.zoo.depth != 0 ? "-" + std::to_string(o.zoo.depth) : "";
  return fmt::format("{}{}, batch {}, {} ({} training images), {}", o.model, depth, o.batch, data.train.name,
                     data.train.count, o.optimizer);
}

// --compare-heuristics: "none", or heuristic names separated by commas (spaces around a name ignored; a name
// given twice counts once).
std::vector<std::string> compare_heuristics(const std::string& text) {
  std::vector<std::string> names;
  if (text == "none") return names;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    std::string name = text.substr(start, comma - start);
    name.erase(0, name.find_first_not_of(' '));
    name.erase(name.find_last_not_of(' ') + 1);
    name = dtr::parse_heuristic(name, "--compare-heuristics");
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(std::move(name));
    start = comma + 1;
  }
  return names;
}

// The --compare steps that fit in `seconds` in all: two unbudgeted steps give the step time; the unbudgeted
// and static rows take about 2.3 unbudgeted steps' time per step, each DTR row about 1.5 (it recomputes; 1.2
// left the eight-row default 35% past its time), and the test set's forward pass about a third of a step per batch.
std::int64_t steps_within(const dtr::train::TrainOptions& o, const dtr::train::TrainTest& data, double seconds,
                          std::size_t dtr_rows) {
  dtr::train::TrainOptions probe = o;
  probe.runtime.memory_budget = std::nullopt;
  probe.runtime.trace_path.clear();
  dtr::train::Trainer trainer(probe, data.train);
  trainer.step();  // the first step also reserves the allocator's memory
  const double step = trainer.step().seconds;
  const double evaluation = static_cast<double>(data.test.count) / static_cast<double>(o.batch) * step / 3;
  const double left = seconds - 3 * step - evaluation;
  const double per_step = 2.3 + 1.5 * static_cast<double>(dtr_rows);
  return std::max<std::int64_t>(3, static_cast<std::int64_t>(left / (per_step * step)));
}

int run_compare(const Flags& f, const dtr::train::TrainOptions& o, const dtr::train::TrainTest& data, bool terminal) {
  dtr::train::CompareOptions c;
  c.train = o;
  c.static_segments = o.checkpoint_segments > 0 ? o.checkpoint_segments : 0;
  c.train.checkpoint_segments = -1;
  c.also_heuristics = compare_heuristics(f.compare_heuristics);  // checked in main() before the data loads
  if (f.epochs) {
    c.steps = *f.epochs * (data.train.count / o.batch);
  } else if (f.steps) {
    c.steps = *f.steps;
  } else {
    if (!f.json) std::printf("Timing two steps to fit --compare in %.0f s...\n", f.time_budget);
    flush_stdout();
    std::size_t extra = 0;
    for (const std::string& h : c.also_heuristics) extra += h != o.runtime.heuristic ? 1 : 0;
    // Half the steps that fit go to the paired rounds, which give the step times and slowdowns.
    const std::int64_t fit = steps_within(o, data, f.time_budget, 3 * (1 + extra));
    c.steps = (fit + 1) / 2;
    c.paired_rounds = fit - c.steps;
  }
  if (f.rounds) c.paired_rounds = *f.rounds;
  const std::string title = model_title(o, data);
  if (!f.json) {
    const std::string rounds =
        c.paired_rounds > 0 ? fmt::format(", then {} in turns (the step times)", c.paired_rounds) : "";
    std::printf("dtr-train --compare: %s; %lld steps per row%s; budgets in %s mode%s; recomputation order %s\n",
                title.c_str(), static_cast<long long>(c.steps), rounds.c_str(), dtr::to_string(o.runtime.budget_mode),
                o.runtime.allocator.expandable_segments ? " (expandable segments)" : "",
                dtr::to_string(o.runtime.recompute_order));
  }
  std::optional<dtr::tools::Progress> progress;
  std::string current;
  const auto on_step = [&](const dtr::train::Strategy& s, std::int64_t step, std::int64_t steps,
                           const dtr::train::StepResult& r, const dtr::RuntimeStats& stats) {
    if (f.json || step >= c.steps) return;  // the paired rounds report by round (on_round)
    if (s.name != current || step == 0) {
      if (progress) progress->finish();
      progress.emplace(s.name, steps, terminal, std::max<std::int64_t>(1, steps / 5));
      current = s.name;
    }
    progress->step(step, data.train.count / o.batch, r, o.batch, stats);
  };
  const auto on_round = [&](std::int64_t round, std::int64_t rounds) {
    if (f.json) return;
    if (round == 0 && progress) progress->finish();
    if (terminal) {
      std::printf("\rpaired rounds (one step of each row in turn): %lld/%lld", static_cast<long long>(round + 1),
                  static_cast<long long>(rounds));
      if (round + 1 == rounds) std::printf("\n");
    } else if ((round + 1) % std::max<std::int64_t>(1, rounds / 5) == 0 || round + 1 == rounds) {
      std::printf("paired rounds (one step of each row in turn): %lld/%lld\n", static_cast<long long>(round + 1),
                  static_cast<long long>(rounds));
    }
    flush_stdout();
  };
  const std::vector<dtr::train::RowResult> rows = dtr::train::run_compare(c, data, on_step, on_round);
  if (progress) progress->finish();
  if (f.json) {
    std::printf("%s\n", dtr::tools::compare_json(rows, o.model, o.batch).c_str());
  } else {
    dtr::tools::print_compare_table(rows, title);
  }
  if (!f.csv.empty()) dtr::tools::write_file("--csv", f.csv, dtr::tools::compare_csv(rows));
  if (!f.plot.empty()) {
    const std::string script = dtr::tools::compare_plot_script(rows, title + ": step time against memory",
                                                               dtr::tools::is_png(f.plot));
    dtr::tools::write_file("--plot", f.plot, dtr::tools::run_gnuplot(script));
  }
  return dtr::train::losses_agree(rows) ? 0 : 1;
}

int run_max_batch(const Flags& f, const dtr::train::TrainOptions& o, const dtr::train::TrainTest& data) {
  std::uint64_t budget = o.runtime.memory_budget.value_or(0);
  const bool device = o.runtime.budget_mode == dtr::BudgetMode::device;
  if (budget == 0) {  // the unbudgeted peak at --batch
    dtr::train::TrainOptions probe = o;
    probe.checkpoint_segments = -1;
    probe.runtime.memory_budget = std::nullopt;
    dtr::train::Trainer trainer(probe, data.train);
    trainer.step();
    const dtr::RuntimeStats stats = trainer.runtime().stats();
    budget = device ? stats.peak_reserved_bytes : stats.peak_resident_bytes;
  }
  if (!f.json) {
    std::printf("dtr-train --max-batch: %s; budget %s (%s mode)\n", model_title(o, data).c_str(),
                format_bytes(budget).c_str(), dtr::to_string(o.runtime.budget_mode));
  }
  const auto on_probe = [&](const std::string& strategy, std::int64_t batch, bool fits) {
    if (f.json) return;
    std::printf("  %s: batch %lld %s\n", strategy.c_str(), static_cast<long long>(batch), fits ? "fits" : "does not fit");
    flush_stdout();
  };
  const auto results = dtr::train::max_batch(o, budget, data.train,
                                             o.checkpoint_segments > 0 ? o.checkpoint_segments : 0, on_probe);
  if (f.json) {
    std::printf("%s\n", dtr::tools::max_batch_json(results, budget).c_str());
  } else {
    dtr::tools::print_max_batch_table(results, budget);
  }
  return 0;
}

int run_training(const Flags& f, const dtr::train::TrainOptions& o, const dtr::train::TrainTest& data, bool terminal) {
  dtr::train::Trainer trainer(o, data.train);
  if (!f.load.empty()) trainer.load(f.load);
  const std::int64_t per_epoch = trainer.steps_per_epoch();
  const std::int64_t steps = f.steps ? *f.steps : f.epochs.value_or(1) * per_epoch;
  if (!f.json) {
    const std::string budget = o.runtime.memory_budget ? format_bytes(*o.runtime.memory_budget) : "none";
    std::printf("dtr-train: %s; %lld steps (%lld per epoch) from step %lld; budget %s, heuristic %s, checkpoint %s\n",
                model_title(o, data).c_str(), static_cast<long long>(steps), static_cast<long long>(per_epoch),
                static_cast<long long>(trainer.steps_done()), budget.c_str(), o.runtime.heuristic.c_str(),
                f.checkpoint.c_str());
  }
  dtr::tools::Progress progress("train", steps, terminal && !f.json, std::max<std::int64_t>(1, per_epoch / 10));
  nlohmann::json out;
  out["losses"] = nlohmann::json::array();
  for (std::int64_t s = 0; s < steps; ++s) {
    const dtr::train::StepResult r = trainer.step();
    out["losses"].push_back(r.loss);
    if (!f.json) progress.step(s, per_epoch, r, o.batch, trainer.runtime().stats());
    const bool epoch_end = r.step_in_epoch + 1 == per_epoch;
    if (epoch_end || s + 1 == steps) {
      const double accuracy = trainer.evaluate(data.test);
      out["test_accuracy"].push_back({{"epoch", r.epoch + 1}, {"step", trainer.steps_done()}, {"accuracy", accuracy}});
      if (!f.json) {
        progress.finish();
        std::printf("epoch %lld%s: test accuracy %.2f%% on %lld images\n", static_cast<long long>(r.epoch + 1),
                    epoch_end ? "" : " (partial)", 100 * accuracy, static_cast<long long>(data.test.count));
      }
    }
  }
  if (!f.save.empty()) trainer.save(f.save);
  const dtr::RuntimeStats stats = trainer.runtime().stats();
  if (f.json) {
    out["steps_done"] = trainer.steps_done();
    out["peak_reserved_bytes"] = stats.peak_reserved_bytes;
    out["peak_resident_bytes"] = stats.peak_resident_bytes;
    out["evictions"] = stats.evictions;
    out["rematerializations"] = stats.rematerializations;
    out["relocations"] = stats.relocations;
    out["forecast_hits"] = stats.forecast_hits;
    out["extra_compute"] = stats.base_compute > 0 ? stats.remat_compute / stats.base_compute : 0.0;
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("peak reserved %s, peak resident %s, evictions %llu, rematerializations %llu, extra compute %.1f%%%s\n",
                format_bytes(stats.peak_reserved_bytes).c_str(), format_bytes(stats.peak_resident_bytes).c_str(),
                static_cast<unsigned long long>(stats.evictions),
                static_cast<unsigned long long>(stats.rematerializations),
                stats.base_compute > 0 ? 100 * stats.remat_compute / stats.base_compute : 0.0,
                f.save.empty() ? "" : (", saved to " + f.save).c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dtr-train: train a zoo model under a memory budget; --compare sets DTR beside static checkpointing"};
  Flags f;
  app.add_option("--model", f.model, "resnet, mlp, transformer, lstm, unet or densenet")->capture_default_str();
  app.add_option("--depth", f.depth, "the model's depth (0: its default; ResNet: N = 6n + 2, default 32)");
  app.add_option("--width", f.width, "the model's width (0: its default)");
  app.add_option("--batch", f.batch, "images per step")->capture_default_str();
  auto* steps = app.add_option("--steps", f.steps, "steps to train (per row with --compare)");
  app.add_option("--epochs", f.epochs, "epochs to train (default 1; --compare: as many steps as fit in --time-budget)")
      ->excludes(steps);
  app.add_option("--budget", f.budget, "DTR's memory budget: 2GiB, 512MiB, 1500000000, 60% (of the device); a flag "
                                       "wins over DTR_MEMORY_BUDGET; --max-batch: the budget to fit");
  app.add_option("--heuristic", f.heuristic, "the eviction heuristic (DTR_HEURISTIC's names; default forecast)");
  app.add_option("--checkpoint", f.checkpoint, "none, static (round(sqrt(N)) segments) or static:SEGMENTS")
      ->capture_default_str();
  app.add_option("--data", f.data, "fashion-mnist or synthetic")->check(CLI::IsMember({"fashion-mnist", "synthetic"}))
      ->capture_default_str();
  app.add_option("--data-dir", f.data_dir, "where Fashion-MNIST's four .gz files are")->capture_default_str();
  app.add_option("--optimizer", f.optimizer, "sgd (momentum 0.9, weight decay 5e-4) or adam")->capture_default_str();
  app.add_option("--lr", f.lr, "learning rate (0: 0.05 for sgd, 0.001 for adam)");
  app.add_option("--seed", f.seed, "initialisation, data order and dropout")->capture_default_str();
  auto* compare = app.add_flag("--compare", f.compare, "unbudgeted, static checkpointing, DTR at static's peak, at "
                                                        "50% and at 30% of the unbudgeted peak: one table");
  app.add_flag("--max-batch", f.max_batch, "the largest batch each strategy trains within the budget")->excludes(compare);
  app.add_option("--compare-heuristics", f.compare_heuristics,
                 "--compare: the DTR rows again under each of these heuristics (comma-separated; none: no more rows)")
      ->capture_default_str();
  app.add_option("--rounds", f.rounds, "--compare: then this many more steps of every row in turns, the rows side by "
                                       "side, whose times give the step times and slowdowns (default: 0 with "
                                       "--steps/--epochs, else half the steps that fit)")
      ->check(CLI::NonNegativeNumber)
      ->needs(compare);
  app.add_option("--time-budget", f.time_budget, "--compare without --steps/--epochs: seconds for all rows")
      ->capture_default_str();
  app.add_flag("--json", f.json, "print JSON instead of tables and progress");
  app.add_option("--csv", f.csv, "--compare: also write the table to this CSV file");
  app.add_option("--plot", f.plot, "--compare: also plot slowdown against memory to this SVG (or .png) file")
      ->check(dtr::tools::plot_path_error, "FILE.svg or FILE.png");
  app.add_option("--trace", f.trace, "write the run (--compare: the unbudgeted row) in the DTR log format, for dtr-sim");
  app.add_option("--save", f.save, "save the training state at the end (parameters, optimizer, step, random state)");
  app.add_option("--load", f.load, "resume from a state saved with --save");
  CLI11_PARSE(app, argc, argv);
  if (argc == 1) f.compare = true;  // the default run: ResNet-32, batch 128, Fashion-MNIST, --compare

  try {
    const dtr::Device device = dtr::default_device();
    const std::uint64_t capacity = dtr::make_device_resource(device)->capacity();
    dtr::Config base = dtr::Config::from_env(capacity);  // every DTR_* variable; the flags below win
    base.device = device;
    if (!f.budget.empty()) base.memory_budget = dtr::parse_memory_budget(f.budget, capacity, "--budget");
    if (!f.heuristic.empty()) base.heuristic = dtr::parse_heuristic(f.heuristic, "--heuristic");
    if (!f.trace.empty()) base.trace_path = f.trace;
    if (f.compare) (void)compare_heuristics(f.compare_heuristics);  // a bad name fails now, not after loading
    if ((f.compare || f.max_batch) && (!f.save.empty() || !f.load.empty())) {
      throw CLI::ValidationError("--save/--load", "apply to a training run, not to --compare or --max-batch");
    }
    const dtr::train::TrainOptions options = train_options(f, base);
    const dtr::train::TrainTest data =
        f.data == "synthetic" ? dtr::train::synthetic_data(f.seed) : dtr::train::read_fashion_mnist(f.data_dir);
    const bool terminal = isatty(STDOUT_FILENO) == 1;
    int status = 0;
    if (f.compare) {
      status = run_compare(f, options, data, terminal);
    } else if (f.max_batch) {
      status = run_max_batch(f, options, data);
    } else {
      status = run_training(f, options, data, terminal);
    }
    flush_stdout();
    if (const std::string failure = dtr::tools::stdout_failure(); !failure.empty()) {
      std::fprintf(stderr, "dtr-train: writing to stdout failed: %s\n", failure.c_str());
      return 1;
    }
    return status;
  } catch (const CLI::ValidationError& e) {
    std::fprintf(stderr, "dtr-train: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dtr-train: %s\n", e.what());
    return 1;
  }
}
