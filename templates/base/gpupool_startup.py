"""Caps PyTorch's CUDA allocator to the GPU memory share gpupool granted the job.

The worker sets GPUPOOL_GPU_MEMORY_MB to the memory a job may use on its GPU. Without a cap, a
job that shares a GPU could grow until it starves its neighbours; with it, PyTorch raises an
ordinary out-of-memory error inside the job that overruns its own share.

gpupool_startup.pth imports this module at every interpreter start, so the work done here must be
tiny: read one variable and, when it holds a share, put a finder on sys.meta_path. torch is never
imported from here. When the program imports torch, the finder wraps torch's loader; once torch
has loaded, the cap is queued with torch.cuda._lazy_call so it runs only when the program first
uses CUDA (a program that never touches the GPU pays nothing and creates no CUDA context).

Whatever goes wrong, the user's program must not see an exception from here: every failure ends
in one line on stderr and the program carries on uncapped.
"""

import os
import sys

VARIABLE = "GPUPOOL_GPU_MEMORY_MB"
_warned = False


def _warn(message):
    global _warned
    if _warned:
        return
    _warned = True
    try:
        sys.stderr.write("gpupool_startup: %s\n" % message)
    except Exception:
        pass


def parse_share_mb(text):
    """The share in MiB as a float; 0.0 for a CPU-only job; None when the text is not a number >= 0."""
    try:
        value = float(text.strip())
    except (AttributeError, ValueError):
        return None
    if value != value or value in (float("inf"), float("-inf")) or value < 0:
        return None
    return value


def fraction_for(share_mb, total_bytes):
    """The fraction of a device with total_bytes that share_mb MiB is, clamped to (0, 1]."""
    total_mb = total_bytes / (1024.0 * 1024.0)
    if total_mb <= 0:
        return None
    return float(min(1.0, share_mb / total_mb))


def apply_cap(torch, share_mb):
    """Caps every visible device; called with CUDA being initialised (or already up)."""
    try:
        cuda = torch.cuda
        if not cuda.is_available():
            return
        for device in range(cuda.device_count()):
            total = cuda.get_device_properties(device).total_memory
            fraction = fraction_for(share_mb, total)
            if fraction is not None:
                cuda.set_per_process_memory_fraction(fraction, device)
    except Exception as error:  # a broken or unusual torch must not break the job
        _warn("could not cap the CUDA allocator: %s: %s" % (type(error).__name__, error))


def _on_torch_loaded(torch, share_mb):
    try:
        lazy_call = getattr(torch.cuda, "_lazy_call", None)
        if lazy_call is not None:
            # Runs inside torch.cuda's lazy initialisation, or at once if CUDA is already up.
            lazy_call(lambda: apply_cap(torch, share_mb))
        else:  # a torch without the private hook: cap now rather than never
            apply_cap(torch, share_mb)
    except Exception as error:
        _warn("could not cap the CUDA allocator: %s: %s" % (type(error).__name__, error))


class _WrappedLoader(object):
    """Runs torch's own loader, then schedules the cap, then gets out of the way."""

    def __init__(self, inner, share_mb):
        self._inner = inner
        self._share_mb = share_mb

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        # Put torch's own loader back first so that nothing afterwards sees the wrapper.
        module.__loader__ = self._inner
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self._inner
        self._inner.exec_module(module)
        _on_torch_loaded(module, self._share_mb)

    def __getattr__(self, name):
        return getattr(self._inner, name)


class _TorchFinder(object):
    """A meta_path finder that only ever answers for the top-level `torch` package."""

    def __init__(self, share_mb):
        self._share_mb = share_mb

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch":
            return None
        try:
            spec = None
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
            if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
                return spec
            _remove(self)
            spec.loader = _WrappedLoader(spec.loader, self._share_mb)
            return spec
        except Exception as error:
            _remove(self)
            _warn("could not watch for torch: %s: %s" % (type(error).__name__, error))
            return None


def _remove(finder):
    try:
        sys.meta_path.remove(finder)
    except ValueError:
        pass


def install(environ=None):
    """Called by gpupool_startup.pth at start-up; returns what it did, for the tests."""
    try:
        environ = os.environ if environ is None else environ
        text = environ.get(VARIABLE)
        if text is None or text == "":
            return "absent"
        share_mb = parse_share_mb(text)
        if share_mb is None:
            _warn("ignoring %s=%r: not a number of MiB; the GPU memory is not capped"
                  % (VARIABLE, text))
            return "invalid"
        if share_mb == 0:  # the worker's value for a CPU-only job: it has no GPU to cap
            return "cpu-only"
        torch = sys.modules.get("torch")
        if torch is not None and hasattr(torch, "cuda"):
            _on_torch_loaded(torch, share_mb)
            return "applied"
        if not any(isinstance(f, _TorchFinder) for f in sys.meta_path):
            sys.meta_path.insert(0, _TorchFinder(share_mb))
        return "watching"
    except Exception as error:
        _warn("start-up hook failed: %s: %s" % (type(error).__name__, error))
        return "failed"
