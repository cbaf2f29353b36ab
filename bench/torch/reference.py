#!/usr/bin/python3
"""Trains a zoo model in PyTorch from dtr's parameters and data: the reference no one here wrote.

Run by tests/nn/torch_reference_test.cpp with Debian's /usr/bin/python3 (python3-torch 1.13):

    reference.py MODEL SPEC_JSON IN_FILE OUT_FILE

IN_FILE is a dtr state dict (docs/state-dict.md) holding the model's initial parameters and buffers under their
dtr names, and the batches as "data.x.<step>" (float32 [N, 1, 28, 28]) and "data.y.<step>" (int64 [N]).
SPEC_JSON sizes the model as dtr's zoo spec does and names the optimizer. The script builds the same
architecture with torch.nn modules named as dtr names its parameters, loads the values, trains one step per
batch (cross-entropy with label smoothing, the optimizer, optionally clip_grad_norm_) and writes OUT_FILE, a dtr
state dict: "loss" (float64 [steps]) and, after the last step, every parameter and buffer under its dtr name.
Exit status 0 on success; any error is a Python traceback and a non-zero status.
"""
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from zoo import BUILDERS, read_state_dict, write_state_dict  # noqa: E402

# ---- training ---------------------------------------------------------------------------------------------------


def make_optimizer(spec, parameters):
    kind = spec["optimizer"]
    if kind == "sgd":
        return torch.optim.SGD(parameters, lr=spec["lr"], momentum=spec.get("momentum", 0.0),
                               weight_decay=spec.get("weight_decay", 0.0), nesterov=spec.get("nesterov", False))
    if kind == "adam":
        return torch.optim.Adam(parameters, lr=spec["lr"], weight_decay=spec.get("weight_decay", 0.0))
    if kind == "adamw":
        return torch.optim.AdamW(parameters, lr=spec["lr"], weight_decay=spec.get("weight_decay", 0.01))
    raise ValueError(f"optimizer {kind}")


def main():
    model_name, spec_json, in_path, out_path = sys.argv[1:5]
    spec = json.loads(spec_json)
    torch.manual_seed(0)  # nothing random is drawn (dropout is off); the seed only makes that certain
    torch.use_deterministic_algorithms(True)
    model = BUILDERS[model_name](**spec["model"])
    entries = read_state_dict(in_path)
    state = {k: v for k, v in entries.items() if not k.startswith("data.")}
    # dtr's names must be exactly PyTorch's, but for BatchNorm's num_batches_tracked, which dtr does not keep.
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.endswith("num_batches_tracked")]
    if missing or unexpected:
        raise ValueError(f"keys differ: missing {missing}, unexpected {unexpected}")
    model.train()
    optimizer = make_optimizer(spec, model.parameters())
    losses = []
    for step in range(spec["steps"]):
        x = entries[f"data.x.{step}"]
        y = entries[f"data.y.{step}"]
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y, label_smoothing=spec["label_smoothing"])
        loss.backward()
        if spec.get("clip_norm"):
            torch.nn.utils.clip_grad_norm_(model.parameters(), spec["clip_norm"])
        optimizer.step()
        losses.append(loss.item())
    out = {"loss": torch.tensor(losses, dtype=torch.float64)}
    for name, value in model.state_dict().items():
        if name in state:
            out[name] = value
    write_state_dict(out_path, out)


if __name__ == "__main__":
    main()
