#!/usr/bin/env bash
# `make demo` on a brand-new Debian 12: a debootstrap minbase chroot (no compiler, no libraries, no
# compiler cache), this repository cloned into it, then `make demo` timed from the clone to the
# sweep's outputs, packages included. Needs root, debootstrap and Debian's mirror.
#
#   bench/buildtime/fresh_debian.sh [ROOT]      ROOT: where the chroot goes (default /var/tmp/gpupool-deb12)
#
# A pristine minbase tree is kept at ROOT.base and copied for each run (debootstrap itself is not
# timed: the newcomer's machine already exists). Prints each step's seconds; the chroot is removed
# afterwards (KEEP=1 keeps it).
#
# WHAT=test-packages times instead what `make test` installs before it builds on such a machine: the
# build and test packages (.ci/packages-build.txt, .ci/packages.txt) and the container engines
# .ci/setup-containers installs (the suite itself needs a real machine: rootful podman and dockerd
# do not run in a chroot). WHAT=test-build times `make test` itself from the clone with no test run
# (CTEST_ARGS selects none): its packages, configure, and the build with the test packages installing
# beside it; the suite's own time on a real machine is to be added (bench/README.md).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
root=${1:-/var/tmp/gpupool-deb12}
mirror=${MIRROR:-http://deb.debian.org/debian}
case ${WHAT:=demo} in demo | test-packages | test-build) ;; *)
  echo "fresh_debian: WHAT is '$WHAT': demo, test-packages or test-build" >&2
  exit 2
  ;;
esac
[ "$(id -u)" -eq 0 ] || { echo "fresh_debian: needs root (debootstrap, chroot)" >&2; exit 2; }
command -v debootstrap > /dev/null || { echo "fresh_debian: apt-get install debootstrap" >&2; exit 2; }

if [ ! -x "$root.base/bin/sh" ]; then
  rm -rf "$root.base"
  debootstrap --variant=minbase bookworm "$root.base" "$mirror" > "$root.debootstrap.log"
fi
cleanup() {
  # Whatever is mounted under the chroot, deepest first (the proc, sys and dev mounts, and what
  # podman mounted inside it when .ci/setup-containers ran there).
  findmnt -rn -o TARGET | grep "^$root/" | sort -r | while read -r m; do umount -l "$m" 2> /dev/null || true; done
  [ "${KEEP:-0}" = 1 ] || rm -rf "$root"
}
trap cleanup EXIT
rm -rf "$root"
cp -a "$root.base" "$root"
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --rbind /dev "$root/dev"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# The commit under test, as a newcomer's clone would have it (committed files only).
git -C "$src" bundle create "$root/tmp/repo.bundle" HEAD > /dev/null 2>&1

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }'; }
in_root() { chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  LANG=C.UTF-8 bash -c "$1"; }

t=$(now)
in_root "apt-get update -q > /dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends git make ca-certificates > /dev/null"
tools_s=$(since "$t")
in_root "git clone -q /tmp/repo.bundle /root/gpupool"
# Runs CMD in the chroot, its output appended to LOG; shows the log's end and stops when it fails.
# Sets $took to its seconds.
step() {
  local t
  t=$(now)
  in_root "$2" >> "$1" 2>&1 || { tail -30 "$1"; exit 1; }
  took=$(since "$t")
}
# The table's head: what was timed, the commit, the cores, and the step before the clone.
table() {
  echo "== $1 on a fresh Debian 12 minbase chroot: $(git -C "$src" rev-parse --short HEAD), $(nproc) cores"
  printf '| step | seconds |\n|---|---|\n'
  printf '| apt-get install git make (before the clone) | %s |\n' "$tools_s"
}
# Each mode's own log, emptied first (a later grep must not find an earlier run's lines).
case $WHAT in demo) log=$root.demo.log ;; *) log=$root.test.log ;; esac
: > "$log"
case $WHAT in
test-packages)
  step "$log" "cd /root/gpupool && .ci/install-deps .ci/packages-build.txt .ci/packages-test-build.txt .ci/packages.txt"
  deps_s=$took
  # The engines, as .ci/setup-containers installs them (its own list), without starting them.
  engines=$(sed -n 's/^pkgs=(\(.*\))$/\1/p' "$src/.ci/setup-containers")
  [ -n "$engines" ] || { echo "fresh_debian: no pkgs=(...) line in .ci/setup-containers" >&2; exit 1; }
  step "$log" "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $engines"
  table "make test's packages"
  printf '| the build and test packages (.ci/packages-build.txt, -test-build.txt, .ci/packages.txt) | %s |\n' "$deps_s"
  printf '| the container engines (%s) | %s |\n' "$engines" "$took"
  printf '| in all, before make test compiles | %s |\n' "$((deps_s + took))"
  echo "log: $log"
  exit 0
  ;;
test-build)
  step "$log" "cd /root/gpupool && make test CTEST_ARGS='-R ^no-test-has-this-name$'"
  table "make test without its suite"
  printf '| make test: packages, configure, build (the test packages beside it), no test run | %s |\n' "$took"
  grep -m1 '^build:' "$log" || true
  echo "log: $log"
  exit 0
  ;;
esac
# make demo's first step alone, then make demo itself (it finds the packages present): the same
# commands a newcomer's `make demo` runs, in two timed parts.
step "$log" "cd /root/gpupool && .ci/install-deps .ci/packages-build.txt"
deps_s=$took
step "$log" "cd /root/gpupool && make demo"
outputs=$(in_root "ls /root/gpupool/gpupool-out/*/hello.txt | wc -l")
table "make demo"
printf '| make demo: the packages it installs | %s |\n' "$deps_s"
printf '| make demo: configure, build gpupool, run the six jobs | %s |\n' "$took"
printf '| make demo in all | %s |\n' "$((deps_s + took))"
echo "outputs brought back: $outputs of 6"
echo "it said: $(grep -m1 '^build:' "$log" || true)"
echo "log: $log"
