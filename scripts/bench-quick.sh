#!/usr/bin/env bash
# `make bench-quick`: a few-minute regression check that prints the target
# table (docs/benchmarks.md) with measured / goal / met-missed. It reports;
# it never fails on a missed target (no timing assertions anywhere).
#
#   1. `compare` at 10k episodes (QUICK_SIZES), 300 queries per class
#      (QUICK_QUERIES): short-term store/retrieve vs raw sled, episode search
#      vs raw tantivy and SQLite FTS5, disk footprint;
#   2. the in-process mixed load (8 threads on one `Memory`, QUICK_SECONDS
#      each): as shipped, with a soft commit per search (the behaviour before
#      the index overlay), and writes only;
#   3. the MCP bounded loopback load (issue #14), QUICK_SECONDS per row, from
#      the Rust load client `mcp-load` (benches/src/bin/mcp_load/): stdio,
#      streamable HTTP with sessions and stateless, WebSocket, /mcp/v1/execute
#      at 8 clients, plus the 64-client execute and stateless HTTP rows
#      (QUICK_MCP=0 skips it);
#   4. benches/python/quick_report.py prints the table and writes
#      target/bench/quick/report.md.
#
# The binaries are copied before they run, so a concurrent build in the shared
# target directory cannot swap them mid-run.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
export CARGO_PROFILE_DEV_DEBUG=${CARGO_PROFILE_DEV_DEBUG:-0}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$REPO/target}
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
OUT=$CARGO_TARGET_DIR/bench/quick
SCRATCH=${BENCH_DIR:-$OUT/scratch}
SIZES=${QUICK_SIZES:-10000}
QUERIES=${QUICK_QUERIES:-300}
SECS=${QUICK_SECONDS:-5}
rm -rf "$OUT/bin" "$OUT"/*.md "$OUT"/*.json "$OUT"/*.jsonl
mkdir -p "$OUT/bin" "$SCRATCH"
started=$(date +%s)

echo "== bench-quick: building compare, mcp-load and memstrata-mcp (release)"
cargo build --release -p memstrata-benches --bin compare --bin mcp-load -p memstrata-mcp --bin memstrata-mcp
cp "$CARGO_TARGET_DIR/release/compare" "$CARGO_TARGET_DIR/release/mcp-load" \
  "$CARGO_TARGET_DIR/release/memstrata-mcp" "$OUT/bin/"
COMPARE=$OUT/bin/compare
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

echo "== bench-quick: compare (tiers $SIZES, $QUERIES queries per class)"
"$COMPARE" --sizes "$SIZES" --queries "$QUERIES" --skip-sessions --skip-mixed \
  --dir "$SCRATCH" --out "$OUT/compare.md" > /dev/null

echo "== bench-quick: in-process mixed load, 8 threads, $SECS s per row"
for mode in mixed mixed-soft writes-only; do
  case $mode in
    mixed-soft) env=(MEMSTRATA_SEARCH_COMMIT=soft) ;;
    *) env=() ;;
  esac
  env -u MEMSTRATA_SEARCH_COMMIT "${env[@]}" "$COMPARE" mixed-row "$mode" "$SCRATCH" 8 "$SECS" >> "$OUT/mixed.jsonl"
  echo "   $mode: $(tail -1 "$OUT/mixed.jsonl")"
done

if [ "${QUICK_MCP:-1}" != 0 ]; then
  echo "== bench-quick: MCP bounded loopback load (Rust client mcp-load), $SECS s per row"
  "$OUT/bin/mcp-load" "$OUT/bin/memstrata-mcp" --seconds "$SECS" --dir "$SCRATCH" \
    --json "$OUT/mcp-load.json" --md "$OUT/mcp-load.md" > /dev/null ||
    echo "bench-quick: the MCP load did not run (see above); the table reports it as not measured" >&2
fi

python3 benches/python/quick_report.py "$OUT" "$load_before" "$(cut -d' ' -f1-3 /proc/loadavg)" \
  "$(($(date +%s) - started))" "$(git rev-parse --short HEAD 2>/dev/null || echo '?')"
