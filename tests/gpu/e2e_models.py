#!/usr/bin/env python3
"""End-to-end GPU test (ctest gpu.e2e_models): small models compiled with `sabre compile --no-tune`,
run on the GPU at several shapes and compared, output by output, with sabre's CPU reference executor.

Models: scripts/make_models.py's bert_tiny, gpt2_block, resnet_block and cnn_stem, plus the graphs
below for the step kinds those do not reach. Every step kind the runtime knows (src/runtime/
step_kind.cpp, kStepKindNames) must appear in at least one compiled plan: the test prints which model
covers which kind and fails on a kind no model covers, so a new step kind needs a model here. A
kind the compiler never emits (no step("KIND", ...) in src/codegen) may instead be listed in
NOT_EMITTED with the reason; the entry fails once the compiler starts emitting it.

Shapes: dynamic dims at their minimum and maximum, at GEMM M-bucket boundaries (powers of two) and
between them, and not multiples of 8; the first shape again at the end (a CUDA graph replayed after
other shapes ran). Inputs are random and never zero: floats in [-1, -1/64] U [1/64, 1] rounded to
8 significant bits (exact in f16 and bf16, so the GPU and the reference see the same values);
indices over the whole table; masks with padded tails.

Checks, per output: tests/gpu/e2e_run.cpp writes it twice, into caller-owned buffers poisoned with
0xFF bytes (NaN) before the run and into runtime-owned ones; both must match the reference.
Integer and bool outputs must be equal. Float outputs: every element finite, and
    |gpu - ref| <= 2 * u * sqrt(K * D) * (|ref| + rms(ref))
with u the unit roundoff of the compute dtype (f16 2^-11, bf16 2^-8), K the longest reduction of
any step the output depends on (GEMM k, conv C*R*S/groups, attention head dim and keys, softmax and
layernorm rows, reduce and pool extents) and D the number of those steps that round (all but pure
data movement). It is the componentwise bound of a length-K dot product whose operands were
rounded to the dtype (2u * sum|a_i*b_i| <= 2u * sqrt(K) * ||a*b||_2, the output's size standing in
for ||a*b||_2), with the errors of D steps adding in quadrature. It is derived, not fitted: the
largest error/bound ratio is printed so the margin can be seen.

Exit status: 0 all passed, 1 a check failed, 77 no GPU (after the step-kind coverage was checked on
plans compiled with --plan-only, which needs no GPU: a coverage failure exits 1 there too).

usage: e2e_models.py --sabre PATH --runner PATH [--work DIR] [--jobs N] [--only NAME,...] [--plan-only]
"""
import argparse
import concurrent.futures as cf
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import make_models as mm  # noqa: E402

F32, I64 = TensorProto.FLOAT, TensorProto.INT64

# Step kinds the runtime executes but `sabre compile` never emits, with the reason. Checked: an
# entry whose kind the compiler emits fails the test.
NOT_EMITTED = {
    "where": "the compiler lowers Where into elementwise chains (EwOp where); the runtime's where step "
             "serves hand-written plans",
}

# Steps that only move or view data: they do not round, so they do not count in D.
MOVES = {"reshape", "copy", "permute", "slice", "strided_copy", "concat", "split", "gather", "fill", "iota"}

UNIT_ROUNDOFF = {"fp16": 2.0 ** -11, "bf16": 2.0 ** -8}


