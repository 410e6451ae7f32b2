#!/usr/bin/env python3
"""Compares a kernel's SASS between two kernel libraries, e.g. one built alone and one linked from a batch
(tune/compile_batch.h): each function of FIRST.so is looked up in SECOND.so by its mangled name (CUTLASS
kernels are named by CUTLASS types only, so the name is the same in both) and their instructions are
compared without addresses and encodings. Exit 0 when every function of FIRST is identical in SECOND.

usage: sass_diff.py FIRST.so SECOND.so   ($CUOBJDUMP, else cuobjdump on PATH)"""
import os
import re
import subprocess
import sys


def functions(lib):
    out = subprocess.run([os.environ.get("CUOBJDUMP", "cuobjdump"), "-sass", lib], capture_output=True, text=True,
                         check=True).stdout
    funcs, name = {}, None
    for line in out.splitlines():
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            name = m.group(1)
            funcs[name] = []
            continue
        m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s*(.*?)\s*;?\s*(/\*.*\*/)?\s*$", line)
        if name and m and m.group(1):
            funcs[name].append(re.sub(r"\s+", " ", m.group(1)))
    return funcs


def main():
    first, second = functions(sys.argv[1]), functions(sys.argv[2])
    bad = 0
    for name, ins in first.items():
        other = second.get(name)
        if other == ins:
            print(f"identical: {len(ins)} instructions, {name[:60]}...")
            continue
        bad += 1
        print(f"DIFFERENT: {name[:60]}... " + ("absent from " + sys.argv[2] if other is None else
                                               f"{len(ins)} vs {len(other)} instructions"))
    print(f"{len(first) - bad} of {len(first)} functions identical ({len(second)} functions in {sys.argv[2]})")
    return 1 if bad or not first else 0


if __name__ == "__main__":
    sys.exit(main())
