#!/usr/bin/env python3
"""The sabre CLI's shared vocabulary and machine-readable output (issue 31), no GPU needed:
- the same option spelled every accepted way gives the same result in every command that takes it
  (--dim/--dynamic/--shapes, --arch sm_90a/sm90a/sm90/90, --dtype fp16/f16/float16/--fp16,
  -o/--output/--out, -j4/-j 4/--jobs 4/--jobs=4, --onnx);
- sabre --version, "did you mean" for a misspelled command or option;
- --json of inspect, partition, compile and db show parsed by Python's json module and checked key
  by key against the text reports and the artifact's files;
- command-line mistakes: exit 2, one error line with a pointer to --help, no C++ names;
- every --help line of every command describes its option.

usage: cli_vocabulary.py SABRE WORK_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import cli_check  # noqa: E402

BERT = os.path.join(ROOT, "models", "bert_tiny.onnx")
FAILURES = []


def check(name, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {name}" + (f": {detail}" if detail and not ok else ""))
    if not ok:
        FAILURES.append(name)


def sabre_ok(sabre, argv, timeout=300):
    """stdout of a command that must succeed; None (and a failure) otherwise."""
    r = subprocess.run([sabre] + argv, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        check("sabre " + " ".join(argv), False, f"exit {r.returncode}: {r.stderr.strip()[:300]}")
        return None
    return r.stdout


def sabre_json(sabre, argv):
    """The --json document of a command: stdout must be exactly one JSON value."""
    out = sabre_ok(sabre, argv + ["--json"])
    if out is None:
        return None
    try:
        return json.loads(out)
    except json.JSONDecodeError as e:
        check("stdout of sabre " + " ".join(argv) + " --json is one JSON document", False, str(e))
        return None


def usage_error(sabre, name, argv, patterns):
    r = cli_check.run(sabre, argv)
    problems = cli_check.error_problems(r, list(patterns) + [r"--help"], exit_code=2)
    cli_check.report(name, r, problems)
    if problems:
        FAILURES.append(name)


def same(name, outputs):
    """Every spelling gave the same output (and none failed)."""
    vals = list(outputs.values())
    ok = all(v is not None for v in vals) and all(v == vals[0] for v in vals)
    diff = ""
    if not ok:
        diff = "; ".join(f"{k!r} -> {str(v)[:120]!r}" for k, v in outputs.items())
    check(name + " (" + " | ".join(outputs) + ")", ok, diff)


def without_timing(doc):
    if doc is not None:
        doc = dict(doc)
        doc.pop("seconds", None)
        doc.pop("phase_seconds", None)
        doc.pop("artifact", None)
    return doc


def main():
    sabre, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    w = lambda *p: os.path.join(work, *p)  # noqa: E731

    # ---- --version, suggestions ------------------------------------------------------------------
    r = subprocess.run([sabre, "--version"], capture_output=True, text=True, timeout=60)
    check("--version: exit 0, 'sabre X.Y.Z' on stdout",
          r.returncode == 0 and re.match(r"sabre \d+\.\d+\.\d+( \(git [0-9a-f]{7,40}\))?\n$", r.stdout) is not None,
          f"exit {r.returncode}: {r.stdout!r} {r.stderr!r}")
    usage_error(sabre, "misspelled command suggests the command", ["compil", BERT], [r"compil", r"did you mean 'compile'"])
    usage_error(sabre, "misspelled command suggests the command (inspct)", ["inspct", BERT], [r"did you mean 'inspect'"])
    usage_error(sabre, "misspelled option suggests the option", ["inspect", BERT, "--dimm", "batch=2"],
                [r"--dimm", r"did you mean '--dim'"])

    # ---- command-line mistakes: one line, exit 2, a pointer to --help -----------------------------
    usage_error(sabre, "unknown option", ["partition", BERT, "--frobnicate"], [r"unknown option '--frobnicate'"])
    usage_error(sabre, "missing value", ["compile", BERT, "-o"], [r"--output needs a value"])
    usage_error(sabre, "value given to a switch", ["compile", BERT, "-o", w("x.sabre"), "--plan-only=yes"],
                [r"--plan-only takes no value"])
    usage_error(sabre, "bad number for --jobs", ["compile", BERT, "-o", w("x.sabre"), "--plan-only", "-jmany"],
                [r"--jobs", r"many"])
    usage_error(sabre, "zero --jobs", ["tune", BERT, "--no-tune", "--jobs", "0"], [r"--jobs", r"'0'"])
    usage_error(sabre, "bad --arch", ["compile", BERT, "-o", w("x.sabre"), "--plan-only", "--arch", "sm_9x"],
                [r"--arch", r"sm_9x"])
    usage_error(sabre, "f32 is not a compute dtype of compile", ["compile", BERT, "-o", w("x.sabre"), "--plan-only",
                                                                  "--dtype", "fp32"], [r"--dtype", r"fp32", r"f16"])
    usage_error(sabre, "--fp16 and --bf16 contradict", ["compile", BERT, "-o", w("x.sabre"), "--plan-only", "--fp16",
                                                        "--bf16"], [r"--fp16", r"--bf16", r"contradict"])
    usage_error(sabre, "--dim and --dynamic are one option (not repeatable in compile's sense of twice the same name)",
                ["compile", BERT, "-o", w("x.sabre"), "--plan-only", "--dim", "batch=1..4", "--dynamic", "batch=1..8"],
                [r"batch", r"twice"])
    usage_error(sabre, "model given twice (--onnx and positional)", ["inspect", BERT, "--onnx", BERT], [r"twice"])
    usage_error(sabre, "--json on db export", ["db", "--db", w("v.db"), "export", "--json"], [r"--json", r"show"])
    usage_error(sabre, "kernels flag of another action", ["kernels", "emit", "x", "--names"], [r"--names", r"emit"])
    usage_error(sabre, "--shapes of an unknown input", ["inspect", BERT, "--shapes=input_idz:2x16"],
                [r"input_idz", r"input_ids, attention_mask"])
    usage_error(sabre, "--shapes of the wrong rank", ["partition", BERT, "--shapes=input_ids:2x16x3"],
                [r"input_ids", r"2 dims"])
    usage_error(sabre, "--shapes disagreeing with --dim", ["run", "--reference", BERT, "-o", w("x"), "--dim", "batch=3",
                                                           "--shapes=input_ids:2x16"], [r"batch=2", r"batch=3"])
    usage_error(sabre, "--shapes disagreeing inputs", ["inspect", BERT, "--shapes=input_ids:2x16,attention_mask:2x17"],
                [r"seq=17", r"seq=16"])
    usage_error(sabre, "--shapes of one input on compile (which takes ranges)",
                ["compile", BERT, "-o", w("x.sabre"), "--plan-only", "--shapes=input_ids:1x128"], [r"ranges", r"--dim"])
    usage_error(sabre, "option before any command", ["--frobnicate"], [r"--frobnicate"])

    # ---- dims: --dim / --dynamic / --shapes, repeated or comma-joined -----------------------------
    dim_spellings = {
        "--dim a --dim b": ["--dim", "batch=2", "--dim", "seq=16"],
        "--dim a,b": ["--dim", "batch=2,seq=16"],
        "--dynamic a,b": ["--dynamic", "batch=2,seq=16"],
        "--shapes=a,b": ["--shapes=batch=2,seq=16"],
        "--shapes=input:AxB (trtexec)": ["--shapes=input_ids:2x16"],
        "--shapes=both inputs": ["--shapes", "input_ids:2x16,attention_mask:2x16"],
    }
    inspect_docs = {k: sabre_json(sabre, ["inspect", BERT] + v) for k, v in dim_spellings.items()}
    same("inspect: dims spelled six ways", {k: d and d["dims"] for k, d in inspect_docs.items()})
    same("inspect: FLOPs at dims spelled six ways", {k: d and d["total_flops"] for k, d in inspect_docs.items()})
    same("partition: dims spelled six ways",
         {k: (lambda d: d and d["flops"])(sabre_json(sabre, ["partition", BERT] + v)) for k, v in dim_spellings.items()})
    run_dims = {}
    for k, v in dim_spellings.items():
        out = sabre_ok(sabre, ["run", "--reference", BERT, "-o", w("run_" + str(len(run_dims)))] + v)
        run_dims[k] = out and out.splitlines()[0]
    same("run --reference: dims spelled six ways", run_dims)
    ranges = {
        "--dim": ["--dim", "batch=1..4", "--dim", "seq=1..32"],
        "--dynamic": ["--dynamic", "batch=1..4,seq=1..32"],
        "--shapes": ["--shapes", "batch=1..4,seq=1..32"],
    }
    plans = {}
    for k, v in ranges.items():
        d = w("dims" + k.replace("-", "_") + ".sabre")
        ok = sabre_ok(sabre, ["compile", BERT, "-o", d, "--plan-only"] + v) is not None
        plans[k] = json.load(open(os.path.join(d, "plan.json")))["symbols"] if ok else None
    same("compile: ranges spelled three ways", plans)
    check("compile: the ranges given are the plan's",
          plans["--dim"] == [{"name": "batch", "min": 1, "max": 4}, {"name": "seq", "min": 1, "max": 32}],
          str(plans["--dim"]))
    tune_ranges = {k: sabre_ok(sabre, ["tune", BERT, "--no-tune"] + v) for k, v in ranges.items()}
    same("tune: ranges spelled three ways", tune_ranges)

    # ---- --arch: one normalisation -----------------------------------------------------------------
    archs = {}
    for a in ["sm_90a", "sm90a", "sm90", "90", "sm_90"]:
        d = w("arch_" + a + ".sabre")
        doc = sabre_json(sabre, ["compile", BERT, "-o", d, "--plan-only", "--arch", a])
        man = json.load(open(os.path.join(d, "manifest.json"))) if doc else {}
        archs[a] = doc and (doc["arch"], man.get("arch"), man.get("sm"))
    same("compile: --arch spellings", archs)
    check("compile: --arch 90 is sm_90a", archs["90"] == ("sm_90a", "sm_90a", 90), str(archs["90"]))
    same("tune --no-tune: --arch spellings and the older --sm",
         {a: sabre_ok(sabre, ["tune", BERT, "--no-tune"] + a.split()) for a in
          ["--arch sm_90a", "--arch 90", "--sm 90", "--arch sm90"]})
    same("kernels list: --arch spellings",
         {a: sabre_ok(sabre, ["kernels", "list", "--names", "--arch", a, "--layout", "tn", "--dtype", "f16"])
          for a in ["sm90", "sm_90a", "90"]})
    sm80 = sabre_ok(sabre, ["kernels", "list", "--names", "--arch", "80", "--target-sm", "sm_80"])
    check("kernels list --arch 80 --target-sm sm_80: only sm80 kernels",
          sm80 is not None and sm80.strip() != "" and all(l.startswith("sm80_") for l in sm80.split()), str(sm80)[:200])

    # ---- dtype: f16/fp16/float16/--fp16, bf16/bfloat16/--bf16 ----------------------------------------
    dts = {}
    for spelled in ["--dtype f16", "--dtype fp16", "--dtype float16", "--fp16", "--dtype bf16", "--dtype bfloat16",
                    "--bf16", ""]:
        d = w("dt" + str(len(dts)) + ".sabre")
        doc = sabre_json(sabre, ["compile", BERT, "-o", d, "--plan-only"] + spelled.split())
        dts[spelled] = doc and doc["dtype"]
    same("compile: f16 spellings (and the default)",
         {k: dts[k] for k in ["--dtype f16", "--dtype fp16", "--dtype float16", "--fp16", ""]})
    same("compile: bf16 spellings", {k: dts[k] for k in ["--dtype bf16", "--dtype bfloat16", "--bf16"]})
    check("compile: f16 is f16, bf16 is bf16", dts["--fp16"] == "f16" and dts["--bf16"] == "bf16", str(dts))
    same("tune --no-tune: bf16 spellings",
         {k: sabre_ok(sabre, ["tune", BERT, "--no-tune"] + k.split()) for k in ["--dtype bf16", "--dtype bfloat16", "--bf16"]})
    same("kernels list: f32 spellings",
         {k: sabre_ok(sabre, ["kernels", "list", "--names", "--dtype", k]) for k in ["f32", "fp32", "float32"]})

    # ---- -o / --output / --out, and -j4 / -j 4 / --jobs 4 / --jobs=4 --------------------------------
    outs = {}
    for flag in ["-o", "--output", "--out", "--saveEngine"]:
        d = w("out" + flag.replace("-", "_") + ".sabre")
        doc = sabre_json(sabre, ["compile", "--onnx", BERT, flag, d, "--plan-only"])
        outs[flag] = doc is not None and os.path.isfile(os.path.join(d, "plan.json")) and doc["artifact"] == d
    check("compile: -o, --output, --out, --saveEngine all write the artifact", all(outs.values()), str(outs))
    for flag in ["-o", "--output", "--out"]:
        d = w("runout" + flag.replace("-", "_"))
        sabre_ok(sabre, ["run", "--reference", BERT, flag, d])
        check(f"run --reference {flag} DIR writes the outputs", os.path.isfile(os.path.join(d, "pooler_output.npy")))
    jobs = {}
    for spelled in [["-j4"], ["-j", "4"], ["--jobs", "4"], ["--jobs=4"]]:
        doc = sabre_json(sabre, ["compile", BERT, "-o", w("j" + str(len(jobs)) + ".sabre"), "--plan-only"] + spelled)
        jobs[" ".join(spelled)] = without_timing(doc)
    same("compile: -j4, -j 4, --jobs 4, --jobs=4", jobs)
    same("tune --no-tune: -j4 and --jobs 4",
         {" ".join(j): sabre_ok(sabre, ["tune", BERT, "--no-tune"] + j) for j in [["-j4"], ["--jobs", "4"]]})
    same("inspect: --onnx=MODEL and MODEL",
         {k: sabre_json(sabre, ["inspect"] + v) for k, v in {"--onnx=": ["--onnx=" + BERT], "positional": [BERT]}.items()})

    # ---- --json: inspect ---------------------------------------------------------------------------
    doc = inspect_docs["--dim a,b"]
    text = sabre_ok(sabre, ["inspect", BERT, "--dim", "batch=2,seq=16"])
    if doc and text:
        check("inspect --json: schema", doc["schema"] == "sabre.inspect/1" and doc["sabre_version"], str(doc.get("schema")))
        check("inspect --json: inputs",
              doc["inputs"] == [{"name": "input_ids", "dtype": "i64", "shape": ["batch", "seq"]},
                                {"name": "attention_mask", "dtype": "i64", "shape": ["batch", "seq"]}], str(doc["inputs"]))
        check("inspect --json: outputs",
              doc["outputs"] == [{"name": "last_hidden_state", "dtype": "f32", "shape": ["batch", "seq", 64]},
                                 {"name": "pooler_output", "dtype": "f32", "shape": ["batch", 64]}], str(doc["outputs"]))
        check("inspect --json: dims", doc["dims"] == {"batch": 2, "seq": 16} and doc["defaulted_dims"] == [],
              f"{doc['dims']} {doc['defaulted_dims']}")
        m = re.search(r"ops\s+(\d+) nodes, (\d+) kinds", text)
        check("inspect --json: nodes and op kinds as the text says",
              m and doc["nodes"] == int(m.group(1)) and len(doc["ops"]) == int(m.group(2)) and
              sum(doc["ops"].values()) == doc["nodes"], f"{doc['nodes']} {len(doc['ops'])} vs {m and m.groups()}")
        text_ops = dict((op, int(n)) for op, n in re.findall(r"^  (\w[\w.]*)\s+(\d+)$", text, re.M))
        check("inspect --json: op counts as the text says", text_ops == doc["ops"], f"{text_ops} vs {doc['ops']}")
        m = re.search(r"parameters\s+\S+ \(([\d,]+) elements of float constants, ([\d,]+) bytes; (\d+) constants", text)
        check("inspect --json: parameters as the text says",
              m and doc["parameters"] == {"count": int(m.group(1).replace(",", "")),
                                          "bytes": int(m.group(2).replace(",", "")), "constants": int(m.group(3))},
              f"{doc['parameters']} vs {m and m.groups()}")
        mm = doc["flops"].get("MatMul", {})
        b, s = 2, 16
        want = 512 * b * s * s + 131072 * b * s + 8192 * b  # bert_tiny's MatMul FLOPs (docs/USAGE.md)
        check("inspect --json: MatMul FLOPs, polynomial and value",
              mm.get("polynomial") == "512*batch*seq*seq+131072*batch*seq+8192*batch" and mm.get("flops") == want and
              mm.get("nodes") == 17 and mm.get("nodes_not_inferred") == 0, str(mm))
        check("inspect --json: total FLOPs", doc["total_flops"] == sum(k["flops"] for k in doc["flops"].values()),
              str(doc["total_flops"]))
        check("inspect --json: no ir without --ir", "ir" not in doc)
    ir_doc = sabre_json(sabre, ["inspect", BERT, "--ir"])
    check("inspect --json --ir: the IR text", ir_doc is not None and ir_doc["ir"].startswith("graph ") and
          ir_doc["defaulted_dims"] == ["batch", "seq"] and ir_doc["dims"] == {"batch": 1, "seq": 8},
          str(ir_doc and ir_doc["dims"]))

    # ---- --json: partition -------------------------------------------------------------------------
    doc = sabre_json(sabre, ["partition", BERT, "--dim", "batch=2,seq=16"])
    text = sabre_ok(sabre, ["partition", BERT, "--dim", "batch=2,seq=16"])
    if doc and text:
        check("partition --json: schema and backend", doc["schema"] == "sabre.partition/1" and doc["backend"] == "cutlass")
        m = re.search(r"^(\d+) cutlass regions", text, re.M)
        text_regions = re.findall(r"^  (cutlass_region\d+)\s+(\S+)$", text, re.M)
        check("partition --json: regions as the text lists them",
              m and len(doc["regions"]) == int(m.group(1)) and
              [(r["composite"], r["pattern"]) for r in doc["regions"]] == text_regions and
              all(r["nodes"] for r in doc["regions"]), f"{len(doc['regions'])} vs {m and m.group(1)}")
        f = doc["flops"]
        check("partition --json: FLOP share", f["dims"] == {"batch": 2, "seq": 16} and f["total"] == want and
              f["offloaded"] == want and f["share"] == 1.0 and f["share_is_exact"] is True and
              f["total_polynomial"] in text, str(f))
        check("partition --json: nothing left out, the layout line", doc["left_out"] == [] and
              "layout: " + doc["layout"] in text, f"{doc['left_out']} {doc['layout']!r}")

    # ---- --json: compile ---------------------------------------------------------------------------
    d = w("json.sabre")
    r = subprocess.run([sabre, "compile", BERT, "-o", d, "--plan-only", "--dim", "batch=1..4,seq=1..32", "--json"],
                       capture_output=True, text=True, timeout=300)
    try:
        doc = json.loads(r.stdout)
    except json.JSONDecodeError as e:
        doc = None
        check("compile --json: stdout is one JSON document", False, f"{e}: {r.stdout[:200]!r}")
    if doc:
        plan = json.load(open(os.path.join(d, "plan.json")))
        by_op = {}
        for st in plan["steps"]:
            by_op[st["op"]] = by_op.get(st["op"], 0) + 1
        check("compile --json: schema, model, artifact, options",
              doc["schema"] == "sabre.compile/1" and doc["model"] == BERT and doc["artifact"] == d and
              doc["dtype"] == "f16" and doc["arch"] == "sm_90a" and doc["plan_only"] is True, str(doc)[:300])
        check("compile --json: steps as the plan has them", doc["steps"]["total"] == len(plan["steps"]) and
              doc["steps"]["by_op"] == by_op, f"{doc['steps']} vs {by_op}")
        check("compile --json: weights as weights.bin", doc["weights_bytes"] == os.path.getsize(os.path.join(d, "weights.bin")))
        k = doc["kernels"]
        check("compile --json: kernels (none compiled with --plan-only)", k["compiled"] == 0 and k["cached"] == 0 and
              k["gemm"] > 0 and set(k) == {"gemm", "conv", "elementwise", "compiled", "cached"}, str(k))
        check("compile --json: tuning and time", set(doc["tuning"]) == {"points", "new_measurements", "seconds"} and
              doc["seconds"] > 0, str(doc["tuning"]))
        phases = doc.get("phase_seconds", {})
        check("compile --json: phase times in order, none past the total (no build with --plan-only)",
              list(phases) == ["import", "canonicalize", "partition", "lower", "write"] and
              all(v >= 0 for v in phases.values()) and sum(phases.values()) <= doc["seconds"] + 1e-3, str(phases))
        check("compile --json: notes are in the document, not on stdout as text",
              isinstance(doc["notes"], list) and "note:" not in r.stdout, str(doc["notes"])[:200])
        check("compile --json: progress on stderr", "sabre compile:" in r.stderr, r.stderr[:200])

    # ---- --json: db show ---------------------------------------------------------------------------
    db = w("t.db")
    env = '"env": {"gpu": "Test GPU", "sm": 90, "cuda": "13.0", "cutlass": "4.2", "template_version": "7"}'
    rows = [f'{{{env}, "workload": "gemm_w1", "kernel": "k_fast", "status": "ok", "time_us": 10.5}}',
            f'{{{env}, "workload": "gemm_w1", "kernel": "k_slow", "status": "ok", "time_us": 20.25}}',
            f'{{{env}, "workload": "gemm_w1", "kernel": "k_bad", "status": "wrong_result", "time_us": null, '
            f'"detail": "max error 3"}}',
            f'{{{env}, "workload": "gemm_w2", "kernel": "k_only", "status": "wrong_result", "time_us": null}}']
    open(w("rows.jsonl"), "w").write("\n".join(rows) + "\n")
    imported = sabre_ok(sabre, ["db", "--db", db, "import", w("rows.jsonl")])
    doc = sabre_json(sabre, ["db", "--db", db, "show", "--all"]) if imported is not None else None
    if doc:
        envs = doc["environments"]
        check("db show --json: schema, path, count", doc["schema"] == "sabre.db/1" and doc["db"] == db and
              doc["measurements"] == 4, str({k: doc[k] for k in ("schema", "db", "measurements")}))
        e = envs[0] if len(envs) == 1 else {}
        check("db show --json: the environment", {k: e.get(k) for k in ("gpu", "sm", "cuda", "cutlass", "template_version")}
              == {"gpu": "Test GPU", "sm": 90, "cuda": "13.0", "cutlass": "4.2", "template_version": "7"}, str(e)[:300])
        ws = {x["workload"]: x for x in e.get("workloads", [])}
        w1, w2 = ws.get("gemm_w1", {}), ws.get("gemm_w2", {})
        check("db show --json: the winner is the fastest correct measurement",
              w1.get("measured") == 3 and (w1.get("winner") or {}).get("kernel") == "k_fast" and
              w1["winner"]["time_us"] == 10.5 and w1["winner"]["status"] == "ok", str(w1)[:300])
        bad = [m for m in w1.get("all", []) if m["kernel"] == "k_bad"]
        check("db show --json --all: every measurement, a failed one with null time",
              len(w1.get("all", [])) == 3 and bad and bad[0]["time_us"] is None and bad[0]["status"] != "ok" and
              bad[0]["detail"] == "max error 3", str(w1.get("all"))[:300])
        check("db show --json: no correct measurement, no winner", w2.get("winner", 0) is None, str(w2)[:200])
    doc = sabre_json(sabre, ["db", "--db", db, "show", "--workload", "w2"])
    check("db show --json --workload: filtered, no 'all' without --all",
          doc is not None and [x["workload"] for x in doc["environments"][0]["workloads"]] == ["gemm_w2"] and
          "all" not in doc["environments"][0]["workloads"][0], str(doc)[:300])
    r = subprocess.run([sabre, "db", "--db", db, "export", "--output", w("exp.jsonl")], capture_output=True, text=True)
    check("db export --output FILE", r.returncode == 0 and len(open(w("exp.jsonl")).read().splitlines()) == 4, r.stderr)

    # ---- --help: every option described ------------------------------------------------------------
    for cmd in ["inspect", "partition", "compile", "tune", "run", "bench", "db", "kernels"]:
        r = subprocess.run([sabre, cmd, "--help"], capture_output=True, text=True, timeout=60)
        opts = [ln for ln in r.stdout.splitlines() if re.match(r"  -", ln)]
        bare = [ln for ln in opts if not re.match(r"  -\S.*?\S {3,}\S+ \S+", ln)]
        check(f"{cmd} --help: every option with a description", r.returncode == 0 and opts and not bare,
              f"exit {r.returncode}; undescribed: {bare[:3]}")
    for cmd, flags in {"inspect": ["--dim", "--json", "--onnx"], "partition": ["--dim", "--json"],
                       "compile": ["--dim", "--dynamic", "--arch", "--dtype", "--fp16", "-j, --jobs", "-o, --output",
                                   "--json", "--saveEngine"],
                       "tune": ["--dim", "--arch", "--sm", "-j, --jobs", "--bf16"], "run": ["--dim", "-o, --output"],
                       "bench": ["--dim", "--json", "--iterations"], "db": ["-o, --output", "--json"],
                       "kernels": ["--arch", "--dtype", "-j, --jobs", "-o, --output"]}.items():
        h = subprocess.run([sabre, cmd, "--help"], capture_output=True, text=True, timeout=60).stdout
        missing = [f for f in flags if f not in h]
        check(f"{cmd} --help lists the shared spellings", not missing, f"missing {missing}")
    h = subprocess.run([sabre, "compile", "--help"], capture_output=True, text=True, timeout=60).stdout
    check("compile --help states defaults", "(default sm_90a)" in h and "(default fp16)" in h, "")

    print(f"{'FAILED: ' + ', '.join(FAILURES) if FAILURES else 'all vocabulary and --json checks pass'}")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
