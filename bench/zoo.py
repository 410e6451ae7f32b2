#!/usr/bin/env python3
"""sabre's model zoo and benchmark harness (issue 28, item 6): export each zoo model from PyTorch to ONNX,
compile it with sabre, check its outputs against PyTorch fp16, and time it against PyTorch eager and
torch.compile(mode="reduce-overhead") in the same run; results go to a JSONL file, one row per (model,
variant, batch, seq, metric), and `report` turns them into a markdown table and a speedup chart.

The zoo is bench/models/zoo_models.py (`zoo.py list` prints it). Run on a GPU host with torch,
transformers, torchvision and onnx (no network: default configs, random weights); `list` and `report`
need none of them.

  zoo.py list
  zoo.py export  --models bert_base,cnn --work /tmp/zoo
  zoo.py compile --models bert_base --sabre build/sabre [--variants untuned,tuned]
  zoo.py check   --models bert_base --sabre build/sabre
  zoo.py time    --models bert_base --sabre build/sabre
  zoo.py all     --models encoder,decoder --sabre build/sabre --deadline 480 --results zoo.jsonl
  zoo.py report  --results zoo.jsonl --out-dir bench/results
  zoo.py plan    --work /tmp/zoo --out bench/results/zoo_plan_cpu_DATE.md
  zoo.py pack-list --work /tmp/zoo [--out data/kernel_pack.txt | --check data/kernel_pack.txt]

`plan` needs no GPU (nor torch, once the models are exported): it compiles each exported model with
`--plan-only` and partitions it, and writes a table of what lowers, to which steps and kernels, and
which fusions did not fire and why.

`pack-list` needs no GPU either: it collects the CUTLASS kernels each exported model's untuned plan picks
(`--plan-only --json`'s kernel_list) and writes the kernel pack's list (`sabre kernels pack`), most picked
first: every kernel two or more models pick, then each model's own until the pack holds --target (default
all) of every model's kernels; it prints each model's coverage. With --check LIST it reports LIST's coverage instead
(exit 1 where a model falls under --target).

`all` skips every row already in --results and stops starting work that would not end before
--deadline, so repeated calls (each on a fresh machine) complete the zoo. Within a call it exports the
models, compiles them (--parallel compiles at a time, sharing --cache-dir) while it checks those done, and
times last, once no compile competes for the CPU."""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "models"))
import zoo_models  # noqa: E402
import zoo_results  # noqa: E402

TOLERANCE = 1e-2
TORCH_VARIANTS = ("eager", "compile")


class Deadline:
    def __init__(self, seconds):
        self.end = time.monotonic() + seconds if seconds else None

    def left(self):
        return float("inf") if self.end is None else self.end - time.monotonic()


def log(msg):
    print(f"[{time.strftime('%H:%M:%S', time.gmtime())}] {msg}", flush=True)


def commit_id(arg):
    if arg:
        return arg
    if os.environ.get("ZOO_COMMIT"):
        return os.environ["ZOO_COMMIT"]
    try:
        return subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def gpu_name():
    try:
        import torch
        if torch.cuda.is_available():
            return torch.cuda.get_device_name()
    except ImportError:
        pass
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True)
        if r.returncode == 0 and r.stdout.strip():
            return r.stdout.strip().splitlines()[0]
    except OSError:
        pass
    return "no GPU"


def versions():
    out = {}
    for mod in ("torch", "transformers", "torchvision"):
        try:
            out[mod] = __import__(mod).__version__
        except ImportError:
            pass
    return out


