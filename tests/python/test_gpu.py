"""The Python package on a GPU (ctest python.gpu, label gpu; exit 77 where there is none): compiles
a small model with its kernels, runs it from NumPy and through DLPack (PyTorch CUDA tensors when
torch is importable, else sabre's own output tensors), checks that device inputs are read in place
and outputs handed over without copies, and compares every output with the CPU reference.
Usage: test_gpu.py WORK_DIR"""

import os
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_model  # noqa: E402

WORK = sys.argv[1] if len(sys.argv) > 1 else "/tmp/sabre_python_gpu"
TOL = {"float16": 2e-2, "bfloat16": 8e-2}  # normalised max error per dtype (f32 accumulation)


def skip(why: str) -> None:
    print(f"skipped: {why}")
    sys.exit(77)


def have_gpu() -> bool:
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0
    except OSError:
        return False


failures = []


def check(ok: bool, what: str) -> None:
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def error_of(got: np.ndarray, want: np.ndarray) -> float:
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if got.shape != want.shape or not np.all(np.isfinite(got)):
        return float("inf")
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-6))


def main() -> None:
    if not have_gpu():
        skip("no GPU (nvidia-smi -L fails)")
    import sabre
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    art = os.path.join(WORK, "tiny.sabre")
    r = sabre.compile(tiny_model.build(), art, dtype="f16", dynamic={"batch": (1, 64)}, progress=True)
    check(r.gemm_kernels >= 1 and not r.plan_only, f"compiled: {r.steps} steps, {r.gemm_kernels} GEMM kernels")
    try:
        sess = sabre.load(art)
    except sabre.WrongArchError as e:
        skip(f"this GPU is not the one the default arch targets: {e}")
    spec = sess.inputs[0]
    np_dtype = np.float16 if spec["dtype"] == "float16" else np.float32
    tol = TOL["float16"]
    rng = np.random.default_rng(1)

    # NumPy in, numpy() out.
    x = rng.uniform(-1, 1, (5, tiny_model.K)).astype(np_dtype)
    (y,) = sess.run({"x": x})
    check(y.shape == (5, tiny_model.N), f"output shape {y.shape}")
    e = error_of(y.numpy(), tiny_model.reference(x))
    check(e < tol, f"numpy run: error {e:.3g}")
    check(np.asarray(y).shape == (5, tiny_model.N), "np.asarray(tensor)")

    # DLPack in without torch: a sabre output fed back as the input is read in place (K == N).
    (y1,) = sess.run([rng.uniform(-1, 1, (3, tiny_model.K)).astype(np_dtype)])
    (y2,) = sess.run([y1])
    check(sess.last_input_pointers == [y1.data_ptr], "a DLPack device input is read in place")
    check(y2.data_ptr != y1.data_ptr, "the output is its own buffer")
    e = error_of(y2.numpy(), tiny_model.reference(y1.numpy()))
    check(e < tol, f"chained run: error {e:.3g}")

    # Errors on a GPU: bad dtype, bad shape, then the session still runs.
    for bad, what in ((np.zeros((2, 3), np_dtype), "shape"), (np.ones((2, tiny_model.K), np.complex64), "dtype")):
        try:
            sess.run([bad])
            check(False, f"bad {what} accepted")
        except sabre.InvalidArgumentError as err:
            check("'x'" in str(err), f"bad {what}: {err}")
    (y,) = sess.run([x])
    check(error_of(y.numpy(), tiny_model.reference(x)) < tol, "runs after the errors")

    try:
        import torch
    except ImportError:
        print("torch is not importable: the PyTorch checks are left out")
        torch = None
    if torch is not None:
        tdt = torch.float16 if spec["dtype"] == "float16" else torch.float32
        xt = torch.empty(32, tiny_model.K, device="cuda", dtype=tdt).uniform_(-1, 1)
        (yt,) = sess.run({"x": xt})
        check(sess.last_input_pointers == [xt.data_ptr()], "torch input read in place (no copy)")
        ty = torch.from_dlpack(yt)
        check(ty.data_ptr() == yt.data_ptr, "output handed to torch without a copy")
        check(ty.data_ptr() != xt.data_ptr(), "output is its own buffer")
        e = error_of(ty.float().cpu().numpy(), tiny_model.reference(xt.float().cpu().numpy()))
        check(e < tol, f"torch run: error {e:.3g}")

        # Into caller-owned outputs, poisoned first: every element must be written.
        yo = torch.full((32, tiny_model.N), float("nan"), device="cuda", dtype=tdt)
        ret = sess.run({"x": xt}, outputs={"y": yo})
        check(ret[0] is yo, "outputs= returns the caller's tensors")
        e = error_of(yo.float().cpu().numpy(), tiny_model.reference(xt.float().cpu().numpy()))
        check(e < tol, f"caller-owned output, poisoned first: error {e:.3g}")

        # On a side stream: the run is ordered after the producer and before the consumer.
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            xs = torch.empty(64, tiny_model.K, device="cuda", dtype=tdt).uniform_(-1, 1)
            (ys,) = sess.run([xs])
            zs = torch.from_dlpack(ys) * 2
        torch.cuda.synchronize()
        e = error_of(zs.float().cpu().numpy() / 2, tiny_model.reference(xs.float().cpu().numpy()))
        check(e < tol, f"side stream: error {e:.3g}")

        # A strided input is refused with sabre's message.
        try:
            sess.run([torch.empty(tiny_model.K, 8, device="cuda", dtype=tdt).t()])
            check(False, "strided input accepted")
        except sabre.InvalidArgumentError as err:
            check("strided" in str(err), f"strided input: {err}")

    if failures:
        print(f"{len(failures)} failures")
        sys.exit(1)
    print("all ok")


if __name__ == "__main__":
    main()
