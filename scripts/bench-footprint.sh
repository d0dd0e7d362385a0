#!/usr/bin/env bash
# The footprint benchmark (part of `make bench`, not CI): resident memory and
# disk per episode as a Python user sees them, next to SQLite FTS5.
#
#   benches/footprint/probe.py, one fresh Python process per measurement:
#   - chat-sized episodes (100 characters) at BENCH_FOOTPRINT_SIZES (default
#     100000; with BENCH_FULL=1, 100000,1000000);
#   - document-sized episodes (2,000 characters) at BENCH_FOOTPRINT_DOC_SIZES
#     (default 100000);
#   peak and after-close RSS, disk per episode right after ingest, FTS5 on the
#   same texts, per-call ingest, and batch ingest when the binding has
#   `episodic.record_many`. Machine, commit and load are in the output.
#
# Usage: scripts/bench-footprint.sh [OUT.md]   (default target/bench/footprint.md)
# The wheel is built in the `dist` profile with the code layout, as scripts/dist.sh builds it.
# FOOTPRINT_PYLIB=DIR uses an installed wheel there instead of building one.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$REPO/target}
OUT=$CARGO_TARGET_DIR/bench
MD=${1:-$OUT/footprint.md}
PYLIB=${FOOTPRINT_PYLIB:-$OUT/pylib}
mkdir -p "$OUT"
bash scripts/venv.sh
# Built as scripts/dist.sh builds it, code layout included (layout/README.md).
# shellcheck source=layout/flags.sh
source layout/flags.sh
layout_use
if [ ! -f "$PYLIB/memstrata/__init__.py" ]; then
  rm -rf "$OUT/wheels" "$PYLIB"
  .venv/bin/maturin build --quiet --profile dist -m bindings-python/Cargo.toml -o "$OUT/wheels" -i .venv/bin/python
  .venv/bin/python -m pip install --quiet --no-deps --target "$PYLIB" "$OUT"/wheels/memstrata-*.whl
fi
if [ -n "${BENCH_FOOTPRINT_SIZES:-}" ]; then
  SIZES=$BENCH_FOOTPRINT_SIZES
elif [ "${BENCH_FULL:-0}" = 1 ]; then
  SIZES=100000,1000000
else
  SIZES=100000
fi
DOC_SIZES=${BENCH_FOOTPRINT_DOC_SIZES:-100000}
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
n_args() { local IFS=,; for n in $1; do printf -- '-n=%s ' "$n"; done; }
# shellcheck disable=SC2046
FP_COMMIT=$COMMIT PYTHONPATH=$PYLIB .venv/bin/python benches/footprint/probe.py $(n_args "$SIZES") \
  --chars 100 --label "$COMMIT" --md "$OUT/footprint-chat.md" --json "$OUT/footprint-chat.json"
# shellcheck disable=SC2046
FP_COMMIT=$COMMIT PYTHONPATH=$PYLIB .venv/bin/python benches/footprint/probe.py $(n_args "$DOC_SIZES") \
  --chars 2000 --label "$COMMIT" --md "$OUT/footprint-doc.md" --json "$OUT/footprint-doc.json"
{
  cat "$OUT/footprint-chat.md"
  echo
  sed '1s/.*/### Document-sized episodes (2,000 characters)/' "$OUT/footprint-doc.md" | grep -v '^### Footprint targets' \
    | awk 'BEGIN{skip=0} /^\| target \| size/{skip=1} skip && /^$/{skip=0; next} !skip'
} > "$MD"
echo "footprint: wrote $MD"
