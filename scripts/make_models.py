#!/usr/bin/env python3
"""Generates the small ONNX models that sabre's tests and the README's main job use.

The graphs are written node by node with onnx.helper, in the shapes torch.onnx.export gives them
(Shape->Gather->Unsqueeze->Concat->Reshape chains for head splits, erf-form GELU, extended
attention masks, Constant nodes for scalars), so the importer, shape folding and the idiom
recognisers see what real exports contain. Weights come from a fixed seed: same bytes every run.

  bert_tiny.onnx        2-layer BERT encoder, opset 17 (LayerNormalization), dynamic batch, seq
  bert_tiny_op13.onnx   the same at opset 13, LayerNorm decomposed into ReduceMean/Sub/Pow/Sqrt/Div
  bert_tiny_ext.onnx    bert_tiny with its weights in bert_tiny_ext.data (external data)
  bert_tiny_where.onnx  bert_tiny with transformers 5's additive mask: Where(Cast<bool>(mask), 0, finfo(f32).min)
  gpt2_block.onnx       GPT-2 style block: fused QKV + Split, Trilu causal mask, tanh GELU, tied LM head
  resnet_block.onnx     Conv+BN+Relu, Conv+BN, residual, MaxPool, GlobalAveragePool, Flatten, Gemm
  cnn_stem.onnx         ResNet's stem on RGB images (7x7/2 Conv+BN+Relu on 3 channels, MaxPool), a 3x3
                        Conv+BN+Relu, GlobalAveragePool, Flatten, Gemm: the im2col + GEMM stem path

usage: make_models.py [--out DIR] [--check] [NAME ...]   (default: all models into models/)
  --check  also run each model on onnxruntime (CPU) as a smoke test
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F32 = TensorProto.FLOAT
I64 = TensorProto.INT64


class Builder:
    """Collects nodes and initializers; names nodes the way torch.onnx.export does (/scope/Op_N)."""

    def __init__(self, seed):
        self.nodes, self.inits = [], []
        self.rng = np.random.default_rng(seed)
        self.count = {}

    def _name(self, scope, op):
        key = f"{scope}/{op}"
        n = self.count.get(key, 0)
        self.count[key] = n + 1
        return key if n == 0 else f"{key}_{n}"

    def op(self, op, inputs, scope="", outputs=1, domain="", **attrs):
        name = self._name(scope, op)
        outs = [f"{name}_output_{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, domain=domain, **attrs))
        return outs[0] if outputs == 1 else outs

    def const(self, value, scope="", dtype=None):
        """A Constant node, as torch writes scalars and small shape pieces."""
        arr = np.array(value, dtype=dtype or (np.int64 if isinstance(value, (int, list)) else np.float32))
        return self.op("Constant", [], scope, value=numpy_helper.from_array(arr))

    def init(self, name, arr):
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def weight(self, name, shape, scale=None):
        scale = scale if scale is not None else 1.0 / np.sqrt(shape[0])
        return self.init(name, (self.rng.standard_normal(shape) * scale).astype(np.float32))

    def bias(self, name, n, scale=0.02):
        return self.init(name, (self.rng.standard_normal(n) * scale).astype(np.float32))

    def ln_params(self, prefix, n):
        g = self.init(f"{prefix}.weight", (1.0 + 0.1 * self.rng.standard_normal(n)).astype(np.float32))
        b = self.init(f"{prefix}.bias", (0.1 * self.rng.standard_normal(n)).astype(np.float32))
        return g, b

    def linear(self, x, scope, name, n_in, n_out):
        """x @ W + b as torch exports nn.Linear on 3-D inputs: MatMul with a pre-transposed weight, Add."""
        w = self.weight(f"onnx::MatMul_{name}", (n_in, n_out))
        b = self.bias(f"{name}.bias", n_out)
        return self.op("Add", [b, self.op("MatMul", [x, w], scope)], scope)

    def dim(self, x, axis, scope):
        """Shape(x)[axis] as a 1-element tensor, the torch way: Shape -> Gather(scalar) -> Unsqueeze."""
        s = self.op("Shape", [x], scope)
        g = self.op("Gather", [s, self.const(axis, scope)], scope, axis=0)
        return self.op("Unsqueeze", [g, self.const([0], scope)], scope)


def layer_norm(b, x, prefix, scope, n, opset, eps=1e-12):
    g, beta = b.ln_params(prefix, n)
    if opset >= 17:
        return b.op("LayerNormalization", [x, g, beta], scope, axis=-1, epsilon=eps)
    # The decomposition torch emits before opset 17.
    mean = b.op("ReduceMean", [x], scope, axes=[-1], keepdims=1)
    d = b.op("Sub", [x, mean], scope)
    var = b.op("ReduceMean", [b.op("Pow", [d, b.const(2.0, scope)], scope)], scope, axes=[-1], keepdims=1)
    std = b.op("Sqrt", [b.op("Add", [var, b.const(eps, scope)], scope)], scope)
    return b.op("Add", [b.op("Mul", [b.op("Div", [d, std], scope), g], scope), beta], scope)


def split_heads(b, x, heads, hd, scope, perm):
    """[b, s, h*d] -> [b, h, s, d] (or [b, h, d, s] for keys) via the Shape/Concat/Reshape chain."""
    shape = b.op("Concat", [b.dim(x, 0, scope), b.dim(x, 1, scope), b.const([heads], scope), b.const([hd], scope)],
                 scope, axis=0)
    return b.op("Transpose", [b.op("Reshape", [x, shape], scope)], scope, perm=perm)


def merge_heads(b, x, hidden, scope):
    """[b, h, s, d] -> [b, s, h*d]."""
    t = b.op("Transpose", [x], scope, perm=[0, 2, 1, 3])
    shape = b.op("Concat", [b.dim(t, 0, scope), b.dim(t, 1, scope), b.const([hidden], scope)], scope, axis=0)
    return b.op("Reshape", [t, shape], scope)


def gelu_erf(b, x, scope):
    """GELU as torch exports nn.GELU() (approximate='none'): x * 0.5 * (1 + erf(x / sqrt(2)))."""
    e = b.op("Erf", [b.op("Div", [x, b.const(1.4142135381698608, scope)], scope)], scope)
    return b.op("Mul", [b.op("Mul", [x, b.op("Add", [e, b.const(1.0, scope)], scope)], scope), b.const(0.5, scope)],
                scope)


def gelu_tanh(b, x, scope):
    """GPT-2's gelu_new: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))."""
    cube = b.op("Pow", [x, b.const(3.0, scope)], scope)
    inner = b.op("Add", [x, b.op("Mul", [b.const(0.044715, scope), cube], scope)], scope)
    t = b.op("Tanh", [b.op("Mul", [b.const(0.7978845608028654, scope), inner], scope)], scope)
    half_x = b.op("Mul", [b.const(0.5, scope), x], scope)
    return b.op("Mul", [half_x, b.op("Add", [b.const(1.0, scope), t], scope)], scope)


