#!/usr/bin/env python3
"""Hostile inputs against the sabre CLI (issue 30): crashes, hangs, unbounded reads, C++ internals in
messages and quiet failures. Each bad input must end in a non-zero exit that is not a signal, within
a timeout, with no crash text and a first stderr line 'sabre CMD: error: ...' that names the problem.
A few valid inputs next to them must succeed (exit 0) and print the right thing.

usage: hostile_inputs.py SABRE WORK_DIR [--tally]
  --tally  print only the outcome of each case (clean error / crash / hang / wrong exit 0 / ok)
"""
import os
import re
import shutil
import stat
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))

sys.path.insert(0, HERE)
import cli_check  # noqa: E402

TIMEOUT = 60


def save(model, path):
    onnx.save(model, path)
    return path


def graph_model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "hostile", inputs, outputs, initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def vi(name, dt, shape):
    return helper.make_tensor_value_info(name, dt, shape)


def i64(name, v):
    return numpy_helper.from_array(np.array(v, dtype=np.int64), name)


def range_model(path, start, limit, delta):
    """The graph's output is a Range of constants, plus a Relu of an input so there is something to run."""
    nodes = [helper.make_node("Range", ["s", "l", "d"], ["r"], name="range0"),
             helper.make_node("Relu", ["x"], ["y"], name="relu0")]
    m = graph_model(nodes, [vi("x", TensorProto.FLOAT, [2, 3])],
                    [vi("r", TensorProto.INT64, None), vi("y", TensorProto.FLOAT, [2, 3])],
                    [i64("s", start), i64("l", limit), i64("d", delta)])
    return save(m, path)


def range_input_model(path):
    """Range whose delta is a graph input: shape inference cannot know its length."""
    nodes = [helper.make_node("Range", ["s", "l", "d"], ["r"], name="range0")]
    m = graph_model(nodes, [vi("d", TensorProto.INT64, [])], [vi("r", TensorProto.INT64, None)],
                    [i64("s", 0), i64("l", 10)])
    return save(m, path)


def const_output_model(path):
    """A valid model six of whose outputs are constants (folded Adds of initializers): lowering them
    grows the plan's tensor list while it holds an entry of it (issue 30's invalid read)."""
    inits, nodes, outs = [], [], []
    for i in range(6):
        inits += [numpy_helper.from_array(np.full((2, 3), i + 1, np.float32), f"a{i}"),
                  numpy_helper.from_array(np.full((2, 3), 0.5, np.float32), f"b{i}")]
        nodes.append(helper.make_node("Add", [f"a{i}", f"b{i}"], [f"c{i}"], name=f"add_consts{i}"))
        outs.append(vi(f"c{i}", TensorProto.FLOAT, [2, 3]))
    inits.append(numpy_helper.from_array(np.random.default_rng(3).standard_normal((3, 4)).astype(np.float32), "w"))
    nodes.append(helper.make_node("MatMul", ["x", "w"], ["y"], name="mm0"))
    m = graph_model(nodes, [vi("x", TensorProto.FLOAT, [2, 3])], outs + [vi("y", TensorProto.FLOAT, [2, 4])], inits)
    return save(m, path)


def div_model(path, op="Div"):
    nodes = [helper.make_node(op, ["a", "b"], ["q"], name="div0")]
    m = graph_model(nodes, [vi("a", TensorProto.INT64, [3]), vi("b", TensorProto.INT64, [3])],
                    [vi("q", TensorProto.INT64, [3])])
    return save(m, path)


def unary_model(path, shape, dt=TensorProto.FLOAT):
    m = graph_model([helper.make_node("Relu", ["x"], ["y"], name="relu0")], [vi("x", dt, shape)], [vi("y", dt, shape)])
    return save(m, path)


def huge_flops_model(path):
    """Four MatMuls of two [2^20, 2^20] inputs: 2^61 FLOPs each, 2^63 in all, past int64."""
    n = 1 << 20
    nodes = [helper.make_node("MatMul", ["a", "b"], [f"y{i}"], name=f"mm{i}") for i in range(4)]
    m = graph_model(nodes, [vi("a", TensorProto.FLOAT, [n, n]), vi("b", TensorProto.FLOAT, [n, n])],
                    [vi(f"y{i}", TensorProto.FLOAT, [n, n]) for i in range(4)])
    return save(m, path)


def sym_flops_model(path):
    """A MatMul [m, k] x [k, n]: 2*m*n*k FLOPs, past int64 at --dim m=k=n=10^8."""
    m = graph_model([helper.make_node("MatMul", ["a", "b"], ["y"], name="mm0")],
                    [vi("a", TensorProto.FLOAT, ["m", "k"]), vi("b", TensorProto.FLOAT, ["k", "n"])],
                    [vi("y", TensorProto.FLOAT, ["m", "n"])])
    return save(m, path)


