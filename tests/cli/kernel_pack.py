#!/usr/bin/env python3
"""sabre kernels pack end to end with a stand-in nvcc (no CUDA compile: each 'kernel' is its source copied):
--dry-run, bad lists (missing, an unknown name named by its line, two names a line, empty), a bad --batch,
a pack run that builds, a failing kernel reported while the others build, a second run that builds nothing
(resumable: what the cache holds is skipped), --retry-failed, two kernels of one family built in one
translation unit (--batch 1: each alone), and sabre compile naming the pack's cache hits.

usage: kernel_pack.py SABRE MODEL.onnx WORK_DIR"""
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time

from cli_check import error_problems, report, run

FAKE_NVCC = """#!/bin/sh
if [ "$1" = --version ]; then echo "stand-in nvcc for kernel_pack.py"; exit 0; fi
echo run >> "$(dirname "$0")/runs"
out=; src=; while [ $# -gt 0 ]; do case "$1" in -o) out=$2; shift;; *.cu|*.o) src=$1;; esac; shift; done
if [ -n "$FAKE_NVCC_SLOW" ] && grep -q "$FAKE_NVCC_SLOW" "$src"; then sleep 60; fi
if [ -n "$FAKE_NVCC_FAIL" ] && grep -q "$FAKE_NVCC_FAIL" "$src"; then echo "$src: error: boom" >&2; exit 1; fi
cp "$src" "$out"
"""

A = "sm90_ws_pingpong_tn_f16_f16_f32_64x32x128_c1x1_a8_bias"
B = "sm80_conv_fprop_optimized_nhwc_f16_f16_f32_128x128x32_w64x64x32_s3_a8_bias_relu"
FAILURES = []


