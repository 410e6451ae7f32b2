"""What bench/models/hf_e2e.py and tv_e2e.py measure alike: relative L2 error, the median CUDA-event
time of a PyTorch call, and `sabre bench`'s p50 of the same (CUDA events around a run) for an artifact."""
import re
import subprocess

import numpy as np
import torch


def rel_l2(a, b):
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def cuda_median_ms(fn, iters=100, warmup=20):
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


def sabre_p50_ms(sabre, artifact, dims, iters=300):
    """`sabre bench` p50 in ms at `dims` ({"batch": 8, ...}) of its CUDA-event time per run (the GPU's time
    from the run's start to its end, launch included: what cuda_median_ms measures of a PyTorch call);
    NaN (and the output printed) on failure."""
    args = [sabre, "bench", artifact, "--iters", str(iters)]
    for k, v in dims.items():
        args += ["--dim", f"{k}={v}"]
    r = subprocess.run(args, capture_output=True, text=True)
    m = re.search(r"gpu ms +p50 ([0-9.]+)", r.stdout)
    if not m:
        print(f"sabre bench failed: {r.stdout[-300:]} {r.stderr[-300:]}")
        return float("nan")
    return float(m.group(1))
