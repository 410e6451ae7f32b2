#!/usr/bin/env python3
"""ONNX backend test data through the CLI, as a user drives it.

For each test (a directory with model.onnx and test_data_set_0/), converts the input .pb files to
.npy, runs `sabre run --reference model.onnx --input NAME=FILE.npy ... -o DIR` and compares the
outputs it writes with the expected output .pb files. Each test counts as one of
  pass     every output matches (|got - want| <= 1e-5 + 1e-3 |want|, NaN = NaN; integers exact)
  refused  sabre said it does not support something (exit 1, the message says what)
  error    exit 1 with a message that is not a refusal (a bug, or test data sabre cannot read)
  wrong    exit 0 but an output differs, is missing or has another dtype/shape
  crash    killed by a signal, an exit code other than 0/1, or past the time limit
  diverge  the expected data disagrees with the ONNX spec (KNOWN_DIVERGENT says how); not run
Sequence inputs (SequenceProto .pb) go to the CLI as a directory of 0.npy, 1.npy, ...; STRING tensors as .npy
of numpy str; sequence outputs come back as such a directory. Optional inputs are left out: sabre refuses
such models at import.
Prints one table row per set and, with -v, every test that is not a pass with its reason.

With --gpu, every test whose reference run passes goes on to the GPU path as a user drives it:
`sabre compile model.onnx -o ART --no-tune` and `sabre run ART --input ... -o DIR`, its outputs
compared with the expected ones at the compute dtype's tolerance (--dtype fp16 by default:
|got - want| <= r (|want| + rms(want)), r = 1e-2 for fp16, 5e-2 for bf16; integers and bools exact).
Such a test counts as one of
  matched  compiled, ran, every output within tolerance
  refused  `sabre compile` refused it (the summary histograms the refused ops and their reasons)
  wrong    ran, but an output differs, is missing or has another dtype/shape
  error    compile or run exited 1 with a message that is not a refusal (a bug, or a kernel build failure)
  crash    killed by a signal, an exit code other than 0/1 (3: outputs beyond tolerance count as wrong),
           or past --timeout
With --plan-only the GPU step stops after `sabre compile --plan-only` (no kernels built, no GPU
needed): it counts refusals on any machine. Without --plan-only and without a GPU (no `nvidia-smi -L`
listing one) the GPU mode says so and exits 0. --out FILE writes a markdown summary.

Usage: tests/onnx/cli_conformance.py [--sabre build/sabre] [--data /usr/share/libonnx-testdata/data]
                                     [--sets node,pytorch-converted,...] [--filter SUBSTR] [-v] [--json FILE]
                                     [-j N] [--gpu [--plan-only] [--dtype fp16|bf16] [--out SUMMARY.md]
                                     [--cache-dir DIR] [--require-compiled]]
--filter takes comma-separated substrings of test names.
Needs numpy and onnx (the project's .venv has both).
"""
import argparse
import collections
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import numpy_helper

REFUSAL = re.compile(r"not support|unsupported|sabre imports opsets|no reference kernel|computes it at run time|"
                     r"no shape inference for op|is not supported")


KNOWN_DIVERGENT = {
    # libonnx-testdata 1.12 truncates float -> bfloat16; ONNX's Cast rounds to nearest even (as sabre does).
    "test_cast_FLOAT_to_BFLOAT16": "expected data truncates to bf16; ONNX Cast rounds to nearest even",
}


def load_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    if t.data_type == onnx.TensorProto.BFLOAT16:  # numpy has no bf16: widen the bit patterns to f32
        bits = np.frombuffer(t.raw_data, dtype=np.uint16) if t.raw_data else np.array(t.int32_data, np.uint16)
        return (bits.astype(np.uint32) << 16).view(np.float32).reshape(tuple(t.dims)), "bf16"
    return numpy_helper.to_array(t), None


def load_sequence_pb(path):
    sp = onnx.SequenceProto()
    with open(path, "rb") as f:
        sp.ParseFromString(f.read())
    return [numpy_helper.to_array(t) for t in sp.tensor_values]


