"""The soak's lab: what the faults beyond kill and stop need, set up before the pool starts and
removed after it (issue 46).

  netns     some workers (Lab.NET_SLOTS of every 8) each run in a network namespace of their own,
            joined by a veth pair to a bridge in the host's namespace that holds the coordinator's
            address (10.214.K.1/24; the coordinator listens there, and a host nft table drops what
            reaches that subnet from anywhere but the bridge and loopback). A partition is a table in
            the worker's namespace that drops everything but loopback; packet loss is one that drops
            a random share of what crosses its veth (nft `numgen random`: this kernel has no netem).
            Of those, the workers in Lab.NAT_SLOTS sit behind a NAT, as an owner's machine at home
            does: their namespace hangs off a router namespace (sk<pid>-r, on the bridge as
            10.214.K.2) on a private subnet (10.215.K.0/24) that the router masquerades; the
            coordinator's side has no route to it through the router and sees their connections
            come from the router. The
            masquerade rule counts the connections it translated (nat_connections()).
            Needs root, `ip` and `nft`.
  tmpfs     the coordinator's folder (pool.db and its WAL) and the work dirs of some workers
            (Lab.SPOOL_SLOTS) are small tmpfs mounts, filled to the last byte by a filler file during
            a fault, which is topped up while it lasts (what the pool frees is taken again) and
            removed at its end. Needs root and `mount`.
  faketime  some workers (Lab.CLOCK_SLOTS) run with libfaketime preloaded, reading their offset
            from a file the harness rewrites (FAKETIME_TIMESTAMP_FILE, re-read each second): the
            wall clock steps, the monotonic one does not (FAKETIME_DONT_FAKE_MONOTONIC). Needs the
            Debian package `faketime` (libfaketime), not root.

Everything is named by the harness's pid (namespaces sk<pid>-w<i> and sk<pid>-r, links sk<pid>b,
sk<pid>r and sk<pid>w<i>,
the nft table soak_<pid>, mounts of the source soak-<pid>-...): cleanup() removes them on every exit
the harness sees, and sweep() removes those of an earlier harness that is gone (killed with
SIGKILL) before a run makes its own. A capability that is missing (not root, a tool not
installed, a set-up step that failed) is reported once, and the fault kinds needing it are left out
of the schedule; the run goes on with the rest.
"""

import ctypes
import errno
import glob
import json
import os
import re
import shutil
import subprocess
import time

NET_SLOTS = (0, 1, 2)  # worker index % 8 in these: in a network namespace of its own
NAT_SLOTS = (2,)  # ... of which these behind the router's NAT (the others on the bridge directly)
SPOOL_SLOTS = (3,)  # ... work dir on a small tmpfs
CLOCK_SLOTS = (4,)  # ... libfaketime preloaded
SPOOL_TMPFS = "64m"
SPOOL_INODES = 16384  # the worker tmpfs's inodes: few enough that `worker-inodes-full` fills them in a second
INODES_BELOW = 2048  # outside a fault, a spool tmpfs with fewer free inodes gets ...
INODES_BY = 8192  # ... this many more
COORD_TMPFS = "256m"
GROW_BELOW = {"coord": 96 << 20, "spool": 16 << 20}  # outside a fault, a tmpfs with less free grows ...
GROW_BY = {"coord": 256 << 20, "spool": 32 << 20}  # ... by this much (the big outputs live in pool.db)
FILLER = "soak-filler"
INODE_FILLER = "soak-inode-filler"  # a folder of empty files, one per inode
FAULT_TABLE = "soakfault"  # the nft table in a worker's namespace while it is partitioned or lossy
CLONE_NEWNET = 0x40000000
FAKETIME_LIBS = ("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1", "/usr/lib/*/faketime/libfaketime.so.1",
                 "/usr/lib/faketime/libfaketime.so.1", "/usr/local/lib/faketime/libfaketime.so.1")


class LabError(Exception):
    pass


def _run(argv, input=None, check=True, timeout=30):
    try:
        r = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        if check:
            raise LabError(f"`{' '.join(argv)}`: {e}")
        return None
    if check and r.returncode != 0:
        raise LabError(f"`{' '.join(argv)}` exited {r.returncode}: {(r.stderr or r.stdout).strip()[:300]}")
    return r


