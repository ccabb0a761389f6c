#!/usr/bin/env bash
# `make bench`: `gpupool admin backup` of a pool holding MIB (default 400) MiB of stored logs, end to
# end (copy, download, integrity check), three times; and a request's latency (`GET /v1/whoami`
# through curl, 20 requests) while each copy runs, beside the same with no backup.
# Usage: bench/backup_bench.sh [build/gpupool]
set -euo pipefail
BIN=$(realpath "${1:-build/gpupool}")
MIB=${MIB:-400}
d=$(mktemp -d)
pid=
trap 'kill $pid 2> /dev/null || true; rm -rf "$d"' EXIT
start() {
  rm -f $d/port
  $BIN coordinator --listen 127.0.0.1:0 --db $d/pool.db --port-file $d/port >> $d/out 2>> $d/err &
  pid=$!
  for i in $(seq 100); do [ -s $d/port ] && break; sleep 0.1; done
  url=http://127.0.0.1:$(cat $d/port)
}
start
admin=$(grep -o 'gpp_[A-Za-z0-9_-]*' $d/out | head -1)
kill $pid; wait $pid || true
python3 - "$d/pool.db" "$MIB" <<'PY'
import sqlite3, sys, os
db = sqlite3.connect(sys.argv[1])
blob = os.urandom(1 << 20)
for i in range(int(sys.argv[2])):
    db.execute("INSERT INTO log_chunks (attempt_id, byte_offset, data) VALUES (?, ?, ?)", (999, i << 20, blob))
db.commit()
PY
start
echo "== admin backup (bench/backup_bench.sh)"
echo "pool.db: $(du -h $d/pool.db | cut -f1)"
lat() { for i in $(seq 20); do curl -s -o /dev/null -w '%{time_total}\n' -H "Authorization: Bearer $admin" $url/v1/whoami; sleep 0.02; done | sort -n | awk '{a[NR]=$1} END {printf "median %.1f ms, max %.1f ms", a[int((NR+1)/2)]*1000, a[NR]*1000}'; }
echo "whoami, no backup: $(lat)"
for k in 1 2 3; do
  s=$(date +%s.%N)
  $BIN --url $url --token $admin admin backup $d/b$k.db > /dev/null &
  bpid=$!
  during=$(lat)
  wait $bpid
  e=$(date +%s.%N)
  echo "backup $k: $(python3 -c "print(round($e-$s,2))") s end to end, $(du -h $d/b$k.db | cut -f1); whoami meanwhile: $during"
  rm -f $d/b$k.db
done
$BIN --url $url --token $admin --json admin audit --action pool.backup > $d/audit.json
python3 -c "import json; print('copy_ms (coordinator side):', [a['detail']['copy_ms'] for a in json.load(open('$d/audit.json'))])"
kill $pid; wait $pid || true
rm -rf $d
