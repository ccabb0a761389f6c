"""Activation patching on a tiny transformer trained to copy the first token of a sequence.

The model must carry the first token's identity from position 0 to the last position, so
patching the residual stream from a clean run into a corrupted one (which differs only in the
first token) has clear structure: early layers carry the answer at position 0, later layers at the
last position. Everything is seeded; on one CPU a job takes a few seconds.

Usage: python3 patching.py --layers 2 [--seed 0] [--out DIR]   (DIR defaults to $GPUPOOL_OUTPUT_DIR)
"""
import argparse
import json
import math
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, SEQ_LEN, D_MODEL, HEADS = 16, 8, 64, 4


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D_MODEL), nn.LayerNorm(D_MODEL)
        self.attn = nn.MultiheadAttention(D_MODEL, HEADS, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(D_MODEL, 4 * D_MODEL), nn.GELU(), nn.Linear(4 * D_MODEL, D_MODEL))

    def forward(self, resid):
        n = resid.shape[1]
        causal = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
        x = self.ln1(resid)
        resid = resid + self.attn(x, x, x, attn_mask=causal, need_weights=False)[0]
        return resid + self.mlp(self.ln2(resid))


class TinyTransformer(nn.Module):
    def __init__(self, n_layers):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D_MODEL)
        self.pos = nn.Parameter(0.1 * torch.randn(SEQ_LEN, D_MODEL))
        self.blocks = nn.ModuleList(Block() for _ in range(n_layers))
        self.ln_final = nn.LayerNorm(D_MODEL)
        self.unembed = nn.Linear(D_MODEL, VOCAB)

    def forward(self, tokens):
        resid = self.embed(tokens) + self.pos[: tokens.shape[1]]
        for block in self.blocks:
            resid = block(resid)
        return self.unembed(self.ln_final(resid))


def batch(generator, size):
    """Random sequences; the answer at the last position is the first token."""
    tokens = torch.randint(0, VOCAB, (size, SEQ_LEN), generator=generator)
    return tokens, tokens[:, 0]


