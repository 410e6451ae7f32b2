#!/usr/bin/env python3
"""The Python API against `sabre bench`, on a GPU: a zoo model (default BERT-base, seq 128) compiled
through `sabre.compile`, run through `sabre.load(...).run` on PyTorch CUDA tensors, checked to read
its inputs in place and hand its outputs to PyTorch without copies, compared with PyTorch fp16 on the
same weights, and timed per call and back to back against `sabre bench` on the same artifact in the
same run (PyTorch's CUDA events around the Python call, so the Python overhead counts).

Usage (GPU host, repository root, the build's Python package on PYTHONPATH):
  PYTHONPATH=build/python python3 bench/python_api_bench.py --work /tmp/pyapi --sabre build/sabre \\
      [--model bert_base] [--batches 1,8,32] [--tune] [--out bench/results/python_api_<gpu>_<date>.md]
Exits 1 when an output misses the tolerance or a copy is seen; the timing is reported, not judged."""

import argparse
import datetime
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "models"))
TOLERANCE = 1e-2  # relative L2 against PyTorch fp16, as the zoo


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="bert_base", help="a zoo model (bench/models/zoo_models.py; default bert_base)")
    ap.add_argument("--work", default="/tmp/sabre_pyapi", help="export, artifact and kernel cache (default /tmp/sabre_pyapi)")
    ap.add_argument("--sabre", default=os.path.join(HERE, "..", "build", "sabre"), help="the sabre binary, for `sabre bench`")
    ap.add_argument("--batches", default="1,8,32", help="batches to check and time (default 1,8,32)")
    ap.add_argument("--tune", action="store_true", help="compile with tuning (default: the analytic model)")
    ap.add_argument("--iters", type=int, default=300, help="timed calls for the per-call median (default 300)")
    ap.add_argument("--runs", type=int, default=100, help="calls between two events back to back (default 100)")
    ap.add_argument("--out", help="also write the table (markdown) here")
    args = ap.parse_args()

    try:
        import torch

        import sabre
    except ImportError as err:
        print(f"python_api_bench: {err} (needs PyTorch, and sabre's package: PYTHONPATH=build/python)", file=sys.stderr)
        return 2
    import zoo_models
    from measure import cuda_back_to_back_ms, cuda_median_ms, rel_l2, sabre_bench

    if not torch.cuda.is_available():
        print("python_api_bench: no CUDA GPU here", file=sys.stderr)
        return 2
    if args.model not in zoo_models.BY_NAME:
        print(f"python_api_bench: unknown model {args.model!r} (zoo models: {', '.join(zoo_models.DEFAULT)})",
              file=sys.stderr)
        return 2
    e = zoo_models.BY_NAME[args.model]
    batches = [int(b) for b in args.batches.split(",")]
    onnx_path = os.path.join(args.work, "onnx", e.name + ".onnx")
    pt_path = os.path.join(args.work, "onnx", e.name + ".pt")
    if not os.path.exists(onnx_path):
        subprocess.run([sys.executable, os.path.join(HERE, "zoo.py"), "all", "--models", e.name, "--export-only",
                        "--work", args.work, "--results", os.path.join(args.work, "export.jsonl")], check=True)
    art = os.path.join(args.work, f"{e.name}.{'tuned' if args.tune else 'untuned'}.sabre")
    if not os.path.exists(os.path.join(art, "manifest.json")):
        r = sabre.compile(onnx_path, art, dtype="f16", dynamic=e.dynamic, tune=args.tune, progress=True,
                          cache_dir=os.path.join(args.work, "kernels"), db=os.path.join(args.work, "tuning.db"))
        print(f"compiled {art}: {r.steps} steps in {r.seconds:.0f} s", flush=True)

    model = e.build()
    if os.path.exists(pt_path):
        model.load_state_dict(torch.load(pt_path, map_location="cpu"))
    m16 = zoo_models.wrap(e, model).to("cuda", torch.float16).eval()
    sess = sabre.load(art)
    failures, rows = [], []
    for b in batches:
        s = e.seq
        cpu = zoo_models.make_inputs(e, b, s, seed=b)
        feed = {k: (t.cuda().half() if t.is_floating_point() else t.cuda()) for k, t in cpu.items()}
        with torch.no_grad():
            want = [o.float().cpu().numpy() for o in m16(*[feed[k] for k in e.inputs])]
        outs = sess.run(feed)
        got = [torch.from_dlpack(o) for o in outs]
        in_place = sess.last_input_pointers == [feed[k].data_ptr() for k in sess.input_names]
        no_copy = all(g.data_ptr() == o.data_ptr for g, o in zip(got, outs))
        err = max(rel_l2(g.float().cpu().numpy(), w) for g, w in zip(got, want))
        if err > TOLERANCE:
            failures.append(f"batch {b}: rel. L2 {err:.3g} over {TOLERANCE}")
        if not in_place:
            failures.append(f"batch {b}: an input was copied (the run read another pointer)")
        if not no_copy:
            failures.append(f"batch {b}: an output reached PyTorch as a copy")

        def call():
            sess.run(feed)
        py_call = cuda_median_ms(call, iters=args.iters)
        py_b2b = cuda_back_to_back_ms(call, runs=args.runs)
        dims = {"batch": b, "seq": s} if e.kind == "tokens" else {"batch": b}
        bench = sabre_bench(args.sabre, art, dims, iters=args.iters, back_to_back=args.runs)
        if not bench["ok"]:
            failures.append(f"batch {b}: sabre bench failed: {bench['text'][-300:]}")
        rows.append((b, py_call, bench["call_ms"], py_b2b, bench["b2b_ms"], err, in_place and no_copy))
        print(f"batch {b}: python {py_call:.4f} ms/call, {py_b2b:.4f} back to back; sabre bench "
              f"{bench['call_ms']} / {bench['b2b_ms']}; rel. L2 {err:.2e}", flush=True)

    def pct(a, ref):
        return "-" if a is None or not ref else f"{100 * (a - ref) / ref:+.1f}%"
    gpu = torch.cuda.get_device_name()
    lines = [f"# The Python API against `sabre bench`: {e.name}, {gpu}, {datetime.date.today()}", "",
             f"Artifact {os.path.basename(art)} (fp16, {'tuned' if args.tune else 'untuned'}); PyTorch {torch.__version__}; "
             f"per call: median of {args.iters} CUDA-event times around one `Session.run` on torch CUDA tensors "
             f"(sabre bench: its gpu ms p50); back to back: {args.runs} calls between two CUDA events.", "",
             "| batch | python ms/call | sabre bench ms/call | diff | python back to back | sabre bench back to back "
             "| diff | rel. L2 vs PyTorch fp16 | zero-copy in and out |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for b, pc, bc, pb, bb, err, ok in rows:
        lines.append(f"| {b} | {pc:.4f} | {bc if bc is not None else '-'} | {pct(pc, bc)} | {pb:.4f} | "
                     f"{bb if bb is not None else '-'} | {pct(pb, bb)} | {err:.2e} | {'yes' if ok else 'NO'} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    for f in failures:
        print("FAIL " + f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
