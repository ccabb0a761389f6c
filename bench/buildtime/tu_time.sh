#!/usr/bin/env bash
# Compiler launcher for bench/buildtime/build_bench.sh: runs the compile it is given and appends one line
# to $GPUPOOL_TU_LOG: "<wall s> <user s> <sys s> <max RSS KiB> <object file>". No ccache: every
# compile is timed cold.
out=-
prev=
for a in "$@"; do
  [ "$prev" = -o ] && out=$a
  prev=$a
done
exec /usr/bin/time -a -o "${GPUPOOL_TU_LOG:?}" -f "%e %U %S %M $out" "$@"
