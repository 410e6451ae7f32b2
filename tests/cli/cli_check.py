"""What every CLI error test asks of a bad command line: a non-zero exit that is not a signal, within
a timeout, no crash text (terminate, sanitizer, segfault, C++ library names), and one clear first
error line 'sabre CMD: error: ...' that names the problem. Shared by cli_errors.py, hostile_inputs.py,
trust_boundaries.py and cli_vocabulary.py."""
import re
import subprocess
from dataclasses import dataclass

CRASH = re.compile(r"terminate called|AddressSanitizer|LeakSanitizer|runtime error:|Segmentation fault|"
                   r"core dumped|Aborted|std::|bad_alloc|filesystem error|basic_string|vector::|"
                   r"json\.exception|CLI::", re.I)
ERROR_LINE = re.compile(r"sabre\b.*\b(error|usage|unknown)\b", re.I)
MAX_LINE = 400


@dataclass
class Result:
    code: object  # int, or None when it hung
    out: str
    err: str
    hung: bool = False

    @property
    def first(self):
        """The error line: commands may print progress first (sabre compile: import ...)."""
        lines = self.err.splitlines()
        return next((ln for ln in lines if re.search(r"\berror\b", ln, re.I)), lines[0] if lines else "")


def run(sabre, argv, timeout=120, env=None, stdout_to=None):
    """Runs `sabre argv`; stdout goes to the file `stdout_to` when given."""
    out = open(stdout_to, "w") if stdout_to else subprocess.PIPE
    try:
        r = subprocess.run([sabre] + list(argv), stdout=out, stderr=subprocess.PIPE, text=True, timeout=timeout,
                           env=env)
        return Result(r.returncode, r.stdout or "", r.stderr)
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        return Result(None, "", err, hung=True)
    finally:
        if stdout_to:
            out.close()


def crashed(r):
    return not r.hung and (r.code < 0 or r.code >= 128 or bool(CRASH.search(r.err + r.out)))


def error_problems(r, patterns=(), needles=(), exit_code=None, max_line=MAX_LINE):
    """What is wrong with `r` as the answer to a bad command line: [] when it is one clear error.
    patterns: regexes stderr must match (case-insensitive); needles: text the error line must hold;
    exit_code: the exact code expected (2 for a usage error), else any non-zero one;
    max_line: the longest error line accepted (None: any; a kernel-signature mismatch quotes both)."""
    problems = []
    if r.hung:
        return ["no answer within the timeout"]
    if r.code == 0:
        problems.append("exit code 0")
    elif r.code < 0 or r.code >= 128:
        problems.append(f"killed by a signal (exit {r.code})")
    elif exit_code is not None and r.code != exit_code:
        problems.append(f"exit {r.code}, expected {exit_code}")
    if CRASH.search(r.err + r.out):
        problems.append("crash text or a C++ name in the output")
    if not ERROR_LINE.match(r.first):
        problems.append("first error line is not a 'sabre ...: error: ...' line")
    elif max_line is not None and len(r.first) > max_line:
        problems.append(f"first error line is {len(r.first)} characters long")
    for p in patterns:
        if not re.search(p, r.err, re.I):
            problems.append(f"stderr lacks /{p}/")
    for n in needles:
        if n not in r.first:
            problems.append(f"error line lacks {n!r}")
    return problems


def report(name, r, problems, stderr_lines=20):
    """Prints 'ok  NAME: exit N: LINE' or FAIL with the problems and the start of stderr."""
    print(f"{'FAIL' if problems else 'ok  '} {name}: exit {r.code}: {r.first[:300]}")
    for p in problems:
        print(f"       {p}")
    if problems and len(r.err.splitlines()) > 1:
        print("       stderr:\n" + "\n".join("         " + ln for ln in r.err.splitlines()[:stderr_lines]))
