# Memstrata developer commands. `make test` is what CI runs (.ci/run).
SHELL := /bin/bash
export CARGO_PROFILE_DEV_DEBUG ?= 0
export CARGO_TARGET_DIR ?= $(CURDIR)/target
export CARGO_TERM_COLOR ?= never

.PHONY: test test-rust test-python test-mcp quickstart venv bench clean-venv

## Run every suite: Rust (core + MCP adapter), Python binding, MCP interop.
test: test-rust test-python test-mcp

test-rust:
	cargo test --workspace --exclude memstrata-python --exclude memstrata-benches

## Python virtualenv with maturin, pytest, mypy and the MCP SDK (created on demand).
venv:
	bash scripts/venv.sh

test-python: venv
	bash scripts/test-python.sh

test-mcp: venv
	bash scripts/test-mcp.sh

quickstart:
	cargo run --release -p memstrata --example quickstart

bench:
	bash scripts/bench.sh

clean-venv:
	rm -rf .venv
