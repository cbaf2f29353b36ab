"""The opt-in mode for programs that cannot be edited: while it is on, the tensors that torch's creation
functions return (torch.zeros, torch.randn, torch.tensor, torch.from_numpy, ...) come out checkpointed, so
parameters, buffers, optimizer state and data made by them live in dtr's runtime without a line of the
program changed. `python3 -m dtr_torch script.py` runs a script with it on.

The functions are replaced by wrappers in the torch module (so code must look them up there: `torch.zeros`,
not a `from torch import zeros` taken before the mode went on). A result is wrapped only when it is a CPU
strided tensor and no `out=` was given; anything else (another device, a sparse layout) is returned as is.
Ops on wrapped tensors need no help: their results are wrapped by the library.
"""
import functools

import torch

# torch's creation functions whose results are new CPU tensors; the *_like ones also when given plain tensors.
FACTORIES = (
    "arange", "as_tensor", "empty", "empty_like", "empty_strided", "eye", "from_numpy", "full", "full_like",
    "linspace", "logspace", "ones", "ones_like", "rand", "rand_like", "randint", "randint_like", "randn",
    "randn_like", "randperm", "scalar_tensor", "tensor", "zeros", "zeros_like",
)

_originals = {}


def _wrapping(original):
    @functools.wraps(original)
    def factory(*args, **kwargs):
        result = original(*args, **kwargs)
        if (kwargs.get("out") is None and isinstance(result, torch.Tensor) and result.device.type == "cpu"
                and result.layout == torch.strided and not torch.ops.dtr.is_checkpointed(result)):
            # checkpoint keeps requires_grad and makes a leaf, as the factory's own result was.
            return torch.ops.dtr.checkpoint(result)
        return result
    return factory


def enabled():
    return bool(_originals)


def enable(on=True):
    """Turns the mode on (or off); returns whether it was on."""
    was = enabled()
    if on and not was:
        for name in FACTORIES:
            _originals[name] = getattr(torch, name)
            setattr(torch, name, _wrapping(_originals[name]))
    elif not on and was:
        for name, original in _originals.items():
            setattr(torch, name, original)
        _originals.clear()
    return was
