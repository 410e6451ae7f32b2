"""bench/zoo.py's results: the JSONL rows (one per model, variant, batch, seq and metric) and the report
(markdown table, geometric means, speedup chart). Needs only the standard library (and matplotlib for the
chart), so it runs and is tested without torch.

A row: {"model", "family", "variant", "batch", "seq", "metric", "value", "unit", "status", "note", "commit",
"gpu", "date", ...}. Variants: "onnx" (export), "untuned" / "tuned" (sabre artifacts), "eager" /
"compile" (PyTorch fp16, torch.compile(mode="reduce-overhead")). Metrics: export_s, compile_s (wall
seconds), rel_l2 (worst output's relative L2 against PyTorch fp16; "ref_rel_l2" beside it: PyTorch fp16
against fp32), ms_call (median CUDA-event time of one call), ms_b2b (back to back: runs enqueued between
two CUDA events, divided by the runs). Status: ok, refused (sabre said why, in "note"), failed, crashed,
timeout. For one key the last row wins."""
import json
import math
import os
import re
import threading
import time

KEY = ("model", "variant", "batch", "seq", "metric")
SABRE_VARIANTS = ("tuned", "untuned")


def key(row):
    return tuple(row.get(k) for k in KEY)


def load(path):
    """The rows of PATH in order (none where it does not exist); a line that is not JSON is an error
    naming the line."""
    rows = []
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{n}: not a JSON row ({e.msg}); fix or delete that line") from None
    return rows


def latest(rows):
    """{key: row}, the last row of each key."""
    out = {}
    for r in rows:
        out[key(r)] = r
    return out


