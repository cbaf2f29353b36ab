#!/usr/bin/env python3
"""The least recomputation a checkpointing schedule of the LSTM's time steps needs within a memory limit.

An anchor for DTR's figures on the zoo's LSTM (issue 15: 1.15x at 50% of the unbudgeted peak): a time step is a
stage of a chain (its forward: the input's linear, the hidden state's linear_add, the fused cell), and the
optimal schedule of such a chain under a memory limit is rotor's dynamic program (Herrmann, Shi, Beaumont,
Eyraud-Dubois and Mirzaei, "Optimal checkpointing for heterogeneous chains", 2019). A stage's forward either
keeps nothing (F_n), keeps its output state as a checkpoint (F_ck, size a), or keeps everything its backward
reads (F_all, size xbar, the output state included); a backward needs its stage's xbar and its input state.

  chain_optimum.py TRACE COMPARE
      TRACE: `dtr-train --model lstm --steps 10 --data synthetic --trace TRACE` (at least 3 steps: the first
      step's times are warm-up and not used)
      COMPARE: `dtr-train --model lstm --compare --json > COMPARE`, the same model and batch
      For each row, the program's least extra compute at the memory the row's peak leaves to the time steps,
      beside the row's measured extra compute.
  chain_optimum.py --self-check
      the program against a search over every persistent schedule of small random chains (equal) and over
      every schedule (never above the program)

Memory left to the time steps in a row: the full activations less what the row's peak resident saves on the
unbudgeted one, A - (peak - row's peak); what is resident beside the activations (parameters, the batch,
gradients) is taken to stay. The program's model: a time step kept whole or as its state only, and kept until
its backward (persistent); DTR can keep part of one (the gates without the state, which the cheap cell
remakes) and drop and remake a kept state, so it can go under this optimum (on small chains a non-persistent
schedule is cheaper in about one case of ten); the model leaves out the backward's own temporaries, which
flatters the optimum.
Standard library only; Debian's python3.
"""
import argparse
import functools
import heapq
import json
import random
import statistics
import sys

INF = float("inf")


def optimum(f, b, a, xbar, memory):
    """The least total cost (forwards, recomputations and backwards) to run every stage's forward then its
    backward, stage L-1 first, within `memory` (the chain's input is free); INF where nothing fits."""
    stages = len(f)
    sys.setrecursionlimit(max(1000, 20 * stages))

    @functools.lru_cache(maxsize=None)
    def cost(s, t, m):  # stages s..t, a^(s-1) held outside m
        if s == t:
            return f[s] + b[s] if m >= xbar[s] else INF
        best = f[s] + cost(s + 1, t, m - xbar[s]) + b[s] if m >= xbar[s] else INF
        forward = 0.0
        for split in range(s + 1, t + 1):  # run s..split-1 keeping nothing, keep a^(split-1)
            forward += f[split - 1]
            rest = m - a[split - 1]
            if rest < 0:
                break
            best = min(best, forward + cost(split, t, rest) + cost(s, split - 1, m))
        return best

    return cost(0, stages - 1, memory) if stages else 0.0


