#!/usr/bin/env bash
# Run a command against a throwaway PostgreSQL server:
#
#   bash scripts/pg-test.sh <command> [args...]
#
# 1. Finds PostgreSQL's server binaries (initdb, pg_ctl); installs Debian's
#    `postgresql` package when they are missing (as root, through apt-get).
# 2. Creates a cluster in a temporary directory, owned by a non-root user
#    (initdb refuses root: as root the cluster runs as `postgres`, created if
#    missing), listening on 127.0.0.1 only at a free port, with fsync on (the
#    durability the tests check is the one users get) and a random password
#    (scram-sha-256; the Unix socket sits in the temporary directory).
# 3. Creates the database `memstrata` and exports
#      MEMSTRATA_TEST_PG_URL=postgres://memstrata:<password>@127.0.0.1:<port>/memstrata
#    (stores add `?schema=NAME`; each test picks its own schema).
# 4. Runs the command, then stops the server and deletes the directory on
#    every exit path (trap), and exits with the command's status.
#
# If the server cannot be installed or started, the script prints why (with
# the server log) and exits non-zero: the PostgreSQL suites fail, never skip.
set -euo pipefail

if [ $# -eq 0 ]; then
  echo "usage: $0 <command> [args...]" >&2
  exit 2
fi

die() {
  echo "pg-test: ERROR: $*" >&2
  echo "pg-test: the PostgreSQL test server could not be started; the PostgreSQL suites did not run." >&2
  exit 1
}

# --- 1. server binaries -------------------------------------------------------
find_bindir() {
  local d
  if [ -n "${PG_BINDIR:-}" ] && [ -x "$PG_BINDIR/initdb" ]; then
    echo "$PG_BINDIR"
    return 0
  fi
  # Debian keeps the server binaries out of PATH, one directory per major version:
  # take the newest.
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k4 -V -r); do
    if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
      echo "$d"
      return 0
    fi
  done
  if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
    dirname "$(command -v initdb)"
    return 0
  fi
  return 1
}

if ! BINDIR=$(find_bindir); then
  echo "pg-test: initdb not found; installing Debian's postgresql package"
  [ "$(id -u)" -eq 0 ] || die "initdb is missing and this is not root: install PostgreSQL (Debian: apt-get install postgresql) or set PG_BINDIR"
  command -v apt-get >/dev/null 2>&1 || die "initdb is missing and apt-get is not available: install PostgreSQL or set PG_BINDIR"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y --no-install-recommends postgresql >/tmp/pg-test-apt.log 2>&1; then
    apt-get update >>/tmp/pg-test-apt.log 2>&1 || true
    apt-get install -y --no-install-recommends postgresql >>/tmp/pg-test-apt.log 2>&1 \
      || { tail -n 30 /tmp/pg-test-apt.log >&2; die "apt-get install postgresql failed (log above)"; }
  fi
  BINDIR=$(find_bindir) || die "postgresql was installed but initdb is still not found under /usr/lib/postgresql/*/bin"
fi
VERSION=$("$BINDIR/postgres" --version 2>/dev/null || echo "PostgreSQL (unknown version)")

# --- 2. the cluster, as a non-root user -------------------------------------
RUN_AS=()
if [ "$(id -u)" -eq 0 ]; then
  PG_USER=${PG_TEST_OS_USER:-postgres}
  if ! id -u "$PG_USER" >/dev/null 2>&1; then
    useradd --system --no-create-home --shell /usr/sbin/nologin "$PG_USER" \
      || die "cannot create the system user '$PG_USER' to run the server (initdb refuses root)"
  fi
  command -v runuser >/dev/null 2>&1 || die "runuser is missing: cannot run the server as '$PG_USER'"
  RUN_AS=(runuser -u "$PG_USER" --)
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/memstrata-pg.XXXXXX")
DATA=$WORK/data
LOG=$WORK/server.log
started=0

