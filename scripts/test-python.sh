#!/usr/bin/env bash
# Python binding suite: build and install bindings-python into .venv the way a
# user does (`pip install ./bindings-python`, maturin as the PEP 517 backend),
# then check the .pyi stubs against the module (mypy.stubtest) and run pytest.
# The .pyi is generated from bindings-common/api.toml (scripts/api.py pyi); pytest's
# test_api_manifest.py checks the module's names and docstrings against the manifest.
#
# The build uses the workspace target dir and the dev profile, so the core and
# tantivy compiled by `cargo build` / `cargo test` are reused, not rebuilt.
# Users get a release build: plain `pip install ./bindings-python`.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)

bash scripts/venv.sh
export PATH="$REPO/.venv/bin:$PATH"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}"
export CARGO_PROFILE_DEV_DEBUG="${CARGO_PROFILE_DEV_DEBUG:-0}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
# Extra arguments maturin's PEP 517 backend passes to `cargo build`.
export MATURIN_PEP517_ARGS="${MATURIN_PEP517_ARGS:---profile dev}"

echo "test-python: the .pyi stubs and docs/reference/api.md are what bindings-common/api.toml generates"
python scripts/api.py pyi --check
python scripts/api.py reference --check
echo "test-python: layout/order.py (the code-layout tool, layout/README.md)"
python -m pytest -q -p no:cacheprovider layout/test_order.py
if [ "${MEMSTRATA_PREBUILT:-0}" = 1 ]; then
  # scripts/test-all.sh (make test) installed it, as below, before the suites started.
  echo "test-python: ./bindings-python as installed into .venv by scripts/test-all.sh"
else
  echo "test-python: building and installing ./bindings-python (maturin, ${MATURIN_PEP517_ARGS})"
  # maturin is in .venv (scripts/venv.sh), so no isolated build env has to be fetched.
  python -m pip install --quiet --no-build-isolation --force-reinstall --no-deps ./bindings-python
fi

cd bindings-python
echo "test-python: stubtest"
# Run from tests/ so the installed package is what gets imported.
(cd tests && python -m mypy.stubtest memstrata --allowlist ../stubtest-allowlist.txt)
echo "test-python: pytest"
python -m pytest -q tests "$@"
