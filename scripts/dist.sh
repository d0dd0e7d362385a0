#!/usr/bin/env bash
# `make dist`: build what users install, into dist/ (replaced whole):
#
#   memstrata-<v>-cp39-abi3-manylinux_*.whl   the Python package (one wheel for CPython >= 3.9)
#   memstrata-<v>.tar.gz                       its sdist (builds from source: needs Rust)
#   memstrata_mcp-<v>-py3-none-manylinux_*.whl the MCP server as a Python package (`uvx memstrata-mcp`)
#   memstrata-<v>.tgz                          the npm package (JS, types; no native code)
#   memstrata-linux-x64-gnu-<v>.tgz            its platform package (the .node for this platform)
#   memstrata-kotlin-<v>.jar, .pom             the Kotlin/JVM artifact with libmemstrata_ffi inside
#   SHA256SUMS, manylinux.txt                  checksums; the manylinux policy auditwheel reports
#   layout.txt                                 how the code layout lies in each library (layout/)
#
# Everything is built in the `dist` profile (Cargo.toml: `release` with fat LTO and one
# codegen unit, for smaller libraries) of the four crates (the workspace's feature union
# makes the core compile once for all of them), then
# each tool packages what cargo built. DIST_PARTS=python,mcp,npm,jar builds a subset.
# The iOS XCFramework (bindings-swift/scripts/build-xcframework.sh, macOS only) and the
# Android libraries (cargo-ndk, docs/bindings.md) are built by their own scripts, unchanged;
# the release workflow (.github/workflows/release.yml) runs them on their platforms.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$REPO/target}
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
export npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false
DIST=${DIST_DIR:-$REPO/dist}
PARTS=${DIST_PARTS:-python,mcp,npm,jar}
has() { [[ ",$PARTS," == *",$1,"* ]]; }
step() { echo "== dist: $*"; }

rm -rf "$DIST"
mkdir -p "$DIST"
bash scripts/venv.sh
bin=bin
[ -d "$REPO/.venv/Scripts" ] && bin=Scripts   # Windows
PY=$REPO/.venv/$bin/python
MATURIN=$REPO/.venv/$bin/maturin

# The code layout (layout/README.md): where rustc links with its own lld, the functions an
# ingest runs are placed together, so that fewer 64 KiB blocks of each library become
# resident. RUSTFLAGS reaches every crate of every tool below; it does not change symbol
# names (cargo leaves it out of -C metadata).
# shellcheck source=layout/flags.sh
source layout/flags.sh
layout_use
if [ -z "$LAYOUT_FLAGS" ]; then
  step "code layout not applied (layout/flags.sh: not rustc's lld on x86_64 Linux, or turned off)"
fi

if [[ " ${DIST_MATURIN_ARGS:-} " == *" --zig "* ]]; then
  "$PY" -m pip install --quiet "ziglang>=0.13"   # maturin links with zig (older glibc)
fi

# Each crate is built by the tool that packages it (maturin, build-dev.mjs, cargo for the
# JAR), one after the other: the core and its dependencies are compiled once for all of
# them (feature-union/), while each binding's own crates keep the feature set their tool
# asks for, so nothing is built twice. (One joint `cargo build -p A -p B ...` first would
# build memstrata-bindings-common with the union of the bindings' features, and every
# tool would then rebuild it and the binding above it.)

if has python; then
  step "Python wheel (maturin, abi3) and sdist"
  # DIST_MATURIN_ARGS: e.g. `--zig --compatibility manylinux_2_28` in the release workflow.
  # shellcheck disable=SC2086
  "$MATURIN" build --profile dist -m bindings-python/Cargo.toml -i "$PY" -o "$DIST" ${DIST_MATURIN_ARGS:-}
  "$MATURIN" sdist -m bindings-python/Cargo.toml -o "$DIST"
  if [ -n "$LAYOUT_FLAGS" ]; then
    ext=$(mktemp -d)
    unzip -q -d "$ext" "$DIST"/memstrata-*-abi3-*.whl 'memstrata/_memstrata*.so'
    layout_check "Python extension" "$ext"/memstrata/_memstrata*.so
    rm -rf "$ext"
  fi
