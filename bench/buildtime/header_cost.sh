#!/usr/bin/env bash
# Which headers the build pays for most: for each header below, the CPU seconds a translation unit
# spends on it alone (median of 3 compiles of a file holding only that #include, with a real core
# file's flags, minus an empty file's), how many of the build's translation units include it (their
# depfiles, *.o.d), and the product.
#
#   bench/buildtime/header_cost.sh BUILD_DIR [HEADER ...]
#
# BUILD_DIR: a built tree of this project (make build, or build_bench.sh's). Header names are as in
# an #include; project headers as core/...; the default list is the third-party and project headers
# most included.
set -euo pipefail
build=$(cd "${1:?usage: header_cost.sh BUILD_DIR [HEADER ...]}" && pwd)
shift
headers=("$@")
if [ ${#headers[@]} -eq 0 ]; then
  headers=(catch2/catch.hpp nlohmann/json.hpp boost/beast/http.hpp boost/asio/ip/tcp.hpp boost/process.hpp
    spdlog/spdlog.h CLI/CLI.hpp toml++/toml.h SQLiteCpp/SQLiteCpp.h boost/url.hpp filesystem regex
    core/util/result.hpp core/api/jobs.hpp core/coordinator/coordinator.hpp core/coordinator/service.hpp
    worker/agent/agent.hpp)
fi
probe_dir=$(mktemp -d)
trap 'rm -rf "$probe_dir"' EXIT
# One real compile command of the core library, its source swapped for the probe.
cmd=$(python3 - "$build/compile_commands.json" <<'PY'
import json, shlex, sys
for e in json.load(open(sys.argv[1])):
    if e["file"].endswith("core/util/strings.cpp"):
        args = shlex.split(e["command"])
        # drop the launcher (ccache or the timer), the output, the depfile options and the source
        while args and not ("++" in args[0] or args[0].endswith("c++")):
            args.pop(0)
        out, skip = [], False
        for a in args:
            if skip: skip = False; continue
            if a in ("-o", "-MF", "-MT", "-c"): skip = a != "-c"; continue
            if a in ("-MD",) or a == e["file"]: continue
            out.append(a)
        print(shlex.join(out) + " -I" + shlex.quote(e["directory"]))
        break
PY
)
[ -n "$cmd" ] || { echo "no core/util/strings.cpp in $build/compile_commands.json" >&2; exit 1; }
src=$(cd "$build" && sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' CMakeCache.txt)
cost() { # FILE -> median CPU seconds of 3 compiles
  local i
  for i in 1 2 3; do
    # -w: a header's own warnings (Catch's, under the core's -Werror) do not stop its probe.
    if ! eval "/usr/bin/time -f '%U %S' -o '$probe_dir/t' $cmd -w -I'$src' -c '$1' -o '$probe_dir/o.o'" 2> "$probe_dir/err"; then
      echo "header_cost: the probe of $(cat "$1") does not compile: $(grep -m1 error "$probe_dir/err")" >&2
      echo -1
      return
    fi
    awk '{ print $1 + $2 }' "$probe_dir/t"
  done | sort -n | sed -n 2p
}
echo > "$probe_dir/empty.cpp"
base=$(cost "$probe_dir/empty.cpp")
units=$(find "$build" -name '*.o.d' | wc -l)
echo "== header costs: $units translation units in $build; an empty file takes ${base} s"
printf '| header | CPU s alone | units including it | CPU s in all |\n|---|---|---|---|\n'
for h in "${headers[@]}"; do
  printf '#include <%s>\n' "$h" > "$probe_dir/probe.cpp"
  c=$(cost "$probe_dir/probe.cpp")
  [ "$c" = -1 ] && continue
  # A depfile names the header by its path: match the include's tail after a slash.
  n=$(grep -l -F "/$h" -r --include='*.o.d' "$build" | wc -l)
  awk -v h="$h" -v c="$c" -v b="$base" -v n="$n" \
    'BEGIN { d = c - b; if (d < 0) d = 0; printf "| %s | %.2f | %d | %.0f |\n", h, d, n, d * n }'
done