def exhaustive(f, b, a, xbar, memory, persistent):
    """The same least cost by a search over schedules of the same operations (Dijkstra over what is kept):
    forwards that keep nothing, a checkpoint or everything, in any order and as often as wanted, and free
    drops. `persistent`: rotor's class, where a stage keeps everything only from a kept input and a kept state
    stays until the backward that reads it; else any schedule (smaller chains only: the states explode)."""
    stages = len(f)
    start = (frozenset(), frozenset(), -1, stages - 1)  # checkpoints, xbars, the current state, next backward
    done = {}
    queue = [(0.0, 0, start)]
    tie = 1
    while queue:
        c, _, state = heapq.heappop(queue)
        if state in done:
            continue
        done[state] = c
        kept, whole, current, pending = state
        if pending < 0:
            return c
        used = sum(a[k] for k in kept) + sum(xbar[k] for k in whole)
        held = lambda k: k < 0 or k in kept or k in whole  # noqa: E731 (counted in the memory)
        moves = []
        for k in range(pending + 1):
            if not (held(k - 1) or current == k - 1):
                continue
            moves.append((f[k], (kept, whole, k, pending)))
            if k not in kept and used + a[k] <= memory:
                moves.append((f[k], (kept | {k}, whole, k, pending)))
            if k not in whole and (held(k - 1) or not persistent) and used + xbar[k] <= memory:
                moves.append((f[k], (kept, whole | {k}, k, pending)))
        if pending in whole and held(pending - 1):
            moves.append((b[pending], (kept, whole - {pending}, current, pending - 1)))
        for k in kept:
            if not persistent or k >= pending:
                moves.append((0.0, (kept - {k}, whole, current, pending)))
        if not persistent:
            for k in whole:
                moves.append((0.0, (kept, whole - {k}, current, pending)))
        for step, nxt in moves:
            if nxt not in done:
                heapq.heappush(queue, (c + step, tie, nxt))
                tie += 1
    return INF


def self_check(cases=1500, seed=1):
    rng = random.Random(seed)
    below = 0
    for case in range(cases):
        stages = rng.randint(1, 5)
        f = [float(rng.randint(1, 6)) for _ in range(stages)]
        b = [float(rng.randint(0, 4)) for _ in range(stages)]
        a = [rng.randint(1, 3) for _ in range(stages)]
        xbar = [k + rng.randint(0, 3) for k in a]
        memory = rng.randint(0, sum(xbar) + 1)
        dp = optimum(f, b, a, xbar, memory)
        persistent = exhaustive(f, b, a, xbar, memory, persistent=True)
        # Any schedule: a relaxation, never above the program (on a third of the cases: it is slow).
        anything = exhaustive(f, b, a, xbar, memory, persistent=False) if case % 3 == 0 else dp
        if dp != persistent or anything > dp:
            print(f"case {case}: f={f} b={b} a={a} xbar={xbar} memory={memory}: dynamic program {dp}, "
                  f"every persistent schedule {persistent}, every schedule {anything}")
            return 1
        below += anything < dp
    # Its two ends: everything fits (no recomputation); a unit chain with room for a stage and its input only
    # runs each stage's prefix again before the stage (n(n+1)/2 forwards), but the first stage, kept whole
    # from the first pass, is the second's input (one fewer).
    n = 9
    if optimum([1.0] * n, [0.0] * n, [1] * n, [1] * n, n) != n:
        print("a chain that fits recomputes")
        return 1
    if optimum([1.0] * n, [0.0] * n, [1] * n, [1] * n, 2) != n * (n + 1) / 2 - 1:
        print("room for a checkpoint and a stage: not every prefix recomputed")
        return 1
    print(f"the dynamic program equals the search over persistent schedules on {cases} random chains; a "
          f"non-persistent schedule is cheaper on {below} of the {(cases + 2) // 3} searched")
    return 0


class TraceError(Exception):
    pass