fi
if has mcp; then
  step "memstrata-mcp wheel (maturin bindings = \"bin\")"
  # shellcheck disable=SC2086
  "$MATURIN" build --profile dist -m mcp-adapter/Cargo.toml -o "$DIST" ${DIST_MATURIN_ARGS:-}
  if [ -n "$LAYOUT_FLAGS" ]; then layout_check "MCP server" "$CARGO_TARGET_DIR/dist/memstrata-mcp"; fi
fi
if { has python || has mcp; } && [ "$(uname -s)" = Linux ]; then
  # The policy each wheel meets, as auditwheel reads it from the symbols it links.
  [ -x "$REPO/.venv/bin/auditwheel" ] || "$PY" -m pip install --quiet "auditwheel>=6"
  for whl in "$DIST"/*.whl; do
    "$REPO/.venv/bin/auditwheel" show "$whl" | tr '\n' ' ' | sed 's/  */ /g' | sed "s|^|$(basename "$whl"): |"
    echo
  done > "$DIST/manylinux.txt"
  cat "$DIST/manylinux.txt"
fi

if has npm; then
  step "npm packages (napi-rs layout: memstrata + memstrata-<platform>)"
  bash scripts/dist-npm.sh "$DIST"
  if [ -n "$LAYOUT_FLAGS" ]; then layout_check "Node module" bindings-node/*.node; fi
fi

if has jar; then
  step "Kotlin/JVM JAR with the native library inside"
  cargo build --profile dist -p memstrata-ffi
  native=$CARGO_TARGET_DIR/dist-native
  rm -rf "$native"
  case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) res=linux-x86-64 lib=libmemstrata_ffi.so ;;
    Linux-aarch64) res=linux-aarch64 lib=libmemstrata_ffi.so ;;
    Darwin-x86_64) res=darwin-x86-64 lib=libmemstrata_ffi.dylib ;;
    Darwin-arm64) res=darwin-aarch64 lib=libmemstrata_ffi.dylib ;;
    MINGW*-x86_64 | MSYS*-x86_64) res=win32-x86-64 lib=memstrata_ffi.dll ;;
    *) echo "dist: no JNA resource prefix known for $(uname -s)-$(uname -m)" >&2; exit 1 ;;
  esac
  mkdir -p "$native/$res"
  cp "$CARGO_TARGET_DIR/dist/$lib" "$native/$res/"
  # uniffi turns on dependency features the other libraries do not, which changes the
  # crate hashes in this library's symbol names: the order file (made from the Python
  # extension) matches only std's functions here, so this check only reports.
  if [ -n "$LAYOUT_FLAGS" ]; then layout_check "Kotlin/JVM library" "$CARGO_TARGET_DIR/dist/$lib" --min-found 0; fi
  # Extra native libraries built elsewhere (other platforms, from the release workflow)
  # can be added as DIST_JAR_NATIVE=<dir with linux-x86-64/, darwin-aarch64/, ...>.
  if [ -n "${DIST_JAR_NATIVE:-}" ]; then cp -r "$DIST_JAR_NATIVE"/. "$native/"; fi
  mvn -q -B -Dstyle.color=never -f bindings-swift/kotlin/pom.xml clean package -DskipTests \
    -Dmemstrata.native.dir="$native"
  cp bindings-swift/kotlin/target/memstrata-kotlin-*.jar "$DIST/"
  ver=$(basename "$DIST"/memstrata-kotlin-*.jar .jar)
  cp bindings-swift/kotlin/pom.xml "$DIST/$ver.pom"
  unzip -l "$DIST/$ver.jar" | grep -c "$res/$lib" > /dev/null || { echo "dist: $res/$lib is not in the JAR" >&2; exit 1; }
fi

(cd "$DIST" && sha256sum -- *.whl *.tar.gz *.tgz *.jar 2>/dev/null > SHA256SUMS) || true
step "done"
ls -l "$DIST"
