#!/usr/bin/env bash
# Node binding benchmarks; `make bench` runs this from scripts/bench.sh.
#
#   bindings-node/bench/run.sh [OUT.md]     (default target/bench/node.md)
#
#   1. npm install here (bench-only dependencies: better-sqlite3, the MCP TypeScript
#      SDK, the reference @modelcontextprotocol/server-memory), when missing or stale;
#   2. the native module in RELEASE: `cargo build --release -p memstrata-node` into the
#      workspace's target/release, where `make bench` has already built the core for
#      `compare` (`npm run build` = `napi build --release` gives the same module but
#      passes --target, so it would compile the core a second time under
#      target/<triple>/release); the .so is copied to a .node file and loaded through
#      binding.js's NAPI_RS_NATIVE_LIBRARY_PATH, so bindings-node/ itself is not touched;
#      plus the Rust side, `binding-workload` (benches/src/bin/binding_workload.rs);
#   3. per tier (10k and 100k episodes): the corpus written once as JSONL
#      (`binding-workload data`), the Rust workload, and the same calls through the
#      binding followed by better-sqlite3 + FTS5 on the same episodes (bench.mjs overhead),
#      the two sides' order alternating from tier to tier;
#   4. store N facts then 300 searches, N = 300 and 3000: memstrata in process vs the
#      reference MCP memory server through the MCP TypeScript SDK client over stdio;
#   5. report.mjs writes the markdown.
#
# Environment: BENCH_NODE_SIZES=10000,100000 (tiers), BENCH_NODE_MCP=300,3000 (N of step 4),
# BENCH_DIR (scratch; default target/bench/scratch), BINDING_WORKLOAD (a prebuilt
# binding-workload binary: skip building it). No timing assertions.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$REPO/target}
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
export npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false
OUT_MD=${1:-$CARGO_TARGET_DIR/bench/node.md}
case $OUT_MD in /*) ;; *) OUT_MD=$(pwd)/$OUT_MD ;; esac
WORK=${BENCH_DIR:-$CARGO_TARGET_DIR/bench/scratch}/node
SIZES=${BENCH_NODE_SIZES:-10000,100000}
MCP_NS=${BENCH_NODE_MCP:-300,3000}
started=$(date +%s)
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
rm -rf "$WORK"
mkdir -p "$WORK" "$(dirname "$OUT_MD")"

cd "$HERE"
if [ ! -d node_modules/better-sqlite3 ] || [ ! -d node_modules/@modelcontextprotocol/sdk ] \
  || [ ! -d node_modules/@modelcontextprotocol/server-memory ] || [ package.json -nt node_modules/.package-lock.json ]; then
  echo "== bench node: npm install (bindings-node/bench)"
  npm install --no-save --loglevel=error
fi

echo "== bench node: building the native module and binding-workload (release)"
(cd "$REPO" && cargo build --release -p memstrata-node)
if [ -z "${BINDING_WORKLOAD:-}" ]; then
  (cd "$REPO" && cargo build --release -p memstrata-benches --bin binding-workload)
fi
cp "$CARGO_TARGET_DIR/release/libmemstrata_node.so" "$WORK/memstrata.node"
export NAPI_RS_NATIVE_LIBRARY_PATH=$WORK/memstrata.node
RUST=${BINDING_WORKLOAD:-$CARGO_TARGET_DIR/release/binding-workload}
REF_JS=$HERE/node_modules/@modelcontextprotocol/server-memory/dist/index.js

first=
k=0
for n in ${SIZES//,/ }; do
  d=$WORK/data-$n
  first=${first:-$d}
  echo "== bench node: $n episodes: corpus"
  "$RUST" data "$n" "$d"
  if [ $((k % 2)) = 0 ]; then order="rust node"; else order="node rust"; fi
  for side in $order; do
    echo "== bench node: $n episodes: $side"
    if [ "$side" = rust ]; then
      "$RUST" run "$d" > "$WORK/rust-$n.json"
    else
      node bench.mjs overhead "$d" > "$WORK/node-$n.json"
    fi
  done
  k=$((k + 1))
done
for m in ${MCP_NS//,/ }; do
  echo "== bench node: store $m facts + 300 searches: memstrata in process vs reference MCP server"
  node bench.mjs mcp "$first" "$m" "$REF_JS" > "$WORK/mcp-$m.json"
done

LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
CPU_MODEL=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1) \
  BENCH_NODE_ELAPSED=$(($(date +%s) - started)) LOAD_BEFORE=$LOAD_BEFORE LOAD_AFTER=$LOAD_AFTER \
  BENCH_NODE_SIZES=$SIZES BENCH_NODE_MCP=$MCP_NS \
  node report.mjs "$WORK" "$OUT_MD"
rm -rf "$WORK"/data-*
echo "== bench node: wrote $OUT_MD"
