# Prints the expected values in tests/unit/reference_test.cpp ("from onnx.reference"), computed with
# onnx's numpy reference implementation. Run: .venv/bin/python tests/onnx/gen_reference_expected.py
import numpy as np, onnx
from onnx import helper as h, TensorProto as TP
from onnx.reference import ReferenceEvaluator

def seq(shape, phase=0.5):
    n = int(np.prod(shape))
    return np.sin(1.3 * np.arange(n, dtype=np.float64) + phase).astype(np.float32).reshape(shape)

def run(op, inputs, attrs, consts={}, opset=21, nout=1):
    names = [f"i{k}" if v is not None else "" for k, v in enumerate(inputs)]
    node = h.make_node(op, names, [f"o{k}" for k in range(nout)], **attrs)
    ins = [h.make_tensor_value_info(n, h.np_dtype_to_tensor_dtype(v.dtype), v.shape) for n, v in zip(names, inputs) if n]
    outs = [h.make_tensor_value_info(f"o{k}", TP.UNDEFINED, None) for k in range(nout)]
    g = h.make_graph([node], "g", ins, outs)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    feeds = {n: v for n, v in zip(names, inputs) if n}
    return ReferenceEvaluator(m).run(None, feeds)

def emit(name, arr):
    arr = np.asarray(arr)
    vals = ", ".join("%.9g" % v for v in arr.astype(np.float64).ravel())
    print(f"// {name}: shape {list(arr.shape)}")
    print(f"const std::vector<float> k{name} = {{{vals}}};")

x = seq((1, 4, 5, 6)); w = seq((4, 2, 3, 2), 1.1); b = seq((4,), 2.0)
emit("ConvGroupsDil", run("Conv", [x, w, b], dict(group=2, dilations=[2, 1], strides=[1, 2], pads=[1, 0, 0, 1]))[0])
x1 = seq((2, 3, 7)); w1 = seq((2, 3, 3), 0.2)
emit("Conv1d", run("Conv", [x1, w1], dict(strides=[2], pads=[2, 1], dilations=[2]))[0])
xr = seq((1, 1, 2, 3))
emit("ResizeLinearHalfPixel", run("Resize", [xr, None, np.array([1, 1, 2.5, 1.5], np.float32)], dict(mode="linear"))[0])
emit("ResizeNearestAsymFloor", run("Resize", [xr, None, np.array([1, 1, 2, 2.5], np.float32)], dict(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor"))[0])
emit("ResizeLinearAlignSizes", run("Resize", [xr, None, None, np.array([1, 1, 3, 5], np.int64)], dict(mode="linear", coordinate_transformation_mode="align_corners"))[0])
emit("ResizeNearestPreferCeilSizes", run("Resize", [xr, None, None, np.array([1, 1, 5, 4], np.int64)], dict(mode="nearest", coordinate_transformation_mode="half_pixel", nearest_mode="round_prefer_ceil"))[0])
emit("ResizeCubic", run("Resize", [xr, None, np.array([1, 1, 2, 2], np.float32)], dict(mode="cubic"))[0])
xs = seq((4, 6))
emit("SliceNegSteps", run("Slice", [xs, np.array([-1, 100], np.int64), np.array([-100, 0], np.int64), np.array([0, 1], np.int64), np.array([-2, -3], np.int64)], {})[0])
xg = seq((2, 5)) * 3
emit("GeluNone", run("Gelu", [xg], {}, opset=20)[0])
emit("GeluTanh", run("Gelu", [xg], dict(approximate="tanh"), opset=20)[0])
xl = seq((2, 3, 4)); sl = seq((3, 4), 0.9); bl = seq((4,), 1.7)
y, mean, inv = run("LayerNormalization", [xl, sl, bl], dict(axis=1, epsilon=1e-3), nout=3)
emit("LayerNormY", y); emit("LayerNormMean", mean); emit("LayerNormInv", inv)
xp = seq((1, 2, 5, 5))
emit("MaxPoolCeilDil", run("MaxPool", [xp], dict(kernel_shape=[2, 2], strides=[2, 2], dilations=[1, 2], pads=[1, 0, 0, 0], ceil_mode=1))[0])
emit("AvgPoolIncludePad", run("AveragePool", [xp], dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1, ceil_mode=1))[0])
emit("AvgPoolExcludePad", run("AveragePool", [xp], dict(kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 1, 1]))[0])
xpad = seq((2, 3))
emit("PadReflect", run("Pad", [xpad, np.array([1, 2, 1, 2], np.int64)], dict(mode="reflect"))[0])
emit("PadWrap", run("Pad", [xpad, np.array([0, 2, 1, 4], np.int64)], dict(mode="wrap"))[0])
emit("PadEdge", run("Pad", [xpad, np.array([2, 1, 0, 0], np.int64)], dict(mode="edge"))[0])
