#!/usr/bin/env bash
# MCP interoperability suite (run by `make test-mcp`, after scripts/venv.sh):
#   1. build the memstrata-mcp binary once;
#   2. the official Python MCP SDK drives it over stdio and streamable HTTP (pytest);
#   3. the official MCP conformance suite runs against it (Node 22 in .tools/).
# The adapter's Rust tests (in-process and binary-over-stdio) run with `make test-rust`.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_PROFILE_DEV_DEBUG=${CARGO_PROFILE_DEV_DEBUG:-0}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}

echo "== test-mcp: tools that mirror a method against the API manifest (bindings-common/api.toml)"
# tests/golden/tools.json is the server's tool list (checked by the in_process test).
python3 scripts/api.py mcp

echo "== test-mcp: building memstrata-mcp"
# `cargo test --no-run` builds the binary with the units `make test-rust` built (a plain
# `cargo build` would resolve the adapter's dev-dependency features differently and rebuild it).
cargo test -p memstrata-mcp --no-run
export MEMSTRATA_MCP_BIN=$CARGO_TARGET_DIR/debug/memstrata-mcp

echo "== test-mcp: Python MCP SDK (stdio + HTTP)"
.venv/bin/python -m pytest -q mcp-adapter/tests/python

echo "== test-mcp: MCP conformance suite"
bash mcp-adapter/scripts/conformance.sh "$MEMSTRATA_MCP_BIN"
