#!/usr/bin/env bash
# Mixed-load throughput with 1, 2 and 4 memstrata-mcp instances over one PostgreSQL
# store, beside one instance on a sled store, in the same run: the load of
# benches/wrk/mixed.lua (writes / reads / searches = 20% / 60% / 20%, POST
# /mcp/v1/execute) from wrk, C connections in total, split evenly over the
# instances (what a round-robin load balancer does), 2 wrk threads in total.
#
#   benches/wrk/instances.sh [SECONDS] [CONNECTIONS]      (defaults 10, 64)
#
# Runs itself under scripts/pg-test.sh when MEMSTRATA_TEST_PG_URL is not set.
# Needs wrk (Debian package `wrk`). Writes target/bench/instances.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ -z "${MEMSTRATA_TEST_PG_URL:-}" ]; then
  exec bash scripts/pg-test.sh bash "$0" "$@"
fi
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
D=${1:-10}
C=${2:-64}
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)" >&2; exit 1; }
BIN=${MEMSTRATA_MCP_RELEASE_BIN:-}
if [ -z "$BIN" ]; then
  cargo build --quiet --release -p memstrata-mcp
  BIN=$CARGO_TARGET_DIR/release/memstrata-mcp
fi
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
OUT=$CARGO_TARGET_DIR/bench/instances.md
mkdir -p "$(dirname "$OUT")"

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

start() { # start STORE LOG: a server on a free port, appended to PORTS and PIDS
  local p
  p=$(port)
  "$BIN" --store "$1" --no-audit http --listen "127.0.0.1:$p" >/dev/null 2>"$2" &
  PIDS+=($!)
  for _ in $(seq 300); do
    curl -sf -o /dev/null -X POST "http://127.0.0.1:$p/mcp/v1/execute" -H 'Content-Type: application/json' \
      -d '{"jsonrpc":"2.0","id":0,"method":"execute","params":{"tool":"memory_retrieve","parameters":{"key":"x"}}}' && break
    sleep 0.1
  done
  PORTS+=("$p")
}

prefill() { # the 300 keys the reads use (not measured)
  python3 - "$1" <<'PY'
import json, sys, urllib.request
port = sys.argv[1]
for i in range(300):
    body = json.dumps({"jsonrpc": "2.0", "id": i, "method": "execute", "params": {
        "tool": "knowledge_store", "parameters": {"key": f"pre-{i}", "knowledge": {
            "entityType": "fact", "observations": [f"pre-filled fact {i} about the project budget review"]}}}}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/mcp/v1/execute", body, {"Content-Type": "application/json"})
    assert b'"result"' in urllib.request.urlopen(req).read()
PY
}

stop_all() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  PIDS=()
}

# run NAME PORT... : C connections split over the ports, one wrk per port, at once.
run() {
  local name=$1
  shift
  local n=$# i=0 threads conns
  local wrks=()
  threads=$((2 / n))
  [ "$threads" -ge 1 ] || threads=1
  conns=$((C / n))
  for p in "$@"; do
    WRK_KEY_PREFIX="$i" wrk -t"$threads" -c"$conns" -d"${D}s" -s benches/wrk/mixed.lua "http://127.0.0.1:$p" \
      >"$WORK/wrk-$name-$i.txt" 2>&1 &
    wrks+=($!)
    i=$((i + 1))
  done
  for w in "${wrks[@]}"; do wait "$w"; done
  python3 - "$name" "$n" "$WORK" >>"$WORK/rows.txt" <<'PY'
import glob, re, sys
name, n, work = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rate = 0.0; p50 = []; p99 = []; terr = 0; herr = 0
for f in sorted(glob.glob(f"{work}/wrk-{name}-*.txt")):
    line = [l for l in open(f) if l.startswith("calls/s")][-1]
    m = re.search(r"calls/s (\d+)\s+p50 ([\d.]+) ms\s+p95 ([\d.]+) ms\s+p99 ([\d.]+) ms\s+tool errors or misses (\d+)\s+non-2xx\+socket errors (\d+)", line)
    rate += float(m[1]); p50.append(float(m[2])); p99.append(float(m[4])); terr += int(m[5]); herr += int(m[6])
print(f"{name}\t{n}\t{rate:.0f}\t{max(p50):.2f}\t{max(p99):.2f}\t{terr}\t{herr}")
PY
  tail -1 "$WORK/rows.txt"
}

: >"$WORK/rows.txt"
echo "== sled, 1 instance"
PORTS=()
start "$WORK/sled.mem" "$WORK/sled.log"
prefill "${PORTS[0]}"
run sled-1 "${PORTS[@]}"
stop_all

for N in 1 2 4; do
  echo "== PostgreSQL, $N instance(s) on one schema"
  STORE="$MEMSTRATA_TEST_PG_URL?schema=bench_$N"
  PORTS=()
  for i in $(seq "$N"); do
    start "$STORE" "$WORK/pg-$N-$i.log"
  done
  prefill "${PORTS[0]}"
  run "postgres-$N" "${PORTS[@]}"
  stop_all
done

python3 - "$WORK/rows.txt" "$OUT" "$D" "$C" <<'PY'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
base = float(rows[0][2])
out = [f"Mixed load (20% knowledge_store / 60% knowledge_retrieve / 20% knowledge_query, POST /mcp/v1/execute), "
       f"wrk, {sys.argv[4]} connections split over the instances, {sys.argv[3]} s per row, release build, one machine.",
       "", "| store | instances | calls/s | vs sled, 1 instance | worst p50 ms | worst p99 ms | tool errors or misses | HTTP/socket errors |",
       "|---|---|---|---|---|---|---|---|"]
for name, n, rate, p50, p99, terr, herr in rows:
    out.append(f"| {name.split('-')[0]} | {n} | {float(rate):,.0f} | {float(rate) / base:.2f}x | {p50} | {p99} | {terr} | {herr} |")
text = "\n".join(out) + "\n"
open(sys.argv[2], "w").write(text)
print(text)
PY
echo "== load average: $(cut -d' ' -f1-3 /proc/loadavg)"
