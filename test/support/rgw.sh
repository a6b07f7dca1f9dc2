#!/usr/bin/env bash
# A single-node Ceph RADOS Gateway on loopback, for statefold's S3 integration tests.
#
#   test/support/rgw.sh install   apt-get install Debian's ceph-mon ceph-osd radosgw (idempotent)
#   test/support/rgw.sh start     start mon + memstore OSD + radosgw on 127.0.0.1, create a user and
#                                 a bucket, print `export STATEFOLD_S3_...=...` lines on stdout
#   test/support/rgw.sh stop      kill what start started and remove its temp dir
#
# Typical use:  test/support/rgw.sh install && eval "$(test/support/rgw.sh start)" && npm test; test/support/rgw.sh stop
# Runs as root. Logs go to stderr and to <temp dir>/log/; stdout carries only the export lines.
# `start` needs node and the repository's node_modules (it creates the bucket with @aws-sdk/client-s3).
# Environment: STATEFOLD_RGW_STATE (pointer file, default /tmp/statefold-rgw.state),
#              STATEFOLD_RGW_TIMEOUT (seconds start waits for each daemon, default 120),
#              STATEFOLD_S3_BUCKET (bucket to create, default statefold-test).
set -Eeuo pipefail

STATE_FILE="${STATEFOLD_RGW_STATE:-/tmp/statefold-rgw.state}"
WAIT_SECONDS="${STATEFOLD_RGW_TIMEOUT:-120}"
BUCKET="${STATEFOLD_S3_BUCKET:-statefold-test}"
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

log() { printf 'rgw.sh [%2ds]: %s\n' "$SECONDS" "$*" >&2; }
die() { log "error: $*"; exit 1; }

cmd_install() {
  if command -v ceph-mon >/dev/null && command -v ceph-osd >/dev/null && command -v radosgw >/dev/null \
    && command -v radosgw-admin >/dev/null && command -v ceph >/dev/null && command -v monmaptool >/dev/null \
    && command -v curl >/dev/null && command -v ss >/dev/null; then
    log "ceph-mon, ceph-osd and radosgw are already installed"
    return 0
  fi
  [[ $(id -u) -eq 0 ]] || die "install needs root (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  local apt_log=/tmp/statefold-rgw-install.log
  log "apt-get update && apt-get install ceph-mon ceph-osd radosgw (output in $apt_log)"
  # --no-install-recommends keeps it to what the daemons need; without systemd no service is started.
  if ! { timeout 300 apt-get update -qq && timeout 900 apt-get install -y -qq --no-install-recommends \
    ceph-mon ceph-osd radosgw ceph-common curl iproute2; } >"$apt_log" 2>&1; then
    tail -n 30 "$apt_log" >&2
    die "apt-get failed (see $apt_log)"
  fi
  log "installed: $(ceph --version 2>/dev/null || echo '?')"
}

# Picks a free TCP port on 127.0.0.1 from a range, checking that nothing listens there.
free_port() {
  local from=$1 to=$2 port
  for ((port = from; port <= to; port++)); do
    if ! ss -Htln "sport = :$port" 2>/dev/null | grep -q .; then
      echo "$port"
      return 0
    fi
  done
  die "no free port in $from-$to"
}

# Runs `ceph` against our cluster with bounded time.
ceph_cli() { timeout 30 ceph -c "$DIR/ceph.conf" --connect-timeout 20 "$@"; }