class Harness:
    def __init__(self, args):
        self.args = args
        self.work = os.path.abspath(args.work)
        for d in ("onnx", "art", "logs"):
            os.makedirs(os.path.join(self.work, d), exist_ok=True)
        self.cache = os.path.abspath(args.cache_dir or os.path.join(self.work, "kernels"))
        self.db = os.path.abspath(args.db or os.path.join(self.work, "tuning.db"))
        self.deadline = Deadline(getattr(args, "deadline", None))
        self.variants = [v.strip() for v in args.variants.split(",")]
        for v in self.variants:
            if v not in zoo_results.SABRE_VARIANTS:
                sys.exit(f"zoo.py: unknown variant '{v}' in --variants (use untuned, tuned or both)")
        self.store = zoo_results.Store(args.results, {"commit": commit_id(args.commit), "gpu": gpu_name(),
                                                      **versions()})
        self.models = {}  # name -> (fp16 module on the GPU, fp32 module or None)
        self._b2b = None

    # -- paths
    def onnx(self, e):
        return os.path.join(self.work, "onnx", e.name + ".onnx")

    def pt(self, e):
        return os.path.join(self.work, "onnx", e.name + ".pt")

    def art(self, e, v):
        return os.path.join(self.work, "art", f"{e.name}.{v}.sabre")

    def add(self, e, **row):
        row = self.store.add(model=e.name, family=e.family, **row)
        log(f"{e.name}: {row['variant']} {row['metric']} b={row['batch']} s={row['seq']}: "
            f"{row['value'] if row['value'] is not None else ''} {row['status']} {row.get('note', '')[:160]}")

    # -- export
    def export(self, e):
        import torch
        if (os.path.exists(self.onnx(e)) and os.path.exists(self.pt(e))
                and self.store.has(e.name, "onnx", None, None, "export_s")):
            return True
        t0 = time.time()
        try:
            model = e.build()
            ex = zoo_models.make_inputs(e, 2, 16 if e.kind == "tokens" else 0, seed=1)
            args = tuple(ex[k] for k in e.inputs)
            exporter, errors = None, []
            for dynamo in (False, True):  # the TorchScript exporter first; the dynamo one where it fails
                try:
                    with torch.no_grad():
                        torch.onnx.export(zoo_models.wrap(e, model), args, self.onnx(e), opset_version=17,
                                          input_names=list(e.inputs), output_names=list(e.outputs),
                                          dynamic_axes=zoo_models.dynamic_axes(e), dynamo=dynamo,
                                          do_constant_folding=True)
                    exporter = "dynamo" if dynamo else "torchscript"
                    break
                except Exception as err:  # noqa: BLE001 - any exporter failure is a result to record
                    errors.append(f"{'dynamo' if dynamo else 'torchscript'}: {type(err).__name__}: "
                                  f"{str(err).splitlines()[0] if str(err) else ''}"[:300])
            if exporter is None:
                self.add(e, variant="onnx", metric="export_s", value=None, status="failed", note="; ".join(errors))
                return False
            torch.save(model.state_dict(), self.pt(e))
        except Exception as err:  # noqa: BLE001
            self.add(e, variant="onnx", metric="export_s", value=None, status="failed",
                     note=f"{type(err).__name__}: {err}"[:300])
            return False
        if not self.store.has(e.name, "onnx", None, None, "export_s"):
            self.add(e, variant="onnx", metric="export_s", value=round(time.time() - t0, 1), unit="s",
                     note=f"{exporter} exporter" + (f" (TorchScript failed: {errors[0]})" if errors else ""))
        return True

    # -- compile
    def compile(self, e, v, until=None):
        """Runs sabre compile; returns "ok", a failure status (with its row written) or "deferred" (cut
        by the deadline: no row, the next call compiles it)."""
        art = self.art(e, v)
        shutil.rmtree(art, ignore_errors=True)
        cmd = [self.args.sabre, "compile", self.onnx(e), "-o", art, "--dtype", "fp16", "--dynamic", e.dynamic,
               "--cache-dir", self.cache, "-j", str(self.args.jobs)]
        cmd += ["--no-tune"] if v == "untuned" else ["--tune", "--db", self.db]
        own = self.args.compile_timeout
        budget = min(own, (until or self.deadline).left() - 5)  # read when the compile starts, not when queued
        if budget < 10:
            log(f"{e.name}: {v} compile deferred (no time left in this call)")
            return "deferred"
        logf = os.path.join(self.work, "logs", f"{e.name}.{v}.compile.log")
        t0 = time.time()
        log(f"{e.name}: compiling {v} (limit {budget:.0f} s)")
        with open(logf, "w") as f:
            f.write(" ".join(cmd) + "\n")
            f.flush()
            try:
                r = subprocess.run(cmd, stdout=f, stderr=subprocess.PIPE, text=True, timeout=budget)
            except subprocess.TimeoutExpired:
                if budget < own:
                    log(f"{e.name}: {v} compile cut by the call's deadline after {time.time() - t0:.0f} s: deferred")
                    return "deferred"
                self.add(e, variant=v, metric="compile_s", value=None, status="timeout",
                         note=f"sabre compile ran past --compile-timeout {own} s")
                return "timeout"
            f.write(r.stderr)
        wall = round(time.time() - t0, 1)
        if r.returncode == 0:
            if not self.store.has(e.name, v, None, None, "compile_s") or self.args.cmd != "all":
                self.add(e, variant=v, metric="compile_s", value=wall, unit="s", note=" ".join(cmd[3:]))
            return "ok"
        lines = [ln.strip() for ln in r.stderr.splitlines() if ln.strip()]
        reason = next((ln for ln in lines if "error" in ln.lower()), lines[-1] if lines else f"exit {r.returncode}")
        status = "refused" if r.returncode > 0 else "crashed"
        self.add(e, variant=v, metric="compile_s", value=wall, unit="s", status=status,
                 note=(reason if r.returncode > 0 else f"signal {-r.returncode}: {reason}")[:400])
        return status

    # -- PyTorch
    def torch_models(self, e, fp32=False):
        import copy

        import torch
        have = self.models.get(e.name)
        if have and (have[1] is not None or not fp32):
            return have
        for k in list(self.models):  # one model on the GPU at a time
            del self.models[k]
        torch.cuda.empty_cache()
        model = e.build()
        if os.path.exists(self.pt(e)):
            model.load_state_dict(torch.load(self.pt(e), map_location="cpu"))
        w = zoo_models.wrap(e, model)
        m16 = copy.deepcopy(w).to("cuda", torch.float16)
        if e.channels_last:
            m16 = m16.to(memory_format=torch.channels_last)
        m32 = w.to("cuda") if fp32 else None
        self.models[e.name] = (m16, m32)
        return m16, m32

    def feed(self, e, cpu, half):
        import torch
        out = []
        for k in e.inputs:
            t = cpu[k].cuda()
            if t.is_floating_point():
                t = t.half() if half else t
                if e.channels_last and t.dim() == 4:
                    t = t.to(memory_format=torch.channels_last)
            out.append(t)
        return out

    # -- check
    def check(self, e, v, shapes):
        import numpy as np
        import torch

        from measure import rel_l2
        torch.backends.cudnn.allow_tf32 = False  # the fp32 reference in full fp32
        torch.backends.cuda.matmul.allow_tf32 = False
        m16, m32 = self.torch_models(e, fp32=True)
        for b, s in shapes:
            if self.deadline.left() < 20:
                log(f"{e.name}: {v} check {b}:{s} deferred (no time left)")
                return
            cpu = zoo_models.make_inputs(e, b, s, seed=100 + 7 * b + s)
            with torch.no_grad():
                ref16 = [o.float().cpu().numpy() for o in m16(*self.feed(e, cpu, True))]
                ref32 = [o.float().cpu().numpy() for o in m32(*self.feed(e, cpu, False))]
            with tempfile.TemporaryDirectory() as tmp:
                cmd = [self.args.sabre, "run", self.art(e, v), "-o", os.path.join(tmp, "out")]
                for k, t in cpu.items():
                    np.save(os.path.join(tmp, k + ".npy"), t.numpy())
                    cmd += ["--input", f"{k}={os.path.join(tmp, k + '.npy')}"]
                try:
                    r = subprocess.run(cmd, capture_output=True, text=True, timeout=max(10, min(300, self.deadline.left())))
                except subprocess.TimeoutExpired:
                    self.add(e, variant=v, metric="rel_l2", batch=b, seq=s or None, value=None, status="timeout",
                             note="sabre run timed out")
                    continue
                if r.returncode != 0:
                    self.add(e, variant=v, metric="rel_l2", batch=b, seq=s or None, value=None,
                             status="failed" if r.returncode > 0 else "crashed",
                             note=f"sabre run exit {r.returncode}: {r.stderr.strip()[-300:]}")
                    continue
                per, per32, ref, absmax = {}, {}, {}, 0.0
                for name, want, want32 in zip(e.outputs, ref16, ref32):
                    got = np.load(os.path.join(tmp, "out", name + ".npy"))
                    if got.shape != want.shape:
                        per[name] = float("inf")
                        continue
                    per[name] = rel_l2(got, want)
                    per32[name] = rel_l2(got, want32)
                    ref[name] = rel_l2(want, want32)
                    absmax = max(absmax, float(np.abs(got.astype(np.float64) - want).max()))
            worst = max(per.values())
            worst32, ref_worst = max(per32.values(), default=None), max(ref.values(), default=None)
            passed, note = worst <= TOLERANCE, "" if worst <= TOLERANCE else f"over {TOLERANCE}"
            # Where PyTorch's own fp16 output is further than TOLERANCE from its fp32 output, the model is
            # ill-conditioned in fp16 (random weights can make it so) and two fp16 implementations cannot
            # agree within TOLERANCE; then sabre passes when it is no further from fp32 than PyTorch fp16 is.
            if not passed and ref_worst is not None and worst32 is not None and ref_worst > TOLERANCE:
                passed = worst32 <= 1.5 * ref_worst
                note = (f"fp16 ill-conditioned: PyTorch fp16 is {ref_worst:.2g} from fp32, sabre {worst32:.2g}"
                        + ("" if passed else " (over 1.5x PyTorch's)"))
            self.add(e, variant=v, metric="rel_l2", batch=b, seq=s or None, value=worst,
                     ref_rel_l2=ref_worst, rel_l2_fp32=worst32, per_output=per, max_abs=absmax,
                     passed=passed, note=note)

    # -- time
    def sabre_b2b_runs(self):
        """How many back-to-back runs to ask `sabre bench` for; 0 where this sabre has no such mode."""
        if self._b2b is None:
            try:
                r = subprocess.run([self.args.sabre, "bench", "--help"], capture_output=True, text=True)
            except OSError:
                return 0  # no sabre yet (all --export-only): nothing is timed
            self._b2b = self.args.runs if "--back-to-back" in r.stdout + r.stderr else 0
            if not self._b2b:
                log("sabre bench has no --back-to-back mode: sabre is timed per call only (gpu ms p50)")
        return self._b2b

    def time_torch(self, e, todo):
        """TODO: [(variant, batch)] of PyTorch rows to measure."""
        import torch

        from measure import cuda_back_to_back_ms, cuda_median_ms
        m16, _ = self.torch_models(e)
        compiled = None
        for var, b in todo:
            if self.deadline.left() < (90 if var == "compile" else 20):
                log(f"{e.name}: {var} timing at batch {b} deferred (no time left)")
                continue
            s = e.seq
            args = self.feed(e, zoo_models.make_inputs(e, b, s, seed=b), True)
            extra = {}
            try:
                with torch.no_grad():
                    fn = m16
                    if var == "compile":
                        if compiled is None:
                            compiled = torch.compile(m16, mode="reduce-overhead")
                        t0 = time.time()
                        for _ in range(3):
                            compiled(*args)
                        torch.cuda.synchronize()
                        extra["warmup_s"] = round(time.time() - t0, 1)
                        fn = compiled
                    call = cuda_median_ms(lambda: fn(*args), iters=self.args.iters)
                    b2b = cuda_back_to_back_ms(lambda: fn(*args), runs=self.args.runs)
            except Exception as err:  # noqa: BLE001 - a PyTorch failure is a result too
                for metric in ("ms_call", "ms_b2b"):
                    self.add(e, variant=var, metric=metric, batch=b, seq=s or None, value=None, status="failed",
                             note=f"{type(err).__name__}: {str(err)[:300]}")
                continue
            self.add(e, variant=var, metric="ms_call", batch=b, seq=s or None, value=round(call, 4), unit="ms",
                     how=f"median of {self.args.iters} CUDA-event times around one call", **extra)
            self.add(e, variant=var, metric="ms_b2b", batch=b, seq=s or None, value=round(b2b, 4), unit="ms",
                     how=f"{self.args.runs} calls between two CUDA events, median of 5", **extra)
        if compiled is not None:
            del compiled
            torch._dynamo.reset()

    def time_sabre(self, e, v, batches):
        from measure import sabre_bench
        runs = self.sabre_b2b_runs()
        for b in batches:
            if self.deadline.left() < 15:
                log(f"{e.name}: {v} timing at batch {b} deferred (no time left)")
                return
            dims = {"batch": b, "seq": e.seq} if e.kind == "tokens" else {"batch": b}
            try:
                got = sabre_bench(self.args.sabre, self.art(e, v), dims, iters=self.args.iters * 3,
                                  back_to_back=runs, timeout=max(10, min(300, self.deadline.left())))
            except subprocess.TimeoutExpired:
                self.add(e, variant=v, metric="ms_call", batch=b, seq=e.seq or None, value=None, status="timeout",
                         note="sabre bench timed out")
                continue
            s = e.seq or None
            if not got["ok"]:
                self.add(e, variant=v, metric="ms_call", batch=b, seq=s, value=None, status="failed",
                         note=got["text"].strip()[-300:])
                continue
            self.add(e, variant=v, metric="ms_call", batch=b, seq=s, value=got["call_ms"], unit="ms",
                     host_ms=got["host_ms"], how="sabre bench gpu ms p50: CUDA events around each run (a CUDA-graph replay)")
            if got["b2b_ms"] is not None:
                self.add(e, variant=v, metric="ms_b2b", batch=b, seq=s, value=got["b2b_ms"], unit="ms",
                         how=f"sabre bench --back-to-back {runs}")


