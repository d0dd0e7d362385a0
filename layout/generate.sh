#!/usr/bin/env bash
# Regenerate layout/memstrata.order (layout/README.md): build the Python wheel in the
# `dist` profile, then list the functions of the extension that ran
#   1. under valgrind's callgrind: layout/workload.py's `ingest` phase (every function
#      that runs, even once, but on valgrind's CPU: no AVX-512, threads never contend);
#   2. natively under perf, when it is installed and allowed: the same phase, clock
#      samples and the code pages faulted in (what callgrind's CPU does not take);
#   3. under callgrind: the `tour` phase (the rest of the API, placed after the ingest).
# Needs valgrind (Debian: apt-get install valgrind); perf is optional. About five minutes
# after a `make dist`, whose build it reuses; not in CI.
#
# Usage: layout/generate.sh [N]   (N one-call and N batched records per option set under
#                                  callgrind, default 40000: enough for tantivy's merges)
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
N=${1:-40000}
command -v valgrind > /dev/null || { echo "layout: valgrind is needed (apt-get install valgrind)" >&2; exit 1; }
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$REPO/target}
WORK=$CARGO_TARGET_DIR/layout-profile
rm -rf "$WORK"
mkdir -p "$WORK"
bash scripts/venv.sh
# Symbol names do not depend on the order file or the link flags, so any dist build will
# do; with make dist's flags, what make dist compiled is reused.
# shellcheck source=layout/flags.sh
source layout/flags.sh
layout_use
.venv/bin/maturin build --quiet --profile dist -m bindings-python/Cargo.toml -o "$WORK/wheels" -i .venv/bin/python
.venv/bin/python -m pip install --quiet --no-deps --target "$WORK/pylib" "$WORK"/wheels/memstrata-*.whl
export PYTHONPATH=$WORK/pylib
grind() { # PHASE [ARGS]: callgrind's profile of one phase of the workload
  echo "layout: callgrind, $1 phase"
  valgrind --tool=callgrind --demangle=no --dump-instr=no --collect-jumps=no \
    --callgrind-out-file="$WORK/$1.callgrind" .venv/bin/python layout/workload.py "$@" 2> "$WORK/$1.log"
}
grind ingest "$N"
profiles=("$WORK/ingest.callgrind")
if command -v perf > /dev/null \
  && perf record -q -o "$WORK/probe.data" -e cpu-clock true > /dev/null 2>&1; then
  echo "layout: perf, ingest phase, native"
  perf record -q -d -e page-faults/period=1/ -e cpu-clock/freq=20000/ -o "$WORK/native.data" \
    .venv/bin/python layout/workload.py ingest 100000 > /dev/null
  perf script -i "$WORK/native.data" -F event,addr,ip,sym,dso --no-demangle 2> /dev/null \
    | grep _memstrata > "$WORK/native.perf" || true
  profiles+=("$WORK/native.perf")
else
  echo "layout: perf is not available: the order has callgrind's functions only"
fi
grind tour
profiles+=("$WORK/tour.callgrind")
python3 layout/order.py make layout/memstrata.order _memstrata.abi3.so "${profiles[@]}"