# ---- models the make_models.py ones leave out ------------------------------------------------
def misc_ops(seed=5):
    """Data movement, reductions and the ops around them, with no GEMM: softmax, LayerNorm, Reduce
    Sum/Mean/Max, Concat, Split, Transpose, Slice with a step and to INT64_MAX, Expand, Gather by an index input,
    Where, Range, Shape read as data, an input returned as an output, a no-op ReduceSum."""
    b = mm.Builder(seed)
    width, rows = 20, 50
    x, idx = "x", "idx"
    s = "/misc"
    sm = b.op("Softmax", [x], s, axis=-1)
    g, beta = b.ln_params("ln", width)
    ln = b.op("LayerNormalization", [x, g, beta], s, axis=-1, epsilon=1e-5)
    r_sum = b.op("ReduceSum", [x, b.const([1], s)], s, keepdims=1)             # [batch, 1, 20]
    r_mean = b.op("ReduceMean", [x], s, axes=[2], keepdims=0)                 # [batch, seq]
    r_max = b.op("ReduceMax", [ln], s, axes=[1], keepdims=0)                  # [batch, 20]
    cat = b.op("Concat", [x, sm], s, axis=2)                                  # [batch, seq, 40]
    p1, p2 = b.op("Split", [cat, b.const([15, 25], s)], s, outputs=2, axis=2)
    tr = b.op("Transpose", [p2], s, perm=[0, 2, 1])                           # [batch, 25, seq]
    sl = b.op("Slice", [ln, b.const([1], s), b.const([19], s), b.const([2], s), b.const([3], s)], s)  # every 3rd col
    # "To the end" as exporters write it: INT64_MAX on a symbolic axis (the plan carries the bound).
    tail = b.op("Slice", [x, b.const([1], s), b.const([2 ** 63 - 1], s), b.const([1], s)], s)  # [batch, seq-1, 20]
    ex = b.op("Expand", [r_sum, b.const([1, 3, 1], s)], s)                    # [batch, 3, 20]
    table = b.weight("table", (rows, width), 1.0)
    gat = b.op("Gather", [table, idx], s, axis=0)                             # [batch, 3, 20]
    sel = b.op("Where", [b.op("Greater", [p1, b.const(0.25, s)], s), p1,
                         b.op("Mul", [p1, b.const(-0.5, s)], s)], s)            # [batch, seq, 15]
    seq = b.dim(x, 1, s)
    pos = b.op("Range", [b.const(0, s), b.op("Squeeze", [seq, b.const([0], s)], s), b.const(1, s)], s)
    pos_f = b.op("Cast", [pos], s, to=F32)
    ramp = b.op("Add", [r_mean, b.op("Mul", [pos_f, b.const(0.125, s)], s)], s)  # [batch, seq]
    names = {"softmax": sm, "select": sel, "slice": sl, "slice_tail": tail, "ramp": ramp, "reduce_max": r_max, "transposed": tr,
             "expanded": ex, "gathered": gat}
    for out, v in names.items():
        b.nodes.append(helper.make_node("Identity", [v], [out], name=f"/out_{out}"))
    # Shape(x) read as data: the runtime writes it from the bound dims (a fill step).
    b.nodes.append(helper.make_node("Mul", [b.op("Shape", [x], s), b.const([2], s)], ["x_shape"], name="/shape_x2"))
    b.nodes.append(helper.make_node("Identity", [x], ["x_copy"], name="/copy"))
    # A ReduceSum with no axes and noop_with_empty_axes: the identity, as a copy step.
    b.nodes.append(helper.make_node("ReduceSum", [sel], ["select_copy"], name="/noop", noop_with_empty_axes=1))
    inputs = [helper.make_tensor_value_info(x, F32, ["batch", "seq", width]),
              helper.make_tensor_value_info(idx, I64, ["batch", 3])]
    outputs = [helper.make_tensor_value_info("softmax", F32, ["batch", "seq", width]),
               helper.make_tensor_value_info("select", F32, ["batch", "seq", 15]),
               helper.make_tensor_value_info("slice", F32, ["batch", "seq", 6]),
               helper.make_tensor_value_info("slice_tail", F32, ["batch", None, width]),
               helper.make_tensor_value_info("ramp", F32, ["batch", "seq"]),
               helper.make_tensor_value_info("reduce_max", F32, ["batch", width]),
               helper.make_tensor_value_info("transposed", F32, ["batch", 25, "seq"]),
               helper.make_tensor_value_info("expanded", F32, ["batch", 3, width]),
               helper.make_tensor_value_info("gathered", F32, ["batch", 3, width]),
               helper.make_tensor_value_info("x_shape", I64, [3]),
               helper.make_tensor_value_info("x_copy", F32, ["batch", "seq", width]),
               helper.make_tensor_value_info("select_copy", F32, ["batch", "seq", 15])]
    return mm.make_model(b, "e2e_misc", inputs, outputs, 17, 8)