# -- what is missing

def missing(h, e, force=False):
    """What `all` still has to do for E: {"export", "torch": [(variant, batch)], variant: {"compile", "check":
    [(b, s)], "time": [b]}}; nothing where the rows are there (any status: a refusal is a result)."""
    st, need = h.store, {}
    have = (lambda *k: False) if force else st.has
    if not have(e.name, "onnx", None, None, "export_s"):
        need["export"] = True
    exp = st.get(e.name, "onnx", None, None, "export_s")
    export_failed = not force and exp is not None and exp.get("status") != "ok"
    torch_todo = [(var, b) for var in TORCH_VARIANTS for b in e.batches
                  if not have(e.name, var, b, e.seq or None, "ms_call")]
    if torch_todo:
        need["torch"] = torch_todo
    if export_failed:
        return need
    runs = h.sabre_b2b_runs()
    for v in h.variants:
        comp = st.get(e.name, v, None, None, "compile_s")
        if comp is not None and comp.get("status") != "ok" and not force:
            continue  # refused or failed: recorded, not retried
        check = [(b, s) for b, s in e.check if not have(e.name, v, b, s or None, "rel_l2")]
        timed = [b for b in e.batches if not have(e.name, v, b, e.seq or None, "ms_call")
                 or (runs and not have(e.name, v, b, e.seq or None, "ms_b2b"))]
        if comp is None or force or check or timed:
            need[v] = {"compile": True, "check": check, "time": timed}
    return need


