#!/usr/bin/env python3
"""One artifact on every GPU at once: `sabre bench --json --device D` alone on the first GPU (the
baseline), then one such process per GPU, all started together, each timing its own back-to-back
runs; reports each GPU's throughput, the sum, and the sum against N times the one-GPU throughput, as
markdown with the GPU names and the date. With one GPU it runs and reports N=1.

Usage (GPU host, repository root):
  python3 bench/multi_gpu_bench.py ARTIFACT.sabre [--sabre build/sabre] [--gpus all|N|LIST]
      [--iters 2000] [--warmup 50] [--dim batch=8 ...] [--out bench/results/multi_gpu_<gpu>_<date>.md]
The processes load the artifact before timing, so their timed windows overlap except for load skew;
the report gives the spread of their start and end times so a reader can judge the overlap.
Exits 1 when a bench process fails; the throughput is reported, not judged."""

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_gpus(text, count):
    """--gpus as sabre tune and compile take it: all, N (the first N), 0,2,3 or device=2."""
    if text == "all":
        return list(range(count))
    if text.isdigit():
        n = int(text)
        if n < 1:
            sys.exit("multi_gpu_bench: --gpus 0: at least one GPU is needed")
        ids = list(range(n))
    else:
        body = text[len("device="):] if text.startswith("device=") else text
        if "," not in body and not text.startswith("device="):
            sys.exit(f"multi_gpu_bench: --gpus '{text}' is not a GPU list; give all, a count N, or ids like 0,2,3 or device=2")
        parts = body.split(",")
        if not all(p.isdigit() for p in parts):
            sys.exit(f"multi_gpu_bench: --gpus '{text}': give all, a count N, or ids like 0,2,3 or device=2")
        ids = [int(p) for p in parts]
        if len(set(ids)) != len(ids):
            sys.exit(f"multi_gpu_bench: --gpus '{text}' names a GPU twice: give each GPU once")
    for d in ids:
        if d >= count:
            sys.exit(f"multi_gpu_bench: GPU {d} asked for, but this machine has {count} GPU(s)")
    return ids


def gpu_names(given):
    """The GPUs this process sees, in CUDA's order (nvidia-smi, through CUDA_VISIBLE_DEVICES)."""
    if given:
        return given.split(",")
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index,name", "--format=csv,noheader"], capture_output=True,
                             text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit(f"multi_gpu_bench: cannot list the GPUs with nvidia-smi ({e}); give --gpu-names NAME,NAME")
    names = {}
    for line in out.strip().splitlines():
        idx, name = line.split(",", 1)
        names[idx.strip()] = name.strip()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return [names[k] for k in sorted(names, key=int)]
    return [names.get(v.strip(), v.strip()) for v in visible.split(",") if v.strip()]


def bench_cmd(args, device):
    cmd = [args.sabre, "bench", args.artifact, "--json", "--device", str(device), "--iters", str(args.iters),
           "--warmup", str(args.warmup), "--no-clocks"]
    for d in args.dim:
        cmd += ["--dim", d]
    return cmd


def run_together(args, devices):
    """One bench process per device, started together; each one's JSON and its wall start/end."""
    procs = []
    for d in devices:
        procs.append((d, time.time(), subprocess.Popen(bench_cmd(args, d), stdout=subprocess.PIPE,
                                                       stderr=subprocess.PIPE, text=True)))
    results = []
    failed = False
    for d, start, p in procs:
        out, err = p.communicate()
        end = time.time()
        if p.returncode != 0:
            sys.stderr.write(f"multi_gpu_bench: sabre bench on GPU {d} exited {p.returncode}:\n{err}")
            failed = True
            continue
        results.append({"device": d, "start": start, "end": end, "json": json.loads(out)})
    if failed:
        sys.exit(1)
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("artifact", help="a compiled artifact (sabre compile -o DIR)")
    ap.add_argument("--sabre", default=os.path.join(HERE, "..", "build", "sabre"), help="the sabre binary")
    ap.add_argument("--gpus", default="all", help="all (default), a count N, or ids like 0,2,3")
    ap.add_argument("--iters", type=int, default=2000, help="timed runs per GPU (default 2000)")
    ap.add_argument("--warmup", type=int, default=50, help="untimed runs first (default 50)")
    ap.add_argument("--dim", action="append", default=[], help="NAME=VALUE, as sabre bench takes it (repeatable)")
    ap.add_argument("--gpu-names", default="", help="the GPUs' names, comma-separated (default: from nvidia-smi)")
    ap.add_argument("--out", default="", help="also write the markdown here")
    args = ap.parse_args()
    if args.iters < 1 or args.warmup < 0:
        sys.exit("multi_gpu_bench: --iters must be positive and --warmup not negative")

    names = gpu_names(args.gpu_names)
    devices = parse_gpus(args.gpus, len(names))
    if len({names[d] for d in devices}) > 1:
        sys.exit("multi_gpu_bench: the GPUs are of different models (" + ", ".join(sorted({names[d] for d in devices})) +
                 "): bench each model's GPUs on its own with --gpus")
    alone = run_together(args, devices[:1])[0]
    together = run_together(args, devices)
    base = alone["json"]["throughput"]["samples_per_s"]
    total = sum(r["json"]["throughput"]["samples_per_s"] for r in together)
    n = len(devices)
    starts = [r["start"] for r in together]
    ends = [r["end"] for r in together]

    lines = []
    lines.append(f"# sabre on {n} GPU(s) at once: {os.path.basename(os.path.normpath(args.artifact))}")
    lines.append("")
    lines.append(f"- date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}")
    lines.append(f"- host: {platform.node()}; GPUs: " + ", ".join(f"{d}: {names[d]}" for d in devices))
    dims = alone["json"].get("dims", {})
    lines.append(f"- artifact: {args.artifact}; dims: " + (", ".join(f"{k}={v}" for k, v in dims.items()) or "static") +
                 f"; {args.iters} timed runs after {args.warmup} warmup per GPU, CUDA graphs, one process per GPU")
    lines.append(f"- sabre version: {alone['json'].get('sabre_version', '?')}")
    lines.append(f"- process start spread {max(starts) - min(starts):.2f} s, end spread {max(ends) - min(ends):.2f} s "
                 f"(of {max(ends) - min(starts):.1f} s)")
    lines.append("")
    lines.append("| GPU | name | samples/s | p50 latency ms | vs one GPU alone |")
    lines.append("|---:|---|---:|---:|---:|")
    a = alone["json"]
    lines.append(f"| {alone['device']} alone | {names[alone['device']]} | {base:.1f} | {a['latency_ms']['p50']:.4f} | 1.000 |")
    for r in together:
        j = r["json"]
        t = j["throughput"]["samples_per_s"]
        lines.append(f"| {r['device']} | {names[r['device']]} | {t:.1f} | {j['latency_ms']['p50']:.4f} | {t / base:.3f} |")
    lines.append("")
    lines.append(f"aggregate: {total:.1f} samples/s on {n} GPU(s) = {total / base:.2f} x one GPU "
                 f"({total / (n * base):.3f} of {n} x one GPU)")
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
