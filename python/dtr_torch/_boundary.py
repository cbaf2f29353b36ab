"""Where a wrapped tensor leaves PyTorch's ops: printing, .tolist(), .numpy(), pickling (torch.save) and
copy.deepcopy read a tensor's bytes through its storage, which a wrapper does not have (its value lives in
dtr's runtime and may be evicted). These Tensor methods are wrapped once, when the library loads: a plain
tensor takes PyTorch's own path untouched (the wrapper only catches the error a storage-less tensor raises);
a checkpointed one is read out (decheckpointed) at the boundary. Identity-based methods (data_ptr, storage)
raise a clear error instead: a wrapper has no fixed address.
"""
import functools

import torch

# libtorch's message for data access on a storage-less tensor, and ours for its storage (below).
_NO_STORAGE = ("doesn't have storage", "no fixed address")
_NO_ADDRESS = ("dtr_torch: a checkpointed tensor has no storage and no fixed address: its value lives in dtr's "
               "runtime, which may evict and recompute it; dtr_torch.decheckpoint(t) gives a plain copy")


def _is_wrapper(t):
    return isinstance(t, torch.Tensor) and torch.ops.dtr.is_checkpointed(t)


def _read_out(t):
    with torch.no_grad():
        return torch.ops.dtr.decheckpoint(t)


def replace(owner, name, wrap):
    """owner.<name> becomes wrap(original), once (a second call finds it replaced and does nothing)."""
    original = getattr(owner, name)
    if getattr(original, "_dtr_boundary", False):
        return
    replacement = functools.wraps(original)(wrap(original))
    replacement._dtr_boundary = True
    setattr(owner, name, replacement)


def _on_wrappers(name, fallback):
    """Tensor.<name> runs PyTorch's method; where that fails for want of storage on a wrapper, fallback."""
    def wrap(original):
        def method(self, *args, **kwargs):
            try:
                return original(self, *args, **kwargs)
            except (RuntimeError, NotImplementedError) as error:
                if not any(m in str(error) for m in _NO_STORAGE) or not _is_wrapper(self):
                    raise
            return fallback(self, original, *args, **kwargs)
        return method
    replace(torch.Tensor, name, wrap)


def _repr(self, original, *args, **kwargs):
    # The plain copy prints the values; the wrapper's own autograd state is what PyTorch would show.
    text = original(_read_out(self), *args, **kwargs)
    if self.grad_fn is not None:
        return f"{text[:-1]}, grad_fn=<{type(self.grad_fn).__name__}>)"
    if self.requires_grad:
        return f"{text[:-1]}, requires_grad=True)"
    return text


def _read_out_then(self, original, *args, **kwargs):
    return original(_read_out(self), *args, **kwargs)


def _reduce_ex(self, original, proto):
    # Saved as the plain tensor it stands for (requires_grad kept); loading gives a plain tensor.
    plain = _read_out(self)
    plain.requires_grad_(self.requires_grad)
    return original(plain, proto)


def _deepcopy(self, original, memo):
    # A copy in the same runtime, as PyTorch copies tensors of devices without storage: a clone.
    if id(self) in memo:
        return memo[id(self)]
    with torch.no_grad():
        copy = self.clone()
    copy.requires_grad_(self.requires_grad)
    if self.grad is not None:
        copy.grad = self.grad.__deepcopy__(memo)
    memo[id(self)] = copy
    return copy


def _refused_on_wrappers(name):
    """Tensor.<name> raises _NO_ADDRESS for a wrapper before PyTorch looks: libtorch's answer for a
    storage-less tensor is an empty Storage, which crashes Python (and C++ code such as DDP's Reducer relies on
    that answer, so it stays libtorch's)."""
    def wrap(original):
        def method(self, *args, **kwargs):
            if _is_wrapper(self):
                raise RuntimeError(_NO_ADDRESS)
            return original(self, *args, **kwargs)
        return method
    replace(torch.Tensor, name, wrap)


def install():
    _on_wrappers("__repr__", _repr)
    _on_wrappers("tolist", _read_out_then)
    _on_wrappers("numpy", _read_out_then)
    _on_wrappers("__reduce_ex__", _reduce_ex)
    _on_wrappers("__deepcopy__", _deepcopy)
    for name in ("data_ptr", "storage", "_storage"):
        _refused_on_wrappers(name)
