"""torch.distributed's functions that hand tensors' bytes to the process group directly rather than through an
operator dtr-torch intercepts (1.13: all_gather, gather, scatter, all_to_all_single, ... call the process
group's method, which takes each tensor's data pointer; a wrapper has none). On wrappers, these run on plain
copies: the wrapped inputs are read out (decheckpointed), the wrapped outputs get fresh plain buffers, the
collective runs and is waited for, and each wrapped output then takes its buffer's bytes on the calling thread
(the runtime is not used from the process group's thread), as the process group writes a plain output: by
copy_ for all_gather and gather (their outputs' versions move, and a leaf that requires grad is refused), in
place of its bytes for the others (no version moves). So they are synchronous on wrappers: with async_op=True
the returned work has completed, and its result() and future hold the plain copies.
Plain tensors take PyTorch's own path untouched. (broadcast, all_reduce, reduce, send and recv reach dtr-torch
as c10d operators: dtr_torch/collectives.h.)
"""
import inspect

import torch

from ._boundary import _is_wrapper, _read_out, replace

# torch's own, taken before the factory mode (_factories) can replace it with one that wraps.
_empty_strided = torch.empty_strided

# name: (its output parameters, its input parameters); each a tensor or a list of tensors (or None).
_COLLECTIVES = {
    "all_gather": (("tensor_list",), ("tensor",)),
    "gather": (("gather_list",), ("tensor",)),
    "scatter": (("tensor",), ("scatter_list",)),
    "all_to_all_single": (("output",), ("input",)),
    "all_to_all": (("output_tensor_list",), ("input_tensor_list",)),
    "all_gather_into_tensor": (("output_tensor",), ("input_tensor",)),
    "_all_gather_base": (("output_tensor",), ("input_tensor",)),
    "reduce_scatter": (("output",), ("input_list",)),
    "reduce_scatter_tensor": (("output",), ("input",)),
    "_reduce_scatter_base": (("output",), ("input",)),
}
# Those whose process group fills the outputs by copy_ (gloo's all_gather and gather in 1.13; measured).
_WRITTEN_BY_COPY = ("all_gather", "gather")


def _tensors(value):
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, list):  # as plain() below converts them; torch.distributed takes lists, not tuples
        return [t for v in value for t in _tensors(v)]
    return []


def _on_plain_copies(name, outputs, inputs):
    by_copy = name in _WRITTEN_BY_COPY

    def wrap(original):
        signature = inspect.signature(original)

        def function(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            if not any(_is_wrapper(t) for p in outputs + inputs for t in _tensors(bound.arguments.get(p))):
                return original(*args, **kwargs)
            copies = []  # (wrapped output, its plain copy)

            def plain(value, written):
                if isinstance(value, torch.Tensor) and _is_wrapper(value):
                    if not written:
                        return _read_out(value)
                    # The collective overwrites all of it: its old value is not read out (nor recomputed).
                    copy = _empty_strided(value.size(), value.stride(), dtype=value.dtype)
                    copies.append((value, copy))
                    return copy
                if isinstance(value, list):
                    return [plain(v, written) for v in value]
                return value

            for p in outputs + inputs:
                if p in bound.arguments:
                    bound.arguments[p] = plain(bound.arguments[p], p in outputs)
            async_op = bound.arguments.get("async_op", False)
            bound.arguments["async_op"] = True
            work = original(*bound.args, **bound.kwargs)
            if work is not None:  # None: this rank is not in the group
                work.wait()
                for wrapper, copy in copies:
                    if by_copy:
                        with torch.enable_grad():  # as on the process group's thread
                            wrapper.copy_(copy)
                    else:
                        with torch.no_grad():
                            wrapper.data.copy_(copy)  # .data: the bytes change, not the version
            return work if async_op else None
        return function
    replace(torch.distributed, name, wrap)


def install():
    if not torch.distributed.is_available():
        return
    for name, (outputs, inputs) in _COLLECTIVES.items():
        if hasattr(torch.distributed, name):
            _on_plain_copies(name, outputs, inputs)
