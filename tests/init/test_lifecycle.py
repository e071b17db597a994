"""
The agent as init: the socket name is taken first and only once, zombies
are reaped, SIGTERM is passed on and the agent exits when its children
are gone or 2 s later.
"""
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from agentclient import Agent
from conftest import INIT_BIN
from inittest import PONG, SLOW, pid_gone, wait_until


def zombies_of(pid):
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            s = (d / "stat").read_text()
        except OSError:
            continue
        f = s[s.rindex(")") + 2:].split()
        if f[0] == "Z" and int(f[1]) == pid:
            out.append(int(d.name))
    return out


def test_socket_name_in_use_is_refused(agent):
    r = subprocess.run([str(INIT_BIN), "--socket", agent.name], capture_output=True, text=True,
                       timeout=10)
    assert r.returncode == 1
    assert "Address already in use" in r.stderr
    assert agent.ping()


def test_extra_arguments_after_double_dash_are_ignored(spawn_agent):
    a = spawn_agent(extra=["--", "ignored", "--socket", "x"])
    assert a.ping() == PONG


def test_orphans_are_reaped(agent):
    # the sh exits at once; its background sleep is re-parented to the agent
    out, *_ = agent.exec(["sh", "-c", "sleep 0.3 >/dev/null 2>&1 & echo $!"])
    orphan = int(out)
    assert pid_gone(orphan, timeout=3)
    assert zombies_of(agent.pid) == []


def test_sigterm_is_passed_on_and_the_agent_exits(spawn_agent):
    a = spawn_agent()
    c, pid = a.exec_start(["sleep", "300"])
    t0 = time.time()
    a.proc.send_signal(signal.SIGTERM)
    rc = a.proc.wait(timeout=5 * SLOW)
    assert rc == 0
    assert time.time() - t0 < 1.5 * SLOW, "waited for the grace period although all were gone"
    assert pid_gone(pid)
    c.close()


def test_sigterm_right_after_starts_reaches_every_command(spawn_agent):
    # SIGTERM at the agent the moment its commands have started: each must
    # already be in its own group when it is passed on (see proc.c).
    a = spawn_agent()
    started = [a.exec_start(["sleep", "300"]) for _ in range(8)]
    a.proc.send_signal(signal.SIGTERM)
    rc = a.proc.wait(timeout=5 * SLOW)
    assert rc == 0
    assert [pid for _, pid in started if not pid_gone(pid)] == []
    for c, _ in started:
        c.close()


def test_agent_exits_after_2s_when_a_child_ignores_sigterm(spawn_agent):
    a = spawn_agent()
    c, pid = a.exec_start(["sh", "-c", "trap '' TERM; echo ignoring; while :; do sleep 0.1; done"])
    try:
        # the trap is set once it says so: a SIGTERM before would just end it
        assert c.recv() == ("o", b"ignoring\n")
        t0 = time.time()
        a.proc.send_signal(signal.SIGTERM)
        rc = a.proc.wait(timeout=6 * SLOW)
        elapsed = time.time() - t0
        assert rc == 0
        assert 1.8 <= elapsed < 4 * SLOW
    finally:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        c.close()


class Pid1:
    """nanobox-init as PID 1 of a new PID namespace (unshare -fp), as in a
    sandbox: u is unshare, a the agent's client, pid the agent's host pid."""

    def __init__(self, u, a):
        self.u, self.a = u, a
        kids = Path(f"/proc/{u.pid}/task/{u.pid}/children").read_text().split()
        assert len(kids) == 1
        self.pid = int(kids[0])


