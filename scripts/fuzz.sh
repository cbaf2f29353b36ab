#!/usr/bin/env bash
# scripts/fuzz.sh [-t SECONDS] [--merge] [--build-only] [TARGET...]: builds the fuzz targets (fuzz/README.md)
# with clang, libFuzzer, AddressSanitizer and UndefinedBehaviorSanitizer in build/fuzz, then runs each for
# SECONDS (default 60; $DTR_FUZZ_TIME) from its corpus in fuzz/corpus/TARGET.
#   TARGET          trace_reader, env_values, state_dict, idx_reader, differential (default: all five, one after
#                   the other)
#   -t SECONDS      how long each target runs (libFuzzer's -max_total_time)
#   --merge         afterwards, add the inputs found that reach new code to fuzz/corpus/TARGET (-merge=1;
#                   review them: the kept corpus should stay a few dozen small files per target)
#   --build-only    configure and build, run nothing
# Inputs found go to build/fuzz/corpus/TARGET (kept: the next run starts from them too); a crash, a hang, a
# leak or a contract violation is saved as build/fuzz/finds/TARGET/{crash,timeout,leak,oom}-<sha1> (replay it
# with build/fuzz/fuzz/dtr-fuzz-TARGET FILE). Exits 1 when any target found one. Extra libFuzzer flags:
# $DTR_FUZZ_FLAGS (e.g. "-fork=1 -ignore_crashes=1" to go on past a failure); the build folder: $DTR_FUZZ_BUILD_DIR.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${DTR_FUZZ_BUILD_DIR:-$root/build/fuzz}"
seconds="${DTR_FUZZ_TIME:-60}"
merge=0
build_only=0
targets=()
all_targets=(trace_reader env_values state_dict idx_reader differential)
while (($#)); do
  case "$1" in
    -t | --time) seconds="$2"; shift 2 ;;
    --merge) merge=1; shift ;;
    --build-only) build_only=1; shift ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; exit 0 ;;
    -*) echo "scripts/fuzz.sh: unknown option $1 (--help lists them)" >&2; exit 2 ;;
    *)
      if [[ " ${all_targets[*]} " != *" $1 "* ]]; then
        echo "scripts/fuzz.sh: no target '$1'; the targets: ${all_targets[*]}" >&2
        exit 2
      fi
      targets+=("$1"); shift ;;
  esac
done
((${#targets[@]})) || targets=("${all_targets[@]}")
[[ "$seconds" =~ ^[0-9]+$ ]] || { echo "scripts/fuzz.sh: -t takes whole seconds, not '$seconds'" >&2; exit 2; }

for tool in clang clang++ cmake ninja; do
  command -v "$tool" >/dev/null || { echo "scripts/fuzz.sh: $tool is missing (apt install clang cmake ninja-build)" >&2; exit 1; }
done

# libdtr is compiled with -fsanitize=fuzzer-no-link (coverage for libFuzzer) besides the sanitizers; only the
# five programs and libdtr are built: no tests, tools, benchmarks or CUDA.
start=$(date +%s)
cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1" \
  -DDTR_SANITIZE=fuzzer-no-link,address,undefined -DDTR_FUZZ=ON -DBUILD_SHARED_LIBS=OFF \
  -DDTR_BUILD_TESTS=OFF -DDTR_BUILD_TOOLS=OFF -DDTR_BUILD_BENCHMARKS=OFF -DDTR_WITH_CUDA=OFF >/dev/null
programs=()
for target in "${targets[@]}"; do programs+=("dtr-fuzz-${target//_/-}"); done
cmake --build "$build_dir" --parallel "$(nproc)" --target "${programs[@]}"
echo "scripts/fuzz.sh: configured and built in $(($(date +%s) - start)) s"
((build_only)) && exit 0

# Inputs of up to this many bytes (libFuzzer's default is 4096, or the corpus's largest): above the 2048-byte
# bound on messages (fuzz/fuzz_check.h), so that a value echoed whole shows.
declare -A max_len=([trace_reader]=8192 [env_values]=4096 [state_dict]=8192 [idx_reader]=4096 [differential]=4096)
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
failed=()
summary=()
for target in "${targets[@]}"; do
  program="$build_dir/fuzz/dtr-fuzz-${target//_/-}"
  found="$build_dir/corpus/$target"
  finds="$build_dir/finds/$target"
  log="$build_dir/logs/$target.log"
  mkdir -p "$found" "$finds" "$(dirname "$log")"
  echo "scripts/fuzz.sh: $target for $seconds s (log: $log)"
  status=0
  dict=()  # the differential target has none: its bytes are choices, not tokens
  [[ -f "$root/fuzz/dict/$target.dict" ]] && dict=(-dict="$root/fuzz/dict/$target.dict")
  # shellcheck disable=SC2086  # DTR_FUZZ_FLAGS is a list of flags
  "$program" -max_total_time="$seconds" -max_len="${max_len[$target]}" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 "${dict[@]}" -artifact_prefix="$finds/" ${DTR_FUZZ_FLAGS:-} \
    "$found" "$root/fuzz/corpus/$target" >"$log" 2>&1 || status=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  if [[ -z "$runs" ]]; then  # -fork mode prints no final stats: its last status line instead
    runs=$(sed -n 's/^#\([0-9]*\): cov.*/\1/p' "$log" | tail -1)
    speed=$(sed -n 's/^#[0-9]*: cov.* exec\/s \([0-9]*\).*/\1/p' "$log" | tail -1)
  fi
  coverage=$(grep -o 'cov: [0-9]*' "$log" | tail -1 || true)
  if ((status != 0)); then
    failed+=("$target")
    grep -E '^==[0-9]+==ERROR|CONTRACT VIOLATION|runtime error|^SUMMARY|Test unit written to' "$log" | head -8 || true
    summary+=("$target: FOUND A BUG (exit $status; $runs runs, $speed exec/s, $coverage); see $log and $finds/")
  else
    summary+=("$target: ok ($runs runs, $speed exec/s, $coverage)")
  fi
  if ((merge)); then
    before=$(find "$root/fuzz/corpus/$target" -type f | wc -l)
    "$program" -merge=1 -max_len="${max_len[$target]}" -timeout=10 -rss_limit_mb=2048 \
      "$root/fuzz/corpus/$target" "$found" >>"$log" 2>&1 || { failed+=("$target (merge)"); }
    after=$(find "$root/fuzz/corpus/$target" -type f | wc -l)
    summary+=("  merged into fuzz/corpus/$target: $((after - before)) new inputs")
  fi
done
printf '%s\n' "${summary[@]}"
if ((${#failed[@]})); then
  echo "scripts/fuzz.sh: found bugs in: ${failed[*]}" >&2
  exit 1
fi
