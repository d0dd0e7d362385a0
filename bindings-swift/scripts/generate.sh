#!/usr/bin/env bash
# Generate the Swift and Kotlin sources of memstrata-ffi with uniffi-bindgen in
# library mode (the metadata is read from the built library itself), and put
# them where the packages take them:
#
#   kotlin/src/generated/kotlin/   the Kotlin source (package dev.memstrata)
#   Sources/Memstrata/Generated/   the Swift source (module Memstrata)
#   Headers/                       the C headers and module.modulemap of the
#                                  XCFramework (scripts/build-xcframework.sh)
#
# Every file in those three folders is generated: they are replaced whole.
#
#   generate.sh           build (dev profile) and write the files
#   generate.sh --check   build, generate into a temporary folder and fail
#                         when the committed files differ (what `make test` runs)
set -euo pipefail
export LC_ALL=C   # stable file order (module map) whatever the locale

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"   # bindings-swift/
root="$(cd "$here/.." && pwd)"                            # the workspace
check=0
case "${1:-}" in
  --check) check=1 ;;
  "") ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
cd "$root"
cargo build -p memstrata-ffi -p memstrata-uniffi-bindgen

case "$(uname -s)" in
  Darwin) lib="$CARGO_TARGET_DIR/debug/libmemstrata_ffi.dylib" ;;
  *) lib="$CARGO_TARGET_DIR/debug/libmemstrata_ffi.so" ;;
esac
bindgen="$CARGO_TARGET_DIR/debug/uniffi-bindgen"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# --no-format: the output must not depend on whether ktlint or swift-format
# happens to be installed.
gen() { "$bindgen" generate --library "$lib" --config "$here/uniffi-global.toml" --no-format "$@" >/dev/null; }
gen --language kotlin --out-dir "$tmp/raw"
# Both crates compile into the one Swift module `Memstrata` (uniffi's Swift
# output is made to share a module: its helpers are fileprivate), but uniffi
# names each crate's file after the module, so each crate is generated on its
# own and the records crate's file renamed.
gen --language swift --crate memstrata_ffi --out-dir "$tmp/raw"
gen --language swift --crate memstrata_bindings_common --out-dir "$tmp/common"
mv "$tmp/common/Memstrata.swift" "$tmp/raw/MemstrataCommon.swift"
mv "$tmp/common"/*.h "$tmp/common"/*.modulemap "$tmp/raw/"

out="$tmp/out"
mkdir -p "$out/kotlin" "$out/swift" "$out/headers"
while IFS= read -r -d '' kt; do
  mkdir -p "$out/kotlin/$(dirname "$kt")"
  cp "$tmp/raw/$kt" "$out/kotlin/$kt"
done < <(cd "$tmp/raw" && find . -name '*.kt' -print0)
cp "$tmp/raw"/*.swift "$out/swift/"
cp "$tmp/raw"/*.h "$out/headers/"
# One module map for the XCFramework's Headers folder, naming every crate's
# FFI module (memstrata-ffi and the records crate memstrata-bindings-common).
for m in "$tmp/raw"/*.modulemap; do
  cat "$m"
  echo
done > "$out/headers/module.modulemap"

targets=(
  "kotlin:$here/kotlin/src/generated/kotlin"
  "swift:$here/Sources/Memstrata/Generated"
  "headers:$here/Headers"
)

if [[ $check == 1 ]]; then
  stale=0
  for t in "${targets[@]}"; do
    name="${t%%:*}" dest="${t#*:}"
    if ! diff -r "$out/$name" "$dest" >"$tmp/$name.diff" 2>&1; then
      echo "generated $name bindings in ${dest#"$root"/} are out of date:" >&2
      head -n 40 "$tmp/$name.diff" >&2
      stale=1
    fi
  done
  if [[ $stale == 1 ]]; then
    echo "run 'make swift-bindings' and commit the result" >&2
    exit 1
  fi
  echo "generated Swift and Kotlin bindings are up to date"
else
  for t in "${targets[@]}"; do
    name="${t%%:*}" dest="${t#*:}"
    rm -rf "$dest"
    mkdir -p "$(dirname "$dest")"
    cp -R "$out/$name" "$dest"
    echo "wrote ${dest#"$root"/}"
  done
fi
