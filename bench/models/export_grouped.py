#!/usr/bin/env python3
"""A small ONNX model of grouped convs (no PyTorch needed): x [batch, 64, 14, 14] -> Conv 3x3 in 32
groups (2 channels a group, ResNeXt's shape) -> Relu -> Conv 1x1 in 4 groups to 32 channels (16 in,
8 out a group) -> y. Random weights and biases, dynamic batch, opset 17.

  export_grouped.py OUT.onnx"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main(out):
    rng = np.random.default_rng(7)
    w1 = (rng.standard_normal((64, 2, 3, 3)) * 0.3).astype(np.float32)
    b1 = (rng.standard_normal(64) * 0.5).astype(np.float32)
    w2 = (rng.standard_normal((32, 16, 1, 1)) * 0.3).astype(np.float32)
    b2 = (rng.standard_normal(32) * 0.5).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="grouped3x3", group=32, kernel_shape=[3, 3],
                         pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu"),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["y"], name="grouped1x1", group=4, kernel_shape=[1, 1]),
    ]
    graph = helper.make_graph(
        nodes, "grouped_convs",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64, 14, 14])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 32, 14, 14])],
        [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2"))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, out)
    print(f"wrote {out}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