def make_model(b, name, inputs, outputs, opset, ir_version):
    graph = helper.make_graph(b.nodes, name, inputs, outputs, initializer=b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="sabre-make_models", ir_version=ir_version)
    onnx.checker.check_model(model, full_check=True)
    return model


def bert_tiny(opset=17, seed=1, where_mask=False):
    """BERT encoder: vocab 512, hidden 64, 2 heads, FFN 128, 2 layers; outputs hidden states and pooled.
    where_mask: the additive mask as transformers 5 builds it, Where(Cast<bool>(mask), 0, finfo(f32).min)."""
    vocab, max_pos, types, hidden, heads, ffn, layers = 512, 64, 2, 64, 2, 128, 2
    hd = hidden // heads
    b = Builder(seed)
    ids, mask = "input_ids", "attention_mask"

    # Extended mask: (1 - mask[:, None, None, :]) * -10000, or with where_mask
    # Where(bool(mask[:, None, None, :]), 0, finfo(f32).min).
    s = "/bert"
    m = b.op("Unsqueeze", [b.op("Unsqueeze", [mask, b.const([1], s)], s), b.const([2], s)], s)
    if where_mask:
        ext_mask = b.op("Where", [b.op("Cast", [m], s, to=TensorProto.BOOL), b.const(0.0, s),
                                  b.const(float(np.finfo(np.float32).min), s)], s)
    else:
        m = b.op("Cast", [m], s, to=F32)
        ext_mask = b.op("Mul", [b.op("Sub", [b.const(1.0, s), m], s), b.const(-10000.0, s)], s)

    # Embeddings: word + position (buffer sliced to seq) + token type (zeros buffer, expanded).
    s = "/bert/embeddings"
    seq = b.dim(ids, 1, s)
    word = b.op("Gather", [b.weight("bert.embeddings.word_embeddings.weight", (vocab, hidden), 1.0), ids], s)
    pos_ids = b.op("Slice", [b.init("bert.embeddings.position_ids", np.arange(max_pos, dtype=np.int64)[None]),
                             b.const([0], s), seq, b.const([1], s), b.const([1], s)], s)
    pos = b.op("Gather", [b.weight("bert.embeddings.position_embeddings.weight", (max_pos, hidden), 1.0), pos_ids], s)
    tt = b.op("Slice", [b.init("bert.embeddings.token_type_ids", np.zeros((1, max_pos), np.int64)),
                        b.const([0], s), seq, b.const([1], s), b.const([1], s)], s)
    tt = b.op("Expand", [tt, b.op("Concat", [b.dim(ids, 0, s), seq], s, axis=0)], s)
    typ = b.op("Gather", [b.weight("bert.embeddings.token_type_embeddings.weight", (types, hidden), 1.0), tt], s)
    x = b.op("Add", [b.op("Add", [word, typ], s), pos], s)
    x = layer_norm(b, x, "bert.embeddings.LayerNorm", s + "/LayerNorm", hidden, opset)

    for i in range(layers):
        p, s = f"bert.encoder.layer.{i}", f"/bert/encoder/layer.{i}"
        sa = s + "/attention/self"
        q = split_heads(b, b.linear(x, sa + "/query", f"{p}.attention.self.query", hidden, hidden), heads, hd, sa,
                        [0, 2, 1, 3])
        k = split_heads(b, b.linear(x, sa + "/key", f"{p}.attention.self.key", hidden, hidden), heads, hd, sa,
                        [0, 2, 3, 1])
        v = split_heads(b, b.linear(x, sa + "/value", f"{p}.attention.self.value", hidden, hidden), heads, hd, sa,
                        [0, 2, 1, 3])
        scores = b.op("Div", [b.op("MatMul", [q, k], sa), b.const(float(np.sqrt(hd)), sa)], sa)
        probs = b.op("Softmax", [b.op("Add", [scores, ext_mask], sa)], sa, axis=-1)
        ctx = merge_heads(b, b.op("MatMul", [probs, v], sa), hidden, sa)
        so = s + "/attention/output"
        a = b.linear(ctx, so + "/dense", f"{p}.attention.output.dense", hidden, hidden)
        x = layer_norm(b, b.op("Add", [a, x], so), f"{p}.attention.output.LayerNorm", so + "/LayerNorm", hidden,
                       opset)
        h = b.linear(x, s + "/intermediate/dense", f"{p}.intermediate.dense", hidden, ffn)
        h = gelu_erf(b, h, s + "/intermediate/intermediate_act_fn")
        h = b.linear(h, s + "/output/dense", f"{p}.output.dense", ffn, hidden)
        x = layer_norm(b, b.op("Add", [h, x], s + "/output"), f"{p}.output.LayerNorm", s + "/output/LayerNorm",
                       hidden, opset)

    # Pooler: tanh(first token @ W + b).
    s = "/bert/pooler"
    first = b.op("Gather", [x, b.const(0, s)], s, axis=1)
    pooled = b.op("Tanh", [b.linear(first, s + "/dense", "bert.pooler.dense", hidden, hidden)], s)
    b.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="/Identity"))
    b.nodes.append(helper.make_node("Identity", [pooled], ["pooler_output"], name="/Identity_1"))

    inputs = [helper.make_tensor_value_info(ids, I64, ["batch", "seq"]),
              helper.make_tensor_value_info(mask, I64, ["batch", "seq"])]
    outputs = [helper.make_tensor_value_info("last_hidden_state", F32, ["batch", "seq", hidden]),
               helper.make_tensor_value_info("pooler_output", F32, ["batch", hidden])]
    return make_model(b, "bert_tiny", inputs, outputs, opset, 8 if opset >= 17 else 7)


