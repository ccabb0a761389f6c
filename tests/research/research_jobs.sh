#!/usr/bin/env bash
# The research recipes end to end: builds (or finds, cached) the torch-cpu image, runs
# recipes/toy-patching and recipes/toy-eval with `gpupool run --runtime podman`, and checks their
# outputs from inside the image, which has the numpy and matplotlib the host may lack.
#
# Usage: research_jobs.sh GPUPOOL_BINARY
# Exits 77 (skipped) without root or podman, unless GPUPOOL_REQUIRE_CONTAINERS=1 (then it fails).
# CONTAINERS_CONF, if set, reaches podman and gpupool as it is.
# GPUPOOL_TORCH_CPU_BASE=FILE runs copies of the recipes that extend FILE instead of the built-in
# torch-cpu (for a gpupool binary built before that built-in existed).
set -uo pipefail
[[ $# -eq 1 ]] || { echo "usage: $0 GPUPOOL_BINARY" >&2; exit 2; }
bin=$(realpath "$1")
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
image=localhost/gpupool/torch-cpu:latest
passed=0
failed=0

skip() {
  if [[ ${GPUPOOL_REQUIRE_CONTAINERS:-0} == 1 ]]; then
    echo "FAIL: $* (GPUPOOL_REQUIRE_CONTAINERS=1)"
    exit 1
  fi
  echo "SKIP: $*"
  exit 77
}
ok() { echo "ok: $*"; passed=$((passed + 1)); }
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
finish() {
  echo "research: $passed passed, $failed failed"
  [[ $failed -eq 0 ]]
  exit
}

[[ $(id -u) -eq 0 ]] || skip "the research jobs need root (rootful podman)"
command -v podman > /dev/null || skip "podman is not installed"
[[ -x $bin ]] || { echo "FAIL: $bin is not an executable"; exit 1; }

work=$(mktemp -d /tmp/gpupool-research.XXXXXX)
trap 'rm -rf "$work"' EXIT

# The image: a cold build downloads Debian packages; a warm one returns at once.
started=$SECONDS
if ENGINE=podman "$repo/templates/torch-cpu/build.sh" > "$work/build.log" 2>&1; then
  ok "torch-cpu image ready in $((SECONDS - started)) s: $(grep -o '[0-9]* MiB' "$work/build.log" | tail -1)"
else
  tail -n 30 "$work/build.log"
  fail "templates/torch-cpu/build.sh failed"
  finish
fi
if podman run --rm --network=none "$image" python3 -c 'import torch, numpy, matplotlib' > "$work/import.log" 2>&1; then
  ok "the image imports torch, numpy and matplotlib"
else
  cat "$work/import.log"
  fail "the image cannot import torch, numpy and matplotlib"
fi

probe='import sys; sys.exit(not any(type(f).__name__ == "_TorchFinder" for f in sys.meta_path))'
if podman run --rm --network=none -e GPUPOOL_GPU_MEMORY_MB=512 "$image" python3 -c "$probe"; then
  ok "the start-up hook is active in the image (it watches for torch when given a share)"
else
  fail "the start-up hook is not active in the image"
fi

# The recipes as committed, or copies extending a base file (see the header).
recipe_dir() {
  local name=$1
  if [[ -z ${GPUPOOL_TORCH_CPU_BASE:-} ]]; then
    echo "$repo/recipes/$name"
    return
  fi
  cp -r "$repo/recipes/$name" "$work/$name"
  cp "$GPUPOOL_TORCH_CPU_BASE" "$work/$name/torch-cpu-base.toml"
  sed -i 's|^extends = "torch-cpu"$|extends = "./torch-cpu-base.toml"|' "$work/$name/recipe.toml"
  echo "$work/$name"
}
if [[ -n ${GPUPOOL_TORCH_CPU_BASE:-} ]]; then
  echo "note: the recipes extend $GPUPOOL_TORCH_CPU_BASE instead of the built-in torch-cpu"
elif "$bin" recipe builtins | grep -qx torch-cpu; then
  ok "the binary has the built-in torch-cpu"
else
  fail "the binary has no built-in torch-cpu (rebuild it, or set GPUPOOL_TORCH_CPU_BASE)"
  finish
fi

# Runs one recipe; leaves its number of jobs in $points.
run_recipe() {
  local name=$1 dir out started
  dir=$(recipe_dir "$name")
  out="$work/out-$name"
  points=$("$bin" recipe validate --json "$dir/recipe.toml" | sed -n 's/^ *"job_count": *\([0-9]*\).*/\1/p')
  if [[ -z $points ]]; then
    "$bin" recipe validate "$dir/recipe.toml"
    fail "$name: recipe validate failed"
    return 1
  fi
  started=$SECONDS
  if (cd "$work" && "$bin" run "$dir/recipe.toml" --runtime podman --out "$out" \
        --data-dir "$work/pool") > "$work/run-$name.log" 2>&1; then
    ok "$name: $points job(s) succeeded in $((SECONDS - started)) s"
    # A CPU-only job gets GPUPOOL_GPU_MEMORY_MB=0, which the start-up hook must take quietly.
    if grep -l gpupool_startup "$out"/*.log; then
      fail "$name: the start-up hook printed a warning in a job's log"
    fi
  else
    tail -n 40 "$work/run-$name.log"
    for log in "$out"/*.log; do [[ -f $log ]] && { echo "--- $log"; tail -n 20 "$log"; }; done
    fail "$name: gpupool run failed"
    return 1
  fi
}

# Checks an output folder inside the image; its lines ("ok: ..." / "FAIL: ...") are counted here.
check_inside() {
  local kind=$1 out=$2 points=$3 extra=$4 rc line
  shift 4
  podman run --rm --network=none --user 0 -v "$out:/results:ro" -v "$repo/tests/research:/checks:ro" \
    "$@" "$image" python3 /checks/check_outputs.py "$kind" /results "$points" $extra > "$work/check-$kind.log" 2>&1
  rc=$?
  while IFS= read -r line; do
    case $line in
      ok:*) ok "${line#ok: }" ;;
      FAIL:*) fail "${line#FAIL: }" ;;
      *) echo "$line" ;;
    esac
  done < "$work/check-$kind.log"
  [[ $rc -eq 0 ]] || grep -q '^FAIL:' "$work/check-$kind.log" || fail "$kind: the checker exited $rc"
}

if run_recipe toy-patching; then
  check_inside patching "$work/out-toy-patching" "$points" ""
fi
if run_recipe toy-eval; then
  check_inside eval "$work/out-toy-eval" "$points" /dataset.jsonl \
    -v "$repo/recipes/toy-eval/dataset.jsonl:/dataset.jsonl:ro"
fi

# `gpupool recipe new --template torch-cpu` writes a project that runs as written.
if (cd "$work" && "$bin" recipe new --template torch-cpu starter-probe > /dev/null &&
    "$bin" run starter-probe/recipe.toml --runtime podman --out "$work/out-starter" --data-dir "$work/pool") \
    > "$work/run-starter.log" 2>&1; then
  if grep -q '"accuracy"' "$work/out-starter/starter-probe-1/metrics.json" "$work/out-starter/starter-probe-2/metrics.json"; then
    ok "the torch-cpu starter from \`recipe new\` ran both seeds and wrote metrics.json"
  else
    fail "the torch-cpu starter ran but wrote no metrics.json with an accuracy"
  fi
else
  tail -n 30 "$work/run-starter.log"
  fail "the torch-cpu starter from \`recipe new\` did not run"
fi
finish
