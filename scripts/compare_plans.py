#!/usr/bin/env python3
"""Plans of every test and zoo model from one sabre binary, and their comparison with another's: the check
that a lowering refactor changes no plan.

  scripts/compare_plans.py write SABRE OUTDIR [--zoo DIR] [--build DIR] [--only NAME,...]
  scripts/compare_plans.py compare OUTDIR_A OUTDIR_B

`write` runs `SABRE compile --plan-only --no-tune` (analytic kernel picks, a fresh empty tuning DB, so the
binary's build id cannot change a pick) on each model and variant and keeps plan.json, manifest.json (the
plan's and the weights' checksums) and the compile report without its timing lines. `compare` says, per
model and variant, whether those files are byte-identical, and exits 1 where any differ or is missing.

Models: models/*.onnx, the generated test models (<build>/models/*.onnx, target sabre_models), the fuzz
seeds and the install test's model, each as fp16, bf16 and --no-fuse-attention; the zoo
(/work/zoo/onnx/*.onnx, or --zoo) as fp16 (--zoo-variants adds others) with its dynamic dims from
bench/models/zoo_models.py.
"""
import argparse
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
KEPT = ("plan.json", "manifest.json", "report.txt")
VARIANTS = {"fp16": [], "bf16": ["--dtype", "bf16"], "no_fuse_attention": ["--no-fuse-attention"]}


def zoo_dynamic():
    sys.path.insert(0, str(ROOT / "bench" / "models"))
    import zoo_models  # noqa: E402  (plain data; torch is imported only by its builders)
    return {name: e.dynamic for name, e in zoo_models.BY_NAME.items()}


def jobs(args):
    test_models = sorted((ROOT / "models").glob("*.onnx")) + sorted((pathlib.Path(args.build) / "models").glob("*.onnx"))
    test_models += sorted((ROOT / "tests" / "fuzz" / "seeds" / "importer").glob("*.onnx"))
    test_models += [ROOT / "tests" / "install" / "softmax.onnx"]
    seen, unique = set(), []
    for m in test_models:  # models/bert_tiny.onnx is also generated into <build>/models
        if m.stem not in seen:
            seen.add(m.stem)
            unique.append(m)
    out = []
    for m in unique:
        for v, flags in VARIANTS.items():
            out.append((f"test_{m.stem}__{v}", m, flags))
    dyn = zoo_dynamic()
    for m in sorted(pathlib.Path(args.zoo).glob("*.onnx")):
        for v in args.zoo_variants.split(","):
            flags = ["--dim", dyn[m.stem]] if m.stem in dyn else []
            out.append((f"zoo_{m.stem}__{v}", m, flags + VARIANTS[v]))
    if args.only:
        keep = set(args.only.split(","))
        out = [j for j in out if j[0].split("__")[0].split("_", 1)[1] in keep]
    return out


def write(args):
    outdir = pathlib.Path(args.outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="sabre_plans_") as tmp:
        for name, model, flags in jobs(args):
            art = pathlib.Path(tmp) / name
            cmd = [args.sabre, "compile", str(model), "-o", str(art), "--plan-only", "--no-tune",
                   "--db", str(pathlib.Path(tmp) / "tuning.db"), "--cache-dir", str(pathlib.Path(tmp) / "cache")] + flags
            p = subprocess.run(cmd, capture_output=True, text=True)
            dest = outdir / name
            shutil.rmtree(dest, ignore_errors=True)
            dest.mkdir()
            # The report without the lines that time or size the run, which differ between runs.
            lines = [l for l in (p.stdout + p.stderr).splitlines()
                     if not l.strip().startswith(("time:", "artifact:")) and str(tmp) not in l]
            (dest / "report.txt").write_text(f"exit {p.returncode}\n" + "\n".join(lines) + "\n")
            for f in ("plan.json", "manifest.json"):
                if (art / f).exists():
                    shutil.copy(art / f, dest / f)
            shutil.rmtree(art, ignore_errors=True)
            print(f"{name}: exit {p.returncode}", flush=True)


def compare(args):
    a, b = pathlib.Path(args.a), pathlib.Path(args.b)
    names = sorted({p.name for p in a.iterdir()} | {p.name for p in b.iterdir()})
    bad = same = 0
    for n in names:
        diffs = []
        for f in KEPT:
            fa, fb = a / n / f, b / n / f
            if fa.exists() != fb.exists():
                diffs.append(f + " missing on one side")
            elif fa.exists() and fa.read_bytes() != fb.read_bytes():
                diffs.append(f)
        plans = (a / n / "plan.json").exists()
        if diffs:
            bad += 1
            print(f"DIFFER {n}: {', '.join(diffs)}")
        else:
            same += 1
            print(f"same   {n}{'' if plans else ' (no plan: compile failed alike on both)'}")
    print(f"{same} identical, {bad} differ, of {len(names)}")
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("sabre")
    w.add_argument("outdir")
    w.add_argument("--zoo", default="/work/zoo/onnx")
    w.add_argument("--build", default=str(ROOT / "build"))
    w.add_argument("--only", default="", help="model names (file stems), comma-separated")
    w.add_argument("--zoo-variants", default="fp16", help=f"the zoo's variants, comma-separated, of {', '.join(VARIANTS)}")
    c = sub.add_parser("compare")
    c.add_argument("a")
    c.add_argument("b")
    args = ap.parse_args()
    if args.cmd == "write":
        write(args)
        return 0
    return compare(args)


if __name__ == "__main__":
    sys.exit(main())