def run_all(h, entries):
    """Exports, compiles (in parallel, as exports finish), checks (as compiles finish) and times last."""
    args = h.args
    todo = {}
    for e in entries:
        need = missing(h, e, force=args.force)
        if need:
            todo[e.name] = (e, need)
        else:
            log(f"{e.name}: every row present, skipped")
    # Compiles are the long pole and are lost when cut, while PyTorch rows need no artifact and can be
    # measured in any later call: compiles may run until the call's end less what checking and timing
    # their own artifacts takes (~30 s a model); PyTorch timing gets what is left, else waits a call.
    reserve = 30 * sum(1 for _, n in todo.values() for v in h.variants if v in n)
    compile_end = Deadline(max(60, h.deadline.left() - reserve)) if h.deadline.end else Deadline(None)
    pool = ThreadPoolExecutor(max(1, args.parallel))
    futures = {}
    exported = set()
    for name, (e, need) in todo.items():
        sabre_work = [v for v in h.variants if v in need]
        if not (need.get("export") or sabre_work):
            continue
        if h.deadline.left() < 60:
            log(f"{name}: export deferred (no time left)")
            continue
        if not h.export(e):
            continue
        exported.add(name)
        if args.export_only:
            continue
        for v in sabre_work:
            futures[pool.submit(h.compile, e, v, compile_end)] = (e, v)
    if args.export_only:
        return
    compiled = set()
    for fut in as_completed(futures):
        e, v = futures[fut]
        if fut.result() != "ok":
            continue
        compiled.add((e.name, v))
        check = todo[e.name][1][v]["check"]
        if check:
            try:
                h.check(e, v, check)
            except Exception as err:  # noqa: BLE001 - a PyTorch-side failure ends this model's check only
                log(f"{e.name}: check failed in the harness: {type(err).__name__}: {err}")
    pool.shutdown()
    # sabre first: its artifacts die with this machine, PyTorch's rows can wait for the next call.
    for name, (e, need) in todo.items():
        for v in h.variants:
            if (name, v) in compiled and need[v]["time"]:
                h.time_sabre(e, v, need[v]["time"])
    for name, (e, need) in todo.items():
        try:
            if need.get("torch") and h.deadline.left() > 30:
                h.time_torch(e, need["torch"])
        except Exception as err:  # noqa: BLE001
            log(f"{e.name}: PyTorch timing failed in the harness: {type(err).__name__}: {err}")
        h.models.pop(name, None)


