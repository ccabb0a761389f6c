"""The soak's checker: reads a run's history and lists the invariants it violates.

collect_api() and collect() gather the history into one JSON-able dict (saved as history.json in
the run folder); check() is a pure function of that dict, so that the self-test can doctor a
history and see each doctoring reported. table() prints the one table of issue 46.

The history's parts and where each comes from:
  intents, acks, client_ops  the clients' journals (clients/cN/journal.jsonl: an intent is written,
                             fsync'ed, before each `gpupool submit`) and acknowledgement files
                             (clients/cN/acks/TAG.json: submit's --json stdout, written by gpupool
                             itself, so a client killed after submit printed still counts as
                             acknowledged, and one killed before does not)
  faults, events             the harness's events.jsonl
  probes, presence           the harness's prober (GET /v1/jobs?limit=1 every 250 ms, GET /v1/workers
                             every second)
  api                        the API after the drain: every job of the team, its attempts, logs,
                             outputs
  store                      the SQLite file, read-only, after the coordinator stopped: sweeps,
                             jobs, attempts (times), log chunks, output digests, the ledger
  spools, tmp, leftovers     the workers' work dirs, the run's TMPDIR, /proc
  witness                    what each job appended when it really started and ended
"""

import collections
import copy
import hashlib
import io
import json
import os
import sqlite3
import statistics
import sys
import tarfile
import urllib.error
import urllib.request

import workload

TERMINAL = ("succeeded", "failed", "cancelled")
ONLINE_WITHIN_S = 60.0  # a worker must be online this long after its fault ends
AFTER_FAULT_S = 5.0  # a probe this soon after a fault ended counts as "during faults"
WRITES_RESUME_S = 60.0  # after a coordinator-disk-full ends, a submit must succeed this soon
SHRINK_AT_MOST = 8  # violations whose history is shrunk (the others get the events around them)
SHRINK_BUDGET_S = 15.0  # seconds of search per violation
SIM_TEAM = "loadgen"  # soak.py's: the simulated workers' team
FAULT_DETAILS = ("loss_percent", "step_s", "filled_bytes", "free_after", "filled_inodes", "free_inodes_after",
                 "active")  # what an injection recorded ("active": it hit the coordinator that served)


