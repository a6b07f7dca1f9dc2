#!/usr/bin/env bash
# A throwaway PostgreSQL server on loopback, for the LangGraph section of the benchmark
# (LangGraph's PostgresSaver runs against it, side by side with statefold).
#
#   bench/postgres.sh install   apt-get install Debian's postgresql (idempotent)
#   bench/postgres.sh start     initdb in a temp dir, start on 127.0.0.1 (trust auth, Debian's
#                               defaults: fsync and synchronous_commit on), print
#                               `export STATEFOLD_PG_URL=...` on stdout
#   bench/postgres.sh stop      stop it and remove its temp dir
#
# Typical use:  bench/postgres.sh install && eval "$(bench/postgres.sh start)" && npm run bench; bench/postgres.sh stop
# Runs as root (the server itself runs as the `postgres` user). Logs go to stderr.
set -Eeuo pipefail

STATE_FILE="${STATEFOLD_PG_STATE:-/tmp/statefold-pg.state}"
log() { printf 'postgres.sh [%2ds]: %s\n' "$SECONDS" "$*" >&2; }
die() { log "error: $*"; exit 1; }

bindir() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }

cmd_install() {
  if [[ -n "$(bindir)" && -x "$(bindir)/initdb" ]]; then
    log "postgresql is already installed ($(bindir))"
    return 0
  fi
  [[ $(id -u) -eq 0 ]] || die "install needs root (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  local apt_log=/tmp/statefold-pg-install.log
  log "apt-get install postgresql (output in $apt_log)"
  if ! { timeout 300 apt-get update -qq && timeout 600 apt-get install -y -qq --no-install-recommends postgresql; } \
    >"$apt_log" 2>&1; then
    tail -n 30 "$apt_log" >&2
    die "apt-get failed (see $apt_log)"
  fi
}

cmd_start() {
  local bin port dir
  bin="$(bindir)"
  [[ -n "$bin" ]] || die "postgresql is not installed: run bench/postgres.sh install"
  [[ -f "$STATE_FILE" ]] && die "already started ($STATE_FILE); run bench/postgres.sh stop first"
  dir="$(mktemp -d /tmp/statefold-pg.XXXXXX)"
  chown postgres: "$dir"
  for ((port = 47432; port <= 47532; port++)); do
    ss -Htln "sport = :$port" 2>/dev/null | grep -q . || break
  done
  log "initdb in $dir"
  runuser -u postgres -- "$bin/initdb" -D "$dir/data" -A trust -U postgres >"$dir/initdb.log" 2>&1 \
    || { tail -n 20 "$dir/initdb.log" >&2; die "initdb failed"; }
  log "starting on 127.0.0.1:$port"
  runuser -u postgres -- timeout 60 "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 50 \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $dir" start >&2 \
    || { tail -n 20 "$dir/server.log" >&2; die "postgres did not start"; }
  printf '%s\n%s\n%s\n' "$dir" "$bin" "$port" >"$STATE_FILE"
  timeout 30 psql -h 127.0.0.1 -p "$port" -U postgres -qc 'CREATE DATABASE statefold_bench' >&2
  log "ready: postgres://postgres@127.0.0.1:$port/statefold_bench"
  echo "export STATEFOLD_PG_URL=postgres://postgres@127.0.0.1:$port/statefold_bench"
}

cmd_stop() {
  [[ -f "$STATE_FILE" ]] || { log "not started"; return 0; }
  local dir bin
  { read -r dir; read -r bin; } <"$STATE_FILE"
  runuser -u postgres -- timeout 60 "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >&2 || true
  rm -rf "$dir" "$STATE_FILE"
  log "stopped"
}

case "${1:-}" in
  install) cmd_install ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  *) die "usage: bench/postgres.sh install|start|stop" ;;
esac
