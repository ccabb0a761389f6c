#!/usr/bin/env bash
# Seeds for archive_fuzzer: a few tiny tar archives (pax, ustar, gnu) made with GNU tar at fuzz time,
# holding a file, nested directories, a downward link, an upward and an absolute link, a hard link,
# an executable and a fifo. Usage: tests/fuzz/make_archive_seeds.sh OUT_DIR
set -euo pipefail
out=$1
mkdir -p "$out"
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
mkdir -p "$src/t/runs/1" "$src/t/runs/2"
printf '{"acc": 0.9}\n' > "$src/t/runs/1/metrics.json"
printf 'x' > "$src/t/runs/2/a.bin"
printf '#!/bin/sh\n' > "$src/t/run.sh" && chmod 0755 "$src/t/run.sh"
ln -s runs/1 "$src/t/latest"
ln -s ../../etc "$src/t/up"
ln -s /etc/passwd "$src/t/abs"
ln "$src/t/runs/2/a.bin" "$src/t/hard.bin"
mkfifo "$src/t/fifo"
for format in pax ustar gnu; do
  opts=()
  [ "$format" = pax ] && opts=(--pax-option=delete=atime,delete=ctime)
  tar --format="$format" "${opts[@]}" -b 1 --mtime=@1700000000 --owner=0 --group=0 --numeric-owner -C "$src/t" \
    -cf "$out/seed-$format.tar" .
done
# Names with ".." and absolute names, as GNU tar stores them when asked to.
tar --format=pax -b 1 -P -C "$src/t" -cf "$out/seed-dotdot.tar" runs/1/../2/a.bin
echo "archive seeds: $(ls "$out" | wc -l) files, $(du -sk "$out" | cut -f1) KiB in $out"
