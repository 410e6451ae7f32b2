#!/usr/bin/env python3
"""bench/zoo.py without torch or a GPU: `report` on a fixture JSONL (the table's rows, the geometric means
at batch 1 and 32, refused models counted apart, sabre's missing back-to-back mode said), a malformed row
named by its line, and `all`'s resume logic (rows present are not redone, a refusal is a result) and
refusal recording against a stand-in sabre.

usage: zoo_harness.py WORK_DIR"""
import argparse
import json
import math
import os
import stat
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
ZOO = os.path.join(ROOT, "bench", "zoo.py")
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "bench", "models"))
import zoo  # noqa: E402
import zoo_models  # noqa: E402

STAMP = {"commit": "abc123def456", "gpu": "NVIDIA H200", "date": "2026-12-04T22:00:00Z", "torch": "2.11.0"}


def row(model, variant, metric, value, batch=None, seq=None, **kw):
    return {"model": model, "variant": variant, "metric": metric, "value": value, "batch": batch, "seq": seq,
            "status": "ok", "note": "", **STAMP, **kw}


def timing(model, seq, b, eager, comp, sabre_call, sabre_b2b=None):
    rows = [row(model, "eager", "ms_call", eager, b, seq), row(model, "eager", "ms_b2b", eager * 0.9, b, seq),
            row(model, "compile", "ms_call", comp, b, seq), row(model, "compile", "ms_b2b", comp * 0.9, b, seq),
            row(model, "untuned", "ms_call", sabre_call, b, seq)]
    if sabre_b2b:
        rows.append(row(model, "untuned", "ms_b2b", sabre_b2b, b, seq))
    return rows


def fixture():
    rows = [row("bert_base", "onnx", "export_s", 12.0), row("bert_base", "untuned", "compile_s", 80.0),
            row("bert_base", "untuned", "rel_l2", 2e-3, 3, 77, ref_rel_l2=1e-3),
            row("bert_base", "untuned", "rel_l2", 4e-3, 32, 128, ref_rel_l2=2e-3)]
    rows += timing("bert_base", 128, 1, 1.2, 0.6, 0.4)  # per call 1.5x
    rows += timing("bert_base", 128, 32, 3.0, 2.0, 1.0)  # 2.0x
    rows += [row("resnet50", "onnx", "export_s", 5.0), row("resnet50", "untuned", "compile_s", 200.0),
             row("resnet50", "untuned", "rel_l2", 2e-2, 3, None, ref_rel_l2=1e-3)]
    rows += timing("resnet50", None, 1, 2.0, 1.0, 1.25)  # 0.8x: below 1
    rows += timing("resnet50", None, 32, 6.0, 4.0, 2.0)  # 2.0x
    rows += [row("swin_t", "onnx", "export_s", 9.0),
             row("swin_t", "untuned", "compile_s", 3.0, status="refused",
                 note="sabre compile: error: op 'Mod' is not supported | try --x")]
    rows += timing("swin_t", None, 1, 2.0, 1.0, 9.0)[:4]
    return rows


def check(cond, what):
    if not cond:
        sys.exit(f"FAIL: {what}")
    print(f"ok: {what}")


def test_report(work):
    results = os.path.join(work, "fixture.jsonl")
    with open(results, "w") as f:
        for r in fixture():
            f.write(json.dumps(r) + "\n")
    out_dir = os.path.join(work, "report")
    r = subprocess.run([sys.executable, ZOO, "report", "--results", results, "--out-dir", out_dir],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"report exits 0 ({r.stderr.strip()})")
    md = os.path.join(out_dir, "zoo_h200_2026-12-04.md")
    check(os.path.exists(md), "report writes zoo_<gpu>_<date>.md")
    text = open(md).read()
    lines = text.splitlines()
    bert = [ln for ln in lines if ln.startswith("| bert_base |")]
    check(len(bert) == 2, "one table row per timed batch")
    check("| 1 | 128 | - / 0.400 | 0.540 / 0.600 | 1.080 / 1.200 | - | 1.50x | 4.00e-03 (2.0e-03) | ok" in bert[0],
          "bert_base batch 1: sabre / torch.compile / eager ms, per-call speedup, worst rel. L2 with fp16 vs fp32")
    swin = [ln for ln in lines if ln.startswith("| swin_t |")]
    check(swin and "refused: sabre compile: error: op 'Mod' is not supported \\| try --x" in swin[0],
          "a refusal's reason is in the status column, its | escaped")
    check("2.00e-02" in text and "over 1e-2" in text, "a rel. L2 over 1e-2 is marked")
    b1 = next(ln for ln in lines if ln.startswith("- untuned, batch 1:"))
    want1 = math.sqrt(1.5 * 0.8)
    check(f"per call {want1:.2f}x over 2 models" in b1, f"batch 1 per-call geomean {want1:.2f}x over 2 models")
    check("below 1.0x: resnet50" in b1, "models below 1.0x named")
    check("refused or failed (1, not in the mean): swin_t" in b1, "refused models counted apart")
    b32 = next(ln for ln in lines if ln.startswith("- untuned, batch 32:"))
    check("per call 2.00x over 2 models" in b32, "batch 32 per-call geomean 2.00x")
    check("back to back: none measured" in b32 and "per call only" in text,
          "sabre without back-to-back times: said, and no b2b geomean made up")
    # With sabre back-to-back rows, the b2b speedup and geomean appear.
    with open(results, "a") as f:
        f.write(json.dumps(row("bert_base", "untuned", "ms_b2b", 0.27, 1, 128)) + "\n")
        f.write(json.dumps(row("resnet50", "untuned", "ms_b2b", 1.8, 1, None)) + "\n")
    subprocess.run([sys.executable, ZOO, "report", "--results", results, "--out-dir", out_dir], check=True,
                   capture_output=True)
    text = open(md).read()
    want = math.sqrt((0.54 / 0.27) * (0.9 / 1.8))
    check(f"back to back {want:.2f}x over 2 models" in text, f"batch 1 back-to-back geomean {want:.2f}x")
    # A broken line is named, nothing is written over.
    with open(results, "a") as f:
        f.write("{not json\n")
    r = subprocess.run([sys.executable, ZOO, "report", "--results", results, "--out-dir", out_dir],
                       capture_output=True, text=True)
    check(r.returncode != 0 and f"{results}:" in r.stderr and "not a JSON row" in r.stderr,
          "a malformed row: one error naming file and line, non-zero exit")
    r = subprocess.run([sys.executable, ZOO, "report", "--results", os.path.join(work, "none.jsonl")],
                       capture_output=True, text=True)
    check(r.returncode != 0 and "no rows" in r.stderr, "no results: one error line")


