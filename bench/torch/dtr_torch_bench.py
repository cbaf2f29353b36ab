#!/usr/bin/python3
"""dtr-torch against plain PyTorch on this machine, in one process: per-op overhead and training steps.

    DTR_TORCH_LIBRARY=build/release/dtr_torch/libdtr_torch.so PYTHONPATH=python DTR_THRASH_LIMIT=off \\
        /usr/bin/python3 bench/torch/dtr_torch_bench.py [--model resnet] [--batch 128] [--steps 5] [--threads 2]
        [--ratios 0.5,0.3] [--repeats 3] [--rounds 1]

Debian's python3-torch 1.13 (with libopenblas0-pthread), run by /usr/bin/python3. Prints one JSON object:
  op_us            median microseconds per small op (a + b on 16 floats): plain, wrapped, and their difference
  rows             per configuration (plain; dtr unbudgeted; dtr at each ratio of dtr's unbudgeted peak):
                   median step time (forward, backward, SGD-momentum step; after one warm-up step), its ratio to
                   plain's, peak resident bytes in dtr's runtime, evictions and rematerializations in the timed
                   steps, and whether its losses equal plain's bit for bit. With --rounds R every configuration
                   runs R times, interleaved: the medians over rounds of the step time and of the ratio to the
                   same round's plain step, and each round's ratio ("slowdowns")
Each configuration trains from the same initial parameters on the same batches (seeded). The model is the zoo
architecture of bench/torch/zoo.py with parameters and buffers wrapped by dtr_torch.checkpoint_module.
"""
import argparse
import copy
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from zoo import BUILDERS  # noqa: E402
from baseline import DEFAULT_SPECS  # noqa: E402

import dtr_torch  # noqa: E402


def op_overhead(repeats):
    a, b = torch.ones(16), torch.ones(16)
    wa, wb = dtr_torch.checkpoint(a), dtr_torch.checkpoint(b)

    def per_op(x, y, n=2000):
        best = []
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(n):
                x + y
            best.append((time.perf_counter() - start) / n * 1e6)
        return statistics.median(best)

    plain = per_op(a, b)
    wrapped = per_op(wa, wb)
    return {"plain": plain, "wrapped": wrapped, "overhead": wrapped - plain}


def train(model, batches, wrapped):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses, times = [], []
    for i, (x, y) in enumerate(batches):
        start = time.perf_counter()
        if wrapped:
            x, y = dtr_torch.checkpoint(x), dtr_torch.checkpoint(y)
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(dtr_torch.decheckpoint(loss.detach()).item())
        if i > 0:  # the first step warms up
            times.append(time.perf_counter() - start)
    return losses, statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet", choices=sorted(BUILDERS))
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--ratios", default="0.5,0.3")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=1, help="interleaved rounds of all configurations")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    base = BUILDERS[args.model](**DEFAULT_SPECS[args.model])
    batches = [(torch.randn(args.batch, 1, 28, 28), torch.randint(0, 10, (args.batch,))) for _ in range(args.steps + 1)]

    def one_round(peak):
        """plain, then dtr unbudgeted and at each ratio of `peak` (0: of this round's unbudgeted peak)."""
        plain_losses, plain_time = train(copy.deepcopy(base), batches, False)
        rows = [{"config": "plain", "step_s": plain_time, "slowdown": 1.0, "equal_losses": True}]

        def dtr_row(name, budget):
            dtr_torch.set_budget(budget)
            dtr_torch.reset_peak_stats()
            before = dtr_torch.stats()
            model = dtr_torch.checkpoint_module(copy.deepcopy(base))
            try:
                losses, seconds = train(model, batches, True)
            except RuntimeError as e:
                return {"config": name, "error": str(e).splitlines()[0][:200]}
            finally:
                dtr_torch.set_budget(None)
            after = dtr_torch.stats()
            return {"config": name, "step_s": seconds, "slowdown": seconds / plain_time,
                    "peak_resident_bytes": after["peak_resident_bytes"],
                    "evictions": after["evictions"] - before["evictions"],
                    "rematerializations": after["rematerializations"] - before["rematerializations"],
                    "equal_losses": losses == plain_losses}

        unbudgeted = dtr_row("dtr unbudgeted", None)
        rows.append(unbudgeted)
        peak = peak or unbudgeted.get("peak_resident_bytes", 0)
        for ratio in [float(r) for r in args.ratios.split(",") if r]:
            rows.append(dtr_row(f"dtr at {ratio:g}", int(peak * ratio)))
        return rows, peak

    # Rounds interleave the configurations, so that a drift of the machine's speed (and the first, cold run)
    # touches all of them alike; each row reports the median over rounds of its step time and of its ratio to
    # the same round's plain step.
    rounds, peak = [], 0
    for _ in range(args.rounds):
        rows, peak = one_round(peak)
        rounds.append(rows)
    rows = []
    for i, first in enumerate(rounds[0]):
        row = dict(first)
        if all("step_s" in r[i] for r in rounds):
            row["step_s"] = statistics.median(r[i]["step_s"] for r in rounds)
            row["slowdowns"] = [r[i]["slowdown"] for r in rounds]
            row["slowdown"] = statistics.median(row["slowdowns"])
            row["equal_losses"] = all(r[i]["equal_losses"] for r in rounds)
        rows.append(row)
    print(json.dumps({"model": args.model, "spec": DEFAULT_SPECS[args.model], "batch": args.batch,
                      "steps": args.steps, "rounds": args.rounds, "threads": args.threads, "op_us": op_overhead(args.repeats),
                      "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
