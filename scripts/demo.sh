#!/usr/bin/env bash
# The main job: installs what is missing, builds, and runs dtr-train's default: ResNet-32, batch 128, on
# Fashion-MNIST (Debian's dataset-fashion-mnist), trained the same steps five ways in one process: unbudgeted,
# static checkpointing with sqrt(N) segments, and DTR at static checkpointing's peak and at 50% and 30% of the
# unbudgeted peak, as many steps as fit in about five minutes; then one table of memory, evictions,
# recomputation and step time, equal losses in every row, and test accuracy. The table also goes to
# build/dtr-train-compare.csv and the step-time-against-memory plot to build/dtr-train-compare.svg. Extra
# arguments go to dtr-train (try --help; e.g. --model transformer, --steps 20, --time-budget 120).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh" "$root/build/release" -DCMAKE_BUILD_TYPE=Release
"$root/build/release/tools/dtr-train" --compare --csv "$root/build/dtr-train-compare.csv" \
  --plot "$root/build/dtr-train-compare.svg" "$@"
echo "table: $root/build/dtr-train-compare.csv, plot: $root/build/dtr-train-compare.svg"
