#!/usr/bin/env bash
# PostgreSQL tests of the MCP adapter and the Python binding (run by `make test-mcp-pg`,
# inside scripts/pg-test.sh, which starts the server and exports MEMSTRATA_TEST_PG_URL):
#   1. the adapter's Rust tests that need a server (the LISTEN/NOTIFY bridge);
#   2. memstrata-mcp over postgres:// driven by the official Python MCP SDK: one
#      instance, then two instances over one database under 50 concurrent clients,
#      with one of them killed mid-load;
#   3. the Python binding opening a postgres:// store.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
if [ -z "${MEMSTRATA_TEST_PG_URL:-}" ]; then
  echo "test-mcp-pg: ERROR: MEMSTRATA_TEST_PG_URL is not set; run through scripts/pg-test.sh (make test-pg)" >&2
  exit 1
fi
export CARGO_PROFILE_DEV_DEBUG=${CARGO_PROFILE_DEV_DEBUG:-0}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$REPO/target}
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}

echo "== test-mcp-pg: adapter Rust tests against PostgreSQL"
cargo test -p memstrata-mcp --test postgres -- --include-ignored

echo "== test-mcp-pg: building memstrata-mcp"
# `cargo test --no-run` builds the binary with the units `make test-rust` built (a plain
# `cargo build` would resolve the adapter's dev-dependency features differently and rebuild it).
cargo test -p memstrata-mcp --no-run
export MEMSTRATA_MCP_BIN=$CARGO_TARGET_DIR/debug/memstrata-mcp

echo "== test-mcp-pg: Python MCP SDK over postgres:// (one and two instances)"
.venv/bin/python -m pytest -q mcp-adapter/tests/python_pg

echo "== test-mcp-pg: Python binding on postgres://"
# As scripts/test-python.sh installs it (maturin from .venv, the dev profile, the workspace
# target dir): the binding is rebuilt only if something changed since test-python.
# Under scripts/test-all.sh (make test) it is installed before the suites start, and
# reinstalling it here would pull it from under test-python running at the same time.
export PATH="$REPO/.venv/bin:$PATH"
export MATURIN_PEP517_ARGS="${MATURIN_PEP517_ARGS:---profile dev}"
if [ "${MEMSTRATA_PREBUILT:-0}" != 1 ]; then
  .venv/bin/python -m pip install --quiet --no-build-isolation --force-reinstall --no-deps ./bindings-python
fi
(cd bindings-python/tests_pg && ../../.venv/bin/python -m pytest -q .)
