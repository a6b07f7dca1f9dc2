#!/usr/bin/env bash
# A throwaway PostgreSQL server on loopback, for statefold's PostgresStore tests.
#
#   test/support/pg.sh install   apt-get install Debian's postgresql (idempotent)
#   test/support/pg.sh start     initdb in a temp dir, start on 127.0.0.1 only (a free port, trust auth,
#                                Debian's defaults: fsync and synchronous_commit on), create the database
#                                statefold_test, print `export STATEFOLD_PG_URL=...` on stdout
#   test/support/pg.sh stop      stop it and remove its temp dir
#
# Typical use:  test/support/pg.sh install && eval "$(test/support/pg.sh start)" && npm test; test/support/pg.sh stop
# Runs as root (the server itself runs as the `postgres` user). Logs go to stderr; stdout carries only the export line.
# Its state file is its own (not bench/postgres.sh's), so a test server and the bench's can run side by side.
# Environment: STATEFOLD_PG_TEST_STATE (pointer file, default /tmp/statefold-pg-test.state),
#              STATEFOLD_PG_TIMEOUT (seconds start and stop wait for the server, default 60).
set -Eeuo pipefail

STATE_FILE="${STATEFOLD_PG_TEST_STATE:-/tmp/statefold-pg-test.state}"
WAIT_SECONDS="${STATEFOLD_PG_TIMEOUT:-60}"
DATABASE=statefold_test
log() { printf 'pg.sh [%2ds]: %s\n' "$SECONDS" "$*" >&2; }
die() { log "error: $*"; exit 1; }

bindir() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }

cmd_install() {
  local bin
  bin="$(bindir)"
  if [[ -n "$bin" && -x "$bin/initdb" && -x "$bin/pg_ctl" ]] && command -v psql >/dev/null && command -v ss >/dev/null; then
    log "postgresql is already installed ($bin)"
    return 0
  fi
  [[ $(id -u) -eq 0 ]] || die "install needs root (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  local apt_log=/tmp/statefold-pg-install.log
  log "apt-get install postgresql (output in $apt_log)"
  # --no-install-recommends keeps it to the server; without systemd no cluster service is started.
  if ! { timeout 300 apt-get update -qq && timeout 600 apt-get install -y -qq --no-install-recommends \
    postgresql iproute2; } >"$apt_log" 2>&1; then
    tail -n 30 "$apt_log" >&2
    die "apt-get failed (see $apt_log)"
  fi
  log "installed: $(bindir)"
}

# A TCP port on 127.0.0.1 that nothing listens on, from a range.
free_port() {
  local port
  for ((port = 47600; port <= 47700; port++)); do
    if ! ss -Htln "sport = :$port" 2>/dev/null | grep -q .; then
      echo "$port"
      return 0
    fi
  done
  die "no free port in 47600-47700"
}

cmd_start() {
  local bin port dir
  [[ $(id -u) -eq 0 ]] || die "start needs root (the server runs as the postgres user)"
  bin="$(bindir)"
  [[ -n "$bin" ]] || die "postgresql is not installed: run test/support/pg.sh install"
  if [[ -f "$STATE_FILE" ]]; then
    local old_dir old_bin old_port
    { read -r old_dir; read -r old_bin; read -r old_port; } <"$STATE_FILE"
    if timeout 10 "$old_bin/pg_isready" -q -h 127.0.0.1 -p "$old_port" -t 5; then
      log "already running on 127.0.0.1:$old_port"
      echo "export STATEFOLD_PG_URL=postgres://postgres@127.0.0.1:$old_port/$DATABASE"
      return 0
    fi
    log "a previous server in $old_dir does not answer: stopping it first"
    cmd_stop
  fi
  dir="$(mktemp -d /tmp/statefold-pg-test.XXXXXX)"
  chown postgres: "$dir"
  port="$(free_port)"
  printf '%s\n%s\n%s\n' "$dir" "$bin" "$port" >"$STATE_FILE"
  trap 'log "start failed; cleaning up"; cmd_stop || true' ERR
  log "initdb in $dir"
  timeout 120 runuser -u postgres -- "$bin/initdb" -D "$dir/data" -A trust -U postgres >"$dir/initdb.log" 2>&1 \
    || { tail -n 20 "$dir/initdb.log" >&2; false; }
  log "starting on 127.0.0.1:$port"
  # Loopback only (no unix socket outside the temp dir); enough connections for the tests' pools.
  timeout $((WAIT_SECONDS + 10)) runuser -u postgres -- "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
    -t "$WAIT_SECONDS" -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=200" start >&2 \
    || { tail -n 20 "$dir/server.log" >&2; false; }
  timeout 30 "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -qc "CREATE DATABASE $DATABASE" >&2
  trap - ERR
  log "ready: postgres://postgres@127.0.0.1:$port/$DATABASE (log in $dir/server.log)"
  echo "export STATEFOLD_PG_URL=postgres://postgres@127.0.0.1:$port/$DATABASE"
}

cmd_stop() {
  [[ -f "$STATE_FILE" ]] || { log "not started"; return 0; }
  local dir bin
  { read -r dir; read -r bin; } <"$STATE_FILE"
  if [[ -d "$dir/data" ]]; then
    timeout $((WAIT_SECONDS + 10)) runuser -u postgres -- "$bin/pg_ctl" -D "$dir/data" -m fast -w \
      -t "$WAIT_SECONDS" stop >&2 || log "pg_ctl stop failed"
  fi
  case $dir in
    /tmp/statefold-pg-test.*) rm -rf "$dir" ;;
    *) log "not removing unexpected dir '$dir'" ;;
  esac
  rm -f "$STATE_FILE"
  log "stopped"
}

case "${1:-}" in
  install) cmd_install ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  *) echo "usage: $0 install|start|stop" >&2; exit 2 ;;
esac
