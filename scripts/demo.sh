#!/usr/bin/env bash
# The main job: installs what is missing, builds, and runs dtr-alloc-demo (a training step's allocations
# under shrinking budgets, with the allocator's stats). Arguments go to the demo; try --help.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh" "$root/build/release" -DCMAKE_BUILD_TYPE=Release
exec "$root/build/release/tools/dtr-alloc-demo" "$@"
