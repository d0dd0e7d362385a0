#!/usr/bin/env bash
# The mixed load of the bounded loopback load table, driven by wrk (a C load
# client) against a release memstrata-mcp over HTTP — POST /mcp/v1/execute and
# streamable HTTP (stateless 2026-07-28 tools/call on /mcp) — for 8 and 64
# connections. Shows the server's HTTP ceiling without the Python client's
# cost. Needs wrk (Debian package `wrk`). Usage: benches/wrk/run.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
D=${1:-10}
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)" >&2; exit 1; }
cargo build --quiet --release -p memstrata-mcp
BIN=$CARGO_TARGET_DIR/release/memstrata-mcp
STORE=$(mktemp -d)
PORT=${PORT:-18765}
"$BIN" --store "$STORE/s" --no-audit http --listen "127.0.0.1:$PORT" 2>"$STORE/server.log" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null; rm -rf "$STORE"' EXIT
for _ in $(seq 100); do
  curl -sf -o /dev/null -X POST "http://127.0.0.1:$PORT/mcp/v1/execute" -H 'Content-Type: application/json' \
    -d '{"jsonrpc":"2.0","id":0,"method":"execute","params":{"tool":"memory_retrieve","parameters":{"key":"x"}}}' && break
  sleep 0.1
done
# Pre-fill the 300 keys the reads use (not measured).
python3 - "$PORT" <<'PY'
import json, sys, urllib.request
port = sys.argv[1]
for i in range(300):
    body = json.dumps({"jsonrpc": "2.0", "id": i, "method": "execute", "params": {
        "tool": "knowledge_store", "parameters": {"key": f"pre-{i}", "knowledge": {
            "entityType": "fact", "observations": [f"pre-filled fact {i} about the project budget review"]}}}}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/mcp/v1/execute", body, {"Content-Type": "application/json"})
    assert b'"result"' in urllib.request.urlopen(req).read()
PY
for MODE in execute mcp; do
  for C in 8 64; do
    echo "== WRK_MODE=$MODE, $C connections, ${D}s (wrk -t2)"
    WRK_MODE=$MODE wrk -t2 -c"$C" -d"${D}s" -s benches/wrk/mixed.lua "http://127.0.0.1:$PORT" | tail -1
  done
done
echo "== server load average: $(cut -d' ' -f1-3 /proc/loadavg)"