# ----------------------------------------------------------------------------- collecting
def _get(url, token, path, raw=False, timeout=30):
    req = urllib.request.Request(url + path, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        body = r.read()
    return body if raw else json.loads(body)


def collect_api(url, member, admin, acked_ids):
    """Every job of the team as the API shows it, with logs and outputs of the ended ones."""
    out = {"jobs": {}, "logs": {}, "outputs": {}, "attempt_txt": {}, "errors": []}
    try:
        listing = _get(url, member, "/v1/jobs")["jobs"]
    except (urllib.error.URLError, OSError, ValueError) as e:
        out["errors"].append(f"GET /v1/jobs: {e}")
        return out
    for j in listing:
        jid = j["id"]
        try:
            view = _get(url, member, f"/v1/jobs/{jid}")
        except (urllib.error.URLError, OSError, ValueError) as e:
            out["errors"].append(f"GET /v1/jobs/{jid}: {e}")
            continue
        out["jobs"][str(jid)] = {"id": jid, "name": view["name"], "sweep_id": view["sweep_id"],
                                 "state": view["state"], "retries": view.get("retries", 0),
                                 "attempts": [{k: a.get(k) for k in ("id", "state", "worker", "assigned_at",
                                                                        "started_at", "ended_at", "retry")}
                                              for a in view.get("attempt_history", [])]}
        if view["state"] not in TERMINAL or not view.get("attempt_history"):
            continue
        try:
            text, offset = "", 0
            for _ in range(1000):
                page = _get(url, member, f"/v1/jobs/{jid}/logs?offset={offset}")
                if not page["data"]:
                    break
                text += page["data"]
                offset = page["next_offset"]
            out["logs"][str(jid)] = text
        except (urllib.error.URLError, OSError, ValueError) as e:
            out["errors"].append(f"logs of job {jid}: {e}")
        if view["state"] == "succeeded":
            try:
                tar = _get(url, member, f"/v1/jobs/{jid}/outputs", raw=True, timeout=60)
                files = {}
                with tarfile.open(fileobj=io.BytesIO(tar)) as t:
                    for m in t.getmembers():
                        if m.isfile():
                            data = t.extractfile(m).read()
                            files[m.name.lstrip("./")] = hashlib.sha256(data).hexdigest()
                            if m.name.lstrip("./") == "attempt.txt":
                                out["attempt_txt"][str(jid)] = data.decode(errors="replace").strip()
                out["outputs"][str(jid)] = files
            except (urllib.error.URLError, OSError, ValueError, tarfile.TarError) as e:
                out["errors"].append(f"outputs of job {jid}: {e}")
    return out


def acknowledged(run_dir):
    """{tag: {sweep_id, jobs, t, client}} from the clients' acknowledgement files."""
    acks = {}
    base = os.path.join(run_dir, "clients")
    for c in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        d = os.path.join(base, c, "acks")
        if not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            if not name.endswith(".json"):
                continue
            path = os.path.join(d, name)
            try:
                body = json.loads(open(path).read())
                acks[name[:-5]] = {"sweep_id": body["sweep_id"], "jobs": body["jobs"], "t": os.path.getmtime(path),
                                   "client": c}
            except (ValueError, KeyError, TypeError, OSError):
                continue
    return acks


def _journals(run_dir):
    intents, ops, begins = {}, [], []
    base = os.path.join(run_dir, "clients")
    for c in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        path = os.path.join(base, c, "journal.jsonl")
        if not os.path.exists(path):
            continue
        for line in open(path):
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # the last line of a client killed while writing it
            if rec.get("phase") == "intent":
                intents[rec["tag"]] = {"shape": rec["shape"], "t": rec["t"], "client": rec["client"]}
            elif rec.get("phase") == "begin":
                begins.append(rec)
            else:
                ops.append(rec)
    return intents, ops, begins


def _events(run_dir):
    events, faults_done, open_faults = [], [], {}
    for line in open(os.path.join(run_dir, "events.jsonl")):
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        events.append(ev)
        if ev["event"] == "fault-injected":
            open_faults[(ev["kind"], ev["index"])] = {"kind": ev["kind"], "index": ev["index"], "inject_t": ev["t"],
                                                      "heal_t": None}
            for k in FAULT_DETAILS:
                if k in ev:
                    open_faults[(ev["kind"], ev["index"])][k] = ev[k]
        elif ev["event"] == "fault-healed":
            f = open_faults.pop((ev["kind"], ev["index"]), None)
            if f is not None:
                f["heal_t"] = ev.get("begun_at", ev["t"])
                faults_done.append(f)
    faults_done.extend(open_faults.values())
    faults_done.sort(key=lambda f: f["inject_t"])
    return events, faults_done


def collect_store(db_path):
    c = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    store = {"sweeps": [], "jobs": [], "attempts": [], "ledger": [], "balances": {}, "logs": {}, "outputs": {}}
    for sid, n in c.execute("SELECT id, job_count FROM sweeps ORDER BY id"):
        store["sweeps"].append({"id": sid, "job_count": n})
    store["sim_jobs"] = {}  # the load generator's (its team's): job id -> state; checked by no-overlap and ledger
    for jid, sid, spec, state, attempts, retries, team in c.execute(
            "SELECT j.id, j.sweep_id, j.spec, j.state, j.attempts, j.retries, t.name FROM jobs j "
            "JOIN teams t ON t.id = j.team_id ORDER BY j.id"):
        if team == SIM_TEAM:
            store["sim_jobs"][str(jid)] = state
            continue
        store["jobs"].append({"id": jid, "sweep_id": sid, "name": json.loads(spec).get("name", ""), "state": state,
                              "attempts": attempts, "retries": retries})
    for row in c.execute("SELECT id, job_id, worker_id, state, assigned_at, started_at, ended_at, exit_code, "
                         "reason, price_micro_per_hour, voided_at, retry FROM attempts ORDER BY id"):
        store["attempts"].append(dict(zip(("id", "job_id", "worker_id", "state", "assigned_at", "started_at",
                                           "ended_at", "exit_code", "reason", "price", "voided_at", "retry"), row)))
    store["workers"] = [{"id": i, "name": n} for i, n in c.execute("SELECT id, name FROM workers ORDER BY id")]
    for row in c.execute("SELECT id, at, debit, credit, amount, reason, attempt_id, payer_team_id "
                         "FROM ledger_entries ORDER BY id"):
        store["ledger"].append(dict(zip(("id", "at", "debit", "credit", "amount", "reason", "attempt", "payer"), row)))
    for account, balance in c.execute("SELECT account, balance FROM account_balances"):
        store["balances"][account] = balance
    chunks = collections.defaultdict(list)
    for aid, off, data in c.execute("SELECT attempt_id, byte_offset, data FROM log_chunks ORDER BY attempt_id, "
                                    "byte_offset"):
        chunks[aid].append((off, bytes(data)))
    for aid, parts in chunks.items():
        spans = [[off, len(data)] for off, data in parts]
        store["logs"][str(aid)] = {"spans": spans, "text": b"".join(d for _, d in parts).decode(errors="replace")}
    for aid, sha, data in c.execute("SELECT attempt_id, sha256, data FROM outputs"):
        store["outputs"][str(aid)] = {"sha256": sha, "actual": hashlib.sha256(bytes(data)).hexdigest()}
    c.close()
    return store


def collect_spools(run_dir):
    """What each worker's work dir holds after it stopped: undelivered attempts, temporary files."""
    spools = {}
    base = os.path.join(run_dir, "workers")
    for w in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        root = os.path.join(base, w)
        left = []
        attempts = os.path.join(root, "attempts")
        if os.path.isdir(attempts):
            left += [f"attempts/{a} (not delivered)" for a in os.listdir(attempts)]
        sessions = os.path.join(root, "process-runtime", "sessions")
        if os.path.exists(sessions) and os.path.getsize(sessions) > 0:
            left.append("process-runtime/sessions (not empty: jobs it thinks still run)")
        spare = os.path.join(root, "spare-attempts")
        if os.path.isdir(spare):
            for s in os.listdir(spare):
                for sub in ("work", "outputs"):
                    p = os.path.join(spare, s, sub)
                    if os.path.isdir(p) and os.listdir(p):
                        left.append(f"spare-attempts/{s}/{sub} (not emptied)")
        for dirpath, dirnames, filenames in os.walk(root):
            rel = os.path.relpath(dirpath, root)
            if rel.startswith("cache"):
                continue
            for name in filenames + dirnames:
                low = name.lower()
                if ".tmp" in low or low.startswith("tmp") or ".incomplete" in low or ".partial" in low:
                    left.append(os.path.join(rel, name))
        if os.path.exists(os.path.join(root, "control.sock")):
            left.append("control.sock (the worker exited without removing it)")
        spools[w] = left
    return spools


def collect_witness(run_dir):
    out = {}
    d = os.path.join(run_dir, "witness")
    for name in os.listdir(d) if os.path.isdir(d) else []:
        recs = []
        for line in open(os.path.join(d, name)):
            parts = line.split()
            if len(parts) == 4 and parts[3].isdigit():
                recs.append([int(parts[1]), parts[2], int(parts[3])])
        out[name] = recs
    return out


def collect_unspooled(run_dir):
    """From the workers' logs: the attempts a worker went on with although it could not write
    them to its spool (`cannot write .../attempts/N/assignment.json`), per worker."""
    out = {}
    d = os.path.join(run_dir, "logs")
    for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        if not name.endswith(".stderr") or not name.startswith("w"):
            continue
        found = set()
        with open(os.path.join(d, name), errors="replace") as f:
            for line in f:
                if "cannot write" in line and "/assignment.json" in line:
                    at = line.find("/attempts/")
                    if at >= 0:
                        found.add(line[at + len("/attempts/"):].split("/", 1)[0])
        if found:
            out["soak-" + name[:-len(".stderr")]] = sorted(found, key=lambda a: int(a) if a.isdigit() else 0)
    return out


def collect(run_dir, args, t_load, t_load_end, api, probes, presence, leftovers, worker_exits, coord_clean,
            nonterminal, drained_s):
    intents, ops, begins = _journals(run_dir)
    events, faults_done = _events(run_dir)
    tmp = os.path.join(run_dir, "tmp")
    return {
        "seed": args.seed, "minutes": args.minutes, "workers": args.workers, "clients": args.clients,
        "store_kind": getattr(args, "store", "sqlite"),
        "t_load": t_load, "t_load_end": t_load_end, "drained_s": drained_s, "nonterminal": nonterminal,
        "intents": intents, "acks": acknowledged(run_dir), "client_ops": ops, "client_begins": begins,
        "events": events, "faults": faults_done, "probes": probes, "presence": presence,
        "api": api, "store": collect_store(os.path.join(run_dir, "coord", "pool.db")),
        "spools": collect_spools(run_dir),
        "tmp_left": tmp_left(tmp),
        "leftovers": [list(p) for p in leftovers], "worker_exits": worker_exits, "coord_clean": coord_clean,
        "witness": collect_witness(run_dir), "unspooled": collect_unspooled(run_dir),
    }


def tmp_left(tmp):
    """What the pool's processes left in their TMPDIR. The coordinators' spool parent
    (gpupool-spool-<uid>, util::ClaimedDir) is shared and stays; what is in it is listed instead:
    a stopped coordinator removes its own directory, and one killed mid-upload has its directory
    removed by the next coordinator that starts."""
    if not os.path.isdir(tmp):
        return []
    left = []
    for name in sorted(os.listdir(tmp)):
        path = os.path.join(tmp, name)
        if name.startswith("gpupool-spool-") and os.path.isdir(path) and not os.path.islink(path):
            left += [f"{name}/{inner}" for inner in sorted(os.listdir(path))]
        else:
            left.append(name)
    return left


# ----------------------------------------------------------------------------- checking
def check(h):
    """Every invariant violation in history `h`: [{inv, msg, job?, tag?, attempt?, worker?}]."""
    v = []

    def bad(inv, msg, **ctx):
        d = {"inv": inv, "msg": msg}
        d.update(ctx)
        v.append(d)

    store = h["store"]
    api = h["api"]
    jobs_by_id = {j["id"]: j for j in store["jobs"]}
    jobs_by_sweep = collections.defaultdict(list)
    for j in store["jobs"]:
        jobs_by_sweep[j["sweep_id"]].append(j)
    attempts_by_job = collections.defaultdict(list)
    for a in store["attempts"]:
        attempts_by_job[a["job_id"]].append(a)
    intents, acks = h["intents"], h["acks"]

    # 1. Every acknowledged job present exactly once; every submission at most once; nothing else.
    sweeps_by_tag = collections.defaultdict(set)
    names = collections.Counter()
    for j in store["jobs"]:
        names[j["name"]] += 1
        parsed = workload.parse_job_name(j["name"])
        if parsed is None:
            bad("exactly-once", f"job {j['id']} `{j['name']}` is no soak job", job=j["id"])
            continue
        sweeps_by_tag[parsed[0]].add(j["sweep_id"])
        if parsed[0] not in intents:
            bad("exactly-once", f"job {j['id']} `{j['name']}` belongs to no submission a client made",
                job=j["id"], tag=parsed[0])
    for name, n in names.items():
        if n > 1:
            tag = (workload.parse_job_name(name) or ("?",))[0]
            bad("exactly-once", f"job name `{name}` is in the store {n} times", tag=tag)
    for tag, sweeps in sweeps_by_tag.items():
        if len(sweeps) > 1:
            bad("exactly-once", f"submission {tag} is in the store as {len(sweeps)} sweeps {sorted(sweeps)}", tag=tag)
    for tag, ack in acks.items():
        want = intents.get(tag, {}).get("shape", {}).get("jobs")
        got = sorted(j["id"] for j in jobs_by_sweep.get(ack["sweep_id"], []))
        if sorted(ack["jobs"]) != got:
            bad("exactly-once", f"submission {tag} was acknowledged as sweep {ack['sweep_id']} jobs {ack['jobs']}, "
                f"the store has {got}", tag=tag)
        if want is not None and len(ack["jobs"]) != want:
            bad("exactly-once", f"submission {tag} had {want} jobs, acknowledged {len(ack['jobs'])}", tag=tag)
        for jid in ack["jobs"]:
            if jid not in jobs_by_id:
                bad("exactly-once", f"acknowledged job {jid} ({tag}) is not in the store", job=jid, tag=tag)
            elif str(jid) not in api["jobs"]:
                bad("exactly-once", f"acknowledged job {jid} ({tag}) is not in the API's list", job=jid, tag=tag)
    for j in store["jobs"]:
        seen = api["jobs"].get(str(j["id"]))
        if seen is not None and seen["state"] != j["state"]:
            bad("api-agrees", f"job {j['id']}: the API said {seen['state']}, the store says {j['state']}", job=j["id"])
    for jid in h.get("nonterminal", []):
        bad("drained", f"acknowledged job {jid} had not ended when the drain's bound ran out", job=jid)

    # 2. No two attempts of a job overlapping in time (the store's times).
    for jid, atts in attempts_by_job.items():
        atts = sorted(atts, key=lambda a: (a["assigned_at"], a["id"]))
        for a, b in zip(atts, atts[1:]):
            if a["ended_at"] is None:
                bad("no-overlap", f"job {jid}: attempt {a['id']} never ended but attempt {b['id']} was placed",
                    job=jid, attempt=a["id"])
            elif a["ended_at"] > b["assigned_at"]:
                bad("no-overlap", f"job {jid}: attempt {a['id']} ended at {a['ended_at']}, after attempt {b['id']} "
                    f"was placed at {b['assigned_at']} ({a['ended_at'] - b['assigned_at']} ms overlap)",
                    job=jid, attempt=b["id"])
        live = [a for a in atts if a["state"] in ("assigned", "running")]
        if len(live) > 1:
            bad("no-overlap", f"job {jid} has {len(live)} live attempts", job=jid)

    # 3. Every succeeded job's outputs present and intact; 4. every log line present once.
    for j in store["jobs"]:
        parsed = workload.parse_job_name(j["name"])
        if parsed is None:
            continue
        tag, k = parsed
        shape = intents.get(tag, {}).get("shape")
        atts = sorted(attempts_by_job.get(j["id"], []), key=lambda a: a["id"])
        for a in atts:  # any attempt's stored log: contiguous chunks, no line twice
            log = store["logs"].get(str(a["id"]))
            if log is None:
                continue
            end = 0
            for off, n in log["spans"]:
                if off != end:
                    bad("logs-once", f"job {j['id']} attempt {a['id']}: log chunk at byte {off}, expected {end} "
                        f"({'gap' if off > end else 'overlap'})", job=j["id"], attempt=a["id"])
                end = off + n
            lines = [ln for ln in log["text"].split("\n") if ln]
            dup = [ln for ln, n in collections.Counter(lines).items() if n > 1]
            if dup:
                bad("logs-once", f"job {j['id']} attempt {a['id']}: lines logged twice: {dup[:3]}",
                    job=j["id"], attempt=a["id"])
        if j["state"] != "succeeded" or shape is None:
            continue
        won = [a for a in atts if a["state"] == "succeeded" and a["voided_at"] is None]
        if len(won) != 1 or atts[-1]["state"] != "succeeded":
            bad("outputs", f"job {j['id']} succeeded with {len(won)} succeeded attempts (last: "
                f"{atts[-1]['state'] if atts else 'none'})", job=j["id"])
            continue
        aid = won[0]["id"]
        want_log = [f"soak {tag} k={k} attempt {aid}"] + workload.expected_lines(tag, k)
        got_log = api["logs"].get(str(j["id"]))
        if got_log is None:
            bad("logs-once", f"job {j['id']}: no log from the API", job=j["id"], attempt=aid)
        elif got_log.split("\n") != want_log + [""]:
            missing = [ln for ln in want_log if ln not in got_log.split("\n")]
            bad("logs-once", f"job {j['id']} attempt {aid}: the API's log is not the job's lines once each "
                f"(missing {missing[:2]}, got {len(got_log.splitlines())} lines, want {len(want_log)})",
                job=j["id"], attempt=aid)
        stored = store["logs"].get(str(aid))
        if stored is None or stored["text"] != "\n".join(want_log) + "\n":
            bad("logs-once", f"job {j['id']} attempt {aid}: the stored log differs from the job's lines",
                job=j["id"], attempt=aid)
        files = api["outputs"].get(str(j["id"]))
        if files is None:
            bad("outputs", f"job {j['id']}: no outputs from the API", job=j["id"], attempt=aid)
        else:
            for name, digest in workload.expected_outputs(tag, k, shape.get("big")).items():
                if files.get(name) is None:
                    bad("outputs", f"job {j['id']}: output {name} missing", job=j["id"], attempt=aid)
                elif files[name] != digest:
                    bad("outputs", f"job {j['id']}: output {name} corrupt (sha256 {files[name][:12]}, want "
                        f"{digest[:12]})", job=j["id"], attempt=aid)
            if api["attempt_txt"].get(str(j["id"])) != str(aid):
                bad("outputs", f"job {j['id']}: attempt.txt says {api['attempt_txt'].get(str(j['id']))!r}, the "
                    f"succeeded attempt is {aid} (another attempt's outputs)", job=j["id"], attempt=aid)
        out = store["outputs"].get(str(aid))
        if out is not None and out["sha256"] != out["actual"]:
            bad("outputs", f"job {j['id']} attempt {aid}: stored outputs do not match their sha256", job=j["id"],
                attempt=aid)
    for op in h["client_ops"]:
        if op.get("op") == "fetch" and op.get("mismatch"):
            bad("outputs", f"client {op['client']} fetched {op['tag']}: {op['mismatch'][:3]}", tag=op["tag"])

    # 4b. A cancel or a retry that was acknowledged took effect.
    sweep_of = {j["id"]: j["sweep_id"] for j in store["jobs"]}
    retry_begins = collections.defaultdict(list)  # sweep -> times a retry of it began
    for b in h.get("client_begins", []):
        if b.get("op") == "retry" and b.get("sweep") is not None:
            retry_begins[b["sweep"]].append(b["t0"])
    cancel_begins = collections.defaultdict(list)  # job or ("sweep", id) -> times a cancel of it began
    for b in h.get("client_begins", []):
        if b.get("op") == "cancel":
            cancel_begins[b["job"] if b.get("job") is not None else ("sweep", b.get("sweep"))].append(b["t0"])
    for op in h["client_ops"]:
        if op.get("op") == "cancel" and op.get("rc") == 0:
            if op.get("job") is not None:
                targets = [op["job"]] if op["job"] in (op.get("answer") or {}).get("cancelled", [op["job"]]) else []
            else:
                targets = [j["id"] for j in jobs_by_sweep.get(op.get("sweep"), [])]
            for jid in targets:
                sid = sweep_of.get(jid)
                if any(t >= op["t0"] for t in retry_begins.get(sid, [])):
                    continue  # retried since: it may run again
                late = [a for a in attempts_by_job.get(jid, []) if a["state"] in ("succeeded", "failed")
                        and a["ended_at"] is not None and a["ended_at"] > op["t1"] * 1000]
                for a in late:
                    bad("cancel-honoured", f"job {jid}: cancel acknowledged at {op['t1']:.3f}, yet attempt {a['id']} "
                        f"ended {a['state']} {a['ended_at'] / 1000 - op['t1']:.3f} s later (no retry since)",
                        job=jid, attempt=a["id"], tag=op.get("tag"))
        if op.get("op") == "retry" and op.get("rc") == 0:
            for r in (op.get("answer") or {}).get("jobs", []):
                jid, run = r.get("id"), r.get("retry")
                if any(a["retry"] == run for a in attempts_by_job.get(jid, []) if "retry" in a):
                    continue
                if "retry" not in next(iter(store["attempts"]), {"retry": 0}):
                    continue  # a history without the attempts' runs
                cancelled_since = any(t >= op["t0"] for t in cancel_begins.get(jid, []) +
                                      cancel_begins.get(("sweep", sweep_of.get(jid)), []))
                if cancelled_since:
                    continue  # cancelled (perhaps while queued, with no attempt) and maybe retried again
                bad("retry-honoured", f"job {jid}: retry {run} acknowledged at {op['t1']:.3f}, but no attempt of "
                    f"that run (final state {jobs_by_id.get(jid, {}).get('state')})", job=jid, tag=op.get("tag"))

    # 5. The ledger: balanced after every entry, each attempt held/charged/released once, every
    #    hold of an ended attempt released, charges within what the attempt ran, no team overdrawn.
    ledger_violations(store, bad)

    # 6. Nothing left behind.
    for pid, cmd in h["leftovers"]:
        bad("left-behind", f"process {pid} still runs after the workers stopped: {cmd[:160]}")
    for name in h["tmp_left"]:
        bad("left-behind", f"temporary file or folder left in TMPDIR: {name}")
    for w, left in h["spools"].items():
        for item in left:
            bad("left-behind", f"worker {w}: {item}", worker=w)

    # 7. Every worker back online after its faults, and at the end.
    for i in range(h["workers"]):
        name = f"soak-w{i}"
        if h["api"].get("workers", {}).get(name) != "online":
            bad("online", f"worker {name} is {h['api'].get('workers', {}).get(name)!r} at the end, not online",
                worker=name)
    for f in h["faults"]:
        if f["kind"].startswith("worker") and f["heal_t"] is not None:
            rec = recovery(h, f)
            if rec is None:
                bad("online", f"worker soak-w{f['index']} not online within {ONLINE_WITHIN_S:.0f} s of the end "
                    f"of its {f['kind']}", worker=f"soak-w{f['index']}", t=f["heal_t"])

    # 7b. A coordinator whose disk was full takes writes again once there is room, without a restart.
    for f in h["faults"]:
        if f["kind"] != "coordinator-disk-full" or f["heal_t"] is None:
            continue
        w = disk_full_writes(h, f)
        if w["tried_after"] and (w["ok_after_s"] is None or w["ok_after_s"] > WRITES_RESUME_S):
            first = "never" if w["ok_after_s"] is None else f"after {w['ok_after_s']:.1f} s"
            bad("writes-resume", f"no submit succeeded within {WRITES_RESUME_S:.0f} s of the end of the "
                f"coordinator-disk-full injected at {f['inject_t'] - h['t_load']:.1f} s ({w['tried_after']} tried "
                f"since; the first ok: {first})", t=f["heal_t"])

    # 8. No pool process exits by itself.
    for ev in h["events"]:
        if ev["event"] == "unexpected-exit":
            bad("no-crash", f"{ev['target']} {ev.get('index', '')} exited by itself (status {ev.get('rc')})",
                t=ev["t"])
    for w, clean in h["worker_exits"].items():
        if not clean:
            bad("no-crash", f"worker {w} did not exit within 30 s of SIGTERM at the end", worker=w)
    if not h["coord_clean"]:
        bad("no-crash", "a coordinator did not exit within 30 s of SIGTERM at the end")
    for e in h["api"].get("errors", []):
        bad("api", f"reading the history through the API failed: {e}")
    return v


def ledger_violations(store, bad):
    atts = {a["id"]: a for a in store["attempts"]}
    bal = collections.Counter()
    per = collections.defaultdict(lambda: collections.Counter())  # attempt -> reason -> count / amounts
    escrow = collections.Counter()
    for e in store["ledger"]:
        if e["amount"] <= 0:
            bad("ledger", f"entry {e['id']} moves {e['amount']}")
        bal[e["debit"]] -= e["amount"]
        bal[e["credit"]] += e["amount"]
        if sum(bal.values()) != 0:
            bad("ledger", f"after entry {e['id']} the accounts sum to {sum(bal.values())}")
        aid = e["attempt"]
        r = e["reason"]
        if r in ("hold", "charge", "fee", "release"):
            if aid is None:
                bad("ledger", f"{r} entry {e['id']} names no attempt")
                continue
            per[aid][r] += 1
            per[aid][r + "_amount"] += e["amount"]
            if r == "hold":
                if e["credit"] != "escrow" or not e["debit"].startswith("team:"):
                    bad("ledger", f"hold entry {e['id']} moves {e['debit']} -> {e['credit']}", attempt=aid)
                escrow[aid] += e["amount"]
            else:
                if e["debit"] != "escrow":
                    bad("ledger", f"{r} entry {e['id']} does not come from escrow", attempt=aid)
                escrow[aid] -= e["amount"]
                if escrow[aid] < 0:
                    bad("ledger", f"attempt {aid}'s escrow goes negative ({escrow[aid]}) at entry {e['id']}",
                        attempt=aid, job=atts.get(aid, {}).get("job_id"))
            if per[aid][r] > 1:
                what = {"hold": "held", "charge": "charged", "fee": "charged a fee", "release": "released"}[r]
                bad("ledger", f"attempt {aid} {what} twice (entry {e['id']})", attempt=aid,
                    job=atts.get(aid, {}).get("job_id"))
        if e["debit"].startswith("team:") and bal[e["debit"]] < 0 and r in ("hold",):
            bad("ledger", f"team account {e['debit']} overdrawn to {bal[e['debit']]} by entry {e['id']}",
                attempt=aid)
    if sum(bal.values()) != 0:
        bad("ledger", f"the accounts sum to {sum(bal.values())}")
    for account in set(bal) | set(store["balances"]):
        if bal.get(account, 0) != store["balances"].get(account, 0):
            bad("ledger", f"account {account}: cached balance {store['balances'].get(account, 0)}, the entries "
                f"sum to {bal.get(account, 0)}")
    live_escrow = 0
    for aid, a in atts.items():
        c = per.get(aid, collections.Counter())
        ended = a["ended_at"] is not None
        if ended and escrow[aid] != 0:
            bad("ledger", f"attempt {aid} ({a['state']}) ended with {escrow[aid]} still held", attempt=aid,
                job=a["job_id"])
        if not ended:
            live_escrow += escrow[aid]
        charged = c["charge_amount"] + c["fee_amount"]
        if a["state"] == "lost" and charged:
            bad("ledger", f"attempt {aid} was lost but charged {charged}", attempt=aid, job=a["job_id"])
        if ended and c["hold"]:
            runtime = (a["ended_at"] - a["started_at"]) if a["started_at"] is not None else 0
            cost = max(0, a["price"] * runtime // 3_600_000) if runtime > 0 else 0
            cap = min(cost, c["hold_amount"])
            if charged > cap:
                bad("ledger", f"attempt {aid} charged {charged}, more than it ran for ({cap})", attempt=aid,
                    job=a["job_id"])
            elif a["state"] in ("succeeded", "failed") and a["voided_at"] is None and charged != cap:
                bad("ledger", f"attempt {aid} ({a['state']}) charged {charged}, its runtime costs {cap}",
                    attempt=aid, job=a["job_id"])
    if bal.get("escrow", 0) != live_escrow:
        bad("ledger", f"escrow holds {bal.get('escrow', 0)}, the live attempts' holds sum to {live_escrow}")


def recovery(h, f):
    """Seconds from the end of a worker fault until the coordinator reports the worker online."""
    name = f"soak-w{f['index']}"
    later = [g["inject_t"] for g in h["faults"] if g["index"] == f["index"] and g["kind"].startswith("worker")
             and g["inject_t"] > f["inject_t"]]
    cut = min(later) if later else float("inf")  # the worker's next fault ends the measure
    for t, presence in h["presence"]:
        if t >= cut:
            return -1.0  # not measured: faulted again before it came back
        if t >= f["heal_t"] and presence.get(name) in ("online", "paused"):
            return t - f["heal_t"]
        if t > f["heal_t"] + ONLINE_WITHIN_S:
            break
    if not h["presence"] or h["presence"][-1][0] < f["heal_t"] + ONLINE_WITHIN_S:
        return -1.0  # the prober stopped before the bound: not a violation, not measured
    return None


def disk_full_writes(h, f):
    """The clients' writes around a coordinator-disk-full: submits, cancels and retries begun
    during it, ok and not; how long after its end the first submit succeeded; how many were tried
    in the WRITES_RESUME_S after its end."""
    heal = f["heal_t"] if f["heal_t"] is not None else h["t_load_end"]
    out = {"ok": collections.Counter(), "ok_later": collections.Counter(), "refused": collections.Counter(),
           "errors": collections.Counter(), "ok_after_s": None, "tried_after": 0}
    for o in h["client_ops"]:
        if o.get("op") not in ("submit", "cancel", "retry"):
            continue
        if f["inject_t"] <= o["t0"] <= heal:
            if o.get("rc") == 0:
                out["ok" if o["t1"] <= heal else "ok_later"][o["op"]] += 1
            else:
                out["refused"][o["op"]] += 1
                out["errors"][(o.get("err") or "")[:60]] += 1
        if o.get("op") == "submit" and o["t0"] >= heal:
            if o["t0"] <= heal + WRITES_RESUME_S:
                out["tried_after"] += 1
            if o.get("rc") == 0 and (out["ok_after_s"] is None or o["t0"] - heal < out["ok_after_s"]):
                out["ok_after_s"] = o["t0"] - heal
    return out


def is_pool_fault(f):
    """A fault of a coordinator or of the database under them (the PostgreSQL variant)."""
    return f["kind"].startswith("coordinator") or f["kind"].startswith("postgres")


def takeover(h, f):
    """Seconds from a fault on the active coordinator (PostgreSQL variant) until the API answered
    again, through the other coordinator or the same one healed; None if it never did."""
    for t, ok, _ms in h["probes"]:
        if t > f["inject_t"] and ok:
            return t - f["inject_t"]
    return None


def coordinator_recovery(h, f):
    """Seconds from the end of a coordinator fault until the API answers again."""
    for t, ok, _ms in h["probes"]:
        if t >= f["heal_t"] and ok:
            return t - f["heal_t"]
    return None


# ----------------------------------------------------------------------------- the table
def _pct(values, p):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100.0 * (len(values) - 1))))]


