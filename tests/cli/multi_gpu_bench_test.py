#!/usr/bin/env python3
"""bench/multi_gpu_bench.py without a GPU: a stand-in `sabre` prints bench's JSON (device d at
100*(d+1) samples/s together, 100 alone); the report must give N=1 and N=2 rows, the aggregate
against N x one GPU, the names and a date; bad --gpus lists and mixed models are refused."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "bench", "multi_gpu_bench.py")
work = sys.argv[1]
os.makedirs(work, exist_ok=True)
fake = os.path.join(work, "fake_sabre.py")
with open(fake, "w") as f:
    f.write('''#!/usr/bin/env python3
import json, sys
a = sys.argv
d = int(a[a.index("--device") + 1])
print(json.dumps({"schema": "sabre.bench/1", "sabre_version": "0.0-test", "device": d, "dims": {"batch": 8},
                  "latency_ms": {"p50": 1.5}, "throughput": {"runs_per_s": 10.0, "samples_per_s": 100.0 * (d + 1),
                  "batch": 8}}))
''')
os.chmod(fake, 0o755)
failures = 0


def run(*extra):
    p = subprocess.run([sys.executable, SCRIPT, "model.sabre", "--sabre", fake, "--iters", "3", "--warmup", "0", *extra],
                       capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def check(cond, what, out):
    global failures
    if not cond:
        failures += 1
        print(f"FAIL {what}:\n{out}")


rc, out = run("--gpu-names", "NVIDIA H100 80GB HBM3", "--gpus", "all")
check(rc == 0 and "on 1 GPU(s)" in out and "| 0 | NVIDIA H100 80GB HBM3 | 100.0 |" in out
      and "= 1.00 x one GPU (1.000 of 1 x one GPU)" in out and "- date: " in out, "one GPU: N=1", out)
rc, out = run("--gpu-names", "H,H", "--gpus", "2", "--out", os.path.join(work, "r.md"))
check(rc == 0 and "| 1 | H | 200.0 |" in out and "300.0 samples/s on 2 GPU(s) = 3.00 x one GPU" in out
      and open(os.path.join(work, "r.md")).read() == out, "two GPUs: per-GPU rows and the aggregate", out)
for gpus, words in [("1,1", "twice"), ("3", "this machine has 2"), ("x", "is not a GPU list"), ("0", "at least one")]:
    rc, out = run("--gpu-names", "H,H", "--gpus", gpus)
    check(rc != 0 and words in out and "Traceback" not in out, f"--gpus {gpus} refused", out)
rc, out = run("--gpu-names", "H,A", "--gpus", "all")
check(rc != 0 and "different models" in out, "mixed models refused", out)
print("PASSED" if not failures else f"FAILED: {failures}")
sys.exit(1 if failures else 0)
