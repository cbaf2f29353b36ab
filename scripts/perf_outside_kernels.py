#!/usr/bin/env python3
"""Where a training step's time outside its kernels goes, from a perf profile (docs/results/training-step.md).

    OPENBLAS_NUM_THREADS=1 perf record -F 4000 --call-graph dwarf,16384 -o step.data \\
        build/release/bench/dtr-bench-train-step --model transformer --profile-steps 20
    perf script -i step.data -F ip,sym > step.txt
    scripts/perf_outside_kernels.py step.txt

A sample is a kernel's when a kernel function is on its stack (an op's CPU kernel, OpenBLAS, oneDNN's
convolution); of the others, those under the bench's Trainer::step are the step's bookkeeping. Each is charged
to the innermost dtr function on its stack (libc's malloc and free to their caller), grouped by layer.
"""
import collections
import re
import sys

KERNEL = re.compile(r"KernelArgs const&|ops::\(anonymous namespace\)::\w+_cpu|cblas_sgemm|dtr::kernels::gemm|"
                    r"sgemm|onednn_conv")


def samples(path):
    stack = []
    with open(path) as f:
        for line in f:
            if not line.strip():
                if stack:
                    yield stack
                stack = []
            elif line[0] in " \t":
                parts = line.split(None, 1)
                stack.append(parts[1].strip() if len(parts) > 1 else "?")
    if stack:
        yield stack


def layer(function):
    if "heuristics" in function:
        return "heuristics"
    if "CachingAllocator" in function or "detail::Block" in function:
        return "allocator"
    if function.startswith("dtr::nn::") or "VariableImpl" in function:
        return "autograd and modules (nn)"
    if "Runtime" in function or "dtr::detail::" in function:
        return "runtime (lineage, closures)"
    return "other dtr (ops, attributes, metas)"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    in_step = kernel = 0
    layers = collections.Counter()
    functions = collections.Counter()
    for stack in samples(sys.argv[1]):
        if not any("Trainer::step" in f for f in stack):
            continue
        in_step += 1
        if any(KERNEL.search(f) for f in stack):
            kernel += 1
            continue
        owner = next((f for f in stack if "dtr::" in f[:60]), "outside dtr")
        name = re.sub(r"\(.*", "", owner)[:90]
        layers[layer(name)] += 1
        functions[name] += 1
    if in_step == 0:
        sys.exit("no sample under Trainer::step: was the profile taken with --call-graph dwarf?")
    outside = in_step - kernel
    print(f"{in_step} samples in steps, {outside} outside kernels: {100 * outside / in_step:.2f}%")
    for name, count in layers.most_common():
        print(f"  {100 * count / in_step:5.2f}%  {name}")
    print("functions (innermost dtr frame):")
    for name, count in functions.most_common(25):
        print(f"  {100 * count / in_step:5.2f}%  {name}")


if __name__ == "__main__":
    main()
