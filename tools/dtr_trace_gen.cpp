// dtr-trace-gen: writes a synthetic training trace (include/dtr/trace_generator.h) in the DTR prototype's
// JSON-lines format, for dtr-sim, tests and benchmarks on a checkout with no recorded logs.
//
//   dtr-trace-gen KIND [--ops N | KIND's size options] [--seed S] -o FILE
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>

#include "dtr/check.h"
#include "dtr/dtr.h"

namespace {

namespace sim = dtr::sim;

// What every kind takes besides its own sizes.
struct Common {
  std::optional<std::uint64_t> ops;
  std::string output;
};

// A kind's subcommand: its size options, then --ops (which replaces the main one), --seed and -o.
template <typename Options>
void add_common_options(CLI::App* sub, Options& options, sim::Trace (*generator)(const Options&), Common& common,
                        CLI::Option* main_size, std::function<sim::Trace()>& generate) {
  sub->add_option("--seed", options.seed, "the seed: the same seed gives the same trace")->capture_default_str();
  sub->add_option("--ops", common.ops, "about this many ops (CALL and MUTATE): sets " + main_size->get_name())
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{10'000'000}))
      ->excludes(main_size);
  sub->add_option("-o,--output", common.output, "the trace file to write ('-': standard output)")->required();
  sub->callback([&options, &common, &generate, generator] {
    generate = [&options, &common, generator] {
      return generator(common.ops ? sim::sized_for_ops(options, *common.ops) : options);
    };
  });
}

