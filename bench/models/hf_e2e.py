#!/usr/bin/env python3
"""Issue 6's end-to-end evidence on the GPU host, against PyTorch on the same GPU.

  hf_e2e.py compare NAME OUTDIR ARTIFACT SABRE B:S [B:S ...]
      Rebuilds NAME (bert_base | gpt2) from OUTDIR/NAME.pt (bench/models/export_hf.py wrote it),
      runs it in fp16 on the GPU for each batch B and sequence length S with random token ids and an
      attention mask with right padding (batch > 1), runs the sabre artifact on the same inputs
      (`sabre run`), and prints per output the relative L2 error against PyTorch fp16 (the
      target: <= 1e-2) and, for scale, PyTorch fp16 against PyTorch fp32.
  hf_e2e.py latency NAME OUTDIR ARTIFACT[,ARTIFACT...] SABRE SEQ [--rounds R] B [B ...]
      Median CUDA-event time per call (launch included) of PyTorch eager fp16,
      torch.compile(mode="reduce-overhead") fp16 and `sabre bench` (CUDA graphs; its `gpu ms`) of
      each artifact at each batch B and sequence length SEQ, in one run; "x best torch" is the
      faster torch time over the first artifact's. With --rounds R (default 1) each artifact is
      timed R times at each batch, the artifacts' order reversed every other round (an A/B whose
      order does not favour one side), and its column is the median; a line after the row gives
      every round's time.
Exit status 1 when a comparison is over 1e-2."""
import copy
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_hf import build  # noqa: E402
from measure import cuda_median_ms, rel_l2, sabre_p50_ms  # noqa: E402


def load(name, outdir):
    model, inputs, outputs = build(name)
    model.load_state_dict(torch.load(os.path.join(outdir, name + ".pt"), map_location="cpu"))
    return model.eval(), inputs, outputs


def make_inputs(name, inputs, b, s, seed):
    g = torch.Generator().manual_seed(seed)
    vocab = 30522 if name == "bert_base" else 50257
    ids = torch.randint(0, vocab, (b, s), generator=g)
    mask = torch.ones(b, s, dtype=torch.int64)
    for i in range(1, b):  # right padding: row i keeps its first s - i*s//(2b) tokens
        mask[i, s - (i * s) // (2 * b):] = 0
    ex = {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.randint(0, 2, (b, s), generator=g)}
    return {k: ex[k] for k in inputs}



def torch_run(m, feed):
    with torch.no_grad():
        out = m(**{k: v.cuda() for k, v in feed.items()}, return_dict=True)
    return out


def compare(name, outdir, artifact, sabre, shapes):
    model, inputs, outputs = load(name, outdir)
    m16 = copy.deepcopy(model).to("cuda", torch.float16)
    m32 = model.to("cuda")
    worst = 0.0
    print(f"{name}: sabre vs PyTorch {torch.__version__} fp16 on {torch.cuda.get_device_name()}")
    print(f"{'batch':>5} {'seq':>4}  {'output':<20} {'rel L2 vs torch fp16':>21} {'max abs':>9} {'(torch fp16 vs fp32)':>21}")
    for b, s in shapes:
        feed = make_inputs(name, inputs, b, s, seed=100 + 7 * b + s)
        ref16 = torch_run(m16, feed)
        ref32 = torch_run(m32, feed)
        with tempfile.TemporaryDirectory() as tmp:
            args = [sabre, "run", artifact, "-o", os.path.join(tmp, "out")]
            for k, v in feed.items():
                path = os.path.join(tmp, k + ".npy")
                np.save(path, v.numpy())
                args += ["--input", f"{k}={path}"]
            r = subprocess.run(args, capture_output=True, text=True)
            if r.returncode != 0:
                print(f"{b:>5} {s:>4}  sabre run failed ({r.returncode}): {r.stderr.strip()[:400]}")
                worst = float("inf")
                continue
            for o in outputs:
                got = np.load(os.path.join(tmp, "out", o + ".npy"))
                want = ref16[o].float().cpu().numpy()
                want32 = ref32[o].float().cpu().numpy()
                e = rel_l2(got, want)
                worst = max(worst, e)
                print(f"{b:>5} {s:>4}  {o:<20} {e:>21.3e} {np.abs(got - want).max():>9.3e} {rel_l2(want, want32):>21.3e}")
    print(f"worst rel L2 vs PyTorch fp16: {worst:.3e} (target <= 1e-2)")
    return 0 if worst <= 1e-2 else 1



def latency(name, outdir, artifacts, sabre, seq, batches, rounds=1):
    model, inputs, outputs = load(name, outdir)
    model = model.to("cuda", torch.float16)
    arts = artifacts.split(",")
    print(f"{name} fp16 seq {seq} on {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"transformers {transformers.__version__}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    if len(arts) > 1:
        print("sabre ms columns: " + ", ".join(os.path.basename(a) for a in arts))
    heads = "".join(f"{'sabre ms':>9} " for _ in arts)
    print(f"{'batch':>5} {'eager ms':>9} {'compile ms':>11} {heads}{'x best torch':>13}")
    compiled = torch.compile(model, mode="reduce-overhead")
    for b in batches:
        feed = {k: v.cuda() for k, v in make_inputs(name, inputs, b, seq, seed=b).items()}
        with torch.no_grad():
            eager = cuda_median_ms(lambda: model(**feed))
            t0 = time.time()
            compiled(**feed)
            compiled(**feed)
            ctime = time.time() - t0
            comp = cuda_median_ms(lambda: compiled(**feed))
        times = [[] for _ in arts]
        for r in range(rounds):
            order = range(len(arts)) if r % 2 == 0 else reversed(range(len(arts)))
            for i in order:
                times[i].append(sabre_p50_ms(sabre, arts[i], {"batch": b, "seq": seq}))
        ours = [float(np.median(t)) for t in times]
        cols = "".join(f"{t:>9.3f} " for t in ours)
        print(f"{b:>5} {eager:>9.3f} {comp:>11.3f} {cols}{min(eager, comp) / ours[0]:>13.2f}   "
              f"(torch.compile warm-up {ctime:.0f} s)", flush=True)
        if rounds > 1:
            print("      rounds: " + "; ".join(os.path.basename(a) + " " + " ".join(f"{t:.3f}" for t in ts)
                                        for a, ts in zip(arts, times)), flush=True)


if __name__ == "__main__":
    if len(sys.argv) < 6:
        sys.exit(__doc__)
    cmd, name, outdir, artifact, sabre = sys.argv[1:6]
    if cmd == "compare":
        shapes = [tuple(int(x) for x in a.split(":")) for a in sys.argv[6:]]
        sys.exit(compare(name, outdir, artifact, sabre, shapes))
    elif cmd == "latency":
        seq = int(sys.argv[6])
        rest = sys.argv[7:]
        rounds = 1
        if len(rest) >= 2 and rest[0] == "--rounds":
            rounds = int(rest[1])
            rest = rest[2:]
        if rounds < 1 or not rest:
            sys.exit(__doc__)
        latency(name, outdir, artifact, sabre, seq, [int(x) for x in rest], rounds)
    else:
        sys.exit(__doc__)
