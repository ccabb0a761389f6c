#!/usr/bin/env python3
"""Soak test of a pool of real gpupool processes under faults (issue 46, first cut: SQLite).

    tests/soak/soak.py [--minutes M] [--seed S] [--workers N] [--clients N] [--keep]
    tests/soak/soak.py --self-test [RUN_DIR]
    tests/soak/soak.py --check RUN_DIR           (the checker again, on a kept run)

One coordinator (SQLite in a temp folder, loopback port; restarted on the same file and port after
each kill), N workers with `--runtime process` (each its own work dir, restarted on it after a
kill), K submitting clients (each a process of its own: this script in `client` mode, running
`gpupool submit/cancel/retry/fetch/jobs`), owners pausing and resuming workers, and a fault
schedule drawn from the seed (faults.py). Then the pool drains, the checker reads the history
(clients' journals and acknowledgements, the API, the SQLite store read-only, the workers' spools,
the jobs' witness files) and prints one table. Exit 0 when no invariant was violated, 1 otherwise,
2 on a harness error. See tests/soak/README.md.

Python 3 standard library only. The binary: --gpupool, else $GPUPOOL, else build/gpupool.
"""

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import checker  # noqa: E402
import faults  # noqa: E402
import rootfaults  # noqa: E402
import workload  # noqa: E402

CATALOG = """# The soak's catalog: CPU time is priced high enough that every attempt that ran is charged
# (the embedded 0.02 credits per core-hour rounds a short job's charge down to 0).
[defaults]
unknown_gpu_credits_per_hour = "1.0"
cpu_credits_per_core_hour = "360"

[[gpu]]
model = "L4"
memory = "24GiB"
credits_per_hour = "1.0"
"""

LEASE = "6s"
SIM_TEAM = "loadgen"  # the simulated workers' and their researchers' team
WORKER_TOML = """# The soak's real workers take fellows' jobs only (the simulated workers take the loadgen team's).
[share]
teams = ["fellows"]
"""
TAKEOVER = "2s"  # the PostgreSQL pair's --takeover-after (tests/ha/failover.sh uses the same)


def now():
    return time.time()


class SoakError(Exception):
    pass


def default_gpupool():
    return os.environ.get("GPUPOOL") or os.path.join(os.getcwd(), "build", "gpupool")


