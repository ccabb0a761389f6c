"""The fault table and the seeded schedule drawn from it.

A fault kind is one row of FAULT_KINDS: what it targets (the coordinator, a worker, a client), how
often it is drawn (weight), how long its target stays faulted (seconds, drawn uniformly), the
names of the pool's methods that inject and heal it (soak.Pool.<inject>(index, param) /
<heal>(index)), what it needs of the machine (`needs`: a capability of rootfaults.Lab, "" for
none) and the range of its parameter if it has one (a loss rate, a clock step; `signed`: either
sign). A kind whose capability is missing is left out of the draw; one whose targets are a subset
(the workers in namespaces, on a tmpfs, with libfaketime) is drawn only on those (`eligible`).

The schedule is drawn entirely from random.Random(seed) before the run starts and saved as
schedule.json, so a seed names the same faults at the same offsets on every run on a machine with
the same capabilities (the pool's own timing is not reproducible: the same schedule meets the pool
in a different state each time). It opens with one fault of each kind, in a seeded order, so that
a short run meets every kind; after that each kind is drawn by weight.
"""

import dataclasses
import json
import random


@dataclasses.dataclass(frozen=True)
class FaultKind:
    name: str
    target: str  # "coordinator", "worker", "client", "database" (PostgreSQL's server, --store postgres)
    weight: float
    down: tuple  # (min, max) seconds between inject and heal
    inject: str
    heal: str
    needs: str = ""  # a rootfaults.Lab capability: "netns", "tmpfs", "faketime"
    param: tuple = ()  # (min, max) of the parameter handed to inject, drawn uniformly
    signed: bool = False  # the parameter's sign drawn too (a clock stepped back or forward)


FAULT_KINDS = [
    FaultKind("coordinator-kill9", "coordinator", 1.0, (1.0, 8.0), "kill9_coordinator", "restart_coordinator"),
    FaultKind("coordinator-stop", "coordinator", 1.0, (1.0, 12.0), "stop_coordinator", "cont_coordinator"),
    FaultKind("worker-kill9", "worker", 2.0, (1.0, 12.0), "kill9_worker", "restart_worker"),
    FaultKind("worker-stop", "worker", 2.0, (1.0, 15.0), "stop_worker", "cont_worker"),
    FaultKind("client-kill9", "client", 1.5, (0.5, 5.0), "kill9_client", "restart_client"),
    FaultKind("worker-partition", "worker", 1.0, (5.0, 40.0), "partition_worker", "heal_partition", "netns"),
    FaultKind("worker-loss", "worker", 0.8, (10.0, 60.0), "lose_packets", "heal_loss", "netns", (20.0, 50.0)),
    FaultKind("worker-spool-full", "worker", 0.8, (10.0, 40.0), "fill_spool", "free_spool", "tmpfs"),
    FaultKind("worker-inodes-full", "worker", 0.6, (10.0, 40.0), "fill_spool_inodes", "free_spool_inodes", "tmpfs"),
    FaultKind("coordinator-disk-full", "coordinator", 0.6, (5.0, 20.0), "fill_coordinator_disk",
              "free_coordinator_disk", "tmpfs"),
    FaultKind("worker-clock-step", "worker", 0.8, (15.0, 60.0), "step_clock", "unstep_clock", "faketime",
              (30.0, 600.0), True),
    # The PostgreSQL variant (--store postgres): the "coordinator" kinds above pick one of its two
    # coordinators (the active one half the time: a takeover), and the database itself is crashed.
    FaultKind("postgres-crash", "database", 0.8, (2.0, 15.0), "crash_database", "restart_database"),
]

KINDS_BY_NAME = {k.name: k for k in FAULT_KINDS}


def draw_schedule(seed, duration_s, counts, mean_gap_s=6.0, start_after_s=10.0, quiet_tail_s=5.0, kinds=None,
                  eligible=None):
    """A list of {at, kind, target, index, down[, param]} sorted by `at` (seconds after the load starts).

    `counts` maps a target to how many there are ({"coordinator": 1, "worker": 8, "client": 3}; a
    target missing or 0, as "database" on SQLite, leaves its kinds out);
    `eligible` maps a kind's name to the indices it may target (default: all of its target's); a
    kind with none is not drawn. A target is never given a second fault while its first one lasts
    (and 2 s after): one fault at a time per coordinator (both of a PostgreSQL pair may be down).
    Faults start `start_after_s` into the load (the pool settles first) and end `quiet_tail_s`
    before it stops. The first faults are one of each kind, in a seeded order.
    """
    rng = random.Random(f"soak-schedule-{seed}")
    eligible = eligible or {}

    def targets(k):
        return list(eligible.get(k.name, range(counts.get(k.target, 0))))

    kinds = [k for k in (kinds or FAULT_KINDS) if targets(k)]
    opening = list(kinds)
    rng.shuffle(opening)
    busy_until = {}
    events = []
    end = duration_s - quiet_tail_s
    t = start_after_s
    while kinds:
        t += rng.expovariate(1.0 / mean_gap_s)
        if t >= end:
            break
        kind = opening[0] if opening else rng.choices(kinds, weights=[k.weight for k in kinds])[0]
        down = round(rng.uniform(*kind.down), 2)
        param = None
        if kind.param:
            param = round(rng.uniform(*kind.param), 1)
            if kind.signed and rng.random() < 0.5:
                param = -param
        if t + down > end:
            continue  # it would outlast the load; a shorter one drawn later may fit
        free = [i for i in targets(kind) if busy_until.get((kind.target, i), -1.0) <= t]
        if not free:
            continue
        index = rng.choice(free)
        if opening and kind is opening[0]:
            opening.pop(0)
        busy_until[(kind.target, index)] = t + down + 2.0  # and a moment to come back before the next
        ev = {"at": round(t, 3), "kind": kind.name, "target": kind.target, "index": index, "down": down}
        if param is not None:
            ev["param"] = param
        events.append(ev)
    return events


def save(path, seed, events):
    with open(path, "w") as f:
        json.dump({"seed": seed, "events": events}, f, indent=1)
