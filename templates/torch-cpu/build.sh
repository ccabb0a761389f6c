#!/usr/bin/env bash
# Builds localhost/gpupool/torch-cpu:latest from Debian 12 packages alone (no image registry, no
# Python package index): mmdebstrap makes the root filesystem, the engine imports it.
#
# ENGINE=podman (default) or docker; ENGINE_ARGS: its global flags, split on spaces (e.g. "-H unix://…").
# MIRROR / SECURITY_MIRROR: the Debian archives to install from (defaults: deb.debian.org).
# IMAGE: the reference to build (default localhost/gpupool/torch-cpu:latest).
#
# Two caches keep repeated runs cheap:
#   - the root filesystem tarball under ${XDG_CACHE_HOME:-$HOME/.cache}/gpupool/images/, keyed by
#     the package list, make_rootfs below and the start-up hook it copies in, so a new engine (or a
#     pruned image, or a change to the image's settings) costs an import, not a download;
#   - the image label io.gpupool.image-key (that key plus this whole script), so an engine that
#     already holds this exact image is left alone and the script returns at once.
set -euo pipefail
started=$SECONDS
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
engine=${ENGINE:-podman}
read -r -a engine_args <<< "${ENGINE_ARGS:-}"
image=${IMAGE:-localhost/gpupool/torch-cpu:latest}
mirror=${MIRROR:-http://deb.debian.org/debian}
security=${SECURITY_MIRROR:-http://deb.debian.org/debian-security}
label=io.gpupool.image-key
hook_files=("$here/../base/gpupool_startup.py" "$here/../base/gpupool_startup.pth")

# What the research recipes need; everything else comes in as a dependency, without recommends.
packages=(python3 python3-torch python3-numpy python3-matplotlib ca-certificates)
# Debian's hard dependencies drag in compilers, headers and test binaries that no job imports
# (python3-torch -> libtorch-test; matplotlib -> fonttools -> scipy -> pythran -> g++, boost): a
# quarter of the image. They are purged with --force-depends, so dpkg lists them as missing and an
# `apt-get install` in a derived image first puts them back (`apt-get -f install`).
build_only=(libtorch-test g++ g++-12 gcc gcc-12 cpp cpp-12 libstdc++-12-dev libgcc-12-dev
  libboost-dev libboost1.74-dev libopenblas-dev libopenblas-pthread-dev libblas-dev liblapack-dev
  python3-pythran libxsimd-dev libpython3.11-dev libpython3-dev python3.11-dev python3-dev libc6-dev
  linux-libc-dev libexpat1-dev zlib1g-dev libcrypt-dev libnsl-dev libtirpc-dev)

# Writes the root filesystem as a tar to $1. The hook is byte-compiled here because jobs cannot
# write next to it, and compiling it at every interpreter start would cost milliseconds each time.
make_rootfs() {
  # Docs, man pages and translations are a large share of a Debian system and useless in a batch
  # job; the copyright files stay for the licences. mmdebstrap already drops apt's lists and cache.
  mmdebstrap --variant=minbase --format=tar \
    --include="$(IFS=,; echo "${packages[*]}")" \
    --aptopt='APT::Install-Recommends "false"' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --customize-hook="copy-in ${hook_files[*]} /usr/lib/python3/dist-packages" \
    --customize-hook='chroot "$1" python3 -m py_compile /usr/lib/python3/dist-packages/gpupool_startup.py' \
    --customize-hook='chroot "$1" useradd --uid 1000 --user-group --create-home --shell /bin/bash gpupool' \
    --customize-hook='mkdir -p "$1"/work "$1"/outputs "$1"/cache "$1"/team-cache/huggingface' \
    --customize-hook='chown 1000:1000 "$1"/work "$1"/outputs "$1"/team-cache "$1"/team-cache/huggingface' \
    --customize-hook="chroot \"\$1\" dpkg --purge --force-depends ${build_only[*]}" \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/var/log/*.log' \
    bookworm "$1" \
    "deb $mirror bookworm main" "deb $mirror bookworm-updates main" \
    "deb $security bookworm-security main"
}

hash16() { sha256sum | cut -c1-16; }
rootfs_key=$( { printf '%s\n' "${packages[@]}" -- "${build_only[@]}"; declare -f make_rootfs; cat "${hook_files[@]}"; } | hash16)
key=$( { echo "$rootfs_key"; cat "${BASH_SOURCE[0]}"; } | hash16)

say() { printf 'torch-cpu: %s\n' "$*"; }
eng() { "$engine" "${engine_args[@]}" "$@"; }
size_of() { say "$image is $(($1 / 1024 / 1024)) MiB ($1 bytes)"; }

# One engine call answers both "is it current?" and "how big?": this path must stay fast.
# No image yet: `read` meets an empty answer and fails, which is not an error here.
read -r have_key have_size < <(eng image inspect --format "{{index .Config.Labels \"$label\"}} {{.Size}}" \
  "$image" 2> /dev/null || true) || true
if [[ ${have_key:-} == "$key" ]]; then
  say "$image is up to date (key $key) in $engine; nothing to do"
  size_of "$have_size"
  exit 0
fi

cache_dir="${XDG_CACHE_HOME:-$HOME/.cache}/gpupool/images"
rootfs="$cache_dir/torch-cpu-$rootfs_key.tar"
mkdir -p "$cache_dir"
if [[ -s $rootfs ]]; then
  say "reusing the cached root filesystem $rootfs"
else
  if ! command -v mmdebstrap > /dev/null; then
    say "installing mmdebstrap with apt-get"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap > /dev/null
  fi
  say "building the root filesystem with mmdebstrap (a few hundred MB to download)"
  trap 'rm -f "$rootfs.partial"' EXIT
  make_rootfs "$rootfs.partial"
  mv "$rootfs.partial" "$rootfs"
  trap - EXIT
  # Older keys are dead weight of several hundred MB each.
  find "$cache_dir" -maxdepth 1 -name 'torch-cpu-*.tar' ! -name "torch-cpu-$rootfs_key.tar" -delete
fi

# HOME is not writable under gpupool's read-only root, hence matplotlib's cache under /tmp.
say "importing into $engine as $image"
old_id=$(eng image inspect --format '{{.Id}}' "$image" 2> /dev/null || true)
if ! log=$(eng import \
  --change 'USER gpupool' \
  --change 'WORKDIR /work' \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV HOME=/home/gpupool' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'ENV MPLBACKEND=Agg' \
  --change 'ENV MPLCONFIGDIR=/tmp/matplotlib' \
  --change 'ENV HF_HOME=/team-cache/huggingface' \
  --change "LABEL $label=$key" \
  --change 'CMD ["python3"]' \
  - "$image" < "$rootfs" 2>&1); then
  echo "$log" >&2
  exit 1
fi
# The image this one replaces would linger untagged, 1.4 GB each; one a container still uses stays.
new_id=$(eng image inspect --format '{{.Id}}' "$image")
if [[ -n $old_id && $old_id != "$new_id" ]]; then
  eng rmi "$old_id" > /dev/null 2>&1 || true
fi
say "done in $((SECONDS - started)) s"
size_of "$(eng image inspect --format '{{.Size}}' "$image")"
