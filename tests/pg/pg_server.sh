#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests: the ctest fixture `postgres` (tests/CMakeLists.txt),
# and tests that need a server of their own to stop and start (test_postgres_store.cpp).
#
#   pg_server.sh start DIR   initdb (first time) and start; writes DIR/url (postgresql://gpupool@...)
#   pg_server.sh crash DIR   stop at once, as a power cut would (pg_ctl -m immediate); data kept
#   pg_server.sh stop DIR    stop and delete the data (-m immediate: a shutdown checkpoint of data that is
#                            deleted next would only cost time, up to a minute after a full test run)
#
# The server runs as an unprivileged user (initdb refuses root: as root it runs as `nobody`), listens on
# 127.0.0.1 at a free port (the same one again after a crash) and on a unix socket beside its data, with
# trust authentication except for the role gpupool_pw (password checks), and fsync on: durability is
# what the tests check. Its data lives in a directory of its own under /tmp (DIR/datadir names it).
# Without PostgreSQL (GPUPOOL_PG_BIN, default /usr/lib/postgresql/15/bin), `start` writes the reason to
# DIR/missing and succeeds, so the tests say why they skip; with GPUPOOL_REQUIRE_POSTGRES=1 it fails.
set -euo pipefail

bin=${GPUPOOL_PG_BIN:-/usr/lib/postgresql/15/bin}
cmd=${1:-}
dir=${2:-}
if [ -z "$cmd" ] || [ -z "$dir" ]; then
  echo "usage: $0 start|crash|stop DIR" >&2
  exit 2
fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

# As the server's user: `nobody` when we are root, else ourselves.
as_server() {
  if [ "$(id -u)" -eq 0 ]; then
    setpriv --reuid=nobody --regid=nogroup --clear-groups -- "$@"
  else
    "$@"
  fi
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start() {
  rm -f "$dir/url" "$dir/missing"
  local why=""
  [ -x "$bin/initdb" ] || why="PostgreSQL is not installed ($bin/initdb is missing: apt-get install postgresql)"
  [ -n "$why" ] || command -v python3 > /dev/null || why="python3 is missing (it finds a free port)"
  if [ -n "$why" ]; then
    echo "$why" > "$dir/missing"
    echo "pg_server: $why" >&2
    [ "${GPUPOOL_REQUIRE_POSTGRES:-}" = 1 ] && { echo "pg_server: FAIL: GPUPOOL_REQUIRE_POSTGRES=1" >&2; exit 1; }
    exit 0
  fi
  local home port
  if [ -f "$dir/datadir" ] && [ -d "$(cat "$dir/datadir")/data" ]; then
    home=$(cat "$dir/datadir") # a restart after `crash`: same data, same port
    port=$(cat "$dir/port")
  else
    home=$(mktemp -d /tmp/gpupool-pg.XXXXXX)
    chmod 755 "$home"
    [ "$(id -u)" -ne 0 ] || chown nobody:nogroup "$home"
    echo "$home" > "$dir/datadir"
    port=$(free_port)
    echo "$port" > "$dir/port"
    as_server "$bin/initdb" -D "$home/data" -U gpupool --auth=trust --no-sync -E UTF8 --locale=C.UTF-8 \
      > "$home/initdb.log" 2>&1 || { cat "$home/initdb.log" >&2; exit 1; }
    cat > "$home/data/pg_hba.conf" <<EOF
local all all trust
host all gpupool_pw 127.0.0.1/32 scram-sha-256
host all all 127.0.0.1/32 trust
EOF
    cat >> "$home/data/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$home'
fsync = on
synchronous_commit = on
max_connections = 300
shared_buffers = 64MB
EOF
  fi
  as_server "$bin/pg_ctl" -D "$home/data" -l "$home/server.log" -w -t 60 start > /dev/null ||
    { cat "$home/server.log" >&2; exit 1; }
  echo "postgresql://gpupool@127.0.0.1:$port/postgres" > "$dir/url"
}

stop_server() {
  local mode=$1
  [ -f "$dir/datadir" ] || return 0
  local home
  home=$(cat "$dir/datadir")
  if [ -f "$home/data/postmaster.pid" ]; then
    as_server "$bin/pg_ctl" -D "$home/data" -m "$mode" -w -t 60 stop > /dev/null || true
  fi
}

case "$cmd" in
  start) start ;;
  crash) stop_server immediate ;;
  stop)
    stop_server immediate
    if [ -f "$dir/datadir" ]; then
      home=$(cat "$dir/datadir")
      case "$home" in /tmp/gpupool-pg.*) rm -rf "$home" ;; esac
    fi
    rm -f "$dir/datadir" "$dir/port" "$dir/url"
    ;;
  *) echo "usage: $0 start|crash|stop DIR" >&2; exit 2 ;;
esac