def fake_sabre(work):
    path = os.path.join(work, "fake_sabre")
    with open(path, "w") as f:
        f.write("#!/bin/sh\n"
                "case \"$1\" in\n"
                "  bench) echo 'usage: sabre bench MODEL.sabre [--iters N]'; exit 0;;\n"
                "  compile) echo 'a note' ; echo \"sabre compile: error: op 'Mod' in node m1 is not supported\" >&2;"
                " exit 1;;\n"
                "esac\nexit 2\n")
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return path


def test_resume(work):
    sabre = fake_sabre(work)
    results = os.path.join(work, "resume.jsonl")
    with open(results, "w") as f:
        for r in fixture():
            f.write(json.dumps(r) + "\n")
    args = argparse.Namespace(work=os.path.join(work, "zw"), cache_dir=None, db=None, variants="untuned",
                              results=results, commit="c0ffee", sabre=sabre, compile_timeout=60, jobs=2, cmd="all",
                              deadline=None, iters=10, runs=10, force=False)
    h = zoo.Harness(args)
    bert = zoo_models.BY_NAME["bert_base"]
    need = zoo.missing(h, bert)
    # Present: export, compile, checks 3:77 and 32:128, all timings. Missing: checks 1:128 and 24:100.
    check(need == {"untuned": {"compile": True, "check": [(1, 128), (24, 100)], "time": []}},
          f"bert_base: only the missing checks are left ({need})")
    check(zoo.missing(h, zoo_models.BY_NAME["swin_t"]) == {"torch": [("eager", 32), ("compile", 32)]},
          "swin_t: refused, not recompiled; only its missing PyTorch rows are left")
    gpt2 = zoo.missing(h, zoo_models.BY_NAME["gpt2"])
    check(gpt2.get("export") and gpt2["untuned"]["check"] == list(zoo_models.TEXT_CHECK) and len(gpt2["torch"]) == 4,
          "gpt2: nothing present, everything to do")
    check(zoo.missing(h, bert, force=True)["untuned"]["time"] == [1, 32], "--force redoes present rows")
    # A refusal becomes a row with sabre's reason and is not retried.
    os.makedirs(os.path.join(args.work, "onnx"), exist_ok=True)
    gpt2e = zoo_models.BY_NAME["gpt2"]
    status = h.compile(gpt2e, "untuned")
    got = h.store.get("gpt2", "untuned", None, None, "compile_s")
    check(status == "refused" and got["status"] == "refused" and "op 'Mod'" in got["note"]
          and got["commit"] == "c0ffee", "a refusal is recorded with sabre's error line and the commit")
    check("untuned" not in zoo.missing(h, gpt2e), "a refused model is not recompiled on the next call")
    reread = zoo.Harness(args)
    check(reread.store.get("gpt2", "untuned", None, None, "compile_s")["status"] == "refused",
          "the row survives in the JSONL for the next call")
    check(zoo.main(["list"]) == 0, "list runs without torch")


def test_pack_list(work):
    """zoo.py pack-list's choice: shared kernels first, then each model's own up to the target."""
    per_model = {"a": ["k1", "k2", "a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8"], "b": ["k1", "k2", "b1"],
                 "c": ["k1"]}
    names, use = zoo.choose_pack(per_model, 0.9)
    check(names[:2] == ["k1", "k2"] and use["k1"] == 3, f"kernels shared by models come first ({names})")
    for m, ks in per_model.items():
        held = len(set(names) & set(ks)) / len(ks)
        check(held >= 0.9, f"pack holds {held:.0%} of {m}'s kernels (>= 90%)")
    check(len(names) == 10 and "a8" not in names, f"a model of 10 kernels may miss one: {len(names)} of 11 kept")
    path = os.path.join(work, "pack.txt")
    open(path, "w").write("# c\nk1  # 3 models\n\nk2\n")
    check(zoo.read_pack_list(path) == ["k1", "k2"], "read_pack_list drops comments and blank lines")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    work = sys.argv[1]
    os.makedirs(work, exist_ok=True)
    test_report(work)
    test_resume(work)
    test_pack_list(work)
    names = [e.name for e in zoo_models.ZOO if e.family != "smoke"]
    check(len(names) >= 12 and len(zoo_models.DEFAULT) >= 12, f"the zoo has {len(names)} architectures")
    print("all passed")


if __name__ == "__main__":
    main()
