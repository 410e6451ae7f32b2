#!/usr/bin/env python3
"""Runs a model with `sabre run --reference` and with onnxruntime (CPU) for every combination of the
given values of its dynamic dims, and compares every output within f32 tolerance.

usage: compare_ort.py [--perturb] SABRE MODEL DIM=V1,V2,... [DIM=...]
--perturb is the negative control: it moves one element of each sabre output by 1e-3 relative,
which every comparison must then catch: the script succeeds only if sabre ran and each output failed.
Tolerance: |sabre - ort| <= atol * max(1, max|ort|) + rtol * |ort| elementwise, per output.
Prints the max abs and max relative error of every run; exits 1 if any run fails or mismatches.
"""
import itertools
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import make_models  # noqa: E402  (sample_inputs: the same random inputs the generator's smoke check uses)

RTOL, ATOL = 1e-4, 1e-5


def main():
    args = sys.argv[1:]
    perturb = bool(args) and args[0] == "--perturb"
    if perturb:
        args = args[1:]
    sabre, model_path, dim_args = args[0], args[1], args[2:]
    dims = {}
    for a in dim_args:
        k, v = a.split("=")
        dims[k] = [int(x) for x in v.split(",")]
    model = onnx.load(model_path, load_external_data=False)
    declared = {d.dim_param for vi in model.graph.input for d in vi.type.tensor_type.shape.dim if d.dim_param}
    if declared != set(dims):
        sys.exit(f"compare_ort: model has dynamic dims {sorted(declared)} but values were given for {sorted(dims)}")
    sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    out_names = [o.name for o in sess.get_outputs()]
    failures, mismatches, compared = 0, 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        for combo in itertools.product(*dims.values()):
            values = dict(zip(dims, combo))
            label = " ".join(f"{k}={v}" for k, v in values.items())
            feeds = make_models.sample_inputs(model, values, seed=sum(combo))
            expect = dict(zip(out_names, sess.run(None, feeds)))
            cmd = [sabre, "run", "--reference", model_path, "-o", os.path.join(tmp, "out")]
            for name, arr in feeds.items():
                path = os.path.join(tmp, name + ".npy")
                np.save(path, arr)
                cmd += ["--input", f"{name}={path}"]
            # Poison: stale outputs from the previous combination must not pass for new ones.
            for name in out_names:
                path = os.path.join(tmp, "out", name + ".npy")
                if os.path.exists(path):
                    os.remove(path)
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                print(f"FAIL {label}: sabre exited {r.returncode}: {r.stderr.strip()[:2000]}")
                failures += 1
                continue
            for name in out_names:
                path = os.path.join(tmp, "out", name + ".npy")
                if not os.path.exists(path):
                    print(f"FAIL {label}: sabre wrote no {path}")
                    failures += 1
                    continue
                got, want = np.load(path), expect[name]
                if perturb and got.size:
                    i = int(np.argmax(np.abs(got)))
                    got.flat[i] += np.float32(1e-3) * max(abs(float(got.flat[i])), 1.0)
                if got.shape != want.shape or got.dtype != want.dtype:
                    print(f"FAIL {label} {name}: sabre gave {got.dtype}{list(got.shape)}, "
                          f"onnxruntime {want.dtype}{list(want.shape)}")
                    failures += 1
                    continue
                err = np.abs(got.astype(np.float64) - want.astype(np.float64))
                tol = ATOL * max(1.0, float(np.abs(want).max(initial=0))) + RTOL * np.abs(want)
                ok = bool(np.all(err <= tol)) and not np.isnan(got).any()
                rel = float((err / np.maximum(np.abs(want), 1e-6)).max(initial=0))
                print(f"{'ok  ' if ok else 'FAIL'} {label} {name}{list(want.shape)}: max abs err "
                      f"{float(err.max(initial=0)):.3g}, max rel err {rel:.3g}, max |ref| "
                      f"{float(np.abs(want).max(initial=0)):.3g}")
                compared += 1
                mismatches += 0 if ok else 1
    base = os.path.basename(model_path)
    if perturb:
        caught = failures == 0 and compared > 0 and mismatches == compared
        print(f"{base}: negative control: {mismatches}/{compared} perturbed outputs caught, {failures} other failures")
        return 0 if caught else 1
    failures += mismatches
    print(f"{base}: {'FAILED ' + str(failures) if failures else 'all ' + str(compared) + ' outputs match onnxruntime'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