// "chain  --layers --activation-bytes --seed --ops -o": the kinds and their options, for the main --help.
std::string kinds_footer(const CLI::App& app) {
  std::string text = "Kinds and their options (dtr-trace-gen KIND --help describes them):\n";
  for (const std::string_view kind : sim::kTraceKinds) {
    const CLI::App* sub = app.get_subcommand(std::string(kind));
    std::string names;
    for (const CLI::Option* option : sub->get_options()) {
      if (option->get_name() == "--help") continue;
      names.append(" ").append(option->get_name());
    }
    text += fmt::format("  {:<7}{}\n", kind, names);
  }
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  // CLI11 would call an unknown kind "not expected"; say what the kinds are instead.
  if (argc > 1 && argv[1][0] != '-' &&
      std::find(std::begin(sim::kTraceKinds), std::end(sim::kTraceKinds), std::string_view(argv[1])) ==
          std::end(sim::kTraceKinds)) {
    std::fprintf(stderr, "dtr-trace-gen: unknown kind '%s'; expected chain, resnet, rnn, gan or dag (see --help)\n",
                 argv[1]);
    return 2;
  }
  CLI::App app{
      "dtr-trace-gen: write a synthetic training trace (forward, loss, backward, parameter updates) in "
      "the DTR prototype's JSON-lines format, for dtr-sim"};
  app.require_subcommand(1);
  Common common;
  std::function<sim::Trace()> generate;

  sim::ChainOptions chain;
  CLI::App* sub = app.add_subcommand("chain", "an N-layer chain of similar ops, forward then backward");
  CLI::Option* main = sub->add_option("--layers", chain.layers, "layers")->capture_default_str();
  sub->add_option("--activation-bytes", chain.activation_bytes, "bytes of a layer's output (±20%)")
      ->capture_default_str();
  add_common_options(sub, chain, &sim::generate_chain, common, main, generate);

  sim::ResNetOptions resnet;
  sub = app.add_subcommand("resnet", "a CIFAR-style ResNet (residual blocks of conv, batch norm, relu; skip adds)");
  main = sub->add_option("--blocks-per-stage", resnet.blocks_per_stage, "residual blocks per stage")
             ->capture_default_str();
  sub->add_option("--stages", resnet.stages, "stages (channels double, images halve)")->capture_default_str();
  sub->add_option("--channels", resnet.channels, "channels of the first stage")->capture_default_str();
  sub->add_option("--batch", resnet.batch, "images per batch")->capture_default_str();
  sub->add_option("--image-size", resnet.image_size, "image width and height")->capture_default_str();
  add_common_options(sub, resnet, &sim::generate_resnet, common, main, generate);

  sim::RnnOptions rnn;
  sub = app.add_subcommand("rnn", "an LSTM unrolled over time steps with shared weights, then BPTT");
  main = sub->add_option("--steps", rnn.steps, "time steps")->capture_default_str();
  sub->add_option("--layers", rnn.layers, "stacked LSTM layers")->capture_default_str();
  sub->add_option("--hidden", rnn.hidden, "hidden units")->capture_default_str();
  sub->add_option("--input", rnn.input, "input features per step")->capture_default_str();
  sub->add_option("--vocabulary", rnn.vocabulary, "output classes per step")->capture_default_str();
  sub->add_option("--batch", rnn.batch, "sequences per batch")->capture_default_str();
  add_common_options(sub, rnn, &sim::generate_rnn, common, main, generate);

  sim::GanOptions gan;
  sub =
      app.add_subcommand("gan", "an unrolled GAN: the generator's loss backpropagates through k discriminator updates");
  main = sub->add_option("--unroll", gan.unroll, "discriminator updates unrolled (k)")->capture_default_str();
  sub->add_option("--generator-layers", gan.generator_layers, "linear layers of the generator")->capture_default_str();
  sub->add_option("--discriminator-layers", gan.discriminator_layers, "linear layers of the discriminator")
      ->capture_default_str();
  sub->add_option("--width", gan.width, "hidden units of both networks")->capture_default_str();
  sub->add_option("--latent", gan.latent, "the generator's input size")->capture_default_str();
  sub->add_option("--data", gan.data, "a sample's size")->capture_default_str();
  sub->add_option("--batch", gan.batch, "samples per batch")->capture_default_str();
  sub->add_option("--iterations", gan.iterations, "training iterations")->capture_default_str();
  add_common_options(sub, gan, &sim::generate_gan, common, main, generate);

  sim::DagOptions dag;
  sub = app.add_subcommand("dag", "a random DAG of 1-3-input ops with local connections, then its backward pass");
  main = sub->add_option("--forward-ops", dag.forward_ops, "forward ops (the backward pass adds about as many)")
             ->capture_default_str();
  sub->add_option("--max-inputs", dag.max_inputs, "inputs per op, at most (1 to 3)")->capture_default_str();
  sub->add_option("--locality", dag.locality, "inputs come from this many most recent values")->capture_default_str();
  sub->add_option("--parameters", dag.parameters, "parameters the ops may read")->capture_default_str();
  sub->add_option("--min-bytes", dag.min_bytes, "smallest tensor")->capture_default_str();
  sub->add_option("--max-bytes", dag.max_bytes, "largest tensor")->capture_default_str();
  add_common_options(sub, dag, &sim::generate_dag, common, main, generate);

  app.footer(kinds_footer(app));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ConversionError& e) {
    // CLI11 says only "Could not convert"; every option of every kind is a whole number.
    std::fprintf(stderr, "dtr-trace-gen: %s: expected a whole number (0 or more); --help lists the options\n",
                 e.what());
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  try {
    const sim::Trace trace = generate();
    if (common.output == "-") {
      sim::write_trace(trace, std::cout);
      std::cout.flush();
      if (!std::cout) DTR_THROW(dtr::IoError, "writing the trace to standard output failed (a full disk or a closed pipe?)");
      return 0;
    }
    sim::write_trace(trace, common.output);
    const sim::TraceSummary summary = sim::summarize(trace);
    std::printf("%s: %s, %zu instructions, %llu ops; unbudgeted peak %llu bytes, base compute %.3f ms\n",
                common.output.c_str(), trace.source.c_str(), trace.instructions.size(),
                static_cast<unsigned long long>(trace.calls), static_cast<unsigned long long>(summary.peak_bytes),
                summary.base_compute_ns / 1e6);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dtr-trace-gen: %s\n", e.what());
    return 1;
  }
  return 0;
}
