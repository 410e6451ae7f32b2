#!/usr/bin/env python3
"""End-to-end trust boundaries of the sabre CLI (docs/TRUST.md), no GPU needed: a model whose
external data is a symlink out of its folder, artifacts whose manifest names an absolute path or
`..`, whose kernels/ folder or a kernel library is a symlink elsewhere, whose kernel library states
another signature than its plan needs, and whose plan forges a weight offset. Each must end in one
error line and a non-zero exit, print nothing of the outside file, and load no kernel library (the
stand-in libraries create a marker file from their constructor).

usage: trust_boundaries.py SABRE WORK_DIR STAND_IN_LIBS_DIR
"""
import ctypes
import ctypes.util
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import cli_check  # noqa: E402
SECRET = 12345.678  # the value the outside file holds: it must show up nowhere


def xxh3_64(path):
    """The artifact checksum (src/support/hash.h), from the xxHash library sabre's header comes with."""
    lib = ctypes.CDLL(ctypes.util.find_library("xxhash") or "libxxhash.so.0")
    lib.XXH3_64bits.restype = ctypes.c_uint64
    lib.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    data = open(path, "rb").read()
    return "xxh3_64:%016x" % lib.XXH3_64bits(data, len(data))


def relist(art, entry, actual):
    """manifest.json of `art` lists `entry` with the size and checksum of the file at `actual`."""
    mp = os.path.join(art, "manifest.json")
    m = json.load(open(mp))
    m["files"][entry] = {"size": os.path.getsize(actual), "checksum": xxh3_64(actual)}
    json.dump(m, open(mp, "w"))