def gpt2_block(seed=2):
    """GPT-2 style: token + position embeddings, one pre-LN block with causal attention, ln_f, tied LM head."""
    vocab, max_pos, hidden, heads, ffn = 256, 64, 64, 4, 256
    hd = hidden // heads
    b = Builder(seed)
    ids = "input_ids"

    s = "/transformer"
    seq = b.dim(ids, 1, s)
    seq_scalar = b.op("Squeeze", [seq, b.const([0], s)], s)
    positions = b.op("Range", [b.const(0, s), seq_scalar, b.const(1, s)], s)
    wte = b.weight("transformer.wte.weight", (vocab, hidden), 1.0)
    x = b.op("Add", [b.op("Gather", [wte, ids], s),
                     b.op("Gather", [b.weight("transformer.wpe.weight", (max_pos, hidden), 1.0), positions], s)], s)

    s, p = "/transformer/h.0", "transformer.h.0"
    h = layer_norm(b, x, f"{p}.ln_1", s + "/ln_1", hidden, 17, eps=1e-5)
    qkv = b.linear(h, s + "/attn/c_attn", f"{p}.attn.c_attn", hidden, 3 * hidden)
    q, k, v = b.op("Split", [qkv, b.const([hidden] * 3, s + "/attn")], s + "/attn", outputs=3, axis=2)
    sa = s + "/attn"
    q = split_heads(b, q, heads, hd, sa, [0, 2, 1, 3])
    k = split_heads(b, k, heads, hd, sa, [0, 2, 3, 1])
    v = split_heads(b, v, heads, hd, sa, [0, 2, 1, 3])
    scores = b.op("Div", [b.op("MatMul", [q, k], sa), b.const(float(np.sqrt(hd)), sa)], sa)
    # Causal mask: lower triangle of a [seq, seq] block of ones; masked scores get finfo(f32).min.
    square = b.op("Concat", [seq, seq], sa, axis=0)
    ones = b.op("ConstantOfShape", [square], sa, value=numpy_helper.from_array(np.array([True])))
    causal = b.op("Trilu", [ones, b.const(0, sa)], sa, upper=0)
    scores = b.op("Where", [causal, scores, b.const(float(np.finfo(np.float32).min), sa)], sa)
    probs = b.op("Softmax", [scores], sa, axis=-1)
    ctx = merge_heads(b, b.op("MatMul", [probs, v], sa), hidden, sa)
    x = b.op("Add", [b.linear(ctx, sa + "/c_proj", f"{p}.attn.c_proj", hidden, hidden), x], s)

    h = layer_norm(b, x, f"{p}.ln_2", s + "/ln_2", hidden, 17, eps=1e-5)
    h = b.linear(h, s + "/mlp/c_fc", f"{p}.mlp.c_fc", hidden, ffn)
    h = gelu_tanh(b, h, s + "/mlp/act")
    h = b.linear(h, s + "/mlp/c_proj", f"{p}.mlp.c_proj", ffn, hidden)
    x = b.op("Add", [x, h], s)
    x = layer_norm(b, x, "transformer.ln_f", "/transformer/ln_f", hidden, 17, eps=1e-5)
    # The LM head shares wte: logits = x @ wteᵀ.
    s = "/lm_head"
    wte_t = b.op("Transpose", [wte], s, perm=[1, 0])
    b.nodes.append(helper.make_node("MatMul", [x, wte_t], ["logits"], name=s + "/MatMul"))

    inputs = [helper.make_tensor_value_info(ids, I64, ["batch", "seq"])]
    outputs = [helper.make_tensor_value_info("logits", F32, ["batch", "seq", vocab])]
    return make_model(b, "gpt2_block", inputs, outputs, 17, 8)


