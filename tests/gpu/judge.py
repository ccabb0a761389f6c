#!/usr/bin/env python3
"""Judges the checks of tests/gpu/check.sh from what gpupool itself says (its --json answers and
the jobs' logs), so the bash script needs neither jq nor curl.

Environment: GPUPOOL_BIN (the binary), GPUPOOL_URL, GPUPOOL_ADMIN_TOKEN_FILE, GPUPOOL_MEMBER_TOKEN_FILE.

  judge.py ended ID...                 exit 0 when every job has ended (succeeded, failed, cancelled)
  judge.py started ID                  exit 0 once the job runs and its log says `start` (or it has ended)
  judge.py inventory SMI_CSV           check 1: the worker's GPUs against nvidia-smi's
                                       `--query-gpu=name,memory.total,uuid --format=csv,noheader,nounits`
  judge.py enforcement                 prints how the worker enforces GPU 0's memory shares
  judge.py together ID...              check 2: all succeeded on GPU 0, [start, end] overlapping
  judge.py offender ID NEIGHBOUR MODE  check 3: the offender failed for its GPU memory share (MODE mps:
                                       failing on its own refused allocation counts too), the neighbour
                                       succeeded, and they ran at the same time
  judge.py idle ID LIMIT_S             check 4: failed as idle on its GPU within LIMIT_S of its start
  judge.py sweep LABEL T0 T1 ID...     pack.sh: one JSON line of figures for a sweep submitted at T0 and
                                       all ended at T1 (unix times): makespan T1 - T0, how many ran at once
  judge.py pack N SWEEP_FILE...        check 6: the verdict over pack.sh's sweeps (the lines `sweep` printed;
                                       a file holding `SKIP: why` or `FAIL: why` stands for a sweep not run)

The judging subcommands print one line, `PASS: <figures>` or `FAIL: <why>`.
"""
import csv
import json
import os
import re
import subprocess
import sys

ENDED = {"succeeded", "failed", "cancelled"}


def gpupool(token_env, *args, as_json=True):
    cmd = [os.environ["GPUPOOL_BIN"], "--url", os.environ["GPUPOOL_URL"], "--token-file", os.environ[token_env]]
    cmd += (["--json"] if as_json else []) + list(args)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    if r.returncode != 0:
        raise RuntimeError(f"gpupool {' '.join(args)} exited {r.returncode}: {r.stderr.strip()[:300]}")
    return json.loads(r.stdout) if as_json else r.stdout


def member(*args, **kw):
    return gpupool("GPUPOOL_MEMBER_TOKEN_FILE", *args, **kw)


def admin(*args, **kw):
    return gpupool("GPUPOOL_ADMIN_TOKEN_FILE", *args, **kw)


class Job:
    """A job as `status --json` and its log tell it."""

    def __init__(self, job_id, with_log=True):
        view = member("status", str(job_id))
        self.id = job_id
        self.state = view["state"]
        self.reason = view.get("reason") or ""
        attempts = view.get("attempt_history") or []
        last = attempts[-1] if attempts else {}
        self.gpu_index = last.get("gpu_index")
        self.gpu_milli = last.get("gpu_milli")
        self.started_at = last.get("started_at")
        self.ended_at = last.get("ended_at")
        self.log = member("logs", str(job_id), as_json=False) if with_log else ""
        self.start = self.stamp("start")
        self.end = self.stamp("end")

    def stamp(self, word):
        m = re.search(rf"^{word} (\d+(?:\.\d+)?)", self.log, re.M)
        return float(m.group(1)) if m else None

    def figure(self, key):
        m = re.search(rf"\b{key}=(\S+)", self.log)
        return m.group(1) if m else "?"

    def ran_s(self):
        if self.started_at is None or self.ended_at is None:
            return None
        return (self.ended_at - self.started_at) / 1000

    def last_line(self):
        lines = [x for x in self.log.splitlines() if x.strip()]
        return lines[-1][:200] if lines else "(empty log)"

    def describe(self):
        return f"job {self.id} {self.state} ({self.reason or 'no reason'}; log: {self.last_line()})"


def normalize_model(name):
    """The worker's normalize_gpu_model: "NVIDIA GeForce RTX 4090" -> "RTX-4090"."""
    s = name.strip()
    for prefix in ("NVIDIA ", "GeForce ", "Tesla ", "Quadro "):
        if s.startswith(prefix):
            s = s[len(prefix):]
    return s.replace(" ", "-")


