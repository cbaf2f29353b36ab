"""torch.distributed's functions that hand a tensor's bytes to the process group directly rather than
through an operator dtr-torch intercepts (1.13: all_gather and gather call the process group's method,
which reads the tensor itself; a wrapper has no storage there). Their wrapped *input* is read out
(decheckpointed) first; the outputs are filled by the process group's own `copy_`, which dtr-torch records.
"""
import torch

from ._boundary import read_out_if_wrapped, replace


def _input_read_out(name, position):
    """dist.<name> with its input tensor (argument `position`, or keyword "tensor") read out."""
    def wrap(original):
        def function(*args, **kwargs):
            if len(args) > position:
                args = args[:position] + (read_out_if_wrapped(args[position]),) + args[position + 1:]
            elif "tensor" in kwargs:
                kwargs["tensor"] = read_out_if_wrapped(kwargs["tensor"])
            return original(*args, **kwargs)
        return function
    replace(torch.distributed, name, wrap)


def install():
    if not torch.distributed.is_available():
        return
    _input_read_out("all_gather", 1)  # all_gather(tensor_list, tensor, ...)
    _input_read_out("gather", 0)      # gather(tensor, gather_list, dst, ...)