def train(model, generator, steps, log):
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for step in range(steps):
        tokens, target = batch(generator, 128)
        loss = F.cross_entropy(model(tokens)[:, -1], target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        log(step, loss.item())
    with torch.no_grad():
        tokens, target = batch(generator, 1024)
        accuracy = (model(tokens)[:, -1].argmax(-1) == target).float().mean().item()
    return loss.item(), accuracy


def hook_points(model):
    """(label, module, kind): the residual stream entering each block, then leaving the last one."""
    points = [("resid_pre.%d" % i, block, "pre") for i, block in enumerate(model.blocks)]
    points.append(("resid_post.%d" % (len(model.blocks) - 1), model.blocks[-1], "post"))
    return points


def cache_residuals(model, tokens):
    cache, handles = {}, []
    for label, module, kind in hook_points(model):
        if kind == "pre":
            handles.append(module.register_forward_pre_hook(
                lambda m, args, label=label: cache.__setitem__(label, args[0].detach().clone())))
        else:
            handles.append(module.register_forward_hook(
                lambda m, args, out, label=label: cache.__setitem__(label, out.detach().clone())))
    try:
        logits = model(tokens)
    finally:
        for handle in handles:
            handle.remove()
    return logits, cache


def patched_logits(model, tokens, module, kind, position, clean):
    """Runs on `tokens` with the residual stream at `position` replaced by the clean run's."""
    def replace(resid):
        resid = resid.clone()
        resid[:, position] = clean[:, position]
        return resid

    if kind == "pre":
        handle = module.register_forward_pre_hook(lambda m, args: (replace(args[0]),) + tuple(args[1:]))
    else:
        handle = module.register_forward_hook(lambda m, args, out: replace(out))
    try:
        return model(tokens)
    finally:
        handle.remove()


def logit_diff(logits, clean_answer, corrupt_answer):
    """Mean over pairs of logit(clean answer) - logit(corrupt answer) at the last position."""
    last = logits[:, -1]
    return (last.gather(1, clean_answer[:, None]) - last.gather(1, corrupt_answer[:, None])).mean().item()


def save_heatmap(path, matrix, labels, n_layers):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 1 + 0.6 * len(labels)))
    image = ax.imshow(matrix, cmap="RdBu", vmin=-1, vmax=1, aspect="auto")
    ax.set_xticks(range(SEQ_LEN))
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels)
    ax.set_xlabel("position")
    ax.set_title("Patching clean into corrupt, %d-layer model\n(fraction of logit difference restored)" % n_layers)
    fig.colorbar(image, ax=ax)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def tensorboard_writer(out_dir):
    # Debian's torch has no tensorboard; an image that has it gets event files, others nothing.
    try:
        from torch.utils.tensorboard import SummaryWriter
        return SummaryWriter(os.path.join(out_dir, "tensorboard"))
    except Exception:
        return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=2, choices=range(1, 5))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--pairs", type=int, default=256)
    parser.add_argument("--out", default=os.environ.get("GPUPOOL_OUTPUT_DIR", "outputs"))
    args = parser.parse_args()
    started = time.time()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(1)  # the recipe asks for one CPU; more threads would only contend
    torch.manual_seed(args.seed)
    generator = torch.Generator().manual_seed(args.seed)

    model = TinyTransformer(args.layers)
    writer = tensorboard_writer(args.out)
    log = (lambda step, loss: writer.add_scalar("train/loss", loss, step)) if writer else (lambda s, l: None)
    loss, accuracy = train(model, generator, args.steps, log)
    model.eval()
    print("trained %d layers for %d steps: loss %.4f, accuracy %.3f" % (args.layers, args.steps, loss, accuracy))

    with torch.no_grad():
        clean, clean_answer = batch(generator, args.pairs)
        # The corrupt input differs only in its first token, so only the answer's path differs.
        corrupt_answer = (clean_answer + torch.randint(1, VOCAB, (args.pairs,), generator=generator)) % VOCAB
        corrupt = clean.clone()
        corrupt[:, 0] = corrupt_answer
        clean_logits, clean_cache = cache_residuals(model, clean)
        clean_diff = logit_diff(clean_logits, clean_answer, corrupt_answer)
        corrupt_diff = logit_diff(model(corrupt), clean_answer, corrupt_answer)
        labels, matrix = [], []
        for label, module, kind in hook_points(model):
            row = []
            for position in range(SEQ_LEN):
                logits = patched_logits(model, corrupt, module, kind, position, clean_cache[label])
                patched = logit_diff(logits, clean_answer, corrupt_answer)
                row.append((patched - corrupt_diff) / (clean_diff - corrupt_diff))
            labels.append(label)
            matrix.append(row)
            print("%-13s %s" % (label, " ".join("%6.3f" % v for v in row)))

    if not all(math.isfinite(v) for row in matrix for v in row):
        raise SystemExit("patching produced a non-finite value; the model did not learn the task")
    result = {
        "task": "copy-first-token",
        "metric": "fraction of the clean-minus-corrupt logit difference restored by the patch",
        "bounds": [-1.0, 2.0],
        "model": {"n_layers": args.layers, "d_model": D_MODEL, "heads": HEADS, "vocab": VOCAB,
                  "seq_len": SEQ_LEN, "seed": args.seed},
        "train": {"steps": args.steps, "final_loss": loss, "accuracy": accuracy},
        "pairs": args.pairs,
        "shape": [len(labels), SEQ_LEN],
        "layers": labels,
        "positions": list(range(SEQ_LEN)),
        "matrix": matrix,
        "clean_logit_diff": clean_diff,
        "corrupt_logit_diff": corrupt_diff,
        "seconds": round(time.time() - started, 2),
    }
    with open(os.path.join(args.out, "patching.json"), "w") as f:
        json.dump(result, f, indent=1)
    save_heatmap(os.path.join(args.out, "patching.png"), matrix, labels, args.layers)
    if writer:
        writer.close()
    print("wrote patching.json and patching.png to %s in %.1f s" % (args.out, time.time() - started))


if __name__ == "__main__":
    main()
