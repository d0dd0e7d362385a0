#!/usr/bin/env bash
# `make test-stress`: the test suites on a saturated machine, several times in a row.
#
#   STRESS_RUNS=3 STRESS_TARGETS="test" STRESS_NG_ARGS="--cpu 2 --io 1" bash scripts/test-stress.sh
#
# 1. Finds stress-ng; installs Debian's stress-ng package when it is missing (as root,
#    through apt-get). Fails loudly if it cannot: a stress run without the load proves
#    nothing.
# 2. Starts `stress-ng $STRESS_NG_ARGS` (default: two CPU hogs and one I/O hog, i.e. a
#    2-core machine at full load plus sync(2) pressure) in its own process group.
# 3. Runs `make $STRESS_TARGETS` (default `test`, what CI runs) STRESS_RUNS times (default
#    3), every run to the end even after a failure, each logged to target/stress/run-N.log.
# 4. Stops stress-ng on every exit path (trap), prints one line per run (status, wall
#    time) and exits non-zero if any run failed.
#
# No test is retried: a run that fails is a failure to fix at its cause.
set -euo pipefail

cd "$(dirname "$0")/.."
RUNS=${STRESS_RUNS:-3}
TARGETS=${STRESS_TARGETS:-test}
NG_ARGS=${STRESS_NG_ARGS:---cpu 2 --io 1}
LOG_DIR=${STRESS_LOG_DIR:-$PWD/target/stress}

die() {
  echo "test-stress: ERROR: $*" >&2
  exit 1
}

case "$RUNS" in
'' | *[!0-9]*) die "STRESS_RUNS must be a positive integer (got '$RUNS')" ;;
esac
[ "$RUNS" -ge 1 ] || die "STRESS_RUNS must be at least 1 (got $RUNS)"

# --- 1. stress-ng ---------------------------------------------------------------
if ! command -v stress-ng >/dev/null 2>&1; then
  echo "test-stress: stress-ng not found; installing Debian's stress-ng package"
  [ "$(id -u)" -eq 0 ] || die "stress-ng is missing and this is not root: install it (Debian: apt-get install stress-ng)"
  command -v apt-get >/dev/null 2>&1 || die "stress-ng is missing and apt-get is not available: install stress-ng"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y --no-install-recommends stress-ng >/tmp/test-stress-apt.log 2>&1; then
    apt-get update >>/tmp/test-stress-apt.log 2>&1 || true
    apt-get install -y --no-install-recommends stress-ng >>/tmp/test-stress-apt.log 2>&1 \
      || { tail -n 30 /tmp/test-stress-apt.log >&2; die "apt-get install stress-ng failed (log above)"; }
  fi
  command -v stress-ng >/dev/null 2>&1 || die "stress-ng was installed but is not on PATH"
fi

# --- 2. the load ----------------------------------------------------------------
mkdir -p "$LOG_DIR"
STRESS_PID=
stop_stress() {
  if [ -n "$STRESS_PID" ]; then
    # stress-ng runs in its own process group (setsid): stop the group, i.e. its workers too.
    kill -TERM -- "-$STRESS_PID" 2>/dev/null || true
    wait "$STRESS_PID" 2>/dev/null || true
    STRESS_PID=
    echo "test-stress: stress-ng stopped"
  fi
}
trap stop_stress EXIT
trap 'stop_stress; exit 130' INT
trap 'stop_stress; exit 143' TERM

# --timeout: a backstop so that the load can never outlive this script by much, even if
# the script itself is SIGKILLed (its trap cannot run then).
# shellcheck disable=SC2086
setsid stress-ng $NG_ARGS --timeout 6h --quiet >"$LOG_DIR/stress-ng.log" 2>&1 &
STRESS_PID=$!
sleep 1
kill -0 "$STRESS_PID" 2>/dev/null \
  || { cat "$LOG_DIR/stress-ng.log" >&2; die "stress-ng $NG_ARGS did not start (log above)"; }
echo "test-stress: stress-ng $NG_ARGS running (pid $STRESS_PID); $RUNS run(s) of make $TARGETS"

# --- 3. the runs ----------------------------------------------------------------
failed=0
summary=()
for n in $(seq 1 "$RUNS"); do
  log="$LOG_DIR/run-$n.log"
  echo "test-stress: run $n/$RUNS: make $TARGETS (log: $log), load: $(cut -d' ' -f1-3 /proc/loadavg)"
  start=$(date +%s)
  # shellcheck disable=SC2086
  # Each log line carries its elapsed time ([mm:ss], scripts/stamp.sh).
  if make --no-print-directory $TARGETS 2>&1 | bash scripts/stamp.sh >"$log"; then
    status=pass
  else
    status=FAIL
    failed=$((failed + 1))
    echo "test-stress: run $n FAILED; the failing tests:" >&2
    grep -E "^(\[[0-9]+:[0-9]+\] )?(test .* FAILED|---- .* stdout ----|FAILED |failures:|make(\[[0-9]+\])?: \*\*\*)|panicked at|(^| )(FAIL|not ok) " "$log" | head -n 40 >&2 || true
  fi
  secs=$(($(date +%s) - start))
  line="run $n: $status in $((secs / 60))m$((secs % 60))s"
  summary+=("$line")
  echo "test-stress: $line"
done

# --- 4. summary -----------------------------------------------------------------
stop_stress
echo "test-stress: summary (stress-ng $NG_ARGS, make $TARGETS):"
for l in "${summary[@]}"; do
  echo "  $l"
done
if [ "$failed" -gt 0 ]; then
  echo "test-stress: $failed of $RUNS run(s) failed; logs in $LOG_DIR" >&2
  exit 1
fi
echo "test-stress: all $RUNS run(s) passed"