def check(name, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {name}" + ("" if ok else f": {detail}"))
    if not ok:
        FAILURES.append(name)


def main():
    sabre, model, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    fake_dir = os.path.join(work, "bin")
    os.makedirs(fake_dir)
    nvcc = os.path.join(fake_dir, "nvcc")
    open(nvcc, "w").write(FAKE_NVCC)
    os.chmod(nvcc, os.stat(nvcc).st_mode | stat.S_IEXEC)
    env = dict(os.environ, SABRE_NVCC=nvcc, PATH=fake_dir + os.pathsep + os.environ["PATH"])
    runs = lambda: len(open(os.path.join(fake_dir, "runs")).read().splitlines()) if os.path.exists(  # noqa: E731
        os.path.join(fake_dir, "runs")) else 0
    w = lambda *p: os.path.join(work, *p)  # noqa: E731
    cache = w("cache")

    def write(name, text):
        open(w(name), "w").write(text)
        return w(name)

    good = write("good.txt", f"# two kernels\n{A}  # a GEMM\n\n{B}\n")

    # ---- bad input: one clear error line, nothing built ----
    for name, argv, needles in [
        ("missing list", ["--list", w("nope.txt")], ["nope.txt"]),
        ("unknown kernel name, named by its line", ["--list", write("bad.txt", f"{A}\n# c\nsm90_not_a_kernel\n")],
         ["bad.txt:3", "sm90_not_a_kernel", "not a kernel name"]),
        ("two names on a line", ["--list", write("two.txt", f"{A} {B}\n")], ["two.txt:1", "one kernel name a line"]),
        ("a name twice", ["--list", write("dup.txt", f"{A}\n{A}\n")], ["dup.txt:2", "twice"]),
        ("no names", ["--list", write("empty.txt", "# nothing\n\n")], ["holds no kernel names"]),
        ("kernel names as arguments", [A], ["--list FILE"]),
        ("a flag of another action", ["--names"], ["--names"]),
        ("batch size 0", ["--list", good, "--batch", "0"], ["--batch", "1 to 16"]),
        ("batch size not a number", ["--list", good, "--batch", "four"], ["--batch", "1 to 16"]),
    ]:
        r = run(sabre, ["kernels", "pack", "--cache-dir", cache] + argv, env=env)
        report(f"pack: {name}", r, error_problems(r, needles=needles))
        if error_problems(r, needles=needles):
            FAILURES.append(name)
    check("bad input compiled nothing", runs() == 0, f"{runs()} compiler runs")

    # ---- --dry-run ----
    r = run(sabre, ["kernels", "pack", "--list", good, "--cache-dir", cache, "--dry-run"], env=env)
    check("dry-run: both to build, exit 0", r.code == 0 and sum(ln.startswith("build ") for ln in r.out.splitlines()) == 2 and "would build 2 of 2" in r.out,
          r.out + r.err)
    r = run(sabre, ["kernels", "pack", "--list", good, "--cache-dir", cache, "--dry-run", "--arch", "sm_80", "--json"],
            env=env)
    doc = json.loads(r.out) if r.code == 0 else {}
    states = {k["name"]: k["state"] for k in doc.get("kernels", [])}
    check("dry-run --arch sm_80: the sm90 kernel unsupported, the sm80 conv to build",
          states == {A: "unsupported", B: "build"}, r.out + r.err)
    check("dry-run compiled nothing", runs() == 0, f"{runs()} compiler runs")

    # ---- a run with one failing kernel: reported, the other built ----
    r = run(sabre, ["kernels", "pack", "--list", good, "--cache-dir", cache, "-j", "2", "--json"],
            env=dict(env, FAKE_NVCC_FAIL="sm80_conv_fprop"))
    doc = json.loads(r.out) if r.out.strip() else {}
    states = {k["name"]: k["state"] for k in doc.get("kernels", [])}
    s = doc.get("summary", {})
    check("failing kernel: exit 1, the other built", r.code == 1 and states == {A: "built", B: "failed"} and
          s.get("built") == 1 and s.get("failed") == 1 and s.get("bytes", 0) > 0, r.out + r.err)
    check("progress lines on stderr", "compiled 1/2" in r.err and "compiled 2/2" in r.err, r.err)
    before = runs()

    # ---- resumable: the second run builds nothing, reports the earlier failure ----
    r = run(sabre, ["kernels", "pack", "--list", good, "--cache-dir", cache], env=env)
    check("second run: nothing compiled, the failure reported", runs() == before and r.code == 1 and
          "0 built, 1 cached, 1 failed" in r.out and "--retry-failed" in r.out, r.out + r.err)
    r = run(sabre, ["kernels", "pack", "--list", good, "--cache-dir", cache, "--dry-run"], env=env)
    check("dry-run after a run: one cached, one failed before", r.code == 0 and runs() == before and
          f"cached        {A}" in r.out and f"failed-before {B}" in r.out, r.out + r.err)
    r = run(sabre, ["kernels", "pack", "--list", good, "--cache-dir", cache, "--retry-failed"], env=env)
    check("--retry-failed compiles the failed kernel again, only it", runs() == before + 1 and r.code == 0 and
          "1 built, 1 cached, 0 failed" in r.out, r.out + r.err)

    # ---- two kernels of one family: one translation unit, one library each; --batch 1: each alone ----
    A2 = "sm90_ws_pingpong_tn_f16_f16_f32_64x64x128_c1x1_a8_bias"
    pair = write("pair.txt", f"{A}\n{A2}\n")
    for batch, want_runs, want_batch in [("4", 3, f"{A},{A2}"), ("1", 2, None)]:
        before = runs()
        r = run(sabre, ["kernels", "pack", "--list", pair, "--cache-dir", w("cache_b" + batch), "-j", "1", "--batch", batch,
                        "--json"], env=env)
        doc = json.loads(r.out) if r.code == 0 else {}
        ks = doc.get("kernels", [])
        libs = [f for f in os.listdir(w("cache_b" + batch)) if f.endswith(".so")] if r.code == 0 else []
        check(f"--batch {batch}: {want_runs} compiler runs, both built, one library each",
              r.code == 0 and runs() - before == want_runs and [k["state"] for k in ks] == ["built", "built"] and
              all(k.get("batch") == want_batch for k in ks) and sorted(lb.split("-")[0] for lb in libs) == sorted([A, A2]),
              f"{runs() - before} runs; " + r.out + r.err)

    # ---- stopped half way: what was built stays, the next run builds only the rest ----
    c3 = w("cache3")
    p = subprocess.Popen([sabre, "kernels", "pack", "--list", good, "--cache-dir", c3, "-j", "1"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=dict(env, FAKE_NVCC_SLOW="sm80_conv_fprop"))
    t0, seen = time.time(), ""
    while time.time() - t0 < 60 and "compiled 1/2" not in seen:
        line = p.stderr.readline()
        if not line:
            break
        seen += line
    p.send_signal(signal.SIGTERM)
    p.communicate(timeout=60)
    check("stopped pack: SIGTERM after the first kernel", "compiled 1/2" in seen and p.returncode != 0, seen)
    r = run(sabre, ["kernels", "pack", "--list", good, "--cache-dir", c3, "--dry-run"], env=env)
    check("stopped pack: the built kernel is cached, the stopped one still to build",
          f"cached        {A}" in r.out and f"build         {B}" in r.out and
          not [f for f in os.listdir(c3) if ".tmp-" in f], r.out + str(os.listdir(c3)))

    # ---- sabre compile names the pack's cache hits ----
    r = subprocess.run([sabre, "compile", model, "-o", w("plan.sabre"), "--plan-only", "--no-tune", "--json"],
                       capture_output=True, text=True, env=env, timeout=300)
    plan = json.loads(r.stdout) if r.returncode == 0 else {}
    picked = [k["name"] for k in plan.get("kernel_list", []) if k["kind"] in ("gemm", "conv")]
    check("compile --plan-only --json: kernel_list, planned", picked and
          all(k["origin"] == "planned" for k in plan["kernel_list"]), r.stdout[:300] + r.stderr[-300:])
    model_list = write("model.txt", "\n".join(picked) + "\n")
    r = run(sabre, ["kernels", "pack", "--list", model_list, "--cache-dir", w("cache2"), "-j", "2"], env=env)
    check("pack of the model's kernels", r.code == 0, r.out + r.err)
    r = subprocess.run([sabre, "compile", model, "-o", w("m.sabre"), "--no-tune", "--cache-dir", w("cache2"), "-j", "2",
                        "--json"], capture_output=True, text=True, env=env, timeout=300)
    doc = json.loads(r.stdout) if r.returncode == 0 else {}
    origin = {k["name"]: k["origin"] for k in doc.get("kernel_list", [])}
    check("compile: every picked kernel from the pack, the rest compiled",
          origin and all(origin[n] == "pack" for n in picked) and
          all(o == "compiled" for n, o in origin.items() if n not in picked), str(origin)[:400] + r.stderr[-300:])
    check("compile: progress says how many the pack held", f"({len(picked)} from the kernel pack)" in r.stderr,
          r.stderr[-400:])

    print("FAILED: " + ", ".join(FAILURES) if FAILURES else "all kernel pack checks pass")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
