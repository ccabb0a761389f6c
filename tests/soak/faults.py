"""The fault table and the seeded schedule drawn from it.

A fault kind is one row of FAULT_KINDS: what it targets (the coordinator, a worker, a client), how
often it is drawn (weight), how long its target stays faulted (seconds, drawn uniformly), and the
names of the pool's methods that inject and heal it (soak.Pool.<inject>(index) / <heal>(index)).
A later kind (a network partition of a worker with namespaces and tc, a PostgreSQL failover, a
full spool, a clock step) is one more row and one more pair of methods; the schedule, the checker's
fault accounting and the table need no change.

The schedule is drawn entirely from random.Random(seed) before the run starts and saved as
schedule.json, so a seed names the same faults at the same offsets on every run (the pool's own
timing is not reproducible: the same schedule meets the pool in a different state each time).
"""

import dataclasses
import json
import random


@dataclasses.dataclass(frozen=True)
class FaultKind:
    name: str
    target: str  # "coordinator", "worker", "client"
    weight: float
    down: tuple  # (min, max) seconds between inject and heal
    inject: str
    heal: str


FAULT_KINDS = [
    FaultKind("coordinator-kill9", "coordinator", 1.0, (1.0, 8.0), "kill9_coordinator", "restart_coordinator"),
    FaultKind("coordinator-stop", "coordinator", 1.0, (1.0, 12.0), "stop_coordinator", "cont_coordinator"),
    FaultKind("worker-kill9", "worker", 2.0, (1.0, 12.0), "kill9_worker", "restart_worker"),
    FaultKind("worker-stop", "worker", 2.0, (1.0, 15.0), "stop_worker", "cont_worker"),
    FaultKind("client-kill9", "client", 1.5, (0.5, 5.0), "kill9_client", "restart_client"),
    # Not built yet (issue 46), each one more row here and two methods on soak.Pool:
    # FaultKind("worker-partition", "worker", ..., "partition_worker", "heal_partition"),
    # FaultKind("postgres-failover", "coordinator", ..., "fail_over", "rejoin"),
    # FaultKind("spool-full", "worker", ..., "fill_spool", "free_spool"),
    # FaultKind("clock-step", "worker", ..., "step_clock", "unstep_clock"),
]

KINDS_BY_NAME = {k.name: k for k in FAULT_KINDS}


def draw_schedule(seed, duration_s, counts, mean_gap_s=6.0, start_after_s=10.0, quiet_tail_s=5.0, kinds=None):
    """A list of {at, kind, target, index, down} sorted by `at` (seconds after the load starts).

    `counts` maps a target to how many there are ({"coordinator": 1, "worker": 8, "client": 3}).
    A target is never given a second fault while its first one lasts, and only one coordinator
    fault is active at a time (there is one coordinator). Faults start `start_after_s` into the
    load (the pool settles first) and end `quiet_tail_s` before it stops.
    """
    rng = random.Random(f"soak-schedule-{seed}")
    kinds = [k for k in (kinds or FAULT_KINDS) if counts.get(k.target, 0) > 0]
    busy_until = {}
    events = []
    t = start_after_s
    while True:
        t += rng.expovariate(1.0 / mean_gap_s)
        kind = rng.choices(kinds, weights=[k.weight for k in kinds])[0]
        index = rng.randrange(counts[kind.target])
        down = round(rng.uniform(*kind.down), 2)
        if t + down > duration_s - quiet_tail_s:
            break
        if busy_until.get((kind.target, index), -1.0) > t:
            continue
        busy_until[(kind.target, index)] = t + down + 2.0  # and a moment to come back before the next
        events.append({"at": round(t, 3), "kind": kind.name, "target": kind.target, "index": index, "down": down})
    return events


def save(path, seed, events):
    with open(path, "w") as f:
        json.dump({"seed": seed, "events": events}, f, indent=1)
