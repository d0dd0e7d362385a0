#!/usr/bin/env bash
# The Node binding on a PostgreSQL store (run by `make test-node-pg`, inside
# scripts/pg-test.sh, which starts the server and exports MEMSTRATA_TEST_PG_URL; `make
# test-pg` runs it after test-mcp-pg):
#   1. npm install in bindings-node/, unless node_modules is already newer than the lock file
#      (scripts/test-node.sh installs it too; `make test` runs test-pg first on a fresh clone);
#   2. the dev build of the native module, exactly as scripts/test-node.sh makes it
#      (bindings-node/scripts/build-dev.mjs into the workspace's target/): whichever of the
#      two scripts runs second finds cargo's build fresh and only copies the module;
#   3. node --test bindings-node/__test_pg__ on Node 20 (`node` on PATH). The Node 22 run of
#      test-node covers the binding itself; these tests are about the store.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
if [ -z "${MEMSTRATA_TEST_PG_URL:-}" ]; then
  echo "test-node-pg: ERROR: MEMSTRATA_TEST_PG_URL is not set; run through scripts/pg-test.sh (make test-pg)" >&2
  exit 1
fi
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}"
export CARGO_PROFILE_DEV_DEBUG="${CARGO_PROFILE_DEV_DEBUG:-0}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
export npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false

cd bindings-node
if [ "${MEMSTRATA_PREBUILT:-0}" = 1 ]; then
  # scripts/test-all.sh (make test) installed node_modules and built the addon before the
  # suites started; rebuilding it here would recopy the .node file under test-node's feet.
  echo "== test-node-pg: node_modules and the addon as scripts/test-all.sh made them"
elif [ node_modules/.package-lock.json -nt package-lock.json ] && [ node_modules/.package-lock.json -nt package.json ]; then
  echo "== test-node-pg: node_modules is current"
else
  echo "== test-node-pg: npm install (from package-lock.json)"
  # `npm install`, not `npm ci`: see scripts/test-node.sh.
  npm install --no-save --loglevel=error
fi
if [ "${MEMSTRATA_PREBUILT:-0}" != 1 ]; then
  echo "== test-node-pg: building the native module (dev profile)"
  node scripts/build-dev.mjs
fi
echo "== test-node-pg: node $(node --version), bindings-node/__test_pg__"
node --test __test_pg__/*.test.mjs