@pytest.fixture
def pid1(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root for unshare -p")
    name = f"nbtest-{uuid.uuid4().hex[:12]}"
    log = open(tmp_path / "pid1.log", "wb")
    u = subprocess.Popen(["unshare", "-fp", "--mount-proc", str(INIT_BIN), "--socket", name],
                         stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    a = Agent(name)
    try:
        deadline = time.time() + 10 * SLOW
        while True:
            try:
                a.ping()
                break
            except (ConnectionRefusedError, FileNotFoundError):
                if u.poll() is not None or time.time() > deadline:
                    pytest.skip(f"unshare did not start the agent (rc={u.poll()})")
                time.sleep(0.05)
        yield Pid1(u, a)
    finally:
        if u.poll() is None:
            u.kill()
            u.wait()
        log.close()


def test_as_pid1_sigterm_reaches_every_process_and_orphans_are_reaped(pid1, tmp_path):
    """In a new PID namespace (unshare -fp), as its PID 1."""
    a, u = pid1.a, pid1.u
    out, *_ = a.exec(["sh", "-c", "echo $$"])
    assert out == b"2\n" or int(out) > 1  # pids are the namespace's
    # an orphan that exits: reaped by PID 1
    exited = tmp_path / "orphan-exits"
    a.exec(["sh", "-c", f"(sleep 0.2; : > {exited}) >/dev/null 2>&1 &"])
    wait_until(exited.exists, 5, what="the orphan to exit")

    def zombies():
        out, *_ = a.exec(["sh", "-c", "cat /proc/[0-9]*/stat | awk '$3 == \"Z\"' | wc -l"])
        return out.strip()
    wait_until(lambda: zombies() == b"0", 3, what="PID 1 to reap the orphan (zombies left)")
    # a process not started by a request gets SIGTERM too (kill(-1))
    marker = tmp_path / "got-term"
    trapping = tmp_path / "trap-set"
    a.exec(["sh", "-c", f"(trap 'echo yes > {marker}; exit 0' TERM; : > {trapping}; "
                        "while :; do sleep 0.05; done) >/dev/null 2>&1 &"])
    wait_until(trapping.exists, 5, what="the background shell to set its trap")
    t0 = time.time()
    os.kill(pid1.pid, signal.SIGTERM)
    rc = u.wait(timeout=5 * SLOW)
    assert rc == 0
    assert time.time() - t0 < 1.5 * SLOW
    assert marker.read_text() == "yes\n"


# What a sandbox's code can do to make PID 1 see a signal without kill(2)'s
# SI_USER: rt_sigqueueinfo with si_pid forged to 0 (SI_QUEUE), and F_SETSIG
# on a pipe it owns with PID 1 as its owner (POLL_IN, no pid).
FORGE = r"""
import ctypes, fcntl, os, signal, struct
libc = ctypes.CDLL(None, use_errno=True)
info = struct.pack("iiii", signal.SIGTERM, 0, -1, 0) + struct.pack("II", 0, 0) + bytes(104)
rc = libc.syscall(129, 1, signal.SIGTERM, ctypes.c_char_p(info))  # rt_sigqueueinfo
print("sigqueue", rc, ctypes.get_errno())
r, w = os.pipe()
fcntl.fcntl(r, fcntl.F_SETOWN, 1)
fcntl.fcntl(r, 10, signal.SIGTERM)  # F_SETSIG
fcntl.fcntl(r, fcntl.F_SETFL, fcntl.fcntl(r, fcntl.F_GETFL) | os.O_ASYNC)
os.write(w, b"x")
print("setsig done")
"""


def test_as_pid1_signals_from_inside_its_namespace_are_ignored(pid1):
    """A sandbox's root (or its user, PID 1's uid) signals PID 1: nothing
    ends; the same SIGTERM from outside the namespace (docker stop) still
    does (main.c, signal_may_end)."""
    a, u = pid1.a, pid1.u
    c, sleeper = a.exec_start(["sleep", "300"])
    for sig in ("TERM", "INT", "HUP", "QUIT", "USR1", "USR2", "STOP", "KILL"):
        # kill(1) from a command of the agent: the sender has a pid in the namespace
        out, err, *_ = a.exec(["sh", "-c", f"kill -{sig} 1; echo sent=$?"])
        assert out == b"sent=0\n", (sig, out, err)
        assert a.ping() and u.poll() is None, sig
    out, err, *_ = a.exec(["python3", "-c", FORGE])
    assert out == b"sigqueue 0 0\nsetsig done\n", (out, err)
    # PID 1 still serves, its command still runs, new ones start
    assert a.ping() and u.poll() is None
    assert a.exec(["sh", "-c", f"kill -0 {sleeper} && echo alive"])[0] == b"alive\n"
    state = wait_until(lambda: Path(f"/proc/{pid1.pid}/stat").read_text().rsplit(")", 1)[1].split()[0],
                       what="PID 1's state")
    assert state in ("S", "R"), state  # not stopped by SIGSTOP
    # from outside the namespace (the test is its docker stop): the end
    t0 = time.time()
    os.kill(pid1.pid, signal.SIGTERM)
    assert u.wait(timeout=5 * SLOW) == 0
    assert time.time() - t0 < 1.5 * SLOW, "waited for the grace period although all were gone"
    c.close()
