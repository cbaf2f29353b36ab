#!/usr/bin/env bash
# The main job: installs what is missing, builds, and runs dtr-sim on the DTR authors' ResNet-32 trace
# (../shared/traces, next to this checkout): every heuristic of the DTR paper over budgets from 10% to 100% of
# the unbudgeted peak, as tables, and the overhead-vs-budget plot in build/dtr-sim-resnet32-56.svg.
# DTR_DEMO_TRACE picks another trace; extra arguments go to dtr-sim (try --help).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
trace="${DTR_DEMO_TRACE:-$root/../shared/traces/resnet32-56.log}"
if [ ! -f "$trace" ]; then
  echo "dtr demo: no trace at $trace; set DTR_DEMO_TRACE to a DTR prototype log (or a DTR_TRACE file)" >&2
  exit 2
fi
"$root/scripts/setup.sh"
"$root/scripts/build.sh" "$root/build/release" -DCMAKE_BUILD_TYPE=Release
plot="$root/build/dtr-sim-$(basename "${trace%.*}").svg"
"$root/build/release/tools/dtr-sim" "$trace" --heuristic all --sweep 0.1:1.0:0.05 --plot "$plot" "$@"
echo "plot: $plot"