def worker_gpus():
    workers = admin("admin", "workers")["workers"]
    if len(workers) != 1:
        raise RuntimeError(f"expected one worker, the pool has {len(workers)}")
    return workers[0]["inventory"]["gpus"]


def inventory(smi_csv):
    with open(smi_csv, newline="", encoding="utf-8") as f:
        rows = [r for r in csv.reader(f, skipinitialspace=True) if r]
    gpus = {g["uuid"]: g for g in worker_gpus()}
    shown, bad = [], []
    for name, memory, uuid in rows:
        g = gpus.get(uuid)
        if g is None:
            bad.append(f"{uuid} ({name}) is not in the worker's inventory")
            continue
        if g["memory_mib"] != int(memory):
            bad.append(f"{uuid}: the worker says {g['memory_mib']} MiB, nvidia-smi {memory} MiB")
        if g["model"] != normalize_model(name):
            bad.append(f"{uuid}: the worker says model {g['model']}, nvidia-smi `{name}`")
        shown.append(f"GPU {g['index']} {name} = {g['model']}, {memory} MiB, {uuid}, {g.get('memory_enforcement')}")
    if len(gpus) != len(rows):
        bad.append(f"the worker registered {len(gpus)} GPU(s), nvidia-smi lists {len(rows)}")
    if not rows:
        bad.append("nvidia-smi lists no GPU")
    return ("FAIL: " + "; ".join(bad)) if bad else f"PASS: {len(rows)} GPU(s) as nvidia-smi lists them: " + "; ".join(shown)


def enforcement():
    for g in worker_gpus():
        if g["index"] == 0:
            return g.get("memory_enforcement", "?")
    return "?"


def together(ids):
    jobs = [Job(i) for i in ids]
    for j in jobs:
        if j.state != "succeeded":
            return f"FAIL: {j.describe()}"
        if j.gpu_index != 0:
            return f"FAIL: job {j.id} ran on GPU {j.gpu_index}, not GPU 0"
        if j.start is None or j.end is None:
            return f"FAIL: job {j.id}'s log has no start/end line (log: {j.last_line()})"
    overlap = min(j.end for j in jobs) - max(j.start for j in jobs)
    spread = max(j.start for j in jobs) - min(j.start for j in jobs)
    held = ", ".join(f"{j.figure('held_mib')}/{j.figure('share_mib')}" for j in jobs)
    matmuls = "/".join(j.figure("matmuls") for j in jobs)
    figures = (f"{len(jobs)} jobs of {jobs[0].gpu_milli / 1000:g} GPU on GPU 0 ran together for {overlap:.1f} s "
               f"(starts {spread:.1f} s apart); MiB held/share: {held}; 2048x2048 matmuls: {matmuls}")
    if jobs[0].figure("CUDA_MPS_PIPE_DIRECTORY") != "?":
        figures += f"; MPS cap of the first: {jobs[0].figure('CUDA_MPS_PINNED_DEVICE_MEM_LIMIT')}"
    return ("PASS: " if overlap > 0 else "FAIL: not all at once: ") + figures


def offender(off_id, neighbour_id, mode):
    off, nb = Job(off_id), Job(neighbour_id)
    if off.state != "failed":
        return f"FAIL: the offender was not stopped: {off.describe()}"
    ran = f"after {off.ran_s():.1f} s" if off.ran_s() is not None else ""
    refused = re.search(r"^allocation failed after (\d+) MiB.*$", off.log, re.M)
    if "GPU memory share" in off.reason:
        how = f"the offender failed {ran}: {off.reason}"
    elif mode == "mps" and refused:
        how = (f"the driver refused the offender's allocation at {refused.group(1)} MiB "
               f"(cap {off.figure('CUDA_MPS_PINNED_DEVICE_MEM_LIMIT')}) and it failed {ran}: {refused.group(0)[:160]}")
    else:
        return f"FAIL: the offender failed for another reason: {off.describe()}"
    if nb.state != "succeeded":
        return f"FAIL: {how}; but the neighbour did not succeed: {nb.describe()}"
    if None in (off.started_at, off.ended_at, nb.started_at, nb.ended_at) or \
            max(off.started_at, nb.started_at) >= min(off.ended_at, nb.ended_at):
        return f"FAIL: {how}; but it and its neighbour did not run at the same time"
    return f"PASS: {how}; the neighbour, running beside it, succeeded"


