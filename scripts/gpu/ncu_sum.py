#!/usr/bin/env python3
"""Sums Nsight Compute's per-kernel gpu__time_duration over the last run of a `sabre bench` profile.

usage: ncu_sum.py NCU.csv RUNS [GRAPH_US]

NCU.csv is `ncu --csv --print-units base --metrics gpu__time_duration.sum` of `sabre bench ... --warmup W
--iters I --no-graphs` (RUNS = W + I runs of the plan, the same kernels each run). Prints the last run's
kernels grouped by name and grid with count, total and mean microseconds, the run's sum and, given the graph
replay's p50 in microseconds, how much of it the kernels' own times leave unexplained."""
import csv
import sys
from collections import OrderedDict


def short(name):
    # Template arguments and parameter lists make CUTLASS names long; keep what identifies the kernel.
    for key in ("sm90_", "sm80_", "cublaslt_"):
        i = name.find(key)
        if i >= 0:
            return name[i:].split("(")[0].split("<")[0].split(":")[0][:70]
    base = name.split("(")[0]
    return base.replace("void ", "").replace("sabre::", "").replace("(anonymous namespace)::", "")[:70]


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    rows = []
    with open(sys.argv[1], newline="") as f:
        lines = [l for l in f if l.startswith('"')]
    for r in csv.DictReader(lines):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        rows.append((f'{short(r["Kernel Name"])} grid {r["Grid Size"]}', float(r["Metric Value"].replace(",", "")) / 1000.0))
    runs = int(sys.argv[2])
    if not rows or len(rows) % runs:
        print(f"{len(rows)} kernel rows do not split into {runs} runs")
        return 1
    last = rows[-len(rows) // runs:]
    groups = OrderedDict()
    for name, us in last:
        g = groups.setdefault(name, [0, 0.0])
        g[0] += 1
        g[1] += us
    total = sum(us for _, us in last)
    print(f"{len(last)} kernels a run; their durations (ncu, serialized) sum to {total:.1f} us")
    for name, (n, us) in sorted(groups.items(), key=lambda kv: -kv[1][1]):
        print(f"  {n:4d} x {us / n:7.2f} us = {us:8.1f} us  {name[:100]}")
    if len(sys.argv) > 3:
        graph = float(sys.argv[3])
        print(f"graph replay p50 {graph:.1f} us: {graph - total:+.1f} us beyond the kernels' sum "
              f"({100 * (graph - total) / graph:+.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
