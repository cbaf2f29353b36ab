// Batch norm in training as one op (batch_norm) against its two halves (batch_norm_stats, then
// batch_norm_normalize), which nn::batch_norm runs so that the runtime remakes an evicted y by the
// normalization alone. Measured through Runtime::call on the CPU, no budget, outputs freed after each call, on
// the zoo's batch-norm shapes at batch 128 (ResNet-32's three stages and U-Net's first level, DenseNet-BC's
// widest layers of its first block), alone and followed by a relu (nn::batch_norm_relu: the normalization's
// "relu" attribute against batch_norm then relu). Per round, in rotating order: the single op (+ relu), the
// pair, the normalization alone. Columns: the medians of each call's time, and the medians of the per-round
// ratios pair / single (what an unbudgeted step pays or saves) and normalization / single (what a remade output
// costs now, against what it cost before). The pair's output is checked equal (bitwise) to the single op's first.
//
// dtr-bench-batch-norm-split [--rounds N] (default 21).
#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench_main.h"
#include "dtr/ops.h"
#include "dtr/runtime.h"

namespace {

using dtr::bench::seconds;

void measure(const dtr::Shape& shape, const char* where, bool relu, int rounds) {
  dtr::Runtime rt;
  const dtr::TensorMeta meta{shape, dtr::DType::float32};
  std::vector<float> xs(static_cast<std::size_t>(meta.numel()));
  for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>((i * 7919) % 1009) / 97.0F - 5.0F;
  const dtr::Tensor x = rt.constant(meta, xs);
  const dtr::TensorMeta channel{{shape[1]}, dtr::DType::float32};
  const dtr::Tensor w = rt.constant(channel, std::vector<float>(static_cast<std::size_t>(shape[1]), 1.5F));
  const dtr::Tensor b = rt.constant(channel, std::vector<float>(static_cast<std::size_t>(shape[1]), 0.25F));
  const dtr::Attrs eps{{"eps", 1e-5}};
  const dtr::Tensor single_in[] = {x, w, b};
  const dtr::Tensor stats_in[] = {x};
  const std::vector<dtr::Tensor> kept = rt.call(dtr::ops::batch_norm_stats(), stats_in, eps);
  const dtr::Attrs with_relu{{"relu", std::int64_t{relu}}};
  const auto single = [&] {
    const dtr::Tensor y = rt.call(dtr::ops::batch_norm(), single_in, eps)[0];
    return relu ? rt.call1(dtr::ops::relu(), {y}) : y;
  };
  const auto pair = [&] {
    const std::vector<dtr::Tensor> stats = rt.call(dtr::ops::batch_norm_stats(), stats_in, eps);
    return rt.call1(dtr::ops::batch_norm_normalize(), {x, w, b, stats[0], stats[1]}, with_relu);
  };
  const auto normalize = [&] {
    return rt.call1(dtr::ops::batch_norm_normalize(), {x, w, b, kept[0], kept[1]}, with_relu);
  };
  if (single().to_host() != pair().to_host()) {
    std::fprintf(stderr, "dtr-bench-batch-norm-split: %s: the pair's output differs from batch_norm's\n",
                 dtr::to_string(shape).c_str());
    std::exit(1);
  }
  std::vector<double> t_single, t_pair, t_normalize, pair_ratio, normalize_ratio;
  for (int r = 0; r < rounds; ++r) {
    double t[3] = {};
    for (int k = 0; k < 3; ++k) {
      const int which = (r + k) % 3;
      if (which == 0) t[0] = seconds(single);
      if (which == 1) t[1] = seconds(pair);
      if (which == 2) t[2] = seconds(normalize);
    }
    t_single.push_back(t[0]);
    t_pair.push_back(t[1]);
    t_normalize.push_back(t[2]);
    pair_ratio.push_back(t[1] / t[0]);
    normalize_ratio.push_back(t[2] / t[0]);
  }
  std::printf("| %s | %s | %s | %.0f us | %.0f us | %.0f us | %.2f | %.2f |\n", where, dtr::to_string(shape).c_str(),
              relu ? "yes" : "no", dtr::bench::median(t_single) * 1e6, dtr::bench::median(t_pair) * 1e6,
              dtr::bench::median(t_normalize) * 1e6, dtr::bench::median(pair_ratio),
              dtr::bench::median(normalize_ratio));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"batch norm as one op against its two halves (batch_norm_stats, batch_norm_normalize)"};
  int rounds = 21;
  app.add_option("--rounds", rounds, "rounds per shape, the calls in rotating order")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  std::printf("| model | x | relu | batch_norm (+ relu), median | stats + normalize | normalize alone | pair / "
              "single | normalize / single |\n|---|---|---|---:|---:|---:|---:|---:|\n");
  for (const bool relu : {false, true}) {
    measure({128, 16, 28, 28}, "ResNet-32 stage 1, U-Net level 1", relu, rounds);
    measure({128, 32, 14, 14}, "ResNet-32 stage 2", relu, rounds);
    measure({128, 64, 7, 7}, "ResNet-32 stage 3", relu, rounds);
    measure({128, 48, 28, 28}, "DenseNet-BC bottleneck", relu, rounds);
    measure({128, 60, 28, 28}, "DenseNet-BC block 1, last layer", relu, rounds);
  }
  return 0;
}