def huge_attr_model(path):
    """ConstantOfShape of a [2^40, 2^40] shape constant."""
    nodes = [helper.make_node("ConstantOfShape", ["shp"], ["y"], name="cos0")]
    m = graph_model(nodes, [], [vi("y", TensorProto.FLOAT, None)], [i64("shp", [1 << 40, 1 << 40])])
    return save(m, path)


def huge_reshape_model(path):
    nodes = [helper.make_node("Reshape", ["x", "shp"], ["y"], name="reshape0")]
    m = graph_model(nodes, [vi("x", TensorProto.FLOAT, [2, 3])], [vi("y", TensorProto.FLOAT, None)],
                    [i64("shp", [1 << 62, 4])])
    return save(m, path)


def negative_dim_model(path):
    m = graph_model([helper.make_node("Relu", ["x"], ["y"], name="relu0")],
                    [vi("x", TensorProto.FLOAT, [-5, 3])], [vi("y", TensorProto.FLOAT, [-5, 3])])
    return save(m, path)


def build_cases(sabre, work):
    w = lambda name: os.path.join(work, name)  # noqa: E731
    bert = os.path.join(ROOT, "models", "bert_tiny.onnx")
    data = open(bert, "rb").read()

    range_model(w("range_delta0.onnx"), 0, 10, 0)
    range_model(w("range_huge.onnx"), 0, (1 << 40) - 1, 1)
    range_model(w("range_huger.onnx"), -(1 << 62), 1 << 62, 1)
    range_input_model(w("range_input.onnx"))
    const_output_model(w("const_output.onnx"))
    div_model(w("div.onnx"))
    unary_model(w("huge_input.onnx"), [1 << 40])
    unary_model(w("sym_input.onnx"), ["batch", 1 << 20])
    huge_flops_model(w("huge_flops.onnx"))
    sym_flops_model(w("sym_flops.onnx"))
    huge_attr_model(w("huge_cos.onnx"))
    huge_reshape_model(w("huge_reshape.onnx"))
    negative_dim_model(w("negative_dim.onnx"))
    open(w("truncated.onnx"), "wb").write(data[: len(data) // 2])
    open(w("empty.onnx"), "wb").write(b"")
    os.makedirs(w("dir_model.onnx"), exist_ok=True)
    np.save(w("a_min.npy"), np.array([-(1 << 63), 7, -7], np.int64))
    np.save(w("b_m1.npy"), np.array([-1, 2, 2], np.int64))
    np.save(w("b_zero.npy"), np.array([-1, 0, 2], np.int64))
    np.save(w("x23.npy"), np.random.default_rng(5).standard_normal((2, 3)).astype(np.float32))
    np.save(w("d0.npy"), np.array(0, np.int64))
    fifo = w("fifo.onnx")
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
    # -o DIR whose output file is /dev/full: the .npy write must fail loudly.
    full_dir = w("out_full")
    shutil.rmtree(full_dir, ignore_errors=True)
    os.makedirs(full_dir)
    os.symlink("/dev/full", os.path.join(full_dir, "y.npy"))
    os.makedirs(w("import_dir"), exist_ok=True)
    open(w("garbage.jsonl"), "w").write("this is not json\nnor this\n")
    db = w("t.db")
    # An artifact (plan only) for the run flags that are checked before any GPU is touched.
    subprocess.run([sabre, "compile", w("const_output.onnx"), "-o", w("const.sabre"), "--plan-only"],
                   capture_output=True, timeout=TIMEOUT)
    if os.path.exists(db):
        os.remove(db)
    row = ('{"env": {"gpu": "Test GPU", "sm": 90, "cuda": "13.0", "cutlass": "4.2", "template_version": "1"}, '
           '"workload": "gemm_f16_test", "kernel": "k0", "status": "ok", "time_us": 12.5}\n')
    open(w("one_row.jsonl"), "w").write(row)
    subprocess.run([sabre, "db", "--db", db, "import", w("one_row.jsonl")], capture_output=True, timeout=TIMEOUT,
                   check=True)  # export then has something to write

    run_ref = ["run", "--reference"]
    # (name, argv, regexes stderr must match, expect_ok, stdout target)
    bad = [
        ("Range delta 0 (compile)", ["compile", w("range_delta0.onnx"), "-o", w("c0.sabre"), "--plan-only"], [r"range0|Range", r"delta|0"]),
        ("Range delta 0 (partition)", ["partition", w("range_delta0.onnx")], [r"range0|Range", r"delta"]),
        ("Range delta 0 (run)", run_ref + [w("range_delta0.onnx"), "-o", w("o_r0")], [r"delta"]),
        ("Range delta 0 from an input (run)", run_ref + [w("range_input.onnx"), "--input", f"d={w('d0.npy')}", "-o", w("o_ri")], [r"delta"]),
        ("huge Range (compile)", ["compile", w("range_huge.onnx"), "-o", w("c1.sabre"), "--plan-only"], [r"range0|Range", r"element|large|too"]),
        ("huge Range (partition)", ["partition", w("range_huge.onnx")], [r"range0|Range"]),
        ("huge Range (run)", run_ref + [w("range_huge.onnx"), "-o", w("o_r1")], [r"range0|Range"]),
        ("hugest Range (inspect)", ["inspect", w("range_huger.onnx")], [r"range0|Range"]),
        ("int64 Div by zero (run)", run_ref + [w("div.onnx"), "--input", f"a={w('a_min.npy')}", "--input",
                                                f"b={w('b_zero.npy')}", "-o", w("o_div0")], [r"div0", r"zero"]),
        ("FIFO as model (inspect)", ["inspect", fifo], [r"fifo\.onnx", r"regular file|not a file|fifo|pipe"]),
        ("FIFO as model (run)", run_ref + [fifo, "-o", w("o_fifo")], [r"fifo\.onnx"]),
        ("FIFO as .npy", run_ref + [w("div.onnx"), "--input", f"a={fifo}", "--input", f"b={w('b_m1.npy')}", "-o", w("o_f")], [r"fifo\.onnx"]),
        ("/dev/zero as model", ["inspect", "/dev/zero"], [r"/dev/zero", r"regular file|not a file|device"]),
        ("/dev/zero as .npy", run_ref + [w("div.onnx"), "--input", "a=/dev/zero", "--input", f"b={w('b_m1.npy')}", "-o", w("o_z")], [r"/dev/zero"]),
        ("/dev/zero as db import", ["db", "--db", db, "import", "/dev/zero"], [r"/dev/zero"]),
        ("directory as model", ["inspect", w("dir_model.onnx")], [r"dir_model\.onnx", r"directory|regular"]),
        ("directory as model (compile)", ["compile", w("dir_model.onnx"), "-o", w("cd.sabre"), "--plan-only"], [r"dir_model\.onnx"]),
        ("truncated model", ["inspect", w("truncated.onnx")], [r"truncated\.onnx"]),
        ("empty model", ["inspect", w("empty.onnx")], [r"empty\.onnx"]),
        ("missing model (compile)", ["compile", w("nope.onnx"), "-o", w("cn.sabre"), "--plan-only"], [r"nope\.onnx"]),
        ("declared [1<<40] input (run)", run_ref + [w("huge_input.onnx"), "-o", w("o_h")], [r"'x'", r"1099511627776"]),
        ("--dim batch=3000000000 (run)", run_ref + [w("sym_input.onnx"), "--dim", "batch=3000000000", "-o", w("o_b")], [r"'x'|batch"]),
        ("--dim batch=3000000000 (bert run)", run_ref + [bert, "--dim", "batch=3000000000", "--dim", "seq=4", "-o", w("o_bb")], [r"batch|input_ids|too|large"]),
        ("ConstantOfShape [2^40,2^40] (compile)", ["compile", w("huge_cos.onnx"), "-o", w("cc.sabre"), "--plan-only"], [r"cos0|ConstantOfShape|large|overflow"]),
        ("ConstantOfShape [2^40,2^40] (run)", run_ref + [w("huge_cos.onnx"), "-o", w("o_cos")], [r"cos0|ConstantOfShape|large|overflow"]),
        ("Reshape to [2^62,4] (inspect)", ["inspect", w("huge_reshape.onnx")], [r"reshape0|Reshape"]),
        ("negative declared dim (run)", run_ref + [w("negative_dim.onnx"), "-o", w("o_neg")], [r"x|-5|negative"]),
        ("npy write to /dev/full", run_ref + [w("const_output.onnx"), "-o", full_dir], [r"y\.npy", r"space|write"]),
        ("stdout is /dev/full (inspect)", ["inspect", bert], [r"output|write", r"space"], "/dev/full"),
        ("db export -o /dev/full", ["db", "--db", db, "export", "-o", "/dev/full"], [r"/dev/full", r"space|write"]),
        ("-o '' (run)", run_ref + [bert, "-o", ""], [r"-o|--out", r"empty"]),
        ("-o '' (compile)", ["compile", bert, "-o", "", "--plan-only"], [r"-o|--output", r"empty"]),
        ("-o '' (db export)", ["db", "--db", db, "export", "-o", ""], [r"-o|--output", r"empty"]),
        ("db import of a folder", ["db", "--db", db, "import", w("import_dir")], [r"import_dir", r"directory|regular"]),
        ("db import of a file with no rows", ["db", "--db", db, "import", w("garbage.jsonl")], [r"garbage\.jsonl"]),
        ("bad --rtol (run artifact)", ["run", w("const.sabre"), "--compare-reference", "--rtol", "tight", "-o", w("o_t")],
         [r"--rtol", r"tight"]),
        ("negative --atol (run artifact)", ["run", w("const.sabre"), "--compare-reference", "--atol", "-1", "-o", w("o_t")],
         [r"--atol", r"-1"]),
        ("db import of a missing file", ["db", "--db", db, "import", w("nope.jsonl")], [r"nope\.jsonl", r"no such file"]),
    ]
    good = [
        ("constant output (compile --plan-only)", ["compile", w("const_output.onnx"), "-o", w("const.sabre"), "--plan-only"], [], None),
        ("constant output (partition)", ["partition", w("const_output.onnx")], [], None),
        ("INT64_MIN / -1 wraps (run)", run_ref + [w("div.onnx"), "--input", f"a={w('a_min.npy')}", "--input",
                                                   f"b={w('b_m1.npy')}", "-o", w("o_div")], [], None),
        ("FLOPs past int64 (inspect)", ["inspect", w("huge_flops.onnx")], [r"MatMul\s+4 nodes\s+9\.2\d*E\s"], None),
        ("FLOPs past int64 (partition)", ["partition", w("huge_flops.onnx")], [r"FLOPs offloaded to cutlass: not counted"], None),
        ("FLOPs past int64 at --dim (inspect)", ["inspect", w("sym_flops.onnx"), "--dim", "m=100000000", "--dim",
                                                 "k=100000000", "--dim", "n=100000000"], [r"MatMul\s+1 nodes\s+2\.00e\+24\s"], None),
    ]
    return [(n, a, p, False, (x[0] if x else None)) for n, a, p, *x in bad] + \
           [(n, a, p, True, o) for n, a, p, o in good]


def main():
    sabre, work = sys.argv[1], sys.argv[2]
    tally_only = "--tally" in sys.argv
    os.makedirs(work, exist_ok=True)
    cases = build_cases(sabre, work)
    failures, tally = 0, {}
    for name, argv, patterns, expect_ok, stdout_to in cases:
        r = cli_check.run(sabre, argv, timeout=TIMEOUT, stdout_to=stdout_to)
        code, out, err, first = r.code, r.out, r.err, r.first
        if r.hung:
            outcome = "hang"
        elif cli_check.crashed(r):
            outcome = "crash"
        elif code == 0 and not expect_ok:
            outcome = "wrong exit 0"
        elif code != 0 and expect_ok:
            outcome = "refused a valid input"
        else:
            outcome = "ok" if expect_ok else "clean error"
        if expect_ok:  # a valid input: exit 0, no crash, the right thing on stdout
            problems = [] if outcome == "ok" else [outcome]
            problems += [f"stdout lacks /{p}/" for p in patterns if not r.hung and not re.search(p, out, re.I)]
        else:
            problems = cli_check.error_problems(r, patterns)
        if outcome in ("clean error", "ok") and problems:
            outcome = outcome + " (message lacks detail)"
        tally[outcome] = tally.get(outcome, 0) + 1
        status = "ok  " if not problems else "FAIL"
        print(f"{status} {name}: {outcome}: exit {code}: {first[:200]}")
        if problems and not tally_only:
            for p in problems:
                print(f"       {p}")
            if len(err.splitlines()) > 1:
                print("       stderr:\n" + "\n".join("         " + l for l in err.splitlines()[:8]))
        failures += bool(problems)
    # Memory errors that do not crash: the lowering of constant outputs under valgrind, where present
    # (not for a sanitized sabre, which checks that itself and which valgrind cannot run).
    if shutil.which("valgrind") and not os.environ.get("SABRE_SANITIZED"):
        argv = ["valgrind", "-q", "--error-exitcode=99", sabre, "compile", os.path.join(work, "const_output.onnx"),
                "-o", os.path.join(work, "vg.sabre"), "--plan-only"]
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
            bad = r.returncode != 0 or "Invalid" in r.stderr
            outcome = "crash" if bad else "ok"
            print(f"{'FAIL' if bad else 'ok  '} constant outputs under valgrind: exit {r.returncode}")
            if bad:
                print("\n".join("         " + l for l in r.stderr.splitlines()[:12]))
        except subprocess.TimeoutExpired:
            bad, outcome = True, "hang"
            print("FAIL constant outputs under valgrind: no answer within 600 s")
        tally[outcome] = tally.get(outcome, 0) + 1
        failures += bad
        cases.append(None)
    else:
        print("skip constant outputs under valgrind: valgrind not installed")
    print("tally: " + ", ".join(f"{k} {v}" for k, v in sorted(tally.items())))
    print(f"{len(cases) - failures}/{len(cases)} hostile-input cases pass")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
