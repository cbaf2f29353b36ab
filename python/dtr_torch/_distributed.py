"""torch.distributed's functions that hand a tensor's bytes to the process group directly rather than
through an operator dtr-torch intercepts (1.13: all_gather and gather call the process group's method,
which reads the tensor itself; a wrapper has no storage there). Their wrapped *input* is read out
(decheckpointed) first; the outputs are filled by the process group's own `copy_`, which dtr-torch records.
"""
import functools

import torch


def _read_out(t):
    if isinstance(t, torch.Tensor) and torch.ops.dtr.is_checkpointed(t):
        return torch.ops.dtr.decheckpoint(t)
    return t


def _input_read_out(name, position):
    """dist.<name> with its input tensor (argument `position`, or keyword "tensor") read out."""
    dist = torch.distributed
    original = getattr(dist, name)
    if getattr(original, "_dtr_boundary", False):
        return

    @functools.wraps(original)
    def function(*args, **kwargs):
        if len(args) > position:
            args = args[:position] + (_read_out(args[position]),) + args[position + 1:]
        elif "tensor" in kwargs:
            kwargs["tensor"] = _read_out(kwargs["tensor"])
        return original(*args, **kwargs)

    function._dtr_boundary = True
    setattr(dist, name, function)


def install():
    if not torch.distributed.is_available():
        return
    _input_read_out("all_gather", 1)  # all_gather(tensor_list, tensor, ...)
    _input_read_out("gather", 0)      # gather(tensor, gather_list, dst, ...)
