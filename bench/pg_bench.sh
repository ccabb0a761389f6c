#!/usr/bin/env bash
# The coordinator's hot paths on SQLite and on PostgreSQL, in one run on this machine: both on disk
# with every commit synced (SQLite's file under a temp dir; a throw-away PostgreSQL 15 on loopback,
# started by tests/pg/pg_server.sh as an unprivileged user), the same pool histories, the same
# figures (bench/coordinator_bench.cpp; SUBMIT_US is one committed single-job submission).
#
#   bench/pg_bench.sh BUILD_DIR [HISTORIES]      (HISTORIES: comma-separated, default 0,10000)
# Skips with a message when PostgreSQL's server is not installed or gpupool was built without it.
set -uo pipefail
build=${1:?usage: pg_bench.sh BUILD_DIR [HISTORIES]}
histories=${2:-0,10000}
here=$(cd "$(dirname "$0")" && pwd)
bench=$build/coordinator_bench
[ -x "$bench" ] || { echo "pg_bench: build $bench first (make bench)" >&2; exit 1; }
if [ ! -x /usr/lib/postgresql/15/bin/initdb ] || ! "$bench" --help | grep -q -- --db; then
    echo "== PostgreSQL store: skipped (no PostgreSQL 15 server here, or a build without it)"
    exit 0
fi
dir=$(mktemp -d /tmp/gpupool-pg-bench.XXXXXX)
chmod 755 "$dir"
trap '"$here/../tests/pg/pg_server.sh" stop "$dir/pg" > /dev/null 2>&1; rm -rf "$dir"' EXIT
"$here/../tests/pg/pg_server.sh" start "$dir/pg" > "$dir/pg.log" 2>&1 || { cat "$dir/pg.log" >&2; exit 1; }
url=$(cat "$dir/pg/url")
base=${url%/*}
for h in ${histories//,/ }; do
    psql -q "$url" -c "CREATE DATABASE bench_$h" || exit 1
done
echo "== the coordinator on SQLite (a file on disk) and on PostgreSQL 15 (loopback, fsync on): $(nproc) cores"
mkdir -p "$dir/sqlite"
"$bench" --history "$histories" --dir "$dir/sqlite"
"$bench" --history "$histories" --db "$base/bench_%h" | tail -n +3