def idle(job_id, limit_s):
    j = Job(job_id)
    ran = j.ran_s()
    if j.state != "failed" or not j.reason.startswith("idle on its GPU"):
        return f"FAIL: {j.describe()}"
    if ran is None or ran > limit_s:
        return f"FAIL: stopped as idle, but after {ran} s (limit {limit_s:g} s): {j.reason}"
    return f"PASS: stopped {ran:.0f} s after it started (limit {limit_s:g} s): {j.reason}"


def most_at_once(jobs):
    """The largest number of jobs whose [start, end] intervals (their own log lines) overlap."""
    events = sorted([(j.start, 1) for j in jobs] + [(j.end, -1) for j in jobs], key=lambda e: (e[0], e[1]))
    now = most = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def sweep(label, t0, t1, ids):
    jobs = [Job(i) for i in ids]
    timed = [j for j in jobs if j.start is not None and j.end is not None]
    runs = sorted(j.end - j.start for j in timed)
    setups = sorted(float(j.figure("setup_s")) for j in timed if j.figure("setup_s") != "?")
    return json.dumps({
        "label": label, "jobs": len(jobs), "succeeded": sum(j.state == "succeeded" for j in jobs),
        "gpu": (jobs[0].gpu_milli or 0) / 1000 if jobs else 0, "makespan_s": round(t1 - t0, 1),
        "run_median_s": round(runs[len(runs) // 2], 2) if runs else None,
        "setup_median_s": round(setups[len(setups) // 2], 2) if setups else None,
        "at_once": most_at_once(timed), "model": timed[0].figure("model") if timed else "?",
        "trouble": [j.describe() for j in jobs if j.state != "succeeded"][:2]})


def pack(n, files):
    sweeps, skipped, bad = {}, [], []
    for f in files:
        with open(f, encoding="utf-8") as fh:
            text = fh.read().strip()
        if text.startswith("SKIP: "):
            skipped.append(text[6:])
        elif text.startswith("FAIL: "):
            bad.append(text[6:])
        elif text:
            d = json.loads(text.splitlines()[-1])
            sweeps[d["label"]] = d
    for d in sweeps.values():
        if d["succeeded"] != d["jobs"] or d["jobs"] != n:
            bad.append(f"{d['label']}: {d['succeeded']} of {d['jobs']} job(s) succeeded ({'; '.join(d['trouble'])})")
    if "serial" in sweeps and sweeps["serial"]["at_once"] > 1:
        bad.append(f"serial: {sweeps['serial']['at_once']} whole-GPU jobs ran at once on one GPU")
    for label in ("packed", "mps"):
        if label in sweeps and sweeps[label]["at_once"] < 2 <= n:
            bad.append(f"{label}: the jobs never ran together (at most {sweeps[label]['at_once']} at once)")
    if "packed" not in sweeps:
        bad.append("the packed sweep did not run")
    parts = []
    base = sweeps.get("serial", {}).get("makespan_s")
    for label, what in (("serial", "one at a time"), ("packed", "packed"), ("mps", "packed under MPS")):
        d = sweeps.get(label)
        if d is None:
            continue
        part = f"{what} (gpu = {d['gpu']:g}) {d['makespan_s']:.1f} s"
        if label != "serial":
            part += f", {d['at_once']} at once"
            if base:
                part += f", {base / d['makespan_s']:.2f}x"
        parts.append(part)
    model = next(iter(sweeps.values()))["model"] if sweeps else "?"
    figures = f"N={n} ({model}): " + "; ".join(parts) + "".join(f"; SKIP {s}" for s in skipped)
    return ("FAIL: " + "; ".join(bad) + " -- " if bad else "PASS: ") + figures


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    try:
        if cmd == "ended":
            sys.exit(0 if all(Job(i, with_log=False).state in ENDED for i in args) else 1)
        elif cmd == "started":
            j = Job(args[0])
            sys.exit(0 if j.state in ENDED or (j.state == "running" and j.start is not None) else 1)
        elif cmd == "inventory":
            print(inventory(args[0]))
        elif cmd == "enforcement":
            print(enforcement())
        elif cmd == "together":
            print(together(args))
        elif cmd == "offender":
            print(offender(args[0], args[1], args[2]))
        elif cmd == "idle":
            print(idle(args[0], float(args[1])))
        elif cmd == "sweep":
            print(sweep(args[0], float(args[1]), float(args[2]), args[3:]))
        elif cmd == "pack":
            print(pack(int(args[0]), args[1:]))
        else:
            sys.exit(f"judge.py: unknown command {cmd}")
    except (RuntimeError, KeyError, ValueError, OSError, subprocess.TimeoutExpired) as e:
        if cmd in ("ended", "started"):
            sys.exit(1)
        print(f"FAIL: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
