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
Inputs that are not tensors (sequences, optionals) are left out: sabre refuses such models at import.
Prints one table row per set and, with -v, every test that is not a pass with its reason.

Usage: tests/onnx/cli_conformance.py [--sabre build/sabre] [--data /usr/share/libonnx-testdata/data]
                                     [--sets node,pytorch-converted,...] [--filter SUBSTR] [-v] [--json FILE]
Needs numpy and onnx (the project's .venv has both).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

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


def numbered(d, prefix):
    out, i = [], 0
    while os.path.exists(os.path.join(d, f"{prefix}{i}.pb")):
        out.append(os.path.join(d, f"{prefix}{i}.pb"))
        i += 1
    return out


def compare(got, want):
    if got.shape != want.shape:
        return f"shape {list(got.shape)} vs expected {list(want.shape)}"
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


def run_test(sabre, tdir, work, timeout):
    model = os.path.join(tdir, "model.onnx")
    ds = os.path.join(tdir, "test_data_set_0")
    if not os.path.isdir(ds):
        return "error", "no test_data_set_0"
    if os.path.basename(tdir) in KNOWN_DIVERGENT:
        return "diverge", KNOWN_DIVERGENT[os.path.basename(tdir)]
    m = onnx.load(model, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    graph_ins = [i for i in m.graph.input if i.name not in inits]
    ins = numbered(ds, "input_")
    if len(ins) != len(graph_ins):
        return "error", f"{len(ins)} input files for {len(graph_ins)} inputs"
    cmd = [sabre, "run", "--reference", model, "-o", os.path.join(work, "out")]
    for k, (vi, pb) in enumerate(zip(graph_ins, ins)):
        if not vi.type.HasField("tensor_type"):
            continue
        if vi.type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16:
            return "refused", "bf16 input: the CLI reads no bf16 .npy"
        arr, _ = load_pb(pb)
        f = os.path.join(work, f"in{k}.npy")
        np.save(f, arr)
        cmd += ["--input", f"{vi.name}={f}"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "crash", f"no answer in {timeout} s"
    if p.returncode < 0 or p.returncode not in (0, 1):
        return "crash", f"exit {p.returncode}: {p.stderr.strip()[-200:]}"
    if p.returncode == 1:
        msg = p.stderr.strip().splitlines()[0] if p.stderr.strip() else "(no message)"
        return ("refused" if REFUSAL.search(p.stderr) else "error"), msg
    files = re.findall(r" -> (\S+\.npy)", p.stdout)
    outs = numbered(ds, "output_")
    if len(files) != len(outs):
        return "wrong", f"{len(files)} outputs written, {len(outs)} expected"
    out_types = [o.type.tensor_type.elem_type for o in m.graph.output]
    for k, (f, pb) in enumerate(zip(files, outs)):
        want, _ = load_pb(pb)
        if k < len(out_types) and out_types[k] == onnx.TensorProto.BFLOAT16 and want.dtype == np.uint16:
            want = (want.astype(np.uint32) << 16).view(np.float32)  # bf16 bit patterns stored as UINT16
        got = np.load(f)
        d = compare(got, want)
        if d:
            return "wrong", f"output {k}: {d}"
    return "pass", ""


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
    a = ap.parse_args()
    kinds = ["pass", "refused", "error", "wrong", "crash", "diverge"]
    rows, detail = [], {}
    for s in a.sets.split(","):
        sdir = os.path.join(a.data, s)
        tests = sorted(t for t in os.listdir(sdir) if os.path.exists(os.path.join(sdir, t, "model.onnx")) and a.filter in t)
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
