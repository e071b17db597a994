"""
Fixtures of the nanobox-init tests: the agent runs as a plain host process
(not PID 1: it makes itself a child subreaper) on a random abstract socket
name, and the tests speak the protocol to it with agentclient.py.

Builds nothing. The binary is $NANOBOX_INIT, else $NANOBOX_BUILD/nanobox-init,
else build/nanobox-init in the repository (where tests/run.sh builds);
without one every test is skipped with the reason.
$NANOBOX_INIT_WRAPPER (e.g. "valgrind --error-exitcode=99 -q") runs the agent
under a tool; an exit status of 99 then fails the test.
"""
import os
import shlex
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from agentclient import Agent  # noqa: E402
from inittest import SLOW  # noqa: E402

ROOT = HERE.parent.parent


def init_binary():
    if os.environ.get("NANOBOX_INIT"):
        return Path(os.environ["NANOBOX_INIT"])
    if os.environ.get("NANOBOX_BUILD"):
        return Path(os.environ["NANOBOX_BUILD"]) / "nanobox-init"
    return ROOT / "build" / "nanobox-init"


INIT_BIN = init_binary()
WRAPPER = shlex.split(os.environ.get("NANOBOX_INIT_WRAPPER", ""))


def pytest_collection_modifyitems(config, items):
    if INIT_BIN.exists():
        return
    skip = pytest.mark.skip(reason=f"{INIT_BIN} not found: build nanobox-init "
                                   "(make nanobox-init) or set NANOBOX_INIT")
    for item in items:
        item.add_marker(skip)


class AgentProcess(Agent):
    """A running nanobox-init and a client for it."""

    def __init__(self, proc, name, log):
        super().__init__(name)
        self.proc = proc
        self.pid = proc.pid
        self.log = log

    def log_text(self):
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def rss_kib(self):
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0


def start_agent(log, extra=(), env=None, check_ready=True, preexec_fn=None, prefix=()):
    """prefix: a command that execs the rest (its pid stays the agent's)."""
    name = f"nbtest-{uuid.uuid4().hex[:12]}"
    with open(log, "ab") as logf:
        proc = subprocess.Popen([*prefix] + WRAPPER + [str(INIT_BIN), "--socket", name, *extra],
                                stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                                start_new_session=True, env=env, preexec_fn=preexec_fn)
    agent = AgentProcess(proc, name, Path(log))
    if check_ready:
        deadline = time.time() + 10 * SLOW
        while True:
            try:
                agent.ping()
                break
            except (ConnectionRefusedError, FileNotFoundError, ConnectionResetError):
                if proc.poll() is not None or time.time() > deadline:
                    pytest.fail(f"nanobox-init did not start: rc={proc.poll()}\n{agent.log_text()}")
                time.sleep(0.02)
    return agent


def stop_agent(agent, timeout=10):
    if agent.proc.poll() is None:
        agent.proc.send_signal(signal.SIGTERM)
    try:
        return agent.proc.wait(timeout=timeout * SLOW)
    except subprocess.TimeoutExpired:
        agent.proc.kill()
        agent.proc.wait()
        return None


@pytest.fixture
def agent(tmp_path):
    """A fresh agent per test; it must still be alive at the end and exit 0 on SIGTERM."""
    a = start_agent(tmp_path / "agent.log", env={**os.environ, "NBTEST_FROM_AGENT": "agent"})
    yield a
    alive = a.proc.poll() is None
    rc = stop_agent(a)
    assert alive, f"nanobox-init died during the test (rc={a.proc.returncode}):\n{a.log_text()}"
    assert rc == 0, f"nanobox-init exit status {rc} after SIGTERM:\n{a.log_text()}"


@pytest.fixture
def spawn_agent(tmp_path):
    """For tests that stop the agent themselves."""
    started = []

    def spawn(**kw):
        a = start_agent(tmp_path / f"agent{len(started)}.log", **kw)
        started.append(a)
        return a

    yield spawn
    for a in started:
        stop_agent(a)
