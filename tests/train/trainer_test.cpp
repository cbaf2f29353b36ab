// Training runs (include/dtr/train/trainer.h, compare.h): every strategy computes the same steps, a resumed run
// continues the curve it stopped on, a model learns, bad options and foreign files are clear errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "../test_helpers.h"
#include "dtr/nn/state_dict.h"
#include "dtr/train/compare.h"

namespace dtr::train::test {
namespace {

namespace fs = std::filesystem;

const TrainTest& data() {
  static const TrainTest d = synthetic_data(11, 512, 256);
  return d;
}

TrainOptions small(const std::string& model, std::int64_t batch = 32) {
  TrainOptions o;
  o.model = model;
  o.batch = batch;
  o.zoo.dropout = 0.1;  // dropout's masks must come back the same after a resume and under every strategy
  if (model == "resnet") o.zoo = {.depth = 8, .width = 4, .dropout = 0.1};
  if (model == "mlp") o.zoo = {.depth = 6, .width = 64, .dropout = 0.1};
  if (model == "densenet") o.zoo = {.depth = 3, .width = 4, .dropout = 0.1};
  o.runtime.cost_model = CostModel::flops;  // deterministic eviction choices: a failure reproduces
  // Budgets on resident bytes: these models are a few MiB, about a segment or two of the caching allocator, too
  // coarse a unit for device budgets of a fraction of them (dtr-train's models are hundreds of MiB).
  o.runtime.budget_mode = BudgetMode::bytes;
  return o;
}

std::vector<float> parameters(Trainer& t) {
  std::vector<float> all;
  for (const auto& [name, value] : nn::state_dict(t.model())) {
    const std::vector<float> v = value.to_host();
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

fs::path scratch(const std::string& name) {
  return fs::temp_directory_path() / ("dtr-trainer-" + std::to_string(getpid()) + "-" + name);
}

TEST(Trainer, StepsWalkTheEpochsOrderAndDropThePartialBatch) {
  TrainOptions o = small("mlp", 100);
  Trainer t(o, data().train);  // 512 images: 5 steps per epoch, 12 images dropped
  EXPECT_EQ(t.steps_per_epoch(), 5);
  for (int s = 0; s < 6; ++s) {
    const StepResult r = t.step();
    EXPECT_EQ(r.epoch, s / 5);
    EXPECT_EQ(r.step_in_epoch, s % 5);
    EXPECT_TRUE(std::isfinite(r.loss));
    EXPECT_GE(r.correct, 0);
    EXPECT_LE(r.correct, 100);
    EXPECT_GT(r.seconds, 0);
  }
  EXPECT_EQ(t.steps_done(), 6);
}

TEST(Trainer, AModelLearnsTheSyntheticClasses) {
  TrainOptions o = small("mlp", 64);
  o.optimizer = "adam";
  Trainer t(o, data().train);
  const double before = t.evaluate(data().test);
  for (int s = 0; s < 120; ++s) t.step();
  const double after = t.evaluate(data().test);
  EXPECT_GT(after, 0.9) << "before training: " << before;
  EXPECT_GT(after, before + 0.3);
}

// A run stopped after 3 steps and resumed from its file computes the steps 4 to 6 of a run that never stopped,
// bit for bit: parameters, momentum (SGD) or moments and step counts (Adam), and dropout's random state.
TEST(Trainer, AResumedRunContinuesTheSameLossCurve) {
  for (const std::string optimizer : {"sgd", "adam"}) {
    SCOPED_TRACE(optimizer);
    TrainOptions o = small("resnet", 16);
    o.optimizer = optimizer;
    Trainer straight(o, data().train);
    std::vector<float> expected;
    for (int s = 0; s < 6; ++s) expected.push_back(straight.step().loss);
    const fs::path file = scratch(optimizer + ".dtr");
    {
      Trainer first(o, data().train);
      for (int s = 0; s < 3; ++s) ASSERT_EQ(first.step().loss, expected[static_cast<std::size_t>(s)]);
      first.save(file);
    }
    Trainer resumed(o, data().train);
    resumed.load(file);
    fs::remove(file);
    EXPECT_EQ(resumed.steps_done(), 3);
    std::vector<float> rest;
    for (int s = 3; s < 6; ++s) rest.push_back(resumed.step().loss);
    EXPECT_TRUE(same_bits(rest, std::vector<float>(expected.begin() + 3, expected.end())));
    EXPECT_TRUE(same_bits(parameters(resumed), parameters(straight)));
  }
}

TEST(Trainer, LoadRefusesFilesOfAnotherRun) {
  TrainOptions o = small("mlp");
  const fs::path file = scratch("other.dtr");
  {
    Trainer t(o, data().train);
    t.step();
    t.save(file);
  }
  const auto refused = [&](TrainOptions other, std::initializer_list<std::string_view> parts) {
    Trainer t(other, data().train);
    dtr::test::expect_error<InvalidArgument>([&] { t.load(file); }, parts);
  };
  TrainOptions seed = o;
  seed.seed = 9;
  refused(seed, {"--seed 0", "--seed 9"});
  TrainOptions batch = o;
  batch.batch = 16;
  refused(batch, {"--batch 32", "--batch 16"});
  TrainOptions adam = o;
  adam.optimizer = "adam";
  refused(adam, {"--optimizer sgd", "--optimizer adam"});
  // Another model: the state dict's keys say so.
  TrainOptions wider = o;
  wider.zoo.width = 32;
  Trainer t(wider, data().train);
  EXPECT_THROW(t.load(file), ShapeError);
  // A state dict that dtr-train did not save.
  Trainer plain(o, data().train);
  nn::save(plain.model(), file);
  dtr::test::expect_error<InvalidArgument>([&] { plain.load(file); }, {"is not one dtr-train saves"});
  fs::remove(file);
  dtr::test::expect_error<IoError>([&] { plain.load(file); }, {file.string()});
}

TEST(Trainer, BadOptionsNameTheOption) {
  const auto refused = [](TrainOptions o, std::initializer_list<std::string_view> parts) {
    dtr::test::expect_error<InvalidArgument>([&] { Trainer(o, data().train); }, parts);
  };
  TrainOptions o = small("mlp");
  o.model = "vgg";
  refused(o, {"--model 'vgg'", "resnet"});
  o = small("mlp");
  o.batch = 0;
  refused(o, {"--batch 0"});
  o.batch = 100000;
  refused(o, {"--batch 100000", "512 images"});
  o = small("mlp");
  o.optimizer = "rmsprop";
  refused(o, {"--optimizer 'rmsprop'", "sgd or adam"});
  o = small("mlp");
  o.lr = -1;
  refused(o, {"--lr -1"});
  o = small("mlp");
  o.checkpoint_segments = -2;
  refused(o, {"static[:SEGMENTS]"});
}

// ResNet-20 at batch 16, the thrash limit raised so that every row ends: how much DTR recomputes on these
// small models is not the point of the tests that use it.
CompareOptions resnet20_compare(std::int64_t steps) {
  CompareOptions c;
  c.train = small("resnet", 16);
  c.train.zoo.depth = 20;
  c.train.runtime.thrash_limit = 10;
  c.steps = steps;
  return c;
}

// --compare's promise: every strategy computes the same losses, bit for bit; the budgets bite.
TEST(Compare, EveryStrategyGivesTheSameLossesAndTheBudgetsBite) {
  CompareOptions c = resnet20_compare(3);
  c.budget_fractions = {0.5};
  const std::vector<RowResult> rows = run_compare(c, data());
  ASSERT_EQ(rows.size(), 4U);
  EXPECT_TRUE(losses_agree(rows));
  for (const RowResult& row : rows) {
    SCOPED_TRACE(row.strategy.name);
    ASSERT_TRUE(row.completed) << row.failure;
    EXPECT_EQ(row.losses.size(), 3U);
    EXPECT_EQ(row.parameters_hash, rows[0].parameters_hash);
    EXPECT_GE(row.test_accuracy, 0.0);
    EXPECT_EQ(row.test_accuracy, rows[0].test_accuracy);
    if (row.strategy.budget) {
      EXPECT_LE(row.stats.peak_resident_bytes, *row.strategy.budget);
    }
  }
  EXPECT_EQ(rows[1].strategy.checkpoint_segments, 0);
  EXPECT_GT(rows[1].stats.ops, rows[0].stats.ops) << "static checkpointing reruns its segments";
  EXPECT_LT(rows[1].stats.peak_resident_bytes, rows[0].stats.peak_resident_bytes);
  EXPECT_EQ(rows[2].strategy.budget, rows[1].stats.peak_resident_bytes) << "DTR at static checkpointing's peak";
  EXPECT_GT(rows[3].stats.evictions, 0U);
  EXPECT_GT(rows[3].extra_compute(), 0.0);
  EXPECT_EQ(rows[0].extra_compute(), 0.0);
  // Static checkpointing's extra compute is its reruns: at most one more forward, about a third of a step
  // (backward costs about twice the forward), less the last segment's, which is never rerun.
  const double reruns = rows[1].extra_compute();
  EXPECT_GT(reruns, 0.1);
  EXPECT_LT(reruns, 0.5);
}

// A first step costs more than the later ones under measured costs (cold caches, fresh pages, oneDNN's first
// primitives, most of all in the process's first row): counted in, it hid static checkpointing's reruns (0.0%
// for the LSTM in dtr-train's table). Extra compute is over the steps after it.
TEST(Compare, ExtraComputeLeavesOutTheFirstStep) {
  RowResult checkpointed, dtr;
  checkpointed.strategy = {"static", std::nullopt, 0, {}};
  dtr.strategy = {"DTR", 1000, -1, {}};
  for (RowResult* row : {&checkpointed, &dtr}) row->completed = true;
  checkpointed.stats.base_compute = 350;  // 200 (a cold first step, 50 of it reruns), then 150 (50 reruns)
  checkpointed.stats.rerun_compute = 100;
  checkpointed.after_first_step = RuntimeStats{};
  checkpointed.after_first_step->base_compute = 200;
  checkpointed.after_first_step->rerun_compute = 50;
  dtr.stats.base_compute = 220;  // 120 then 100, with 30 then 20 recomputed
  dtr.stats.remat_compute = 50;
  dtr.after_first_step = RuntimeStats{};
  dtr.after_first_step->base_compute = 120;
  dtr.after_first_step->remat_compute = 30;
  EXPECT_DOUBLE_EQ(checkpointed.extra_compute(), 0.5);
  EXPECT_DOUBLE_EQ(dtr.extra_compute(), 0.2);
  EXPECT_DOUBLE_EQ(RowResult{}.extra_compute(), 0.0);
  // A single step (no snapshot) counts everything, as does a row that did not complete.
  checkpointed.after_first_step.reset();
  EXPECT_DOUBLE_EQ(checkpointed.extra_compute(), 100.0 / 250.0);
  dtr.completed = false;
  EXPECT_DOUBLE_EQ(dtr.extra_compute(), 50.0 / 220.0);
}

// Static checkpointing's reruns are priced in the row's own costs (RuntimeStats::rerun_compute), not as its
// compute past the unbudgeted row's: under FLOP costs the two agree exactly (the row's other ops are the
// unbudgeted row's), and only the reruns count.
TEST(Compare, StaticCheckpointingsRerunsArePricedInItsOwnCosts) {
  CompareOptions c;
  c.train = small("mlp", 32);
  c.train.runtime.cost_model = CostModel::flops;
  c.steps = 2;
  c.budget_fractions = {};
  c.evaluate = false;
  const std::vector<RowResult> rows = run_compare(c, data());
  ASSERT_GE(rows.size(), 2U);
  const RowResult& unbudgeted = rows[0];
  const RowResult& checkpointed = rows[1];
  ASSERT_EQ(checkpointed.strategy.checkpoint_segments, 0);
  EXPECT_EQ(unbudgeted.stats.rerun_compute, 0.0);
  ASSERT_GT(checkpointed.stats.rerun_compute, 0.0);
  EXPECT_DOUBLE_EQ(checkpointed.stats.base_compute - checkpointed.stats.rerun_compute, unbudgeted.stats.base_compute);
  ASSERT_TRUE(checkpointed.after_first_step && unbudgeted.after_first_step);
  const double steady = checkpointed.stats.base_compute - checkpointed.after_first_step->base_compute;
  const double yardstick = unbudgeted.stats.base_compute - unbudgeted.after_first_step->base_compute;
  const double past_unbudgeted = (steady - yardstick) / yardstick;
  EXPECT_GT(past_unbudgeted, 0.1);
  EXPECT_NEAR(checkpointed.extra_compute(), past_unbudgeted, 1e-12 * past_unbudgeted);
}

// A budgeted row's thrash limit is against the unbudgeted row's compute over the same steps (as a replay's
// against its trace's), not the compute so far, which early in a first backward is a fraction of a step. A
// limit a hair above 1 stops each budgeted row at its first recomputation; the ratio its message reports is
// then the recomputation over the unbudgeted row's whole compute (the row's own compute so far is less).
TEST(Compare, ABudgetedRowsThrashLimitIsAgainstTheUnbudgetedRowsCompute) {
  CompareOptions c;
  c.train = small("lstm", 32);
  c.train.runtime.thrash_limit = 1.0 + 1e-12;
  c.steps = 3;
  c.budget_fractions = {0.5};
  c.evaluate = false;
  const std::vector<RowResult> rows = run_compare(c, data());
  ASSERT_EQ(rows.size(), 4U);
  const double whole = rows[0].stats.base_compute;
  for (std::size_t i = 2; i < rows.size(); ++i) {
    const RowResult& row = rows[i];
    SCOPED_TRACE(row.strategy.name);
    ASSERT_FALSE(row.completed);
    const std::string marker = "recomputation has cost ";
    const std::size_t at = row.failure.find(marker);
    ASSERT_NE(at, std::string::npos) << row.failure;
    const double reported = std::stod(row.failure.substr(at + marker.size()));
    EXPECT_GT(row.stats.remat_compute, 0.0);
    EXPECT_LT(row.stats.base_compute, whole) << "it stopped in its first steps";
    EXPECT_NEAR(reported, row.stats.remat_compute / whole, 1e-5 * reported) << row.failure;
  }
}

TEST(Compare, ARowThatCannotFitIsReportedAndTheOthersGoOn) {
  CompareOptions c = resnet20_compare(2);
  c.budget_fractions = {0.5, 0.0001};
  c.evaluate = false;
  const std::vector<RowResult> rows = run_compare(c, data());
  ASSERT_EQ(rows.size(), 5U);
  EXPECT_TRUE(rows[3].completed);
  EXPECT_FALSE(rows[4].completed);
  EXPECT_NE(rows[4].failure.find("out of memory"), std::string::npos) << rows[4].failure;
  // Its parameters did not fit: its trainer was never made, and its peak is what it held when it failed.
  EXPECT_TRUE(rows[4].losses.empty());
  EXPECT_GT(rows[4].stats.peak_reserved_bytes, 0U);
  EXPECT_TRUE(losses_agree(rows));
}

// The unbudgeted row is the reference: when it cannot run (here a kernel observer that reports the device
// out of memory), --compare stops with that error, its type and message unchanged (it used to become an
// InvalidArgument saying "the unbudgeted run failed").
TEST(Compare, AnUnbudgetedRunThatFailsStopsWithItsOwnError) {
  CompareOptions c;
  c.train = small("mlp");
  c.steps = 2;
  c.evaluate = false;
  int kernels = 0;
  c.train.runtime.kernel_observer = [&](const KernelRun&) {
    if (++kernels == 5) throw OutOfMemory("the device ran out (a test's observer)", {}, __FILE__, __LINE__);
  };
  try {
    run_compare(c, data());
    FAIL() << "no error";
  } catch (const OutOfMemory& e) {
    EXPECT_STREQ(e.what(), "the device ran out (a test's observer)");
  }
  EXPECT_EQ(kernels, 5) << "nothing ran after the unbudgeted row failed";
}

// Paired rounds: after every row's own steps, one step of each row in turn, the trainers side by side. The
// rounds continue the same training (the losses still agree bit for bit, the parameters are those of a run of
// as many plain steps), each row's steps are reported in order, and the rounds' times are the step times.
TEST(Compare, PairedRoundsStepEveryRowInTurnsAndContinueTheSameTraining) {
  CompareOptions c = resnet20_compare(2);
  c.paired_rounds = 3;
  c.budget_fractions = {0.5};
  std::vector<std::pair<std::string, std::int64_t>> reported;
  std::vector<std::int64_t> rounds;
  const auto on_step = [&](const Strategy& s, std::int64_t step, std::int64_t steps, const StepResult&,
                           const RuntimeStats&) {
    reported.emplace_back(s.name, step);
    EXPECT_EQ(steps, step < 2 ? 2 : 5) << s.name << " step " << step;
  };
  const auto on_round = [&](std::int64_t round, std::int64_t of) {
    EXPECT_EQ(of, 3);
    rounds.push_back(round);
  };
  const std::vector<RowResult> rows = run_compare(c, data(), on_step, on_round);
  ASSERT_EQ(rows.size(), 4U);
  EXPECT_TRUE(losses_agree(rows));
  std::vector<std::pair<std::string, std::int64_t>> expected;
  for (const RowResult& row : rows) {
    for (std::int64_t s = 0; s < 2; ++s) expected.emplace_back(row.strategy.name, s);
  }
  for (std::int64_t r = 0; r < 3; ++r) {
    for (const RowResult& row : rows) expected.emplace_back(row.strategy.name, 2 + r);
  }
  EXPECT_EQ(reported, expected);
  EXPECT_EQ(rounds, (std::vector<std::int64_t>{0, 1, 2}));
  for (const RowResult& row : rows) {
    SCOPED_TRACE(row.strategy.name);
    ASSERT_TRUE(row.completed) << row.failure;
    EXPECT_EQ(row.losses.size(), 5U);
    ASSERT_EQ(row.paired_step_seconds.size(), 3U);
    EXPECT_TRUE(std::equal(row.paired_step_seconds.begin(), row.paired_step_seconds.end(), row.step_seconds.begin() + 2));
    EXPECT_EQ(row.parameters_hash, rows[0].parameters_hash);
    EXPECT_EQ(row.test_accuracy, rows[0].test_accuracy);
    if (row.strategy.budget) {
      EXPECT_LE(row.stats.peak_resident_bytes, *row.strategy.budget);
    }
  }
  EXPECT_GT(rows[3].stats.evictions, 0U);
  // The same five steps without rounds: the same losses and parameters, and the same budgets (the unbudgeted
  // peak over the first two steps is that over five: the rounds repeat steps taken).
  c.steps = 5;
  c.paired_rounds = 0;
  const std::vector<RowResult> plain = run_compare(c, data());
  ASSERT_EQ(plain.size(), rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE(rows[i].strategy.name);
    EXPECT_TRUE(plain[i].paired_step_seconds.empty());
    EXPECT_TRUE(std::memcmp(plain[i].losses.data(), rows[i].losses.data(), 5 * sizeof(float)) == 0);
    EXPECT_EQ(plain[i].parameters_hash, rows[i].parameters_hash);
    EXPECT_EQ(plain[i].strategy.budget, rows[i].strategy.budget);
  }
  c.paired_rounds = -1;
  dtr::test::expect_error<InvalidArgument>([&] { run_compare(c, data()); }, {"paired rounds", "-1", "0 or more"});
}

// With paired rounds a row's slowdown is the median over the rounds of its step over the unbudgeted row's in
// the same round; without, the ratio of the two rows' median steps.
TEST(Compare, SlowdownPairsTheRoundsStepsWhenThereAreAny) {
  RowResult unbudgeted, row;
  unbudgeted.step_seconds = {5, 1, 2, 2};
  row.step_seconds = {9, 2.2, 2.2, 4.4};
  EXPECT_DOUBLE_EQ(unbudgeted.median_step_seconds(), 2.0);
  EXPECT_DOUBLE_EQ(row.slowdown(unbudgeted), 3.3 / 2.0);  // medians 3.3 and 2
  // Rounds: the machine slowed in the row's third round and in the unbudgeted row's second.
  unbudgeted.paired_step_seconds = {1, 2, 2};
  row.paired_step_seconds = {2.2, 2.2, 4.4};
  EXPECT_DOUBLE_EQ(row.median_step_seconds(), 2.2);
  EXPECT_DOUBLE_EQ(row.slowdown(unbudgeted), 2.2);  // ratios 2.2, 1.1, 2.2
  row.paired_step_seconds = {1.1, 2.2, 2.2};
  EXPECT_DOUBLE_EQ(row.slowdown(unbudgeted), 1.1);  // ratios 1.1, 1.1, 1.1
  EXPECT_DOUBLE_EQ(unbudgeted.slowdown(unbudgeted), 1.0);
  EXPECT_DOUBLE_EQ(row.slowdown(RowResult{}), 0.0);
}

// A CNN, whose activations outweigh its parameters, as in the DTR paper's batch-size experiments.
TEST(MaxBatch, DtrFitsLargerBatchesThanUnbudgetedTraining) {
  TrainOptions o = small("resnet", 32);
  std::uint64_t peak = 0;
  {
    Trainer t(o, data().train);
    t.step();
    peak = t.runtime().stats().peak_resident_bytes;
  }
  const std::vector<MaxBatchResult> found = max_batch(o, peak, data().train, 0, {});
  ASSERT_EQ(found.size(), 3U);
  EXPECT_EQ(found[0].strategy, "unbudgeted");
  EXPECT_GE(found[0].batch, 32);  // its own peak fits by construction
  EXPECT_LT(found[0].batch, 64);
  EXPECT_GT(found[2].batch, found[0].batch);
  for (const MaxBatchResult& r : found) EXPECT_LE(r.peak_bytes, peak) << r.strategy;
}

}  // namespace
}  // namespace dtr::train::test
