#!/usr/bin/env python3
"""Summarise a ctest JUnit file (ctest --output-junit): a line per skipped test with the reason it
printed, a line per failed test, and last "test.sh: N passed, N failed, N skipped".

usage: ctest_summary.py RESULTS.xml"""
import re
import sys
import xml.etree.ElementTree as ET


def skip_reason(case):
    out = case.findtext("system-out") or ""
    lines = [l.strip() for l in out.splitlines()]
    # gtest: "file:line: Skipped" then the message, then "[  SKIPPED ] Suite.Case".
    for i, l in enumerate(lines):
        if l.endswith(": Skipped") or l == "Skipped":
            msg = []
            for m in lines[i + 1:]:
                if not m or m.startswith("[  SKIPPED ]"):
                    break
                msg.append(m)
            if msg:
                return " ".join(msg)
    said = [l for l in lines if re.search(r"skip", l, re.I) and not l.startswith("[")]
    if said:
        return re.sub(r"^skipped:\s*", "", said[0], flags=re.I)
    node = case.find("skipped")
    why = node.get("message", "") if node is not None else ""
    rest = [l for l in lines if l]
    return (rest[-1] + " " if rest else "") + (f"({why})" if why else "")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    try:
        root = ET.parse(sys.argv[1]).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"test.sh: no test results to summarise ({e})")
        return 1
    passed, failed, skipped = [], [], []
    for case in root.iter("testcase"):
        name = case.get("name", "?")
        node = case.find("skipped")
        why = node.get("message", "") if node is not None else ""
        if case.find("failure") is not None or case.get("status") == "fail":
            failed.append((name, ""))
        elif node is not None or case.get("status") in ("notrun", "disabled"):
            # ctest counts a test that did not run for another reason (a failed fixture) as failed.
            if why.startswith("SKIP_") or why == "Disabled":
                skipped.append((name, skip_reason(case)))
            else:
                failed.append((name, why or "not run"))
        else:
            passed.append(name)
    for name, why in skipped:
        print(f"test.sh: skipped {name}: {why}")
    for name, why in failed:
        print(f"test.sh: FAILED {name}" + (f" ({why})" if why else ""))
    print(f"test.sh: {len(passed)} passed, {len(failed)} failed, {len(skipped)} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
