#!/usr/bin/env bash
# The main job: installs what is missing, builds, and runs dtr-sim on the DTR authors' ResNet-32 trace
# (../shared/traces, next to this checkout): every heuristic of the DTR paper over budgets from 10% to 100% of
# the unbudgeted peak, as tables, and the overhead-vs-budget plot in build/dtr-sim-resnet32-56.svg.
# DTR_DEMO_TRACE picks another trace; extra arguments go to dtr-sim (try --help).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
trace="${DTR_DEMO_TRACE:-}"
if [ -z "$trace" ]; then
  # The shared traces sit next to the checkout; a clone made elsewhere on this machine finds them in /work.
  for candidate in "$root/../shared/traces/resnet32-56.log" /work/shared/traces/resnet32-56.log; do
    if [ -f "$candidate" ]; then
      trace="$candidate"
      break
    fi
  done
fi
if [ -z "$trace" ] || [ ! -f "$trace" ]; then
  echo "dtr demo: no trace found (looked for ../shared/traces/resnet32-56.log next to the checkout);" \
       "set DTR_DEMO_TRACE to a DTR prototype log or a DTR_TRACE file" >&2
  exit 2
fi
"$root/scripts/setup.sh"
"$root/scripts/build.sh" "$root/build/release" -DCMAKE_BUILD_TYPE=Release
plot="$root/build/dtr-sim-$(basename "${trace%.*}").svg"
"$root/build/release/tools/dtr-sim" "$trace" --heuristic all --sweep 0.1:1.0:0.05 --plot "$plot" "$@"
echo "plot: $plot"