def _die_with_parent():
    """In the child before exec: SIGKILL it when the soak dies, even by SIGKILL (Linux prctl)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class Child:
    """A process the soak started, in a session (process group) of its own; `netns_fd`: an open
    network namespace it joins before it runs (rootfaults.Lab.worker_netns_fd), closed here."""

    def __init__(self, name, argv, env, out_path, err_path, netns_fd=None):
        self.name = name
        self.argv = argv
        out = open(out_path, "ab")
        err = open(err_path, "ab")

        def preexec():
            _die_with_parent()
            if netns_fd is not None:
                rootfaults.setns_preexec(netns_fd)

        try:
            self.popen = subprocess.Popen(argv, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                          start_new_session=True, preexec_fn=preexec)
        finally:
            out.close()
            err.close()
            if netns_fd is not None:
                os.close(netns_fd)
        self.pid = self.popen.pid
        self.stopped = False
        self.expected_exit = False

    def alive(self):
        return self.popen.poll() is None

    def signal(self, signo, group=False):
        try:
            if group:
                os.killpg(self.pid, signo)
            else:
                os.kill(self.pid, signo)
        except ProcessLookupError:
            pass

    def kill9(self, group=False):
        self.expected_exit = True
        self.signal(signal.SIGKILL, group)
        try:
            self.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def stop(self, grace_s, group=False):
        """SIGCONT, SIGTERM, then SIGKILL after `grace_s`; True if it exited on SIGTERM."""
        self.expected_exit = True
        if not self.alive():
            return True
        self.signal(signal.SIGCONT, group)
        self.signal(signal.SIGTERM, group)
        try:
            self.popen.wait(timeout=grace_s)
            return True
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL, group=True)
            try:
                self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            return False


class Pool:
    """The processes of one soak run and the faults' inject/heal methods (named in faults.py)."""

    def __init__(self, args, run_dir):
        self.args = args
        self.run = run_dir
        self.gpupool = args.gpupool
        self.seed = args.seed
        self.events_path = os.path.join(run_dir, "events.jsonl")
        self.events_file = open(self.events_path, "a")
        self.lock = threading.Lock()
        self.pg = args.store == "postgres"
        n = 2 if self.pg else 1  # PostgreSQL: an active coordinator and a standby on one database
        self.coords = [None] * n
        self.coord_incarnations = [0] * n
        self.ports = [0] * n
        self.urls = [""] * n
        self.db_dir = os.path.join(run_dir, "db")  # PostgreSQL's (tests/pg/pg_server.sh)
        self.db_url = ""
        self.last_good = 0  # the coordinator that answered the harness last (it asks that one first)
        self.pending_coords = {}  # index -> when to try again: a start refused while the database was down
        self.loadgen = None
        self.sim_member = ""
        self.sim_enroll = ""
        self.admin = ""
        self.workers = [None] * args.workers
        self.clients = [None] * args.clients
        self.client_incarnations = [0] * args.clients
        self.member_tokens = []
        self.enroll = ""
        self.faulted = {}  # (target, index) -> fault record while it lasts
        self.last_owner = {}
        self.owner_checks = []  # (due, worker, action, when): refused owner commands to look at again
        self.probes = []  # [t, ok, ms]
        self.presence = []  # [t, {name: presence}]
        self.stop_probe = threading.Event()
        self.fillers = {}  # (target, index) -> [filler path, bytes, next top-up]
        self.inode_fillers = {}  # (target, index) -> [filler folder, files, next top-up]
        self.next_grow = 0.0
        self.lookers = []  # threads looking at a stepped worker's clock (_look_at_clock)
        self.lab = rootfaults.Lab(run_dir, args.workers, enabled=not args.no_root_faults,
                                  coord_tmpfs=args.store != "postgres")
        for sub in ("coord", "db", "workers", "clients", "tmp", "home", "witness", "tokens", "logs"):
            os.makedirs(os.path.join(run_dir, sub), exist_ok=True)
        self.env = dict(os.environ)
        self.env.pop("GPUPOOL_LOG_LEVEL", None)
        for k in ("GPUPOOL_URL", "GPUPOOL_TOKEN", "GPUPOOL_TOKEN_FILE", "GPUPOOL_CA_CERT"):
            self.env.pop(k, None)
        self.env.update({"TMPDIR": os.path.join(run_dir, "tmp"), "HOME": os.path.join(run_dir, "home"),
                         "SOAK_RUN": run_dir})
        with open(os.path.join(run_dir, "catalog.toml"), "w") as f:
            f.write(CATALOG)
        with open(os.path.join(run_dir, "worker.toml"), "w") as f:
            f.write(WORKER_TOML)

    @property
    def url(self):
        """What the pool's clients and workers are given: every coordinator's URL, comma-separated."""
        return ",".join(self.urls)

    def _order(self):
        """The coordinators' indices, the one that answered the harness last first."""
        return [(self.last_good + k) % len(self.urls) for k in range(len(self.urls))]

    def serving_url(self, timeout=5):
        """The URL of the coordinator that serves now (one answering /v1/health 200), asking the one
        that answered last first; that one's when none does."""
        order = self._order()
        for i in order if len(order) > 1 else []:
            if self.serves(i, timeout):
                self.last_good = i
                return self.urls[i]
        return self.urls[order[0]]

    def api(self, token, path, timeout=10, raw=False):
        """api_get on the coordinator that serves (a standby's 503 or no answer: the next one)."""
        last = None
        for i in self._order():
            try:
                out = api_get(self.urls[i], token, path, timeout=timeout, raw=raw)
                self.last_good = i
                return out
            except (urllib.error.URLError, OSError, ValueError) as e:
                last = e
        raise last

    # ----- events
    def event(self, name, **fields):
        rec = {"t": now(), "event": name}
        rec.update(fields)
        with self.lock:
            self.events_file.write(json.dumps(rec) + "\n")
            self.events_file.flush()
        if self.args.verbose:
            print(f"[{rec['t'] - self.args.t_start:8.1f}s] {name} " +
                  " ".join(f"{k}={v}" for k, v in fields.items()), flush=True)
        return rec

    # ----- the CLI
    def cli(self, token, argv, timeout=60):
        full = [self.gpupool, "--url", self.url, "--token", token, "--json"] + argv
        r = subprocess.run(full, env=self.env, capture_output=True, text=True, timeout=timeout)
        return r

    def cli_json(self, token, argv):
        r = self.cli(token, argv)
        if r.returncode != 0:
            raise SoakError(f"gpupool {' '.join(argv)}: exit {r.returncode}: {r.stderr.strip()}")
        return json.loads(r.stdout) if r.stdout.strip() else {}

    # ----- coordinator
    def start_database(self):
        """PostgreSQL 15 as an unprivileged user (tests/pg/pg_server.sh), its URL in db/url."""
        script = os.path.join(HERE, "..", "pg", "pg_server.sh")
        r = subprocess.run([script, "start", self.db_dir], capture_output=True, text=True, timeout=120)
        if r.returncode != 0 or not os.path.exists(os.path.join(self.db_dir, "url")):
            missing = os.path.join(self.db_dir, "missing")
            why = open(missing).read().strip() if os.path.exists(missing) else (r.stderr or r.stdout)[-1500:]
            raise SoakError(f"PostgreSQL did not start: {why}")
        self.db_url = open(os.path.join(self.db_dir, "url")).read().strip()

    def stop_database(self):
        if self.pg:
            subprocess.run([os.path.join(HERE, "..", "pg", "pg_server.sh"), "stop", self.db_dir],
                           capture_output=True, timeout=120)

    def start_coordinator(self, i=0):
        d = os.path.join(self.run, "coord")
        port_file = os.path.join(d, f"port.{i}")
        if os.path.exists(port_file):
            os.remove(port_file)
        self.coord_incarnations[i] += 1
        n = self.coord_incarnations[i]
        host = self.lab.listen_host()
        argv = [self.gpupool, "coordinator", "--listen", f"{host}:{self.ports[i]}", "--port-file", port_file,
                "--tick-ms", "100", "--lease", LEASE, "--gpu-catalog", os.path.join(self.run, "catalog.toml"),
                "--pool-fee", "10"]
        if self.args.sim_workers:
            # The simulated workers all come from this machine's address, each holding a parked poll:
            # the per-address cap (64, for a NAT of workers) is raised to hold them and the clients.
            argv += ["--max-connections-per-client", str(2 * self.args.sim_workers + 64)]
        if self.pg:
            argv += ["--db", self.db_url, "--takeover-after", TAKEOVER, "--admin-token-file",
                     os.path.join(self.run, "tokens", "admin.first")]
        else:
            argv += ["--db", os.path.join(d, "pool.db")]
        logs = os.path.join(self.run, "logs")  # not in coord/, which may be a full tmpfs
        name = f"{i}.{n}" if self.pg else f"{n}"
        self.coords[i] = Child(f"coordinator-{i}", argv, self.env, os.path.join(logs, f"coord.stdout.{name}"),
                               os.path.join(logs, f"coord.stderr.{name}"))
        deadline = now() + 60
        while now() < deadline:
            if os.path.exists(port_file):
                text = open(port_file).read().strip()
                if text:
                    self.ports[i] = int(text)
                    break
            if not self.coords[i].alive():
                err = open(os.path.join(logs, f"coord.stderr.{name}")).read()[-2000:]
                if self.pg and "cannot connect to PostgreSQL" in err and self.admin:
                    # Its database is down (postgres-crash): tried again each second, as a service
                    # manager restarts it (docs/operating.md's unit: Restart=on-failure).
                    self.coords[i] = None
                    self.pending_coords[i] = now() + 1.0
                    self.event("coordinator-start-refused", index=i, incarnation=n, why=err.strip()[-300:])
                    return
                raise SoakError("coordinator exited at start: " + err)
            time.sleep(0.05)
        else:
            raise SoakError("coordinator did not write its port within 60 s")
        self.urls[i] = f"http://{host}:{self.ports[i]}"
        if not self.admin:
            first = os.path.join(self.run, "tokens", "admin.first")
            for _ in range(100):
                text = open(first).read() if self.pg and os.path.exists(first) else \
                    open(os.path.join(logs, f"coord.stdout.{name}")).read()
                at = text.find("gpp_")
                if at >= 0 and len(text) >= at + 68:
                    self.admin = text[at:at + 68]
                    break
                time.sleep(0.05)
            if not self.admin:
                raise SoakError("no admin token on the coordinator's first start")
        self.event("coordinator-started", pid=self.coords[i].pid, incarnation=n, port=self.ports[i], index=i)

    def serves(self, i, timeout=1.0):
        """Whether coordinator i answers /v1/health 200 (it holds the pool), now."""
        try:
            with urllib.request.urlopen(self.urls[i] + "/v1/health", timeout=timeout) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def setup_pool(self):
        self.cli_json(self.admin, ["admin", "team", "create", "fellows"])
        self.cli_json(self.admin, ["admin", "team", "create", "owners"])
        self.cli_json(self.admin, ["admin", "grant", "fellows", "1000000", "--note", "soak"])
        for i in range(self.args.clients):
            t = self.cli_json(self.admin, ["admin", "token", "create", "--team", "fellows", "--label",
                                           f"researcher-{i}"])["token"]
            self.member_tokens.append(t)
            path = os.path.join(self.run, "tokens", f"member-{i}")
            with open(path, "w") as f:
                f.write(t + "\n")
            os.chmod(path, 0o600)
        self.enroll = self.cli_json(self.admin, ["admin", "enroll", "owners", "--label", "soak-rack", "--uses",
                                                 "1000"])["token"]
        with open(os.path.join(self.run, "tokens", "admin"), "w") as f:
            f.write(self.admin + "\n")
        if self.args.sim_workers:
            # The load generator's team: its simulated workers take only its jobs (their terms), and
            # the real workers only fellows' (worker.toml), so neither runs the other's.
            self.cli_json(self.admin, ["admin", "team", "create", SIM_TEAM])
            self.cli_json(self.admin, ["admin", "grant", SIM_TEAM, "1000000", "--note", "soak load generator"])
            self.sim_member = self.cli_json(self.admin, ["admin", "token", "create", "--team", SIM_TEAM, "--label",
                                                         "loadgen"])["token"]
            self.sim_enroll = self.cli_json(self.admin, ["admin", "enroll", "owners", "--label", "soak-sim", "--uses",
                                                         str(self.args.sim_workers + 10)])["token"]

    # ----- the simulated workers (bench/coordinator_loadgen): protocol load beside the real pool
    def start_loadgen(self, seconds):
        argv = [self.args.loadgen, "--url", self.url, "--enroll-token", self.sim_enroll, "--member-token",
                self.sim_member, "--workers", str(self.args.sim_workers), "--terms-team", SIM_TEAM, "--slots", "2",
                "--register-rate", "100", "--heartbeat", "3s", "--poll-wait", "5s", "--run-ms", "1500",
                "--submit-rate", "1", "--jobs-per-sweep", "4", "--list-rate", "1", "--status-rate", "1",
                "--log-rate", "1", "--duration", f"{int(seconds)}s", "--seed", str(zlib.crc32(str(self.seed).encode()))]
        logs = os.path.join(self.run, "logs")
        self.loadgen = Child("loadgen", argv, self.env, os.path.join(logs, "loadgen.stdout"),
                             os.path.join(logs, "loadgen.stderr"))
        self.event("loadgen-started", pid=self.loadgen.pid, workers=self.args.sim_workers)

    def stop_loadgen(self, within_s):
        """Its run ends by itself (--duration, then a wind-down of up to 30 s); killed if it does not."""
        if self.loadgen is None:
            return
        self.loadgen.expected_exit = True
        deadline = now() + within_s
        while self.loadgen.alive() and now() < deadline:
            time.sleep(0.2)
        stuck = self.loadgen.alive()
        if stuck:
            self.loadgen.kill9()
        text = open(os.path.join(self.run, "logs", "loadgen.stdout")).read()
        m = re.search(r"== ramp: (\d+) of (\d+) workers registered", text)
        self.event("loadgen-ended", rc=self.loadgen.popen.returncode, stuck=stuck,
                   registered=int(m.group(1)) if m else None, requests=_loadgen_requests(text))

    def kill9_coordinator(self, i):
        active = self.pg and self.serves(i)
        self.coords[i].kill9()
        return {"active": active} if self.pg else {}

    def restart_coordinator(self, i):
        self.start_coordinator(i)

    def stop_coordinator(self, i):
        active = self.pg and self.serves(i)
        self.coords[i].signal(signal.SIGSTOP)
        return {"active": active} if self.pg else {}

    def cont_coordinator(self, i):
        self.coords[i].signal(signal.SIGCONT)

    def crash_database(self, _index):
        """PostgreSQL stopped at once (pg_ctl -m immediate, as a power cut): its data stays."""
        r = subprocess.run([os.path.join(HERE, "..", "pg", "pg_server.sh"), "crash", self.db_dir],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise SoakError(f"crashing PostgreSQL: {r.stderr[-500:]}")

    def restart_database(self, _index):
        self.start_database()

    # ----- workers
    def worker_dir(self, i):
        return os.path.join(self.run, "workers", f"w{i}")

    def start_worker(self, i):
        w = self.worker_dir(i)
        os.makedirs(w, exist_ok=True)
        argv = [self.gpupool, "--log-level", "info", "--url", self.url]
        if not os.path.exists(os.path.join(w, "worker.json")):
            argv += ["--token", self.enroll]
        argv += ["worker", "--share", "--config", os.path.join(self.run, "worker.toml"), "--runtime", "process",
                 "--unsafe-process-runtime", "--work-dir", w,
                 "--name", f"soak-w{i}", "--heartbeat-ms", "300", "--poll-wait-ms", "1000", "--cpus-milli", "1000",
                 "--memory-mib", "1024", "--slots", str(self.args.slots), "--drain-grace", "20s"]
        logs = os.path.join(self.run, "logs")  # not in the work dir, which may be a full tmpfs
        self.workers[i] = Child(f"worker-{i}", argv, self.lab.worker_env(i, self.env),
                                os.path.join(logs, f"w{i}.stdout"), os.path.join(logs, f"w{i}.stderr"),
                                netns_fd=self.lab.worker_netns_fd(i))
        self.event("worker-started", index=i, pid=self.workers[i].pid)

    def kill9_worker(self, i):
        self.workers[i].kill9()

    def restart_worker(self, i):
        self.start_worker(i)

    def stop_worker(self, i):
        self.workers[i].signal(signal.SIGSTOP)

    def cont_worker(self, i):
        self.workers[i].signal(signal.SIGCONT)

    # ----- the lab's faults (rootfaults.py): the network, full disks, a stepped clock
    def partition_worker(self, i):
        self.lab.partition(i)

    def heal_partition(self, i):
        self.lab.unfault_net(i)

    def lose_packets(self, i, percent):
        self.lab.lossy(i, percent)
        return {"loss_percent": round(percent)}

    def heal_loss(self, i):
        self.lab.unfault_net(i)

    def fill_spool(self, i):
        return self._fill(("worker", i), self.worker_dir(i))

    def free_spool(self, i):
        return self._free(("worker", i))

    def fill_spool_inodes(self, i):
        folder = os.path.join(self.worker_dir(i), rootfaults.INODE_FILLER)
        n = rootfaults.fill_inodes(folder)
        self.inode_fillers[("worker", i)] = [folder, n, now() + 1.0]
        return {"filled_inodes": n, "free_inodes_after": rootfaults.free_inodes(self.worker_dir(i))}

    def free_spool_inodes(self, i):
        folder, n, _ = self.inode_fillers.pop(("worker", i))
        shutil.rmtree(folder, ignore_errors=True)
        return {"filled_inodes": n}

    def fill_coordinator_disk(self, _index):
        return self._fill(("coordinator", 0), os.path.join(self.run, "coord"))

    def free_coordinator_disk(self, _index):
        return self._free(("coordinator", 0))

    def _fill(self, key, folder):
        path = os.path.join(folder, rootfaults.FILLER)
        n = rootfaults.fill(path)
        self.fillers[key] = [path, n, now() + 1.0]
        return {"filled_bytes": n, "free_after": rootfaults.free_bytes(folder)}

    def _free(self, key):
        path, n, _ = self.fillers.pop(key)
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
        return {"filled_bytes": n}

    def top_up(self):
        """While a disk is full, what the pool frees is taken again (each second); outside its
        faults a tmpfs that runs out of room grows (every 5 s)."""
        for rec in self.fillers.values():
            if now() >= rec[2]:
                rec[1] += rootfaults.fill(rec[0])
                rec[2] = now() + 1.0
        for rec in self.inode_fillers.values():
            if now() >= rec[2]:
                rec[1] += rootfaults.fill_inodes(rec[0])
                rec[2] = now() + 1.0
        if now() >= self.next_grow:
            self.next_grow = now() + 5.0
            busy = {os.path.dirname(rec[0]) for rec in list(self.fillers.values()) + list(self.inode_fillers.values())}
            try:
                for path, size in self.lab.grow(busy):
                    self.event("tmpfs-grown", path=os.path.relpath(path, self.run), size_mib=size >> 20)
            except rootfaults.LabError as e:
                raise SoakError(f"growing a tmpfs: {e}")

    def step_clock(self, i, step_s):
        self.lab.set_clock(i, step_s)
        self._look_at_clock(i, step_s)
        return {"step_s": step_s}

    def unstep_clock(self, i):
        self.lab.set_clock(i, 0)
        self._look_at_clock(i, 0)

    def _look_at_clock(self, i, step_s):
        """3 s on (libfaketime re-reads its file each second), the worker's own wall clock as its
        status shows it (the last contact, in its time), compared with ours: an event."""

        def look():
            time.sleep(3.0)
            argv = [self.gpupool, "--json", "worker", "status", "--work-dir", self.worker_dir(i)]
            try:
                r = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=10)
                seen = json.loads(r.stdout)["worker"]["last_contact_ms"] / 1000.0 - now()
                self.event("clock-seen", index=i, step_s=step_s, seen_s=round(seen, 1))
            except (subprocess.TimeoutExpired, ValueError, KeyError, TypeError) as e:
                self.event("clock-seen", index=i, step_s=step_s, seen_s=None, err=str(e)[:200])

        th = threading.Thread(target=look, daemon=True)
        th.start()
        self.lookers.append(th)

    def owner(self, i, action, now_flag=False):
        argv = [self.gpupool, "worker", action, "--work-dir", self.worker_dir(i)]
        if action == "pause":
            argv += ["--why", "soak owner"] + (["--now"] if now_flag else [])
        t0 = now()
        try:
            r = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=15)
            rc, err = r.returncode, r.stderr.strip()[-300:]
        except subprocess.TimeoutExpired:
            rc, err = None, "timed out after 15 s"
        self.event(f"owner-{action}", index=i, now=now_flag, rc=rc, ms=round((now() - t0) * 1000, 1), err=err,
                   paused_file=self.owner_paused(i))
        self.last_owner[i] = now()
        if rc != 0:
            self.owner_checks.append((now() + 10, i, action, self.last_owner[i]))
        return rc == 0

    def owner_paused(self, i):
        """The worker's own record of its owner's pause (docs/worker.md): the truth, whatever the
        command answered."""
        return os.path.exists(os.path.join(self.worker_dir(i), "paused"))

    def check_refused_owner_commands(self, force=False):
        """A pause or resume that was refused (or timed out) but took effect later is recorded."""
        for item in list(self.owner_checks):
            due, i, action, at = item
            if not force and now() < due:
                continue
            self.owner_checks.remove(item)
            if self.last_owner[i] != at:
                continue  # another owner command since: cannot tell
            applied = self.owner_paused(i) if action == "pause" else not self.owner_paused(i)
            if applied:
                self.event("owner-refused-but-applied", index=i, action=action, refused_at=at)

    # ----- clients
    def start_client(self, i):
        self.client_incarnations[i] += 1
        d = os.path.join(self.run, "clients", f"c{i}")
        os.makedirs(d, exist_ok=True)
        argv = [sys.executable, os.path.abspath(__file__), "client", "--run-dir", self.run, "--index", str(i),
                "--seed", str(self.seed), "--gpupool", self.gpupool, "--url", self.url, "--token-file",
                os.path.join(self.run, "tokens", f"member-{i}"), "--incarnation", str(self.client_incarnations[i]),
                "--pace", str(self.args.pace)]
        self.clients[i] = Child(f"client-{i}", argv, self.env, os.path.join(d, "stdout"), os.path.join(d, "stderr"))
        self.event("client-started", index=i, pid=self.clients[i].pid)

    def kill9_client(self, i):
        self.clients[i].kill9(group=True)  # the client and the gpupool command it was running

    def restart_client(self, i):
        self.start_client(i)

    # ----- the prober: API latency, and the workers' presence as the coordinator reports it
    def probe_loop(self):
        member = self.member_tokens[0]
        last_workers = 0.0
        while not self.stop_probe.is_set():
            t0 = now()
            ok = False
            try:  # as a client does: the coordinator that answered last, then the next (PostgreSQL pair)
                self.api(member, "/v1/jobs?limit=1", timeout=5, raw=True)
                ok = True
            except (urllib.error.URLError, OSError, ValueError):
                ok = False
            t1 = now()
            self.probes.append([t0, ok, round((t1 - t0) * 1000, 2)])
            if t1 - last_workers >= 1.0:
                last_workers = t1
                try:
                    body = self.api(self.admin, "/v1/workers", timeout=5)
                    self.presence.append([now(), {w["name"]: w["presence"] for w in body["workers"]}])
                except (urllib.error.URLError, OSError, ValueError, KeyError):
                    pass
            self.stop_probe.wait(max(0.0, 0.25 - (now() - t0)))

    # ----- faults
    def inject(self, ev):
        kind = faults.KINDS_BY_NAME[ev["kind"]]
        key = (kind.target, ev["index"])
        if key in self.faulted:
            self.event("fault-skipped", kind=kind.name, index=ev["index"], why="target already faulted")
            return
        if kind.target == "worker" and self.workers[ev["index"]] is not None and not self.workers[ev["index"]].alive():
            self.event("fault-skipped", kind=kind.name, index=ev["index"], why="worker not running")
            return
        rec = {"kind": kind.name, "target": kind.target, "index": ev["index"], "planned_at": ev["at"],
               "down": ev["down"], "inject_t": now()}
        method = getattr(self, kind.inject)
        try:
            extra = (method(ev["index"], ev["param"]) if "param" in ev else method(ev["index"])) or {}
        except rootfaults.LabError as e:
            self.event("fault-failed", kind=kind.name, index=ev["index"], why=str(e)[:300])
            raise SoakError(f"injecting {kind.name} on {ev['index']}: {e}")
        rec["heal_due"] = now() + ev["down"]
        self.faulted[key] = rec
        self.event("fault-injected", kind=kind.name, index=ev["index"], down=ev["down"], **extra)

    def heal(self, key):
        rec = self.faulted.pop(key)
        kind = faults.KINDS_BY_NAME[rec["kind"]]
        begun = now()  # recovery is measured from here: a restart's own start-up counts
        try:
            extra = getattr(self, kind.heal)(rec["index"]) or {}
        except rootfaults.LabError as e:
            self.event("heal-failed", kind=kind.name, index=rec["index"], why=str(e)[:300])
            raise SoakError(f"healing {kind.name} on {rec['index']}: {e}")
        rec["heal_t"] = now()
        self.event("fault-healed", kind=kind.name, index=rec["index"], injected_at=rec["inject_t"], begun_at=begun,
                   **extra)

    def heal_due(self, force=False):
        for key, rec in list(self.faulted.items()):
            if force or now() >= rec["heal_due"]:
                self.heal(key)
        self.top_up()

    def watch_children(self):
        """A pool process that exited without a fault is the pool's doing: recorded, restarted."""
        for i, due in list(self.pending_coords.items()):
            if now() >= due and ("coordinator", i) not in self.faulted:
                del self.pending_coords[i]
                self.start_coordinator(i)
        for i, c in enumerate(self.coords):
            if c is not None and not c.alive() and ("coordinator", i) not in self.faulted:
                self.event("unexpected-exit", target="coordinator", index=i, rc=c.popen.returncode,
                           incarnation=self.coord_incarnations[i])
                self.start_coordinator(i)
        for i, w in enumerate(self.workers):
            if w is not None and not w.alive() and ("worker", i) not in self.faulted and not w.expected_exit:
                self.event("unexpected-exit", target="worker", index=i, rc=w.popen.returncode)
                self.start_worker(i)
        for i, c in enumerate(self.clients):
            if c is not None and not c.alive() and ("client", i) not in self.faulted and not c.expected_exit:
                self.event("client-exited", index=i, rc=c.popen.returncode)
                self.start_client(i)

    # ----- clean-up: everything this run started, even on an interrupt
    def kill_everything(self):
        self.stop_probe.set()
        for c in self.coords + self.workers + self.clients + [self.loadgen]:
            if c is not None and c.alive():
                c.signal(signal.SIGCONT, group=True)
                c.signal(signal.SIGKILL, group=True)
                try:
                    c.popen.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
        for pid, _ in leftover_processes(self.run):
            try:
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _loadgen_requests(text):
    """The load generator's steady-state line: "== steady load: S s, N requests, R per second"."""
    m = re.search(r"== steady load: ([0-9.]+) s, (\d+) requests, ([0-9.]+) per second", text)
    return {"seconds": float(m.group(1)), "requests": int(m.group(2)), "per_second": float(m.group(3))} if m else None


