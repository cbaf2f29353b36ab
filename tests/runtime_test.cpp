// The runtime: values are computed once, evicted under pressure, and recomputed bitwise equal.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "inplace_fixture.h"
#include "test_helpers.h"
#include "test_resources.h"

namespace dtr::test {
namespace {

TEST(Runtime, ComputesOps) {
  Runtime rt(deterministic_config());
  Tensor a = constant(rt, {2, 2}, 1.0f);  // 1 1.25 1.5 1.75
  Tensor b = constant(rt, {2, 2}, -1.0f);
  Tensor c = rt.call1(ops::add(), {a, b});
  EXPECT_EQ(c.to_host(), (std::vector<float>{0.0f, 0.5f, 1.0f, 1.5f}));
  Tensor d = rt.call1(ops::matmul(), {a, c});
  EXPECT_EQ(d.shape(), (Shape{2, 2}));
  EXPECT_FLOAT_EQ(d.to_host()[0], 1.0f * 0.0f + 1.25f * 1.0f);
  const RuntimeStats s = rt.stats();
  EXPECT_EQ(s.ops, 2u);
  EXPECT_DOUBLE_EQ(s.base_compute, 4.0 + 16.0);  // flops: add 4, matmul 2*2*2*2
  EXPECT_EQ(s.rematerializations, 0u);
}

TEST(Runtime, SoleReferenceIsOneTensorOnAWholeStorageNobodyElseViews) {
  Runtime rt(deterministic_config());
  EXPECT_FALSE(Tensor().sole_reference());
  Tensor a = constant(rt, {4}, 1.0f);
  EXPECT_TRUE(a.sole_reference());
  {
    const Tensor copy = a;  // copies alias one handle
    EXPECT_FALSE(a.sole_reference());
    EXPECT_FALSE(copy.sole_reference());
  }
  EXPECT_TRUE(a.sole_reference());
  {
    const Tensor part = rt.view(a, {2}, 2);  // another handle on the storage
    EXPECT_FALSE(a.sole_reference());
    EXPECT_FALSE(part.sole_reference());
  }
  EXPECT_TRUE(a.sole_reference());
  Tensor b = rt.call1(ops::relu(), {a});  // a closure reading it is not a reference to it
  EXPECT_TRUE(a.sole_reference());
  EXPECT_TRUE(b.sole_reference());
}

TEST(Runtime, FootprintCountsTheLineageAndComesBackWhenTheProgramsTensorsDie) {
  Config config = deterministic_config(std::nullopt, BudgetMode::bytes, "dtr-eq");
  Runtime rt(config);
  const RuntimeFootprint empty = rt.footprint();
  EXPECT_EQ(empty.storages, 0u);
  EXPECT_EQ(empty.lineage_objects, 0u);
  EXPECT_EQ(empty.candidates, 0u);
  EXPECT_EQ(empty.heuristic_records, 0u);
  std::vector<Tensor> chain{rt.constant(TensorMeta{{256}}, std::vector<float>(256, 0.5F))};
  for (int i = 0; i < 20; ++i) chain.push_back(rt.call1(ops::relu(), {chain.back()}));
  RuntimeFootprint f = rt.footprint();
  EXPECT_EQ(f.storages, 21u);
  EXPECT_EQ(f.candidates, 20u);                 // every computed storage; the constant is not one
  EXPECT_GE(f.lineage_objects, 21u + 20u);      // storages and closures at least (and the handles)
  EXPECT_GT(f.segments, 0u);
  // Evicting some of the chain gives dtr-eq records of the evicted classes.
  for (int i = 2; i < 20; i += 3) ASSERT_TRUE(rt.evict(chain[static_cast<std::size_t>(i)]));
  EXPECT_GT(rt.footprint().heuristic_records, 0u);
  EXPECT_EQ(rt.footprint().candidates, 20u - 6u);
  chain.clear();
  f = rt.footprint();
  EXPECT_EQ(f.storages, 0u);
  EXPECT_EQ(f.lineage_objects, 0u);
  EXPECT_EQ(f.candidates, 0u);
  EXPECT_EQ(f.heuristic_records, 0u);
}

// Under a budget every heuristic but random and forecast+reversal (whose scores read the memory at each
// decision) keeps its candidates in an index (forecast its own); without a budget, or with DTR_SEARCH=scan,
// nothing is indexed.
TEST(Runtime, FootprintSaysWhetherDecisionsUseAnIndex) {
  for (const std::string& heuristic : heuristic_names()) {
    SCOPED_TRACE(heuristic);
    for (const auto& [budget, search] : {std::pair{std::optional<std::uint64_t>(1u << 20), EvictionSearch::index},
                                         std::pair{std::optional<std::uint64_t>(1u << 20), EvictionSearch::scan},
                                         std::pair{std::optional<std::uint64_t>(), EvictionSearch::index}}) {
      Config config = deterministic_config(budget, BudgetMode::bytes, heuristic);
      config.search = search;
      Runtime rt(config);
      std::vector<Tensor> chain{rt.constant(TensorMeta{{256}}, std::vector<float>(256, 0.5F))};
      for (int i = 0; i < 20; ++i) chain.push_back(rt.call1(ops::relu(), {chain.back()}));
      const bool indexed =
          budget && search == EvictionSearch::index && heuristic != "random" && heuristic != "forecast+reversal";
      EXPECT_EQ(rt.footprint().indexed_candidates, indexed ? 20u : 0u);
    }
  }
}

TEST(Runtime, ShapeErrorsComeBeforeAnyAllocation) {
  Runtime rt(deterministic_config());
  Tensor a = constant(rt, {2, 3}, 0.0f);
  const auto before = rt.allocator().stats().num_allocations;
  EXPECT_THROW(rt.call1(ops::matmul(), {a, a}), ShapeError);
  EXPECT_EQ(rt.allocator().stats().num_allocations, before);
  EXPECT_THROW(rt.call1(ops::add(), {a, Tensor()}), InvalidArgument);
  EXPECT_THROW(rt.constant(TensorMeta{{2}}, std::vector<float>{1.0f}), InvalidArgument);
}

TEST(Runtime, ValueChecksRunOnResidentInputsBeforeAnyOutputIsAllocated) {
  // "pick": row i's element labels[i] of a matrix; a label out of range is an error about values.
  static const OpDef pick{
      .name = "pick",
      .infer = [](std::span<const TensorMeta> in, const Attrs&) { return TensorMetas{TensorMeta{{in[0].shape[0]}}}; },
      .cpu_kernel =
          [](const KernelArgs& args) {
            const std::int64_t n = args.input_meta[0].shape[0];
            const std::int64_t c = args.input_meta[0].shape[1];
            for (std::int64_t i = 0; i < n; ++i) {
              args.output<float>(0)[i] = args.input<float>(0)[i * c + args.input<std::int64_t>(1)[i]];
            }
          },
      .flops = nullptr,
      .check_values =
          [](const KernelArgs& args) {
            EXPECT_TRUE(args.outputs.empty());
            const std::int64_t c = args.input_meta[0].shape[1];
            for (std::int64_t i = 0; i < args.input_meta[1].numel(); ++i) {
              const std::int64_t label = args.input<std::int64_t>(1)[i];
              DTR_CHECK(label >= 0 && label < c, ShapeError, "op 'pick': label ", label, " outside [0, ", c, ")");
            }
          },
  };
  Runtime rt(deterministic_config());
  Tensor x = constant(rt, {2, 3}, 1.0f);
  Tensor x2 = rt.call1(ops::scale(), {x}, Attrs{{"factor", 2.0}});
  Tensor good = rt.constant(TensorMeta{{2}, DType::int64}, std::vector<std::int64_t>{2, 0});
  Tensor bad = rt.constant(TensorMeta{{2}, DType::int64}, std::vector<std::int64_t>{1, 3});
  ASSERT_TRUE(rt.evict(x2));  // the check sees inputs recomputed first
  EXPECT_EQ(rt.call1(pick, {x2, good}).to_host(), (std::vector<float>{2 * 1.5f, 2 * 1.75f}));
  ASSERT_TRUE(rt.evict(x2));
  const auto before = rt.allocator().stats().num_allocations;
  try {
    rt.call1(pick, {x2, bad});
    ADD_FAILURE() << "label 3 of 3 classes was taken";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("label 3 outside [0, 3)"), std::string::npos) << e.what();
  }
  EXPECT_EQ(rt.allocator().stats().num_allocations, before + 1);  // x2 came back; no output was allocated
  EXPECT_EQ(bad.to_host_as<std::int64_t>(), (std::vector<std::int64_t>{1, 3}));
}

TEST(Runtime, EvictedAncestorsAreRecomputedInOrder) {
  Runtime rt(deterministic_config());
  Tensor t0 = constant(rt, {8}, 0.5f);
  Tensor t1 = rt.call1(ops::relu(), {t0});
  Tensor t2 = rt.call1(ops::scale(), {t1}, Attrs{{"factor", 3.0}});
  Tensor t3 = rt.call1(ops::add(), {t2, t1});
  const std::vector<float> expected = t3.to_host();
  for (const Tensor* t : {&t1, &t2, &t3}) EXPECT_TRUE(rt.evict(*t));
  EXPECT_FALSE(rt.evict(t0));  // constants never go
  EXPECT_FALSE(t3.resident());
  EXPECT_TRUE(bitwise_equal(t3.to_host(), expected));
  EXPECT_EQ(rt.stats().rematerializations, 3u);  // t1, t2, t3, each once
  EXPECT_TRUE(t1.resident() && t2.resident() && t3.resident());
}

TEST(Runtime, SizeFloorPassesOverCandidatesFarBelowTheMeanSize) {
  for (const double floor : {0.0, 0.5, 100.0}) {
    SCOPED_TRACE(::testing::Message() << "size floor " << floor);
    // Resident: two constants (64 B, 1 KiB) and three candidates: small (64 B, the least recently used), big1
    // and big2 (1 KiB each): 3,200 bytes, the whole budget.
    Config config = deterministic_config(3200, BudgetMode::bytes, "lru");
    config.size_floor = floor;
    Runtime rt(config);
    Tensor xs = constant(rt, {16}, 0.5f);
    Tensor xb = constant(rt, {256}, 0.5f);
    Tensor small = rt.call1(ops::relu(), {xs});
    Tensor big1 = rt.call1(ops::relu(), {xb});
    Tensor big2 = rt.call1(ops::scale(), {xb}, Attrs{{"factor", 2.0}});
    Tensor y = rt.call1(ops::scale(), {xs}, Attrs{{"factor", 3.0}});  // 64 B more: one eviction
    EXPECT_EQ(rt.stats().evictions, 1u);
    // No floor: the least recently used goes. A floor of half the mean (352 B) passes over the 64 B one. A
    // floor above every candidate falls back to all of them.
    EXPECT_EQ(small.resident(), floor == 0.5);
    EXPECT_EQ(big1.resident(), floor != 0.5);
    EXPECT_TRUE(big2.resident());
    EXPECT_TRUE(bitwise_equal(small.to_host(), xs.to_host()));  // relu of positive values
  }
}

TEST(Runtime, ByteTensorsAreRejectedByKernelsThatComputeOnFloats) {
  Runtime rt(deterministic_config());
  Tensor bytes = rt.constant(TensorMeta{{16}, DType::uint8});
  EXPECT_EQ(bytes.storage_bytes(), 16u);
  try {
    rt.call1(ops::relu(), {bytes});
    ADD_FAILURE() << "relu took uint8";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("op 'relu' takes float32 or float64 inputs of one dtype, got uint8 [16]"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(bytes.to_host(), InvalidArgument);
  EXPECT_EQ(bytes.to_host_as<std::uint8_t>(), std::vector<std::uint8_t>(16, 0));
  EXPECT_THROW(rt.constant(TensorMeta{{4}, DType::uint8}, std::vector<float>(4, 0.0f)), InvalidArgument);
  // A float constant without values is zeros.
  Tensor zeros = rt.constant(TensorMeta{{3}});
  EXPECT_EQ(zeros.to_host(), (std::vector<float>{0.0f, 0.0f, 0.0f}));
  EXPECT_EQ(element_size(DType::uint8), 1u);
  EXPECT_STREQ(to_string(DType::uint8), "uint8");
}

TEST(Runtime, EqualScoresGoToTheLatestCandidate) {
  // size scores equal-sized storages the same; the tie goes to the one that became a candidate last (the DTR
  // authors' arrival order), with the index as with the scan.
  for (const EvictionSearch search : {EvictionSearch::scan, EvictionSearch::index}) {
    SCOPED_TRACE(to_string(search));
    Config config = deterministic_config(64 + 4 * 128, BudgetMode::bytes, "size");
    config.search = search;
    Runtime rt(config);
    Tensor x = constant(rt, {16}, 1.0f);  // 64 B
    Tensor a = rt.call1(ops::concat2(), {x, x});  // 128 B each: candidates in the order a, b, c
    Tensor b = rt.call1(ops::concat2(), {x, x});
    Tensor c = rt.call1(ops::concat2(), {x, x});
    // d is computed from a: d becomes a candidate, then a again (inputs are released after outputs).
    Tensor d = rt.call1(ops::scale(), {a}, Attrs{{"factor", 2.0}});
    EXPECT_EQ(rt.stats().evictions, 0u);
    Tensor e = rt.call1(ops::concat2(), {x, x});  // one 128 B storage must go: a, the latest
    EXPECT_EQ(rt.stats().evictions, 1u);
    EXPECT_FALSE(a.resident());
    EXPECT_TRUE(b.resident() && c.resident() && d.resident() && e.resident());
  }
}

TEST(Runtime, SiblingsOfAMultiOutputOpComeBackTogether) {
  Runtime rt(deterministic_config());
  Tensor x = constant(rt, {6, 2}, 1.0f);
  std::vector<Tensor> halves = rt.call(ops::split2(), std::vector<Tensor>{rt.call1(ops::relu(), {x})});
  ASSERT_EQ(halves.size(), 2u);
  const std::vector<float> first = halves[0].to_host();
  const std::vector<float> second = halves[1].to_host();
  EXPECT_TRUE(rt.evict(halves[0]));
  EXPECT_TRUE(rt.evict(halves[1]));
  Tensor y = rt.call1(ops::scale(), {halves[0]}, Attrs{{"factor", 2.0}});
  // Recomputing the first half replays split2 once, which brings its sibling back too, and relu before it.
  EXPECT_TRUE(halves[1].resident());
  EXPECT_EQ(rt.stats().rematerializations, 2u);
  EXPECT_TRUE(bitwise_equal(halves[0].to_host(), first));
  EXPECT_TRUE(bitwise_equal(halves[1].to_host(), second));
}

TEST(Runtime, ViewsShareTheirStorageAndSeeItRematerialized) {
  Runtime rt(deterministic_config());
  Tensor x = constant(rt, {4, 3}, 1.0f);
  Tensor y = rt.call1(ops::scale(), {x}, Attrs{{"factor", 2.0}});
  const std::vector<float> all = y.to_host();
  Tensor rows = rt.view(y, {2, 3}, 3);  // rows 1 and 2
  Tensor flat = rt.view(y, {12});
  EXPECT_EQ(rows.to_host(), std::vector<float>(all.begin() + 3, all.begin() + 9));
  EXPECT_EQ(rt.resident_bytes(), 2u * 48u);  // no copy
  y = Tensor();  // the views still hold the storage: not evicted
  EXPECT_TRUE(rows.resident());
  EXPECT_EQ(rt.stats().eager_evictions, 0u);
  ASSERT_TRUE(rt.evict(rows));  // evicting a view evicts its storage ...
  EXPECT_FALSE(flat.resident());
  Tensor z = rt.call1(ops::relu(), {rows});  // ... and an op on the view brings it back
  EXPECT_EQ(z.to_host(), std::vector<float>(all.begin() + 3, all.begin() + 9));
  EXPECT_TRUE(flat.resident());
  EXPECT_EQ(flat.to_host(), all);
  EXPECT_EQ(rt.stats().rematerializations, 1u);
  EXPECT_THROW(rt.view(flat, {13}), ShapeError);
  EXPECT_THROW(rt.view(flat, {2, 3}, 7), ShapeError);
  EXPECT_THROW(rt.view(flat, {-1}), ShapeError);
  EXPECT_THROW(rt.view(Tensor(), {1}), InvalidArgument);
}


TEST_P(InPlace, UpdatesNeverLeakIntoRecomputations) {
  Runtime rt(config());
  Tensor x = constant(rt, {4}, 1.0f);
  Tensor w = constant(rt, {4}, 2.0f);  // a parameter
  Tensor y = rt.call1(ops::mul(), {x, w});
  Tensor z = rt.call1(ops::relu(), {y});
  const std::vector<float> y_before = y.to_host();
  const std::vector<float> z_before = z.to_host();
  Tensor w_alias = w;  // a copy of the handle sees the update too
  rt.assign(w, ops::add(), {w, w});
  rt.assign(y, ops::scale(), {y}, Attrs{{"factor", -1.0}});
  EXPECT_EQ(w_alias.to_host(), (std::vector<float>{4.0f, 4.5f, 5.0f, 5.5f}));
  EXPECT_FALSE(rt.evict(w));  // the new parameter value is a constant too
  // z was computed from the old y, which was computed from the old w. Copy-on-write recomputes it from the
  // old values; pin-dependents made it a constant before the old values went.
  EXPECT_EQ(rt.evict(z), copy_on_write());
  EXPECT_TRUE(bitwise_equal(z.to_host(), z_before));
  // y's new value is -1 * its old value: recomputable while the old value is kept (copy-on-write only).
  EXPECT_EQ(rt.evict(y), copy_on_write());
  std::vector<float> negated = y_before;
  for (float& v : negated) v = -v;
  EXPECT_TRUE(bitwise_equal(y.to_host(), negated));
  EXPECT_THROW(rt.assign(w, ops::sum(), {w}), ShapeError);
  Tensor v = rt.view(w, {2}, 2);
  EXPECT_TRUE(v.is_view());
  EXPECT_FALSE(w.is_view());
  EXPECT_THROW(rt.assign(v, ops::relu(), {v}), InvalidArgument);
}

TEST_P(InPlace, RepeatedParameterUpdatesDoNotAccumulateOldValues) {
  Runtime rt(config());
  Tensor w = constant(rt, {256}, 0.0f);
  Tensor step = constant(rt, {256}, 1.0f);
  const std::uint64_t before = rt.resident_bytes();
  for (int i = 0; i < 100; ++i) rt.assign(w, ops::add(), {w, step});
  EXPECT_EQ(rt.resident_bytes(), before);  // each old value is freed once nothing needs it
  EXPECT_EQ(w.to_host()[0], 100.0f);
}

TEST_P(InPlace, OldParameterValueStaysOnlyUnderCopyOnWrite) {
  Runtime rt(config());
  Tensor x = constant(rt, {64}, 1.0f);
  Tensor w = constant(rt, {64}, 2.0f);
  Tensor y = rt.call1(ops::mul(), {x, w});  // its recomputation needs w's old value
  const std::vector<float> y_before = y.to_host();
  ASSERT_TRUE(rt.evict(y));
  const std::uint64_t before = rt.resident_bytes();
  rt.assign(w, ops::add(), {w, w});
  if (copy_on_write()) {
    EXPECT_EQ(rt.resident_bytes(), before + 256);  // the old w (a constant) stays for y; y stays evicted
    EXPECT_FALSE(y.resident());
  } else {
    EXPECT_EQ(rt.resident_bytes(), before + 256);  // y came back and is pinned; the old w is gone
    EXPECT_TRUE(y.resident());
    EXPECT_FALSE(rt.evict(y));
  }
  EXPECT_TRUE(bitwise_equal(y.to_host(), y_before));
  y = Tensor();  // nothing needs the old w any more either way
  EXPECT_EQ(rt.resident_bytes(), before);
}

// assign(target, value): a value computed before takes the target's place under the same rules as an op's.
TEST_P(InPlace, AssigningAComputedValueFollowsTheOpsRules) {
  Runtime rt(config());
  Tensor x = constant(rt, {4}, 1.0f);
  Tensor w = constant(rt, {4}, 2.0f);
  Tensor y = rt.call1(ops::mul(), {x, w});
  const std::vector<float> y_before = y.to_host();
  Tensor w_alias = w;
  const std::uint64_t before = rt.resident_bytes();
  for (int i = 0; i < 10; ++i) {
    Tensor doubled = rt.call1(ops::add(), {w, w});
    rt.assign(w, doubled);
    EXPECT_FALSE(rt.evict(doubled));  // the new parameter value is a constant, under both names
  }
  EXPECT_EQ(w_alias.to_host(), (std::vector<float>{2048.0f, 2304.0f, 2560.0f, 2816.0f}));
  // Old values do not accumulate: copy-on-write keeps the first one for y, pin-dependents made y a constant.
  EXPECT_EQ(rt.resident_bytes(), before + (copy_on_write() ? 16 : 0));
  EXPECT_EQ(rt.evict(y), copy_on_write());
  EXPECT_TRUE(bitwise_equal(y.to_host(), y_before));
  // A computed target takes a computed value and stays recomputable under copy-on-write.
  Tensor negated = rt.call1(ops::scale(), {y}, Attrs{{"factor", -1.0}});
  rt.assign(y, negated);
  negated = Tensor();
  EXPECT_EQ(rt.evict(y), copy_on_write());
  EXPECT_EQ(y.to_host()[1], -y_before[1]);
  rt.assign(w, w);  // itself: nothing changes
  EXPECT_EQ(w.to_host(), w_alias.to_host());
  // An evicted value is remade before it becomes a constant (a constant has no producer to remake it from).
  Tensor remade = rt.call1(ops::relu(), {x});
  const std::vector<float> remade_values = remade.to_host();
  ASSERT_TRUE(rt.evict(remade));
  Tensor target = constant(rt, {4}, 0.0f);
  rt.assign(target, remade);
  EXPECT_TRUE(remade.resident());
  EXPECT_FALSE(rt.evict(target));
  EXPECT_EQ(target.to_host(), remade_values);
  expect_error<ShapeError>([&] { rt.assign(w, rt.call1(ops::sum(), {w})); },
                           {"assign: the value has shape [] and dtype float32, the target [4] and float32"});
  Tensor v = rt.view(w, {2}, 2);
  expect_error<InvalidArgument>([&] { rt.assign(v, rt.view(x, {2}, 0)); }, {"assign: the target is a view"});
  expect_error<InvalidArgument>([&] { rt.assign(w, rt.view(x, {2}, 0)); }, {"assign: the value is a view"});
  expect_error<InvalidArgument>([&] { rt.assign(w, Tensor()); }, {"assign: the value is undefined"});
  Runtime other(config());
  expect_error<InvalidArgument>([&] { rt.assign(w, constant(other, {4}, 1.0f)); },
                                {"assign: the value belongs to another runtime"});
}

TEST_P(InPlace, ViewsOfTheTargetKeepTheOldValue) {
  Runtime rt(config());
  Tensor w = constant(rt, {4}, 2.0f);
  Tensor x = constant(rt, {4}, 1.0f);
  Tensor v = rt.view(w, {2}, 2);
  Tensor y = rt.call1(ops::mul(), {x, w});
  const std::vector<float> y_before = y.to_host();
  rt.assign(w, ops::add(), {w, w});
  EXPECT_EQ(v.to_host(), (std::vector<float>{2.5f, 2.75f}));
  EXPECT_EQ(w.to_host(), (std::vector<float>{4.0f, 4.5f, 5.0f, 5.5f}));
  // The old storage lives on in the view, so even pin-dependents keeps y recomputable (copy-on-write).
  ASSERT_TRUE(rt.evict(y));
  EXPECT_TRUE(bitwise_equal(y.to_host(), y_before));
}

INSTANTIATE_TEST_SUITE_P(Runtime, InPlace, ::testing::Values(InplaceMode::copy_on_write, InplaceMode::pin_dependents),
                         [](const ::testing::TestParamInfo<InplaceMode>& info) {
                           return info.param == InplaceMode::copy_on_write ? std::string("CopyOnWrite")
                                                                           : std::string("PinDependents");
                         });

TEST(Runtime, PinDependentsThatDoNotFitIsOutOfMemoryAndChangesNothing) {
  // Budget: three 1 KiB tensors. Copy-on-write needs x, the old w and the new w; pin-dependents would also need
  // y back in memory before the old w can go.
  Config c = deterministic_config(3 * KiB + 512);
  c.inplace = InplaceMode::pin_dependents;
  Runtime rt(c);
  Tensor x = constant(rt, {256}, 1.0f);
  Tensor w = constant(rt, {256}, 2.0f);
  Tensor y = rt.call1(ops::mul(), {x, w});
  const std::vector<float> y_before = y.to_host();
  const std::vector<float> w_before = w.to_host();
  ASSERT_TRUE(rt.evict(y));
  try {
    rt.assign(w, ops::add(), {w, w});
    ADD_FAILURE() << "the dependents fitted";
  } catch (const OutOfMemory& e) {
    EXPECT_NE(std::string(e.what()).find("'add'"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(bitwise_equal(w.to_host(), w_before));  // not updated
  EXPECT_TRUE(bitwise_equal(y.to_host(), y_before));  // still recomputable from it
  ASSERT_TRUE(rt.evict(y));
  c.inplace = InplaceMode::copy_on_write;
  Runtime cow(c);
  Tensor x2 = constant(cow, {256}, 1.0f);
  Tensor w2 = constant(cow, {256}, 2.0f);
  Tensor y2 = cow.call1(ops::mul(), {x2, w2});
  ASSERT_TRUE(cow.evict(y2));
  cow.assign(w2, ops::add(), {w2, w2});  // fits: y2 stays evicted
  EXPECT_TRUE(bitwise_equal(w2.to_host(), rt.call1(ops::add(), {w, w}).to_host()));
}

TEST(Runtime, RandomOpsRecomputeTheSameBits) {
  Runtime rt(deterministic_config());
  Tensor shape_of = constant(rt, {64}, 0.0f);
  Tensor r1 = rt.call1(ops::uniform(), {shape_of});
  Tensor r2 = rt.call1(ops::uniform(), {shape_of});
  const std::vector<float> v1 = r1.to_host();
  EXPECT_FALSE(bitwise_equal(v1, r2.to_host()));  // each call draws anew
  ASSERT_TRUE(rt.evict(r1));
  EXPECT_TRUE(bitwise_equal(r1.to_host(), v1));  // a recomputation draws the same
}

TEST(Runtime, DroppedHandlesAreEvictedAtOnceAndFreedWhenNothingNeedsThem) {
  Runtime rt(deterministic_config());
  Tensor a = constant(rt, {1024}, 0.0f);
  Tensor b = rt.call1(ops::relu(), {a});
  Tensor c = rt.call1(ops::relu(), {b});
  const std::uint64_t with_all = rt.resident_bytes();
  b = Tensor();  // c's closure still needs b: evicted, kept in the lineage
  EXPECT_EQ(rt.resident_bytes(), with_all - 4096);
  EXPECT_EQ(rt.stats().eager_evictions, 1u);
  const std::vector<float> before = c.to_host();
  ASSERT_TRUE(rt.evict(c));
  EXPECT_TRUE(bitwise_equal(c.to_host(), before));  // b recomputed on the way
  c = Tensor();
  a = Tensor();
  EXPECT_EQ(rt.resident_bytes(), 0u);
  EXPECT_EQ(rt.allocator().stats().allocated_bytes.current, 0u);
}

TEST(Runtime, ChainOfOneHundredThousandEvictedOpsRematerializesIteratively) {
  Runtime rt(deterministic_config());
  Tensor x = constant(rt, {4}, 1.0f);
  Tensor last = x;
  constexpr int kOps = 100'000;
  for (int i = 0; i < kOps; ++i) last = rt.call1(ops::relu(), {last});  // each intermediate's handle dies
  EXPECT_EQ(rt.stats().eager_evictions, static_cast<std::uint64_t>(kOps - 1));
  const std::vector<float> expected = last.to_host();
  ASSERT_TRUE(rt.evict(last));
  EXPECT_TRUE(bitwise_equal(last.to_host(), expected));
  EXPECT_EQ(rt.stats().rematerializations, static_cast<std::uint64_t>(kOps));
  last = Tensor();  // the whole chain is freed, iteratively too
  x = Tensor();
  EXPECT_EQ(rt.allocator().stats().allocated_bytes.current, 0u);
}

TEST(Runtime, ImpossibleBudgetNamesTheOpAndLeavesTheRuntimeUsable) {
  for (BudgetMode mode : {BudgetMode::bytes, BudgetMode::device}) {
    SCOPED_TRACE(to_string(mode));
    Runtime rt(deterministic_config(std::uint64_t{3} << 20, mode));
    Tensor a = constant(rt, {512, 512}, 0.0f);  // 1 MiB, a constant: cannot move
    Tensor b = constant(rt, {512, 512}, 1.0f);  // 1 MiB
    try {
      rt.call1(ops::matmul(), {a, b});  // needs 1 MiB more beside 2 MiB of pinned constants... fits
      Tensor big = constant(rt, {1024, 512}, 0.0f);  // 2 MiB: does not fit beside the constants
      FAIL() << "expected dtr::OutOfMemory";
    } catch (const OutOfMemory& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("out of memory"), std::string::npos) << message;
      EXPECT_NE(message.find("constants"), std::string::npos) << message;
    }
    try {
      Tensor c = rt.call1(ops::concat2(), {a, b});  // 2 MiB output: the budget cannot hold it
      FAIL() << "expected dtr::OutOfMemory";
    } catch (const OutOfMemory& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("running op 'concat2'"), std::string::npos) << message;
      EXPECT_NE(message.find("budget 3.00 MiB"), std::string::npos) << message;
      EXPECT_NE(message.find("constants 2.00 MiB"), std::string::npos) << message;
      // The memory's figures in either mode (a bytes budget reported zero reserved beside 2 MiB resident).
      EXPECT_EQ(e.info().budget_bytes, std::uint64_t{3} << 20);
      EXPECT_GE(e.info().allocated_bytes, std::uint64_t{2} << 20);
      EXPECT_GE(e.info().reserved_bytes, e.info().allocated_bytes);
    }
    // Still usable: nothing stays pinned, and smaller work fits.
    Tensor d = rt.call1(ops::add(), {a, b});
    EXPECT_EQ(d.to_host()[0], 1.0f);
  }
}

}  // namespace
}  // namespace dtr::test