def in_fault(h, t):
    for f in h["faults"]:
        end = (f["heal_t"] or h["t_load_end"]) + AFTER_FAULT_S
        if f["inject_t"] <= t <= end:
            return True
    return False


def table(h, violations):
    rows = []

    def row(k, val):
        rows.append((k, str(val)))

    api_jobs = h["api"]["jobs"]
    acked = {j for a in h["acks"].values() for j in a["jobs"]}
    states = collections.Counter(api_jobs[str(j)]["state"] for j in acked if str(j) in api_jobs)
    row("seed", h["seed"])
    row("run length (load)", f"{h['t_load_end'] - h['t_load']:.0f} s, then drained in {h['drained_s']:.0f} s")
    pg = h.get("store_kind") == "postgres"
    row("pool", ("2 coordinators (active and standby) on one PostgreSQL 15" if pg else "1 coordinator (SQLite)") +
        f", {h['workers']} workers (process runtime), {h['clients']} clients")
    submits = [o for o in h["client_ops"] if o.get("op") == "submit"]
    failed = {s.get("tag") for s in submits if s.get("rc") != 0} - set(h["acks"])
    cut = set(h["intents"]) - set(h["acks"]) - failed
    row("submissions (sweeps)", f"{len(h['intents'])} attempted, {len(h['acks'])} acknowledged, {len(failed)} "
        f"failed (the command gave up or timed out), {len(cut)} cut by a client kill before acknowledging")
    row("jobs submitted (in the store)", len(h["store"]["jobs"]))
    row("jobs acknowledged", len(acked))
    row("jobs completed", f"{sum(states[s] for s in TERMINAL)} ({states['succeeded']} succeeded, "
        f"{states['failed']} failed, {states['cancelled']} cancelled)")
    sim = h["store"].get("sim_jobs", {})
    att = collections.Counter(a["state"] for a in h["store"]["attempts"] if str(a["job_id"]) not in sim)
    row("attempts", f"{sum(att.values())} (" + ", ".join(f"{n} {s}" for s, n in sorted(att.items())) + ")")
    lg = next((e for e in h["events"] if e["event"] == "loadgen-ended"), None)
    if lg is not None or sim:
        sim_att = collections.Counter(a["state"] for a in h["store"]["attempts"] if str(a["job_id"]) in sim)
        req = (lg or {}).get("requests") or {}
        row("simulated workers (load generator)",
            f"{(lg or {}).get('registered', '?')} registered; {len(sim)} jobs ("
            + ", ".join(f"{n} {s}" for s, n in sorted(collections.Counter(sim.values()).items())) + "), "
            f"{sum(sim_att.values())} attempts (" + ", ".join(f"{n} {s}" for s, n in sorted(sim_att.items())) + "); "
            + (f"{req['requests']} requests, {req['per_second']:.0f}/s" if req else "no steady-state figures")
            + (" (killed: it did not end by itself)" if (lg or {}).get("stuck") else ""))
    ops = collections.Counter((o.get("op"), o.get("rc") == 0) for o in h["client_ops"])
    row("client commands", ", ".join(f"{op} {ops[(op, True)]} ok/{ops[(op, False)]} not"
                                    for op in ("submit", "cancel", "retry", "fetch", "jobs")))
    owner = collections.Counter((e["event"][6:], e.get("rc") == 0) for e in h["events"]
                                if e["event"] in ("owner-pause", "owner-resume"))
    row("owner actions", ", ".join(f"{a} {owner[(a, True)]} ok/{owner[(a, False)]} refused"
                                   for a in ("pause", "resume")))
    late = [e for e in h["events"] if e["event"] == "owner-refused-but-applied"]
    row("owner commands refused, applied later", f"{len(late)}" + (" (see the report: the worker answered "
                                                                    "'busy: try again', then did it)" if late else ""))
    fk = collections.Counter(f["kind"] for f in h["faults"])
    row("faults injected", f"{sum(fk.values())}: " + ", ".join(f"{k} {n}" for k, n in sorted(fk.items())))
    during = [ms for t, ok, ms in h["probes"] if ok and in_fault(h, t)]
    outside = [ms for t, ok, ms in h["probes"] if ok and not in_fault(h, t)]
    fail_during = sum(1 for t, ok, _ in h["probes"] if not ok and in_fault(h, t))
    fail_outside = sum(1 for t, ok, _ in h["probes"] if not ok and not in_fault(h, t))
    row("API latency during faults", f"p50 {_pct(during, 50):.1f} ms, p99 {_pct(during, 99):.1f} ms "
        f"({len(during)} answered, {fail_during} failed or timed out)")
    row("API latency outside faults", f"p50 {_pct(outside, 50):.1f} ms, p99 {_pct(outside, 99):.1f} ms "
        f"({len(outside)} answered, {fail_outside} failed or timed out)")
    cli_d = [1000 * (o["t1"] - o["t0"]) for o in h["client_ops"] if o.get("rc") == 0 and in_fault(h, o["t0"])]
    cli_o = [1000 * (o["t1"] - o["t0"]) for o in h["client_ops"] if o.get("rc") == 0 and not in_fault(h, o["t0"])]
    row("CLI command time during faults", f"p50 {_pct(cli_d, 50):.0f} ms, p99 {_pct(cli_d, 99):.0f} ms ({len(cli_d)})")
    row("CLI command time outside faults", f"p50 {_pct(cli_o, 50):.0f} ms, p99 {_pct(cli_o, 99):.0f} ms ({len(cli_o)})")
    by_kind = collections.defaultdict(list)
    for f in h["faults"]:
        if is_pool_fault(f) and f["heal_t"] is not None:
            by_kind[f["kind"]].append(coordinator_recovery(h, f))
    if not by_kind:
        row("coordinator recovery (API answers)", "no coordinator faults")
    for kind, recs in sorted(by_kind.items()):
        got = [r for r in recs if r is not None]
        each = ", ".join("never" if r is None else f"{r:.2f}" for r in recs)
        row(f"recovery after {kind}", f"p50 {_pct(got, 50):.2f} s, max {max(got) if got else float('nan'):.2f} s "
            f"({len(recs)} faults" + (f": {each} s)" if len(recs) <= 12 else ")"))
    if pg:
        # From the fault to the first answer, asking as a client does (the one that answered last,
        # then the other): after a SIGSTOP that includes the request's 5 s timeout.
        hits = collections.defaultdict(list)
        for f in h["faults"]:
            if f["kind"].startswith("coordinator") and f.get("active"):
                hits[f["kind"]].append(takeover(h, f))
        if not hits:
            row("takeover", "no fault hit the active coordinator")
        for kind, took in sorted(hits.items()):
            got = [t for t in took if t is not None]
            row(f"takeover after {kind} of the active one", f"p50 {_pct(got, 50):.2f} s, max "
                f"{max(got) if got else float('nan'):.2f} s ({len(took)} faults; {len(took) - len(got)} without an "
                f"answer before the load ended)")
    wr = [recovery(h, f) for f in h["faults"] if f["kind"].startswith("worker") and f["heal_t"] is not None]
    wr_ok = [r for r in wr if r is not None and r >= 0]
    row("worker back online after fault", f"p50 {_pct(wr_ok, 50):.1f} s, max {max(wr_ok) if wr_ok else float('nan'):.1f} s "
        f"({len(wr_ok)} measured; {sum(1 for r in wr if r is not None and r < 0)} cut by the worker's next fault)")
    lab = next((e for e in h["events"] if e["event"] == "lab"), None)
    if lab is not None:
        row("lab (namespaces, tmpfs, libfaketime)", "; ".join(lab.get("have", [])) or "nothing")
        if lab.get("skipped"):
            row("fault kinds skipped", "; ".join(lab["skipped"]))
    nat = next((e for e in h["events"] if e["event"] == "nat"), None)
    if nat is not None and nat.get("connections") is not None:
        row("NAT (workers behind the router)", f"{nat['connections']} connections masqueraded")
    nets = [f for f in h["faults"] if f["kind"] == "worker-loss"]
    if nets:
        row("worker-loss", f"{len(nets)} faults, loss " + ", ".join(f"{f.get('loss_percent', '?')}%" for f in nets[:12])
            + (" ..." if len(nets) > 12 else ""))
    spools = [f for f in h["faults"] if f["kind"] == "worker-spool-full"]
    if spools:
        row("worker-spool-full", f"{len(spools)} faults, filler {_mib(spools, 'filled_bytes')} MiB at injection "
            f"(then topped up each second)")
    inodes = [f for f in h["faults"] if f["kind"] == "worker-inodes-full"]
    if inodes:
        made = [f["filled_inodes"] for f in inodes if f.get("filled_inodes") is not None]
        row("worker-inodes-full", f"{len(inodes)} faults, "
            + (f"{min(made)}-{max(made)} empty files at injection" if made else "? files")
            + " (no inode left; then topped up each second)")
    disks = [f for f in h["faults"] if f["kind"] == "coordinator-disk-full"]
    if disks:
        ok, later, refused, errors = collections.Counter(), collections.Counter(), collections.Counter(), \
            collections.Counter()
        after = []
        for f in disks:
            w = disk_full_writes(h, f)
            ok.update(w["ok"])
            later.update(w["ok_later"])
            refused.update(w["refused"])
            errors.update(w["errors"])
            after.append(w["ok_after_s"])
        exits = [e for e in h["events"] if e["event"] == "unexpected-exit" and e.get("target") == "coordinator"
                 and any(f["inject_t"] <= e["t"] <= (f["heal_t"] or h["t_load_end"]) + AFTER_FAULT_S for f in disks)]
        row("coordinator-disk-full: writes begun during", ", ".join(
            f"{op} {refused[op]} refused/{ok[op]} ok/{later[op]} ok once it ended" for op in ("submit", "cancel", "retry"))
            + (f" (most said: {errors.most_common(1)[0][0]!r})" if errors else ""))
        got = [a for a in after if a is not None]
        row("coordinator-disk-full: first submit ok after", f"p50 {_pct(got, 50):.1f} s, max "
            f"{max(got) if got else float('nan'):.1f} s ({len(disks)} faults, {len(disks) - len(got)} never); "
            f"coordinator exited during one: {len(exits)}" + (" (FINDING: it needed a restart)" if exits else ""))
    unspooled = h.get("unspooled", {})
    if unspooled or spools:
        n = sum(len(v) for v in unspooled.values())
        ended = collections.Counter()
        started = 0
        ids = {int(a) for v in unspooled.values() for a in v if a.isdigit()}
        for a in h["store"]["attempts"]:
            if a["id"] in ids:
                ended[a["state"]] += 1
                started += a["started_at"] is not None
        # Since 2026-12-05 the worker ends such an attempt as a worker fault without starting it
        # (worker/agent/agent.cpp); one that started all the same is the finding.
        row("attempts the worker could not spool", f"{n}" + (
            " (their assignment.json could not be written: spool full); ended "
            + ", ".join(f"{k} {v}" for k, v in sorted(ended.items()))
            + f"; started all the same: {started}" + (" (FINDING)" if started else "") if n else ""))
    clocks = [e for e in h["events"] if e["event"] == "clock-seen"]
    if clocks:
        good = [e for e in clocks if e.get("seen_s") is not None and abs(e["seen_s"] - e["step_s"]) <= 5]
        row("worker-clock-step", f"{sum(1 for f in h['faults'] if f['kind'] == 'worker-clock-step')} steps ("
            + ", ".join(f"{f.get('step_s', 0):+.0f}" for f in h["faults"] if f["kind"] == "worker-clock-step")[:120]
            + f" s); the worker's status showed its clock where set {len(good)} of {len(clocks)} times"
            + ("" if len(good) == len(clocks) else " (else: " + ", ".join(
                f"set {e['step_s']:+.0f} s, seen " + (f"{e['seen_s']:+.1f} s" if e.get("seen_s") is not None else
                                                      f"nothing: {e.get('err', '')[:60]}")
                for e in clocks if e not in good)[:300] + ")"))
    restarts = [e for e in h["events"] if e["event"] == "client-exited"]
    row("harness: clients that exited by themselves", f"{len(restarts)}" +
        (" (their stderr is in clients/cN/stderr)" if restarts else ""))
    zombies = zombie_overlaps(h)
    row("fenced attempts still running (info)", f"{len(zombies)} executions overlapped a later attempt of their job "
        f"(the worker was killed or stopped; the pool fenced their results)")
    succeeded = sum(1 for j in h["store"]["jobs"] if j["state"] == "succeeded"
                    and (workload.parse_job_name(j["name"]) or ("",))[0] in h["intents"])
    fetched = sum(o.get("checked", 0) for o in h["client_ops"] if o.get("op") == "fetch")
    row("checked", f"{succeeded} succeeded jobs' logs and outputs, {len(h['store']['logs'])} attempts' stored logs, "
        f"{fetched} fetched files, {len(h['store']['ledger'])} ledger entries, "
        f"{len(h['store']['attempts'])} attempts' times")
    inv = collections.Counter(x["inv"] for x in violations)
    row("invariant violations", f"{len(violations)}" + (" (" + ", ".join(f"{k} {n}" for k, n in sorted(inv.items()))
                                                       + ")" if violations else " (target 0)"))
    width = max(len(k) for k, _ in rows)
    out = ["", "soak run " + "-" * 60] + [f"{k.ljust(width)}  {val}" for k, val in rows]
    if violations:
        out += ["", f"VIOLATIONS (seed {h['seed']}; repeat with --seed {h['seed']} --minutes {h['minutes']:g} "
                f"--workers {h['workers']} --clients {h['clients']}):"]
        shown = set()
        shrunk = 0
        for x in violations[:20]:
            out.append(f"- [{x['inv']}] {x['msg']}")
            key = (x.get("job"), x.get("tag"), x.get("attempt"), x.get("worker"), x["inv"])
            if key in shown:
                continue
            shown.add(key)
            if shrunk < SHRINK_AT_MOST:
                shrunk += 1
                lines = shortest_history(h, x)
                if lines:
                    out += ["    " + ln for ln in lines]
                    continue
            out += ["    events around it (not shrunk):"] + ["    " + ln for ln in explain(h, x)]
        if len(violations) > 20:
            out.append(f"... and {len(violations) - 20} more (history.json in the run folder has everything)")
    return "\n".join(out) + "\n"


