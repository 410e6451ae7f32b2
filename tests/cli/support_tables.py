#!/usr/bin/env python3
"""docs/SUPPORT.md is what scripts/gen_support_tables.py makes of `sabre ops --json` today, and that
document holds together: valid JSON, a known GPU route per op, step kinds the runtime knows, the ops
the lowering is known to run where the table puts them.

usage: support_tables.py SABRE_BINARY
"""
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}")


def main():
    sabre = sys.argv[1]
    res = subprocess.run([sabre, "ops", "--json"], capture_output=True, text=True, timeout=120)
    check(res.returncode == 0, f"sabre ops --json exits 0 (got {res.returncode}: {res.stderr.strip()})")
    doc = json.loads(res.stdout)
    check(doc.get("schema") == "sabre.ops/1", f"schema sabre.ops/1 (got {doc.get('schema')})")
    routes = {"cutlass", "cutlass+native", "native", "view", "compile time", "refused"}
    kinds = set(doc["step_kinds"])
    by_op = {o["op"]: o for o in doc["ops"]}
    check(len(by_op) == len(doc["ops"]) and len(by_op) > 50, f"one row per op, many ops ({len(doc['ops'])})")
    for o in doc["ops"]:
        check(o["gpu"] in routes, f"{o['op']}: GPU route '{o['gpu']}' is one of {sorted(routes)}")
        check(isinstance(o["reference"], bool), f"{o['op']}: reference is a bool")
        for k in o["step_kinds"]:
            check(k in kinds, f"{o['op']}: step kind '{k}' is one the runtime runs ({sorted(kinds)})")
        if o["gpu"] in ("cutlass", "cutlass+native"):
            check(bool(o["cutlass_patterns"]), f"{o['op']}: a CUTLASS route, so a pattern names it")
    expect = {"MatMul": "cutlass", "Gemm": "cutlass", "Conv": "cutlass+native", "Add": "native",
              "Softmax": "native", "LayerNormalization": "native", "Reshape": "view", "BatchNormalization": "compile time", "Trilu": "native",
              "TopK": "refused"}
    for op, route in expect.items():
        check(by_op.get(op, {}).get("gpu") == route, f"{op} runs as {route} (got {by_op.get(op, {}).get('gpu')})")
    check(by_op["MatMul"]["reference"], "the reference runs MatMul")
    check("cutlass.gemm_bias_gelu" in by_op["Gelu"]["cutlass_patterns"], "Gelu is fused into cutlass.gemm_bias_gelu")
    archs = {a["sm"]: a for a in doc["archs"]}
    check(archs[90]["gemm_sm90"] > 0 and archs[90]["conv_sm90"] > 0, "sm_90a has sm90 GEMM and conv kernels")
    check(archs[80]["gemm_sm80"] > 0 and archs[80]["gemm_sm90"] == 0, "sm_80 has sm80 kernels and no sm90 ones")
    check(archs[90]["arch"] == "sm_90a", f"90 is spelled sm_90a (got {archs[90]['arch']})")

    # The committed file is what the generator writes now.
    gen = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_support_tables.py"), "--sabre", sabre, "--check"],
                         capture_output=True, text=True, timeout=120)
    check(gen.returncode == 0, "docs/SUPPORT.md is up to date (regenerate: scripts/gen_support_tables.py --sabre "
          f"build/sabre)\n{gen.stdout[-3000:]}{gen.stderr}")
    text = (ROOT / "docs" / "SUPPORT.md").read_text()
    for op in ("MatMul", "LayerNormalization", "Softmax"):
        check(f"| {op} |" in text, f"docs/SUPPORT.md has a row for {op}")

    # A stale file is caught: --check against a doctored copy fails and shows the diff.
    stale = pathlib.Path(sys.argv[2] if len(sys.argv) > 2 else "/tmp") / "SUPPORT.stale.md"
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.write_text(text.replace("| MatMul |", "| MatMul (edited) |"))
    gen = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_support_tables.py"), "--sabre", sabre, "--check",
                          "--out", str(stale)], capture_output=True, text=True, timeout=120)
    check(gen.returncode == 1 and "MatMul (edited)" in gen.stdout and "is stale" in gen.stderr,
          f"--check reports a stale file (rc {gen.returncode})")

    # Bad command lines get one error line and exit 2.
    res = subprocess.run([sabre, "ops", "extra"], capture_output=True, text=True, timeout=60)
    check(res.returncode == 2 and res.stderr.count("\n") == 1, f"sabre ops extra: usage error (rc {res.returncode})")
    res = subprocess.run([sabre, "bench", "x.sabre", "--profile-out", str(stale.parent)], capture_output=True, text=True,
                         timeout=60)
    check(res.returncode == 2 and "add --profile" in res.stderr, f"bench --profile-out without --profile (rc "
          f"{res.returncode}: {res.stderr.strip()})")
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
