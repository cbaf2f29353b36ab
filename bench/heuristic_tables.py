#!/usr/bin/env python3
"""Issue 18's tables: every heuristic's lowest feasible budget and its overhead per budget, on every trace.

    python3 bench/heuristic_tables.py [--build build/release] [--work build/heuristic-tables] [--plots DIR]
        [--extra NAME=TRACE ...] [--step 0.05] [--fine 0.01] > tables.md

Writes the traces it needs into --work (kept: rerun with the same directory and nothing is traced again):
  - the six zoo models, `dtr-train --trace` with FLOP costs and the op-counting clock, 3 steps of synthetic
    data: A = each model's defaults (batch 128), B = batch 32 and seed 7;
  - three random DAGs, `dtr-trace-gen dag --seed S` (S = 1, 2, 3).
--extra adds a trace of one's own (the DTR authors' logs, say), replayed as the authors' simulator does, every
constant kept. Then replays each trace with `dtr-sim --heuristic all --heuristic forecast --budget-mode both
--sweep STEP:1:STEP` (`all`: the DTR paper's seven heuristics; and ours; bytes and device budgets,
the authors' thrash limit of 2x), then again every --fine below the lowest feasible ratios that sweep
found (from one --step under the lowest of them to the highest), and prints Markdown: per trace and budget
mode, each heuristic's lowest feasible budget ratio (the smallest from which every larger ratio of both
sweeps fits) and its overhead at each ratio of the first; then the summary issue 18 asks for: where
`forecast` fits lower than the best of the DTR heuristics, whether any heuristic could fit lower at all
(at the fine ratio under the best one's, every heuristic out of memory: the budget holds less than some op
needs at once), and where `forecast` recomputes more than `dtr-eq` at a ratio both fit. With --plots, an
SVG per trace of overhead against budget, both modes, for `forecast`, `dtr-eq`, `dtr` and `msps` (dtr-sim's
gnuplot plot).

Needs nothing but the built tools and Python's standard library.
"""
import argparse
import csv
import os
import subprocess
import sys

ZOO = ["mlp", "resnet", "transformer", "lstm", "unet", "densenet"]
PAPER = ["dtr", "dtr-eq", "dtr-local", "msps", "lru", "size", "random"]  # the DTR paper's heuristics
OURS = "forecast"
PLOTTED = [OURS, "dtr-eq", "dtr", "msps"]


def run(cmd, env=None, stdout=subprocess.DEVNULL):
    full_env = dict(os.environ)
    full_env.update(env or {})
    subprocess.run(cmd, check=True, env=full_env, stdout=stdout, stderr=subprocess.PIPE)


def zoo_traces(build, work):
    traces = []
    deterministic = {"DTR_COST_MODEL": "flops", "DTR_CLOCK": "ops"}
    for variant, extra in (("A", []), ("B", ["--batch", "32", "--seed", "7"])):
        for model in ZOO:
            path = os.path.join(work, f"{variant}-{model}.log")
            if not os.path.exists(path):
                run([os.path.join(build, "tools", "dtr-train"), "--model", model, "--steps", "3", "--data",
                     "synthetic", "--trace", path] + extra, env=deterministic)
            traces.append((f"{variant}-{model}", path, "freed"))
    for seed in (1, 2, 3):
        path = os.path.join(work, f"dag-{seed}.log")
        if not os.path.exists(path):
            run([os.path.join(build, "tools", "dtr-trace-gen"), "dag", "--seed", str(seed), "--output", path])
        traces.append((f"dag-{seed}", path, "kept"))
    return traces


def sweep_csv(build, path, constants, sweep, csv_path):
    if not os.path.exists(csv_path):
        run([os.path.join(build, "tools", "dtr-sim"), path, "--heuristic", "all", "--heuristic", OURS,
             "--budget-mode", "both", "--constants", constants, "--sweep", sweep, "--csv", csv_path])
    with open(csv_path, newline="") as f:
        return list(csv.DictReader(f))


