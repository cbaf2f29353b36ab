#!/usr/bin/python3
"""PyTorch's numbers for a zoo model on this machine: the anchors dtr's training results are put beside.

    /usr/bin/python3 bench/torch/baseline.py [--model resnet] [--model-json '{"depth": 32, "width": 16}']
        [--batch 128] [--steps 5] [--checkpoint-segments 0] [--threads 2] [--device cpu|cuda] [--seed 0]

Debian's python3-torch 1.13 (scripts/setup.sh --bench installs it with libopenblas0-pthread; run it with /usr/bin/python3). The
model is dtr's zoo architecture built in torch.nn (bench/torch/zoo.py), trained with momentum SGD on random
Fashion-MNIST-shaped batches. Prints one JSON object:
  step_s           median wall time of a training step (forward, backward, optimizer), after one warm-up step
  saved_bytes      bytes of the distinct tensors autograd saves for backward during the forward (its activations;
                   parameters and the batch excluded), by torch.autograd.graph.saved_tensors_hooks
  peak_step_bytes  the highest sum of live CPU tensor bytes during a step, over what was live when it began
                   (PyTorch's profiler with profile_memory, its allocation and free events in order)
  start_bytes      what was live when that step began: parameters, gradients, momentum, the batch
With --device cuda everything runs on the GPU, in FP32 without TF32 (as dtr's cuBLAS and cuDNN calls), and
peak_step_bytes is the CUDA caching allocator's peak allocated bytes during a step over its allocated bytes before.
With --checkpoint-segments K the model runs through torch.utils.checkpoint.checkpoint_sequential(model, K, x).
With --epoch DIR it then trains one epoch on Fashion-MNIST (the .gz files in DIR, normalised as dtr-train does:
(x / 255 - 0.2860) / 0.3530; shuffled; SGD lr 0.05, momentum 0.9, weight decay 5e-4, as dtr-train's sgd) and
adds epoch_s (wall time), test_accuracy (the 10,000 test images) and epoch_losses (each step's) to the JSON.
With --paired FILE as well, that epoch starts from dtr-train's initial parameters and buffers (FILE: `dtr-train
--model M --seed S --steps 0 --save FILE`, its model.* entries) and visits the images in dtr-train's order for
--seed S (train/dataset.cpp's epoch_order, its std::mt19937_64 reproduced here and checked against the C++
standard's known value): the same start and the same batches as `dtr-train --model M --seed S --epochs 1`, so
the two runs differ only by the frameworks' arithmetic.
"""
import gzip
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile
from torch.utils.checkpoint import checkpoint_sequential

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from zoo import BUILDERS, read_state_dict  # noqa: E402

DEFAULT_SPECS = {
    "resnet": {"depth": 32, "width": 16},
    "transformer": {"depth": 4, "dim": 64, "heads": 4, "patch": 0},
    "mlp": {"width": 1024, "depth": 8},
    "lstm": {"hidden": 256, "layers": 2},
    "unet": {"width": 16, "levels": 2},
    "densenet": {"growth": 12, "layers": 6, "blocks": 3},
}


def saved_activation_bytes(model, x, y, segments):
    parameters = {p.data_ptr() for p in model.parameters()} | {x.data_ptr()}
    seen = {}

    def pack(t):
        if t.data_ptr() not in parameters:
            storage = t.storage()
            seen[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = forward_loss(model, x, y, segments)
    loss.backward()
    return sum(seen.values())


def forward_loss(model, x, y, segments):
    logits = checkpoint_sequential(model, segments, x) if segments > 0 else model(x)
    return F.cross_entropy(logits, y)


def step(model, optimizer, x, y, segments):
    optimizer.zero_grad()
    loss = forward_loss(model, x, y, segments)
    loss.backward()
    optimizer.step()
    return loss.item()


def peak_step_bytes(model, optimizer, x, y, segments):
    if x.is_cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        step(model, optimizer, x, y, segments)
        return torch.cuda.max_memory_allocated() - before
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step(model, optimizer, x, y, segments)
    live = peak = 0
    for event in prof.profiler.kineto_results.events():
        if event.name() == "[memory]":
            live += event.nbytes()
            peak = max(peak, live)
    return peak


def read_idx(path, images):
    with gzip.open(path, "rb") as f:
        data = f.read()
    offset = 16 if images else 8
    values = torch.frombuffer(bytearray(data[offset:]), dtype=torch.uint8)
    return values.reshape(-1, 1, 28, 28) if images else values.long()


# ---- dtr-train's data order, for --paired ------------------------------------------------------------------------

MASK64 = (1 << 64) - 1


def mt19937_64(seed):
    """std::mt19937_64 seeded with `seed`: its outputs, in order."""
    n, m = 312, 156
    state = [seed & MASK64]
    for i in range(1, n):
        state.append((6364136223846793005 * (state[-1] ^ (state[-1] >> 62)) + i) & MASK64)
    index = n
    while True:
        if index >= n:
            for i in range(n):
                y = (state[i] & 0xFFFFFFFF80000000) | (state[(i + 1) % n] & 0x7FFFFFFF)
                state[i] = state[(i + m) % n] ^ (y >> 1) ^ (0xB5026F5AA96619E9 if y & 1 else 0)
            index = 0
        y = state[index]
        index += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        yield y & MASK64


def check_mt19937_64():
    # The C++ standard ([rand.predef]): the 10000th output of a default-constructed mt19937_64 (seed 5489).
    engine = mt19937_64(5489)
    for _ in range(9999):
        next(engine)
    if next(engine) != 9981545732273789042:
        raise AssertionError("mt19937_64 here differs from std::mt19937_64")


def dtr_epoch_order(seed, epoch, count):
    """train/dataset.cpp's epoch_order: Fisher-Yates over [0, count) from mt19937_64(seed * golden + epoch + 1)."""
    engine = mt19937_64((seed * 0x9E3779B97F4A7C15 + epoch + 1) & MASK64)
    order = list(range(count))
    for i in range(count - 1, 0, -1):
        j = next(engine) % (i + 1)
        order[i], order[j] = order[j], order[i]
    return torch.tensor(order, dtype=torch.long)


def load_dtr_initial_state(model, path):
    """The model.* entries of a dtr-train --save file, into `model` (names as dtr's; BatchNorm's counters aside)."""
    entries = read_state_dict(path)
    state = {k[len("model."):]: v for k, v in entries.items() if k.startswith("model.")}
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.endswith("num_batches_tracked")]
    if missing or unexpected or not state:
        raise ValueError(f"{path}: model entries differ from the model's: missing {missing}, unexpected {unexpected}")