cleanup() {
  local rc=$?
  if [ "$started" -eq 1 ]; then
    "${RUN_AS[@]}" "$BINDIR/pg_ctl" -D "$DATA" -m fast -w -t 30 stop >/dev/null 2>&1 \
      || "${RUN_AS[@]}" "$BINDIR/pg_ctl" -D "$DATA" -m immediate stop >/dev/null 2>&1 || true
  fi
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ ${#RUN_AS[@]} -gt 0 ]; then
  chown "$PG_USER" "$WORK"
  chmod 700 "$WORK"
fi

PASSWORD=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
PWFILE=$WORK/pw
printf '%s\n' "$PASSWORD" >"$PWFILE"
[ ${#RUN_AS[@]} -eq 0 ] || chown "$PG_USER" "$PWFILE"
chmod 600 "$PWFILE"

"${RUN_AS[@]}" "$BINDIR/initdb" -D "$DATA" -U memstrata --pwfile="$PWFILE" --auth=scram-sha-256 \
  --encoding=UTF8 --locale=C.UTF-8 --no-sync >"$WORK/initdb.log" 2>&1 \
  || "${RUN_AS[@]}" "$BINDIR/initdb" -D "$DATA" -U memstrata --pwfile="$PWFILE" --auth=scram-sha-256 \
    --encoding=UTF8 --no-locale --no-sync >"$WORK/initdb.log" 2>&1 \
  || { cat "$WORK/initdb.log" >&2; die "initdb failed (output above)"; }
rm -f "$PWFILE"

# A port nobody listens on: ask the kernel for one, then let the server bind it;
# if something takes it in between, the start fails with "could not bind" and
# we try another.
free_port() {
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
  else
    echo $((20000 + RANDOM % 40000))
  fi
}

for attempt in 1 2 3 4 5; do
  PORT=${PG_TEST_PORT:-$(free_port)}
  # fsync and full_page_writes stay on (the defaults): the crash tests kill
  # processes and check acknowledged writes, as users' servers would run.
  started=1 # from here on, cleanup stops whatever pg_ctl may have left running
  if "${RUN_AS[@]}" "$BINDIR/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $PORT -c unix_socket_directories=$WORK -c max_connections=300 -c fsync=on" \
    start >/dev/null 2>&1; then
    break
  fi
  "${RUN_AS[@]}" "$BINDIR/pg_ctl" -D "$DATA" -m immediate stop >/dev/null 2>&1 || true
  started=0
  if [ -n "${PG_TEST_PORT:-}" ] || ! grep -q "could not bind\|Address already in use" "$LOG" 2>/dev/null; then
    echo "---- server log ($LOG) ----" >&2
    cat "$LOG" >&2 2>/dev/null || true
    die "$VERSION did not start on 127.0.0.1:$PORT (attempt $attempt; log above)"
  fi
done
[ "$started" -eq 1 ] || die "$VERSION: no free port found after 5 attempts"

# Ready means accepting connections on the TCP port the tests use.
for _ in $(seq 1 60); do
  if "$BINDIR/pg_isready" -q -h 127.0.0.1 -p "$PORT" -d postgres; then
    break
  fi
  sleep 0.5
done
"$BINDIR/pg_isready" -q -h 127.0.0.1 -p "$PORT" -d postgres \
  || { cat "$LOG" >&2; die "$VERSION started but does not accept connections on 127.0.0.1:$PORT"; }

PGPASSWORD=$PASSWORD "$BINDIR/createdb" -h 127.0.0.1 -p "$PORT" -U memstrata memstrata \
  || { cat "$LOG" >&2; die "createdb memstrata failed on 127.0.0.1:$PORT"; }

export MEMSTRATA_TEST_PG_URL="postgres://memstrata:$PASSWORD@127.0.0.1:$PORT/memstrata"
export MEMSTRATA_TEST_PG_BINDIR=$BINDIR
echo "pg-test: $VERSION on 127.0.0.1:$PORT (data in $DATA, fsync on)"
echo "pg-test: MEMSTRATA_TEST_PG_URL=postgres://memstrata:***@127.0.0.1:$PORT/memstrata"

# --- 3. the command -----------------------------------------------------------
set +e
"$@"
status=$?
set -e
if [ "$status" -ne 0 ]; then
  echo "pg-test: '$*' failed with status $status" >&2
  # The server's own account of the run (a backend that crashed, a shutdown,
  # connections refused) goes with the temporary directory: keep what matters.
  if [ -f "$LOG" ]; then
    echo "pg-test: the server's log, its warnings and errors ($VERSION on port $PORT):" >&2
    grep -E 'PANIC|FATAL|ERROR|WARNING|terminated|crash|shut|signal|restart' "$LOG" | tail -n 60 >&2 || true
  fi
fi
exit "$status"
