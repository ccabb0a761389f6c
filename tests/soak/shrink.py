"""The shortest history that shows a violation (issue 46).

A history (checker.collect) is cut into units: a client's intent, acknowledgement, command or the
record of a command begun; a fault; a harness event; a sweep, job, attempt, ledger entry, cached
balance, stored log or stored output of the store; what the API answered for a job (its state,
log, outputs, attempt.txt) or a worker; a job's witness lines; a prober sample; a left-over
process, temporary file or spool item. restrict() rebuilds a history from a subset of the units,
and shrink() looks for a small subset on which checker.check() still reports the same violation
(same invariant, same message): first the units concerning the violation's job, submission,
attempt or worker (the slice), then delta debugging (ddmin, removing chunks, then single units)
until no single unit can go. The result is 1-minimal: without any one of its units the checker
no longer reports that violation. A time budget bounds the search; past it the result is only
smaller, not minimal, and says so.
"""

import time

import workload

WHOLE_AT_MOST = 20000  # a history with more units is not searched from the whole (a check of it takes seconds)
PARTS = ("intent", "ack", "op", "begin", "fault", "event", "sweep", "job", "attempt", "entry", "balance", "slog",
         "sout", "api-job", "api-log", "api-out", "api-att", "api-worker", "api-error", "witness", "presence",
         "probe", "leftover", "tmp", "spool", "worker-exit", "nonterminal")


def units(h):
    """Every unit of history `h`, as (part, key), grouped by part."""
    s, api = h["store"], h["api"]
    u = []
    u += [("intent", t) for t in h["intents"]]
    u += [("ack", t) for t in h["acks"]]
    u += [("op", i) for i in range(len(h["client_ops"]))]
    u += [("begin", i) for i in range(len(h.get("client_begins", [])))]
    u += [("fault", i) for i in range(len(h["faults"]))]
    u += [("event", i) for i in range(len(h["events"]))]
    u += [("sweep", x["id"]) for x in s["sweeps"]]
    u += [("job", x["id"]) for x in s["jobs"]]
    u += [("attempt", x["id"]) for x in s["attempts"]]
    u += [("entry", x["id"]) for x in s["ledger"]]
    u += [("balance", a) for a in s["balances"]]
    u += [("slog", a) for a in s["logs"]]
    u += [("sout", a) for a in s["outputs"]]
    u += [("api-job", j) for j in api["jobs"]]
    u += [("api-log", j) for j in api["logs"]]
    u += [("api-out", j) for j in api["outputs"]]
    u += [("api-att", j) for j in api["attempt_txt"]]
    u += [("api-worker", w) for w in api.get("workers", {})]
    u += [("api-error", i) for i in range(len(api.get("errors", [])))]
    u += [("witness", j) for j in h["witness"]]
    u += [("presence", i) for i in range(len(h["presence"]))]
    u += [("probe", i) for i in range(len(h["probes"]))]
    u += [("leftover", i) for i in range(len(h["leftovers"]))]
    u += [("tmp", i) for i in range(len(h["tmp_left"]))]
    u += [("spool", w) for w, left in h["spools"].items() if left]
    u += [("worker-exit", w) for w in h["worker_exits"]]
    u += [("nonterminal", i) for i in range(len(h.get("nonterminal", [])))]
    return u


def restrict(h, keep):
    """A history with only the units in `keep` (a set); the scalars (seed, workers, times) as they are."""
    def has(part, key):
        return (part, key) in keep

    s, api = h["store"], h["api"]
    g = dict(h)
    g["intents"] = {t: v for t, v in h["intents"].items() if has("intent", t)}
    g["acks"] = {t: v for t, v in h["acks"].items() if has("ack", t)}
    g["client_ops"] = [o for i, o in enumerate(h["client_ops"]) if has("op", i)]
    g["client_begins"] = [b for i, b in enumerate(h.get("client_begins", [])) if has("begin", i)]
    g["faults"] = [f for i, f in enumerate(h["faults"]) if has("fault", i)]
    g["events"] = [e for i, e in enumerate(h["events"]) if has("event", i)]
    g["store"] = dict(s, sweeps=[x for x in s["sweeps"] if has("sweep", x["id"])],
                      jobs=[x for x in s["jobs"] if has("job", x["id"])],
                      attempts=[x for x in s["attempts"] if has("attempt", x["id"])],
                      ledger=[x for x in s["ledger"] if has("entry", x["id"])],
                      balances={a: v for a, v in s["balances"].items() if has("balance", a)},
                      logs={a: v for a, v in s["logs"].items() if has("slog", a)},
                      outputs={a: v for a, v in s["outputs"].items() if has("sout", a)})
    g["api"] = dict(api, jobs={j: v for j, v in api["jobs"].items() if has("api-job", j)},
                    logs={j: v for j, v in api["logs"].items() if has("api-log", j)},
                    outputs={j: v for j, v in api["outputs"].items() if has("api-out", j)},
                    attempt_txt={j: v for j, v in api["attempt_txt"].items() if has("api-att", j)},
                    workers={w: v for w, v in api.get("workers", {}).items() if has("api-worker", w)},
                    errors=[e for i, e in enumerate(api.get("errors", [])) if has("api-error", i)])
    g["witness"] = {j: v for j, v in h["witness"].items() if has("witness", j)}
    g["presence"] = [p for i, p in enumerate(h["presence"]) if has("presence", i)]
    g["probes"] = [p for i, p in enumerate(h["probes"]) if has("probe", i)]
    g["leftovers"] = [p for i, p in enumerate(h["leftovers"]) if has("leftover", i)]
    g["tmp_left"] = [p for i, p in enumerate(h["tmp_left"]) if has("tmp", i)]
    g["spools"] = {w: (left if has("spool", w) else []) for w, left in h["spools"].items()}
    g["worker_exits"] = {w: v for w, v in h["worker_exits"].items() if has("worker-exit", w)}
    g["nonterminal"] = [j for i, j in enumerate(h.get("nonterminal", [])) if has("nonterminal", i)]
    return g