def _harness_alive(pid):
    """Whether pid is a soak harness still running (not a stale name from a killed one)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"soak.py" in f.read()
    except OSError:
        return False


def role(i):
    """What a worker index is for: 'net', 'spool', 'clock' or None (a plain worker)."""
    slot = i % 8
    if slot in NET_SLOTS:
        return "net"
    if slot in SPOOL_SLOTS:
        return "spool"
    if slot in CLOCK_SLOTS:
        return "clock"
    return None


def behind_nat(i):
    """Whether worker i (in a namespace) reaches the coordinator through the router's NAT."""
    return role(i) == "net" and i % 8 in NAT_SLOTS


def find_faketime():
    for pattern in FAKETIME_LIBS:
        for path in sorted(glob.glob(pattern)):
            if os.path.exists(path):
                return path
    return None


def fill(path):
    """Appends to the filler file `path` until its file system has no byte left; bytes written."""
    written = 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for size in (1 << 20, 1 << 16, 4096, 512, 1):
            buf = b"\0" * size
            while True:
                try:
                    n = os.write(fd, buf)
                except OSError as e:
                    if e.errno not in (errno.ENOSPC, errno.EDQUOT):
                        raise
                    break
                written += n
                if n < size:
                    break
    finally:
        os.close(fd)
    return written


