"""The Python package's CPU parts (ctest python.api): sabre.compile with plan_only writes an artifact,
inspect and partition return the reports' contents, sabre's errors arrive as sabre.Error subclasses
with sabre's message, and loading without a GPU raises instead of crashing.
Usage: test_api.py WORK_DIR   (PYTHONPATH holds the built package: build/python)"""

import json
import os
import shutil
import subprocess
import sys
import unittest

import numpy as np
import onnx

import sabre

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_model  # noqa: E402

SRC = os.environ.get("SABRE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BERT = os.path.join(SRC, "models", "bert_tiny.onnx")
WORK = sys.argv[1] if len(sys.argv) > 1 else "/tmp/sabre_python_api"


def have_gpu() -> bool:
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0
    except OSError:
        return False


class Compile(unittest.TestCase):
    def test_plan_only_writes_the_artifact(self):
        out = os.path.join(WORK, "bert_tiny.sabre")
        lines = []
        r = sabre.compile(BERT, out, dtype="f16", dynamic={"batch": (1, 4), "seq": (1, 64)}, plan_only=True,
                          progress=lines.append)
        self.assertIsInstance(r, sabre.CompileResult)
        self.assertTrue(r.plan_only)
        self.assertEqual(r.artifact, out)
        self.assertGreater(r.steps, 0)
        self.assertGreater(r.weights_bytes, 0)
        self.assertEqual(r.kernels_compiled, 0)
        self.assertEqual(list(r.phase_seconds), ["import", "canonicalize", "partition", "lower", "write"])
        self.assertLessEqual(sum(r.phase_seconds.values()), r.seconds + 1e-3)
        self.assertTrue(lines, "the progress callback got no line")
        self.assertTrue(all(isinstance(s, str) and s for s in lines))
        for f in ("manifest.json", "plan.json", "weights.bin"):
            self.assertTrue(os.path.isfile(os.path.join(out, f)), f)
        with open(os.path.join(out, "manifest.json")) as f:
            manifest = json.load(f)
        self.assertIn("sm", json.dumps(manifest))
        with open(os.path.join(out, "plan.json")) as f:
            plan = json.load(f)
        self.assertEqual(sum(r.steps_by_op.values()), len(plan["steps"]))

    def test_a_model_proto_and_bf16(self):
        out = os.path.join(WORK, "tiny_bf16.sabre")
        r = sabre.compile(tiny_model.build(), out, dtype="bf16", dynamic="batch=1..8", plan_only=True)
        self.assertTrue(os.path.isfile(os.path.join(out, "plan.json")))
        self.assertEqual(r.gemm_kernels, 1)

    def test_progress_true_prints_to_stderr(self):
        out = os.path.join(WORK, "tiny_progress.sabre")
        code = ("import sabre, sys; sys.path.insert(0, sys.argv[3]); import tiny_model; "
                "sabre.compile(tiny_model.build(), sys.argv[1], plan_only=True, progress=True)")
        p = subprocess.run([sys.executable, "-c", code, out, "", os.path.dirname(os.path.abspath(__file__))],
                           capture_output=True, text=True, env=os.environ)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("sabre compile: ", p.stderr)

    def test_a_progress_callback_that_raises_stops_the_compile(self):
        def boom(line):
            raise KeyError("stop here")
        with self.assertRaises(KeyError):
            sabre.compile(tiny_model.build(), os.path.join(WORK, "tiny_stop.sabre"), plan_only=True, progress=boom)


class Reports(unittest.TestCase):
    def test_inspect(self):
        rep = sabre.inspect(tiny_model.build(), dims={"batch": 4})
        self.assertIsInstance(rep, sabre.InspectReport)
        self.assertEqual(rep.inputs, [{"name": "x", "dtype": "f32", "shape": ["batch", 16]}])
        self.assertEqual(rep.outputs, [{"name": "y", "dtype": "f32", "shape": ["batch", 16]}])
        self.assertEqual(rep.symbols, ["batch"])
        self.assertEqual(rep.dims, {"batch": 4})
        self.assertEqual(rep.ops, {"MatMul": 1, "Add": 1, "Relu": 1})
        self.assertEqual(rep.nodes, 3)
        self.assertEqual(rep.parameters, 16 * 16 + 16)
        self.assertEqual(rep.parameter_bytes, (16 * 16 + 16) * 4)
        self.assertEqual(rep.flops["MatMul"]["nodes"], 1)
        self.assertEqual(rep.flops["MatMul"]["flops"], 2 * 4 * 16 * 16)
        self.assertEqual(rep.total_flops["flops"], 2 * 4 * 16 * 16)
        self.assertIn("batch", rep.flops["MatMul"]["expression"])
        # Unbound symbols get the CLI's defaults (batch-like 1).
        self.assertEqual(sabre.inspect(tiny_model.build()).dims, {"batch": 1})

    def test_inspect_bert(self):
        rep = sabre.inspect(BERT)
        self.assertGreater(rep.parameters, 0)
        self.assertIn("MatMul", rep.ops)
        self.assertTrue(rep.inputs and all({"name", "dtype", "shape"} <= set(i) for i in rep.inputs))

    def test_partition(self):
        rep = sabre.partition(tiny_model.build(), dtype="f16")
        self.assertIsInstance(rep, sabre.PartitionReport)
        self.assertEqual(rep.backend, "cutlass")
        self.assertEqual(rep.dtype, "f16")
        self.assertEqual(len(rep.regions), 1)
        region = rep.regions[0]
        self.assertTrue(region["pattern"].startswith("cutlass."), region)
        self.assertEqual(set(region["nodes"]), {"mm", "add", "relu"})
        self.assertEqual(rep.left_out, [])
        self.assertEqual(rep.flops["share"], 1.0)
        self.assertTrue(rep.flops["counted"])
        self.assertIn("1 cutlass regions", rep.text)
        self.assertEqual(str(rep), rep.text)
        self.assertTrue(rep.layout)

    def test_partition_bert(self):
        rep = sabre.partition(BERT, dims={"batch": 2})
        self.assertGreater(len(rep.regions), 0)
        self.assertGreater(rep.flops["share"], 0.5)
        self.assertEqual(rep.flops["dims"].get("batch"), 2)
        for lo in rep.left_out:
            self.assertEqual(set(lo), {"node", "op", "operands", "reason", "runs_on"})
        for f in rep.fusions_not_fired:
            self.assertEqual(set(f), {"pass", "node", "reason"})

    def test_partition_fusions_not_fired(self):
        # LayerNorm(a + b) with a + b also a model output: the residual Add cannot be absorbed.
        from onnx import TensorProto, helper, numpy_helper
        io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", 8]) for n in ("a", "b", "y", "s")]
        nodes = [helper.make_node("Add", ["a", "b"], ["s"], name="add"),
                 helper.make_node("LayerNormalization", ["s", "gamma", "beta"], ["y"], name="ln", axis=-1)]
        rng = np.random.default_rng(3)
        inits = [numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), n) for n in ("gamma", "beta")]
        m = helper.make_model(helper.make_graph(nodes, "ln_residual", io[:2], io[2:], initializer=inits),
                              opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        rep = sabre.partition(m)
        ln = [f for f in rep.fusions_not_fired if f["pass"] == "fuse_layernorm_residual"]
        self.assertEqual(len(ln), 1, rep.fusions_not_fired)
        self.assertEqual(ln[0]["node"], "ln")
        self.assertIn("model output", ln[0]["reason"])
        self.assertEqual(sabre.partition(tiny_model.build()).fusions_not_fired, [])
        # Lowered with attention fusion on, as sabre compile and `sabre partition`: GPT-2's attention
        # (head dim 16) fuses, so only a LayerNorm residual is left (the list `sabre partition` prints).
        sys.path.insert(0, os.path.join(SRC, "scripts"))
        import make_models
        rep = sabre.partition(make_models.gpt2_block())
        self.assertEqual([f["pass"] for f in rep.fusions_not_fired], ["fuse_layernorm_residual"])


class Errors(unittest.TestCase):
    def test_missing_model(self):
        for call in (lambda: sabre.compile("/nonexistent/m.onnx", os.path.join(WORK, "x.sabre"), plan_only=True),
                     lambda: sabre.inspect("/nonexistent/m.onnx"),
                     lambda: sabre.partition("/nonexistent/m.onnx")):
            with self.assertRaises(sabre.ModelError) as cm:
                call()
            self.assertIsInstance(cm.exception, sabre.Error)
            self.assertEqual(str(cm.exception), "model file '/nonexistent/m.onnx' does not exist")

    def test_not_an_onnx_file(self):
        bad = os.path.join(WORK, "garbage.onnx")
        with open(bad, "wb") as f:
            f.write(b"\x08\x07 this is not protobuf \xff\xff\xff")
        with self.assertRaises(sabre.ModelError) as cm:
            sabre.inspect(bad)
        self.assertTrue(str(cm.exception))
        self.assertNotIn("std::", str(cm.exception))

    def test_bad_dtype(self):
        with self.assertRaises(sabre.InvalidArgumentError) as cm:
            sabre.compile(BERT, os.path.join(WORK, "x.sabre"), dtype="f8", plan_only=True)
        self.assertEqual(str(cm.exception), "dtype 'f8': use \"f16\" or \"bf16\"")
        self.assertIsInstance(cm.exception, ValueError)
        with self.assertRaises(sabre.InvalidArgumentError):
            sabre.partition(BERT, dtype="int4")

    def test_bad_options(self):
        with self.assertRaises(sabre.InvalidArgumentError) as cm:
            sabre.compile(BERT, os.path.join(WORK, "x.sabre"), dynamic="batch=4..1", plan_only=True)
        self.assertIn("batch", str(cm.exception))
        with self.assertRaises(sabre.InvalidArgumentError):
            sabre.compile(BERT, os.path.join(WORK, "x.sabre"), dynamic={"batch": "lots"}, plan_only=True)
        with self.assertRaises(sabre.InvalidArgumentError) as cm:
            sabre.compile(BERT, os.path.join(WORK, "x.sabre"), arch="sm_xx", plan_only=True)
        self.assertIn("sm_xx", str(cm.exception))
        with self.assertRaises(sabre.InvalidArgumentError) as cm:
            sabre.inspect(BERT, dims={"nosuchdim": 3})
        self.assertIn("model has no dim 'nosuchdim'", str(cm.exception))
        with self.assertRaises(sabre.InvalidArgumentError):
            sabre.compile(12345, os.path.join(WORK, "x.sabre"))

    def test_unsupported_model(self):
        x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4])
        y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [4])
        g = onnx.helper.make_graph([onnx.helper.make_node("FrobnicateOp", ["x"], ["y"], domain="example.com")],
                                   "g", [x], [y])
        m = onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid("", 17),
                                                     onnx.helper.make_opsetid("example.com", 1)])
        with self.assertRaises(sabre.Error) as cm:
            sabre.compile(m, os.path.join(WORK, "frob.sabre"), plan_only=True)
        self.assertIn("FrobnicateOp", str(cm.exception))
        self.assertIsInstance(cm.exception, (sabre.UnsupportedError, sabre.ModelError))

    def test_missing_artifact(self):
        with self.assertRaises(sabre.ArtifactError) as cm:
            sabre.load("/nonexistent/model.sabre")
        self.assertIn("/nonexistent/model.sabre", str(cm.exception))

    @unittest.skipIf(have_gpu(), "this machine has a GPU (tests/python/test_gpu.py runs there)")
    def test_load_without_gpu(self):
        # A model that needs no generated kernel, so the plan-only artifact is complete.
        out = os.path.join(WORK, "softmax_nogpu.sabre")
        sabre.compile(os.path.join(SRC, "tests", "install", "softmax.onnx"), out, plan_only=True)
        with self.assertRaises(sabre.NoDeviceError) as cm:
            sabre.load(out)
        self.assertTrue(str(cm.exception).startswith("no CUDA device"), str(cm.exception))
        self.assertNotIn("\n", str(cm.exception))
        # And again: nothing is left broken.
        with self.assertRaises(sabre.NoDeviceError):
            sabre.load(out, device=0)

    def test_hierarchy(self):
        for cls in (sabre.InvalidArgumentError, sabre.ArtifactError, sabre.NoDeviceError, sabre.WrongArchError,
                    sabre.CudaError, sabre.InternalError, sabre.ModelError, sabre.UnsupportedError, sabre.CompileError):
            self.assertTrue(issubclass(cls, sabre.Error), cls)
            self.assertEqual(cls.__module__, "sabre")
        self.assertTrue(sabre.__version__)


