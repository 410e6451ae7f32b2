#!/usr/bin/env python3
"""`sabre run --reference` with sequence and string values, as a user gives them (issue 29): a sequence
input is a directory of 0.npy, 1.npy, ...; a sequence output comes back as DIR/<name>/ the same way;
string tensors are .npy files of numpy str. Random inputs are refused for them, and `sabre compile`
refuses such models naming the nodes. Expected values are computed here with numpy on random data.

usage: run_values.py SABRE_BINARY WORK_DIR
"""
import os
import re
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_check import crashed, error_problems, report, run  # noqa: E402

failures = []


def check(cond, what):
    print(f"{'ok  ' if cond else 'FAIL'} {what}")
    if not cond:
        failures.append(what)


def save_model(path, nodes, ins, outs, opset=18):
    g = helper.make_graph(nodes, "g", ins, outs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(m)
    onnx.save(m, path)


def sequence_checks(sabre, work, rng, opset):
    """The sequence model at `opset`: outputs against numpy, and the errors for bad sequence inputs."""
    failures = []
    seq_model = os.path.join(work, f"seq{opset}.onnx")
    f32_seq = helper.make_tensor_sequence_value_info("seq", TensorProto.FLOAT, None)
    save_model(seq_model,
               [helper.make_node("SequenceInsert", ["seq", "t", "pos"], ["ins"]),
                helper.make_node("SplitToSequence", ["x"], ["parts"], axis=1, keepdims=0),
                helper.make_node("SequenceLength", ["ins"], ["len"])],
               [f32_seq, helper.make_tensor_value_info("t", TensorProto.FLOAT, [3]),
                helper.make_tensor_value_info("pos", TensorProto.INT64, []),
                helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
               [helper.make_tensor_sequence_value_info("ins", TensorProto.FLOAT, None),
                helper.make_tensor_sequence_value_info("parts", TensorProto.FLOAT, None),
                helper.make_tensor_value_info("len", TensorProto.INT64, [])])
    seq_dir = os.path.join(work, f"seq_in{opset}")
    os.makedirs(seq_dir)
    elems = [rng.uniform(-1, 1, size=(n,)).astype(np.float32) for n in (2, 5)]
    for i, e in enumerate(elems):
        np.save(os.path.join(seq_dir, f"{i}.npy"), e)
    t = rng.uniform(-1, 1, size=(3,)).astype(np.float32)
    x = rng.uniform(-1, 1, size=(2, 4)).astype(np.float32)
    for name, arr in (("t", t), ("pos", np.array(1, np.int64)), ("x", x)):
        np.save(os.path.join(work, name + ".npy"), arr)
    out = os.path.join(work, "seq_out")
    r = run(sabre, ["run", "--reference", seq_model, "--input", f"seq={seq_dir}", "--input", f"t={work}/t.npy",
                    "--input", f"pos={work}/pos.npy", "--input", f"x={work}/x.npy", "-o", out])
    check(r.code == 0 and not crashed(r), f"sequence model runs (exit {r.code}: {r.err.strip()[-300:]})")
    if r.code == 0:
        check(re.search(r"ins\s+seq\(f32\) of 3\s+-> \S+/ins/", r.out) is not None, "sequence output listed as a directory")
        want_ins = [elems[0], t, elems[1]]
        got_ins = [np.load(os.path.join(out, "ins", f"{i}.npy")) for i in range(3)]
        check(not os.path.exists(os.path.join(out, "ins", "3.npy")), "ins holds exactly 3 elements")
        check(all(np.array_equal(g, w) for g, w in zip(got_ins, want_ins)), "SequenceInsert at 1 matches numpy")
        got_parts = [np.load(os.path.join(out, "parts", f"{i}.npy")) for i in range(4)]
        check(all(np.array_equal(got_parts[i], x[:, i]) for i in range(4)), "SplitToSequence keepdims=0 matches numpy")
        check(int(np.load(os.path.join(out, "len.npy"))) == 3, "SequenceLength is 3")
        check(os.path.exists(os.path.join(out, "inputs", "seq", "1.npy")), "the sequence input is saved as a directory")

    # A file where a sequence is expected, and a directory with a gap, are clear errors.
    r = run(sabre, ["run", "--reference", seq_model, "--input", f"seq={work}/t.npy", "--input", f"t={work}/t.npy",
                    "--input", f"pos={work}/pos.npy", "--input", f"x={work}/x.npy", "-o", out])
    p = error_problems(r, patterns=[r"sequence", r"directory"])
    report("a .npy file for a sequence input", r, p)
    failures.extend(p)
    os.rename(os.path.join(seq_dir, "1.npy"), os.path.join(seq_dir, "2.npy"))
    r = run(sabre, ["run", "--reference", seq_model, "--input", f"seq={seq_dir}", "--input", f"t={work}/t.npy",
                    "--input", f"pos={work}/pos.npy", "--input", f"x={work}/x.npy", "-o", out])
    p = error_problems(r, patterns=[r"0\.npy, 1\.npy"])
    report("a sequence directory with a gap", r, p)
    failures.extend(p)

    return failures


def main():
    sabre, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    rng = np.random.default_rng(29)

    # A sequence in and out: insert t at position 1 of seq, then split x into a sequence along axis 1.
    # Opset 12 goes through onnx's version converter first, which must keep the sequence types.
    for opset in (18, 12):
        failures.extend(sequence_checks(sabre, work, rng, opset))
    seq_model = os.path.join(work, "seq18.onnx")

    # An opset-11 SequenceInsert whose output is the graph output: onnx's version converter returns
    # it without the sequence types unless sabre restores them.
    old_model = os.path.join(work, "insert11.onnx")
    save_model(old_model, [helper.make_node("SequenceInsert", ["s", "t"], ["o"])],
               [helper.make_tensor_sequence_value_info("s", TensorProto.INT64, None),
                helper.make_tensor_value_info("t", TensorProto.INT64, [3])],
               [helper.make_tensor_sequence_value_info("o", TensorProto.INT64, None)], opset=11)
    s_dir = os.path.join(work, "s11")
    os.makedirs(s_dir)
    s0 = rng.integers(-9, 9, size=(4,))
    t11 = rng.integers(-9, 9, size=(3,))
    np.save(os.path.join(s_dir, "0.npy"), s0)
    np.save(os.path.join(work, "t11.npy"), t11)
    out11 = os.path.join(work, "out11")
    r = run(sabre, ["run", "--reference", old_model, "--input", f"s={s_dir}", "--input", f"t={work}/t11.npy", "-o", out11])
    check(r.code == 0, f"opset-11 sequence model runs (exit {r.code}: {r.err.strip()[-300:]})")
    if r.code == 0:
        got = [np.load(os.path.join(out11, "o", f"{i}.npy")) for i in range(2)]
        check(np.array_equal(got[0], s0) and np.array_equal(got[1], t11), "opset-11 SequenceInsert appends")

    # Strings: StringNormalizer, then Equal against a constant word.
    # Strings: StringNormalizer, then Equal against a constant word.
    str_model = os.path.join(work, "str.onnx")
    save_model(str_model,
               [helper.make_node("StringNormalizer", ["s"], ["norm"], case_change_action="UPPER",
                                 is_case_sensitive=0, stopwords=["monday"])],
               [helper.make_tensor_value_info("s", TensorProto.STRING, [6])],
               [helper.make_tensor_value_info("norm", TensorProto.STRING, [None])])
    pool = ["monday", "Monday", "tuesday", "caf\u00e9", "Wednesday", "x"]
    words = [pool[i] for i in rng.integers(0, len(pool), size=6)]
    words[0] = "tuesday"  # at least one survives
    np.save(os.path.join(work, "s.npy"), np.array(words))
    r = run(sabre, ["run", "--reference", str_model, "--input", f"s={work}/s.npy", "-o", os.path.join(work, "str_out")])
    check(r.code == 0 and not crashed(r), f"string model runs (exit {r.code}: {r.err.strip()[-300:]})")
    if r.code == 0:
        got = np.load(os.path.join(work, "str_out", "norm.npy"))
        want = [w.upper() if w.isascii() else "CAF\u00e9" for w in words if w.lower() != "monday"]
        check(got.dtype.kind == "U" and list(got) == want, f"StringNormalizer output {list(got)} == {want}")

    # No random strings or sequences: a bare run says to give the inputs.
    r = run(sabre, ["run", "--reference", str_model, "-o", os.path.join(work, "bare")])
    p = error_problems(r, patterns=[r"string tensor", r"--input"])
    report("bare run of a string model", r, p)
    failures.extend(p)

    # sabre compile refuses both kinds, naming the nodes.
    for model, node in ((seq_model, "SequenceInsert"), (str_model, "StringNormalizer")):
        r = run(sabre, ["compile", model, "-o", os.path.join(work, "art"), "--plan-only", "--no-tune"])
        p = error_problems(r, patterns=[r"CPU reference", rf"\({node}\)"])
        report(f"sabre compile refuses {os.path.basename(model)}", r, p)
        failures.extend(p)

    if failures:
        print(f"{len(failures)} failures")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