def _mib(faults, key):
    vals = [f[key] / 2**20 for f in faults if f.get(key) is not None]
    return f"{min(vals):.1f}-{max(vals):.1f}" if vals else "?"


def zombie_overlaps(h):
    """Real executions (the jobs' own witness lines) that ran on after a later attempt started."""
    found = []
    for jid, recs in h["witness"].items():
        starts = {a: t for a, what, t in recs if what == "start"}
        ends = {a: t for a, what, t in recs if what == "end"}
        order = sorted(starts, key=lambda a: starts[a])
        for a, b in zip(order, order[1:]):
            if ends.get(a, float("inf")) > starts[b]:
                found.append((int(jid), a, b))
    return found


def shortest_history(h, x, budget_s=SHRINK_BUDGET_S):
    """The shrunk history of violation `x` (shrink.py) as lines, or None."""
    import shrink  # here: shrink imports this module

    found = shrink.shrink(h, x, check, budget_s)
    if found is None:
        return None
    kept, minimal, examined = found
    if not minimal and len(kept) > 60:
        return None  # the budget ran out on a big history: the events around it say more
    head = (f"shortest history: {len(kept)} of {len(shrink.units(h))} events, "
            + ("each needed (without any one of them the checker no longer reports this)" if minimal else
               f"smaller but not minimal (the {budget_s:.0f} s budget ran out)") + f"; {examined} histories checked")
    out = [head] + ["  " + ln for ln in shrink.describe(h, kept)]
    # The faults over that span, of the coordinator and of the workers its attempts ran on: not
    # needed by the checker to see the violation, but what a reader asks first.
    store = h["store"]
    names = {w["id"]: w["name"] for w in store.get("workers", [])}
    ids = {key for part, key in kept if part == "attempt"}
    involved = {names.get(a["worker_id"]) for a in store["attempts"] if a["id"] in ids}
    times = [a[t] / 1000 for a in store["attempts"] if a["id"] in ids for t in ("assigned_at", "ended_at") if a[t]]
    times += [h["client_ops"][key]["t0"] for part, key in kept if part == "op"]
    if times:
        lo, hi = min(times) - 10, max(times) + 10
        context = []
        for f in h["faults"]:
            end = f["heal_t"] or h["t_load_end"]
            if f["inject_t"] <= hi and end >= lo and (is_pool_fault(f) or (
                    f["kind"].startswith("worker") and f"soak-w{f['index']}" in involved)):
                context.append(f"{f['inject_t'] - h['t_load']:9.2f}s  FAULT {f['kind']} #{f['index']} "
                               f"(until {end - h['t_load']:.2f}s)")
        if context:
            out += ["  context (faults over that span, not needed to show it):"] + ["  " + c for c in context]
    return out


