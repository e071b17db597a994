"""
The agent as init: the socket name is taken first and only once, zombies
are reaped, SIGTERM is passed on and the agent exits when its children
are gone or 2 s later.
"""
import os
import signal
import subprocess
import time
from pathlib import Path

from conftest import INIT_BIN
from inittest import SLOW, pid_gone, wait_until


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
    assert a.ping() == "nanobox-init 1"


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


def test_as_pid1_sigterm_reaches_every_process_and_orphans_are_reaped(tmp_path):
    """In a new PID namespace (unshare -fp), as its PID 1."""
    if os.geteuid() != 0:
        import pytest
        pytest.skip("needs root for unshare -p")
    import uuid
    from agentclient import Agent
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
                    import pytest
                    pytest.skip(f"unshare did not start the agent (rc={u.poll()})")
                time.sleep(0.05)
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
        kids = Path(f"/proc/{u.pid}/task/{u.pid}/children").read_text().split()
        assert len(kids) == 1
        t0 = time.time()
        os.kill(int(kids[0]), signal.SIGTERM)
        rc = u.wait(timeout=5 * SLOW)
        assert rc == 0
        assert time.time() - t0 < 1.5 * SLOW
        assert marker.read_text() == "yes\n"
    finally:
        if u.poll() is None:
            u.kill()
            u.wait()
        log.close()
