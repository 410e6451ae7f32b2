"""What the model benchmarks (bench/zoo.py, hf_e2e.py, tv_e2e.py) measure alike: relative L2 error, CUDA-event
times of a PyTorch call (per call and back to back), and `sabre bench`'s numbers for an artifact. torch is
imported where it is used, so the report side of bench/zoo.py runs without it."""
import re
import subprocess

import numpy as np


def rel_l2(a, b):
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def cuda_median_ms(fn, iters=100, warmup=20):
    """Per call: the median over ITERS calls of the CUDA-event time around one call (launch included)."""
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return float(np.median(times))


def cuda_back_to_back_ms(fn, runs=100, repeats=5, warmup=20):
    """Back to back: RUNS calls enqueued one after another between two CUDA events, the time divided by
    RUNS; the median of REPEATS such loops. The host's launch cost is hidden where the GPU is the
    bottleneck, as in a serving loop that does not wait for each result."""
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(runs):
            fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / runs)
    return float(np.median(times))


def sabre_bench(sabre, artifact, dims, iters=300, back_to_back=0, timeout=None):
    """Runs `sabre bench` at `dims` ({"batch": 8, ...}) and returns {"call_ms": its gpu ms p50 (CUDA events
    around each run, launch included: what cuda_median_ms measures of a PyTorch call), "host_ms": its
    latency p50, "b2b_ms": its back-to-back time a run where BACK_TO_BACK > 0 and this sabre offers it, else
    None, "ok", "text": its output}."""
    args = [sabre, "bench", artifact, "--iters", str(iters)]
    for k, v in dims.items():
        args += ["--dim", f"{k}={v}"]
    if back_to_back:
        args += ["--back-to-back", str(back_to_back)]
    r = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    gpu = re.search(r"gpu ms +p50 ([0-9.]+)", r.stdout)
    host = re.search(r"latency ms +p50 ([0-9.]+)", r.stdout)
    b2b = re.search(r"back to back ms +([0-9.]+)", r.stdout)
    return {"ok": r.returncode == 0 and gpu is not None, "call_ms": float(gpu.group(1)) if gpu else None,
            "host_ms": float(host.group(1)) if host else None, "b2b_ms": float(b2b.group(1)) if b2b else None,
            "text": r.stdout + r.stderr}


def sabre_p50_ms(sabre, artifact, dims, iters=300):
    """`sabre bench` p50 in ms at `dims` of its CUDA-event time per run; NaN (and the output printed) on failure."""
    got = sabre_bench(sabre, artifact, dims, iters)
    if not got["ok"]:
        print(f"sabre bench failed: {got['text'][-600:]}")
        return float("nan")
    return got["call_ms"]