def explain(h, x):
    """The events that show a violation: the submission's and the job's history, the faults of the
    processes involved and the coordinator's faults over that time. Sorted by time."""
    store = h["store"]
    jobs = set()
    if x.get("job") is not None:
        jobs.add(x["job"])
    if x.get("attempt") is not None:
        jobs |= {a["job_id"] for a in store["attempts"] if a["id"] == x["attempt"]}
    tag = x.get("tag")
    if tag is None:
        for j in store["jobs"]:
            if j["id"] in jobs:
                tag = (workload.parse_job_name(j["name"]) or (None,))[0]
    if tag is not None and not jobs:  # a submission's violation: all its jobs
        jobs |= {j["id"] for j in store["jobs"] if (workload.parse_job_name(j["name"]) or (None,))[0] == tag}
    names = {w["id"]: w["name"] for w in store.get("workers", [])}
    lines = []
    if tag in h["intents"]:
        lines.append((h["intents"][tag]["t"], f"client {h['intents'][tag]['client']} intends to submit {tag} "
                      f"{h['intents'][tag]['shape']}"))
    if tag in h["acks"]:
        a = h["acks"][tag]
        lines.append((a["t"], f"submit {tag} acknowledged: sweep {a['sweep_id']} jobs {a['jobs']}"))
    for o in h["client_ops"]:
        if tag is not None and o.get("tag") == tag:
            lines.append((o["t0"], f"client {o['client']} {o['op']} {o.get('job', o.get('sweep', ''))} -> rc "
                          f"{o.get('rc')} {o.get('err', '')[:80]}"))
    workers = set()
    attempt_ids = set()
    for a in store["attempts"]:
        if a["job_id"] in jobs:
            workers.add(a["worker_id"])
            attempt_ids.add(a["id"])
            lines.append((a["assigned_at"] / 1000, f"job {a['job_id']} attempt {a['id']} placed on worker "
                          f"{a['worker_id']} ({names.get(a['worker_id'], '?')})"))
            if a["started_at"]:
                lines.append((a["started_at"] / 1000, f"job {a['job_id']} attempt {a['id']} started"))
            if a["ended_at"]:
                lines.append((a["ended_at"] / 1000, f"job {a['job_id']} attempt {a['id']} ended {a['state']}: "
                              f"{a['reason'][:80]}"))
    for e in store["ledger"]:
        if e["attempt"] in attempt_ids:
            lines.append((e["at"] / 1000, f"ledger {e['id']}: {e['reason']} {e['amount']} {e['debit']} -> "
                          f"{e['credit']} (attempt {e['attempt']})"))
    for jid in jobs:
        for a, what, t in h["witness"].get(str(jid), []):
            lines.append((t / 1000, f"job {jid} attempt {a} really {what}s (witness)"))
    if lines:
        lo = min(t for t, _ in lines) - 5
        hi = max(t for t, _ in lines) + 5
    else:
        lo, hi = x.get("t", 0) - 15, x.get("t", 0) + 15
    involved = {names.get(w) for w in workers}
    for f in h["faults"]:
        if lo <= f["inject_t"] <= hi or (f["heal_t"] and lo <= f["heal_t"] <= hi):
            if is_pool_fault(f) or (f["kind"].startswith("worker") and
                                                       (f"soak-w{f['index']}" in involved or not names)):
                lines.append((f["inject_t"], f"FAULT {f['kind']} #{f['index']} injected"))
                if f["heal_t"]:
                    lines.append((f["heal_t"], f"FAULT {f['kind']} #{f['index']} healed"))
    lines.sort(key=lambda x: x[0])
    t0 = h["t_load"]
    out = [f"{t - t0:9.2f}s  {text}" for t, text in lines]
    if len(out) > 50:
        out = out[:5] + [f"   ... {len(out) - 50} lines (history.json has them)"] + out[-45:]
    return out