def resnet_block(seed=3):
    """A ResNet basic block on [batch, 16, 32, 32] and a classifier head with 10 classes."""
    c, classes = 16, 10
    b = Builder(seed)

    def conv_bn(x, scope, prefix):
        w = b.weight(f"{prefix}.conv.weight", (c, c, 3, 3), 1.0 / np.sqrt(9 * c))
        y = b.op("Conv", [x, w], scope + "/conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1],
                 dilations=[1, 1], group=1)
        gamma, beta = b.ln_params(f"{prefix}.bn", c)
        mean = b.init(f"{prefix}.bn.running_mean", (0.1 * b.rng.standard_normal(c)).astype(np.float32))
        var = b.init(f"{prefix}.bn.running_var", b.rng.uniform(0.5, 1.5, c).astype(np.float32))
        return b.op("BatchNormalization", [y, gamma, beta, mean, var], scope + "/bn", epsilon=1e-5, momentum=0.9)

    x = "input"
    h = b.op("Relu", [conv_bn(x, "/layer1/0", "layer1.0.1")], "/layer1/0")
    h = conv_bn(h, "/layer1/0/2", "layer1.0.2")
    h = b.op("Relu", [b.op("Add", [h, x], "/layer1/0")], "/layer1/0")
    h = b.op("MaxPool", [h], "/pool", kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 0, 0], ceil_mode=0)
    h = b.op("Flatten", [b.op("GlobalAveragePool", [h], "/avgpool")], "", axis=1)
    w = b.weight("fc.weight", (classes, c))
    b.nodes.append(helper.make_node("Gemm", [h, w, b.bias("fc.bias", classes)], ["logits"], name="/fc/Gemm",
                                    alpha=1.0, beta=1.0, transB=1))

    inputs = [helper.make_tensor_value_info(x, F32, ["batch", c, 32, 32])]
    outputs = [helper.make_tensor_value_info("logits", F32, ["batch", classes])]
    return make_model(b, "resnet_block", inputs, outputs, 17, 8)


