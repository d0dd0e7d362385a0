#!/usr/bin/env bash
# Build build/MemstrataFFI.xcframework, the binary target of Package.swift:
# libmemstrata_ffi as a static library for
#   iOS devices         aarch64-apple-ios
#   iOS simulator       aarch64-apple-ios-sim + x86_64-apple-ios (one fat library)
#   macOS               aarch64-apple-darwin + x86_64-apple-darwin (one fat library)
# each with Headers/ (the generated C headers and module.modulemap).
#
# Needs macOS with Xcode (xcodebuild, lipo) and the five Rust targets:
#   rustup target add aarch64-apple-ios aarch64-apple-ios-sim x86_64-apple-ios \
#     aarch64-apple-darwin x86_64-apple-darwin
# The repository's own machines have no Apple toolchain: this script is
# checked there with `bash -n` and shellcheck only.
#
# Usage: build-xcframework.sh [--profile release|dev]   (default: release)
set -euo pipefail

profile=release
while [[ $# -gt 0 ]]; do
  case "$1" in
    --profile) profile="${2:?--profile needs a value}"; shift 2 ;;
    -h | --help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"   # bindings-swift/
root="$(cd "$here/.." && pwd)"

if [[ "$(uname -s)" != Darwin ]] || ! command -v xcodebuild >/dev/null; then
  echo "build-xcframework.sh needs macOS with Xcode (xcodebuild); this is $(uname -s)" >&2
  exit 1
fi

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
case "$profile" in
  release) profile_dir=release ;;
  dev) profile_dir=debug ;;
  *) profile_dir="$profile" ;;
esac

targets=(aarch64-apple-ios aarch64-apple-ios-sim x86_64-apple-ios aarch64-apple-darwin x86_64-apple-darwin)
cd "$root"
for t in "${targets[@]}"; do
  echo "building libmemstrata_ffi.a for $t ($profile)"
  # The crate's manifest lists lib + cdylib; the static library is asked for here
  # so that builds on other hosts do not produce an unused .a.
  cargo rustc -p memstrata-ffi --lib --crate-type staticlib --profile "$profile" --target "$t"
done

lib() { echo "$CARGO_TARGET_DIR/$1/$profile_dir/libmemstrata_ffi.a"; }

# The generated headers must match the library being packaged.
bash "$here/scripts/generate.sh" --check

work="$here/build/xcframework-work"
out="$here/build/MemstrataFFI.xcframework"
rm -rf "$work" "$out"
mkdir -p "$work/ios-simulator" "$work/macos"
lipo -create "$(lib aarch64-apple-ios-sim)" "$(lib x86_64-apple-ios)" \
  -output "$work/ios-simulator/libmemstrata_ffi.a"
lipo -create "$(lib aarch64-apple-darwin)" "$(lib x86_64-apple-darwin)" \
  -output "$work/macos/libmemstrata_ffi.a"

xcodebuild -create-xcframework \
  -library "$(lib aarch64-apple-ios)" -headers "$here/Headers" \
  -library "$work/ios-simulator/libmemstrata_ffi.a" -headers "$here/Headers" \
  -library "$work/macos/libmemstrata_ffi.a" -headers "$here/Headers" \
  -output "$out"
rm -rf "$work"
echo "wrote ${out#"$root"/}"