# ----------------------------------------------------------------------------- self-test
def synthetic_history():
    """A small clean history: one client, two sweeps (3 jobs), one job retried after a lost attempt."""
    t0 = 1_000_000.0
    ms = lambda s: int((t0 + s) * 1000)  # noqa: E731
    intents = {"c0s0": {"shape": {"jobs": 2, "fail_first": False, "big": False, "sleep": "0.2"}, "t": t0 + 1, "client": 0},
               "c0s1": {"shape": {"jobs": 1, "fail_first": False, "big": True, "sleep": "0.2"}, "t": t0 + 2, "client": 0}}
    acks = {"c0s0": {"sweep_id": 1, "jobs": [1, 2], "t": t0 + 1.1, "client": "c0"},
            "c0s1": {"sweep_id": 2, "jobs": [3], "t": t0 + 2.1, "client": "c0"}}
    jobs = [{"id": 1, "sweep_id": 1, "name": "soak-c0s0-0", "state": "succeeded", "attempts": 1, "retries": 0},
            {"id": 2, "sweep_id": 1, "name": "soak-c0s0-1", "state": "succeeded", "attempts": 2, "retries": 0},
            {"id": 3, "sweep_id": 2, "name": "soak-c0s1-0", "state": "succeeded", "attempts": 1, "retries": 0}]
    price = 36_000_000  # 10 micro per ms of runtime
    attempts = [
        {"id": 1, "job_id": 1, "worker_id": 1, "state": "succeeded", "assigned_at": ms(2), "started_at": ms(2.1),
         "ended_at": ms(4.1), "exit_code": 0, "reason": "exited with status 0", "price": price, "voided_at": None, "retry": 0},
        {"id": 2, "job_id": 2, "worker_id": 2, "state": "lost", "assigned_at": ms(2), "started_at": ms(2.1),
         "ended_at": ms(9), "exit_code": None, "reason": "lease expired", "price": price, "voided_at": None, "retry": 0},
        {"id": 3, "job_id": 2, "worker_id": 1, "state": "succeeded", "assigned_at": ms(9.1), "started_at": ms(9.2),
         "ended_at": ms(10.2), "exit_code": 0, "reason": "exited with status 0", "price": price, "voided_at": None, "retry": 0},
        {"id": 4, "job_id": 3, "worker_id": 1, "state": "succeeded", "assigned_at": ms(3), "started_at": ms(3.1),
         "ended_at": ms(5.1), "exit_code": 0, "reason": "exited with status 0", "price": price, "voided_at": None, "retry": 0},
    ]
    ledger, n = [], 0

    def entry(at, debit, credit, amount, reason, attempt=None):
        nonlocal n
        n += 1
        ledger.append({"id": n, "at": ms(at), "debit": debit, "credit": credit, "amount": amount, "reason": reason,
                       "attempt": attempt, "payer": 1})

    entry(0, "issuer", "team:1", 10_000_000_000, "grant")
    hold = 1_200_000_000
    for a in attempts:
        entry(a["assigned_at"] / 1000 - t0, "team:1", "escrow", hold, "hold", a["id"])
    for a in attempts:
        at = a["ended_at"] / 1000 - t0
        if a["state"] == "lost":
            entry(at, "escrow", "team:1", hold, "release", a["id"])
            continue
        cost = price * (a["ended_at"] - a["started_at"]) // 3_600_000
        fee = cost // 10
        entry(at, "escrow", "settling:2", cost - fee, "charge", a["id"])
        entry(at, "escrow", "pool_fee", fee, "fee", a["id"])
        entry(at, "escrow", "team:1", hold - cost, "release", a["id"])
    balances = collections.Counter()
    for e in ledger:
        balances[e["debit"]] -= e["amount"]
        balances[e["credit"]] += e["amount"]
    logs, outputs, api_logs, api_outputs, attempt_txt = {}, {}, {}, {}, {}
    won = {1: 1, 2: 3, 3: 4}
    for j in jobs:
        tag, k = workload.parse_job_name(j["name"])
        aid = won[j["id"]]
        text = "\n".join([f"soak {tag} k={k} attempt {aid}"] + workload.expected_lines(tag, k)) + "\n"
        logs[str(aid)] = {"spans": [[0, 30], [30, len(text.encode()) - 30]], "text": text}
        api_logs[str(j["id"])] = text
        api_outputs[str(j["id"])] = dict(workload.expected_outputs(tag, k, intents[tag]["shape"]["big"]))
        api_outputs[str(j["id"])]["attempt.txt"] = "x"
        attempt_txt[str(j["id"])] = str(aid)
        outputs[str(aid)] = {"sha256": "ab" * 32, "actual": "ab" * 32}
    logs["2"] = {"spans": [[0, 25]], "text": "soak c0s0 k=1 attempt 2\n"}
    api_jobs = {str(j["id"]): {"id": j["id"], "name": j["name"], "sweep_id": j["sweep_id"], "state": j["state"],
                               "retries": 0, "attempts": []} for j in jobs}
    return {
        "seed": "self-test", "minutes": 0.2, "workers": 2, "clients": 1, "t_load": t0, "t_load_end": t0 + 12,
        "drained_s": 1.0, "nonterminal": [], "intents": intents, "acks": acks,
        "client_ops": [{"op": "submit", "t0": t0 + 1, "t1": t0 + 1.1, "rc": 0, "tag": "c0s0", "client": 0},
                       {"op": "submit", "t0": t0 + 2, "t1": t0 + 2.1, "rc": 0, "tag": "c0s1", "client": 0}],
        "events": [], "faults": [{"kind": "worker-kill9", "index": 1, "inject_t": t0 + 3, "heal_t": t0 + 6}],
        "probes": [[t0 + s / 4, True, 2.0] for s in range(48)],
        "presence": [[t0 + s, {"soak-w0": "online", "soak-w1": "online" if not 3 <= s < 7 else "offline"}]
                     for s in range(12)] + [[t0 + 80, {"soak-w0": "online", "soak-w1": "online"}]],
        "api": {"jobs": api_jobs, "logs": api_logs, "outputs": api_outputs, "attempt_txt": attempt_txt,
                "errors": [], "workers": {"soak-w0": "online", "soak-w1": "online"}},
        "store": {"sweeps": [{"id": 1, "job_count": 2}, {"id": 2, "job_count": 1}], "jobs": jobs,
                  "attempts": attempts, "ledger": ledger, "balances": dict(balances), "logs": logs,
                  "outputs": outputs},
        "spools": {"w0": [], "w1": []}, "tmp_left": [], "leftovers": [], "worker_exits": {"soak-w0": True,
                                                                                         "soak-w1": True},
        "coord_clean": True, "witness": {},
    }


