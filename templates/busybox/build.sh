#!/usr/bin/env bash
# Builds localhost/gpupool/busybox:latest offline from Debian's busybox-static (no registry needed):
# the image of the demo recipe and of the worker's container tests.
# ENGINE=podman (default) or docker; ENGINE_ARGS: its global flags, split on spaces (e.g. "-H unix://…").
set -euo pipefail
engine=${ENGINE:-podman}
read -r -a engine_args <<< "${ENGINE_ARGS:-}"
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
# The image's / is this folder: mktemp makes it 0700, which a job running as any user but root
# cannot enter wherever the engine keeps the layer as it is (rootless podman's vfs storage).
chmod 0755 "$root"
mkdir -p "$root"/{bin,etc,tmp,work,outputs,cache}
cp /bin/busybox "$root/bin/busybox"
chroot "$root" /bin/busybox --install -s /bin
printf 'root:x:0:0:root:/root:/bin/sh\ngpupool:x:1000:1000:gpupool:/tmp:/bin/sh\n' > "$root/etc/passwd"
printf 'root:x:0:\ngpupool:x:1000:\n' > "$root/etc/group"
chmod 1777 "$root/tmp" "$root/outputs"
tar -C "$root" -c . | "$engine" "${engine_args[@]}" import - localhost/gpupool/busybox:latest
