#!/usr/bin/env python3
"""Writes the committed fuzz seeds, tests/fuzz/seeds/<target>/: small valid inputs the fuzzers
start from (the persistent corpus and the regressions come on top, see run_fuzz.sh).

  importer   tiny ONNX models in the shapes real exports have (Linear, erf GELU, LayerNorm,
             attention head split, Conv+BN+Relu+pool+Gemm, embedding Gather), weights a few KB
  npy        one small array per dtype sabre reads, a 0-d, an empty and a format 2.0 file
  db_import  `sabre db export` lines: ok, failed and hung rows, two environments
  artifact   manifest.json, NUL, plan.json of `sabre compile --plan-only` of the tiny models

usage: make_seeds.py SABRE   (run from anywhere; the seeds are deterministic, sabre makes the plans)
"""
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
SEEDS = os.path.join(HERE, "seeds")
F32, I64 = TensorProto.FLOAT, TensorProto.INT64
rng = np.random.default_rng(11)


def w(name, *shape):
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)


def model(name, nodes, inputs, outputs, inits):
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8, producer_name="sabre-fuzz-seeds")
    onnx.checker.check_model(m, full_check=True)
    return m


def mlp():
    """Linear -> erf GELU -> Linear -> residual -> LayerNormalization, on [batch, seq, 16]."""
    n = helper.make_node
    nodes = [
        n("MatMul", ["x", "w1"], ["h0"]), n("Add", ["h0", "b1"], ["h1"]),
        n("Div", ["h1", "sqrt2"], ["g0"]), n("Erf", ["g0"], ["g1"]), n("Add", ["g1", "one"], ["g2"]),
        n("Mul", ["h1", "g2"], ["g3"]), n("Mul", ["g3", "half"], ["g4"]),
        n("MatMul", ["g4", "w2"], ["h2"]), n("Add", ["h2", "b2"], ["h3"]), n("Add", ["h3", "x"], ["r"]),
        n("LayerNormalization", ["r", "gamma", "beta"], ["y"], axis=-1, epsilon=1e-5),
    ]
    scal = lambda name, v: numpy_helper.from_array(np.array(v, np.float32), name)  # noqa: E731
    inits = [w("w1", 16, 32), w("b1", 32), w("w2", 32, 16), w("b2", 16), scal("sqrt2", 1.4142135),
             scal("one", 1.0), scal("half", 0.5), w("gamma", 16), w("beta", 16)]
    return model("mlp", nodes, [helper.make_tensor_value_info("x", F32, ["batch", "seq", 16])],
                 [helper.make_tensor_value_info("y", F32, ["batch", "seq", 16])], inits)


def attention():
    """Q/K/V projections, head split by Reshape/Transpose, scaled softmax(QK^T)V, merge heads."""
    n = helper.make_node
    nodes = []
    for p in "qkv":
        nodes += [n("MatMul", ["x", f"w{p}"], [f"{p}0"]), n("Reshape", [f"{p}0", "split"], [f"{p}1"]),
                  n("Transpose", [f"{p}1"], [f"{p}2"], perm=[0, 2, 1, 3] if p != "k" else [0, 2, 3, 1])]
    nodes += [n("MatMul", ["q2", "k2"], ["s0"]), n("Mul", ["s0", "scale"], ["s1"]), n("Softmax", ["s1"], ["p"], axis=-1),
              n("MatMul", ["p", "v2"], ["c0"]), n("Transpose", ["c0"], ["c1"], perm=[0, 2, 1, 3]),
              n("Reshape", ["c1", "merge"], ["y"])]
    inits = [w("wq", 16, 16), w("wk", 16, 16), w("wv", 16, 16),
             numpy_helper.from_array(np.array([0, 0, 2, 8], np.int64), "split"),
             numpy_helper.from_array(np.array([0, 0, 16], np.int64), "merge"),
             numpy_helper.from_array(np.array(0.35355339, np.float32), "scale")]
    return model("attention", nodes, [helper.make_tensor_value_info("x", F32, ["batch", "seq", 16])],
                 [helper.make_tensor_value_info("y", F32, ["batch", "seq", 16])], inits)