def _succeeded(h):
    """(job, its succeeded attempt, the next free ids) of a history, for the doctorings."""
    s = h["store"]
    j = next(j for j in s["jobs"] if j["state"] == "succeeded" and workload.parse_job_name(j["name"])
             and workload.parse_job_name(j["name"])[0] in h["intents"])
    a = [a for a in s["attempts"] if a["job_id"] == j["id"] and a["state"] == "succeeded"][-1]
    return j, a


def doctor_duplicate_job(h):
    j, _ = _succeeded(h)
    s = h["store"]
    new_sweep = max(x["id"] for x in s["sweeps"]) + 1
    s["sweeps"].append({"id": new_sweep, "job_count": 1})
    s["jobs"].append(dict(j, id=max(x["id"] for x in s["jobs"]) + 1, sweep_id=new_sweep))


def doctor_overlap(h):
    j, a = _succeeded(h)
    s = h["store"]
    b = dict(a, id=max(x["id"] for x in s["attempts"]) + 1, state="lost", reason="doctored",
             assigned_at=a["assigned_at"] - 1000, started_at=a["assigned_at"] - 900, ended_at=a["assigned_at"] + 500)
    s["attempts"].append(b)


def doctor_corrupt_output(h):
    j, _ = _succeeded(h)
    files = h["api"]["outputs"][str(j["id"])]
    files["out.txt"] = hashlib.sha256(b"corrupted").hexdigest()