def leftover_processes(run_dir):
    """Processes (not this one) whose command line or environment names this run's folder."""
    found = []
    me = os.getpid()
    needle = run_dir.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read()
            hit = needle in cmd
            if not hit:
                try:
                    with open(f"/proc/{entry}/environ", "rb") as f:
                        hit = b"SOAK_RUN=" + needle in f.read()
                except OSError:
                    pass
            if hit:
                found.append((int(entry), cmd.replace(b"\0", b" ").decode(errors="replace")[:300]))
        except OSError:
            continue
    return found


def api_get(url, token, path, timeout=10, raw=False):
    req = urllib.request.Request(url + path, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        body = r.read()
    return body if raw else json.loads(body)


def run_soak(args):
    args.t_start = now()
    run_dir = tempfile.mkdtemp(prefix=f"soak-{args.seed}-", dir=args.tmp)
    print(f"soak: seed {args.seed}, {args.minutes:g} min of load, {args.store}, {args.workers} workers, "
          f"{args.clients} clients, "
          f"run folder {run_dir}", flush=True)
    print(f"soak: repeat with: {sys.argv[0]} --seed {args.seed} --minutes {args.minutes:g} --workers {args.workers} "
          f"--clients {args.clients} --store {args.store} --sim-workers {args.sim_workers} --gpupool {args.gpupool}" +
          (" --no-root-faults" if args.no_root_faults else ""),
          flush=True)
    pool = Pool(args, run_dir)
    interrupted = []

    def on_signal(signo, _frame):
        interrupted.append(signo)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    violations = None
    keep = args.keep
    try:
        violations = drive(args, pool)
        keep = keep or bool(violations)
    except KeyboardInterrupt:
        print("soak: interrupted; stopping everything it started", file=sys.stderr)
    except BaseException:
        keep = True  # the harness failed: its folder says why
        raise
    finally:
        pool.kill_everything()
        pool.stop_database()
        for err in pool.lab.cleanup(keep=keep):
            print(f"soak: cleaning up the lab: {err}", file=sys.stderr)
        left = leftover_processes(run_dir)
        if left:
            print(f"soak: {len(left)} processes still name the run folder after clean-up: {left}", file=sys.stderr)
        if not keep:
            shutil.rmtree(run_dir, ignore_errors=True)
        else:
            print(f"soak: run folder kept: {run_dir}", flush=True)
    if violations is None:
        return 2
    return 1 if violations else 0


def set_up_lab(pool):
    """The lab's namespaces, mounts and clock files (rootfaults.py); {kind: eligible targets}, with
    [] for a kind whose capability is missing (one line says which and why)."""
    lab = pool.lab
    lab.setup()
    if lab.swept:
        print(f"soak: removed what an earlier, killed run left: {' '.join(lab.swept)}", flush=True)
    have, missing = lab.summary()
    if have:
        print("soak: lab: " + "; ".join(have), flush=True)
    eligible, skipped = {}, []
    for k in faults.FAULT_KINDS:
        if k.name == "coordinator-disk-full" and pool.pg:
            eligible[k.name] = []
            skipped.append(f"{k.name} (the SQLite variant's: on PostgreSQL the coordinators keep nothing on disk)")
            continue
        if not k.needs:
            continue
        if not lab.has(k.needs):
            eligible[k.name] = []
            skipped.append(f"{k.name} ({lab.missing[k.needs]})")
        elif k.target == "worker":
            eligible[k.name] = lab.indices({"netns": "net", "tmpfs": "spool", "faketime": "clock"}[k.needs])
    if skipped:
        print("soak: skipping fault kinds: " + "; ".join(skipped) + ". The other kinds run.", flush=True)
    pool.event("lab", have=have, missing=missing, skipped=skipped, eligible=eligible,
               roles={str(i): rootfaults.role(i) for i in range(pool.args.workers)})
    return eligible


def drive(args, pool):
    duration = args.minutes * 60.0
    counts = {"coordinator": len(pool.coords), "worker": args.workers, "client": args.clients,
              "database": 1 if pool.pg else 0}
    eligible = set_up_lab(pool)
    schedule = faults.draw_schedule(args.seed, duration, counts, mean_gap_s=args.mean_gap, eligible=eligible)
    faults.save(os.path.join(pool.run, "schedule.json"), args.seed, schedule)
    if pool.pg:
        pool.start_database()
        pool.event("database-started", url=pool.db_url)
    pool.start_coordinator(0)
    if pool.pg:  # the first one holds the pool before the standby starts
        deadline = now() + 30
        while not pool.serves(0) and now() < deadline:
            time.sleep(0.1)
        for i in range(1, len(pool.coords)):
            pool.start_coordinator(i)
    pool.setup_pool()
    for i in range(args.workers):
        pool.start_worker(i)
    deadline = now() + 60
    while now() < deadline:
        try:
            ws = pool.api(pool.admin, "/v1/workers")["workers"]
            if sum(1 for w in ws if w["presence"] == "online") >= args.workers:
                break
        except (urllib.error.URLError, OSError, ValueError):
            pass
        time.sleep(0.5)
    else:
        raise SoakError("the workers did not all come online within 60 s")
    prober = threading.Thread(target=pool.probe_loop, daemon=True)
    prober.start()
    t_load = now()
    pool.event("load-started", seed=args.seed, minutes=args.minutes, faults_planned=len(schedule))
    if args.sim_workers:
        pool.start_loadgen(duration)
    for i in range(args.clients):
        pool.start_client(i)
    owner_rng = random.Random(f"soak-owner-{args.seed}")
    next_owner = t_load + owner_rng.uniform(5, 20)
    pending = list(schedule)
    while now() < t_load + duration:
        while pending and now() >= t_load + pending[0]["at"]:
            pool.inject(pending.pop(0))
        pool.heal_due()
        pool.watch_children()
        if now() >= next_owner:
            next_owner = now() + owner_rng.uniform(5, 20)
            i = owner_rng.randrange(args.workers)
            now_flag = owner_rng.random() < 0.3
            if ("worker", i) not in pool.faulted:
                if pool.owner_paused(i):
                    pool.owner(i, "resume")
                else:
                    pool.owner(i, "pause", now_flag)
        pool.check_refused_owner_commands()
        time.sleep(0.05)
    t_load_end = now()
    pool.event("load-stopped")
    pool.stop_loadgen(60)
    # Stop the clients (they finish the command they are in), heal what is still faulted, resume.
    open(os.path.join(pool.run, "stop"), "w").close()
    pool.heal_due(force=True)
    deadline = now() + 90
    for i, c in enumerate(pool.clients):
        c.expected_exit = True
        while c.alive() and now() < deadline:
            time.sleep(0.2)
        if c.alive():
            pool.event("client-stuck", index=i)
            c.kill9(group=True)
    time.sleep(1)
    pool.check_refused_owner_commands(force=True)
    for i in range(args.workers):
        for _ in range(10):
            if not pool.owner_paused(i):
                break
            if not pool.owner(i, "resume"):
                time.sleep(2)
        if pool.owner_paused(i):
            pool.event("owner-resume-failed", index=i)
    # Drain: every acknowledged job terminal, within a bound.
    acks = checker.acknowledged(pool.run)
    acked_ids = {j for a in acks.values() for j in a["jobs"]}
    t_drain = now()
    nonterminal = set(acked_ids)
    while now() < t_drain + args.drain_timeout:
        pool.watch_children()
        try:
            jobs = pool.api(pool.member_tokens[0], "/v1/jobs", timeout=30)["jobs"]
            states = {j["id"]: j["state"] for j in jobs}
            nonterminal = {j for j in acked_ids if states.get(j) not in ("succeeded", "failed", "cancelled")}
            if not nonterminal:
                break
        except (urllib.error.URLError, OSError, ValueError):
            pass
        time.sleep(1)
    drained_s = now() - t_drain
    pool.event("drained", seconds=round(drained_s, 1), nonterminal=sorted(nonterminal)[:50])
    # Every worker back online (its faults ended), within a bound.
    t_online = now()
    final_presence = {}
    while now() < t_online + 60:
        try:
            ws = pool.api(pool.admin, "/v1/workers")["workers"]
            final_presence = {w["name"]: w["presence"] for w in ws}
            if all(final_presence.get(f"soak-w{i}") == "online" for i in range(args.workers)):
                break
        except (urllib.error.URLError, OSError, ValueError):
            pass
        time.sleep(0.5)
    pool.stop_probe.set()
    prober.join(timeout=10)
    for th in pool.lookers:
        th.join(timeout=15)
    print(f"soak: load ran {t_load_end - t_load:.0f} s; drained in {drained_s:.0f} s; collecting the history",
          flush=True)
    api = checker.collect_api(pool.serving_url(), pool.member_tokens[0], pool.admin, acked_ids)
    api["workers"] = final_presence
    # Stop the workers (idle now: SIGTERM is a clean leave), then look for what they left.
    worker_exits = {}
    for i, w in enumerate(pool.workers):
        worker_exits[f"soak-w{i}"] = w.stop(30)
    time.sleep(1)
    left_after_workers = leftover_processes(pool.run)
    pool.event("nat", connections=pool.lab.nat_connections())
    coord_pids = {c.pid for c in pool.coords}
    left_after_workers = [p for p in left_after_workers if p[0] not in coord_pids]
    coord_clean = all([c.stop(30) for c in pool.coords])  # every one, even after one failed
    if pool.pg:
        # The checker reads a SQLite file: `admin migrate` copies the pool out of PostgreSQL and checks
        # its copy (every record equal, every log's ranges, the ledger and the cached balances).
        copy = os.path.join(pool.run, "coord", "pool.db")
        r = subprocess.run([pool.gpupool, "--json", "admin", "migrate", "--from", pool.db_url, "--to", copy],
                           env=pool.env, capture_output=True, text=True, timeout=600)
        pool.event("store-copied", rc=r.returncode, out=r.stdout.strip()[-2000:], err=r.stderr.strip()[-2000:])
        if r.returncode != 0:
            raise SoakError(f"copying the PostgreSQL pool to {copy} failed: {r.stderr.strip()[-1500:]}")
    history = checker.collect(pool.run, args, t_load, t_load_end, api, pool.probes, pool.presence,
                              left_after_workers, worker_exits, coord_clean, sorted(nonterminal), drained_s)
    with open(os.path.join(pool.run, "history.json"), "w") as f:
        json.dump(history, f)
    violations = checker.check(history)
    report = checker.table(history, violations)
    with open(os.path.join(pool.run, "report.txt"), "w") as f:
        f.write(report)
    print(report, flush=True)
    return violations


# ----------------------------------------------------------------------------- client mode
def client_main(argv):
    p = argparse.ArgumentParser(prog="soak.py client")
    p.add_argument("--run-dir", required=True)
    p.add_argument("--index", type=int, required=True)
    p.add_argument("--seed", required=True)
    p.add_argument("--gpupool", required=True)
    p.add_argument("--url", required=True)
    p.add_argument("--token-file", required=True)
    p.add_argument("--incarnation", type=int, default=1)
    p.add_argument("--pace", type=float, default=1.0)
    a = p.parse_args(argv)
    d = os.path.join(a.run_dir, "clients", f"c{a.index}")
    for sub in ("acks", "recipes", "fetch"):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
    journal_path = os.path.join(d, "journal.jsonl")
    seq = 0
    if os.path.exists(journal_path):
        for line in open(journal_path):
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # a line cut by a kill -9
            if rec.get("op") == "submit" and rec.get("phase") == "intent":
                seq = max(seq, rec["seq"] + 1)
    journal = open(journal_path, "a")
    rng = random.Random(f"soak-client-{a.seed}-{a.index}-{a.incarnation}")
    stop_file = os.path.join(a.run_dir, "stop")
    base = [a.gpupool, "--url", a.url, "--token-file", a.token_file, "--json"]

    def log(rec):
        rec["client"] = a.index
        journal.write(json.dumps(rec) + "\n")
        journal.flush()
        os.fsync(journal.fileno())

    def call(op, args, stdout_path=None, timeout=120, **ctx):
        """Runs one gpupool command: a `begin` record first (a command cut by a kill -9 may still
        have been applied), then the end record with its exit status and what it answered."""
        t0 = now()
        begin = {"op": op, "phase": "begin", "t0": t0}
        begin.update(ctx)
        log(begin)
        out = open(stdout_path, "w") if stdout_path else subprocess.PIPE
        try:
            r = subprocess.run(base + args, stdout=out, stderr=subprocess.PIPE, text=True, timeout=timeout)
            rc, text, err = r.returncode, (r.stdout or ""), r.stderr
        except subprocess.TimeoutExpired:
            rc, text, err = None, "", "timed out"
        finally:
            if stdout_path:
                out.close()
        t1 = now()
        rec = {"op": op, "t0": t0, "t1": t1, "rc": rc, "err": (err or "").strip()[-300:]}
        rec.update(ctx)
        try:
            answer = json.loads(text) if text.strip() else None
        except ValueError:
            answer = None  # e.g. several documents, one per job
        if rc != 0:
            if isinstance(answer, dict) and isinstance(answer.get("error"), dict):
                rec["err"] = f"{answer['error'].get('code')}: {answer['error'].get('message', '')[:200]}"
            elif text.strip():
                rec["err"] = (rec["err"] + " " + text.strip()[-200:]).strip()
        elif op in ("cancel", "retry"):
            rec["answer"] = answer
        return rec, text

    def acked():
        out = {}
        for name in os.listdir(os.path.join(d, "acks")):
            try:
                body = json.loads(open(os.path.join(d, "acks", name)).read())
                if isinstance(body, dict) and "sweep_id" in body and body.get("jobs"):
                    out[name[:-5]] = body  # else what a failed submit printed: {"error": ...}
            except (ValueError, OSError):
                pass
        return out

    while not os.path.exists(stop_file):
        op = rng.choices(["submit", "cancel", "retry", "fetch", "jobs"], weights=[6, 1, 1.5, 1.2, 1])[0]
        mine = acked()
        if op != "submit" and not mine:
            op = "submit"
        if op == "submit":
            tag = f"c{a.index}s{seq}"
            shape = workload.sweep_shape(rng)
            recipe_path = os.path.join(d, "recipes", f"{tag}.toml")
            with open(recipe_path, "w") as f:
                f.write(workload.recipe(tag, shape, a.run_dir))
            log({"op": "submit", "phase": "intent", "seq": seq, "tag": tag, "shape": shape, "t": now()})
            seq += 1
            rec, _ = call("submit", ["submit", recipe_path], stdout_path=os.path.join(d, "acks", f"{tag}.json"),
                          tag=tag)
            log(rec)
        elif op == "cancel":
            tag = rng.choice(sorted(mine))
            if rng.random() < 0.25:
                sweep = mine[tag]["sweep_id"]
                rec, _ = call("cancel", ["cancel", "--sweep", str(sweep)], tag=tag, sweep=sweep)
            else:
                job = rng.choice(mine[tag]["jobs"])
                rec, _ = call("cancel", ["cancel", str(job)], tag=tag, job=job)
            log(rec)
        elif op == "retry":
            tag = rng.choice(sorted(mine))
            sweep = mine[tag]["sweep_id"]
            rec, _ = call("retry", ["retry", "--sweep", str(sweep), "--failed", "--cancelled"], tag=tag, sweep=sweep)
            log(rec)
        elif op == "fetch":
            tag = rng.choice(sorted(mine))
            into = os.path.join(d, "fetch", tag)
            rec, _ = call("fetch", ["fetch", "--sweep", str(mine[tag]["sweep_id"]), into, "--force"], tag=tag)
            rec["checked"], rec["mismatch"] = check_fetched(into, tag, a.run_dir)
            shutil.rmtree(into, ignore_errors=True)
            log(rec)
        else:
            rec, _ = call("jobs", ["jobs", "--mine", "--limit", "20"])
            log(rec)
        time.sleep(rng.uniform(0.3, 2.5) * a.pace)
    return 0


def check_fetched(into, tag, run_dir):
    """Files `fetch` put in place must be what the job wrote: (files checked, mismatches)."""
    import hashlib

    shapes = {}
    checked, mismatch = 0, []
    if not os.path.isdir(into):
        return 0, []
    for job_dir in os.listdir(into):
        parsed = workload.parse_job_name(job_dir)
        if parsed is None or parsed[0] != tag:
            continue
        _, k = parsed
        if tag not in shapes:
            shapes[tag] = shape_of(run_dir, tag)
        big = bool(shapes[tag] and shapes[tag].get("big"))
        if not os.path.exists(os.path.join(into, job_dir, "attempt.txt")):
            # The job writes attempt.txt last: without it these are the outputs of an attempt that
            # failed part-way (a write refused by a full spool, say), fetched as they came back; a
            # succeeded job's outputs are checked whole by the checker from the API.
            continue
        for name, digest in workload.expected_outputs(tag, k, big).items():
            path = os.path.join(into, job_dir, name)
            if not os.path.exists(path):
                if os.listdir(os.path.join(into, job_dir)):
                    mismatch.append(f"{job_dir}/{name} missing")
                continue
            checked += 1
            if hashlib.sha256(open(path, "rb").read()).hexdigest() != digest:
                mismatch.append(f"{job_dir}/{name} differs")
    return checked, mismatch


def shape_of(run_dir, tag):
    c = tag[1:tag.index("s")]
    path = os.path.join(run_dir, "clients", f"c{c}", "journal.jsonl")
    for line in open(path):
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("tag") == tag and rec.get("phase") == "intent":
            return rec["shape"]
    return None


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "client":
        return client_main(sys.argv[2:])
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=float(os.environ.get("SOAK_MINUTES", "30")))
    p.add_argument("--seed", default=os.environ.get("SOAK_SEED") or None,
                   help="the fault schedule's and the clients' seed (default: a random one, printed)")
    p.add_argument("--workers", type=int, default=int(os.environ.get("SOAK_WORKERS", "8")))
    p.add_argument("--clients", type=int, default=int(os.environ.get("SOAK_CLIENTS", "3")))
    p.add_argument("--slots", type=int, default=3, help="jobs at once per worker (--slots)")
    p.add_argument("--pace", type=float, default=1.0, help="multiplies the clients' pauses between commands")
    p.add_argument("--mean-gap", type=float, default=6.0, help="mean seconds between faults")
    p.add_argument("--drain-timeout", type=float, default=300.0)
    p.add_argument("--store", choices=("sqlite", "postgres"), default=os.environ.get("SOAK_STORE", "sqlite"),
                   help="sqlite: one coordinator on a SQLite file; postgres: an active coordinator and a "
                        "standby on one PostgreSQL 15 (started here, as tests/pg/pg_server.sh does)")
    p.add_argument("--sim-workers", type=int, default=int(os.environ.get("SOAK_SIM_WORKERS", "200")),
                   help="simulated workers from the load generator beside the real ones (0: none)")
    p.add_argument("--loadgen", default=os.environ.get("GPUPOOL_LOADGEN", ""),
                   help="bench/coordinator_loadgen's binary (default: beside --gpupool; `make bench` builds it)")
    p.add_argument("--gpupool", default=default_gpupool())
    p.add_argument("--tmp", default="/tmp", help="where the run folder soak-SEED-* goes")
    p.add_argument("--keep", action="store_true", help="keep the run folder (it is always kept on a violation)")
    p.add_argument("--no-root-faults", action="store_true", default=bool(os.environ.get("SOAK_NO_ROOT_FAULTS")),
                   help="leave out the kinds that need namespaces, tmpfs or libfaketime (as when not root)")
    p.add_argument("-v", "--verbose", action="store_true", help="print every event")
    p.add_argument("--self-test", nargs="?", const="", metavar="RUN_DIR",
                   help="check that the checker reports doctored histories (a kept run's, or a built-in one)")
    p.add_argument("--check", metavar="RUN_DIR", help="run the checker again on a kept run's history.json")
    args = p.parse_args()
    if args.self_test is not None:
        return checker.self_test(args.self_test or None)
    if args.check:
        history = json.load(open(os.path.join(args.check, "history.json")))
        violations = checker.check(history)
        print(checker.table(history, violations))
        return 1 if violations else 0
    if args.seed is None:
        args.seed = str(random.SystemRandom().randrange(1, 10**6))
    args.gpupool = os.path.abspath(args.gpupool)
    args.loadgen = os.path.abspath(args.loadgen or os.path.join(os.path.dirname(args.gpupool), "coordinator_loadgen"))
    if args.sim_workers and not os.access(args.loadgen, os.X_OK):
        print(f"soak: no simulated workers: {args.loadgen} is not built (`make bench` builds it; --loadgen, "
              f"GPUPOOL_LOADGEN). The rest runs.", flush=True)
        args.sim_workers = 0
    if not os.access(args.gpupool, os.X_OK):
        print(f"soak: no gpupool binary at {args.gpupool} (--gpupool, GPUPOOL)", file=sys.stderr)
        return 2
    try:
        return run_soak(args)
    except SoakError as e:
        print(f"soak: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