class Inputs(unittest.TestCase):
    """How Session.run orders and converts its inputs (the parts that need no GPU)."""

    def setUp(self):
        self.s = sabre.Session.__new__(sabre.Session)  # no artifact: only the Python-side checks run
        self.s.inputs = [{"name": "x", "dtype": "float16", "shape": ["batch", 16]},
                         {"name": "ids", "dtype": "int64", "shape": ["batch"]}]
        self.s.input_names = ["x", "ids"]

    def test_order(self):
        self.assertEqual(self.s._ordered({"ids": 2, "x": 1}, "input", self.s.input_names), [1, 2])
        self.assertEqual(self.s._ordered((1, 2), "input", self.s.input_names), [1, 2])
        with self.assertRaises(sabre.InvalidArgumentError) as cm:
            self.s._ordered({"x": 1}, "input", self.s.input_names)
        self.assertEqual(str(cm.exception), "missing input 'ids'; the model's inputs are: x, ids")
        with self.assertRaises(sabre.InvalidArgumentError) as cm:
            self.s._ordered({"x": 1, "ids": 2, "mask": 3}, "input", self.s.input_names)
        self.assertIn("unknown input 'mask'", str(cm.exception))
        with self.assertRaises(sabre.InvalidArgumentError) as cm:
            self.s._ordered([1], "input", self.s.input_names)
        self.assertIn("got 1 inputs but the model has 2", str(cm.exception))

    def test_host_arrays(self):
        a = self.s._host_array(np.linspace(-1, 1, 32).reshape(2, 16), self.s.inputs[0])
        self.assertEqual(a.dtype, np.float16)
        self.assertTrue(a.flags.c_contiguous)
        b = self.s._host_array([[3, 1]], self.s.inputs[1])
        self.assertEqual(b.dtype, np.int64)
        t = self.s._host_array(np.arange(32, dtype=np.float32).reshape(16, 2).T, self.s.inputs[0])
        self.assertTrue(t.flags.c_contiguous)
        with self.assertRaises(sabre.InvalidArgumentError) as cm:
            self.s._host_array(np.ones(3, np.complex64), self.s.inputs[0])
        self.assertEqual(str(cm.exception), "input 'x' is complex64 but the model expects float16")
        with self.assertRaises(sabre.InvalidArgumentError):
            self.s._host_array(np.ones(3, np.float32), self.s.inputs[1])


if __name__ == "__main__":
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    unittest.main(argv=[sys.argv[0], "-v"])
