"""Checks what the research recipes left behind; run inside the torch-cpu image by research_jobs.sh.

It runs there rather than on the host because the host need not have numpy or matplotlib.
Usage: python3 check_outputs.py patching OUT_DIR SWEEP_POINTS
       python3 check_outputs.py eval OUT_DIR SWEEP_POINTS DATASET_JSONL
Prints one line per check ("ok: ..." or "FAIL: ...") and exits 1 if any failed.
"""
import glob
import json
import math
import os
import sys

failures = 0


def check(what, condition, detail=""):
    global failures
    if condition:
        print("ok: %s" % what)
    else:
        failures += 1
        print("FAIL: %s%s" % (what, (" (%s)" % (detail,)) if detail != "" else ""))
    return condition


def job_files(out_dir, name, points):
    files = sorted(glob.glob(os.path.join(out_dir, "*", name)))
    check("%d output set(s) with %s for %d sweep point(s)" % (len(files), name, points),
          len(files) == points, "jobs: %s" % os.listdir(out_dir))
    return files


def close(a, b, tol=1e-4):
    return abs(a - b) <= tol


def check_patching(path):
    job = os.path.basename(os.path.dirname(path))
    with open(path) as f:
        r = json.load(f)
    n_layers = r["model"]["n_layers"]
    rows, cols = r["shape"]
    matrix = r["matrix"]
    low, high = r["bounds"]
    values = [v for row in matrix for v in row]
    check("%s: shape %dx%d is %d residual sites x %d positions" % (job, rows, cols, n_layers + 1, len(r["positions"])),
          rows == n_layers + 1 == len(r["layers"]) == len(matrix) and cols == len(r["positions"])
          and all(len(row) == cols for row in matrix), r["shape"])
    check("%s: all %d patching values finite" % (job, len(values)), all(math.isfinite(v) for v in values))
    check("%s: all values within the documented bounds [%g, %g]" % (job, low, high),
          (low, high) == (-1.0, 2.0) and all(low <= v <= high for v in values), (min(values), max(values)))
    # Structure that follows from the task, not from the training run's luck:
    check("%s: patching the first token's embedding restores everything (1.0)" % job, close(matrix[0][0], 1.0),
          matrix[0][0])
    check("%s: patching other positions before layer 0 changes nothing (0.0)" % job,
          all(close(v, 0.0) for v in matrix[0][1:]), matrix[0][1:])
    check("%s: patching the final residual at the last position restores everything" % job,
          close(matrix[-1][-1], 1.0), matrix[-1][-1])
    check("%s: clean logit diff %.2f > 0 > corrupt %.2f" % (job, r["clean_logit_diff"], r["corrupt_logit_diff"]),
          r["clean_logit_diff"] > 0 > r["corrupt_logit_diff"])
    check("%s: the model learned the task (accuracy %.3f >= 0.9)" % (job, r["train"]["accuracy"]),
          r["train"]["accuracy"] >= 0.9)

    import matplotlib.image
    png = os.path.join(os.path.dirname(path), "patching.png")
    image = matplotlib.image.imread(png)
    want = (round((1 + 0.6 * rows) * 80), 6 * 80, 4)
    check("%s: patching.png decodes to %s" % (job, "x".join(map(str, image.shape))), image.shape == want, want)
    check("%s: the heatmap is not blank" % job, float(image[..., :3].std()) > 0.01)


def check_eval(path, dataset):
    job = os.path.basename(os.path.dirname(path))
    with open(path) as f:
        log = json.load(f)
    n = len(dataset)
    samples = log.get("samples", [])
    check("%s: status success, version %s" % (job, log.get("version")),
          log.get("status") == "success" and isinstance(log.get("version"), int))
    check("%s: eval names task, model and dataset of %d samples" % (job, n),
          log["eval"]["task"] and log["eval"]["model"] and log["eval"]["dataset"]["samples"] == n)
    check("%s: %d samples, as many as the dataset" % (job, len(samples)),
          len(samples) == n == log["results"]["total_samples"] == log["results"]["completed_samples"])
    check("%s: samples follow the dataset (ids, inputs, targets)" % job,
          [(s["id"], s["input"], s["target"]) for s in samples] ==
          [(d["id"], d["input"], d["target"]) for d in dataset])
    check("%s: every output is yes or no and its score matches it" % job,
          all(s["output"] in ("yes", "no") and s["score"]["value"] == ("C" if s["output"] == s["target"] else "I")
              for s in samples))
    accuracy = log["results"]["scores"][0]["metrics"]["accuracy"]["value"]
    correct = sum(s["score"]["value"] == "C" for s in samples)
    check("%s: accuracy %.3f is in [0, 1] and equals %d/%d" % (job, accuracy, correct, n),
          0.0 <= accuracy <= 1.0 and close(accuracy, correct / float(n), 1e-9))
    check("%s: accuracy above chance (> 0.5)" % job, accuracy > 0.5)
    return log["eval"]["model"]


def main():
    kind, out_dir, points = sys.argv[1], sys.argv[2], int(sys.argv[3])
    files = job_files(out_dir, "patching.json" if kind == "patching" else "eval.json", points)
    if kind == "patching":
        for path in files:
            check_patching(path)
    else:
        with open(sys.argv[4]) as f:
            dataset = [json.loads(line) for line in f if line.strip()]
        models = [check_eval(path, dataset) for path in files]
        check("each seed trained its own model (%s)" % ", ".join(models), len(set(models)) == len(models))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
