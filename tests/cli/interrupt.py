#!/usr/bin/env python3
"""A compile stopped mid-way leaves nothing behind: `sabre compile` of bert_tiny (no GPU: the
analytic model picks, nvcc builds the kernels) is stopped while nvcc's own children (cicc,
ptxas, the host compiler) run, by SIGTERM, by SIGKILL and by closing its output pipe. Within a few
seconds no process it started may remain, no temp file may remain in its kernel cache, and its
exit status must be non-zero (128 + the signal where it handled one).

This process is made a child subreaper, so whatever sabre leaves behind is re-parented here
rather than to init: "no descendant of ours remains" then covers orphans too, and the test kills
them itself on the way out, so it leaves nothing running on CI even when it fails.

usage: interrupt.py SABRE MODEL WORK_DIR     (exit 77: skipped, no nvcc here)
"""
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
COMPILER_CHILDREN = {"cicc", "ptxas", "cudafe++", "cc1plus", "fatbinary", "nvlink"}
START_LIMIT_S = 240  # until nvcc's children run (2 loaded cores: the model's passes, then nvcc)
STOP_LIMIT_S = 10    # from the signal until everything is gone


def proc_table():
    """{pid: (ppid, comm, state)} of every process we can read."""
    table = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                s = f.read()
        except OSError:
            continue
        comm = s[s.index("(") + 1:s.rindex(")")]
        rest = s[s.rindex(")") + 2:].split()
        table[int(d)] = (int(rest[1]), comm, rest[0])
    return table


def descendants(root=None):
    """Live (non-zombie) descendants of `root` (default: this process), as {pid: comm}."""
    root = root or os.getpid()
    table = proc_table()
    kids = {}
    for pid, (ppid, _, _) in table.items():
        kids.setdefault(ppid, []).append(pid)
    out, todo = {}, [root]
    while todo:
        for c in kids.get(todo.pop(), []):
            todo.append(c)
            if table[c][2] != "Z":
                out[c] = table[c][1]
    return out