def numbered(d, prefix):
    out, i = [], 0
    while os.path.exists(os.path.join(d, f"{prefix}{i}.pb")):
        out.append(os.path.join(d, f"{prefix}{i}.pb"))
        i += 1
    return out


def compare(got, want):
    if got.shape != want.shape:
        return f"shape {list(got.shape)} vs expected {list(want.shape)}"
    if want.dtype.kind in "OUS":  # strings: exact
        if got.dtype.kind not in "US":
            return f"dtype {got.dtype} vs expected strings"
        ok = np.array([str(g) == (w.decode() if isinstance(w, bytes) else str(w))
                       for g, w in zip(got.ravel(), want.ravel())], dtype=bool).reshape(want.shape)
        if ok.all():
            return ""
        i = int(np.argmin(ok.ravel()))
        return f"{int((~ok).sum())} of {ok.size} differ; first at {i}: {got.ravel()[i]!r} vs expected {want.ravel()[i]!r}"
    if want.dtype.kind in "fc":
        g, w = got.astype(np.float64), want.astype(np.float64)
        ok = (np.isnan(g) & np.isnan(w)) | (g == w) | (np.abs(g - w) <= 1e-5 + 1e-3 * np.abs(w))
    else:
        if got.dtype.kind == "f":
            return f"dtype {got.dtype} vs expected {want.dtype}"
        ok = got.astype(np.int64) == want.astype(np.int64)
    if ok.all():
        return ""
    i = int(np.argmin(ok.ravel()))
    return f"{int((~ok).sum())} of {ok.size} differ; first at {i}: {got.ravel()[i]} vs expected {want.ravel()[i]}"


