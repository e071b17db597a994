"""
fwdtest.py - helpers of the nanobox-fwd tests (fixtures are in conftest.py):
where the binary is, how to start and stop the fake sandbox, and a line
collector for the measurements printed at the end of the run.

Environment: NANOBOX_BUILD (dir holding nanobox-fwd; default <repo>/build),
NANOBOX_FWD_WRAPPER (a command put in front, e.g. "valgrind -q
--error-exitcode=99"; timeouts are then relaxed).
"""
import os
import shlex
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
BUILD = Path(os.environ.get("NANOBOX_BUILD", ROOT / "build"))
FWD_BIN = BUILD / "nanobox-fwd"
WRAPPER = shlex.split(os.environ.get("NANOBOX_FWD_WRAPPER", ""))
SLOW = 10.0 if WRAPPER else 1.0      # timeouts scale with this under valgrind
VALGRIND_ERROR = 99                  # the --error-exitcode the wrapper should use
SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                   "Invalid read", "Invalid write", "Conditional jump", "Syscall param")

RESULTS = []  # (name, value) lines for the terminal summary


def report(name, value):
    RESULTS.append((name, value))


def stop_process(p, sig=signal.SIGTERM, timeout=10):
    """Stop one process we started, by pid; returns its exit status."""
    if p.poll() is None:
        try:
            os.kill(p.pid, sig)
        except ProcessLookupError:
            pass
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.kill(p.pid, signal.SIGKILL)
            p.wait(timeout=10)
    return p.returncode


def start_target():
    p = subprocess.Popen(["unshare", "-n", sys.executable, str(HERE / "netns_target.py")],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    ready, _, _ = select.select([p.stdout], [], [], 15)
    line = p.stdout.readline() if ready else ""
    if line.strip() != "READY":
        stop_process(p, signal.SIGKILL)
        pytest.fail(f"netns target did not start (got {line!r})")
    return p


class Fwd:
    """One nanobox-fwd process and what it said on its ready fd."""

    def __init__(self, proc, ready, unix, log):
        self.proc = proc
        self.ready = ready    # the line, without "\n"
        self.unix = unix
        self.log_path = log
        self.port = int(ready.split()[1]) if ready.startswith("OK ") else None

    @property
    def pid(self):
        return self.proc.pid

    def log(self):
        return self.log_path.read_text(errors="replace")

    def wait(self, timeout):
        return self.proc.wait(timeout=timeout * SLOW)
