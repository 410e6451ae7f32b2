"""sabre: compile ONNX models into artifacts for NVIDIA GPUs and run them from Python.

    import sabre
    sabre.compile("model.onnx", "model.sabre", dtype="f16", dynamic={"batch": (1, 32)}, progress=True)
    sess = sabre.load("model.sabre")
    (logits,) = sess.run({"input_ids": ids})   # NumPy arrays, or any __dlpack__ tensor (torch CUDA: zero-copy)
    torch.from_dlpack(logits)                    # or logits.numpy()

Errors are sabre.Error subclasses carrying sabre's message. Tests: tests/python/.
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Mapping, Sequence, Union

import numpy as np

from . import _sabre
from ._sabre import (  # noqa: F401  (the public error hierarchy)
    ArtifactError,
    CompileError,
    CudaError,
    Error,
    InternalError,
    InvalidArgumentError,
    ModelError,
    NoDeviceError,
    Tensor,
    UnsupportedError,
    WrongArchError,
)

__version__ = _sabre.__version__

__all__ = [
    "compile", "load", "inspect", "partition", "Session", "Tensor", "CompileResult", "InspectReport",
    "PartitionReport", "Error", "InvalidArgumentError", "ArtifactError", "NoDeviceError", "WrongArchError",
    "CudaError", "InternalError", "ModelError", "UnsupportedError", "CompileError",
]

Model = Union[str, "os.PathLike[str]", Any]  # a path, or an onnx.ModelProto


class _ModelPath:
    """A model argument as a file path; a ModelProto is written to a temporary file for the call."""

    def __init__(self, model: Model):
        self._tmp = None
        if isinstance(model, (str, os.PathLike)):
            self.path = os.fspath(model)
        elif hasattr(model, "SerializeToString"):
            self._tmp = tempfile.TemporaryDirectory(prefix="sabre_model_")
            self.path = os.path.join(self._tmp.name, "model.onnx")
            with open(self.path, "wb") as f:
                f.write(model.SerializeToString())
        else:
            raise InvalidArgumentError(
                f"model: expected a path to an ONNX file or an onnx.ModelProto, got {type(model).__name__}")

    def __enter__(self) -> str:
        return self.path

    def __exit__(self, *exc) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()


def _from_dict(cls, d: Mapping[str, Any]):
    return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})


@dataclass
class CompileResult:
    """What sabre.compile wrote (the numbers `sabre compile` prints)."""
    artifact: str
    steps_by_op: dict = field(default_factory=dict)
    gemm_kernels: int = 0
    conv_kernels: int = 0
    elementwise_kernels: int = 0
    kernels_compiled: int = 0
    kernels_cached: int = 0
    weights_bytes: int = 0
    artifact_bytes_without_weights: int = 0
    seconds: float = 0.0
    tune_seconds: float = 0.0
    phase_seconds: dict = field(default_factory=dict)  # import, canonicalize, ..., write: seconds, in order
    tuned_points: int = 0
    measured_candidates: int = 0
    notes: list = field(default_factory=list)
    plan_only: bool = False

    @property
    def steps(self) -> int:
        return sum(self.steps_by_op.values())


@dataclass
class InspectReport:
    """What a model is (`sabre inspect`): inputs and outputs as dicts {name, dtype, shape} (a dim is
    an int or a symbol's name), the op histogram, parameters, and GEMM/conv FLOPs per op kind at `dims`."""
    model: str
    graph: str
    inputs: list
    outputs: list
    symbols: list
    dims: dict
    nodes: int
    ops: dict
    parameters: int
    parameter_bytes: int
    constants: int
    flops: dict
    total_flops: dict


@dataclass
class PartitionReport:
    """What went where (`sabre partition`): regions, GEMMs and convs left out with the reason and
    what runs them, pattern matches refused, the FLOP share offloaded, the fusions of the lowering
    that did not fire ({"pass", "node", "reason"} each), the layout line, and `text`, the report as
    the command prints it."""
    model: str
    graph: str
    backend: str
    dtype: str
    regions: list
    left_out: list
    refusals: list
    flops: dict
    fusions_not_fired: list
    layout: str
    text: str

    def __str__(self) -> str:
        return self.text


def _dynamic_text(dynamic) -> str:
    if dynamic is None:
        return ""
    if isinstance(dynamic, str):
        return dynamic
    if isinstance(dynamic, Mapping):
        parts = []
        for name, r in dynamic.items():
            if isinstance(r, int):
                parts.append(f"{name}={r}")
            elif isinstance(r, (tuple, list)) and len(r) == 2:
                parts.append(f"{name}={int(r[0])}..{int(r[1])}")
            else:
                raise InvalidArgumentError(
                    f"dynamic[{name!r}] = {r!r}: give (min, max) or one number, e.g. {{'batch': (1, 32)}}")
        return ",".join(parts)
    raise InvalidArgumentError(
        f"dynamic: give a dict like {{'batch': (1, 32), 'seq': (1, 512)}} or 'batch=1..32,seq=1..512', not {type(dynamic).__name__}")


def compile(model: Model, out: Union[str, "os.PathLike[str]"], dtype: str = "f16", dynamic=None,
            tune: Union[bool, str] = False, plan_only: bool = False,
            progress: Union[bool, Callable[[str], None], None] = None, arch: str = "sm_90a", jobs: int = 0,
            cache_dir=None, db=None, tuned_for: str | None = None) -> CompileResult:
    """Compiles `model` into the artifact directory `out`, in this process (as `sabre compile`).

    dtype: "f16" or "bf16". dynamic: ranges of the symbolic dims, {"batch": (1, 32)} or
    "batch=1..32". tune: False picks GEMM kernels with the analytic model, True times candidates on
    this machine's GPU (an error without one), "auto" tunes where a GPU of the target arch is.
    plan_only: write plan, weights and manifest without compiling kernels. progress: True prints
    each stage to stderr, a callable gets each stage's line. Ctrl-C stops it between stages.
    """
    if isinstance(tune, bool):
        tune_mode = "always" if tune else "never"
    elif tune in (None, "auto"):
        tune_mode = "auto"
    else:
        raise InvalidArgumentError(f"tune={tune!r}: use True, False or 'auto'")
    if progress is True:
        def report(line: str) -> None:
            print(f"sabre compile: {line}", file=sys.stderr, flush=True)
    elif progress in (None, False):
        report = None
    elif callable(progress):
        report = progress
    else:
        raise InvalidArgumentError("progress: give True, False or a callable taking one line of text")
    if not isinstance(dtype, str):
        raise InvalidArgumentError(f"dtype {dtype!r}: use \"f16\" or \"bf16\"")
    with _ModelPath(model) as path:
        d = _sabre.compile(path, os.fspath(out), dtype, _dynamic_text(dynamic), tune_mode, bool(plan_only), report,
                           arch, int(jobs), os.fspath(cache_dir) if cache_dir else "", os.fspath(db) if db else "",
                           tuned_for or "")
    return _from_dict(CompileResult, d)


def inspect(model: Model, dims: Mapping[str, int] | None = None) -> InspectReport:
    """A model's inputs, outputs, ops, parameters and FLOPs (as `sabre inspect`); `dims` binds
    symbolic dims for the FLOP numbers (default: batch-like 1, others 8)."""
    with _ModelPath(model) as path:
        return _from_dict(InspectReport, _sabre.inspect(path, dict(dims or {})))


def partition(model: Model, dtype: str = "f16", dims: Mapping[str, int] | None = None) -> PartitionReport:
    """Canonicalizes `model` and cuts it into backend regions (as `sabre partition`); `dtype` is
    the compute dtype the layout line lowers for, `dims` the values of symbolic dims for the FLOP share."""
    with _ModelPath(model) as path:
        return _from_dict(PartitionReport, _sabre.partition(path, dtype, dict(dims or {})))


# ---- running -------------------------------------------------------------------------------

_KDL_CUDA = 2


def _numpy_dtype(name: str):
    if name == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            raise InvalidArgumentError(
                "a bfloat16 tensor on the host needs the package ml_dtypes (pip install ml_dtypes); "
                "or pass torch tensors") from None
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def _tensor_numpy(self: Tensor) -> np.ndarray:
    """A host copy (waits for the run that wrote the tensor)."""
    a = np.empty(self.shape, dtype=_numpy_dtype(self.dtype))
    self._copy_to_host(a.reshape(-1).view(np.uint8) if a.size else np.empty(0, np.uint8))
    return a


def _tensor_array(self: Tensor, dtype=None, copy=None) -> np.ndarray:
    a = _tensor_numpy(self)
    return a if dtype is None else a.astype(dtype, copy=False)


def _tensor_repr(self: Tensor) -> str:
    return f"sabre.Tensor(shape={self.shape}, dtype={self.dtype}, device=cuda:{self.device})"


Tensor.numpy = _tensor_numpy
Tensor.__array__ = _tensor_array
Tensor.__repr__ = _tensor_repr


def _is_torch_cuda(x) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor) and x.is_cuda


