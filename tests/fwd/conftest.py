"""
Fixtures of the nanobox-fwd tests: a fake sandbox and forwarders into it.

- target (module): netns_target.py alone in a new network namespace
  (`unshare -n`), like a sandbox with `network: none`; its pid is what a
  forwarder gets as --target-pid.
- spawn_target (function): a factory for more such processes, for tests
  that kill theirs.
- fwd (function): a factory starting nanobox-fwd the way the worker does
  (a pipe for --ready-fd, wait for its one line).

Every process started here is stopped by pid when its test or module ends;
a forwarder that crashed or that a sanitizer or valgrind complained about
fails the test. Needs root (unshare -n, setns). Environment: see fwdtest.py.
"""
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fwdtest import (FWD_BIN, RESULTS, SANITIZER_MARKS, SLOW, VALGRIND_ERROR,  # noqa: E402
                     WRAPPER, Fwd, start_target, stop_process)


def pytest_terminal_summary(terminalreporter):
    if RESULTS:
        terminalreporter.section("nanobox-fwd measurements")
        for name, value in RESULTS:
            terminalreporter.write_line(f"{name}: {value}")


def pytest_sessionstart(session):
    problems = []
    if not FWD_BIN.exists():
        problems.append(f"{FWD_BIN} not found: build it, or point NANOBOX_BUILD at the build dir")
    if os.geteuid() != 0:
        problems.append("the forwarder tests need root (unshare -n, setns)")
    if problems:
        pytest.exit("; ".join(problems), returncode=2)


@pytest.fixture(scope="module")
def target():
    p = start_target()
    yield p
    stop_process(p, signal.SIGKILL)


@pytest.fixture
def spawn_target():
    started = []

    def spawn():
        p = start_target()
        started.append(p)
        return p

    yield spawn
    for p in started:
        stop_process(p, signal.SIGKILL)


@pytest.fixture
def fwd(tmp_path):
    started = []

    def start(target_pid, port, listen="127.0.0.1:0", unix="default", expires_in=120,
              extra=(), expect_ready=True, wrap=()):
        n = len(started)
        if unix == "default":
            unix = str(tmp_path / f"fwd{n}.sock")
        log = tmp_path / f"fwd{n}.log"
        rfd, wfd = os.pipe()
        cmd = list(wrap) + WRAPPER + [
            str(FWD_BIN), "--target-pid", str(target_pid), "--port", str(port),
            "--expires", str(int(time.time() + expires_in)), "--ready-fd", str(wfd)]
        if listen is not None:
            cmd += ["--listen", listen]
        if unix is not None:
            cmd += ["--unix", unix]
        cmd += list(extra)
        with open(log, "wb") as logf:
            p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                                 pass_fds=(wfd,), start_new_session=True)
        os.close(wfd)
        f = Fwd(p, "", unix, log)
        started.append(f)
        line = b""
        deadline = time.time() + 10 * SLOW
        while not line.endswith(b"\n") and time.time() < deadline:
            r, _, _ = select.select([rfd], [], [], 0.2)
            if r:
                chunk = os.read(rfd, 512)
                if not chunk:
                    break
                line += chunk
        os.close(rfd)
        f.ready = line.decode(errors="replace").rstrip("\n")
        f.port = int(f.ready.split()[1]) if f.ready.startswith("OK ") else None
        if expect_ready and f.port is None:
            pytest.fail(f"nanobox-fwd not ready: {f.ready!r}\n{f.log()}")
        return f

    yield start
    problems = []
    for f in started:
        rc = stop_process(f.proc, timeout=10 * SLOW)
        log = f.log()
        # SIGTERM is handled (exit 0): death by a signal is a crash
        if rc < 0 or rc == VALGRIND_ERROR or any(m in log for m in SANITIZER_MARKS):
            problems.append(f"nanobox-fwd pid {f.pid} exit {rc}:\n{log}")
    assert not problems, "\n".join(problems)