def replay(build, name, path, constants, step, fine, work, plots):
    coarse_sweep = f"{step}:1.0:{step}"
    rows = sweep_csv(build, path, constants, coarse_sweep, os.path.join(work, f"{name}.csv"))
    if plots:  # ours and the three that fit lowest on these traces, both modes: eight curves
        svg = os.path.join(plots, f"{name}.svg")
        if not os.path.exists(svg):
            plotted = [arg for h in PLOTTED for arg in ("--heuristic", h)]
            run([os.path.join(build, "tools", "dtr-sim"), path] + plotted +
                ["--budget-mode", "both", "--constants", constants, "--sweep", coarse_sweep, "--plot", svg])
    for r in rows:
        r["coarse"] = "yes"
    # The fine sweep: between one step under the lowest feasible ratio any heuristic reached and the highest.
    lows = []
    for mode in ("bytes", "device"):
        mine = [r for r in rows if r["budget_mode"] == mode]
        for h in {r["heuristic"] for r in mine}:
            low = lowest_of(mine, h)
            if low is not None:
                lows.append(low)
    if fine > 0 and lows:
        start = max(fine, min(lows) - float(step) + fine)
        end = max(lows) - fine
        if end >= start - 1e-9:
            fine_rows = sweep_csv(build, path, constants, f"{start:.4f}:{end + fine / 2:.4f}:{fine}",
                                  os.path.join(work, f"{name}-fine.csv"))
            coarse = {(r["heuristic"], r["budget_mode"], round(float(r["ratio"]), 6)) for r in rows}
            rows += [r for r in fine_rows
                     if (r["heuristic"], r["budget_mode"], round(float(r["ratio"]), 6)) not in coarse]
    return rows


def lowest_feasible(cells):
    """The smallest ratio from which every larger ratio of the sweep fits; None if the largest does not."""
    lowest = None
    for ratio, fits in sorted(cells, key=lambda c: -c[0]):
        if not fits:
            break
        lowest = ratio
    return lowest


def lowest_of(rows, heuristic):
    """`heuristic`'s lowest feasible ratio over `rows` (one budget mode)."""
    return lowest_feasible([(round(float(r["ratio"]), 4), fits(r)) for r in rows if r["heuristic"] == heuristic])


def fits(r):
    """A cell that finished within the thrash limit (dtr-sim marks a thrashed cell feasible when it finished)."""
    return r is not None and r["feasible"] == "true" and r["thrashed"] != "true"


def out_of_memory(r):
    return r is not None and r["feasible"] != "true" and r["thrashed"] != "true"


def fmt_ratio(r):
    return "—" if r is None else f"{r:.2f}"


def compare_lowest(ours, best):
    """`forecast`'s lowest feasible ratio against the best DTR heuristic's: the words for the table, and which
    of the tally's buckets it falls in (None where neither fits); "lower" is forecast fitting a smaller budget."""
    if ours is None and best is None:
        return "neither fits", None
    if best is None:
        return "only forecast fits", "lower"
    if ours is None:
        return "only a DTR heuristic fits", "higher"
    if ours < best - 1e-9:
        return "lower", "lower"
    return ("higher", "higher") if ours > best + 1e-9 else ("equal", "equal")


