#!/usr/bin/env python3
"""sabre kernels build through the compile cache, with a stand-in nvcc and cuobjdump (no CUDA compile:
each 'kernel' is its source copied): kernels of one family built in one translation unit, each into its
own DIR/NAME.so; a kernel that breaks its batch reported by name while the others build; a second run
that compiles only what failed (the cache's entries reused, a cached failure retried); --batch 1 and a
bad --batch; a name given twice; a library without the SASS its kernel needs reported as a failure.

usage: kernels_build.py SABRE WORK_DIR"""
import os
import shutil
import stat
import sys

from cli_check import error_problems, report, run

FAKE_NVCC = """#!/bin/sh
if [ "$1" = --version ]; then echo "stand-in nvcc for kernels_build.py"; exit 0; fi
echo run >> "$(dirname "$0")/runs"
out=; src=; while [ $# -gt 0 ]; do case "$1" in -o) out=$2; shift;; *.cu|*.o) src=$1;; esac; shift; done
if [ -n "$FAKE_NVCC_FAIL" ] && grep -q "$FAKE_NVCC_FAIL" "$src"; then echo "$src: error: boom" >&2; exit 1; fi
cp "$src" "$out"
"""
# Lists the cubins the stand-in libraries hold: sm_90a unless FAKE_SASS says otherwise.
FAKE_CUOBJDUMP = """#!/bin/sh
echo "ELF file    1: kernel.1.${FAKE_SASS:-sm_90a}.cubin"
"""

A = "sm90_ws_pingpong_tn_f16_f16_f32_64x64x64_c1x1_a8_bias"
B = "sm90_ws_pingpong_tn_f16_f16_f32_64x128x64_c1x1_a8_bias"
C = "sm90_ws_pingpong_tn_f16_f16_f32_64x256x64_c1x1_a8_bias"
FAILURES = []


def check(name, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {name}" + ("" if ok else f": {detail}"))
    if not ok:
        FAILURES.append(name)


def lines_for(out, name):
    """The result lines of `name`: 'ok|FAIL  SECONDSs NAME [(how)]'."""
    return [ln for ln in out.splitlines() if len(ln.split()) >= 3 and ln.split()[2] == name]


def main():
    sabre, work = sys.argv[1:3]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    fake_dir = os.path.join(work, "bin")
    os.makedirs(fake_dir)
    for tool, text in [("nvcc", FAKE_NVCC), ("cuobjdump", FAKE_CUOBJDUMP)]:
        path = os.path.join(fake_dir, tool)
        open(path, "w").write(text)
        os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
    env = dict(os.environ, SABRE_NVCC=os.path.join(fake_dir, "nvcc"), PATH=fake_dir + os.pathsep + os.environ["PATH"])
    env.pop("SABRE_KERNEL_BATCH", None)
    runs_file = os.path.join(fake_dir, "runs")
    runs = lambda: len(open(runs_file).read().splitlines()) if os.path.exists(runs_file) else 0  # noqa: E731
    w = lambda *p: os.path.join(work, *p)  # noqa: E731

    def build(names, out, cache, *extra, env_extra=None):
        return run(sabre, ["kernels", "build", *names, "-o", w(out), "--cache-dir", w(cache), *extra],
                   env=dict(env, **(env_extra or {})))

    # ---- bad input: one clear error line, nothing compiled ----
    open(w("a_file"), "w").write("not a directory\n")
    for name, argv, needles in [
        ("batch size 0", [A, "-o", w("x"), "--batch", "0"], ["--batch", "1 to 16"]),
        ("batch size not a number", [A, "-o", w("x"), "--batch", "four"], ["--batch", "1 to 16"]),
        ("-o names a file", [A, "-o", w("a_file")], ["a_file"]),
    ]:
        r = run(sabre, ["kernels", "build", *argv, "--cache-dir", w("cache_bad")], env=env)
        problems = error_problems(r, needles=needles)
        report(f"build: {name}", r, problems)
        if problems:
            FAILURES.append(name)
    check("bad input compiled nothing", runs() == 0, f"{runs()} compiler runs")

    # ---- one translation unit for the three, one library each ----
    r = build([A, B, C], "out1", "cache1", "-j", "1")
    check("three of one family: exit 0, one compile and three links", r.code == 0 and runs() == 4,
          f"{runs()} runs; " + r.out + r.err)
    check("each printed as built with its batch", all(
        any(ln.startswith("ok") and f"one translation unit with: {A},{B},{C}" in ln for ln in lines_for(r.out, n))
        for n in (A, B, C)), r.out)
    check("each has DIR/NAME.so, .cu and .log", all(
        os.path.exists(w("out1", n + ext)) for n in (A, B, C) for ext in (".so", ".cu", ".log")), str(os.listdir(w("out1"))))
    check("each NAME.cu is the kernel's own source, not its batch's", all(
        n in open(w("out1", n + ".cu")).read() and "a batch of" not in open(w("out1", n + ".cu")).read()
        for n in (A, B, C)), "")

    # ---- a kernel that breaks its batch: named, the others built ----
    before = runs()
    r = build([A, B, C], "out2", "cache2", "-j", "1", env_extra={"FAKE_NVCC_FAIL": B})
    check("failing kernel: exit 1, the batch and then each alone", r.code == 1 and runs() - before == 4,
          f"{runs() - before} runs; " + r.out + r.err)
    check("failing kernel named, the others ok", any(ln.startswith("FAIL") for ln in lines_for(r.out, B)) and
          all(any(ln.startswith("ok") for ln in lines_for(r.out, n)) for n in (A, C)), r.out)
    check("its log on stderr, under its name", f"--- {B} failed" in r.err and "boom" in r.err, r.err)
    check("the others' libraries written, none for the failed one",
          os.path.exists(w("out2", A + ".so")) and os.path.exists(w("out2", C + ".so")) and
          not os.path.exists(w("out2", B + ".so")) and "boom" in open(w("out2", B + ".log")).read(),
          str(os.listdir(w("out2"))))

    # ---- the second run compiles only the failed kernel ----
    before = runs()
    r = build([A, B, C], "out2", "cache2", "-j", "1")
    check("second run: exit 0, only the failed kernel compiled", r.code == 0 and runs() - before == 1,
          f"{runs() - before} runs; " + r.out + r.err)
    check("second run: the others from the cache", all(
        any(ln.startswith("ok") and "(cached)" in ln for ln in lines_for(r.out, n)) for n in (A, C)) and
        os.path.exists(w("out2", B + ".so")), r.out)

    # ---- --batch 1: each alone; a name given twice is built once ----
    before = runs()
    r = build([A, B, A], "out3", "cache3", "-j", "1", "--batch", "1")
    check("--batch 1, A named twice: two compiles", r.code == 0 and runs() - before == 2 and
          "translation unit" not in r.out and len(r.out.splitlines()) == 2, f"{runs() - before} runs; " + r.out + r.err)

    # ---- a library without the SASS its kernel needs is a failure ----
    r = build([A], "out4", "cache4", env_extra={"FAKE_SASS": "sm_90"})
    check("no sm_90a cubin: exit 1, named", r.code == 1 and any(ln.startswith("FAIL") for ln in lines_for(r.out, A)) and
          "SASS check failed" in r.err, r.out + r.err)

    print("FAILED: " + ", ".join(FAILURES) if FAILURES else "all kernels build checks pass")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