def lstm_chain(path):
    """(time steps, a time step's forward cost, a training step's cost, what a time step keeps for its backward
    (its gates, state and input slice: xbar), its state's bytes (a)) from a trace of the zoo LSTM (one layer);
    costs are medians over the steps after the first, in the trace's unit (ns)."""
    sizes, calls = {}, []
    with open(path) as trace:
        for number, line in enumerate(trace, 1):
            try:
                entry = json.loads(line)
            except json.JSONDecodeError as error:
                raise TraceError(f"{path}:{number}: not a JSON object ({error})") from None
            kind = entry.get("INSTRUCTION")
            if kind == "MEMORY":
                sizes[entry["NAME"]] = int(entry["MEMORY"])
            elif kind == "CALL":
                calls.append(entry)
    losses = [i for i, c in enumerate(calls) if c["NAME"] == "cross_entropy"]
    if len(losses) < 3:
        raise TraceError(f"{path}: {len(losses)} training steps (expected a trace of at least 3: "
                         "dtr-train --model lstm --steps 3 --trace FILE)")
    steps = [calls[losses[k - 1] + 1:losses[k] + 1] for k in range(2, len(losses))]
    cells = [c for c in steps[0] if c["NAME"] == "lstm_cell"]
    if not cells:
        raise TraceError(f"{path}: no lstm_cell op (expected a trace of dtr-train --model lstm)")
    gates = [c for c in steps[0] if c["NAME"] == "linear_add"]
    inputs = [c for c in steps[0] if c["NAME"] == "slice"]
    if len(gates) != len(cells) or len(inputs) != len(cells):
        raise TraceError(f"{path}: {len(cells)} cells, {len(gates)} linear_adds and {len(inputs)} slices a step "
                         "(expected one of each a time step: a one-layer LSTM)")
    time_steps = len(cells)
    forward, total = [], []
    for step in steps:
        total.append(sum(int(c["TIME"]) for c in step))
        forward.append(sum(int(c["TIME"]) for c in step if c["NAME"] in ("slice", "linear", "linear_add", "lstm_cell"))
                       / time_steps)
    gate_bytes = sizes[gates[0]["RESULT"][0]]
    state_bytes = sum(sizes[r] for r in cells[0]["RESULT"])
    input_bytes = sizes[inputs[0]["RESULT"][0]]
    return (time_steps, statistics.median(forward), statistics.median(total), gate_bytes + state_bytes + input_bytes,
            state_bytes)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trace", nargs="?", help="dtr-train --model lstm --trace TRACE")
    parser.add_argument("compare", nargs="?", help="dtr-train --model lstm --compare --json > COMPARE")
    parser.add_argument("--unit", type=int, default=16384, help="the program's memory granularity, bytes")
    parser.add_argument("--self-check", action="store_true")
    args = parser.parse_args()
    if args.self_check:
        return self_check()
    if args.compare is None:
        parser.error("a trace and a --compare --json result are needed (or --self-check)")
    try:
        steps, forward, step_cost, per_step, state = lstm_chain(args.trace)
        with open(args.compare) as compare:
            rows = json.load(compare)["rows"]
        peak = rows[0]["peak_resident_bytes"]
        if rows[0]["strategy"] != "unbudgeted":
            raise TraceError(f"{args.compare}: the first row is {rows[0]['strategy']!r} (expected the unbudgeted one)")
    except (OSError, TraceError) as error:
        print(f"chain_optimum.py: {error}", file=sys.stderr)
        return 1
    except (ValueError, KeyError, IndexError, TypeError) as error:
        print(f"chain_optimum.py: {args.compare}: not dtr-train --compare --json's output ({error!r})", file=sys.stderr)
        return 1
    activations = steps * per_step
    unit = args.unit
    print(f"{steps} time steps; a time step's forward {forward / 1e3:.1f} µs, {100 * steps * forward / step_cost:.1f}% "
          f"of a step ({step_cost / 1e6:.2f} ms of ops); activations {per_step / 1024:.0f} KiB a time step (its state "
          f"{state / 1024:.0f} KiB), {activations / 2**20:.2f} MiB in all; unbudgeted peak resident {peak / 2**20:.2f} MiB")
    print()
    print("| row | peak resident | left to the time steps | optimal extra compute (persistent) | the row's |")
    print("|---|---|---|---|---|")
    f = [forward] * steps
    whole, kept = -(-per_step // unit), -(-state // unit)
    for row in rows[1:]:
        left = activations - (peak - row["peak_resident_bytes"])
        cost = optimum(f, [0.0] * steps, [kept] * steps, [whole] * steps, int(left // unit))
        extra = "does not fit" if cost == INF else f"{100 * (cost - sum(f)) / step_cost:.1f}%"
        print(f"| {row['strategy']} | {row['peak_resident_bytes'] / 2**20:.2f} MiB | {left / 2**20:.2f} MiB "
              f"({left / activations:.2f}) | {extra} | {100 * row['extra_compute']:.1f}%"
              f"{'' if row.get('completed', True) else ' (stopped: ' + row.get('failure', '').split(':')[0] + ')'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
