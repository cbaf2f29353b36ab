#!/usr/bin/python3
"""How far apart two PyTorch runs of the paired epoch's first steps drift when the start differs by rounding.

    /usr/bin/python3 bench/torch/sensitivity.py INIT_FILE [--seed S] [--steps 4] [--perturb 1e-7,1e-6]
        [--data /usr/share/datasets/fashion-mnist]

INIT_FILE is dtr-train's initial state (`dtr-train --model resnet --seed S --steps 0 --save INIT_FILE`). The script
trains PyTorch's ResNet-32 (bench/torch/zoo.py) from it on dtr-train's batches for --seed (as baseline.py
--paired does), then again from the same parameters each multiplied by (1 + eps * N(0, 1)), for each eps, and
prints each step's loss and the relative difference of every perturbed run's loss from the unperturbed one's.
A difference between dtr's and PyTorch's losses of the size these show is what float rounding alone makes.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import baseline  # noqa: E402
from zoo import BUILDERS  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("init")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--perturb", default="1e-7,1e-6")
    parser.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    args = parser.parse_args()
    torch.set_num_threads(2)
    images, labels = baseline.read_fashion_mnist(args.data, "train")
    baseline.check_mt19937_64()
    order = baseline.dtr_epoch_order(args.seed, 0, images.shape[0])

    def run(eps):
        torch.manual_seed(0)
        model = BUILDERS["resnet"](**baseline.DEFAULT_SPECS["resnet"])
        baseline.load_dtr_initial_state(model, args.init)
        if eps:
            with torch.no_grad():
                for p in model.parameters():
                    p.mul_(1 + eps * torch.randn_like(p))
        model.train()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
        losses = []
        for s in range(args.steps):
            index = order[s * 128:(s + 1) * 128]
            losses.append(baseline.step(model, optimizer, images[index], labels[index], 0))
        return losses

    base = run(0.0)
    others = {eps: run(eps) for eps in (float(e) for e in args.perturb.split(","))}
    print("| step | loss | " + " | ".join(f"eps {eps:g}: relative difference" for eps in others) + " |")
    print("|---:|---:|" + "---:|" * len(others))
    for s, loss in enumerate(base):
        cells = " | ".join(f"{abs(o[s] - loss) / loss:.2e}" for o in others.values())
        print(f"| {s} | {loss:.6f} | {cells} |")


if __name__ == "__main__":
    main()