def concerning(h, x):
    """The slice: the units that name the violation's jobs, submission, attempts or worker, the
    faults and crashes over their span, and the parts with no job to them that the invariant reads."""
    s, api = h["store"], h["api"]
    jobs = set()
    if x.get("job") is not None:
        jobs.add(x["job"])
    if x.get("attempt") is not None:
        jobs |= {a["job_id"] for a in s["attempts"] if a["id"] == x["attempt"]}
    tag = x.get("tag")
    if tag is None:
        for j in s["jobs"]:
            if j["id"] in jobs:
                tag = (workload.parse_job_name(j["name"]) or (None,))[0]
    if tag is not None:
        jobs |= {j["id"] for j in s["jobs"] if (workload.parse_job_name(j["name"]) or (None,))[0] == tag}
    sweeps = {j["sweep_id"] for j in s["jobs"] if j["id"] in jobs}
    if tag in h["acks"]:
        sweeps.add(h["acks"][tag]["sweep_id"])
        jobs |= set(h["acks"][tag]["jobs"])
    attempts = {a["id"] for a in s["attempts"] if a["job_id"] in jobs}
    if x.get("attempt") is not None:
        attempts.add(x["attempt"])
    keep = set()
    if not jobs and tag is None and x.get("attempt") is None:
        return whole_history_slice(h, x)
    keep |= {("intent", tag), ("ack", tag)}
    times = []
    for i, o in enumerate(h["client_ops"]):
        if o.get("tag") == tag or o.get("job") in jobs or o.get("sweep") in sweeps:
            keep.add(("op", i))
            times.append(o["t0"])
    for i, b in enumerate(h.get("client_begins", [])):
        if b.get("tag") == tag or b.get("job") in jobs or b.get("sweep") in sweeps:
            keep.add(("begin", i))
    keep |= {("sweep", sid) for sid in sweeps} | {("job", j) for j in jobs}
    keep |= {("attempt", a) for a in attempts} | {("slog", str(a)) for a in attempts}
    keep |= {("sout", str(a)) for a in attempts}
    for a in s["attempts"]:
        if a["id"] in attempts:
            times += [t / 1000 for t in (a["assigned_at"], a["ended_at"]) if t]
    for e in s["ledger"]:
        if e["attempt"] in attempts or e["reason"] == "grant":
            keep.add(("entry", e["id"]))
    keep |= {("balance", a) for a in s["balances"]}
    for j in jobs:
        keep |= {("api-job", str(j)), ("api-log", str(j)), ("api-out", str(j)), ("api-att", str(j)),
                 ("witness", str(j))}
    lo, hi = (min(times) - 60, max(times) + 60) if times else (float("-inf"), float("inf"))
    for i, f in enumerate(h["faults"]):
        if lo <= f["inject_t"] <= hi or (f["heal_t"] and lo <= f["heal_t"] <= hi):
            keep.add(("fault", i))
    for i, e in enumerate(h["events"]):
        if e["event"] == "unexpected-exit" and lo <= e["t"] <= hi:
            keep.add(("event", i))
    for i, j in enumerate(h.get("nonterminal", [])):
        if j in jobs:
            keep.add(("nonterminal", i))
    return keep


