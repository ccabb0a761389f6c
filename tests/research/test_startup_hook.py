#!/usr/bin/env python3
"""Tests templates/base/gpupool_startup.py against a fake torch that records what it is asked.

Each case starts a fresh interpreter, because the hook acts at start-up and on the first
`import torch`, both once per process. The hook directory is added with site.addsitedir, which
processes gpupool_startup.pth exactly as the images' site-packages do. Exits 1 on any failure.
Usage: python3 tests/research/test_startup_hook.py
"""
import json
import os
import subprocess
import sys
import tempfile
import textwrap

HOOK_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "templates", "base")
GIB = 1024 ** 3

# A stand-in for torch: torch/__init__ imports torch.cuda as the real one does; torch.cuda keeps
# _lazy_call's queue and runs it in _lazy_init, like torch.cuda's lazy initialisation.
FAKE_INIT = "from . import cuda\nLOADED = True\n"
FAKE_CUDA = textwrap.dedent("""
    import json, os
    _cfg = json.loads(os.environ["FAKE_TORCH"])
    calls, _queued, _initialized = [], [], False
    class _Props:
        def __init__(self, total): self.total_memory = total
    def is_available(): return _cfg["available"]
    def device_count(): return len(_cfg["totals"])
    def get_device_properties(d): return _Props(_cfg["totals"][d])
    def set_per_process_memory_fraction(fraction, device=None):
        if _cfg.get("raise"): raise RuntimeError("driver says no")
        if not isinstance(fraction, float) or not 0 <= fraction <= 1: raise ValueError(fraction)
        calls.append([fraction, device])
    def _lazy_init():
        global _initialized
        _initialized = True
        for c in _queued: c()
    if _cfg.get("lazy", True):
        def _lazy_call(c):
            if _initialized: c()
            else: _queued.append(c)
""")

# Runs in the child: start-up as the images do it, then the steps a user program would take.
DRIVER = textwrap.dedent("""
    import json, site, sys
    site.addsitedir(sys.argv[1])
    out = {"torch_at_startup": "torch" in sys.modules}
    try:
        exec(sys.argv[2])
        import torch
        out["calls_before_init"] = list(torch.cuda.calls)
        out["loader"] = type(torch.__loader__).__name__
        torch.cuda._lazy_init()
        out["calls"] = torch.cuda.calls
    except ImportError as e:
        out["import_error"] = type(e).__name__
    out["finders"] = [type(f).__name__ for f in sys.meta_path]
    print(json.dumps(out))
""")

failures = []


def run(env_value, fake=None, with_torch=True, first_import="pass"):
    env = {k: v for k, v in os.environ.items() if k not in ("GPUPOOL_GPU_MEMORY_MB", "PYTHONPATH")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # leave no __pycache__ in templates/base
    if env_value is not None:
        env["GPUPOOL_GPU_MEMORY_MB"] = env_value
    with tempfile.TemporaryDirectory() as tmp:
        if with_torch:
            os.makedirs(os.path.join(tmp, "torch", "nn"))
            for rel, text in (("__init__.py", FAKE_INIT), ("cuda.py", FAKE_CUDA),
                              (os.path.join("nn", "__init__.py"), "")):
                with open(os.path.join(tmp, "torch", rel), "w") as f:
                    f.write(text)
            env["PYTHONPATH"] = tmp
        cfg = {"available": True, "totals": [80 * GIB]}
        cfg.update(fake or {})
        env["FAKE_TORCH"] = json.dumps(cfg)
        proc = subprocess.run([sys.executable, "-c", DRIVER, HOOK_DIR, first_import], env=env,
                              capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        return {"rc": proc.returncode, "stderr": proc.stderr}
    result = json.loads(proc.stdout)
    result["stderr"] = proc.stderr
    return result


def check(name, condition, detail):
    print("%s: %s" % ("ok  " if condition else "FAIL", name))
    if not condition:
        print("      got: %s" % (detail,))
        failures.append(name)


r = run("8192")
check("8 GiB of an 80 GiB device is a fraction of 0.1 on device 0",
      r.get("calls") == [[0.1, 0]], r)
check("torch is not imported at start-up", r.get("torch_at_startup") is False, r)
check("the cap waits for CUDA's lazy initialisation", r.get("calls_before_init") == [], r)
check("torch keeps its own loader", r.get("loader") == "SourceFileLoader", r)
check("the finder leaves sys.meta_path once torch loaded", "_TorchFinder" not in r.get("finders", []), r)
check("no warning when all is well", r.get("stderr") == "", r)

r = run("12288", {"totals": [24 * GIB, 48 * GIB]})
check("every visible device gets its own fraction", r.get("calls") == [[0.5, 0], [0.25, 1]], r)

r = run("100000", {"totals": [16 * GIB]})
check("a share above the device's memory is clamped to 1.0", r.get("calls") == [[1.0, 0]], r)

r = run("4096.5")
check("a fractional MiB value is accepted", r.get("calls") == [[4096.5 / (80 * 1024), 0]], r)

r = run("8192", first_import="import torch.nn")
check("importing a submodule first still caps", r.get("calls") == [[0.1, 0]], r)

r = run("8192", {"lazy": False})
check("a torch without _lazy_call is capped at import", r.get("calls_before_init") == [[0.1, 0]], r)

r = run(None)
check("variable absent: no calls", r.get("calls") == [], r)
check("variable absent: no finder, no output",
      "_TorchFinder" not in r.get("finders", []) and r.get("stderr") == "", r)

r = run("")
check("variable empty: no calls, no output", r.get("calls") == [] and r.get("stderr") == "", r)

r = run("0")  # what the worker sets for a CPU-only job
check("variable 0 (CPU-only job): no calls, no finder, no output",
      r.get("calls") == [] and "_TorchFinder" not in r.get("finders", []) and r.get("stderr") == "", r)

for bad in ("abc", "-5", "nan", "inf", "8 GiB"):
    r = run(bad)
    lines = [l for l in r.get("stderr", "").splitlines() if l]
    check("invalid value %r: no calls, one warning, program runs" % bad,
          r.get("calls") == [] and len(lines) == 1 and "gpupool_startup" in lines[0], r)

r = run("8192", {"available": False})
check("CUDA unavailable: no calls", r.get("calls") == [] and r.get("stderr") == "", r)

r = run("8192", {"raise": True})
check("an error from torch becomes one warning, not an exception",
      r.get("calls") == [] and r.get("stderr", "").count("gpupool_startup") == 1, r)

r = run("8192", with_torch=False)
check("torch absent: the program's own ImportError, no warning",
      r.get("import_error") == "ModuleNotFoundError" and r.get("stderr") == "", r)

print("%d failure(s)" % len(failures))
sys.exit(1 if failures else 0)