# Waits (bounded) until "$@" succeeds; $1 is a description.
wait_for() {
  local what=$1; shift
  local deadline=$((SECONDS + WAIT_SECONDS))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      log "timed out after ${WAIT_SECONDS}s waiting for $what; last log lines:"
      tail -n 30 "$DIR"/log/*.log >&2 2>/dev/null || true
      return 1
    fi
    sleep 0.5
  done
}

rgw_answers() {
  # Any HTTP answer from the gateway (anonymous ListBuckets gives 200 on RGW).
  curl -s -o /dev/null --max-time 2 -w '%{http_code}' "http://127.0.0.1:$RGW_PORT/" | grep -q '^[1-5]'
}

osd_up() { ceph_cli osd dump 2>/dev/null | grep -q '^osd.0 up'; }

cmd_start() {
  [[ $(id -u) -eq 0 ]] || die "start needs root"
  command -v radosgw >/dev/null || die "radosgw is not installed: run '$0 install' first"
  if [[ -f $STATE_FILE ]]; then
    local old
    old=$(cat "$STATE_FILE")
    if [[ -f $old/env ]] && all_alive "$old"; then
      log "already running in $old"
      cat "$old/env"
      return 0
    fi
    log "a previous run in $old is not healthy: stopping it first"
    cmd_stop
  fi

  DIR=$(mktemp -d /tmp/statefold-rgw.XXXXXX)
  echo "$DIR" >"$STATE_FILE"
  mkdir -p "$DIR"/{mon,osd,run,log,rgw}
  # If anything below fails, take down what was started.
  trap 'log "start failed; cleaning up"; cmd_stop || true' ERR

  local fsid mon_port osd_uuid
  fsid=$(cat /proc/sys/kernel/random/uuid)
  osd_uuid=$(cat /proc/sys/kernel/random/uuid)
  mon_port=$(free_port 46789 46889)
  RGW_PORT=$(free_port 47480 47580)

  cat >"$DIR/ceph.conf" <<CONF
[global]
fsid = $fsid
mon host = v2:127.0.0.1:$mon_port
mon initial members = a
public addr = 127.0.0.1
cluster addr = 127.0.0.1
public network = 127.0.0.0/8
cluster network = 127.0.0.0/8
ms bind msgr1 = false
ms bind ipv6 = false
auth cluster required = none
auth service required = none
auth client required = none
# Without these, msgr2 clients insist on "secure" mode and radosgw loops on auth error -13 for 300 s.
ms mon client mode = crc
ms client mode = crc
ms cluster mode = crc
ms service mode = crc
ms mon cluster mode = crc
ms mon service mode = crc
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon max pg per osd = 1000
osd objectstore = memstore
memstore device bytes = 4294967296
run dir = $DIR/run
admin socket = $DIR/run/\$name.asok
log file = $DIR/log/\$name.log
pid file = $DIR/run/\$name.pid
mon data = $DIR/mon/\$cluster-\$id
osd data = $DIR/osd/\$cluster-\$id
keyring = $DIR/keyring
log to stderr = false
err to stderr = false

[client.rgw.a]
rgw frontends = beast endpoint=127.0.0.1:$RGW_PORT tcp_nodelay=1
rgw data = $DIR/rgw
rgw enable usage log = false
rgw dns name = 127.0.0.1
CONF

  log "creating monitor (dir $DIR)"
  touch "$DIR/keyring"
  timeout 30 monmaptool --create --addv a "[v2:127.0.0.1:$mon_port]" --fsid "$fsid" "$DIR/monmap" >/dev/null 2>&1
  timeout 60 ceph-mon -c "$DIR/ceph.conf" --mkfs -i a --monmap "$DIR/monmap" >>"$DIR/log/setup.log" 2>&1
  start_daemon mon ceph-mon -c "$DIR/ceph.conf" -i a -f
  wait_for "the monitor" ceph_cli mon stat

  log "creating OSD (memstore)"
  local id
  id=$(ceph_cli osd new "$osd_uuid" 2>>"$DIR/log/setup.log")
  [[ $id == 0 ]] || die "expected osd id 0, got '$id'"
  mkdir -p "$DIR/osd/ceph-0"
  timeout 60 ceph-osd -c "$DIR/ceph.conf" -i 0 --mkfs --osd-uuid "$osd_uuid" >>"$DIR/log/setup.log" 2>&1
  start_daemon osd ceph-osd -c "$DIR/ceph.conf" -i 0 -f
  wait_for "the OSD to come up" osd_up

  log "starting radosgw on 127.0.0.1:$RGW_PORT"
  start_daemon rgw radosgw -c "$DIR/ceph.conf" -n client.rgw.a -f
  wait_for "radosgw to answer HTTP" rgw_answers

  log "creating user and bucket $BUCKET"
  local access secret
  access=$(head -c 10 /dev/urandom | od -An -tx1 | tr -d ' \n' | tr 'a-f' 'A-F')
  secret=$(head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n')
  timeout 60 radosgw-admin -c "$DIR/ceph.conf" user create --uid statefold --display-name statefold \
    --access-key "SF$access" --secret-key "$secret" >>"$DIR/log/setup.log" 2>&1
  cat >"$DIR/env" <<ENV
export STATEFOLD_S3_ENDPOINT=http://127.0.0.1:$RGW_PORT
export STATEFOLD_S3_REGION=us-east-1
export STATEFOLD_S3_BUCKET=$BUCKET
export STATEFOLD_S3_ACCESS_KEY_ID=SF$access
export STATEFOLD_S3_SECRET_ACCESS_KEY=$secret
ENV
  create_bucket
  trap - ERR
  log "ready in ${SECONDS}s: http://127.0.0.1:$RGW_PORT bucket $BUCKET (logs in $DIR/log)"
  cat "$DIR/env"
}

# Starts a daemon in the foreground mode of its own, detached from our stdout, and records its pid.
start_daemon() {
  local name=$1; shift
  setsid "$@" </dev/null >>"$DIR/log/$name.out" 2>&1 &
  echo $! >"$DIR/run/$name.started.pid"
}

all_alive() {
  local dir=$1 f
  for f in mon osd rgw; do
    [[ -f $dir/run/$f.started.pid ]] && kill -0 "$(cat "$dir/run/$f.started.pid")" 2>/dev/null || return 1
  done
}

# The bucket is created through S3 itself (signed with the new user's keys), with the SDK the tests use.
create_bucket() {
  (
    # shellcheck disable=SC1091
    source "$DIR/env"
    cd "$REPO_ROOT"
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED=true timeout 60 node --input-type=module -e '
      import { S3Client, CreateBucketCommand } from "@aws-sdk/client-s3";
      const env = process.env;
      const client = new S3Client({
        endpoint: env.STATEFOLD_S3_ENDPOINT, region: env.STATEFOLD_S3_REGION, forcePathStyle: true,
        credentials: { accessKeyId: env.STATEFOLD_S3_ACCESS_KEY_ID, secretAccessKey: env.STATEFOLD_S3_SECRET_ACCESS_KEY },
      });
      for (let attempt = 1; ; attempt++) {
        try {
          await client.send(new CreateBucketCommand({ Bucket: env.STATEFOLD_S3_BUCKET }));
          break;
        } catch (err) {
          if (err.name === "BucketAlreadyOwnedByYou") break;
          if (attempt >= 20) throw err;
          await new Promise((r) => setTimeout(r, 500));
        }
      }
    '
  ) >&2
}

cmd_stop() {
  if [[ ! -f $STATE_FILE ]]; then
    log "nothing to stop"
    return 0
  fi
  local dir pid name
  dir=$(cat "$STATE_FILE")
  # radosgw first, then the OSD, then the monitor: each below needs the one after it.
  for name in rgw osd mon; do
    [[ -f $dir/run/$name.started.pid ]] || continue
    pid=$(cat "$dir/run/$name.started.pid")
    kill -TERM "$pid" 2>/dev/null || continue
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  for name in rgw osd mon; do
    [[ -f $dir/run/$name.started.pid ]] || continue
    pid=$(cat "$dir/run/$name.started.pid")
    for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
  done
  case $dir in
    /tmp/statefold-rgw.*) rm -rf "$dir" ;;
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
