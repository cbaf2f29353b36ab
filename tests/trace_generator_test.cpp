// The synthetic training traces: deterministic, valid programs of the promised size, whose memory peaks where
// a real program's would and whose backward passes read what a framework's autograd reads.
#include "dtr/trace_generator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>

#include "dtr/sim.h"
#include "test_helpers.h"

namespace dtr::test {
namespace {

using sim::Instruction;
using Kind = Instruction::Kind;


// A trace as a program must be: every name read is live (defined and not released since), every RELEASE drops
// a live name, and every name a CALL or CONSTANT defines is new (a program does not overwrite a live name
// without saying so with COPY_FROM).
void expect_valid_program(const sim::Trace& trace) {
  std::vector<bool> live(trace.names.size(), false);
  auto use = [&](std::uint32_t name, const Instruction& in) {
    EXPECT_TRUE(live.at(name)) << trace.source << ":" << in.line << ": '" << trace.names[name] << "' is not live";
  };
  auto define = [&](std::uint32_t name, const Instruction& in) {
    EXPECT_FALSE(live.at(name)) << trace.source << ":" << in.line << ": '" << trace.names[name] << "' redefined";
    live[name] = true;
  };
  std::uint64_t calls = 0;
  for (const Instruction& in : trace.instructions) {
    switch (in.kind) {
      case Kind::constant:
        define(in.name, in);
        break;
      case Kind::call:
      case Kind::mutate:
        calls += 1;
        for (std::uint32_t a : in.args) use(a, in);
        for (const Instruction::Result& r : in.results) define(r.name, in);
        break;
      case Kind::copy:
        use(in.source, in);
        define(in.name, in);
        break;
      case Kind::copy_from:
        use(in.source, in);
        use(in.name, in);
        break;
      case Kind::make_constant:
        use(in.name, in);
        break;
      case Kind::release:
        use(in.name, in);
        live[in.name] = false;
        break;
      case Kind::annotate:
        break;
    }
  }
  EXPECT_EQ(calls, trace.calls);
  // summarize and an unbudgeted replay accept it, and the replay recomputes nothing.
  const sim::TraceSummary summary = sim::summarize(trace);
  const sim::ReplayResult replayed = sim::replay(trace, {});
  EXPECT_TRUE(replayed.feasible) << replayed.failure;
  EXPECT_FALSE(replayed.thrashed);
  EXPECT_EQ(replayed.evictions, 0U);
  EXPECT_EQ(replayed.remat_compute_ns, 0.0);
  EXPECT_EQ(replayed.base_compute_ns, summary.base_compute_ns);
  EXPECT_GT(summary.base_compute_ns, 0.0);
  // The replay pins CONSTANTs to the end, which summarize lets go once no name holds them; and a value bound to a
  // constant's name with COPY_FROM becomes a constant (Runtime::assign), which stays, once rebound again, for
  // as long as the lineage of what was computed from it needs it (copy-on-write). At most those bytes more.
  std::vector<std::uint64_t> result_bytes(trace.names.size(), 0);
  std::uint64_t assigned_bytes = 0;
  for (const Instruction& in : trace.instructions) {
    for (const Instruction::Result& r : in.results) result_bytes[r.name] = r.bytes;
    if (in.kind == Kind::copy_from) assigned_bytes += result_bytes[in.source];
  }
  EXPECT_GE(replayed.peak_resident_bytes, summary.peak_bytes);
  EXPECT_LE(replayed.peak_resident_bytes, summary.peak_bytes + summary.constant_bytes + assigned_bytes);
}

// Bytes of every storage the trace makes: what an unbudgeted replay would hold if nothing were released.
std::uint64_t bytes_made(const sim::Trace& trace) {
  std::uint64_t total = 0;
  for (const Instruction& in : trace.instructions) {
    if (in.kind == Kind::constant) total += in.bytes;
    for (const Instruction::Result& r : in.results) total += r.alias < 0 ? r.bytes : 0;
  }
  return total;
}

struct Kind_ {
  std::string name;
  std::function<sim::Trace(std::uint64_t seed)> defaults;
  std::function<sim::Trace(std::uint64_t ops)> sized;
};

// Each kind at its defaults (smaller where the default is slow for a unit test), and sized by op count.
std::vector<Kind_> kinds() {
  return {
      {"chain", [](std::uint64_t seed) { return sim::generate_chain({.seed = seed}); },
       [](std::uint64_t ops) { return sim::generate_chain(sim::sized_for_ops(sim::ChainOptions{}, ops)); }},
      {"resnet", [](std::uint64_t seed) { return sim::generate_resnet({.seed = seed}); },
       [](std::uint64_t ops) { return sim::generate_resnet(sim::sized_for_ops(sim::ResNetOptions{}, ops)); }},
      {"rnn", [](std::uint64_t seed) { return sim::generate_rnn({.seed = seed}); },
       [](std::uint64_t ops) { return sim::generate_rnn(sim::sized_for_ops(sim::RnnOptions{}, ops)); }},
      {"gan", [](std::uint64_t seed) { return sim::generate_gan({.unroll = 3, .seed = seed}); },
       [](std::uint64_t ops) { return sim::generate_gan(sim::sized_for_ops(sim::GanOptions{}, ops)); }},
      {"dag", [](std::uint64_t seed) { return sim::generate_dag({.seed = seed}); },
       [](std::uint64_t ops) { return sim::generate_dag(sim::sized_for_ops(sim::DagOptions{}, ops)); }},
  };
}

TEST(TraceGenerator, SameSeedSameTraceOtherSeedOtherTrace) {
  for (const Kind_& kind : kinds()) {
    SCOPED_TRACE(kind.name);
    const std::string first = trace_text(kind.defaults(7));
    EXPECT_EQ(first, trace_text(kind.defaults(7)));
    EXPECT_NE(first, trace_text(kind.defaults(8)));
  }
}

TEST(TraceGenerator, EveryKindIsAValidProgramAtDefaultSizes) {
  for (const Kind_& kind : kinds()) {
    SCOPED_TRACE(kind.name);
    expect_valid_program(kind.defaults(1));
  }
}

TEST(TraceGenerator, EveryKindIsAValidProgramAtOtherShapes) {
  const std::vector<sim::Trace> traces = {
      sim::generate_chain({.layers = 1}),
      sim::generate_chain({.layers = 500, .activation_bytes = 64}),
      sim::generate_resnet({.blocks_per_stage = 1, .stages = 1, .channels = 3, .batch = 1, .image_size = 1}),
      sim::generate_resnet({.blocks_per_stage = 2, .stages = 4, .channels = 8, .batch = 8, .image_size = 64}),
      sim::generate_rnn({.steps = 1, .layers = 1}),
      sim::generate_rnn({.steps = 20, .layers = 3, .hidden = 64, .input = 32, .vocabulary = 100, .batch = 4}),
      sim::generate_gan({.unroll = 1, .generator_layers = 1, .discriminator_layers = 1}),
      sim::generate_gan({.unroll = 2, .discriminator_layers = 2, .iterations = 3}),
      sim::generate_dag({.forward_ops = 1}),
      sim::generate_dag({.forward_ops = 400, .max_inputs = 1, .locality = 1, .parameters = 0}),
      sim::generate_dag(
          {.forward_ops = 3000, .max_inputs = 3, .locality = 200, .parameters = 300, .min_bytes = 4, .max_bytes = 4}),
  };
  for (const sim::Trace& trace : traces) {
    SCOPED_TRACE(trace.source);
    expect_valid_program(trace);
  }
}

TEST(TraceGenerator, OpCountsFollowTheOptions) {
  // The chain is exact: L layers, the loss, its seed gradient, its backward, L layer backwards, L updates.
  for (std::uint32_t layers : {1U, 10U, 333U})
    EXPECT_EQ(sim::generate_chain({.layers = layers}).calls, 3U * layers + 3);
  // The GAN of the defaults is the 10,000-op case.
  const std::uint64_t gan_ops = sim::generate_gan({}).calls;
  EXPECT_GE(gan_ops, 9000U);
  EXPECT_LE(gan_ops, 11000U);
  // The DAG's forward ops, plus a backward and gradient sums of about as many again.
  const std::uint64_t dag_ops = sim::generate_dag({.forward_ops = 2000}).calls;
  EXPECT_GE(dag_ops, 4000U);
  EXPECT_LE(dag_ops, 10000U);
  // Every kind, asked for an op count it can reach, lands within 10%.
  for (const Kind_& kind : kinds()) {
    for (std::uint64_t ops : {3000U, 12000U}) {
      SCOPED_TRACE(::testing::Message() << kind.name << ", " << ops << " ops");
      const double calls = static_cast<double>(kind.sized(ops).calls);
      EXPECT_GE(calls, 0.9 * static_cast<double>(ops));
      EXPECT_LE(calls, 1.1 * static_cast<double>(ops));
    }
  }
}

TEST(TraceGenerator, ReleasesKeepThePeakFarBelowEverythingMade) {
  for (const Kind_& kind : kinds()) {
    SCOPED_TRACE(kind.name);
    const sim::Trace trace = kind.defaults(1);
    const double made = static_cast<double>(bytes_made(trace));
    // The chain holds its activations until the backward reaches them: half of all it makes at most.
    EXPECT_LT(static_cast<double>(sim::summarize(trace).peak_bytes), 0.6 * made);
  }
  // A longer model does not hold more at once than it must: the RNN's peak grows by the saved state per step,
  // far less than it makes per step.
  const double peak_32 = static_cast<double>(sim::summarize(sim::generate_rnn({.steps = 32})).peak_bytes);
  const double peak_64 = static_cast<double>(sim::summarize(sim::generate_rnn({.steps = 64})).peak_bytes);
  const sim::Trace rnn_64 = sim::generate_rnn({.steps = 64});
  const double made_per_step = static_cast<double>(bytes_made(rnn_64)) / 64;
  EXPECT_LT((peak_64 - peak_32) / 32, 0.5 * made_per_step);
}

TEST(TraceGenerator, ChainBackwardReadsTheIncomingGradientAndItsLayersSavedInput) {
  const std::uint32_t layers = 12;
  const sim::Trace trace = sim::generate_chain({.layers = layers});
  std::vector<const Instruction*> forward;
  std::vector<const Instruction*> backward;
  bool in_backward = false;
  for (const Instruction& in : trace.instructions) {
    if (in.kind == Kind::annotate && in.op == "BACKWARD") in_backward = true;
    if (in.kind == Kind::call && in.op == "linear_relu") forward.push_back(&in);
    if (in.kind == Kind::call && in.op == "linear_relu_backward") backward.push_back(&in);
  }
  ASSERT_TRUE(in_backward);
  ASSERT_EQ(forward.size(), layers);
  ASSERT_EQ(backward.size(), layers);
  std::uint32_t incoming = trace.names.size();  // the gradient the previous backward op made
  for (const Instruction& in : trace.instructions) {
    if (in.kind == Kind::call && in.op == "mse_loss_backward") incoming = in.results.front().name;
  }
  ASSERT_LT(incoming, trace.names.size());
  for (std::uint32_t k = 0; k < layers; ++k) {
    const Instruction& layer = *forward[layers - 1 - k];  // the backward runs in reverse
    const Instruction& gradient = *backward[k];
    SCOPED_TRACE(::testing::Message() << "layer " << layers - 1 - k);
    EXPECT_EQ(gradient.args.at(0), incoming) << "reads the incoming gradient";
    EXPECT_EQ(gradient.args.at(1), layer.args.at(0)) << "reads the activation its layer saved";
    EXPECT_EQ(gradient.args.at(2), layer.args.at(1)) << "reads its layer's weight";
    // The first layer's input is data: only the weight gets a gradient.
    EXPECT_EQ(gradient.results.size(), k + 1 == layers ? 1U : 2U);
    incoming = gradient.results.front().name;
  }
}

TEST(TraceGenerator, ParametersAreUpdatedAndHeldPastTheEnd) {
  // The chain steps each weight in place; the RNN binds Adam's new values to the old names.
  const sim::Trace chain = sim::generate_chain({.layers = 5});
  std::set<std::uint32_t> released;
  std::map<std::uint32_t, int> mutated;
  for (const Instruction& in : chain.instructions) {
    if (in.kind == Kind::release) released.insert(in.name);
    if (in.kind == Kind::mutate) mutated[in.args.at(in.mutated.at(0))] += 1;
  }
  EXPECT_EQ(mutated.size(), 5U);
  for (const auto& [name, times] : mutated) {
    EXPECT_EQ(times, 1);
    EXPECT_EQ(released.count(name), 0U) << chain.names[name] << " is a parameter: the program keeps it";
  }
  const sim::Trace rnn = sim::generate_rnn({.steps = 3});
  int copy_froms = 0;
  for (const Instruction& in : rnn.instructions) copy_froms += in.kind == Kind::copy_from ? 1 : 0;
  EXPECT_EQ(copy_froms, 3 * 5);  // parameter, first and second moment of five parameters
}

TEST(TraceGenerator, GanBackwardDifferentiatesThroughTheUnrolledUpdates) {
  const sim::Trace trace = sim::generate_gan({.unroll = 3, .discriminator_layers = 2});
  std::size_t second_order = 0;
  std::size_t backward_annotations = 0;
  std::size_t widest = 0;
  for (const Instruction& in : trace.instructions) {
    if (in.kind == Kind::call && in.op.ends_with("_backward_backward")) ++second_order;
    if (in.kind == Kind::annotate && in.op == "BACKWARD") ++backward_annotations;
    if (in.kind == Kind::call) widest = std::max(widest, in.args.size());
  }
  EXPECT_EQ(backward_annotations, 1U);
  EXPECT_GT(second_order, 10U) << "the generator's loss reaches the discriminator's earlier updates";
  EXPECT_GE(widest, 3U);
}

TEST(TraceGenerator, BadOptionsNameTheOptionAndTheRange) {
  expect_error<InvalidArgument>([] { sim::generate_chain({.layers = 0}); }, {"chain: layers = 0", "expected 1 to"});
  expect_error<InvalidArgument>([] { sim::generate_resnet({.stages = 5, .image_size = 8}); },
                                {"resnet: image_size = 8", "expected 16 to"});
  expect_error<InvalidArgument>([] { sim::generate_rnn({.hidden = 0}); }, {"rnn: hidden = 0"});
  expect_error<InvalidArgument>([] { sim::generate_gan({.batch = 0}); }, {"gan: batch = 0"});
  expect_error<InvalidArgument>([] { sim::generate_dag({.max_inputs = 4}); },
                                {"dag: max_inputs = 4", "expected 1 to 3"});
  expect_error<InvalidArgument>([] { sim::generate_dag({.min_bytes = 100, .max_bytes = 10}); },
                                {"dag: max_bytes = 10"});
  expect_error<InvalidArgument>([] { sim::sized_for_ops(sim::ChainOptions{}, 0); }, {"ops = 0"});
}

}  // namespace
}  // namespace dtr::test
