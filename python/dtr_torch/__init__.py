"""dtr-torch for Python: Dynamic Tensor Rematerialization for PyTorch programs (docs/torch.md).

Loads the dtr_torch library (the path in DTR_TORCH_LIBRARY, on import; or given to load()) into PyTorch;
its operators are then torch.ops.dtr.*. Every tensor wrapped by checkpoint() lives in dtr's default runtime,
configured by the DTR_* variables (DTR_MEMORY_BUDGET, DTR_HEURISTIC, ...): under its budget, values are
evicted and recomputed, and results stay bitwise those of plain PyTorch.
"""
import contextlib
import json
import os

import torch

_loaded = None


def load(path=None):
    """Loads the dtr_torch library once (path, else $DTR_TORCH_LIBRARY)."""
    global _loaded
    if _loaded is not None:
        if path is not None and os.path.realpath(path) != os.path.realpath(_loaded):
            raise RuntimeError(f"dtr_torch: {_loaded!r} is loaded already; a process loads one library, not "
                               f"also {path!r}")
        return _loaded
    path = path or os.environ.get("DTR_TORCH_LIBRARY")
    if not path:
        raise RuntimeError("dtr_torch: set DTR_TORCH_LIBRARY to the built libdtr_torch.so, or call "
                           "dtr_torch.load(path)")
    if not os.path.exists(path):
        raise RuntimeError(f"dtr_torch: DTR_TORCH_LIBRARY={path!r}: no such file")
    torch.ops.load_library(path)
    from . import _boundary, _distributed
    _boundary.install()  # printing, tolist, numpy, torch.save, deepcopy of wrappers
    _distributed.install()  # collectives that take data pointers: on plain copies of wrappers
    _loaded = path
    return path


def checkpoint(tensor):
    """A wrapped copy of a CPU tensor (a constant of dtr's runtime); ops on it are recorded and may be
    evicted and recomputed. Keeps requires_grad; the result is a leaf."""
    load()
    return torch.ops.dtr.checkpoint(tensor)


def decheckpoint(tensor):
    """A plain tensor with the wrapped tensor's value (a plain tensor is returned as is)."""
    load()
    return torch.ops.dtr.decheckpoint(tensor)


def is_checkpointed(tensor):
    load()
    return torch.ops.dtr.is_checkpointed(tensor)


def checkpoint_module(module):
    """Wraps every parameter and buffer of `module` in place (parameters stay nn.Parameter). Build the
    optimizer after this call: it must hold the wrapped parameters."""
    load()
    done = {}  # a tensor shared by several modules (tied weights) stays shared
    for m in module.modules():
        for name, p in list(m._parameters.items()):
            if p is not None and not is_checkpointed(p):
                if id(p) not in done:
                    done[id(p)] = (p, torch.nn.Parameter(checkpoint(p.detach()), requires_grad=p.requires_grad))
                m._parameters[name] = done[id(p)][1]
        for name, b in list(m._buffers.items()):
            if b is not None and not is_checkpointed(b):
                if id(b) not in done:
                    done[id(b)] = (b, checkpoint(b))
                m._buffers[name] = done[id(b)][1]
    return module


def set_budget(nbytes):
    """Sets the default runtime's budget in bytes (None or 0: none)."""
    load()
    torch.ops.dtr.set_budget(int(nbytes or 0))


def stats():
    """The default runtime's counters (dtr::RuntimeStats) as a dict."""
    load()
    return json.loads(torch.ops.dtr.stats())


def reset_peak_stats():
    """Starts the default runtime's peaks (peak_resident_bytes, peak_reserved_bytes) over from what it holds
    now, as torch.cuda.reset_peak_memory_stats does."""
    load()
    torch.ops.dtr.reset_peak_stats()


def evict_after_every_op(on=True):
    """Stress mode, for tests: after every op, the default runtime evicts every value it can, so every value
    read again comes back by recomputation. Slow."""
    load()
    torch.ops.dtr.set_evict_after_every_op(bool(on))


def wrap_factories(on=True):
    """Turns on (or off) the mode where torch's creation functions (torch.zeros, torch.randn, torch.tensor,
    torch.from_numpy, ...) return checkpointed tensors: for programs that cannot be edited. Returns whether
    it was on. See docs/torch.md for what it covers."""
    load()
    from . import _factories
    return _factories.enable(on)


@contextlib.contextmanager
def wrapping_factories():
    """wrap_factories() for the length of a with block."""
    was = wrap_factories(True)
    try:
        yield
    finally:
        wrap_factories(was)


# Loaded on import where the variable names the library: the Tensor methods and torch.distributed functions
# that the package wraps (_boundary, _distributed) are then in place before any of them is looked up.
if os.environ.get("DTR_TORCH_LIBRARY"):
    load()