def plan_report(args, entries):
    """`zoo.py plan`: sabre compile --plan-only and sabre partition of every exported model, as a
    markdown table (what lowers, its steps and kernels) and the fusions that did not fire."""
    import json
    import datetime
    rows, details = [], []
    for e in entries:
        onnx = os.path.join(args.work, "onnx", e.name + ".onnx")
        if not os.path.exists(onnx):
            rows.append(f"| {e.name} | not exported | | | |")
            continue
        art = os.path.join(args.work, "plan", e.name + ".sabre")
        r = subprocess.run([args.sabre, "compile", onnx, "-o", art, "--plan-only", "--no-tune", "--dim", e.dynamic,
                            "--json"], capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            err = next((ln for ln in r.stderr.splitlines() if "error" in ln), r.stderr.strip()[-200:])
            units = [ln.strip() for ln in r.stderr.splitlines() if ln.startswith("  ")][:3]
            rows.append(f"| {e.name} | refused | | | {err[:160]} {'; '.join(units)[:200]} |")
            continue
        doc = json.loads(r.stdout)
        by_op = doc["steps"]["by_op"]
        k = doc["kernels"]
        native = sum(v for op, v in by_op.items() if op not in ("gemm", "conv", "reshape"))
        steps = ", ".join(f"{v} {op}" for op, v in sorted(by_op.items(), key=lambda kv: -kv[1]))
        p = subprocess.run([args.sabre, "partition", onnx, "--json"], capture_output=True, text=True, timeout=600)
        not_fired = json.loads(p.stdout).get("fusions_not_fired", []) if p.returncode == 0 else []
        rows.append(f"| {e.name} | {doc['steps']['total']} steps ({native} native) | {k['gemm']} GEMM, {k['conv']} conv, "
                    f"{k['elementwise']} elementwise | {len(not_fired)} | {steps} |")
        for n in sorted(set(x.split(": ", 2)[0] + ": " + x.split(": ", 2)[-1] for x in not_fired)):
            details.append(f"- {e.name}: {n}")
    date = datetime.date.today().isoformat()
    out = args.out or os.path.join(ROOT, "bench", "results", f"zoo_plan_cpu_{date}.md")
    commit = commit_id(args.commit)
    with open(out, "w") as f:
        f.write(f"# The zoo through `sabre compile --plan-only` (no GPU), {date}, sabre {commit[:12]}\n\n"
                "Untuned analytic picks, fp16, each model's zoo --dynamic ranges; models exported on a CPU "
                "machine by `zoo.py export`. 'native' counts steps on sabre's own kernels (not GEMM, conv or "
                "views). Made by `bench/zoo.py plan`.\n\n"
                "| model | lowers to | kernels | fusions not fired | steps by kind |\n| --- | --- | --- | --- | --- |\n")
        f.write("\n".join(rows) + "\n")
        if details:
            f.write("\n## Fusions that did not fire (pass: reason, distinct per model)\n\n" + "\n".join(details) + "\n")
    print(f"wrote {out}")


PACK_KINDS = ("gemm", "conv", "cublaslt")


def model_kernels(args, e):
    """The CUTLASS (and cuBLASLt) kernels of E's untuned plan, or a string saying why there are none."""
    import json
    onnx = os.path.join(args.work, "onnx", e.name + ".onnx")
    if not os.path.exists(onnx):
        return "not exported"
    art = os.path.join(args.work, "plan", e.name + ".sabre")
    r = subprocess.run([args.sabre, "compile", onnx, "-o", art, "--plan-only", "--no-tune", "--dim", e.dynamic,
                        "--json"], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        why = next((ln for ln in r.stderr.splitlines() if "error" in ln), r.stderr.strip()[-200:])
        return "refused: " + why.replace(onnx, os.path.basename(onnx))[:200]
    doc = json.loads(r.stdout)
    if "kernel_list" not in doc:
        sys.exit(f"zoo.py pack-list: {args.sabre} prints no kernel_list in compile --json: build a newer sabre")
    return sorted({k["name"] for k in doc["kernel_list"] if k["kind"] in PACK_KINDS})


def choose_pack(per_model, target):
    """Kernels picked by two or more models, then each model's most widely picked own kernels until the pack
    holds `target` of its kernels. Returns (names in order of use, {name: models using it})."""
    import math
    use = {}
    for ks in per_model.values():
        for k in ks:
            use[k] = use.get(k, 0) + 1
    rank = sorted(use, key=lambda k: (-use[k], k))
    pack = {k for k in rank if use[k] >= 2}
    for ks in per_model.values():
        need = math.ceil(target * len(ks) - 1e-9)
        for k in sorted(ks, key=lambda k: (-use[k], k)):
            if len(pack & set(ks)) >= need:
                break
            pack.add(k)
    return [k for k in rank if k in pack], use


def read_pack_list(path):
    names = []
    for line in open(path):
        line = line.split("#", 1)[0].strip()
        if line:
            names.append(line)
    return names


def pack_list(args, entries):
    """`zoo.py pack-list`: the kernel pack's list from the zoo's untuned plans, with each model's coverage."""
    import datetime
    per_model, skipped = {}, {}
    for e in entries:
        got = model_kernels(args, e)
        if isinstance(got, str):
            skipped[e.name] = got
            log(f"{e.name}: {got}")
        else:
            per_model[e.name] = got
            log(f"{e.name}: {len(got)} kernels")
    if not per_model:
        sys.exit("zoo.py pack-list: no model planned (export the zoo first: zoo.py export)")
    if args.check:
        names, use = read_pack_list(args.check), {}
        for ks in per_model.values():
            for k in ks:
                use[k] = use.get(k, 0) + 1
    else:
        names, use = choose_pack(per_model, args.target)
    held = set(names)
    cover = {m: (len(held & set(ks)) / len(ks) if ks else 1.0, len(held & set(ks)), len(ks)) for m, ks in per_model.items()}
    table = [f"{m:18s} {c * 100:5.1f}%  ({h} of {n})" for m, (c, h, n) in cover.items()]
    table += [f"{m:18s} n/a     ({why})" for m, why in skipped.items()]
    print(f"{len(names)} kernels in the pack, {len(use)} distinct across {len(per_model)} models; coverage per model:")
    print("\n".join("  " + t for t in table))
    low = [m for m, (c, _, _) in cover.items() if c < args.target]
    if args.check:
        if low:
            print(f"under {args.target:.0%}: {', '.join(low)}")
        return 1 if low else 0
    out = args.out or os.path.join(ROOT, "data", "kernel_pack.txt")
    commit = commit_id(args.commit)
    with open(out, "w") as f:
        f.write(f"# The kernel pack: the kernels `sabre kernels pack` builds into the compile cache.\n"
                f"# Made by `bench/zoo.py pack-list` on {datetime.date.today().isoformat()} from the untuned plans "
                f"(--plan-only --no-tune, fp16, sm_90a, each model's zoo --dim ranges) of sabre {commit[:12]}:\n"
                f"# every kernel two or more zoo models pick, then each model's own until the pack holds "
                f"{args.target:.0%} of its kernels.\n"
                f"# One kernel name a line (the name is its identity); '#' starts a comment. Coverage per model:\n")
        f.write("".join(f"#   {t}\n" for t in table))
        f.write("".join(f"{k}  # {use[k]} model{'s' if use[k] > 1 else ''}\n" for k in names))
    print(f"wrote {out}")
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(prog="zoo.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--models", help="comma-separated names or families (encoder, decoder, "
                        "vision-transformer, cnn, speech, smoke); default: the whole zoo without the smoke model")
    common.add_argument("--work", default="/tmp/zoo", help="exported models, artifacts, logs (default /tmp/zoo)")
    common.add_argument("--results", default="zoo.jsonl", help="the JSONL rows, appended (default zoo.jsonl)")
    common.add_argument("--sabre", default=os.path.join(ROOT, "build", "sabre"), help="the sabre binary")
    common.add_argument("--variants", default="untuned", help="sabre artifacts: untuned, tuned or untuned,tuned "
                        "(tuned times GEMM candidates on this GPU into --db first; default untuned)")
    common.add_argument("--cache-dir", help="sabre's compiled-kernel cache, shared by every compile (default WORK/kernels)")
    common.add_argument("--db", help="the tuning DB of tuned compiles (default WORK/tuning.db)")
    common.add_argument("--compile-timeout", type=int, default=420, help="seconds one sabre compile may take "
                        "before its row says timeout (default 420)")
    common.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 4,
                        help="compiler processes of each sabre compile (default: all cores)")
    common.add_argument("--iters", type=int, default=100, help="timed calls for the per-call median (default 100; "
                        "sabre bench gets 3x)")
    common.add_argument("--runs", type=int, default=100, help="calls between the two events back to back (default 100)")
    common.add_argument("--commit", help="the sabre commit the rows name (default $ZOO_COMMIT, else git rev-parse HEAD)")
    sub.add_parser("list", help="print the zoo: models, families, shapes, why any is skipped")
    sub.add_parser("export", parents=[common], help="write WORK/onnx/NAME.onnx and NAME.pt (the weights)")
    sub.add_parser("compile", parents=[common], help="sabre compile each model (wall time, or sabre's refusal)")
    sub.add_parser("check", parents=[common], help="sabre's outputs vs PyTorch fp16 (and fp16 vs fp32) at shapes "
                   "between the tuned buckets")
    sub.add_parser("time", parents=[common], help="PyTorch eager, torch.compile and sabre, per call and back to back")
    a = sub.add_parser("all", parents=[common], help="everything for --models, skipping rows already in --results")
    a.add_argument("--deadline", type=float, help="seconds this call may take; work that would not end by then "
                   "is left for the next call")
    a.add_argument("--parallel", type=int, default=2, help="sabre compiles at a time (default 2)")
    a.add_argument("--force", action="store_true", help="redo rows already present")
    a.add_argument("--export-only", action="store_true", help="export what the missing rows need and stop (to "
                   "overlap exporting with building sabre; --sabre may not exist yet)")
    pl = sub.add_parser("plan", help="no GPU: --plan-only compile and partition of each exported model, as a table")
    pl.add_argument("--models", help="as for the other commands (default: the zoo without the smoke model)")
    pl.add_argument("--work", default="/tmp/zoo", help="where WORK/onnx/NAME.onnx are (default /tmp/zoo)")
    pl.add_argument("--sabre", default=os.path.join(ROOT, "build", "sabre"), help="the sabre binary")
    pl.add_argument("--out", help="the markdown file (default bench/results/zoo_plan_cpu_DATE.md)")
    pl.add_argument("--commit", help="the sabre commit named (default $ZOO_COMMIT, else git rev-parse HEAD)")
    pk = sub.add_parser("pack-list", help="no GPU: the kernel pack's list from the zoo's untuned plans, with "
                        "each model's coverage")
    pk.add_argument("--models", help="as for the other commands (default: the zoo without the smoke model)")
    pk.add_argument("--work", default="/tmp/zoo", help="where WORK/onnx/NAME.onnx are (default /tmp/zoo)")
    pk.add_argument("--sabre", default=os.path.join(ROOT, "build", "sabre"), help="the sabre binary")
    pk.add_argument("--out", help="the list to write (default data/kernel_pack.txt)")
    pk.add_argument("--check", metavar="LIST", help="write nothing: report LIST's coverage, exit 1 under --target")
    pk.add_argument("--target", type=float, default=1.0, help="the fraction of each model's kernels the pack "
                    "holds (default 1.0: a zoo model then compiles with no CUTLASS kernel to build, since one missing "
                    "kernel alone is 45-70 s of nvcc; the issue's floor is 0.9)")
    pk.add_argument("--commit", help="the sabre commit named (default $ZOO_COMMIT, else git rev-parse HEAD)")
    r = sub.add_parser("report", help="the markdown table, geomeans and chart from --results")
    r.add_argument("--results", default="zoo.jsonl", help="the JSONL rows (default zoo.jsonl)")
    r.add_argument("--out-dir", default=os.path.join(ROOT, "bench", "results"),
                   help="where zoo_<gpu>_<date>.md and .svg go (default bench/results)")
    r.add_argument("--gpu", help="the GPU named in the file name (default: the rows' most common)")
    r.add_argument("--date", help="the date in the file name (default: the newest row's)")
    args = p.parse_args(argv)

    if args.cmd == "list":
        print("\n".join(zoo_models.table_lines()))
        return 0
    if args.cmd == "report":
        try:
            rows = zoo_results.load(args.results)
        except ValueError as err:
            sys.exit(f"zoo.py report: {err}")
        if not rows:
            sys.exit(f"zoo.py report: no rows in {args.results} (run zoo.py all first)")
        md, svg, _ = zoo_results.write_report(rows, args.out_dir, [e.name for e in zoo_models.ZOO], args.gpu, args.date)
        print(f"wrote {md}" + (f" and {svg}" if svg else " (no chart: matplotlib is not installed)"))
        return 0

    try:
        entries = zoo_models.select(args.models)
    except ValueError as err:
        sys.exit(f"zoo.py: {err}")
    for e in entries:
        if e.skip:
            log(f"{e.name}: skipped ({e.skip})")
    entries = [e for e in entries if not e.skip]
    if args.cmd in ("plan", "pack-list"):
        if not os.access(args.sabre, os.X_OK):
            sys.exit(f"zoo.py: no sabre binary at {args.sabre}: build it (scripts/build.sh) or pass --sabre")
        os.makedirs(os.path.join(args.work, "plan"), exist_ok=True)
        if args.cmd == "pack-list":
            if args.check and not os.path.exists(args.check):
                sys.exit(f"zoo.py pack-list: no list at {args.check}")
            return pack_list(args, entries)
        plan_report(args, entries)
        return 0
    if args.cmd != "export" and not getattr(args, "export_only", False) and not os.access(args.sabre, os.X_OK):
        sys.exit(f"zoo.py: no sabre binary at {args.sabre}: build it (scripts/build.sh) or pass --sabre")
    try:
        import torch  # noqa: F401
    except ImportError:
        sys.exit(f"zoo.py {args.cmd}: needs torch (and transformers, torchvision, onnx): run it on the GPU host")
    try:
        h = Harness(args)
    except ValueError as err:
        sys.exit(f"zoo.py: {err}")
    if args.cmd == "all":
        run_all(h, entries)
        return 0
    for e in entries:
        if not h.export(e) or args.cmd == "export":
            continue
        for v in h.variants:
            if args.cmd == "compile" or not os.path.exists(os.path.join(h.art(e, v), "plan.json")):
                if h.compile(e, v) != "ok":
                    continue
            if args.cmd == "check":
                h.check(e, v, e.check)
            elif args.cmd == "time":
                h.time_sabre(e, v, e.batches)
        if args.cmd == "time":
            h.time_torch(e, [(var, b) for var in TORCH_VARIANTS for b in e.batches])
    return 0


if __name__ == "__main__":
    sys.exit(main())