def cnn_stem(seed=4):
    """ResNet's stem at toy size on [batch, 3, 32, 32] images, one 3x3 conv, a 10-class head."""
    c, classes = 16, 10
    b = Builder(seed)

    def conv_bn_relu(x, scope, prefix, c_in, k, stride, pad):
        w = b.weight(f"{prefix}.weight", (c, c_in, k, k), 1.0 / np.sqrt(k * k * c_in))
        y = b.op("Conv", [x, w], scope, kernel_shape=[k, k], pads=[pad] * 4, strides=[stride] * 2, dilations=[1, 1],
                 group=1)
        gamma, beta = b.ln_params(f"{prefix}.bn", c)
        mean = b.init(f"{prefix}.bn.running_mean", (0.1 * b.rng.standard_normal(c)).astype(np.float32))
        var = b.init(f"{prefix}.bn.running_var", b.rng.uniform(0.5, 1.5, c).astype(np.float32))
        y = b.op("BatchNormalization", [y, gamma, beta, mean, var], scope + "/bn", epsilon=1e-5, momentum=0.9)
        return b.op("Relu", [y], scope)

    x = "images"
    h = conv_bn_relu(x, "/conv1", "conv1", 3, 7, 2, 3)
    h = b.op("MaxPool", [h], "/maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=0)
    h = conv_bn_relu(h, "/layer1", "layer1.conv", c, 3, 1, 1)
    h = b.op("Flatten", [b.op("GlobalAveragePool", [h], "/avgpool")], "", axis=1)
    w = b.weight("fc.weight", (classes, c))
    b.nodes.append(helper.make_node("Gemm", [h, w, b.bias("fc.bias", classes)], ["logits"], name="/fc/Gemm",
                                    alpha=1.0, beta=1.0, transB=1))
    inputs = [helper.make_tensor_value_info(x, F32, ["batch", 3, 32, 32])]
    outputs = [helper.make_tensor_value_info("logits", F32, ["batch", classes])]
    return make_model(b, "cnn_stem", inputs, outputs, 17, 8)


MODELS = {
    "bert_tiny": lambda: bert_tiny(17),
    "bert_tiny_op13": lambda: bert_tiny(13),
    "bert_tiny_ext": lambda: bert_tiny(17),
    "bert_tiny_where": lambda: bert_tiny(17, where_mask=True),
    "gpt2_block": gpt2_block,
    "resnet_block": resnet_block,
    "cnn_stem": cnn_stem,
}


def sample_inputs(model, dims, seed=0):
    """Random inputs for `model` with the dynamic dims taken from `dims` (e.g. {"batch": 2, "seq": 7})."""
    rng = np.random.default_rng(seed)
    feeds = {}
    inits = {i.name for i in model.graph.initializer}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        shape = [d.dim_value if d.HasField("dim_value") else dims[d.dim_param] for d in vi.type.tensor_type.shape.dim]
        if vi.name == "attention_mask":
            # Ones with a padded tail in every row but the first, so masking matters.
            a = np.ones(shape, np.int64)
            for r in range(1, shape[0]):
                a[r, max(1, shape[1] - r):] = 0
            feeds[vi.name] = a
        elif vi.type.tensor_type.elem_type == I64:
            feeds[vi.name] = rng.integers(0, 256, shape, dtype=np.int64)
        else:
            feeds[vi.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def save(name, model, out):
    path = os.path.join(out, name + ".onnx")
    if name.endswith("_ext"):
        data = name + ".data"
        if os.path.exists(os.path.join(out, data)):
            os.remove(os.path.join(out, data))  # onnx appends to an existing data file
        onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True, location=data,
                        size_threshold=0)
    else:
        onnx.save_model(model, path)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models")))
    ap.add_argument("--check", action="store_true", help="run each model on onnxruntime as a smoke test")
    ap.add_argument("names", nargs="*", help=f"models to write (default all): {', '.join(MODELS)}")
    args = ap.parse_args()
    names = args.names or list(MODELS)
    for n in names:
        if n not in MODELS:
            sys.exit(f"make_models.py: unknown model '{n}'; choose from {', '.join(MODELS)}")
    os.makedirs(args.out, exist_ok=True)
    for n in names:
        path = save(n, MODELS[n](), args.out)
        line = f"{path}: {os.path.getsize(path)} bytes"
        if args.check:
            import onnxruntime as ort
            sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            outs = sess.run(None, sample_inputs(onnx.load(path, load_external_data=False), {"batch": 2, "seq": 7}))
            line += ", onnxruntime ok: " + ", ".join(f"{o.dtype}{list(o.shape)}" for o in outs)
        print(line)


if __name__ == "__main__":
    main()