def input_args(tdir, work):
    """(--input arguments, None), or (None, (kind, reason)) where the test cannot be given to the CLI."""
    model = os.path.join(tdir, "model.onnx")
    ds = os.path.join(tdir, "test_data_set_0")
    m = onnx.load(model, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    graph_ins = [i for i in m.graph.input if i.name not in inits]
    ins = numbered(ds, "input_")
    if len(ins) != len(graph_ins):
        return None, ("error", f"{len(ins)} input files for {len(graph_ins)} inputs")
    args = []
    for k, (vi, pb) in enumerate(zip(graph_ins, ins)):
        if vi.type.HasField("sequence_type"):
            d = os.path.join(work, f"in{k}")
            os.makedirs(d)
            for j, t in enumerate(load_sequence_pb(pb)):
                np.save(os.path.join(d, f"{j}.npy"), t)
            args += ["--input", f"{vi.name}={d}"]
            continue
        if not vi.type.HasField("tensor_type"):
            continue
        if vi.type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16:
            return None, ("refused", "bf16 input: the CLI reads no bf16 .npy")
        arr, _ = load_pb(pb)
        if arr.dtype.kind == "O":  # STRING: numpy str, which .npy stores without pickling
            arr = arr.astype(str)
        f = os.path.join(work, f"in{k}.npy")
        np.save(f, arr)
        args += ["--input", f"{vi.name}={f}"]
    return args, None


def check_outputs(tdir, stdout, cmp):
    """Compares the .npy files a `sabre run` listed in `stdout` with the test's expected outputs."""
    m = onnx.load(os.path.join(tdir, "model.onnx"), load_external_data=False)
    ds = os.path.join(tdir, "test_data_set_0")
    files = re.findall(r" -> (\S+\.npy|\S+/)(?:\s|$)", stdout, re.M)
    outs = numbered(ds, "output_")
    if len(files) != len(outs):
        return f"{len(files)} outputs written, {len(outs)} expected"
    out_types = [o.type.tensor_type.elem_type for o in m.graph.output]
    for k, (f, pb) in enumerate(zip(files, outs)):
        if k < len(m.graph.output) and m.graph.output[k].type.HasField("sequence_type"):
            want_seq = load_sequence_pb(pb)
            if not f.endswith("/"):
                return f"output {k}: a tensor was written, a sequence expected"
            got_seq = numbered_npy(f)
            if len(got_seq) != len(want_seq):
                return f"output {k}: sequence of {len(got_seq)} tensors vs expected {len(want_seq)}"
            for j, (g, w) in enumerate(zip(got_seq, want_seq)):
                d = cmp(np.load(g), w)
                if d:
                    return f"output {k} element {j}: {d}"
            continue
        if f.endswith("/"):
            return f"output {k}: a sequence was written, a tensor expected"
        want, _ = load_pb(pb)
        if k < len(out_types) and out_types[k] == onnx.TensorProto.BFLOAT16 and want.dtype == np.uint16:
            want = (want.astype(np.uint32) << 16).view(np.float32)  # bf16 bit patterns stored as UINT16
        got = np.load(f)
        d = cmp(got, want)
        if d:
            return f"output {k}: {d}"
    return ""


def numbered_npy(d):
    out, i = [], 0
    while os.path.exists(os.path.join(d, f"{i}.npy")):
        out.append(os.path.join(d, f"{i}.npy"))
        i += 1
    return out


def run_cli(cmd, timeout):
    """(kind, reason, stdout): kind "" when `cmd` exited 0, else refused / error / crash."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "crash", f"no answer in {timeout} s", ""
    if p.returncode < 0 or p.returncode not in (0, 1):
        return "crash", f"exit {p.returncode}: {p.stderr.strip()[-200:]}", p.stdout
    if p.returncode == 1:
        lines = p.stderr.strip().splitlines()
        msg = next((ln for ln in lines if ": error: " in ln), lines[0] if lines else "(no message)")
        return ("refused" if REFUSAL.search(p.stderr) else "error"), msg, p.stderr
    return "", "", p.stdout


def run_test(sabre, tdir, work, timeout):
    if not os.path.isdir(os.path.join(tdir, "test_data_set_0")):
        return "error", "no test_data_set_0"
    if os.path.basename(tdir) in KNOWN_DIVERGENT:
        return "diverge", KNOWN_DIVERGENT[os.path.basename(tdir)]
    args, bad = input_args(tdir, work)
    if bad:
        return bad
    kind, why, out = run_cli([sabre, "run", "--reference", os.path.join(tdir, "model.onnx"),
                              "-o", os.path.join(work, "out")] + args, timeout)
    if kind:
        return kind, why
    d = check_outputs(tdir, out, compare)
    return ("wrong", d) if d else ("pass", "")


# ---- GPU mode -------------------------------------------------------------------------------------

GPU_RTOL = {"fp16": 1e-2, "bf16": 5e-2}  # about 20 ulps of the compute dtype (2^-11, 2^-8)


def gpu_compare(r):
    """compare() at the tolerance of a plan computing in f16/bf16: each float element within
    r (|want| + rms(want)), so values near zero are held to the output's own scale."""
    def cmp(got, want):
        if got.shape != want.shape:
            return f"shape {list(got.shape)} vs expected {list(want.shape)}"
        if want.dtype.kind not in "fc":
            return compare(got, want)
        g, w = got.astype(np.float64), want.astype(np.float64)
        fin = np.isfinite(w)
        scale = float(np.sqrt(np.mean(w[fin] ** 2))) if fin.any() else 0.0
        ok = (np.isnan(g) & np.isnan(w)) | (g == w) | (np.abs(g - w) <= r * (np.abs(w) + scale))
        if ok.all():
            return ""
        i = int(np.argmin(ok.ravel()))
        return (f"{int((~ok).sum())} of {ok.size} differ beyond {r:g} (|want| + rms {scale:.3g}); "
                f"first at {i}: {g.ravel()[i]} vs expected {w.ravel()[i]}")
    return cmp


# One node a compile refusal lists: "  NAME (Op): reason".
REFUSED_NODE = re.compile(r"^\s+.* \(([A-Za-z0-9_.]+)\): (.*)$")


# A refusal line about a value rather than a node: "  NAME: reason".
REFUSED_VALUE = re.compile(r"^\s+\S+: (.*)$")


def refused_ops(stderr, first_line):
    """[(op, reason)] named by a compile refusal; ("(value)", reason) for a line about a value, and
    one ("(graph)", message) when it names neither. Quoted names become '…' so reasons histogram."""
    out = []
    for line in stderr.splitlines():
        m = REFUSED_NODE.match(line)
        if m:
            out.append((m.group(1), re.sub(r"'[^']*'", "'…'", m.group(2))))
        elif (v := REFUSED_VALUE.match(line)) and not line.startswith("sabre "):
            out.append(("(value)", re.sub(r"'[^']*'", "'…'", v.group(1))))
    return out or [("(graph)", re.sub(r"^sabre compile: error: ", "", first_line))]


def gpu_test(sabre, tdir, work, timeout, a):
    """(kind, reason, [(op, reason)] when refused) of one test on the GPU path."""
    args, bad = input_args(tdir, work)
    if bad:
        return bad[0], bad[1], [("(input)", bad[1])] if bad[0] == "refused" else []
    art = os.path.join(work, "model.sabre")
    cmd = [sabre, "compile", os.path.join(tdir, "model.onnx"), "-o", art, "--no-tune", "--dtype", a.dtype,
           "-j", "1", "--cache-dir", a.cache_dir]
    if a.plan_only:
        cmd.append("--plan-only")
    kind, why, text = run_cli(cmd, timeout)
    if kind == "refused":
        ops = refused_ops(text, why)
        return "refused", "; ".join(f"{op}: {r}" for op, r in ops), ops
    if kind:
        return kind, "compile: " + why, []
    if a.plan_only:
        return "compiled", "", []
    kind, why, out = run_cli([sabre, "run", art, "-o", os.path.join(work, "gpu_out")] + args, timeout)
    if kind:
        return ("error" if kind == "refused" else kind), "run: " + why, []
    d = check_outputs(tdir, out, gpu_compare(GPU_RTOL[a.dtype]))
    return ("wrong", d, []) if d else ("matched", "", [])


def have_gpu():
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    try:
        p = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
    except (subprocess.TimeoutExpired, OSError):
        return False
    return p.returncode == 0 and "GPU" in p.stdout


def one_test(a, s, t):
    """Everything about test s/t: the reference outcome and, in GPU mode, the GPU outcome."""
    tdir = os.path.join(a.data, s, t)
    with tempfile.TemporaryDirectory(prefix="sabre_conf_") as work:
        try:
            kind, why = run_test(a.sabre, tdir, work, a.timeout)
        except Exception as e:  # test data this script cannot read
            kind, why = "error", f"script: {type(e).__name__}: {e}"
        gpu = None
        if a.gpu and kind == "pass":
            try:
                gpu = gpu_test(a.sabre, tdir, work, a.timeout, a)
            except Exception as e:
                gpu = ("error", f"script: {type(e).__name__}: {e}", [])
    return s, t, kind, why, gpu


def gpu_summary(a, gpu_rows, refused_by_op, seconds, gpu_name):
    kinds = ["compiled"] if a.plan_only else ["matched"]
    kinds += ["refused", "wrong", "error", "crash"]
    out = ["# sabre GPU conformance: ONNX backend tests through `sabre compile` and `sabre run`", ""]
    mode = ("`sabre compile --plan-only` only (no kernels built, nothing run)" if a.plan_only
            else f"compiled (--no-tune) and run on {gpu_name}")
    out += [f"Tests whose reference run passes, {mode}; compute dtype {a.dtype}, tolerance "
            f"|got - want| <= {GPU_RTOL[a.dtype]:g} (|want| + rms(want)), integers exact. "
            f"{seconds:.0f} s with -j {a.jobs}.", ""]
    out.append("| set | reference passes | " + " | ".join(kinds) + " |")
    out.append("| --- | ---: | " + " | ".join("---:" for _ in kinds) + " |")
    for s, c in gpu_rows:
        out.append(f"| {s} | {sum(c.values())} | " + " | ".join(str(c.get(k, 0)) for k in kinds) + " |")
    if refused_by_op:
        out += ["", "## Refused at compile, by op", "",
                "Tests that name the op in their refusal (a test refused for two ops counts under both).", "",
                "| op | tests | reasons (tests) |", "| --- | ---: | --- |"]
        for op, reasons in sorted(refused_by_op.items(), key=lambda kv: (-sum(kv[1].values()), kv[0])):
            n = sum(reasons.values())
            rs = "; ".join(f"{r.replace('|', '/')} ({k})" for r, k in reasons.most_common(3))
            if len(reasons) > 3:
                rs += f"; {len(reasons) - 3} other reasons"
            out.append(f"| {op} | {n} | {rs} |")
    return out


def main_gpu(a, tests):
    """Runs `tests` [(set, name)] through the reference and the GPU path, -j at a time."""
    if not a.plan_only and not have_gpu():
        print("cli_conformance.py: no GPU here (nvidia-smi -L lists none): GPU mode skipped "
              "(--plan-only counts compile refusals without one)")
        return a.skip_exit
    gpu_name = ""
    if not a.plan_only:
        p = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True)
        gpu_name = p.stdout.strip().splitlines()[0] if p.stdout.strip() else "a GPU"
    own_cache = a.cache_dir is None
    if own_cache:
        a.cache_dir = tempfile.mkdtemp(prefix="sabre_conf_kernels_")
    t0 = time.time()
    results = []
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
            futs = [pool.submit(one_test, a, s, t) for s, t in tests]
            for f in concurrent.futures.as_completed(futs):
                r = f.result()
                results.append(r)
                s, t, kind, why, gpu = r
                if a.verbose and gpu and gpu[0] not in ("matched", "compiled"):
                    print(f"{gpu[0]:8} {s}/{t}: {gpu[1]}", flush=True)
    finally:
        if own_cache:
            shutil.rmtree(a.cache_dir, ignore_errors=True)
    seconds = time.time() - t0
    results.sort(key=lambda r: (r[0], r[1]))
    ref_rows, gpu_rows, refused_by_op, detail = {}, {}, collections.defaultdict(collections.Counter), {}
    for s, t, kind, why, gpu in results:
        ref_rows.setdefault(s, collections.Counter())[kind] += 1
        detail[f"{s}/{t}"] = {"reference": [kind, why]}
        if gpu is None:
            continue
        gkind, gwhy, ops = gpu
        gpu_rows.setdefault(s, collections.Counter())[gkind] += 1
        detail[f"{s}/{t}"]["gpu"] = [gkind, gwhy]
        for op, reason in {(op, r) for op, r in ops}:
            refused_by_op[op][reason] += 1
    kinds = ["pass", "refused", "error", "wrong", "crash", "diverge"]
    gkinds = ["compiled" if a.plan_only else "matched", "refused", "wrong", "error", "crash"]
    print(f"{'set':20} {'tests':>6} " + " ".join(f"{k:>8}" for k in kinds) + "   GPU: " +
          " ".join(f"{k:>8}" for k in gkinds))
    for s in sorted(ref_rows):
        c, g = ref_rows[s], gpu_rows.get(s, collections.Counter())
        print(f"{s:20} {sum(c.values()):>6} " + " ".join(f"{c[k]:>8}" for k in kinds) + "        " +
              " ".join(f"{g[k]:>8}" for k in gkinds))
    md = gpu_summary(a, sorted(gpu_rows.items()), refused_by_op, seconds, gpu_name)
    bad = [(k, v["gpu"]) for k, v in detail.items() if "gpu" in v and v["gpu"][0] in ("wrong", "error", "crash")]
    if bad:
        md += ["", "## Wrong, error and crash", "", "| test | outcome | reason |", "| --- | --- | --- |"]
        md += [f"| {k} | {g[0]} | {g[1].replace('|', '/')[:300]} |" for k, g in bad]
    if a.out:
        with open(a.out, "w") as f:
            f.write("\n".join(md) + "\n")
        print(f"wrote {a.out}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(detail, f, indent=1, sort_keys=True)
    refused = [k for k, v in detail.items() if "gpu" in v and v["gpu"][0] == "refused"]
    if a.require_compiled and refused:
        print(f"cli_conformance.py: {len(refused)} reference-passing tests refused at compile: " +
              ", ".join(f"{k} ({detail[k]['gpu'][1]})" for k in refused[:10]))
        return 1
    return 1 if bad and any(g[0] in ("wrong", "crash") for _, g in bad) else 0


def matches(filters, name):
    """--filter: comma-separated substrings, any of which selects a test (empty: all)."""
    return not filters or any(f in name for f in filters.split(","))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--sabre", default=os.path.join(root, "build", "sabre"))
    ap.add_argument("--data", default="/usr/share/libonnx-testdata/data")
    ap.add_argument("--sets", default="node,pytorch-converted,pytorch-operator,simple")
    ap.add_argument("--filter", default="")
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--json", help="write every test's outcome and reason here")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="tests at a time (GPU mode)")
    ap.add_argument("--gpu", action="store_true", help="also compile and run each reference-passing test on the GPU")
    ap.add_argument("--plan-only", action="store_true", help="with --gpu: stop after `sabre compile --plan-only`")
    ap.add_argument("--dtype", choices=sorted(GPU_RTOL), default="fp16", help="with --gpu: the compute dtype")
    ap.add_argument("--cache-dir", help="with --gpu: compiled-kernel cache shared by the tests (default: a fresh one)")
    ap.add_argument("--out", help="with --gpu: write a markdown summary here")
    ap.add_argument("--skip-exit", type=int, default=0,
                    help="with --gpu: the exit status when there is no GPU (default 0; ctest gives 77)")
    ap.add_argument("--require-compiled", action="store_true",
                    help="with --gpu: exit 1 when a reference-passing test is refused at compile")
    a = ap.parse_args()
    if a.jobs < 1:
        ap.error("-j needs a positive number")
    if (a.plan_only or a.out or a.cache_dir or a.require_compiled) and not a.gpu:
        ap.error("--plan-only, --out, --cache-dir and --require-compiled go with --gpu")
    if not os.access(a.sabre, os.X_OK):
        ap.error(f"no sabre binary at {a.sabre} (build it, or give --sabre)")
    if a.gpu:
        tests = []
        for s in a.sets.split(","):
            sdir = os.path.join(a.data, s)
            if not os.path.isdir(sdir):
                ap.error(f"no test set at {sdir} (install libonnx-testdata, or give --data)")
            tests += [(s, t) for t in sorted(os.listdir(sdir))
                      if os.path.exists(os.path.join(sdir, t, "model.onnx")) and matches(a.filter, t)]
        return main_gpu(a, tests)
    kinds = ["pass", "refused", "error", "wrong", "crash", "diverge"]
    rows, detail = [], {}
    for s in a.sets.split(","):
        sdir = os.path.join(a.data, s)
        tests = sorted(t for t in os.listdir(sdir) if os.path.exists(os.path.join(sdir, t, "model.onnx")) and matches(a.filter, t))
        counts = dict.fromkeys(kinds, 0)
        for t in tests:
            with tempfile.TemporaryDirectory(prefix="sabre_conf_") as work:
                try:
                    kind, why = run_test(a.sabre, os.path.join(sdir, t), work, a.timeout)
                except Exception as e:  # test data this script cannot read
                    kind, why = "error", f"script: {type(e).__name__}: {e}"
            counts[kind] += 1
            detail[f"{s}/{t}"] = [kind, why]
            if a.verbose and kind != "pass":
                print(f"{kind:8} {s}/{t}: {why}", flush=True)
        rows.append((s, len(tests), counts))
    print(f"{'set':20} {'tests':>6} " + " ".join(f"{k:>8}" for k in kinds))
    for s, n, c in rows:
        print(f"{s:20} {n:>6} " + " ".join(f"{c[k]:>8}" for k in kinds))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(detail, f, indent=1, sort_keys=True)
    return 1 if any(c["wrong"] or c["crash"] for _, _, c in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
