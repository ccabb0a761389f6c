#!/usr/bin/env bash
# Cold and warm build times of what `make demo` builds (the gpupool binary) and of the test suite.
#
#   bench/buildtime/build_bench.sh [SOURCE_DIR]
#
# Configures a fresh build tree ($BUILD, default /tmp/gpupool-build-bench) with the flags `make`
# uses (RelWithDebInfo, WERROR=ON, plus $CMAKE_ARGS), with no compiler cache: every compile and link
# goes through bench/buildtime/tu_time.sh, which logs its wall, user and system time. Then times:
#   1. configure;  2. `--target gpupool` from cold (what `make demo` compiles);  3. everything else
#   (the tests and their libraries);  4. a no-op rebuild;  5. one edited .cpp of the coordinator
#   (core/coordinator/jobs.cpp touched), relinking gpupool.
# Prints a table, then the CPU seconds by target and the $TOP (default 15) costliest compiles.
# ONLY_GPUPOOL=1 stops after step 2 (make demo's build alone). ONE_GO=1 builds everything in one
# command instead (what `make test` does, so that the tests' compiles can overlap the libraries').
# GENERATOR picks CMake's generator (default Unix Makefiles, what the Makefile uses).
# Wall times depend on what else the machine runs; the CPU sums much less so: quote both.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "${1:-$here/../..}" && pwd)
build=${BUILD:-/tmp/gpupool-build-bench}
jobs=${JOBS:-$(nproc)}
top=${TOP:-15}
log=$build.tu.log
rm -rf "$build" "$log"
export GPUPOOL_TU_LOG=$log CCACHE_DISABLE=1

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
cpu() { [ -f "$log" ] && awk '{ s += $2 + $3 } END { printf "%.0f", s }' "$log" || echo 0; }

t=$(now)
# shellcheck disable=SC2086
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" -DGPUPOOL_WERROR=ON \
  -DCMAKE_CXX_COMPILER_LAUNCHER="$here/tu_time.sh" -DCMAKE_CXX_LINKER_LAUNCHER="$here/tu_time.sh" \
  -G "${GENERATOR:-Unix Makefiles}" ${CMAKE_ARGS:-} > "$build.configure.log"
configure_s=$(since "$t")
what="$(git -C "$src" rev-parse --short HEAD) on $(nproc) cores, -j$jobs, ${GENERATOR:-Unix Makefiles}, no compiler cache${CMAKE_ARGS:+, $CMAKE_ARGS}"

if [ "${ONE_GO:-0}" = 1 ]; then
  t=$(now)
  cmake --build "$build" -j"$jobs" > "$build.all.log"
  echo "== everything from cold in one command: $what"
  echo "configure ${configure_s} s; build $(since "$t") s wall, $(cpu) CPU s, $(wc -l < "$log") compiles+links"
  exit 0
fi

t=$(now)
cmake --build "$build" -j"$jobs" --target gpupool > "$build.gpupool.log"
gpupool_s=$(since "$t")
gpupool_cpu=$(cpu)
gpupool_units=$(wc -l < "$log")

if [ "${ONLY_GPUPOOL:-0}" = 1 ]; then
  echo "== gpupool from cold: $what"
  echo "configure ${configure_s} s; build ${gpupool_s} s wall, ${gpupool_cpu} CPU s, ${gpupool_units} compiles+links"
  exit 0
fi
t=$(now)
cmake --build "$build" -j"$jobs" > "$build.all.log"
rest_s=$(since "$t")
all_cpu=$(cpu)
all_units=$(wc -l < "$log")

t=$(now)
cmake --build "$build" -j"$jobs" > /dev/null
noop_s=$(since "$t")

touch "$src/core/coordinator/jobs.cpp"
t=$(now)
cmake --build "$build" -j"$jobs" --target gpupool > /dev/null
edit_s=$(since "$t")

echo "== build times: $what"
printf '| step | wall s | CPU s | compiles+links |\n|---|---|---|---|\n'
printf '| configure | %s | | |\n' "$configure_s"
printf '| gpupool from cold (make demo) | %s | %s | %s |\n' "$gpupool_s" "$gpupool_cpu" "$gpupool_units"
printf '| the rest (tests) | %s | %s | %s |\n' "$rest_s" "$((all_cpu - gpupool_cpu))" "$((all_units - gpupool_units))"
printf '| everything from cold | %s | %s | %s |\n' \
  "$(awk -v a="$gpupool_s" -v b="$rest_s" 'BEGIN { printf "%.1f", a + b }')" "$all_cpu" "$all_units"
printf '| no-op rebuild | %s | | |\n' "$noop_s"
printf '| core/coordinator/jobs.cpp edited, gpupool relinked | %s | | |\n' "$edit_s"
echo
echo "== CPU seconds by target (compiles; links are counted under \"links\")"
awk '{ t = "links"; if (match($5, /CMakeFiles\/[^\/]*\.dir\//)) t = substr($5, RSTART + 11, RLENGTH - 16)
  s[t] += $2 + $3; n[t]++ } END { for (t in s) printf "%8.0f s  %4d  %s\n", s[t], n[t], t }' "$log" | sort -rn
echo
echo "== the $top costliest (CPU s, max RSS MiB, output)"
awk -v b="$build/" '{ f = $5; sub(b, "", f); printf "%8.1f %6.0f  %s\n", $2 + $3, $4 / 1024, f }' "$log" |
  sort -rn | head -"$top"