def external_model(folder, outside):
    """y = x·w with w (3x4 f32) stored as external data in w.bin, a symlink to a file outside."""
    os.makedirs(folder, exist_ok=True)
    np.full(12, SECRET, dtype=np.float32).tofile(os.path.join(outside, "hostname"))
    w = numpy_helper.from_array(np.zeros((3, 4), np.float32), "w")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    e = w.external_data.add()
    e.key, e.value = "location", "w.bin"
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "ext",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [w])
    path = os.path.join(folder, "model.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    os.symlink(os.path.join(outside, "hostname"), os.path.join(folder, "w.bin"))
    return path


def main():
    sabre, work, libs = sys.argv[1], sys.argv[2], sys.argv[3]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    w = lambda *p: os.path.join(work, *p)  # noqa: E731
    outside = w("outside")
    os.makedirs(outside)
    marker = w("outside", "kernel_loaded")
    env = dict(os.environ, SABRE_TRUST_MARKER=marker)
    failures = 0

    def expect(what, argv, needles, may_load=False):
        """`may_load`: every file checks out, so the library is loaded before its signature is read."""
        nonlocal failures
        r = cli_check.run(sabre, argv, timeout=300, env=env)
        problems = cli_check.error_problems(r, needles=needles, max_line=None)
        if "12345.6" in r.out + r.err:
            problems.append("the outside file's contents were printed")
        if os.path.exists(marker):
            if not may_load:
                problems.append("a kernel library was loaded (its constructor ran)")
            os.remove(marker)
        cli_check.report(what, r, problems, stderr_lines=0)
        failures += bool(problems)

    # 1. A model's external data through a symlink out of its folder: inspect, compile, reference run.
    model = external_model(w("model"), outside)
    for argv in (["inspect", "--ir", model], ["compile", "--plan-only", model, "-o", w("ext.sabre")],
                 ["run", "--reference", model, "-o", w("ext_out")]):
        expect("external data symlinked out: sabre " + argv[0], argv, ["initializer 'w'", "'w.bin'", "outside"])
    if os.path.exists(w("ext.sabre")):
        print("FAIL compile wrote an artifact from a model it refused")
        failures += 1

    # 2. Artifacts: a good plan-only one, then each forgery of a copy of it.
    base = w("base.sabre")
    r = subprocess.run([sabre, "compile", "--plan-only", "--no-tune", os.path.join(ROOT, "models", "bert_tiny.onnx"),
                        "-o", base, "--dynamic", "batch=1..4,seq=1..32"], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        print("FAIL sabre compile --plan-only bert_tiny: " + r.stderr.strip()[:500])
        return 1
    good_lib, bad_lib = os.path.join(libs, "trust_kernel_good.so"), os.path.join(libs, "trust_kernel_bf16_gelu.so")
    for lib in (good_lib, bad_lib):
        if not os.path.exists(lib):
            print(f"FAIL {lib} is missing: build sabre_unit_tests (it builds the stand-in libraries)")
            return 1
    shutil.copy(good_lib, os.path.join(outside, "k.so"))

    def variant(name):
        d = w(name + ".sabre")
        shutil.copytree(base, d, symlinks=True)
        return d

    run = lambda d: ["run", d, "-o", w("run_out")]  # noqa: E731

    d = variant("absolute")
    relist(d, os.path.join(outside, "hostname"), os.path.join(outside, "hostname"))
    expect("manifest names an absolute path", run(d), ["is an absolute path"])

    d = variant("dotdot")
    relist(d, "../outside/hostname", os.path.join(outside, "hostname"))
    expect("manifest names ../", run(d), ["climbs out with '..'"])

    d = variant("plan_link")
    shutil.copy(os.path.join(d, "plan.json"), os.path.join(outside, "plan.json"))
    os.remove(os.path.join(d, "plan.json"))
    os.symlink(os.path.join(outside, "plan.json"), os.path.join(d, "plan.json"))
    expect("plan.json symlinked out", run(d), ["'plan.json' resolves to", "outside"])

    d = variant("kernels_link")
    os.makedirs(os.path.join(outside, "kernels"))
    shutil.copy(good_lib, os.path.join(outside, "kernels", "k.so"))
    shutil.rmtree(os.path.join(d, "kernels"), ignore_errors=True)
    os.symlink(os.path.join(outside, "kernels"), os.path.join(d, "kernels"))
    relist(d, "kernels/k.so", os.path.join(outside, "kernels", "k.so"))
    expect("kernels/ symlinked out", run(d), ["kernels/ is a symlink"])

    d = variant("kernel_link")
    os.makedirs(os.path.join(d, "kernels"), exist_ok=True)
    os.symlink(os.path.join(outside, "k.so"), os.path.join(d, "kernels", "k.so"))
    relist(d, "kernels/k.so", os.path.join(outside, "k.so"))
    expect("a kernel library symlinked out", run(d), ["'kernels/k.so' resolves to", "outside"])

    # A library stating a bf16 bias_gelu kernel, which the f16 plan's GEMM steps dispatch to.
    d = variant("signature")
    os.makedirs(os.path.join(d, "kernels"), exist_ok=True)
    shutil.copy(bad_lib, os.path.join(d, "kernels", "k.so"))
    plan = json.load(open(os.path.join(d, "plan.json")))
    for st in plan["steps"]:
        if st["op"] in ("gemm", "conv"):
            st["params"]["dispatch"] = [{"max_m": -1, "kernel": "k"}]
            st["params"].pop("dispatch_aligned", None)
    json.dump(plan, open(os.path.join(d, "plan.json"), "w"))
    relist(d, "plan.json", os.path.join(d, "plan.json"))
    relist(d, "kernels/k.so", os.path.join(d, "kernels", "k.so"))
    expect("a kernel that computes something else", run(d),
           ["dispatches to kernel 'k'", "dtype=bf16 out=bf16 layout=tn epilogue=bias_gelu", "dtype=f16 out=f16"],
           may_load=True)

    # A forged weight offset: 2^64 - 256 and a negative one.
    for off in ("18446744073709551360", "-256"):
        d = variant("offset" + off.replace("-", "neg"))
        plan = json.load(open(os.path.join(d, "plan.json")))
        t = next(t for t in plan["tensors"] if t["kind"] == "weight")
        # Written as text: Python's json would turn 2^64 - 256 into a float of another value.
        plan_text = json.dumps(plan).replace('"offset": %s' % json.dumps(t["offset"]), '"offset": ' + off, 1)
        open(os.path.join(d, "plan.json"), "w").write(plan_text)
        relist(d, "plan.json", os.path.join(d, "plan.json"))
        expect("weight offset " + off, run(d), ["not a byte count"])

    print(f"{'all ok' if not failures else str(failures) + ' failed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
