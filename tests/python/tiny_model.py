"""A small ONNX model built with onnx.helper for the Python tests: y = relu(x @ W + b), x [batch, 16]."""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

K, N = 16, 16


def weights(seed: int = 7):
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((K, N)) * 0.25).astype(np.float32)
    b = (rng.standard_normal(N) * 0.1).astype(np.float32)
    return w, b


def build(seed: int = 7) -> onnx.ModelProto:
    w, b = weights(seed)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", K])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", N])
    nodes = [helper.make_node("MatMul", ["x", "W"], ["xw"], name="mm"),
             helper.make_node("Add", ["xw", "b"], ["xwb"], name="add"),
             helper.make_node("Relu", ["xwb"], ["y"], name="relu")]
    g = helper.make_graph(nodes, "tiny", [x], [y],
                          initializer=[numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def reference(x: np.ndarray, seed: int = 7) -> np.ndarray:
    w, b = weights(seed)
    return np.maximum(x.astype(np.float32) @ w + b, 0)
