#!/usr/bin/env bash
# The npm packages in napi-rs's per-platform layout (called by scripts/dist.sh; DIST as $1):
#
#   memstrata                 index.js / index.mjs / index.d.ts and napi's loader binding.js,
#                             no native code; `optionalDependencies` name one package per
#                             target of package.json's napi.targets, so npm installs only the
#                             one matching the user's platform;
#   memstrata-<platform>      the .node file for one platform (os / cpu / libc fields set):
#                             built here for this machine (linux-x64-gnu on CI's Linux x64).
#
# Both are staged under target/dist-npm/ (the checkout is left alone, except index.d.ts,
# binding.js and index.mjs, which the release build regenerates as the dev build does),
# laid out with `napi create-npm-dirs` (and the .node copied in, as `napi artifacts` would),
# and packed with `npm pack`.
# The release workflow packs the other platforms' packages the same way on their runners.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
DIST=${1:?usage: dist-npm.sh DIST_DIR}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$REPO/target}
export npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false
STAGE=$CARGO_TARGET_DIR/dist-npm
rm -rf "$STAGE"
mkdir -p "$STAGE"

cd bindings-node
if [ ! -d node_modules/@napi-rs/cli ]; then
  npm install --no-save --loglevel=error
fi
# The native module built in the `dist` profile (release with fat LTO, as every shipped
# library), named for this platform, plus binding.js and index.d.ts
# (bindings-node/scripts/build-dev.mjs: plain cargo, the workspace target dir).
MEMSTRATA_NODE_PROFILE=dist node scripts/build-dev.mjs
NAPI=$PWD/node_modules/.bin/napi

# The main package: package.json without the build scripts and dev tools, and without
# `*.node` in its files (the native code lives in the platform packages).
cp index.js index.mjs index.d.ts binding.js package.json "$STAGE/"
[ -f README.md ] && cp README.md "$STAGE/"
cp ../LICENSE* "$STAGE/" 2>/dev/null || true
cp ./*.node "$STAGE/"
cd "$STAGE"
node - <<'EOF'
const fs = require('node:fs')
const pkg = JSON.parse(fs.readFileSync('package.json', 'utf8'))
delete pkg.scripts
delete pkg.devDependencies
pkg.files = pkg.files.filter((f) => !f.endsWith('.node'))
fs.writeFileSync('package.json', JSON.stringify(pkg, null, 2) + '\n')
EOF
"$NAPI" create-npm-dirs --npm-dir npm >/dev/null
# What `napi artifacts` does, for the platforms built here only (napi artifacts insists on
# every configured target; the release workflow packs each platform on its own runner):
# memstrata.<platform>.node into npm/<platform>/.
for f in ./*.node; do
  plat=${f#./memstrata.}
  plat=${plat%.node}
  [ -d "npm/$plat" ] || { echo "dist-npm: no npm/$plat for $f (add its triple to napi.targets)" >&2; exit 1; }
  cp "$f" "npm/$plat/"
done
# optionalDependencies: every platform package, at this version (what `napi pre-publish`
# writes before it publishes them; here nothing is published).
node - <<'EOF'
const fs = require('node:fs')
const pkg = JSON.parse(fs.readFileSync('package.json', 'utf8'))
const optional = {}
for (const dir of fs.readdirSync('npm').sort()) {
  const sub = JSON.parse(fs.readFileSync(`npm/${dir}/package.json`, 'utf8'))
  optional[sub.name] = pkg.version
}
pkg.optionalDependencies = optional
fs.writeFileSync('package.json', JSON.stringify(pkg, null, 2) + '\n')
console.error(`dist-npm: optionalDependencies ${Object.keys(optional).join(', ')}`)
EOF
rm -f ./*.node
npm pack --silent --pack-destination "$DIST" > /dev/null
built=0
for dir in npm/*/; do
  if ls "$dir"/*.node >/dev/null 2>&1; then
    (cd "$dir" && npm pack --silent --pack-destination "$DIST" > /dev/null)
    echo "dist-npm: packed $(node -p "require('./$dir/package.json').name")"
    built=$((built + 1))
  fi
done
[ "$built" -ge 1 ] || { echo "dist-npm: no platform package holds a .node file" >&2; exit 1; }
