#!/usr/bin/env python3
"""`sabre partition` on conv models: the report says where each conv runs and counts the NCHW<->NHWC
transposes the GPU lowering puts at the edges of the conv regions (issue 7).

- resnet_block (scripts/make_models.py): every conv in a region, the values inside stored NHWC, one
  transpose in (the NCHW input) and none out (the head reads the pooled [N,C] values).
- two grouped convs (32 groups 3x3 + Relu, 4 groups 1x1; bench/models/export_grouped.py's shape): the
  CUTLASS table leaves them out, the report says the native grouped-conv kernel runs them, 2 transposes.
- bert_tiny: no conv, nothing NHWC.

usage: partition_report.py SABRE WORK_DIR
"""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.join(ROOT, "bench", "models"))
import make_models  # noqa: E402
import export_grouped  # noqa: E402


def main():
    sabre, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    resnet = make_models.save("resnet_block", make_models.resnet_block(), work)
    grouped = os.path.join(work, "grouped.onnx")
    export_grouped.main(grouped)
    bert = os.path.join(ROOT, "models", "bert_tiny.onnx")
    cases = [
        ("resnet_block", resnet, [r"every GEMM and conv is in a region",
                                  r"^layout: NHWC inside conv regions: \d+ values stored NHWC, 1 NCHW<->NHWC conversion at the region edges"]),
        ("grouped convs", grouped, [r"grouped3x3 .*group=32.*\n\s+-> runs on sabre's native NHWC grouped-conv kernel",
                                    r"grouped1x1 .*group=4.*\n\s+-> runs on sabre's native NHWC grouped-conv kernel",
                                    r"^layout: NHWC inside conv regions: 3 values stored NHWC, 2 NCHW<->NHWC conversions at the region edges$"]),
        ("bert_tiny", bert, [r"^layout: nothing runs NHWC \(no conv regions\): no transposes$"]),
    ]
    failures = 0
    for name, model, patterns in cases:
        r = subprocess.run([sabre, "partition", model], capture_output=True, text=True, timeout=120)
        problems = [] if r.returncode == 0 else [f"exit {r.returncode}: {r.stderr.strip()[:300]}"]
        problems += [f"output lacks /{p}/" for p in patterns if not re.search(p, r.stdout, re.M)]
        print(f"{'ok  ' if not problems else 'FAIL'} {name}")
        for p in problems:
            print(f"       {p}")
        if problems:
            print("       output:\n" + "\n".join("         " + l for l in r.stdout.splitlines()[-12:]))
            failures += 1
    print(f"{len(cases) - failures}/{len(cases)} partition report cases pass")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
