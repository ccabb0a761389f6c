#!/usr/bin/env python3
"""The job of tests/gpu/pack.sh: an evaluation-like load, the kind a pool packs many of onto one GPU.

  pack_job.py ITERS        a 6-layer transformer encoder (512 wide, 8 heads, random weights, fp16, plain
                           PyTorch) run forward ITERS times on a batch of 8 x 256 tokens
  pack_job.py ITERS dry    no PyTorch, no GPU: sleeps ITERS ms (the plumbing test, GPUPOOL_GPU_CHECK_DRY=1)

It prints `start <unix time>` once the model is on the GPU (after `setup_s`, the interpreter, PyTorch and
the CUDA context) and `end <unix time>` after the last forward, with figures after them; pack.sh reads
these lines from the job's log.
"""
import os
import sys
import time

T0 = time.time()


def dry(iters):
    time.sleep(0.2)
    print(f"start {time.time():.3f} setup_s={time.time() - T0:.2f} model=dry", flush=True)
    time.sleep(iters / 1000)
    print(f"end {time.time():.3f} iters={iters}", flush=True)


def forward(iters):
    import torch  # pylint: disable=import-outside-toplevel

    layer = torch.nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True)
    model = torch.nn.Sequential(torch.nn.Embedding(32000, 512), torch.nn.TransformerEncoder(layer, 6))
    model = model.cuda().eval().half()
    tokens = torch.randint(0, 32000, (8, 256), device="cuda")
    with torch.no_grad():
        model(tokens)  # the first forward builds the kernels: part of the setup
    torch.cuda.synchronize()
    print(f"start {time.time():.3f} setup_s={time.time() - T0:.2f} model=encoder-6x512-fp16 "
          f"share_mib={os.environ.get('GPUPOOL_GPU_MEMORY_MB', '?')}", flush=True)
    with torch.no_grad():
        for _ in range(iters):
            model(tokens)
    torch.cuda.synchronize()
    print(f"end {time.time():.3f} iters={iters} peak_mib={torch.cuda.max_memory_allocated() >> 20}", flush=True)


def main():
    iters = int(sys.argv[1])
    if len(sys.argv) > 2 and sys.argv[2] == "dry":
        dry(iters)
    else:
        forward(iters)


if __name__ == "__main__":
    main()
