#!/usr/bin/env python3
"""`sabre partition` on conv models: the report says where each conv runs and counts the NCHW<->NHWC
transposes the GPU lowering puts at the edges of the conv regions (issue 7).

- resnet_block (scripts/make_models.py): every conv in a region, the values inside stored NHWC, one
  transpose in (the NCHW input) and none out (the head reads the pooled [N,C] values).
- two grouped convs (32 groups 3x3 + Relu, 4 groups 1x1; bench/models/export_grouped.py's shape): as
  sabre compile, the report regroups the first into 2 groups of 32 channels (a grouped CUTLASS region)
  and makes the second dense; 2 transposes.
- a grouped conv of 6 channels in 3 groups, which no regrouping fits to a kernel's access width: the
  CUTLASS table leaves it out and the report says the native grouped-conv kernel runs it.
- the conv routes section names each conv's route (cutlass dense or grouped, native grouped-tiled or
  depthwise) and why (issue 34).
- bert_tiny: no conv, nothing NHWC.
- --dot on the grouped convs: well-formed Graphviz text with both regions as boxes.

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


def narrow_groups(out):
    """x [batch, 6, 8, 8] -> Conv 3x3 in 3 groups of 2 channels -> y."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    w = (np.random.default_rng(3).standard_normal((6, 2, 3, 3)) * 0.3).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="narrow3x3", group=3, kernel_shape=[3, 3], pads=[1, 1, 1, 1])],
        "narrow_groups", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 6, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 6, 8, 8])], [numpy_helper.from_array(w, "w")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), out)


def main():
    sabre, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    resnet = make_models.save("resnet_block", make_models.resnet_block(), work)
    grouped = os.path.join(work, "grouped.onnx")
    export_grouped.main(grouped)
    narrow = os.path.join(work, "narrow_groups.onnx")
    narrow_groups(narrow)
    bert = os.path.join(ROOT, "models", "bert_tiny.onnx")
    cases = [
        ("resnet_block", resnet, [r"every GEMM and conv is in a region", r"^conv routes \(\d+\):\n  \S+: cutlass dense \(one group: pattern cutlass\.conv2d",
                                  r"^layout: NHWC inside conv regions: \d+ values stored NHWC, 1 NCHW<->NHWC conversion at the region edges"]),
        ("grouped convs", grouped, [r"nodes: grouped3x3, relu\n.*W: f32\[64,32,3,3\].*\n.*epilogue=bias_relu alignment=\d+ groups=2",
                                    r"nodes: grouped1x1\n.*W: f32\[32,64,1,1\]",
                                    r"every GEMM and conv is in a region",
                                    r"^  grouped3x3: cutlass grouped \(2 groups of 32 input and 32 output channels.*regroup_convs widened",
                                    r"^  grouped1x1: cutlass dense \(",
                                    r"^layout: NHWC inside conv regions: 2 values stored NHWC, 2 NCHW<->NHWC conversions at the region edges"]),
        ("narrow groups", narrow, [r"narrow3x3 .*group=3.*\n\s+-> runs on sabre's native NHWC grouped-conv kernel",
                                   r"^conv routes \(1\):\n  narrow3x3: native grouped-tiled \(not taken by CUTLASS: "]),
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
    failures += check_dot(sabre, grouped, os.path.join(work, "grouped.dot"))
    print(f"{len(cases) + 1 - failures}/{len(cases) + 1} partition report cases pass")
    return 1 if failures else 0


def check_dot(sabre, model, dot):
    """--dot writes Graphviz text: every vertex an edge names is declared, each region is a filled box
    naming its pattern, the graph input and output are boxes, and the report still goes to stdout."""
    if os.path.exists(dot):
        os.remove(dot)
    r = subprocess.run([sabre, "partition", model, "--dot", dot], capture_output=True, text=True, timeout=120)
    problems = [] if r.returncode == 0 else [f"exit {r.returncode}: {r.stderr.strip()[:300]}"]
    text = open(dot).read() if os.path.exists(dot) else ""
    declared = set(re.findall(r'^\s+("[^"]+"|n\d+) \[', text, re.M))
    edges = re.findall(r'^\s+("[^"]+"|n\d+) -> ("[^"]+"|n\d+)', text, re.M)
    regions = re.findall(r'fillcolor="#cfe2ff", label="(cutlass\.[a-z0-9_]+)\\ncutlass_region\d+"', text)
    if not text.startswith("digraph ") or not text.rstrip().endswith("}"):
        problems.append("not a digraph")
    if not edges or any(a not in declared or b not in declared for a, b in edges):
        problems.append(f"{len(edges)} edges, some to undeclared vertices")
    if sorted(regions) != ["cutlass.conv2d_fprop_bias", "cutlass.conv2d_fprop_bias_relu"]:
        problems.append(f"regions {regions}")
    if '"in:x"' not in declared or '"out:y"' not in declared:
        problems.append("graph input x or output y missing")
    if "cutlass regions" not in r.stdout:
        problems.append("the text report is not on stdout")
    print(f"{'ok  ' if not problems else 'FAIL'} --dot")
    for p in problems:
        print(f"       {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