def fill_inodes(folder):
    """Creates empty files in `folder` (made if missing) until its file system has no inode left;
    files made. Each takes an inode and no block, so the disk keeps its bytes: only creating a
    file (or a folder) fails, with ENOSPC, as on a disk out of inodes."""
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:
        if e.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        return 0
    made = 0
    n = len(os.listdir(folder))
    while True:
        try:
            os.close(os.open(os.path.join(folder, f"i{n}"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            n += 1
            continue
        except OSError as e:
            if e.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            return made
        made += 1
        n += 1


def free_inodes(path):
    return os.statvfs(path).f_favail


def free_bytes(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


class Lab:
    """The namespaces, mounts and clock files of one run; see the module's comment."""

    def __init__(self, run_dir, workers, enabled=True, log=print, coord_tmpfs=True):
        self.run = run_dir
        self.workers = workers
        self.coord_tmpfs = coord_tmpfs  # coord/ on a tmpfs of its own (the SQLite variant's disk-full)
        self.pid = os.getpid()
        self.log = log
        self.enabled = enabled
        self.missing = {}  # capability -> why it is not there
        self.subnet = None  # "10.214.K"
        self.bridge = f"sk{self.pid}b"
        self.table = f"soak_{self.pid}"
        self.made_links = []
        self.made_ns = []
        self.mounts = []  # mount points, in the order made
        self.mount_kind = {}  # mount point -> "coord" or "spool"
        self.host_table = False
        self.faketime_lib = None
        self.swept = []

    # ----- what there is
    def has(self, cap):
        return cap not in self.missing

    def indices(self, which):
        return [i for i in range(self.workers) if role(i) == which]

    def listen_host(self):
        return f"{self.subnet}.1" if self.has("netns") and self.subnet else "127.0.0.1"

    def worker_address(self, i):
        return f"{self.private_subnet() if behind_nat(i) else self.subnet}.{10 + i}"

    def private_subnet(self):
        """The NATed workers' subnet: 10.215.K where the bridge is 10.214.K."""
        return "10.215." + self.subnet.split(".")[2]

    def router_ns(self):
        return f"sk{self.pid}-r"

    def ns(self, i):
        return f"sk{self.pid}-w{i}"

    def veth(self, i):
        return f"sk{self.pid}w{i}"

    # ----- set-up
    def setup(self):
        """Makes what the run can have; records what it cannot (self.missing). Never raises."""
        if not self.enabled:
            for cap in ("netns", "tmpfs", "faketime"):
                self.missing[cap] = "--no-root-faults"
            return
        root = os.geteuid() == 0
        if root:
            try:
                self.sweep()
            except LabError as e:
                self.log(f"soak: sweeping an earlier run's namespaces and mounts: {e}")
        for cap, setup in (("netns", self.setup_net), ("tmpfs", self.setup_tmpfs), ("faketime", self.setup_faketime)):
            if cap != "faketime" and not root:
                self.missing[cap] = "not root"
                continue
            try:
                setup()
            except (LabError, OSError) as e:
                self.missing[cap] = str(e)
                try:
                    {"netns": self.cleanup_net, "tmpfs": lambda: self.cleanup_mounts(keep=False),
                     "faketime": lambda: None}[cap]()
                except (LabError, OSError):
                    pass

    def setup_net(self):
        for tool in ("ip", "nft"):
            if shutil.which(tool) is None:
                raise LabError(f"`{tool}` is not installed (.ci/packages.txt: iproute2, nftables)")
        if not self.indices("net"):
            raise LabError("no worker has a namespace slot (--workers too small)")
        used = set(re.findall(r"inet 10\.214\.(\d+)\.", _run(["ip", "-o", "-4", "addr", "show"]).stdout))
        for k in [(self.pid + n) % 250 + 1 for n in range(250)]:
            if str(k) not in used:
                self.subnet = f"10.214.{k}"
                break
        else:
            raise LabError("no free 10.214.K.0/24 subnet")
        _run(["ip", "link", "add", self.bridge, "type", "bridge"])
        self.made_links.append(self.bridge)
        _run(["ip", "addr", "add", f"{self.subnet}.1/24", "dev", self.bridge])
        _run(["ip", "link", "set", self.bridge, "up"])
        # The coordinator's address answers only this machine: loopback and the bridge.
        _run(["nft", "-f", "-"], input=f"""table inet {self.table} {{
    chain input {{
        type filter hook input priority -5; policy accept;
        ip daddr {self.subnet}.0/24 iifname != {{ "lo", "{self.bridge}" }} drop
    }}
}}
""")
        self.host_table = True
        natted = [i for i in self.indices("net") if behind_nat(i)]
        if natted:
            self.setup_router()
        for i in self.indices("net"):
            ns, veth = self.ns(i), self.veth(i)
            _run(["ip", "netns", "add", ns])
            self.made_ns.append(ns)
            if behind_nat(i):  # its veth's other end is in the router, on the private bridge
                _run(["ip", "-n", self.router_ns(), "link", "add", f"w{i}", "type", "veth", "peer", "name", "eth0",
                      "netns", ns])
                _run(["ip", "-n", self.router_ns(), "link", "set", f"w{i}", "master", "priv"])
                _run(["ip", "-n", self.router_ns(), "link", "set", f"w{i}", "up"])
            else:
                _run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns])
                self.made_links.append(veth)
                _run(["ip", "link", "set", veth, "master", self.bridge])
                _run(["ip", "link", "set", veth, "up"])
            _run(["ip", "-n", ns, "addr", "add", f"{self.worker_address(i)}/24", "dev", "eth0"])
            _run(["ip", "-n", ns, "link", "set", "eth0", "up"])
            _run(["ip", "-n", ns, "link", "set", "lo", "up"])
            if behind_nat(i):
                _run(["ip", "-n", ns, "route", "add", "default", "via", f"{self.private_subnet()}.1"])
        # The fault tables must load here, or the kinds are not there (an nft without numgen, say).
        i = self.indices("net")[0]
        self.lossy(i, 10)
        self.unfault_net(i)

    def setup_router(self):
        """The NAT's router: a namespace on the bridge (10.214.K.2) with a private bridge
        (10.215.K.1/24) for the NATed workers, forwarding between them and masquerading what leaves
        towards the coordinator. The coordinator's side has no route to the private subnet."""
        r, up = self.router_ns(), f"sk{self.pid}r"
        _run(["ip", "netns", "add", r])
        self.made_ns.append(r)
        _run(["ip", "link", "add", up, "type", "veth", "peer", "name", "wan", "netns", r])
        self.made_links.append(up)
        _run(["ip", "link", "set", up, "master", self.bridge])
        _run(["ip", "link", "set", up, "up"])
        _run(["ip", "-n", r, "addr", "add", f"{self.subnet}.2/24", "dev", "wan"])
        _run(["ip", "-n", r, "link", "add", "priv", "type", "bridge"])
        _run(["ip", "-n", r, "addr", "add", f"{self.private_subnet()}.1/24", "dev", "priv"])
        for link in ("lo", "wan", "priv"):
            _run(["ip", "-n", r, "link", "set", link, "up"])
        _run(["ip", "netns", "exec", r, "sysctl", "-qw", "net.ipv4.ip_forward=1"])
        _run(["ip", "netns", "exec", r, "nft", "-f", "-"], input=f"""table ip soaknat {{
    chain post {{
        type nat hook postrouting priority 100; policy accept;
        oifname "wan" ip saddr {self.private_subnet()}.0/24 counter masquerade
    }}
}}
""")

    def nat_connections(self):
        """Connections the router masqueraded so far (its rule's packet counter counts the first
        packet of each); None without a router."""
        if not any(behind_nat(i) for i in self.indices("net")) or not self.has("netns"):
            return None
        r = _run(["ip", "netns", "exec", self.router_ns(), "nft", "list", "table", "ip", "soaknat"], check=False)
        m = re.search(r"counter packets (\d+)", r.stdout if r is not None else "")
        return int(m.group(1)) if m else None

    def mount_tmpfs(self, path, size, what):
        os.makedirs(path, exist_ok=True)
        if os.listdir(path):
            raise LabError(f"{path} is not empty: no tmpfs mounted over it")
        inodes = "" if what == "coord" else f",nr_inodes={SPOOL_INODES}"
        _run(["mount", "-t", "tmpfs", "-o", f"size={size}{inodes},mode=0755", f"soak-{self.pid}-{what}", path])
        self.mounts.append(path)
        self.mount_kind[path] = "coord" if what == "coord" else "spool"

    def setup_tmpfs(self):
        if shutil.which("mount") is None:
            raise LabError("`mount` is not installed")
        if self.coord_tmpfs:
            self.mount_tmpfs(os.path.join(self.run, "coord"), COORD_TMPFS, "coord")
        for i in self.indices("spool"):
            self.mount_tmpfs(os.path.join(self.run, "workers", f"w{i}"), SPOOL_TMPFS, f"w{i}")

    def setup_faketime(self):
        if not self.indices("clock"):
            raise LabError("no worker has a clock slot (--workers too small)")
        lib = find_faketime()
        if lib is None:
            raise LabError("libfaketime is not installed (Debian package `faketime`: .ci/packages.txt)")
        d = os.path.join(self.run, "clock")
        os.makedirs(d, exist_ok=True)
        probe = os.path.join(d, "probe")
        with open(probe, "w") as f:
            f.write("+1000\n")
        env = dict(os.environ, LD_PRELOAD=lib, FAKETIME_TIMESTAMP_FILE=probe, FAKETIME_DONT_FAKE_MONOTONIC="1")
        env.pop("FAKETIME", None)
        r = subprocess.run(["date", "+%s"], env=env, capture_output=True, text=True, timeout=20)
        os.remove(probe)
        try:
            seen = int(r.stdout.strip()) - time.time()
        except ValueError:
            raise LabError(f"libfaketime ({lib}) does not work here: `date` printed {r.stdout!r} {r.stderr[:200]!r}")
        if abs(seen - 1000) > 5:
            raise LabError(f"libfaketime ({lib}) did not step `date` by the file's +1000 s (it moved {seen:.0f} s)")
        self.faketime_lib = lib
        for i in self.indices("clock"):
            self.set_clock(i, 0)

    def grow(self, busy):
        """Grows a tmpfs that is running out of room outside a fault (its mount point not in
        `busy`): the coordinator's store keeps every output, so a long run needs more than it
        started with, and a fault must be the only thing that fills a disk. [(path, new size)]."""
        grown = []
        for path in self.mounts:
            kind = self.mount_kind.get(path)
            if path in busy or kind is None:
                continue
            st = os.statvfs(path)
            options = []
            if st.f_bavail * st.f_frsize < GROW_BELOW[kind]:
                size = st.f_blocks * st.f_frsize + GROW_BY[kind]
                options.append(f"size={size}")
            else:
                size = st.f_blocks * st.f_frsize
            if kind == "spool" and st.f_favail < INODES_BELOW:
                options.append(f"nr_inodes={st.f_files + INODES_BY}")
            if not options:
                continue
            _run(["mount", "-o", "remount," + ",".join(options), path])
            grown.append((path, size))
        return grown

    # ----- what a worker runs with
    def worker_env(self, i, env):
        if role(i) == "clock" and self.has("faketime"):
            env = dict(env)
            env.pop("FAKETIME", None)
            env.update({"LD_PRELOAD": self.faketime_lib, "FAKETIME_TIMESTAMP_FILE": self.clock_file(i),
                        "FAKETIME_CACHE_DURATION": "1", "FAKETIME_DONT_FAKE_MONOTONIC": "1",
                        "FAKETIME_DONT_RESET": "1"})
        return env

    def worker_netns_fd(self, i):
        """An fd of the worker's namespace for setns() in the child, or None (the host's)."""
        if role(i) == "net" and self.has("netns"):
            return os.open(f"/run/netns/{self.ns(i)}", os.O_RDONLY)
        return None

    # ----- the faults
    def _nft_in(self, i, text):
        _run(["ip", "netns", "exec", self.ns(i), "nft", "-f", "-"], input=text)

    def partition(self, i):
        self.unfault_net(i)
        self._nft_in(i, f"""table inet {FAULT_TABLE} {{
    chain in {{ type filter hook input priority -10; policy drop; iifname "lo" accept; }}
    chain out {{ type filter hook output priority -10; policy drop; oifname "lo" accept; }}
}}
""")

    def lossy(self, i, percent):
        self.unfault_net(i)
        p = max(1, min(99, int(round(percent))))
        self._nft_in(i, f"""table inet {FAULT_TABLE} {{
    chain in {{ type filter hook input priority -10; policy accept; iifname "eth0" numgen random mod 100 < {p} drop; }}
    chain out {{ type filter hook output priority -10; policy accept; oifname "eth0" numgen random mod 100 < {p} drop; }}
}}
""")

    def unfault_net(self, i):
        r = _run(["ip", "netns", "exec", self.ns(i), "nft", "list", "tables"], check=False)
        if r is not None and FAULT_TABLE in r.stdout:
            _run(["ip", "netns", "exec", self.ns(i), "nft", "delete", "table", "inet", FAULT_TABLE])

    def clock_file(self, i):
        return os.path.join(self.run, "clock", f"w{i}")

    def set_clock(self, i, offset_s):
        tmp = self.clock_file(i) + ".new"
        with open(tmp, "w") as f:
            f.write(f"{'+' if offset_s >= 0 else '-'}{abs(int(offset_s))}\n")
        os.replace(tmp, self.clock_file(i))

    # ----- clean-up
    def cleanup(self, keep=False):
        """Removes everything this run made; with `keep`, what the tmpfs mounts hold is copied to
        their folders first (the run folder is kept for a look)."""
        errors = []
        for step in (self.cleanup_net, lambda: self.cleanup_mounts(keep)):
            try:
                step()
            except (LabError, OSError) as e:
                errors.append(str(e))
        return errors

    def cleanup_net(self):
        for ns in self.made_ns:
            self.kill_in_ns(ns)
            _run(["ip", "netns", "del", ns], check=False)
        self.made_ns = []
        for link in reversed(self.made_links):
            if os.path.exists(f"/sys/class/net/{link}"):
                _run(["ip", "link", "del", link], check=False)
        self.made_links = []
        if self.host_table:
            _run(["nft", "delete", "table", "inet", self.table], check=False)
            self.host_table = False

    @staticmethod
    def kill_in_ns(ns):
        r = _run(["ip", "netns", "pids", ns], check=False)
        for pid in (r.stdout.split() if r is not None else []):
            try:
                os.kill(int(pid), 9)
            except (ProcessLookupError, ValueError):
                pass

    def cleanup_mounts(self, keep):
        for path in reversed(self.mounts):
            copy = None
            if keep:
                try:
                    filler = os.path.join(path, FILLER)
                    if os.path.exists(filler):
                        os.remove(filler)
                    shutil.rmtree(os.path.join(path, INODE_FILLER), ignore_errors=True)
                    copy = path.rstrip("/") + ".copy"
                    shutil.copytree(path, copy, symlinks=True, ignore_dangling_symlinks=True,
                                    ignore=lambda d, names: [n for n in names if n == "control.sock"])
                except (OSError, shutil.Error):
                    copy = None
            r = _run(["umount", path], check=False)
            if r is None or r.returncode != 0:
                _run(["umount", "-l", path], check=False)
            if copy is not None and os.path.isdir(copy):
                try:
                    os.rmdir(path)
                    os.rename(copy, path)
                except OSError:
                    pass
        self.mounts = []

    def sweep(self):
        """Removes the namespaces, links, nft tables and mounts an earlier harness left when it was
        killed before its clean-up ran (its pid is gone)."""
        r = _run(["ip", "netns", "list"], check=False)
        for line in (r.stdout.splitlines() if r is not None else []):
            m = re.match(r"^(sk(\d+)-(?:w\d+|r))\b", line)
            if m and int(m.group(2)) != self.pid and not _harness_alive(int(m.group(2))):
                self.kill_in_ns(m.group(1))
                _run(["ip", "netns", "del", m.group(1)], check=False)
                self.swept.append(m.group(1))
        for link in os.listdir("/sys/class/net"):
            m = re.match(r"^sk(\d+)(b|r|w\d+)$", link)
            if m and int(m.group(1)) != self.pid and not _harness_alive(int(m.group(1))):
                _run(["ip", "link", "del", link], check=False)
                self.swept.append(link)
        r = _run(["nft", "-j", "list", "tables"], check=False) if shutil.which("nft") else None
        if r is not None and r.returncode == 0:
            try:
                tables = [x["table"] for x in json.loads(r.stdout).get("nftables", []) if "table" in x]
            except ValueError:
                tables = []
            for t in tables:
                m = re.match(r"^soak_(\d+)$", t.get("name", ""))
                if m and int(m.group(1)) != self.pid and not _harness_alive(int(m.group(1))):
                    _run(["nft", "delete", "table", t.get("family", "inet"), t["name"]], check=False)
                    self.swept.append(f"nft {t['name']}")
        with open("/proc/self/mounts") as f:
            mounts = [line.split() for line in f]
        for parts in reversed(mounts):
            m = re.match(r"^soak-(\d+)-", parts[0])
            if m and parts[2] == "tmpfs" and int(m.group(1)) != self.pid and not _harness_alive(int(m.group(1))):
                point = parts[1].replace("\\040", " ")
                r = _run(["umount", point], check=False)
                if r is None or r.returncode != 0:
                    _run(["umount", "-l", point], check=False)
                self.swept.append(point)

    def summary(self):
        """Two lines: what the run has, and what it skipped and why."""
        have = []
        if self.has("netns"):
            have.append(f"workers {' '.join(f'w{i}' for i in self.indices('net'))} in namespaces "
                        f"({self.subnet}.0/24, the coordinator on {self.subnet}.1)" +
                        "".join(f", {' '.join(f'w{i}' for i in natted)} behind a NAT router ({self.private_subnet()}"
                                f".0/24 masqueraded as {self.subnet}.2)" for natted in
                                [[i for i in self.indices("net") if behind_nat(i)]] if natted))
        if self.has("tmpfs"):
            have.append((f"coord/ on a {COORD_TMPFS} tmpfs, " if self.coord_tmpfs else "") +
                        f"{' '.join(f'w{i}' for i in self.indices('spool'))} on {SPOOL_TMPFS} tmpfs")
        if self.has("faketime"):
            have.append(f"{' '.join(f'w{i}' for i in self.indices('clock'))} with libfaketime")
        return have, dict(self.missing)


def setns_preexec(fd):
    """A preexec_fn step: the child joins the network namespace open at `fd`."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "setns into the worker's network namespace")