class Session:
    """A loaded artifact (sabre.load). `inputs` / `outputs`: dicts {name, dtype, shape}, in order."""

    def __init__(self, artifact: Union[str, "os.PathLike[str]"], device: int = 0):
        self._s = _sabre._Session(os.fspath(artifact), int(device))
        self.inputs = self._s.inputs
        self.outputs = self._s.outputs
        self.input_names = [i["name"] for i in self.inputs]
        self.output_names = [o["name"] for o in self.outputs]
        self.device = self._s.device

    @property
    def stream(self) -> int:
        """The cudaStream_t the session runs on (as an int)."""
        return self._s.stream

    @property
    def last_input_pointers(self) -> list:
        """The device pointers the last run read its inputs from (a tensor passed by DLPack: its own)."""
        return self._s.last_input_pointers

    def _ordered(self, values, what: str, names: list) -> list:
        if isinstance(values, Mapping):
            unknown = [k for k in values if k not in names]
            if unknown:
                raise InvalidArgumentError(f"unknown {what} '{unknown[0]}'; the model's {what}s are: {', '.join(names)}")
            missing = [n for n in names if n not in values]
            if missing:
                raise InvalidArgumentError(f"missing {what} '{missing[0]}'; the model's {what}s are: {', '.join(names)}")
            return [values[n] for n in names]
        if isinstance(values, (list, tuple)):
            if len(values) != len(names):
                raise InvalidArgumentError(
                    f"got {len(values)} {what}s but the model has {len(names)}: {', '.join(names)}")
            return list(values)
        if len(names) == 1:
            return [values]
        raise InvalidArgumentError(f"give the {what}s as a dict by name or a list in order: {', '.join(names)}")

    def _device_capsule(self, x, what: str):
        dev_type, dev_id = x.__dlpack_device__()
        if int(dev_type) != _KDL_CUDA:
            return None
        if int(dev_id) != self.device:
            raise InvalidArgumentError(f"{what} is on cuda:{int(dev_id)} but the session runs on cuda:{self.device}")
        # The producer makes the session's stream wait for the work that wrote x.
        return x.__dlpack__(stream=self._s.stream)

    def _host_array(self, x, spec: dict) -> np.ndarray:
        want = _numpy_dtype(spec["dtype"])
        try:
            a = np.asarray(x)
        except Exception as e:  # an object NumPy cannot take
            raise InvalidArgumentError(f"input '{spec['name']}': cannot make an array of {type(x).__name__}: {e}") from None
        if a.dtype != want:
            if not np.can_cast(a.dtype, want, casting="same_kind"):
                raise InvalidArgumentError(
                    f"input '{spec['name']}' is {a.dtype} but the model expects {spec['dtype']}")
            a = a.astype(want)
        return np.ascontiguousarray(a)

    def run(self, inputs, outputs=None, stream: Union[int, str, None] = "auto") -> list:
        """Runs the model; returns its outputs in order as sabre.Tensor (DLPack producers).

        inputs: a dict by name, a list in order, or one tensor for a one-input model. Each is a
        NumPy array (or anything np.asarray takes; cast to the input's dtype where that is safe)
        or an object with __dlpack__: a CUDA tensor is read in place, never copied.
        outputs: None, or per output (dict or list) a CUDA __dlpack__ tensor of the right shape and
        dtype to write into; then those objects are returned.
        stream: the caller's CUDA stream (DLPack numbering: 1 = legacy default) that waits for the
        run; "auto" takes torch's current stream when an input is a torch CUDA tensor; None: none
        (consumers still wait through the outputs' __dlpack__(stream=...)).
        """
        values = self._ordered(inputs, "input", self.input_names)
        items, torch_input = [], False
        for spec, x in zip(self.inputs, values):
            cap = None
            if hasattr(x, "__dlpack_device__") and hasattr(x, "__dlpack__"):
                cap = self._device_capsule(x, f"input '{spec['name']}'")
                torch_input = torch_input or _is_torch_cuda(x)
            items.append(cap if cap is not None else self._host_array(x, spec))
        out_objs = None
        out_caps = None
        if outputs is not None:
            out_objs = self._ordered(outputs, "output", self.output_names)
            out_caps = []
            for spec, o in zip(self.outputs, out_objs):
                if not (hasattr(o, "__dlpack_device__") and hasattr(o, "__dlpack__")):
                    raise InvalidArgumentError(f"output '{spec['name']}' must be a CUDA tensor with __dlpack__")
                cap = self._device_capsule(o, f"output '{spec['name']}'")
                if cap is None:
                    raise InvalidArgumentError(f"output '{spec['name']}' must be in CUDA memory")
                out_caps.append(cap)
        caller = None
        if stream == "auto":
            if torch_input:
                s = sys.modules["torch"].cuda.current_stream(self.device).cuda_stream
                caller = 1 if s == 0 else s
        elif stream is not None:
            caller = int(stream)
        result = self._s.run(items, out_caps, caller)
        return out_objs if out_objs is not None else result

    def __repr__(self) -> str:
        return f"sabre.Session(inputs={self.input_names}, outputs={self.output_names}, device=cuda:{self.device})"


def load(artifact: Union[str, "os.PathLike[str]"], device: int = 0) -> Session:
    """Loads a compiled artifact (model.sabre/) onto CUDA device `device`. Raises NoDeviceError
    without a GPU, WrongArchError on a GPU it was not compiled for, ArtifactError when it is
    missing or corrupt."""
    return Session(artifact, device)
