#!/usr/bin/env bash
# Fuzzes RedDot's parsers of untrusted input with libFuzzer: the event decoder and rules
# mapping (events), the badge path validators (paths), the query service's query parameters and
# headers (http), the migration file reader (migrations), and the Swift client's Server-Sent
# Events parser (sse), HTTP response reader (response) and offline cache file (cache), the change
# feed's records, webhook subscriptions and push devices (hooks), and the change log's node
# list's two readers (changelog). Each target checks invariants of
# what it reads (round trips, agreeing validators, ranges), not only that nothing traps.
#
#   deploy/fuzz.sh                   # every target for 300 s
#   deploy/fuzz.sh 20                # every target for 20 s (deploy/test.sh does this)
#   deploy/fuzz.sh 600 events http   # some targets
#
# It builds Sources/reddot-fuzz with -sanitize=fuzzer into its own scratch path (.build-fuzz),
# starts from the seeds in Tests/FuzzCorpus/<target>/ plus what earlier runs found
# (.build-fuzz/corpus/<target>/), and runs the targets one after another. A crash or a broken
# invariant stops the run with exit status 1, the message, and the reproducer's path and bytes
# (replay it with `.build/debug/reddot-fuzz <target> <file>`; make it a regression test).
set -euo pipefail
cd "$(dirname "$0")/.."
root_dir=$(pwd)

say() { printf '[fuzz.sh] %s\n' "$*" >&2; }

seconds=${1:-300}
if [ $# -gt 0 ]; then shift; fi
case $seconds in
  '' | *[!0-9]*) say "the duration is a number of seconds, not '$seconds'"; exit 64 ;;
esac
all_targets=(events paths http migrations sse response cache hooks changelog)
if [ $# -gt 0 ]; then targets=("$@"); else targets=("${all_targets[@]}"); fi
for target in "${targets[@]}"; do
  case " ${all_targets[*]} " in
    *" $target "*) ;;
    *) say "unknown target '$target'; the targets are: ${all_targets[*]}"; exit 64 ;;
  esac
done

scratch="$root_dir/.build-fuzz"
build_log="$scratch/build.log"
mkdir -p "$scratch"
started=$(date +%s)
fuzz_build=(swift build --scratch-path "$scratch" --product reddot-fuzz -Xswiftc -sanitize=fuzzer -Xswiftc -DFUZZING)
if ! "${fuzz_build[@]}" >"$build_log" 2>&1; then
  say "the fuzz build failed:"; grep -E 'error' "$build_log" | head -30 >&2; exit 1
fi
binary="$("${fuzz_build[@]}" --show-bin-path)/reddot-fuzz"
say "built $binary in $(( $(date +%s) - started )) s"

failed=0
for target in "${targets[@]}"; do
  corpus="$scratch/corpus/$target"
  artifacts="$scratch/artifacts/$target"
  mkdir -p "$corpus" "$artifacts"
  options=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1
    -artifact_prefix="$artifacts/")
  if [ -f "Tests/FuzzCorpus/$target.dict" ]; then options+=(-dict="Tests/FuzzCorpus/$target.dict"); fi
  log="$scratch/$target.log"
  say "fuzzing $target for $seconds s"
  # The Swift runtime's backtracer would take the crash before libFuzzer writes the reproducer.
  if SWIFT_BACKTRACE=enable=no REDDOT_FUZZ_TARGET="$target" \
    timeout $(( seconds + 120 )) "$binary" "${options[@]}" "$corpus" "Tests/FuzzCorpus/$target" >"$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    coverage=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -n 1 | sed -E 's/.*(cov: [0-9]+ ft: [0-9]+ corp: [^ ]+).*/\1/' || true)
    say "$target: ok, ${runs:-?} inputs (${speed:-?}/s), $coverage"
  else
    failed=1
    say "$target: FAILED (log: $log)"
    grep -E 'Fatal error|invariant broken|ERROR: libFuzzer|SUMMARY|Test unit written|^Base64' "$log" | head -20 >&2 || tail -n 30 "$log" >&2
    reproducer=$(sed -n 's/.*Test unit written to //p' "$log" | tail -n 1)
    if [ -n "$reproducer" ]; then
      say "reproducer: $reproducer ($(wc -c <"$reproducer") bytes); replay: .build/debug/reddot-fuzz $target $reproducer"
      od -A d -c "$reproducer" | head -n 20 >&2
    fi
    break
  fi
done
say "done in $(( $(date +%s) - started )) s"
exit "$failed"