def read_fashion_mnist(directory, prefix):
    """Images normalised as dtr-train does, (x / 255 - 0.2860) / 0.3530, and labels: `prefix` train or t10k."""
    x = read_idx(f"{directory}/{prefix}-images-idx3-ubyte.gz", True).float().div(255).sub(0.2860).div(0.3530)
    return x, read_idx(f"{directory}/{prefix}-labels-idx1-ubyte.gz", False)


def one_epoch(model, directory, batch, segments, device, order=None):
    train_x, train_y = read_fashion_mnist(directory, "train")
    test_x, test_y = read_fashion_mnist(directory, "t10k")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    model.train()
    if order is None:
        order = torch.randperm(train_x.shape[0])
    start = time.perf_counter()
    losses = []
    for first in range(0, train_x.shape[0] - batch + 1, batch):
        index = order[first:first + batch]
        x = train_x[index].to(device)
        if segments > 0:
            x.requires_grad_(True)
        losses.append(step(model, optimizer, x, train_y[index].to(device), segments))
    seconds = time.perf_counter() - start
    model.eval()
    correct = 0
    with torch.no_grad():
        for first in range(0, test_x.shape[0], batch):
            logits = model(test_x[first:first + batch].to(device)).cpu()
            correct += (logits.argmax(1) == test_y[first:first + batch]).sum().item()
    return seconds, correct / test_x.shape[0], losses


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet", choices=sorted(BUILDERS))
    parser.add_argument("--model-json", help="the model's spec (default: the table in this script)")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--checkpoint-segments", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--seed", type=int, default=0, help="initialisation and data order")
    parser.add_argument("--epoch", metavar="DIR", help="also train one epoch on Fashion-MNIST from DIR")
    parser.add_argument("--paired", metavar="FILE", help="with --epoch: start from dtr-train's initial state FILE "
                        "(dtr-train --steps 0 --save FILE) and visit the data in dtr-train's order for --seed")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    spec = json.loads(args.model_json) if args.model_json else DEFAULT_SPECS[args.model]
    if args.device == "cuda":
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    model = BUILDERS[args.model](**spec).to(args.device)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.rand(args.batch, 1, 28, 28).to(args.device)
    y = torch.randint(0, 10, (args.batch,)).to(args.device)
    if args.checkpoint_segments > 0:
        x.requires_grad_(True)  # PyTorch 1.13's reentrant checkpoint passes no gradient to parameters otherwise
    step(model, optimizer, x, y, args.checkpoint_segments)  # warm-up: gradients and momentum now exist
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        step(model, optimizer, x, y, args.checkpoint_segments)
        times.append(time.perf_counter() - start)
    start_bytes = sum(t.numel() * t.element_size() for t in model.parameters())
    start_bytes += sum(p.grad.numel() * p.grad.element_size() for p in model.parameters() if p.grad is not None)
    start_bytes += sum(v.numel() * v.element_size() for state in optimizer.state.values() for v in state.values()
                       if torch.is_tensor(v))
    start_bytes += x.numel() * x.element_size() + y.numel() * y.element_size()
    result = {
        "model": args.model, "spec": spec, "batch": args.batch, "threads": args.threads,
        "checkpoint_segments": args.checkpoint_segments, "torch": torch.__version__, "device": args.device,
        "seed": args.seed,
        "step_s": statistics.median(times), "step_times_s": times,
        "saved_bytes": saved_activation_bytes(model, x, y, args.checkpoint_segments),
        "peak_step_bytes": peak_step_bytes(model, optimizer, x, y, args.checkpoint_segments),
        "start_bytes": start_bytes,
    }
    if args.epoch:
        fresh = BUILDERS[args.model](**spec)
        order = None
        if args.paired:
            check_mt19937_64()
            load_dtr_initial_state(fresh, args.paired)
            order = dtr_epoch_order(args.seed, 0, 60000)
            result["paired_with"] = args.paired
        result["epoch_s"], result["test_accuracy"], result["epoch_losses"] = one_epoch(
            fresh.to(args.device), args.epoch, args.batch, args.checkpoint_segments, args.device, order)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
