"""The soak's jobs: the recipe a client submits and what each of its jobs must leave behind.

Every job is a shell command for `--runtime process` whose log lines and output files are a pure
function of its sweep's tag and its parameter `k`, so the checker can recompute them. The only
attempt-dependent content is the first log line and `attempt.txt` (the attempt's id), which the
checker compares with the attempt the store says succeeded.
"""

import hashlib

BIG_BYTES = 1536 * 1024  # over 1 MiB: the worker packs such outputs on disk (docs/worker.md)


def sweep_shape(rng):
    """The random part of a sweep: how many jobs, whether its even jobs fail on their first
    attempt (so that retries have something to do), whether they write a big output."""
    return {
        "jobs": rng.choice([1, 1, 2, 2, 3, 4]),
        "fail_first": rng.random() < 0.2,
        "big": rng.random() < 0.08,
        "sleep": rng.choice(["0.2", "0.4", "0.7"]),
    }


def expected_lines(tag, k):
    """The log lines after the attempt line, in order, for a run that succeeded."""
    n = 2 + k % 3
    return [f"soak {tag} k={k} line {j}/{n}" for j in range(1, n + 1)]


def expected_out(tag, k):
    m = 20 + k
    return "".join(f"{tag} {k} {j} {j * j * (k + 1)}\n" for j in range(1, m + 1))


def expected_big(tag, k):
    unit = f"{tag} {k} big\n"
    reps = BIG_BYTES // len(unit) + 1
    return (unit * reps)[:BIG_BYTES]


def expected_outputs(tag, k, big):
    """file name -> sha256 of its content, for the files the job writes besides attempt.txt."""
    files = {"out.txt": expected_out(tag, k)}
    if big:
        files["big.txt"] = expected_big(tag, k)
    return {name: hashlib.sha256(text.encode()).hexdigest() for name, text in files.items()}


def recipe(tag, shape, run_dir):
    """The TOML text of one sweep. `run_dir` appears in every job's command line: the checker
    finds leftover job processes by it, and the jobs append their start and end to a witness
    file there (an attempt the pool fenced may still be running: that is how it is seen)."""
    witness = f"{run_dir}/witness"
    fail = (
        f'if [ "$GPUPOOL_ATTEMPT" = 1 ] && [ $(({{k}} % 2)) = 0 ]; then '
        f'echo "soak {tag} k={{k}} fails on purpose"; exit 3; fi; '
        if shape["fail_first"]
        else ""
    )
    big = (
        f'yes "{tag} {{k}} big" | head -c {BIG_BYTES} > "$GPUPOOL_OUTPUT_DIR/big.txt"; '
        if shape["big"]
        else ""
    )
    # `set -e`: a job that cannot write its log or an output (its worker's spool is full) fails, as
    # a careful program does, rather than exit 0 with its writes lost.
    command = (
        "set -e; "
        f'echo "$GPUPOOL_JOB_ID $GPUPOOL_ATTEMPT_ID start $(date +%s%3N)" >> {witness}/$GPUPOOL_JOB_ID; '
        f'echo "soak {tag} k={{k}} attempt $GPUPOOL_ATTEMPT_ID"; '
        f"{fail}"
        f'n=$((2 + {{k}} % 3)); j=1; while [ $j -le $n ]; do echo "soak {tag} k={{k}} line $j/$n"; '
        f"j=$((j+1)); sleep {shape['sleep']}; done; "
        f'm=$((20 + {{k}})); j=1; while [ $j -le $m ]; do echo "{tag} {{k}} $j $((j*j*({{k}}+1)))"; '
        f'j=$((j+1)); done > "$GPUPOOL_OUTPUT_DIR/out.txt"; '
        f"{big}"
        f'echo "$GPUPOOL_ATTEMPT_ID" > "$GPUPOOL_OUTPUT_DIR/attempt.txt"; '
        f'echo "$GPUPOOL_JOB_ID $GPUPOOL_ATTEMPT_ID end $(date +%s%3N)" >> {witness}/$GPUPOOL_JOB_ID'
    )
    ks = ", ".join(str(k) for k in range(shape["jobs"]))
    return f"""# soak sweep {tag} (tests/soak)
format = 1
name = "soak-{tag}-{{k}}"
image = "localhost/gpupool/busybox:latest"
command = '''{command}'''

[resources]
cpus = 0.1
memory = "32MiB"
max_runtime = "2m"

[outputs]
paths = ["*.txt"]

[retry]
max_attempts = 8

[sweep]
k = [{ks}]
"""


def job_name(tag, k):
    return f"soak-{tag}-{k}"


def parse_job_name(name):
    """(tag, k) of a soak job's name, or None."""
    if not name.startswith("soak-"):
        return None
    rest = name[len("soak-") :]
    tag, _, k = rest.rpartition("-")
    if not tag or not k.isdigit():
        return None
    return tag, int(k)
