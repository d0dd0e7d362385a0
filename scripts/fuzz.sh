#!/usr/bin/env bash
# `make fuzz` (not CI): every cargo-fuzz target in fuzz/ for a fixed budget each.
#
#   FUZZ_SECONDS=60 FUZZ_TARGETS="decode_record http_execute" bash scripts/fuzz.sh
#
# - Installs cargo-fuzz (`cargo install cargo-fuzz --locked`) when it is missing.
# - Builds on the stable toolchain (RUSTC_BOOTSTRAP=1, `-s none`: no sanitizer; the crates
#   deny `unsafe` code), into fuzz/target.
# - Each target starts from its committed seeds (fuzz/seeds/<target>) and regressions
#   (fuzz/regressions/<target>) copied into the local corpus fuzz/corpus/<target>, uses
#   its dictionary when fuzz/dicts/<target>.dict exists, and runs FUZZ_SECONDS (default
#   60) with -rss_limit_mb=4096 and -detect_leaks=0 (see fuzz/README.md).
# - Prints, and writes to target/fuzz/summary.md, one row per target: executions,
#   executions per second, corpus size, coverage, and the finding (a crashing input is
#   left in fuzz/artifacts/<target>/; move it to fuzz/regressions/<target>/ once fixed).
# Exits non-zero if any target found a crash or could not be built.
set -euo pipefail

cd "$(dirname "$0")/../fuzz"
SECONDS_EACH=${FUZZ_SECONDS:-60}
OUT=${FUZZ_LOG_DIR:-$PWD/../target/fuzz}
export RUSTC_BOOTSTRAP=1
# The fuzz workspace has its own lock file and build profile: keep its objects apart.
export CARGO_TARGET_DIR=$PWD/target

die() {
  echo "fuzz: ERROR: $*" >&2
  exit 1
}

case "$SECONDS_EACH" in
'' | *[!0-9]*) die "FUZZ_SECONDS must be a positive integer (got '$SECONDS_EACH')" ;;
esac

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz: cargo-fuzz not found; installing it (cargo install cargo-fuzz --locked)"
  cargo install cargo-fuzz --locked || die "cargo install cargo-fuzz failed"
fi

TARGETS=${FUZZ_TARGETS:-$(cargo fuzz list)}
[ -n "$TARGETS" ] || die "no fuzz targets found in fuzz/"
mkdir -p "$OUT"

echo "fuzz: ${TARGETS//$'\n'/ }: ${SECONDS_EACH}s each (stable + RUSTC_BOOTSTRAP=1, no sanitizer)"
: >"$OUT/build.log"

rows=()
failed=0
for t in $TARGETS; do
  corpus=corpus/$t
  mkdir -p "$corpus"
  for d in seeds/$t regressions/$t; do
    if [ -d "$d" ]; then cp -n "$d"/* "$corpus"/ 2>/dev/null || true; fi
  done
  extra=()
  [ -f "dicts/$t.dict" ] && extra+=("-dict=dicts/$t.dict")
  log=$OUT/$t.log
  # Built one at a time, just before its run: the first build compiles the shared crates.
  echo "fuzz: building $t"
  cargo fuzz build -s none "$t" >>"$OUT/build.log" 2>&1 \
    || { tail -n 40 "$OUT/build.log" >&2; die "cargo fuzz build $t failed (log above)"; }
  echo "fuzz: $t for ${SECONDS_EACH}s (log: $log)"
  if cargo fuzz run -s none "$t" "$corpus" -- -max_total_time="$SECONDS_EACH" \
    -rss_limit_mb=4096 -detect_leaks=0 -print_final_stats=1 "${extra[@]}" >"$log" 2>&1; then
    finding="none"
  else
    failed=$((failed + 1))
    artifact=$(grep -oE "artifacts/$t/[^ ]+" "$log" | tail -n 1 || true)
    why=$(grep -m1 -E "panicked at|ERROR: libFuzzer|deadly signal|out-of-memory|timeout" "$log" || echo "exit status non-zero")
    finding="CRASH: ${why:0:120} (${artifact:-no artifact})"
    echo "fuzz: $t FOUND A CRASH; tail of the log:" >&2
    tail -n 30 "$log" >&2
  fi
  execs=$(grep -oE "stat::number_of_executed_units: *[0-9]+" "$log" | grep -oE "[0-9]+$" | tail -n 1 || true)
  speed=$(grep -oE "stat::average_exec_per_sec: *[0-9]+" "$log" | grep -oE "[0-9]+$" | tail -n 1 || true)
  last=$(grep -E "^#[0-9]+" "$log" | tail -n 1 || true)
  cov=$(grep -oE "cov: [0-9]+" <<<"$last" | grep -oE "[0-9]+" || true)
  corp=$(grep -oE "corp: [0-9]+/[0-9]+[a-zA-Z]*" <<<"$last" | cut -d' ' -f2 || true)
  rows+=("| \`$t\` | ${SECONDS_EACH} s | ${execs:-?} | ${speed:-?} | ${corp:-?} | ${cov:-?} | $finding |")
done

{
  echo "| target | budget | executions | execs/s | corpus (inputs/bytes) | coverage (edges) | findings |"
  echo "|---|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
} | tee "$OUT/summary.md"
[ "$failed" -eq 0 ] || die "$failed target(s) found a crash (artifacts in fuzz/artifacts/)"
