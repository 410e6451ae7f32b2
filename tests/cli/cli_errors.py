#!/usr/bin/env python3
"""End-to-end error tests of the sabre CLI: each bad input must give a non-zero exit code (not a
signal), no crash text (terminate, sanitizer, segfault), a first stderr line that is one clear
error line, and a message that names what is wrong.

usage: cli_errors.py SABRE WORK_DIR
"""
import os
import re
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import make_models  # noqa: E402
sys.path.insert(0, HERE)
import cli_check  # noqa: E402


def unsupported_model(path):
    """A Relu sabre takes, then a custom-domain op and RoiAlign it does not: both must be listed."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu0"),
        helper.make_node("FancyAttention", ["r"], ["f"], name="fancy0", domain="com.example"),
        helper.make_node("RoiAlign", ["feat", "rois", "idx"], ["sel"], name="roi0", output_height=1, output_width=1),
    ]
    g = helper.make_graph(nodes, "unsupported",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                           helper.make_tensor_value_info("feat", TensorProto.FLOAT, [1, 1, 4, 4]),
                           helper.make_tensor_value_info("rois", TensorProto.FLOAT, [1, 4]),
                           helper.make_tensor_value_info("idx", TensorProto.INT64, [1])],
                          [helper.make_tensor_value_info("f", TensorProto.FLOAT, [2, 3]),
                           helper.make_tensor_value_info("sel", TensorProto.FLOAT, [1, 1, 1, 1])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)],
                          ir_version=8)
    onnx.save(m, path)


def dangling_model(path):
    """Well-formed protobuf, broken graph: a node reads a value nothing defines."""
    g = helper.make_graph([helper.make_node("Relu", ["nowhere"], ["y"], name="relu_dangling")], "dangling",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)


def main():
    sabre, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    w = lambda name: os.path.join(work, name)  # noqa: E731

    bert = os.path.join(ROOT, "models", "bert_tiny.onnx")
    data = open(bert, "rb").read()
    open(w("truncated.onnx"), "wb").write(data[: len(data) // 3])
    open(w("corrupt.onnx"), "wb").write(np.random.default_rng(7).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    open(w("empty.onnx"), "wb").write(b"")
    make_models.save("bert_tiny_ext", make_models.bert_tiny(17), work)
    os.remove(w("bert_tiny_ext.data"))
    unsupported_model(w("unsupported.onnx"))
    dangling_model(w("dangling.onnx"))

    ids = np.random.default_rng(1).integers(1, 500, (2, 16), dtype=np.int64)
    np.save(w("ids.npy"), ids)
    np.save(w("mask.npy"), np.ones((2, 16), np.int64))
    np.save(w("mask_short.npy"), np.ones((2, 15), np.int64))
    np.save(w("ids_rank3.npy"), ids[:, :, None])
    np.save(w("ids_i32.npy"), ids.astype(np.int32))
    open(w("not_npy.npy"), "wb").write(b"this is not an npy file")
    good = ["--input", f"input_ids={w('ids.npy')}", "--input", f"attention_mask={w('mask.npy')}"]
    run = [sabre, "run", "--reference"]

    # (name, argv, regexes that must all match stderr, case-insensitively)
    cases = [
        ("missing file", ["inspect", w("no_such_model.onnx")], [r"no_such_model\.onnx"]),
        ("truncated model", ["inspect", w("truncated.onnx")], [r"truncated\.onnx", r"pars|invalid|corrupt|truncat"]),
        ("corrupt model", ["inspect", w("corrupt.onnx")], [r"corrupt\.onnx", r"pars|invalid|corrupt"]),
        ("empty model", ["inspect", w("empty.onnx")], [r"empty\.onnx"]),
        ("dangling value", ["inspect", w("dangling.onnx")], [r"nowhere"]),
        ("missing external data", ["inspect", w("bert_tiny_ext.onnx")], [r"bert_tiny_ext\.data"]),
        ("unsupported ops, all listed", ["inspect", w("unsupported.onnx")],
         [r"unsupported", r"fancy0", r"FancyAttention", r"com\.example", r"roi0", r"RoiAlign",
          r"opset\D*17"]),
        ("unsupported ops on run", run[1:] + [w("unsupported.onnx"), "-o", w("o")], [r"FancyAttention",
                                                                                     r"RoiAlign"]),
        ("wrong input name", run[1:] + [bert, "--input", f"input_idz={w('ids.npy')}", "--input",
                                        f"attention_mask={w('mask.npy')}", "-o", w("o")], [r"input_idz"]),
        ("missing input", run[1:] + [bert, "--input", f"input_ids={w('ids.npy')}", "-o", w("o")],
         [r"attention_mask"]),
        ("wrong shape (seq disagrees)", run[1:] + [bert, "--input", f"input_ids={w('ids.npy')}", "--input",
                                                   f"attention_mask={w('mask_short.npy')}", "-o", w("o")],
         [r"attention_mask", r"15|seq"]),
        ("wrong rank", run[1:] + [bert, "--input", f"input_ids={w('ids_rank3.npy')}", "--input",
                                  f"attention_mask={w('mask.npy')}", "-o", w("o")], [r"input_ids", r"shape|rank"]),
        ("wrong dtype", run[1:] + [bert, "--input", f"input_ids={w('ids_i32.npy')}", "--input",
                                   f"attention_mask={w('mask.npy')}", "-o", w("o")],
         [r"input_ids", r"i32|int32", r"i64|int64"]),
        ("input file not npy", run[1:] + [bert, "--input", f"input_ids={w('not_npy.npy')}", "--input",
                                          f"attention_mask={w('mask.npy')}", "-o", w("o")], [r"not_npy\.npy"]),
        ("bad --dim value", run[1:] + [bert, "--dim", "batch=abc", "--dim", "seq=4", "-o", w("o")],
         [r"batch", r"abc"]),
        ("unknown --dim name", run[1:] + [bert, "--dim", "batch=2", "--dim", "sequence=4", "-o", w("o")],
         [r"sequence"]),
        ("dim not given", run[1:] + [bert, "--dim", "batch=2", "-o", w("o")], [r"seq"]),
        ("bad --conv-kernels", ["compile", bert, "-o", w("c.sabre"), "--plan-only", "--conv-kernels", "sm70"],
         [r"--conv-kernels", r"sm70", r"auto, sm80 or sm90"]),
        ("contradicting attention flags", ["compile", bert, "-o", w("c.sabre"), "--plan-only", "--fuse-attention",
                                           "--no-fuse-attention"], [r"contradict"]),
        ("contradicting attention flags (tune)", ["tune", bert, "--no-tune", "--fuse-attention", "--no-fuse-attention"],
         [r"contradict"]),
        ("bad --stem", ["compile", bert, "-o", w("c.sabre"), "--plan-only", "--stem", "gemm"],
         [r"--stem", r"gemm", r"im2col", r"conv"]),
        ("contradicting stem flags", ["compile", bert, "-o", w("c.sabre"), "--plan-only", "--stem", "im2col",
                                      "--no-im2col-stem"], [r"contradict"]),
        ("bad --stem (tune)", ["tune", bert, "--no-tune", "--stem", "padded"], [r"--stem", r"padded"]),
        ("bad --iters (bench)", ["bench", w("none.sabre"), "--iters", "0"], [r"--iters", r"'0'", r"positive integer"]),
        ("bad --back-to-back (bench)", ["bench", w("none.sabre"), "--back-to-back", "0"],
         [r"--back-to-back", r"'0'", r"positive integer"]),
        ("bad --warmup (bench)", ["bench", w("none.sabre"), "--warmup", "x1"], [r"--warmup", r"x1", r"whole number"]),
        ("--steps without --profile (bench)", ["bench", w("none.sabre"), "--steps", "0"], [r"--steps", r"--profile"]),
        ("bad --steps (bench)", ["bench", w("none.sabre"), "--profile", "--steps", "all"], [r"--steps", r"all", r"whole number"]),
        ("no model argument", ["inspect"], [r"usage|model"]),
        ("unknown command", ["frobnicate"], [r"frobnicate"]),
    ]

    failures = 0
    for name, argv, patterns in cases:
        r = cli_check.run(sabre, argv, timeout=120)
        problems = cli_check.error_problems(r, patterns)
        cli_check.report(name, r, problems)
        failures += bool(problems)
    print(f"{len(cases) - failures}/{len(cases)} CLI error cases pass")

    # --help anywhere on a command line is a request for the usage: stdout, exit 0, no error line.
    helps = [["--help"], ["inspect", "--help"], ["run", "--help"], ["compile", "--help"], ["tune", "--help"],
             ["bench", "--help"], ["partition", "--help"], ["db", "--help"], ["kernels", "--help"],
             ["kernels", "list", "--help"], ["kernels", "emit", "--help"], ["kernels", "build", "--help"]]
    help_failures = 0
    for argv in helps:
        r = subprocess.run([sabre] + argv, capture_output=True, text=True, timeout=60)
        ok = r.returncode == 0 and re.search(r"usage", r.stdout, re.I) and not re.search(r"error|unexpected", r.stderr, re.I)
        print(f"{'ok  ' if ok else 'FAIL'} sabre {' '.join(argv)}: exit {r.returncode}")
        if not ok:
            print("       stderr: " + r.stderr.strip()[:300])
            help_failures += 1
    print(f"{len(helps) - help_failures}/{len(helps)} --help requests answered")
    return 1 if failures or help_failures else 0


if __name__ == "__main__":
    sys.exit(main())
