"""
Helpers of the nanobox-init tests that test modules import (conftest.py
holds the fixtures).
"""
import os
import time
from pathlib import Path

# The agent runs under a tool (valgrind: $NANOBOX_INIT_WRAPPER) or is an
# ASan/UBSan build ($NANOBOX_INIT_SANITIZED=1): slower, and its memory and
# CPU figures are the tool's, not the agent's.
TOOLED = bool(os.environ.get("NANOBOX_INIT_WRAPPER") or os.environ.get("NANOBOX_INIT_SANITIZED"))
SLOW = 4 if TOOLED else 1
# The ping's answer: the version, then the capabilities (agentproto.h NBA_CAPS).
PONG = "nanobox-init 1 query-wait bg-pty bg-close meta kernel-pipe"


def wait_until(fn, timeout=5.0, interval=0.02, what="condition"):
    """Call fn until it returns something truthy and return that, or fail
    after timeout (times SLOW) saying what was awaited and what fn last gave:
    a state the agent reaches in its own time is waited for, not slept for."""
    deadline = time.time() + timeout * SLOW
    while True:
        last = fn()
        if last:
            return last
        if time.time() > deadline:
            raise AssertionError(f"timed out after {timeout * SLOW}s waiting for {what}; last: {last!r}")
        time.sleep(interval)


def pid_gone(pid, timeout=3.0):
    """True once pid no longer exists (reaped), polling up to timeout."""
    deadline = time.time() + timeout * SLOW
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        if time.time() > deadline:
            return False
        time.sleep(0.02)


def proc_stat(pid):
    """(state, ppid, pgrp, session) of a live process."""
    s = Path(f"/proc/{pid}/stat").read_text()
    f = s[s.rindex(")") + 2:].split()
    return f[0], int(f[1]), int(f[2]), int(f[3])


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def fd_count_settles(pid, want, timeout=3.0):
    """The fd count of pid once it is want, or what it is after timeout."""
    deadline = time.time() + timeout * SLOW
    while fd_count(pid) != want and time.time() < deadline:
        time.sleep(0.02)
    return fd_count(pid)


def fd_baseline(agent, ws=None):
    """The agent's fd count at rest, once an exec opened what it keeps (the cgroup file)."""
    agent.exec(["true"], cwd=str(ws) if ws is not None else None)
    n = -1
    while n != fd_count(agent.pid):
        n = fd_count(agent.pid)
        time.sleep(0.1 * SLOW)
    return n