def grouped_convs(seed=6):
    """MobileNet-style convs on the native kernels: a depthwise 3x3 with Relu, a grouped 3x3/2 (3
    groups of 4 in and 6 out: no regrouping fits a kernel's 16-byte access), an AveragePool without
    the padding in its count, GlobalAveragePool; odd spatial sizes."""
    b = mm.Builder(seed)
    c, k, groups = 12, 18, 3
    x = "images"
    w_dw = b.weight("dw.weight", (c, 1, 3, 3), 1.0 / 3.0)
    h = b.op("Conv", [x, w_dw, b.bias("dw.bias", c, 0.1)], "/dw", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
             strides=[1, 1], dilations=[1, 1], group=c)
    h = b.op("Relu", [h], "/dw")
    w_g = b.weight("g.weight", (k, c // groups, 3, 3), 1.0 / np.sqrt(9 * c // groups))
    h = b.op("Conv", [h, w_g, b.bias("g.bias", k, 0.1)], "/grouped", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
             strides=[2, 2], dilations=[1, 1], group=groups)
    pooled = b.op("AveragePool", [h], "/pool", kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1],
                  count_include_pad=0)
    b.nodes.append(helper.make_node("Identity", [pooled], ["features"], name="/out_features"))
    b.nodes.append(helper.make_node("GlobalAveragePool", [h], ["gap"], name="/gap"))
    inputs = [helper.make_tensor_value_info(x, F32, ["batch", c, 15, 13])]
    outputs = [helper.make_tensor_value_info("features", F32, ["batch", k, 8, 7]),
               helper.make_tensor_value_info("gap", F32, ["batch", k, 1, 1])]
    return mm.make_model(b, "e2e_grouped_convs", inputs, outputs, 17, 8)


def resnext_convs(seed=7):
    """ResNeXt's grouped 3x3 (32 groups of 2 channels) with bias and Relu, which sabre compile
    regroups into 2 groups of 32 for CUTLASS's grouped implicit GEMM, and a 1x1 back; odd sizes."""
    b = mm.Builder(seed)
    c, groups = 64, 32
    x = "images"
    w_g = b.weight("g.weight", (c, c // groups, 3, 3), 1.0 / np.sqrt(9 * c // groups))
    h = b.op("Conv", [x, w_g, b.bias("g.bias", c, 0.1)], "/grouped", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
             strides=[1, 1], dilations=[1, 1], group=groups)
    h = b.op("Relu", [h], "/grouped")
    w_p = b.weight("p.weight", (c, c, 1, 1), 1.0 / np.sqrt(c))
    h = b.op("Conv", [h, w_p, b.bias("p.bias", c, 0.1)], "/pointwise", kernel_shape=[1, 1], pads=[0, 0, 0, 0],
             strides=[1, 1], dilations=[1, 1], group=1)
    b.nodes.append(helper.make_node("Identity", [h], ["features"], name="/out_features"))
    inputs = [helper.make_tensor_value_info(x, F32, ["batch", c, 9, 11])]
    outputs = [helper.make_tensor_value_info("features", F32, ["batch", c, 9, 11])]
    return mm.make_model(b, "e2e_resnext_convs", inputs, outputs, 17, 8)


def regnet_convs(seed=8):
    """RegNet-style grouped convs that neither CUTLASS's grouped kernels nor regrouping take, on the
    native tiled kernel: a 1x1 in, a grouped 3x3/2 of 66 groups of 8 channels (no divisor of 66 widens
    them to 32 outputs, and 66 groups are past regroup_convs's dense limit) with Relu, a depthwise 3x3
    with dilation 2 and ReLU6 (528 channels: the vector body), a 1x1 out; odd sizes."""
    b = mm.Builder(seed)
    c, groups = 528, 66
    x = "images"
    h = b.op("Conv", [x, b.weight("in.weight", (c, 16, 1, 1), 0.25), b.bias("in.bias", c, 0.1)], "/in",
             kernel_shape=[1, 1], pads=[0, 0, 0, 0], strides=[1, 1], dilations=[1, 1], group=1)
    w_g = b.weight("g.weight", (c, c // groups, 3, 3), 1.0 / np.sqrt(9 * c // groups))
    h = b.op("Conv", [h, w_g, b.bias("g.bias", c, 0.1)], "/grouped", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
             strides=[2, 2], dilations=[1, 1], group=groups)
    h = b.op("Relu", [h], "/grouped")
    w_dw = b.weight("dw.weight", (c, 1, 3, 3), 1.0 / 3.0)
    h = b.op("Conv", [h, w_dw, b.bias("dw.bias", c, 0.1)], "/dw", kernel_shape=[3, 3], pads=[2, 2, 2, 2],
             strides=[1, 1], dilations=[2, 2], group=c)
    h = b.op("Clip", [h, b.const(0.0, "/dw"), b.const(6.0, "/dw")], "/dw")
    h = b.op("Conv", [h, b.weight("out.weight", (16, c, 1, 1), 1.0 / np.sqrt(c)), b.bias("out.bias", 16, 0.1)],
             "/out", kernel_shape=[1, 1], pads=[0, 0, 0, 0], strides=[1, 1], dilations=[1, 1], group=1)
    b.nodes.append(helper.make_node("Identity", [h], ["features"], name="/out_features"))
    inputs = [helper.make_tensor_value_info(x, F32, ["batch", 16, 13, 11])]
    outputs = [helper.make_tensor_value_info("features", F32, ["batch", 16, 7, 6])]
    return mm.make_model(b, "e2e_regnet_convs", inputs, outputs, 17, 8)


def index_ops(seed=9):
    """The index ops issue 29 gave native steps: GatherElements along the last axis by an index input,
    Trilu (lower, k = -1) of the last two axes, CumSum along seq (a constant axis)."""
    b = mm.Builder(seed)
    width = 12
    x, idx = "x", "idx"
    s = "/index"
    ge = b.op("GatherElements", [x, idx], s, axis=2)                          # [batch, seq, 12]
    tl = b.op("Trilu", [x, b.const(-1, s)], s, upper=0)                       # [batch, seq, 12]
    cs = b.op("CumSum", [x, b.const(1, s)], s)                                # [batch, seq, 12]
    for out, v in {"gathered": ge, "lower": tl, "cumsum": cs}.items():
        b.nodes.append(helper.make_node("Identity", [v], [out], name=f"/out_{out}"))
    inputs = [helper.make_tensor_value_info(x, F32, ["batch", "seq", width]),
              helper.make_tensor_value_info(idx, I64, ["batch", "seq", width])]
    outputs = [helper.make_tensor_value_info(o, F32, ["batch", "seq", width]) for o in ("gathered", "lower", "cumsum")]
    return mm.make_model(b, "e2e_index_ops", inputs, outputs, 17, 8)


MODELS = {
    "bert_tiny": mm.MODELS["bert_tiny"],
    "gpt2_block": mm.MODELS["gpt2_block"],
    "resnet_block": mm.MODELS["resnet_block"],
    "cnn_stem": mm.MODELS["cnn_stem"],
    "misc_ops": misc_ops,
    "grouped_convs": grouped_convs,
    "resnext_convs": resnext_convs,
    "regnet_convs": regnet_convs,
    "index_ops": index_ops,
}

# Integer inputs: ("index", rows) uniform over a table; ("mask",) ones with a padded tail per row.
INT_INPUTS = {
    ("bert_tiny", "input_ids"): ("index", 512),
    ("bert_tiny", "attention_mask"): ("mask",),
    ("gpt2_block", "input_ids"): ("index", 256),
    ("misc_ops", "idx"): ("index", 50),
    ("index_ops", "idx"): ("index", 12),
}


def cases(*dims):
    """The dims of each case, then the first again (graph replay after other shapes)."""
    return list(dims) + [dims[0]]


# name, model, dtype, --dynamic, extra compile flags, cases. M = batch*seq for the transformers:
# 1, 21 (between buckets 16 and 32), 32 (a boundary), 65 (just past 64), 512 (the maximum).
VARIANTS = [
    dict(name="bert_tiny", model="bert_tiny", dtype="fp16", dynamic="batch=1..8,seq=1..64", flags=[],
         cases=cases({"batch": 3, "seq": 7}, {"batch": 1, "seq": 1}, {"batch": 2, "seq": 16},
                     {"batch": 5, "seq": 13}, {"batch": 8, "seq": 64})),
    dict(name="bert_tiny_unfused", model="bert_tiny", dtype="fp16", dynamic="batch=1..8,seq=1..64",
         flags=["--no-fuse-attention"], cases=cases({"batch": 3, "seq": 11}, {"batch": 8, "seq": 64})),
    dict(name="gpt2_block", model="gpt2_block", dtype="fp16", dynamic="batch=1..4,seq=1..64", flags=[],
         cases=cases({"batch": 2, "seq": 17}, {"batch": 1, "seq": 1}, {"batch": 4, "seq": 64},
                     {"batch": 3, "seq": 9})),
    dict(name="resnet_block", model="resnet_block", dtype="fp16", dynamic="batch=1..8", flags=[],
         cases=cases({"batch": 3}, {"batch": 1}, {"batch": 8})),
    dict(name="cnn_stem", model="cnn_stem", dtype="fp16", dynamic="batch=1..8", flags=[],
         cases=cases({"batch": 5}, {"batch": 1}, {"batch": 8})),
    dict(name="cnn_stem_im2col", model="cnn_stem", dtype="fp16", dynamic="batch=1..8", flags=["--stem", "im2col"],
         cases=cases({"batch": 3}, {"batch": 8})),
    dict(name="misc_ops", model="misc_ops", dtype="fp16", dynamic="batch=1..6,seq=1..40", flags=[],
         cases=cases({"batch": 2, "seq": 9}, {"batch": 1, "seq": 1}, {"batch": 6, "seq": 40},
                     {"batch": 3, "seq": 17})),
    dict(name="misc_ops_bf16", model="misc_ops", dtype="bf16", dynamic="batch=1..6,seq=1..40", flags=[],
         cases=cases({"batch": 3, "seq": 5}, {"batch": 6, "seq": 40})),
    dict(name="grouped_convs", model="grouped_convs", dtype="fp16", dynamic="batch=1..5", flags=[],
         cases=cases({"batch": 3}, {"batch": 1}, {"batch": 5})),
    dict(name="regnet_convs", model="regnet_convs", dtype="fp16", dynamic="batch=1..4", flags=[],
         cases=cases({"batch": 3}, {"batch": 1}, {"batch": 4})),
    dict(name="regnet_convs_bf16", model="regnet_convs", dtype="bf16", dynamic="batch=1..4", flags=[],
         cases=cases({"batch": 2}, {"batch": 4})),
    dict(name="index_ops", model="index_ops", dtype="fp16", dynamic="batch=1..4,seq=1..24", flags=[],
         cases=cases({"batch": 2, "seq": 9}, {"batch": 1, "seq": 1}, {"batch": 4, "seq": 24})),
    dict(name="resnext_convs_bf16", model="resnext_convs", dtype="bf16", dynamic="batch=1..4", flags=[],
         cases=cases({"batch": 3}, {"batch": 1}, {"batch": 4})),
]


# ---- the runtime's and the compiler's step kinds ----------------------------------------------
def _step_kinds_and_params():
    """[(kind, its params struct)] from src/runtime/step_params.h: kStepKindNames and the StepParams
    variant list, both in StepKind order."""
    path = os.path.join(ROOT, "src", "runtime", "step_params.h")
    src = open(path).read()
    names = re.search(r"kStepKindNames\s*=\s*\{(.*?)\};", src, re.S)
    variant = re.search(r"using StepParams\s*=\s*std::variant<(.*?)>;", src, re.S)
    kinds = re.findall(r'"([a-z0-9_]+)"', names.group(1)) if names else []
    structs = re.findall(r"\b([A-Za-z0-9]+Params)\b", variant.group(1)) if variant else []
    if len(kinds) < 10 or len(kinds) != len(structs):
        raise SystemExit(f"e2e_models: could not read the step kinds and their params structs from {path} "
                         "(kStepKindNames, StepParams): update _step_kinds_and_params() here to the new form")
    return list(zip(kinds, structs))


def runtime_step_kinds():
    return [k for k, _ in _step_kinds_and_params()]


def compiler_step_kinds():
    """Kinds whose params struct src/codegen builds (the compiler writes a step as its typed params)."""
    text = ""
    for d, _, files in os.walk(os.path.join(ROOT, "src", "codegen")):
        for f in sorted(files):
            if f.endswith(".cpp"):
                text += open(os.path.join(d, f)).read()
    return {k for k, struct in _step_kinds_and_params() if re.search(r"\b" + struct + r"\b", text)}


# ---- plans -------------------------------------------------------------------------------------
def eval_dim(d, dims):
    """A plan dim (int, or DimExpr text: sums of products of integers and symbols) at `dims`."""
    if isinstance(d, (int, float)):
        return int(d)
    total = 0
    for sign, term in re.findall(r"([+-]?)\s*([^+-]+)", d.replace(" ", "")):
        v = 1
        for f in term.split("*"):
            v *= int(f) if f.isdigit() else dims[f]
        total += -v if sign == "-" else v
    return total


def step_reduction(step, tensors, dims):
    """(K, rounds): the longest reduction a step does at these dims, and whether it rounds."""
    op, p = step["op"], step.get("params", {}) or {}
    D = lambda k: eval_dim(p[k], dims)  # noqa: E731
    shape = lambda t: [eval_dim(x, dims) for x in tensors[t]["shape"]]  # noqa: E731
    if op in MOVES:
        return 1, False
    if op == "gemm":
        return D("k"), True
    if op == "conv":
        return D("c") * D("r") * D("s") // max(1, int(p.get("groups", 1))), True
    if op == "stem_conv":
        return D("c") * D("r") * D("s"), True
    if op == "depthwise_conv":
        return D("r") * D("s"), True
    if op == "grouped_conv":
        return D("c") // int(p["groups"]) * D("r") * D("s"), True
    if op == "attention":
        return max(D("d") if "d" in p else 1, D("sk")), True
    if op in ("softmax", "layernorm", "embed_layernorm"):
        return D("cols"), True
    if op == "reduce":
        x = shape(step["inputs"][0])
        axes = p.get("axes") or list(range(len(x)))
        return max(1, math.prod(x[a] for a in axes)), True
    if op == "pool2d":
        return math.prod(p["kernel"]), True
    if op == "global_average_pool":
        x = shape(step["inputs"][0])
        return (x[1] * x[2] if p.get("layout") == "nhwc" else x[2] * x[3]), True
    return 1, True  # elementwise, where, cast, nchw_to_nhwc, im2col: one rounding


def output_bounds(plan, dims):
    """For each output tensor name: (K, D) over the steps it depends on."""
    tensors = plan["tensors"]
    producer = {}
    for i, st in enumerate(plan["steps"]):
        for t in st["outputs"]:
            producer[t] = i
    # A reshape's output aliases its input, but the step graph already links them.
    out = {}
    for t in plan["outputs"]:
        seen, stack, K, D = set(), [t], 1, 0
        while stack:
            s = producer.get(stack.pop())
            if s is None or s in seen:
                continue
            seen.add(s)
            st = plan["steps"][s]
            k, rounds = step_reduction(st, tensors, dims)
            K, D = max(K, k), D + (1 if rounds else 0)
            stack.extend(i for i in st["inputs"] if i >= 0)
        out[tensors[t]["name"]] = (K, max(D, 1))
    return out


def plan_kernels(plan):
    ks = set()
    for st in plan["steps"]:
        p = st.get("params", {}) or {}
        for key in ("dispatch", "dispatch_aligned"):
            for e in p.get(key, []) or []:
                ks.add(e["kernel"])
    return ks


# ---- inputs ------------------------------------------------------------------------------------
def exact_floats(rng, shape):
    """Uniform in [-1, -1/64] U [1/64, 1], rounded to 8 significant bits: exact in f16 and bf16."""
    u = rng.uniform(-1.0, 1.0, shape)
    u = np.sign(u + (u == 0)) * np.maximum(np.abs(u), 1.0 / 64)
    m, e = np.frexp(u)
    return np.ldexp(np.round(m * 256) / 256, e).astype(np.float32)


def make_inputs(model_name, model, dims, seed):
    rng = np.random.default_rng(seed)
    feeds = {}
    for vi in model.graph.input:
        tt = vi.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else dims[d.dim_param] for d in tt.shape.dim]
        kind = INT_INPUTS.get((model_name, vi.name))
        if tt.elem_type == F32:
            feeds[vi.name] = exact_floats(rng, shape)
        elif kind and kind[0] == "index":
            feeds[vi.name] = rng.integers(0, kind[1], shape, dtype=np.int64)
        elif kind and kind[0] == "mask":
            a = np.ones(shape, np.int64)
            for r in range(1, shape[0]):
                a[r, max(1, shape[1] - r):] = 0
            feeds[vi.name] = a
        else:
            raise SystemExit(f"e2e_models: no rule for input {vi.name} of {model_name}: add one to INT_INPUTS")
    return feeds


def file_stem(name):
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name) or "_"


# ---- checks ------------------------------------------------------------------------------------
def check_output(name, gpu, ref, dtype, K, D):
    """(ok, text) for one output."""
    if gpu.shape != ref.shape:
        return False, f"shape {list(gpu.shape)}, reference {list(ref.shape)}"
    if ref.dtype.kind in "iub":
        bad = int(np.count_nonzero(gpu.astype(np.int64) != ref.astype(np.int64)))
        return bad == 0, ("exact" if bad == 0 else f"{bad} of {ref.size} elements differ (first at "
                          f"{np.unravel_index(np.argmax(gpu != ref), ref.shape)})")
    g, r = gpu.astype(np.float64), ref.astype(np.float64)
    if not np.all(np.isfinite(r)):
        return False, f"the reference has {int(np.count_nonzero(~np.isfinite(r)))} non-finite elements (a test model bug)"
    nonfinite = int(np.count_nonzero(~np.isfinite(g)))
    if nonfinite:
        return False, f"{nonfinite} of {g.size} elements not finite (poison left, or NaN/Inf computed)"
    u = UNIT_ROUNDOFF[dtype]
    rms = float(np.sqrt(np.mean(r * r))) if r.size else 0.0
    tol = 2.0 * u * math.sqrt(K * D)
    bound = tol * (np.abs(r) + rms)
    err = np.abs(g - r)
    ratio = err / np.maximum(bound, np.finfo(np.float64).tiny)
    over = int(np.count_nonzero(err > bound))
    rel_l2 = float(np.linalg.norm(g - r) / max(np.linalg.norm(r), np.finfo(np.float64).tiny))
    worst = np.unravel_index(int(np.argmax(ratio)), r.shape) if r.size else ()
    text = (f"max err/bound {float(ratio.max()) if r.size else 0:.3f} (K={K}, D={D}, tol {tol:.2e}), "
            f"rel L2 {rel_l2:.2e}")
    if over:
        text += f"; {over} of {r.size} elements over the bound, worst at {tuple(int(i) for i in worst)}: " \
                f"gpu {g[worst]:.6g} ref {r[worst]:.6g}"
    return over == 0, text


# ---- driver ------------------------------------------------------------------------------------
def run(cmd, log, timeout=None):
    with open(log, "w") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        try:
            return subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            f.write(f"\n(stopped after {timeout} s)\n")
            return 124


def tail(path, n=8):
    try:
        return "".join(open(path, errors="replace").readlines()[-n:])
    except OSError:
        return ""


def compile_cmd(args, v, model_path, out, plan_only, jobs):
    cmd = [args.sabre, "compile", model_path, "-o", out, "--dtype", v["dtype"], "--dynamic", v["dynamic"],
           "--no-tune", "--cache-dir", os.path.join(args.work, "kernel_cache"), "-j", str(jobs)] + v["flags"]
    return cmd + (["--plan-only"] if plan_only else [])


def check_bench_profile(args, variants, compiled, logs):
    """sabre bench --profile on the first compiled variant with a GEMM step: its trace holds one event
    per plan step per profiled run (20), named by op and node, GEMMs with their kernel and flops, and its
    chart is well-formed SVG. Returns the failures."""
    import xml.etree.ElementTree as ET
    for v in variants:
        art = os.path.join(args.work, "artifacts", v["name"])
        if v["name"] not in compiled:
            continue
        plan = json.load(open(os.path.join(art, "plan.json")))
        if not any(st["op"] == "gemm" for st in plan["steps"]):
            continue
        out = os.path.join(args.work, "profile", v["name"])
        shutil.rmtree(out, ignore_errors=True)
        cmd = [args.sabre, "bench", art, "--profile", "--profile-out", out, "--warmup", "2", "--iters", "5",
               "--no-clocks", "--json"]
        for k, x in v["cases"][0].items():
            cmd += ["--dim", f"{k}={x}"]
        log = os.path.join(logs, v["name"] + ".bench_profile.log")
        with open(log, "w") as f:
            rc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=f, text=True, timeout=300)
        if rc.returncode != 0:
            return [f"{v['name']}: sabre bench --profile exited {rc.returncode}:\n{tail(log)}"]
        files = json.loads(rc.stdout)["profile_files"]
        trace = json.load(open(files["trace"]))
        steps = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] != "run"]
        bad = []
        if len(steps) != 20 * len(plan["steps"]):
            bad.append(f"{len(steps)} step events, expected 20 runs x {len(plan['steps'])} steps")
        gemms = [e for e in steps if e["cat"] == "gemm"]
        if not gemms or not all(e["args"].get("kernel") and e["args"].get("flops", 0) > 0 for e in gemms):
            bad.append("gemm events without their kernel or flops")
        if not all(e["name"].startswith(e["cat"]) for e in steps):
            bad.append("events not named by their op")
        try:
            ET.parse(files["chart"])
        except ET.ParseError as e:
            bad.append(f"the chart is not well-formed XML: {e}")
        print(f"{'ok  ' if not bad else 'FAIL'} {v['name']:18s} bench --profile: {len(steps)} trace events, "
              f"{files['trace']}, {files['chart']}")
        return [f"{v['name']}: bench --profile: {b}" for b in bad]
    return ["no compiled variant has a gemm step to profile"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sabre", required=True)
    ap.add_argument("--runner", required=True, help="tests/gpu/e2e_run.cpp's binary (sabre_e2e_run)")
    ap.add_argument("--work", default="e2e_work", help="models, plans, artifacts, cases, the kernel cache")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="compiler processes at a time, all models")
    ap.add_argument("--only", default="", help="comma-separated variant names (coverage is then not enforced)")
    ap.add_argument("--plan-only", action="store_true", help="check step-kind coverage on --plan-only plans and stop")
    args = ap.parse_args()
    args.work = os.path.abspath(args.work)
    t0 = time.time()
    variants = VARIANTS
    if args.only:
        want = args.only.split(",")
        unknown = [w for w in want if w not in [v["name"] for v in VARIANTS]]
        if unknown:
            raise SystemExit(f"e2e_models: unknown variant(s) {unknown}; choose from {[v['name'] for v in VARIANTS]}")
        variants = [v for v in VARIANTS if v["name"] in want]
    for sub in ("models", "plans", "artifacts", "cases", "logs"):
        os.makedirs(os.path.join(args.work, sub), exist_ok=True)
    logs = os.path.join(args.work, "logs")

    have_gpu = False
    if not args.plan_only:
        probe = subprocess.run([args.runner, "--probe"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if probe.returncode not in (0, 77):
            print(f"FAIL: {args.runner} --probe exited {probe.returncode}: {probe.stdout.strip()}")
            return 1
        have_gpu = probe.returncode == 0

    # Models.
    paths, models = {}, {}
    for name in sorted({v["model"] for v in variants}):
        models[name] = MODELS[name]()
        paths[name] = os.path.join(args.work, "models", name + ".onnx")
        onnx.save_model(models[name], paths[name])

    # Plans without kernels (no GPU, no nvcc): coverage, and the kernels each compile will build.
    def plan_only(v):
        out = os.path.join(args.work, "plans", v["name"])
        shutil.rmtree(out, ignore_errors=True)
        rc = run(compile_cmd(args, v, paths[v["model"]], out, True, 1), os.path.join(logs, v["name"] + ".plan.log"))
        return v["name"], rc, out

    plans, failures = {}, []
    with cf.ThreadPoolExecutor(max_workers=min(8, args.jobs)) as ex:
        for name, rc, out in ex.map(plan_only, variants):
            if rc != 0:
                failures.append(f"{name}: sabre compile --plan-only exited {rc}:\n{tail(os.path.join(logs, name + '.plan.log'))}")
                continue
            plans[name] = json.load(open(os.path.join(out, "plan.json")))
    known = runtime_step_kinds()
    emitted = compiler_step_kinds()
    covered = {}
    for name, plan in plans.items():
        for st in plan["steps"]:
            covered.setdefault(st["op"], {}).setdefault(name, 0)
            covered[st["op"]][name] += 1
    print(f"step kinds: the runtime knows {len(known)}; the compiler emits {len(emitted & set(known))} of them")
    for k in known:
        by = covered.get(k)
        if by:
            print(f"  {k:20s} " + ", ".join(f"{n} ({c})" for n, c in sorted(by.items())))
        elif k in NOT_EMITTED and k not in emitted:
            print(f"  {k:20s} not emitted by sabre compile: {NOT_EMITTED[k]}")
        else:
            print(f"  {k:20s} NOT COVERED")
    for k in sorted(set(covered) - set(known)):
        failures.append(f"plans hold step kind '{k}', which the runtime does not know")
    for k, why in NOT_EMITTED.items():
        if k in emitted:
            failures.append(f"'{k}' is in NOT_EMITTED but src/codegen now emits it: remove it there and cover it with a model")
    if not args.only:
        for k in known:
            if k not in covered and not (k in NOT_EMITTED and k not in emitted):
                failures.append(f"step kind '{k}' (runtime known_ops) is in no model's plan: add a model that compiles to it")
    kernels = {n: plan_kernels(p) for n, p in plans.items()}
    all_kernels = set().union(*kernels.values()) if kernels else set()
    print(f"CUTLASS/cuBLASLt kernels in the plans: {len(all_kernels)} distinct")
    for k in sorted(all_kernels):
        print(f"  {k}  ({', '.join(n for n in kernels if k in kernels[n])})")
    if args.plan_only or not have_gpu or failures:
        for f in failures:
            print("FAIL: " + f)
        if failures:
            return 1
        print(f"coverage checked on plans ({time.time() - t0:.0f} s)" +
              ("" if args.plan_only else "; no CUDA device: the GPU runs are skipped"))
        return 0 if args.plan_only else 77

    # Compile for the GPU, sharing one kernel cache. The first wave covers every CUTLASS kernel at
    # once: greedily the variant that adds the most kernels not yet covered, each compile running
    # as many compilers as it has kernels (a kernel two of them share is built twice, side by side,
    # which costs less than a second round). The second wave finds its kernels in the cache.
    wave1, taken = [], set()
    while True:
        best = max((v for v in variants if v not in wave1), default=None,
                   key=lambda v: len(kernels.get(v["name"], set()) - taken))
        if best is None or not kernels.get(best["name"], set()) - taken:
            break
        wave1.append(best)
        taken |= kernels[best["name"]]
    wave2 = [v for v in variants if v not in wave1]

    def full_compile(v, jobs):
        out = os.path.join(args.work, "artifacts", v["name"])
        shutil.rmtree(out, ignore_errors=True)
        t = time.time()
        rc = run(compile_cmd(args, v, paths[v["model"]], out, False, jobs), os.path.join(logs, v["name"] + ".compile.log"))
        return v["name"], rc, time.time() - t

    compiled = set()
    for wave in (wave1, wave2):
        if not wave:
            continue
        jobs = {v["name"]: max(1, min(args.jobs, len(kernels.get(v["name"], ())) + 1)) for v in wave}
        print(f"compiling {', '.join(f'{n} (-j {j})' for n, j in jobs.items())}", flush=True)
        with cf.ThreadPoolExecutor(max_workers=len(wave)) as ex:
            futs = [ex.submit(full_compile, v, jobs[v["name"]]) for v in wave]
            for f in futs:
                name, rc, secs = f.result()
                log = os.path.join(logs, name + ".compile.log")
                if rc != 0:
                    failures.append(f"{name}: sabre compile exited {rc}:\n{tail(log)}")
                else:
                    compiled.add(name)
                    summary = [l.strip() for l in open(log) if l.strip().startswith(("kernels:", "steps:"))]
                    print(f"compiled {name} in {secs:.0f} s: " + "; ".join(summary), flush=True)

    # Cases: inputs, the reference on the CPU, the GPU runs.
    def prepare(v, i, dims):
        d = os.path.join(args.work, "cases", v["name"], f"case{i}")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(os.path.join(d, "inputs"))
        feeds = make_inputs(v["model"], models[v["model"]], dims, seed=1000 * i + len(v["name"]))
        cmd = [args.sabre, "run", "--reference", paths[v["model"]], "-o", os.path.join(d, "ref")]
        for n, a in feeds.items():
            f = os.path.join(d, "inputs", file_stem(n) + ".npy")
            np.save(f, a)
            cmd += ["--input", f"{n}={f}"]
        rc = run(cmd, os.path.join(d, "ref.log"))
        return d, rc

    ok_count, checked = 0, 0
    case_dirs = {}
    with cf.ThreadPoolExecutor(max_workers=min(8, args.jobs)) as ex:
        futs = {v["name"]: [ex.submit(prepare, v, i, dims) for i, dims in enumerate(v["cases"])]
                for v in variants if v["name"] in compiled}
        for name, fs in futs.items():
            case_dirs[name] = []
            for f in fs:
                d, rc = f.result()
                if rc != 0:
                    failures.append(f"{name}: the reference run for {d} exited {rc}:\n{tail(os.path.join(d, 'ref.log'))}")
                case_dirs[name].append(d)

    for v in variants:
        name = v["name"]
        if name not in compiled:
            continue
        art = os.path.join(args.work, "artifacts", name)
        log = os.path.join(logs, name + ".run.log")
        rc = run([args.runner, art] + case_dirs[name], log, timeout=300)
        if rc != 0:
            failures.append(f"{name}: {args.runner} exited {rc}:\n{tail(log)}")
            continue
        plan = json.load(open(os.path.join(art, "plan.json")))
        out_names = [o.name for o in models[v["model"]].graph.output]
        for d, dims in zip(case_dirs[name], v["cases"]):
            bounds = output_bounds(plan, dims)
            dims_text = ",".join(f"{k}={x}" for k, x in dims.items())
            for o in out_names:
                f = file_stem(o) + ".npy"
                ref = np.load(os.path.join(d, "ref", f))
                K, D = bounds.get(o, (1, 1))
                for which in ("gpu", "gpu_owned"):
                    checked += 1
                    ok, text = check_output(o, np.load(os.path.join(d, which, f)), ref, v["dtype"], K, D)
                    ok_count += ok
                    line = f"{'ok  ' if ok else 'FAIL'} {name:18s} {dims_text:16s} {o:18s} {which:9s} {text}"
                    print(line)
                    if not ok:
                        failures.append(line)

    failures += check_bench_profile(args, variants, compiled, logs)
    print(f"\n{ok_count} of {checked} output checks passed, {len(variants)} variants, "
          f"{len(all_kernels)} GEMM/conv kernels, {time.time() - t0:.0f} s")
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