def tables(rows, name, out):
    heuristics = [h for h in PAPER + [OURS] if any(r["heuristic"] == h for r in rows)]
    summary = {}
    for mode in ("bytes", "device"):
        mine = [r for r in rows if r["budget_mode"] == mode]
        every_ratio = sorted({round(float(r["ratio"]), 4) for r in mine})
        ratios = sorted({round(float(r["ratio"]), 4) for r in mine if r.get("coarse")})
        cell = {(r["heuristic"], round(float(r["ratio"]), 4)): r for r in mine}
        lowest = {h: lowest_of(mine, h) for h in heuristics}
        out.write(f"\n**{name}, {mode} budgets**: lowest feasible ratio (both sweeps), then overhead ((base + "
                  "recomputation) / base) per ratio; `oom` does not fit, `thrash` passed 2x\n\n")
        shown = [x for x in ratios if any(fits(cell.get((h, x))) for h in heuristics)]
        out.write("| heuristic | lowest feasible | " + " | ".join(f"{x:.2f}" for x in shown) + " |\n")
        out.write("|---|---:|" + "---:|" * len(shown) + "\n")
        for h in heuristics:
            values = []
            for x in shown:
                r = cell.get((h, x))
                if r is None:
                    values.append("")
                elif fits(r):
                    values.append(f"{float(r['overhead']):.3f}")
                else:
                    values.append("thrash" if r["thrashed"] == "true" else "oom")
            label = f"**{h}**" if h == OURS else h
            out.write(f"| {label} | {fmt_ratio(lowest[h])} | " + " | ".join(values) + " |\n")
        best_paper = [lowest[h] for h in PAPER if h in lowest and lowest[h] is not None]
        both = [x for x in ratios if fits(cell.get((OURS, x))) and fits(cell.get(("dtr-eq", x)))]
        more = [x for x in both if float(cell[(OURS, x)]["overhead"]) > float(cell[("dtr-eq", x)]["overhead"]) + 0.005]
        less = [x for x in both if float(cell[(OURS, x)]["overhead"]) < float(cell[("dtr-eq", x)]["overhead"]) - 0.005]
        best = min(best_paper) if best_paper else None
        # Under the best one's lowest ratio, whether every heuristic ran out of memory there (None: not swept).
        under = [x for x in every_ratio if best is not None and x < best - 1e-9]
        floor = None
        if under:
            floor = all(out_of_memory(cell.get((h, under[-1]))) for h in heuristics if (h, under[-1]) in cell)
        summary[mode] = (lowest.get(OURS), best, floor, len(less), len(more), len(both))
    return summary


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default="build/release")
    parser.add_argument("--work", default="build/heuristic-tables")
    parser.add_argument("--plots", default="")
    parser.add_argument("--step", default="0.05")
    parser.add_argument("--fine", type=float, default=0.01, help="the second sweep's step (0: none)")
    parser.add_argument("--extra", action="append", default=[], help="NAME=TRACE, replayed with constants kept")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    if args.plots:
        os.makedirs(args.plots, exist_ok=True)
    traces = []
    for extra in args.extra:
        name, _, path = extra.partition("=")
        if not path or not os.path.exists(path):
            sys.exit(f"--extra {extra}: expected NAME=TRACE with an existing trace file")
        traces.append((name, path, "kept"))
    traces += zoo_traces(args.build, args.work)
    out = sys.stdout
    summaries = []
    for name, path, constants in traces:
        rows = replay(args.build, name, path, constants, args.step, args.fine, args.work, args.plots)
        summaries.append((name, tables(rows, name, out)))
    out.write("\n**Summary**: `forecast`'s lowest feasible ratio against the lowest of the DTR paper's seven "
              "heuristics (both sweeps); whether, at the next ratio swept under the best one's, every heuristic "
              "ran out of memory (no heuristic can fit there); and the ratios of the first sweep where both "
              "`forecast` and `dtr-eq` fit at which `forecast` recomputes less / more than `dtr-eq` (by more "
              "than 0.005 of the base)\n\n")
    out.write("| trace | mode | `forecast` lowest | best DTR heuristic's lowest | forecast vs best | under the best, "
              "all out of memory | less than `dtr-eq` | more | ratios both fit |\n"
              "|---|---|---:|---:|---|---|---:|---:|---:|\n")
    tally = {"lower": 0, "equal": 0, "higher": 0}
    floors = 0
    for name, summary in summaries:
        for mode, (ours, best, floor, less, more, both) in summary.items():
            verdict, bucket = compare_lowest(ours, best)
            if bucket:
                tally[bucket] += 1
            floors += floor is True
            shown_floor = "—" if floor is None else ("yes" if floor else "no")
            out.write(f"| {name} | {mode} | {fmt_ratio(ours)} | {fmt_ratio(best)} | {verdict} | {shown_floor} | "
                      f"{less} | {more} | {both} |\n")
    out.write(f"\n`forecast` fits lower than the best DTR heuristic on {tally['lower']} (trace, mode) pairs, "
              f"as low on {tally['equal']}, higher on {tally['higher']}; on {floors} every heuristic runs out of "
              "memory under the best one's lowest ratio.\n")


if __name__ == "__main__":
    main()
