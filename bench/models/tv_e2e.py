#!/usr/bin/env python3
"""Issue 7's end-to-end evidence on the GPU host, against PyTorch on the same GPU.

  tv_e2e.py compare NAME OUTDIR ARTIFACT SABRE B [B ...]
      Rebuilds NAME (resnet50 | mobilenet_v2) from OUTDIR/NAME.pt (export_tv.py), runs it in fp16
      (channels_last) on random images for each batch B, runs the sabre artifact on the same inputs
      (`sabre run`) and prints the relative L2 error against PyTorch fp16 (target <= 1e-2) and, for
      scale, PyTorch fp16 against fp32. Exit 1 when over 1e-2.
  tv_e2e.py latency NAME OUTDIR ARTIFACT[,ARTIFACT...] SABRE B [B ...]
      Median CUDA-event time per call (launch included) of PyTorch eager fp16 channels_last,
      torch.compile(mode="reduce-overhead") and `sabre bench` (CUDA graphs) of each artifact at each
      batch, in one run: SABRE_BENCH_ROUNDS rounds (default 3) of every system in turn, each round's
      table, then the median over the rounds; "x best torch" is the faster torch time over the first
      artifact's."""
import copy
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_tv import build  # noqa: E402
from measure import cuda_median_ms, rel_l2, sabre_p50_ms  # noqa: E402


def load(name, outdir):
    model = build(name)
    model.load_state_dict(torch.load(os.path.join(outdir, name + ".pt"), map_location="cpu"))
    return model.eval()



def compare(name, outdir, artifact, sabre, batches):
    # The fp32 reference in full fp32: cuDNN would otherwise run its convs in TF32.
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    model = load(name, outdir)
    m16 = copy.deepcopy(model).to("cuda", torch.float16).to(memory_format=torch.channels_last)
    m32 = model.to("cuda")
    worst = 0.0
    print(f"{name}: sabre vs PyTorch {torch.__version__} fp16 on {torch.cuda.get_device_name()}")
    print(f"{'batch':>5}  {'rel L2 vs torch fp16':>21} {'max abs':>9} {'sabre vs torch fp32':>20} {'(torch fp16 vs fp32)':>21}")
    for b in batches:
        g = torch.Generator().manual_seed(10 + b)
        x = torch.randn(b, 3, 224, 224, generator=g)
        with torch.no_grad():
            want = m16(x.cuda().half().to(memory_format=torch.channels_last)).float().cpu().numpy()
            want32 = m32(x.cuda()).float().cpu().numpy()
        with tempfile.TemporaryDirectory() as tmp:
            np.save(os.path.join(tmp, "images.npy"), x.numpy())
            r = subprocess.run([sabre, "run", artifact, "--input", f"images={tmp}/images.npy", "-o", f"{tmp}/out"],
                               capture_output=True, text=True)
            if r.returncode != 0:
                print(f"{b:>5}  sabre run failed ({r.returncode}): {r.stderr.strip()[:400]}")
                worst = float("inf")
                continue
            got = np.load(f"{tmp}/out/logits.npy")
        e = rel_l2(got, want)
        worst = max(worst, e)
        print(f"{b:>5}  {e:>21.3e} {np.abs(got - want).max():>9.3e} {rel_l2(got, want32):>20.3e} {rel_l2(want, want32):>21.3e}")
    print(f"worst rel L2 vs PyTorch fp16: {worst:.3e} (target <= 1e-2)")
    return 0 if worst <= 1e-2 else 1



def latency(name, outdir, artifacts, sabre, batches, rounds):
    model = load(name, outdir).to("cuda", torch.float16).to(memory_format=torch.channels_last)
    arts = artifacts.split(",")
    print(f"{name} fp16 on {torch.cuda.get_device_name()}, torch {torch.__version__}, torchvision "
          f"{torchvision.__version__}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print("median CUDA-event ms per call (launch included) of each system, measured in turn, " + str(rounds) +
          " rounds; the table is the median over the rounds")
    if len(arts) > 1:
        print("sabre ms columns: " + ", ".join(os.path.basename(a) for a in arts))
    heads = "".join(f"{'sabre ms':>9} " for _ in arts)
    head = f"{'batch':>5} {'eager ms':>9} {'compile ms':>11} {heads}{'x best torch':>13}"
    compiled = torch.compile(model, mode="reduce-overhead")
    got = {b: [] for b in batches}  # per batch: one (eager, compiled, sabre...) row per round

    def row(b, t):
        cols = "".join(f"{x:>9.3f} " for x in t[2:])
        return f"{b:>5} {t[0]:>9.3f} {t[1]:>11.3f} {cols}{min(t[0], t[1]) / t[2]:>13.2f}"

    for r in range(rounds):
        print(f"round {r + 1}:\n{head}")
        for b in batches:
            x = torch.randn(b, 3, 224, 224, device="cuda", dtype=torch.float16).to(memory_format=torch.channels_last)
            with torch.no_grad():
                eager = cuda_median_ms(lambda: model(x))
                compiled(x)
                compiled(x)
                comp = cuda_median_ms(lambda: compiled(x))
            got[b].append([eager, comp] + [sabre_p50_ms(sabre, a, {"batch": b}) for a in arts])
            print(row(b, got[b][-1]), flush=True)
    print(f"median of {rounds} rounds:\n{head}")
    for b in batches:
        print(row(b, [float(np.median([t[i] for t in got[b]])) for i in range(len(got[b][0]))]), flush=True)


if __name__ == "__main__":
    if len(sys.argv) < 7:
        sys.exit(__doc__)
    cmd, name, outdir, artifact, sabre = sys.argv[1:6]
    batches = [int(x) for x in sys.argv[6:]]
    if cmd == "compare":
        sys.exit(compare(name, outdir, artifact, sabre, batches))
    elif cmd == "latency":
        latency(name, outdir, artifact, sabre, batches, int(os.environ.get("SABRE_BENCH_ROUNDS", "3")))
    else:
        sys.exit(__doc__)