class Store:
    """The JSONL file, appended row by row (flushed, so a call cut off keeps what it measured)."""

    def __init__(self, path, stamp):
        self.path, self.stamp = path, stamp
        self.rows = latest(load(path))
        self.lock = threading.Lock()  # compiles report from worker threads

    def has(self, model, variant, batch, seq, metric):
        return (model, variant, batch, seq, metric) in self.rows

    def get(self, model, variant, batch, seq, metric):
        return self.rows.get((model, variant, batch, seq, metric))

    def add(self, **row):
        row = {**{k: None for k in KEY}, "status": "ok", "note": "", **row, **self.stamp,
               "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        d = os.path.dirname(self.path)
        with self.lock:
            if d:
                os.makedirs(d, exist_ok=True)
            with open(self.path, "a") as f:
                f.write(json.dumps(row, sort_keys=True) + "\n")
            self.rows[key(row)] = row
        return row


def geomean(xs):
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def slug(gpu):
    s = re.sub(r"^nvidia\s+", "", (gpu or "unknown").strip(), flags=re.I).lower()
    return re.sub(r"[^a-z0-9]+", "_", s).strip("_") or "unknown"


def _fmt(x, digits=3):
    return "-" if x is None else f"{x:.{digits}f}"


def _pair(b2b, call):
    """'b2b / call' ms, '-' for what is missing."""
    return f"{_fmt(b2b)} / {_fmt(call)}"


def _ratio(a, b):
    return a / b if a and b else None


def summarize(rows, order=()):
    """The report's content from ROWS: per model and sabre variant, its status and per timed batch the
    numbers; the geomeans. ORDER lists model names first in that order (the zoo's)."""
    last = latest(rows)
    models = list(dict.fromkeys([m for m in order if any(k[0] == m for k in last)] + [k[0] for k in last]))
    out = []
    for m in models:
        mine = {k: r for k, r in last.items() if k[0] == m}
        family = next((r.get("family") for r in mine.values() if r.get("family")), "")
        export = mine.get((m, "onnx", None, None, "export_s"))
        variants = [v for v in SABRE_VARIANTS if (m, v, None, None, "compile_s") in mine]
        batches = sorted({k[2] for k in mine if k[4] in ("ms_call", "ms_b2b") and k[2] is not None})
        seqs = {k[2]: k[3] for k in mine if k[4] in ("ms_call", "ms_b2b")}
        for v in variants or [None]:
            comp = mine.get((m, v, None, None, "compile_s")) if v else None
            if export is not None and export.get("status") != "ok":
                status, reason = "export " + export.get("status", "failed"), export.get("note", "")
            elif comp is None:
                status, reason = "not compiled", ""
            else:
                status, reason = comp.get("status", "ok"), comp.get("note", "") if comp.get("status") != "ok" else ""
            checks = [r for k, r in mine.items() if k[1] == v and k[4] == "rel_l2"]
            bad_checks = [r for r in checks if r.get("status") != "ok"]
            worst = max((r["value"] for r in checks if r.get("value") is not None), default=None)
            ref = max((r.get("ref_rel_l2") or 0 for r in checks), default=None) if checks else None
            # Rows written before "passed" was recorded judge by the plain tolerance.
            passed = all(r.get("passed", (r.get("value") or 0) <= 1e-2) for r in checks)
            if status == "ok" and bad_checks:
                status, reason = "check " + bad_checks[0].get("status", "failed"), bad_checks[0].get("note", "")
            entry = {"model": m, "family": family, "variant": v, "status": status, "reason": reason,
                     "compile_s": comp.get("value") if comp else None, "rel_l2": worst, "ref_rel_l2": ref, "passed": passed,
                     "checks": len(checks), "batches": []}
            for b in batches:
                s = seqs.get(b)

                def val(var, metric):
                    r = mine.get((m, var, b, s, metric))
                    return r.get("value") if r and r.get("status") == "ok" else None
                t = {"batch": b, "seq": s}
                for var in ("eager", "compile") + ((v,) if v else ()):
                    name = "sabre" if var == v else var
                    t[name + "_b2b"], t[name + "_call"] = val(var, "ms_b2b"), val(var, "ms_call")
                t["x_b2b"] = _ratio(t["compile_b2b"], t.get("sabre_b2b"))
                t["x_call"] = _ratio(t["compile_call"], t.get("sabre_call"))
                entry["batches"].append(t)
            out.append(entry)
    return out


def geomeans(entries, variant, batch):
    """{"b2b": (geomean, n), "call": ..., "below_1": [models], "refused": [models]} over ENTRIES of VARIANT at BATCH."""
    got = {"b2b": [], "call": [], "below_1": [], "refused": [], "not_run": []}
    for e in entries:
        if e["variant"] not in (variant, None):  # None: no compile row at all (export failed, or not reached)
            continue
        if e["status"] != "ok":
            (got["refused"] if e["status"] in ("refused", "crashed", "failed", "timeout") else got["not_run"]).append(
                e["model"])
            continue
        t = next((t for t in e["batches"] if t["batch"] == batch), None)
        if not t:
            continue
        for k in ("b2b", "call"):
            if t["x_" + k]:
                got[k].append(t["x_" + k])
        x = t["x_b2b"] or t["x_call"]
        if x and x < 1.0:
            got["below_1"].append(e["model"])
    return {"b2b": (geomean(got["b2b"]), len(got["b2b"])), "call": (geomean(got["call"]), len(got["call"])),
            "below_1": got["below_1"], "refused": got["refused"], "not_run": got["not_run"]}


def report_markdown(rows, order=(), chart=None):
    entries = summarize(rows, order)
    gpus = sorted({r.get("gpu") for r in rows if r.get("gpu")})
    dates = sorted({r.get("date", "")[:10] for r in rows if r.get("date")})
    commits = sorted({r.get("commit") for r in rows if r.get("commit")})
    torch_v = sorted({r.get("torch") for r in rows if r.get("torch")})
    sabre_b2b = any(t.get("sabre_b2b") for e in entries for t in e["batches"])
    lines = [f"# sabre model zoo: {', '.join(gpus) or 'unknown GPU'}, {' .. '.join(sorted(set(dates[:1] + dates[-1:]))) or 'undated'}",
             "",
             f"Commits: {', '.join(c[:12] for c in commits) or 'unknown'}; PyTorch {', '.join(torch_v) or '?'}. "
             "Random weights from default configs (bench/models/zoo_models.py), fp16. "
             "Times in ms as `back to back / per call`: back to back = runs enqueued between two CUDA events, "
             "divided by the runs; per call = median CUDA-event time around one call. "
             "Speedups are torch.compile(mode=\"reduce-overhead\") over sabre, measured in the same run. "
             "rel. L2: the worst output's against PyTorch fp16 over the checked shapes (PyTorch fp16 against "
             "fp32 in parentheses).",
             ""]
    if not sabre_b2b:
        lines += ["**sabre's times are per call only**: this sabre's `sabre bench` has no back-to-back mode "
                  "(it times each run, a CUDA-graph replay, between two CUDA events), so the back-to-back "
                  "speedup column is empty and the geomeans below are per call.", ""]
    lines += ["| model | sabre | batch | seq | sabre ms | torch.compile ms | eager ms | speedup back to back "
              "| per call | rel. L2 | status |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for e in entries:
        l2 = "-" if e["rel_l2"] is None else f"{e['rel_l2']:.2e}" + (
            f" ({e['ref_rel_l2']:.1e})" if e["ref_rel_l2"] is not None else "") + (
            "" if e["rel_l2"] <= 1e-2 else " (fp16 ill-conditioned; as close to fp32 as PyTorch fp16)"
            if e.get("passed") else " **over 1e-2**")
        status = e["status"] + (": " + e["reason"].replace("|", "\\|")[:200] if e["reason"] else "")
        if e["status"] == "ok" and e["compile_s"] is not None:
            status += f" (compiled in {e['compile_s']:.0f} s)"
        ts = e["batches"] or [{"batch": None, "seq": None}]
        for t in ts:
            xb = "-" if not t.get("x_b2b") else f"{t['x_b2b']:.2f}x"
            xc = "-" if not t.get("x_call") else f"{t['x_call']:.2f}x"
            lines.append(f"| {e['model']} | {e['variant'] or '-'} | {'-' if t['batch'] is None else t['batch']} | "
                         f"{t.get('seq') or '-'} | {_pair(t.get('sabre_b2b'), t.get('sabre_call'))} | "
                         f"{_pair(t.get('compile_b2b'), t.get('compile_call'))} | "
                         f"{_pair(t.get('eager_b2b'), t.get('eager_call'))} | {xb} | {xc} | {l2} | {status} |")
    lines += ["", "## Geometric mean speedup over torch.compile", ""]
    for v in SABRE_VARIANTS:
        if not any(e["variant"] == v for e in entries):
            continue
        for b in (1, 32):
            g = geomeans(entries, v, b)
            parts = []
            for k, label in (("b2b", "back to back"), ("call", "per call")):
                x, n = g[k]
                parts.append(f"{label} {x:.2f}x over {n} models" if x else f"{label}: none measured")
            extra = []
            if g["below_1"]:
                extra.append("below 1.0x: " + ", ".join(g["below_1"]))
            if g["refused"]:
                extra.append(f"refused or failed ({len(g['refused'])}, not in the mean): " + ", ".join(g["refused"]))
            if g["not_run"]:
                extra.append(f"not run ({len(g['not_run'])}): " + ", ".join(g["not_run"]))
            lines.append(f"- {v}, batch {b}: " + "; ".join(parts) + (". " + "; ".join(extra) if extra else ""))
    if chart:
        lines += ["", f"![speedup over torch.compile]({os.path.basename(chart)})"]
    return "\n".join(lines) + "\n", entries


def write_chart(entries, path):
    """Bars of sabre's speedup over torch.compile per model at batch 1 and 32 (back to back where sabre has
    it, else per call); False where matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    picked = {}
    for e in entries:  # tuned where there is one, else untuned
        if e["status"] == "ok" and (e["model"] not in picked or e["variant"] == "tuned"):
            picked[e["model"]] = e
    models = list(picked)
    fig, ax = plt.subplots(figsize=(max(6, 0.7 * len(models) + 2), 4.5))
    width = 0.38
    kind = "per call"
    for i, b in enumerate((1, 32)):
        ys = []
        for m in models:
            t = next((t for t in picked[m]["batches"] if t["batch"] == b), {})
            if t.get("x_b2b"):
                kind = "back to back"
            ys.append(t.get("x_b2b") or t.get("x_call") or 0)
        ax.bar([j + (i - 0.5) * width for j in range(len(models))], ys, width, label=f"batch {b}")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.axhline(1.3, color="gray", linewidth=0.8, linestyle="--")
    ax.set_xticks(range(len(models)))
    ax.set_xticklabels([f"{m}\n({picked[m]['variant']})" for m in models], rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("speedup over torch.compile (x)")
    ax.set_title(f"sabre vs torch.compile(reduce-overhead), {kind}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def write_report(rows, out_dir, order=(), gpu=None, date=None):
    """Writes OUT_DIR/zoo_<gpu>_<date>.md (and .svg where matplotlib is there); returns (md path, svg path or
    None, entries)."""
    gpu = gpu or max((r.get("gpu") for r in rows if r.get("gpu")), key=lambda g: sum(r.get("gpu") == g for r in rows),
                     default="unknown")
    date = date or max((r.get("date", "")[:10] for r in rows), default="") or "undated"
    base = os.path.join(out_dir, f"zoo_{slug(gpu)}_{date}")
    os.makedirs(out_dir, exist_ok=True)
    entries = summarize(rows, order)
    svg = base + ".svg" if write_chart(entries, base + ".svg") else None
    text, entries = report_markdown(rows, order, chart=svg)
    with open(base + ".md", "w") as f:
        f.write(text)
    return base + ".md", svg, entries
