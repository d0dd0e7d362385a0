# Sourced by scripts/dist.sh, scripts/bench-footprint.sh and layout/generate.sh: the code-layout flags
# (layout/README.md). `layout_rustflags` prints the rustc flags that make the linker place
# the functions of layout/memstrata.order first and together, or nothing where they do not
# apply: only rustc's own lld (the default linker of x86_64-unknown-linux-gnu since Rust
# 1.90) takes `--symbol-ordering-file`; zig's linker (`maturin --zig`), GNU ld, ld64 and
# link.exe do not. MEMSTRATA_CODE_LAYOUT=0 turns it off.
# shellcheck shell=bash

LAYOUT_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

layout_rustflags() {
  local repo=$LAYOUT_REPO version host minor
  [ "${MEMSTRATA_CODE_LAYOUT:-1}" != 0 ] || return 0
  [[ " ${DIST_MATURIN_ARGS:-} " != *" --zig "* ]] || return 0
  [ -z "${CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER:-}" ] || return 0
  version=$(rustc -vV)
  host=$(sed -n 's/^host: //p' <<< "$version")
  minor=$(sed -n 's/^release: 1\.\([0-9]*\)\..*/\1/p' <<< "$version")
  [ "$host" = x86_64-unknown-linux-gnu ] && [ "${minor:-0}" -ge 90 ] || return 0
  # cargo does not watch the file a link argument names: a copy named by its content makes
  # a changed order file a changed flag, so the libraries are linked again.
  local target sum
  target=${CARGO_TARGET_DIR:-$repo/target}/layout
  sum=$(sha256sum "$repo/layout/memstrata.order" | cut -c1-16)
  mkdir -p "$target"
  [ -f "$target/memstrata-$sum.order" ] || cp "$repo/layout/memstrata.order" "$target/memstrata-$sum.order"
  printf -- '-C link-arg=-Wl,--symbol-ordering-file=%s -C link-arg=-Wl,--no-warn-symbol-ordering' \
    "$target/memstrata-$sum.order"
}

# layout_use: sets LAYOUT_FLAGS to layout_rustflags' output and, if there is any, appends it
# to the exported RUSTFLAGS (what scripts/dist.sh, scripts/bench-footprint.sh and
# layout/generate.sh do before they build).
layout_use() {
  LAYOUT_FLAGS=$(layout_rustflags)
  if [ -n "$LAYOUT_FLAGS" ]; then export RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }$LAYOUT_FLAGS"; fi
}

# layout_check NAME FILE: layout/order.py's check of one built library (FILE), its line
# appended to $DIST/layout.txt when DIST is set; fails when the order was not applied.
layout_check() {
  local line rc=0
  line=$(python3 "$LAYOUT_REPO/layout/order.py" check "$2" "$LAYOUT_REPO/layout/memstrata.order" "${@:3}") || rc=$?
  echo "$1: $line"
  if [ -n "${DIST:-}" ]; then echo "$1: $line" >> "$DIST/layout.txt"; fi
  return $rc
}
