"""An Inspect-style evaluation of a tiny transformer on "is this sequence sorted?".

The task: six digits in, "yes" if they never decrease, else "no". The model is trained in the job
(seeded by --seed) on generated sequences that never include the dataset's inputs, then answers
each sample of dataset.jsonl; a match scorer grades it, and /outputs/eval.json holds the samples
and the accuracy in the shape of an Inspect eval log's summary.

Usage: python3 eval.py --seed 1 [--dataset dataset.jsonl] [--out DIR]
       python3 eval.py --write-dataset dataset.jsonl     (how the shipped dataset was made)
"""
import argparse
import json
import os
import random
import time

SEQ_LEN, DIGITS = 6, 10
ANSWERS = ["no", "yes"]


def make_sequence(rng, sorted_wanted):
    """A sorted sequence, or an unsorted one that is usually one swap away from sorted (hard)."""
    digits = sorted(rng.randrange(DIGITS) for _ in range(SEQ_LEN))
    if not sorted_wanted:
        while digits == sorted(digits):
            if rng.random() < 0.7:
                i = rng.randrange(SEQ_LEN - 1)
                digits[i], digits[i + 1] = digits[i + 1], digits[i]
            else:
                rng.shuffle(digits)
            if len(set(digits)) == 1:
                digits[0] = (digits[0] + 1) % DIGITS
    return digits


def label(digits):
    return "yes" if digits == sorted(digits) else "no"


def write_dataset(path, count=50, seed=2025):
    rng = random.Random(seed)
    with open(path, "w") as f:
        for i in range(count):
            digits = make_sequence(rng, sorted_wanted=(i % 2 == 0))
            f.write(json.dumps({"id": i + 1, "input": " ".join(map(str, digits)), "target": label(digits)}) + "\n")


def read_dataset(path):
    with open(path) as f:
        samples = [json.loads(line) for line in f if line.strip()]
    for s in samples:
        if sorted(s) != ["id", "input", "target"] or s["target"] not in ANSWERS:
            raise SystemExit("%s: bad sample %r" % (path, s))
    return samples


def build_model(torch):
    nn = torch.nn

    class Classifier(nn.Module):
        """Two pre-norm transformer layers over the digits; the last position answers yes or no."""

        def __init__(self, d_model=64):
            super().__init__()
            self.embed = nn.Embedding(DIGITS, d_model)
            self.pos = nn.Parameter(0.1 * torch.randn(SEQ_LEN, d_model))
            layer = nn.TransformerEncoderLayer(d_model, 4, 4 * d_model, dropout=0.0,
                                               batch_first=True, norm_first=True)
            self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
            self.head = nn.Linear(d_model, len(ANSWERS))

        def forward(self, tokens):
            return self.head(self.encoder(self.embed(tokens) + self.pos)[:, -1])

    return Classifier()


def train(torch, model, rng, exclude, steps):
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    for _ in range(steps):
        rows, targets = [], []
        while len(rows) < 128:
            digits = make_sequence(rng, sorted_wanted=rng.random() < 0.5)
            if " ".join(map(str, digits)) not in exclude:  # never train on the test set
                rows.append(digits)
                targets.append(ANSWERS.index(label(digits)))
        loss = torch.nn.functional.cross_entropy(model(torch.tensor(rows)), torch.tensor(targets))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--dataset", default="dataset.jsonl")
    parser.add_argument("--out", default=os.environ.get("GPUPOOL_OUTPUT_DIR", "outputs"))
    parser.add_argument("--write-dataset", metavar="PATH")
    args = parser.parse_args()
    if args.write_dataset:
        write_dataset(args.write_dataset)
        return

    import torch  # only here, so that --write-dataset runs without torch
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    t0 = time.time()
    samples = read_dataset(args.dataset)
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    model = build_model(torch)
    loss = train(torch, model, random.Random(args.seed), {s["input"] for s in samples}, args.steps)
    model.eval()

    with torch.no_grad():
        tokens = torch.tensor([[int(d) for d in s["input"].split()] for s in samples])
        outputs = [ANSWERS[i] for i in model(tokens).argmax(-1).tolist()]
    results = []
    for sample, output in zip(samples, outputs):
        score = "C" if output == sample["target"] else "I"  # Inspect's CORRECT / INCORRECT
        results.append({"id": sample["id"], "input": sample["input"], "target": sample["target"],
                        "output": output, "score": {"value": score, "scorer": "match"}})
    correct = sum(r["score"]["value"] == "C" for r in results)
    accuracy = correct / len(results)
    log = {
        "version": 2,
        "status": "success",
        "eval": {
            "task": "toy_sorted",
            "model": "local/tiny-transformer-seed%d" % args.seed,
            "created": started,
            "dataset": {"name": os.path.basename(args.dataset), "samples": len(samples)},
            "task_args": {"seed": args.seed, "train_steps": args.steps},
        },
        "results": {
            "total_samples": len(samples),
            "completed_samples": len(results),
            "scores": [{"name": "match", "scorer": "match",
                        "metrics": {"accuracy": {"name": "accuracy", "value": accuracy}}}],
        },
        "stats": {"train_loss": loss, "seconds": round(time.time() - t0, 2)},
        "samples": results,
    }
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "eval.json"), "w") as f:
        json.dump(log, f, indent=1)
    print("toy_sorted, seed %d: accuracy %.3f (%d/%d), train loss %.4f, %.1f s"
          % (args.seed, accuracy, correct, len(results), loss, time.time() - t0))


if __name__ == "__main__":
    main()
