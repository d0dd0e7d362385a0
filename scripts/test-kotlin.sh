#!/usr/bin/env bash
# Kotlin binding suite (bindings-swift/): build libmemstrata_ffi (dev profile)
# and the pinned uniffi-bindgen, check that the committed Swift/Kotlin sources
# are what that library generates, then compile the Kotlin module with Maven and
# run its JUnit 5 tests on the JVM against the library just built; last, a few
# of the same scenarios through uniffi's generated Python (python3, stdlib only).
#
# Needs a JDK ≥ 17 and Maven, and Maven Central (or a warm ~/.m2): there is no
# silent skip. Extra arguments go to Maven (e.g. -Dtest=ShortTermTest).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}"
export CARGO_PROFILE_DEV_DEBUG="${CARGO_PROFILE_DEV_DEBUG:-0}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

for tool in java mvn; do
  command -v "$tool" >/dev/null || { echo "test-kotlin: '$tool' not found (JDK 17 and Maven are required)" >&2; exit 1; }
done

echo "test-kotlin: memstrata-ffi's Rust tests (not in test-rust: see the Makefile)"
cargo test -p memstrata-ffi -p memstrata-uniffi-bindgen

echo "test-kotlin: building memstrata-ffi and checking the generated bindings"
bash bindings-swift/scripts/generate.sh --check
echo "test-kotlin: the generated Kotlin sources against the API manifest (bindings-common/api.toml)"
python3 scripts/api.py kotlin

libdir="$CARGO_TARGET_DIR/debug"
pom=bindings-swift/kotlin/pom.xml
reports=bindings-swift/kotlin/target/surefire-reports
rm -rf "$reports"
echo "test-kotlin: mvn test (library from $libdir)"
status=0
mvn -q -B -Dstyle.color=never -f "$pom" test -Dmemstrata.lib.dir="$libdir" "$@" || status=$?

# mvn -q prints nothing on success (but may leave an ANSI reset without a
# newline): sum up Surefire's reports in one line of its own.
echo
python3 - "$reports" <<'PY'
import glob, sys
import xml.etree.ElementTree as ET
tests = failed = skipped = 0
for f in glob.glob(sys.argv[1] + "/TEST-*.xml"):
    r = ET.parse(f).getroot()
    tests += int(r.get("tests", 0))
    failed += int(r.get("failures", 0)) + int(r.get("errors", 0))
    skipped += int(r.get("skipped", 0))
print(f"kotlin: {tests - failed - skipped} passed, {failed} failed, {skipped} skipped")
PY

# A second, cheaper check: uniffi's own Python bindings, generated from the same
# library, run a few of the same scenarios (bindings-swift/tests/).
echo "test-kotlin: uniffi Python bindings of the same library"
pydir="$(mktemp -d)"
trap 'rm -rf "$pydir"' EXIT
mkdir -p "$pydir/uniffi_memstrata"
"$libdir/uniffi-bindgen" generate --library "$libdir/libmemstrata_ffi.so" \
  --config bindings-swift/uniffi-global.toml --language python --no-format \
  --out-dir "$pydir/uniffi_memstrata" >/dev/null
touch "$pydir/uniffi_memstrata/__init__.py"
cp "$libdir/libmemstrata_ffi.so" "$pydir/uniffi_memstrata/"
python3 bindings-swift/tests/uniffi_python_check.py "$pydir" || status=1
exit "$status"