def whole_history_slice(h, x):
    """The slice of a violation that names no job: what its invariant reads."""
    keep = set()
    w = x.get("worker")
    if w is not None:
        index = w.rsplit("w", 1)[-1]
        keep |= {("api-worker", w), ("spool", w.replace("soak-", "")), ("worker-exit", w)}
        keep |= {("presence", i) for i in range(len(h["presence"]))}
        keep |= {("fault", i) for i, f in enumerate(h["faults"])
                 if f["kind"].startswith("worker") and str(f["index"]) == index}
    inv = x["inv"]
    if inv == "left-behind":
        keep |= {("leftover", i) for i in range(len(h["leftovers"]))}
        keep |= {("tmp", i) for i in range(len(h["tmp_left"]))}
    elif inv == "ledger":
        keep |= {("entry", e["id"]) for e in h["store"]["ledger"]} | {("balance", a) for a in h["store"]["balances"]}
        keep |= {("attempt", a["id"]) for a in h["store"]["attempts"]}
    elif inv == "no-crash":
        keep |= {("event", i) for i, e in enumerate(h["events"]) if e["event"] == "unexpected-exit"}
    elif inv == "api":
        keep |= {("api-error", i) for i in range(len(h["api"].get("errors", [])))}
    elif inv == "writes-resume":
        keep |= {("fault", i) for i, f in enumerate(h["faults"]) if f["kind"] == "coordinator-disk-full"}
        keep |= {("op", i) for i, o in enumerate(h["client_ops"]) if o.get("op") == "submit"}
    return keep or None


