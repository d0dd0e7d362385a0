#!/usr/bin/env bash
# `make soak` (not CI): scripts/soak.py against memstrata-mcp for SOAK_SECONDS (default 120)
# per backend: first a store directory (sled), then a postgres:// store on the throwaway
# server of scripts/pg-test.sh. SOAK_BACKENDS="sled postgres" (default) picks the backends;
# MEMSTRATA_MCP_BIN uses that binary instead of a debug build.
# Reports (markdown) and server logs in target/soak/; exits non-zero if any acknowledged
# write was lost, an error had no kill to explain it, or the fd count grew without bound.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
SECONDS_EACH=${SOAK_SECONDS:-120}
BACKENDS=${SOAK_BACKENDS:-sled postgres}
export CARGO_PROFILE_DEV_DEBUG=${CARGO_PROFILE_DEV_DEBUG:-0}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$REPO/target}
OUT=$CARGO_TARGET_DIR/soak
mkdir -p "$OUT"

case "$SECONDS_EACH" in
'' | *[!0-9]*) echo "soak: SOAK_SECONDS must be a whole number of seconds (got '$SECONDS_EACH')" >&2; exit 1 ;;
esac

[ -x .venv/bin/python ] || bash scripts/venv.sh
if [ -n "${MEMSTRATA_MCP_BIN:-}" ]; then
  BIN=$MEMSTRATA_MCP_BIN # a binary built beforehand (e.g. a release build)
else
  echo "== soak: building memstrata-mcp"
  cargo build -p memstrata-mcp --bin memstrata-mcp
  BIN=$CARGO_TARGET_DIR/debug/memstrata-mcp
fi

status=0
for b in $BACKENDS; do
  case "$b" in
  sled)
    dir=$(mktemp -d "${TMPDIR:-/tmp}/memstrata-soak.XXXXXX")
    echo "== soak: sled store $dir/store for ${SECONDS_EACH}s"
    .venv/bin/python scripts/soak.py --binary "$BIN" --store "$dir/store" --backend sled \
      --seconds "$SECONDS_EACH" --logdir "$OUT/sled" --report "$OUT/sled.md" || status=1
    rm -rf "$dir"
    ;;
  postgres)
    echo "== soak: postgres store for ${SECONDS_EACH}s (throwaway server of scripts/pg-test.sh)"
    # shellcheck disable=SC2016
    bash scripts/pg-test.sh bash -c '
      schema="soak_$(date +%s)_$$"
      exec .venv/bin/python scripts/soak.py --binary "$0" --store "$MEMSTRATA_TEST_PG_URL?schema=$schema" \
        --backend postgres --seconds "$1" --logdir "$2/postgres" --report "$2/postgres.md"' \
      "$BIN" "$SECONDS_EACH" "$OUT" || status=1
    ;;
  *)
    echo "soak: unknown backend '$b' (sled, postgres)" >&2
    exit 1
    ;;
  esac
done
echo "== soak: reports in $OUT/*.md"
exit $status
