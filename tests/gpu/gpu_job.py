#!/usr/bin/env python3
"""The jobs tests/gpu/check.sh runs on a real GPU, as one program with three modes.

  gpu_job.py work SECONDS FRACTION   hold FRACTION of the job's GPU memory share (GPUPOOL_GPU_MEMORY_MB)
                                     and run matmuls for SECONDS
  gpu_job.py hold SECONDS FRACTION   the same, sleeping instead of computing (the GPU stays quiet)
  gpu_job.py hog MULTIPLE SECONDS    allocate MULTIPLE x the share in 256 MiB steps, then hold it SECONDS
  gpu_job.py idle MIB SECONDS        allocate MIB, then sleep SECONDS without touching the GPU

Every mode prints `start <unix time>` once its memory is held and `end <unix time>` when done, with
figures after them; check.sh reads these lines from the job's log. An allocation that fails prints
`allocation failed after N MiB: ...` and exits 1 (under MPS the driver refuses past the job's cap).
"""
import os
import sys
import time

import torch

MIB = 1 << 20


def share_mib():
    return int(os.environ.get("GPUPOOL_GPU_MEMORY_MB", "0"))


def env_note():
    keys = ("CUDA_VISIBLE_DEVICES", "CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT",
            "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE")
    return " ".join(f"{k}={os.environ[k]}" for k in keys if k in os.environ)


def hold(mib, step_mib=256):
    """Allocates `mib` MiB on the GPU in steps; returns the blocks (exits 1 when the driver refuses)."""
    blocks, held = [], 0
    while held < mib:
        n = min(step_mib, mib - held)
        try:
            b = torch.empty(n * MIB, dtype=torch.uint8, device="cuda")
            b.fill_(1)  # touch it: the memory is really in use
        except RuntimeError as e:  # torch.cuda.OutOfMemoryError is one
            print(f"allocation failed after {held} MiB: {str(e).splitlines()[0]}", flush=True)
            sys.exit(1)
        blocks.append(b)
        held += n
    torch.cuda.synchronize()
    return blocks


def work(seconds, fraction, compute=True):
    share = share_mib()
    blocks = hold(int(share * fraction))
    print(f"start {time.time():.3f} share_mib={share} held_mib={int(share * fraction)} {env_note()}", flush=True)
    n = 0
    if compute:
        a = torch.randn(2048, 2048, device="cuda")
        b = torch.randn(2048, 2048, device="cuda")
        until = time.time() + seconds
        while time.time() < until:
            for _ in range(20):
                a = (a @ b).clamp_(-1, 1)
            torch.cuda.synchronize()
            n += 20
    else:
        time.sleep(seconds)
    print(f"end {time.time():.3f} matmuls={n}", flush=True)
    del blocks


def hog(multiple, seconds):
    share = share_mib()
    want = int(share * multiple)
    print(f"allocating {want} MiB, {multiple}x the share of {share} MiB {env_note()}", flush=True)
    blocks = hold(want)
    print(f"start {time.time():.3f} held_mib={want}", flush=True)
    time.sleep(seconds)
    print(f"end {time.time():.3f}", flush=True)
    del blocks


def idle(mib, seconds):
    blocks = hold(mib)
    print(f"start {time.time():.3f} held_mib={mib} {env_note()}", flush=True)
    time.sleep(seconds)
    print(f"end {time.time():.3f}", flush=True)
    del blocks


def main():
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "work":
        work(float(args[0]), float(args[1]))
    elif mode == "hold":
        work(float(args[0]), float(args[1]), compute=False)
    elif mode == "hog":
        hog(float(args[0]), float(args[1]))
    elif mode == "idle":
        idle(int(args[0]), float(args[1]))
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