def doctor_missing_log_line(h):
    j, a = _succeeded(h)
    text = h["api"]["logs"][str(j["id"])]
    lines = text.split("\n")
    del lines[2]
    h["api"]["logs"][str(j["id"])] = "\n".join(lines)


def doctor_duplicate_log_line(h):
    j, a = _succeeded(h)
    log = h["store"]["logs"][str(a["id"])]
    first = log["text"].split("\n")[1] + "\n"
    log["text"] += first
    log["spans"].append([sum(n for _, n in log["spans"]), len(first.encode())])


def doctor_unbalanced_ledger(h):
    account = next(a for a in h["store"]["balances"] if a.startswith("team:"))
    h["store"]["balances"][account] += 1


def doctor_double_charge(h):
    _, a = _succeeded(h)
    s = h["store"]
    c = next(e for e in s["ledger"] if e["attempt"] == a["id"] and e["reason"] == "charge")
    r = next(e for e in s["ledger"] if e["attempt"] == a["id"] and e["reason"] == "release")
    r["amount"] -= c["amount"]
    if r["amount"] <= 0:
        r["amount"] = 1
    s["ledger"].append(dict(c, id=max(e["id"] for e in s["ledger"]) + 1))


def doctor_unreleased_hold(h):
    _, a = _succeeded(h)
    s = h["store"]
    s["ledger"] = [e for e in s["ledger"] if not (e["attempt"] == a["id"] and e["reason"] == "release")]
    bal = collections.Counter()
    for e in s["ledger"]:
        bal[e["debit"]] -= e["amount"]
        bal[e["credit"]] += e["amount"]
    s["balances"] = dict(bal)  # the cache agrees: only the hold itself is wrong


def doctor_missing_ack_job(h):
    tag, ack = next(iter(h["acks"].items()))
    s = h["store"]
    s["jobs"] = [j for j in s["jobs"] if j["id"] != ack["jobs"][0]]


def doctor_leftover(h):
    h["leftovers"].append([424242, f"/bin/sh -c echo soak job in /tmp/soak-x"])
    h["tmp_left"].append("gpupool-upload-XXXXXX")


def doctor_worker_offline(h):
    h["api"]["workers"]["soak-w0"] = "offline"


def doctor_wrong_attempt_outputs(h):
    j, a = _succeeded(h)
    h["api"]["attempt_txt"][str(j["id"])] = str(a["id"] + 1000)


def doctor_cancel_ignored(h):
    j, a = _succeeded(h)
    t = a["ended_at"] / 1000
    h["client_begins"] = [b for b in h.get("client_begins", []) if b.get("sweep") != j["sweep_id"]]  # no retry
    h["client_ops"].append({"op": "cancel", "rc": 0, "t0": t - 1.0, "t1": t - 0.9, "job": j["id"], "client": 0,
                            "answer": {"cancelled": [j["id"]]}, "tag": workload.parse_job_name(j["name"])[0]})


def doctor_retry_not_run(h):
    j, a = _succeeded(h)
    t = a["ended_at"] / 1000
    h["client_begins"] = [b for b in h.get("client_begins", []) if not (  # and no cancel of it since
        b.get("op") == "cancel" and (b.get("job") == j["id"] or b.get("sweep") == j["sweep_id"]))]
    h["client_ops"].append({"op": "retry", "rc": 0, "t0": t + 1.0, "t1": t + 1.1, "sweep": j["sweep_id"],
                            "client": 0, "answer": {"jobs": [{"id": j["id"], "retry": 1}]},
                            "tag": workload.parse_job_name(j["name"])[0]})


def doctor_disk_full_writes_refused(h):
    """A coordinator-disk-full, and every submit for 70 s after it ended refused."""
    t = h["t_load"] + 12.5
    h["faults"].append({"kind": "coordinator-disk-full", "index": 0, "inject_t": t - 5, "heal_t": t})
    for n in range(8):
        h["client_ops"].append({"op": "submit", "t0": t + 1 + 9 * n, "t1": t + 1.2 + 9 * n, "rc": 1,
                                "tag": f"c0s{100 + n}", "client": 0, "err": "internal: database or disk is full"})


DOCTORINGS = [
    ("a duplicated job", doctor_duplicate_job, "exactly-once"),
    ("an acknowledged job missing", doctor_missing_ack_job, "exactly-once"),
    ("overlapping attempts", doctor_overlap, "no-overlap"),
    ("a corrupted output", doctor_corrupt_output, "outputs"),
    ("another attempt's outputs", doctor_wrong_attempt_outputs, "outputs"),
    ("a missing log line", doctor_missing_log_line, "logs-once"),
    ("a log line twice", doctor_duplicate_log_line, "logs-once"),
    ("a job that ran on after its cancel was acknowledged", doctor_cancel_ignored, "cancel-honoured"),
    ("an acknowledged retry that never ran", doctor_retry_not_run, "retry-honoured"),
    ("an unbalanced ledger", doctor_unbalanced_ledger, "ledger"),
    ("an attempt charged twice", doctor_double_charge, "ledger"),
    ("a hold never released", doctor_unreleased_hold, "ledger"),
    ("a process and a temp file left", doctor_leftover, "left-behind"),
    ("a worker not back online", doctor_worker_offline, "online"),
    ("no submit taken for 70 s after the coordinator's disk had room again", doctor_disk_full_writes_refused,
     "writes-resume"),
]


def self_test(run_dir=None):
    if run_dir:
        base = json.load(open(os.path.join(run_dir, "history.json")))
        where = f"the history of {run_dir}"
    else:
        base = synthetic_history()
        where = "a built-in history"
    clean = check(base)
    ok = True
    print(f"self-test on {where}:")
    if clean:
        print(f"  FAIL: the undoctored history already has {len(clean)} violations, e.g. {clean[0]['msg']}")
        ok = False
    else:
        print("  ok: the undoctored history has no violation")
    import shrink

    for what, doctor, inv in DOCTORINGS:
        h = copy.deepcopy(base)
        doctor(h)
        found = [x for x in check(h) if x["inv"] == inv]
        if found:
            print(f"  ok: {what} is reported: [{inv}] {found[0]['msg']}")
        else:
            print(f"  FAIL: {what} is not reported as {inv}")
            ok = False
            continue
        # Its shortest history: smaller than the whole, still showing it, and without any one of
        # its events no longer showing it.
        x = found[0]
        result = shrink.shrink(h, x, check, budget_s=60)
        everything = shrink.units(h)

        def shows(subset):
            return any(v["inv"] == x["inv"] and v["msg"] == x["msg"] for v in check(shrink.restrict(h, set(subset))))

        if result is None:
            print(f"  FAIL: shrinking {what}: the whole history does not show it")
            ok = False
            continue
        kept, minimal, _ = result
        needed = all(not shows([u for u in kept if u != gone]) for gone in kept)
        if minimal and needed and shows(kept) and len(kept) < len(everything):
            print(f"  ok: {what}: shortest history {len(kept)} of {len(everything)} events, each needed")
        else:
            print(f"  FAIL: {what}: shrunk to {len(kept)} of {len(everything)} events (minimal {minimal}, "
                  f"each needed {needed}, still shown {shows(kept)})")
            ok = False
    # The table and the explanation render for a doctored history.
    h = copy.deepcopy(base)
    doctor_overlap(h)
    text = table(h, check(h))
    if "VIOLATIONS" not in text or "attempt" not in text:
        print("  FAIL: the table does not show the violation and its history")
        ok = False
    print("self-test: " + ("passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(self_test(sys.argv[1] if len(sys.argv) > 1 else None))