def reap_orphans():
    """Zombies re-parented to us (we are their subreaper) must be waited for."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_everything_below_us():
    for _ in range(5):
        left = descendants()
        if not left:
            return
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.2)
        reap_orphans()


def temp_files(cache):
    out = []
    for dirpath, _, files in os.walk(cache):
        out += [os.path.join(dirpath, f) for f in files if ".tmp" in f]
    return out


def run_case(sabre, model, work, how):
    case_dir = os.path.join(work, how)
    shutil.rmtree(case_dir, ignore_errors=True)
    os.makedirs(case_dir)
    cache = os.path.join(case_dir, "kernels")
    env = dict(os.environ, XDG_CACHE_HOME=os.path.join(case_dir, "xdg"))  # never the user's tuning DB
    cmd = [sabre, "compile", model, "-o", os.path.join(case_dir, "out.sabre"), "--no-tune", "--cache-dir", cache,
           "-j", "2"]
    log_path = os.path.join(case_dir, "log")
    read_end = None
    trigger = os.path.join(case_dir, "give_up_now")
    if how == "pipe":
        # sabre notices a closed pipe at its next write, a progress line when a kernel ends; a real
        # kernel takes minutes on a loaded box. So nvcc runs through a wrapper that ends at once
        # (status 1) when the test says so, leaving its real nvcc behind for sabre to stop.
        bindir = os.path.join(case_dir, "bin")
        os.makedirs(bindir)
        wrapper = os.path.join(bindir, "nvcc")
        with open(wrapper, "w") as f:
            f.write('#!/bin/sh\n'
                    'case "$1" in --version) exec "$SABRE_TEST_REAL_NVCC" "$@";; esac\n'
                    '"$SABRE_TEST_REAL_NVCC" "$@" &\n'
                    'child=$!\n'
                    'while kill -0 $child 2>/dev/null; do\n'
                    '  [ -e "$SABRE_TEST_TRIGGER" ] && exit 1\n'
                    '  sleep 0.1\n'
                    'done\n'
                    'wait $child\n')
        os.chmod(wrapper, 0o755)
        env.update(SABRE_TEST_REAL_NVCC=real_nvcc(), SABRE_TEST_TRIGGER=trigger,
                   PATH=bindir + os.pathsep + env.get("PATH", ""))
        # stdout and stderr into one pipe; the progress lines are written to it while nvcc runs.
        read_end, write_end = os.pipe()
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=write_end, stderr=write_end, env=env)
        os.close(write_end)
        os.set_blocking(read_end, False)
    else:
        log = open(log_path, "wb")
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env)
    captured = b""
    errors = []
    try:
        start = time.monotonic()
        while True:
            if read_end is not None:
                try:
                    captured += os.read(read_end, 65536)
                except BlockingIOError:
                    pass
            seen = {c for c in descendants(p.pid).values()}
            if seen & COMPILER_CHILDREN:
                break
            if p.poll() is not None:
                text = captured.decode(errors="replace") if read_end is not None else open(log_path).read()
                return [f"{how}: sabre exited ({p.returncode}) before nvcc's children were seen:\n{text[-3000:]}"]
            if time.monotonic() - start > START_LIMIT_S:
                return [f"{how}: no nvcc child process within {START_LIMIT_S} s"]
            time.sleep(0.05)
        running = descendants(p.pid)
        if how == "term":
            p.send_signal(signal.SIGTERM)
        elif how == "kill":
            p.send_signal(signal.SIGKILL)
        else:
            os.close(read_end)
            read_end = None
            open(trigger, "w").close()  # one nvcc ends: sabre writes its progress line
        limit = STOP_LIMIT_S
        try:
            rc = p.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            return [f"{how}: sabre still running {limit} s after the signal"]
        stopped = time.monotonic()
        left = descendants()
        while left and time.monotonic() - stopped < STOP_LIMIT_S:
            time.sleep(0.1)
            reap_orphans()
            left = descendants()
        if left:
            errors.append(f"{how}: processes left {STOP_LIMIT_S} s after sabre ended: {sorted(left.items())} "
                          f"(running at the signal: {sorted(running.items())})")
        temps = temp_files(cache)
        while temps and time.monotonic() - stopped < STOP_LIMIT_S:
            time.sleep(0.1)
            temps = temp_files(cache)
        if temps:
            errors.append(f"{how}: temp files left in the kernel cache: {temps}")
        want = {"term": 128 + signal.SIGTERM, "kill": -signal.SIGKILL, "pipe": 128 + signal.SIGPIPE}[how]
        if rc != want:
            text = open(log_path, errors="replace").read()[-2000:] if how != "pipe" else ""
            errors.append(f"{how}: exit status {rc}, expected {want}\n{text}")
        print(f"{how}: stopped {len(running)} processes ({', '.join(sorted(set(running.values())))}); exit {rc}; "
              f"{'clean' if not errors else 'NOT clean'}")
        return errors
    finally:
        if read_end is not None:
            os.close(read_end)
        if p.poll() is None:
            p.kill()
            p.wait()
        kill_everything_below_us()


def real_nvcc():
    return os.environ.get("SABRE_NVCC") or shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"


def main():
    sabre, model, work = sys.argv[1:4]
    if not shutil.which("nvcc") and not os.path.exists("/usr/local/cuda/bin/nvcc") and not os.environ.get("SABRE_NVCC"):
        print("SKIP: no nvcc here: sabre compile starts no compiler to interrupt")
        return 77
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print("cannot become a child subreaper: orphans would escape the check")
        return 1
    os.makedirs(work, exist_ok=True)
    errors = []
    for how in ("term", "kill", "pipe"):
        errors += run_case(sabre, model, work, how)
    for e in errors:
        print("FAIL", e)
    if not errors:
        shutil.rmtree(work, ignore_errors=True)
    print(f"interrupt: {3 - len({e.split(':')[0] for e in errors})}/3 cases clean")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