def ddmin(items, holds, deadline):
    """A subset of `items` (a list) on which holds() is still true, 1-minimal unless the deadline
    passed first: (subset, minimal)."""
    cur = list(items)
    n = 2
    while len(cur) >= 2:
        if time.monotonic() > deadline:
            return cur, False
        size = -(-len(cur) // n)
        for start in range(0, len(cur), size):
            trial = cur[:start] + cur[start + size:]
            if holds(trial):
                cur = trial
                n = max(n - 1, 2)
                break
        else:
            if n >= len(cur):
                break
            n = min(len(cur), n * 2)
    if len(cur) == 1 and holds([]):
        return [], True
    return cur, True


def shrink(h, x, check, budget_s=10.0):
    """The units of a smallest history found on which check() still reports violation `x`
    (same invariant and message): (units, minimal, examined) or None when even the whole history
    does not show it (it cannot happen with a pure check())."""
    deadline = time.monotonic() + budget_s
    examined = [0]

    def holds(subset):
        examined[0] += 1
        g = restrict(h, set(subset))
        return any(v["inv"] == x["inv"] and v["msg"] == x["msg"] for v in check(g))

    everything = units(h)
    start = concerning(h, x)
    if start is not None:
        start = [u for u in everything if u in start]
        if not holds(start):
            start = None
    if start is None:
        if len(everything) > WHOLE_AT_MOST or not holds(everything):
            return None  # too big to search from the whole: the caller shows the events around it
        start = everything
    found, minimal = ddmin(start, holds, deadline)
    return found, minimal, examined[0]


def describe(h, kept):
    """Lines for the units `kept`, in time order (those without a time last), t relative to the load."""
    t0 = h["t_load"]
    s, api = h["store"], h["api"]
    names = {w["id"]: w["name"] for w in s.get("workers", [])}
    timed, state = [], []
    by = {}
    for part, key in kept:
        by.setdefault(part, set()).add(key)
    for tag in by.get("intent", ()):
        i = h["intents"][tag]
        timed.append((i["t"], f"client {i['client']} intends to submit {tag} {i['shape']}"))
    for tag in by.get("ack", ()):
        a = h["acks"][tag]
        timed.append((a["t"], f"submit {tag} acknowledged: sweep {a['sweep_id']} jobs {a['jobs']}"))
    for i in by.get("op", ()):
        o = h["client_ops"][i]
        what = o.get("job", o.get("sweep", o.get("tag", "")))
        timed.append((o["t0"], f"client {o.get('client')} {o.get('op')} {what} -> rc {o.get('rc')} "
                      f"(ended +{o['t1'] - o['t0']:.2f} s) {(o.get('err') or '')[:70]}"
                      + (f" answer {str(o['answer'])[:80]}" if o.get("answer") else "")))
    for i in by.get("begin", ()):
        b = h["client_begins"][i]
        timed.append((b["t0"], f"client {b.get('client')} begins {b.get('op')} "
                      f"{b.get('job', b.get('sweep', b.get('tag', '')))}"))
    for i in by.get("fault", ()):
        f = h["faults"][i]
        healed = f"healed +{f['heal_t'] - f['inject_t']:.1f} s" if f["heal_t"] else "never healed"
        timed.append((f["inject_t"], f"FAULT {f['kind']} #{f['index']} ({healed})"))
    for i in by.get("event", ()):
        e = h["events"][i]
        timed.append((e["t"], "harness: " + e["event"] + " " + " ".join(f"{k}={v}" for k, v in e.items()
                                                                         if k not in ("t", "event"))[:120]))
    for a in s["attempts"]:
        if a["id"] in by.get("attempt", ()):
            w = f"worker {a['worker_id']} ({names.get(a['worker_id'], '?')})"
            timed.append((a["assigned_at"] / 1000, f"job {a['job_id']} attempt {a['id']} placed on {w}"))
            if a["started_at"]:
                timed.append((a["started_at"] / 1000, f"job {a['job_id']} attempt {a['id']} started"))
            if a["ended_at"]:
                timed.append((a["ended_at"] / 1000, f"job {a['job_id']} attempt {a['id']} ended {a['state']}: "
                              f"{(a['reason'] or '')[:60]}"))
            else:
                state.append(f"store: job {a['job_id']} attempt {a['id']} is {a['state']}, never ended")
    for e in s["ledger"]:
        if e["id"] in by.get("entry", ()):
            timed.append((e["at"] / 1000, f"ledger {e['id']}: {e['reason']} {e['amount']} {e['debit']} -> "
                          f"{e['credit']}" + (f" (attempt {e['attempt']})" if e["attempt"] else "")))
    for j, recs in h["witness"].items():
        if j in by.get("witness", ()):
            for a, what, t in recs:
                timed.append((t / 1000, f"job {j} attempt {a} really {what}s (witness)"))
    for i in by.get("presence", ()):
        t, p = h["presence"][i]
        timed.append((t, "prober: " + " ".join(f"{w}={v}" for w, v in sorted(p.items()))))
    for i in by.get("probe", ()):
        t, ok, ms = h["probes"][i]
        timed.append((t, f"prober: GET /v1/jobs {'ok' if ok else 'failed'} in {ms} ms"))
    for x in s["sweeps"]:
        if x["id"] in by.get("sweep", ()):
            state.append(f"store: sweep {x['id']} of {x['job_count']} jobs")
    for x in s["jobs"]:
        if x["id"] in by.get("job", ()):
            state.append(f"store: job {x['id']} {x['name']} (sweep {x['sweep_id']}) {x['state']}, "
                         f"{x['attempts']} attempts")
    for a in sorted(by.get("balance", ()), key=str):
        state.append(f"store: cached balance of {a}: {s['balances'][a]}")
    for a in sorted(by.get("slog", ()), key=str):
        lg = s["logs"][a]
        state.append(f"store: attempt {a}'s log: {len(lg['spans'])} chunks {lg['spans'][:4]}, "
                     f"{len(lg['text'].splitlines())} lines")
    for a in sorted(by.get("sout", ()), key=str):
        o = s["outputs"][a]
        state.append(f"store: attempt {a}'s outputs sha256 {o['sha256'][:12]}, content {o['actual'][:12]}")
    for j in sorted(by.get("api-job", ()), key=str):
        state.append(f"API: job {j} is {api['jobs'][j]['state']}")
    for j in sorted(by.get("api-log", ()), key=str):
        state.append(f"API: job {j}'s log has {len(api['logs'][j].splitlines())} lines")
    for j in sorted(by.get("api-out", ()), key=str):
        state.append(f"API: job {j}'s outputs " + ", ".join(f"{n} {d[:12]}" for n, d in
                                                         sorted(api["outputs"][j].items())))
    for j in sorted(by.get("api-att", ()), key=str):
        state.append(f"API: job {j}'s attempt.txt says {api['attempt_txt'][j]}")
    for w in sorted(by.get("api-worker", ()), key=str):
        state.append(f"API: worker {w} is {api['workers'][w]} at the end")
    for i in by.get("api-error", ()):
        state.append(f"API: {api['errors'][i]}")
    for i in by.get("leftover", ()):
        state.append(f"after the workers stopped: process {h['leftovers'][i][0]} {h['leftovers'][i][1][:100]}")
    for i in by.get("tmp", ()):
        state.append(f"TMPDIR holds {h['tmp_left'][i]}")
    for w in by.get("spool", ()):
        state.append(f"work dir {w} holds {h['spools'][w][:3]}")
    for w in by.get("worker-exit", ()):
        state.append(f"worker {w} {'exited' if h['worker_exits'][w] else 'did not exit'} on SIGTERM")
    for i in by.get("nonterminal", ()):
        state.append(f"job {h['nonterminal'][i]} not ended when the drain's bound ran out")
    timed.sort(key=lambda x: x[0])
    return [f"{t - t0:9.2f}s  {text}" for t, text in timed] + [f"{'at end':>10}  {text}" for text in state]