def convnet():
    """Conv+BN+Relu, MaxPool, Conv+Relu, GlobalAveragePool, Flatten, Gemm on [batch, 3, 16, 16]."""
    n = helper.make_node
    nodes = [n("Conv", ["x", "c1w"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
             n("BatchNormalization", ["c1", "bn_s", "bn_b", "bn_m", "bn_v"], ["bn"], epsilon=1e-5),
             n("Relu", ["bn"], ["r1"]), n("MaxPool", ["r1"], ["mp"], kernel_shape=[2, 2], strides=[2, 2]),
             n("Conv", ["mp", "c2w", "c2b"], ["c2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]), n("Relu", ["c2"], ["r2"]),
             n("GlobalAveragePool", ["r2"], ["gap"]), n("Flatten", ["gap"], ["f"], axis=1),
             n("Gemm", ["f", "fcw", "fcb"], ["y"], transB=1)]
    var = numpy_helper.from_array((rng.random(8) + 0.5).astype(np.float32), "bn_v")
    inits = [w("c1w", 8, 3, 3, 3), w("bn_s", 8), w("bn_b", 8), w("bn_m", 8), var, w("c2w", 8, 8, 3, 3), w("c2b", 8),
             w("fcw", 10, 8), w("fcb", 10)]
    return model("convnet", nodes, [helper.make_tensor_value_info("x", F32, ["batch", 3, 16, 16])],
                 [helper.make_tensor_value_info("y", F32, ["batch", 10])], inits)


def embedding():
    """Token and position embeddings (Gather), the torch Shape->Gather->Unsqueeze->Concat chain, Where mask."""
    n = helper.make_node
    nodes = [n("Gather", ["wte", "ids"], ["e0"], axis=0),
             n("Shape", ["ids"], ["shp"]), n("Gather", ["shp", "one_i"], ["seq"], axis=0),
             n("Range", ["zero_i", "seq", "one_i"], ["pos"]), n("Gather", ["wpe", "pos"], ["e1"], axis=0),
             n("Add", ["e0", "e1"], ["e"]),
             n("Cast", ["mask"], ["mb"], to=TensorProto.BOOL), n("Unsqueeze", ["mb", "ax"], ["mb2"]),
             n("Where", ["mb2", "e", "zero_f"], ["y"])]
    inits = [w("wte", 32, 8), w("wpe", 16, 8), numpy_helper.from_array(np.array(1, np.int64), "one_i"),
             numpy_helper.from_array(np.array(0, np.int64), "zero_i"),
             numpy_helper.from_array(np.array([2], np.int64), "ax"),
             numpy_helper.from_array(np.array(0.0, np.float32), "zero_f")]
    return model("embedding", nodes, [helper.make_tensor_value_info("ids", I64, ["batch", "seq"]),
                                      helper.make_tensor_value_info("mask", I64, ["batch", "seq"])],
                 [helper.make_tensor_value_info("y", F32, ["batch", "seq", 8])], inits)


def npy_bytes(a, version=None):
    f = io.BytesIO()
    if version:
        np.lib.format.write_array(f, a, version=version)
    else:
        np.save(f, a)
    return f.getvalue()


def main():
    sabre = sys.argv[1]
    shutil.rmtree(SEEDS, ignore_errors=True)
    d = {t: os.path.join(SEEDS, t) for t in ("importer", "npy", "db_import", "artifact")}
    for p in d.values():
        os.makedirs(p)

    models = {"mlp": mlp(), "attention": attention(), "convnet": convnet(), "embedding": embedding()}
    for name, m in models.items():
        onnx.save(m, os.path.join(d["importer"], name + ".onnx"))

    for dt in ("f4", "f2", "f8", "i8", "i4", "i1", "u1", "b1"):
        a = rng.standard_normal((2, 3)) * 10
        arr = a > 0 if dt == "b1" else a.astype(dt)
        open(os.path.join(d["npy"], f"{dt}_2x3.npy"), "wb").write(npy_bytes(arr))
    open(os.path.join(d["npy"], "scalar.npy"), "wb").write(npy_bytes(np.array(3.5, np.float32)))
    open(os.path.join(d["npy"], "empty_0x4.npy"), "wb").write(npy_bytes(np.zeros((0, 4), np.int64)))
    open(os.path.join(d["npy"], "v2_1x2x2.npy"), "wb").write(npy_bytes(np.ones((1, 2, 2), np.float16), (2, 0)))
    open(os.path.join(d["npy"], "fortran_2x2.npy"), "wb").write(npy_bytes(np.asfortranarray(np.eye(2, dtype=np.float32))))

    env1 = {"gpu": "NVIDIA H200", "sm": 90, "cuda": "13.0", "cutlass": "4.2.0", "template_version": "7"}
    env2 = dict(env1, gpu="NVIDIA A100-SXM4-80GB", sm=80)
    rows = [
        {"env": env1, "workload": "gemm f16 tn bias_gelu m=128 n=768 k=768 b=1",
         "kernel": "sm90_ws_coop_f16_f16_f32_128x256x64_c1x2_a8_bias_gelu", "status": "ok", "time_us": 12.5,
         "rel_error": 0.0004, "detail": ""},
        {"env": env1, "workload": "gemm f16 tn bias_gelu m=128 n=768 k=768 b=1",
         "kernel": "sm90_ws_f16_f16_f32_64x128x64_c1x1_a8_bias_gelu", "status": "compile_failed", "time_us": None,
         "rel_error": None, "detail": "compile failed; log: /tmp/x.log"},
        {"env": env1, "workload": "gemm f16 tn none m=1 n=2304 k=768 b=1", "kernel": "lt_algo3_tile7", "status": "hung",
         "time_us": None, "rel_error": None, "detail": "no result within 2000 ms"},
        {"env": env2, "workload": "conv f16 nhwc n=1 h=56 w=56 c=64 k=64 r=3 s=3", "kernel": "sm80_conv_128x128x32_s3",
         "status": "ok", "time_us": 33.0, "rel_error": 0.001, "detail": ""},
    ]
    lines = [json.dumps(r) for r in rows]
    open(os.path.join(d["db_import"], "export.jsonl"), "w").write("\n".join(lines) + "\n")
    open(os.path.join(d["db_import"], "one_row.jsonl"), "w").write(lines[0] + "\n")
    open(os.path.join(d["db_import"], "blank_and_failed.jsonl"), "w").write("\n  \n" + lines[2] + "\n")

    with tempfile.TemporaryDirectory() as tmp:
        for name in ("mlp", "attention", "convnet", "embedding"):
            src = os.path.join(d["importer"], name + ".onnx")
            out = os.path.join(tmp, name + ".sabre")
            r = subprocess.run([sabre, "compile", src, "-o", out, "--plan-only", "--no-tune"], capture_output=True,
                               text=True, env=dict(os.environ, XDG_CACHE_HOME=os.path.join(tmp, "xdg")))
            if r.returncode != 0:
                print(f"make_seeds: sabre compile --plan-only {name}: {r.stderr.strip()}")
                continue
            # The model's name only: no path of this machine in a committed file.
            m = json.load(open(os.path.join(out, "manifest.json")))
            if "source_model" in m:
                m["source_model"] = name + ".onnx"
            manifest = json.dumps(m, sort_keys=True, separators=(",", ":")).encode()
            plan = open(os.path.join(out, "plan.json"), "rb").read()
            open(os.path.join(d["artifact"], name + ".bin"), "wb").write(manifest + b"\0" + plan)
    total = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(SEEDS) for f in fs)
    print(f"make_seeds: {sum(len(fs) for _, _, fs in os.walk(SEEDS))} seeds, {total} bytes in {SEEDS}")


if __name__ == "__main__":
    main()
