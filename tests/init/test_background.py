"""
Background processes (X with B) and L, Q, W, S: the list, output kept in
rings and read from offsets, stdin, signals, exit status, and the limit.
"""
import signal
import struct
import time

import pytest

from agentclient import AgentError, field, u32
from inittest import SLOW, pid_gone


def wait_for(pred, timeout=5.0):
    deadline = time.time() + timeout * SLOW
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def start_bg(agent, argv, **kw):
    c, pid = agent.exec_start(argv, background=True, **kw)
    with c:
        c.expect_eof()  # 's' then close
    return pid


def entry(agent, pid):
    return next((p for p in agent.plist() if p["pid"] == pid), None)


def test_background_start_returns_pid_and_closes(agent):
    pid = start_bg(agent, ["sleep", "300"])
    try:
        e = entry(agent, pid)
        assert e["state"] == "R"
        assert e["argv"] == ["sleep", "300"]
        assert abs(e["started"] - time.time()) < 5
    finally:
        agent.psignal(pid, signal.SIGKILL)


def test_query_reads_output_from_offsets(agent):
    pid = start_bg(agent, ["sh", "-c", "echo out-line; echo err-line >&2; sleep 300"])
    try:
        wait_for(lambda: entry(agent, pid)["out"] == 9 and entry(agent, pid)["err"] == 9)
        p, out, err = agent.pquery(pid)
        assert (out, err) == (b"out-line\n", b"err-line\n")
        assert p["state"] == "R" and p["out"] == 9 and p["err"] == 9
        _, out, err = agent.pquery(pid, off_out=4, off_err=9)
        assert (out, err) == (b"line\n", b"")
        _, out, err = agent.pquery(pid, off_out=1000, off_err=1000)
        assert (out, err) == (b"", b"")
    finally:
        agent.psignal(pid, signal.SIGKILL)


def test_stdin_write_and_exit_code_after_exit(agent):
    pid = start_bg(agent, ["sh", "-c", "read a; echo got $a; read b; echo got $b; exit 7"])
    agent.pstdin(pid, b"one\n")
    wait_for(lambda: entry(agent, pid)["out"] == 8)
    agent.pstdin(pid, b"two\n", close=True)
    wait_for(lambda: entry(agent, pid)["state"] == "X")
    p, out, err = agent.pquery(pid)
    assert (p["state"], p["code"], p["signal"]) == ("X", 7, 0)
    assert out == b"got one\ngot two\n"
    # kept after its exit: read it again, then S forgets it
    assert agent.pquery(pid)[1] == b"got one\ngot two\n"
    agent.psignal(pid, signal.SIGTERM)
    with pytest.raises(AgentError) as e:
        agent.pquery(pid)
    assert e.value.errno == 3
    assert entry(agent, pid) is None


def test_close_stdin_ends_cat(agent):
    pid = start_bg(agent, ["cat"])
    agent.pstdin(pid, b"abc", close=True)
    wait_for(lambda: entry(agent, pid)["state"] == "X")
    p, out, _ = agent.pquery(pid)
    assert (p["code"], out) == (0, b"abc")


def test_signal_reaches_the_process_group(agent):
    pid = start_bg(agent, ["sh", "-c", "sleep 300 & echo $!; wait"])
    child = int(wait_for(lambda: agent.pquery(pid)[1]))
    agent.psignal(pid, signal.SIGTERM)
    wait_for(lambda: entry(agent, pid)["state"] == "X")
    p = entry(agent, pid)
    assert (p["code"], p["signal"]) == (-1, signal.SIGTERM)
    assert pid_gone(child)


def test_signal_to_exited_process_forgets_it(agent):
    pid = start_bg(agent, ["true"])
    wait_for(lambda: entry(agent, pid)["state"] == "X")
    agent.psignal(pid, signal.SIGTERM)
    assert entry(agent, pid) is None
    with pytest.raises(AgentError) as e:
        agent.psignal(pid, signal.SIGTERM)
    assert e.value.errno == 3


def test_ring_keeps_the_last_mib(agent):
    pid = start_bg(agent, ["seq", "1", "400000"])
    want = "".join(f"{i}\n" for i in range(1, 400001)).encode()
    wait_for(lambda: entry(agent, pid)["state"] == "X")
    p, out, _ = agent.pquery(pid, off_out=0)
    assert p["out"] == len(want)
    assert out == want[-(1 << 20):]


def test_query_from_a_kept_offset_inside_the_ring(agent):
    pid = start_bg(agent, ["seq", "1", "400000"])
    want = "".join(f"{i}\n" for i in range(1, 400001)).encode()
    wait_for(lambda: entry(agent, pid)["state"] == "X")
    off = len(want) - 1000
    _, out, _ = agent.pquery(pid, off_out=off)
    assert out == want[off:]


def test_unknown_pid_is_esrch(agent):
    for call in (lambda: agent.pquery(999999), lambda: agent.pstdin(999999, b"x"),
                 lambda: agent.psignal(999999, 15)):
        with pytest.raises(AgentError) as e:
            call()
        assert e.value.errno == 3


def test_sixty_four_running_then_eagain(agent):
    pids = [start_bg(agent, ["sleep", "300"]) for _ in range(64)]
    try:
        with pytest.raises(AgentError) as e:
            start_bg(agent, ["sleep", "300"])
        assert e.value.errno == 11
        # a terminal in the background takes a place of the same 64
        with pytest.raises(AgentError) as e:
            start_bg(agent, ["sleep", "300"], pty=(80, 24))
        assert e.value.errno == 11
        assert len(agent.plist()) == 64
    finally:
        for p in pids:
            agent.psignal(p, signal.SIGKILL)
    # exited but unread, they are kept: a list is no read of their output
    wait_for(lambda: all(p["state"] == "X" for p in agent.plist()))
    with pytest.raises(AgentError) as e:
        start_bg(agent, ["true"])
    assert e.value.errno == 11
    assert len(agent.plist()) == 64
    # once one has been read (its exit seen by a query), it makes room
    agent.pquery(pids[0])
    pid = start_bg(agent, ["true"])
    assert entry(agent, pid) is not None
    assert pids[0] not in [p["pid"] for p in agent.plist()]


def test_background_timeout_kills_it(agent):
    pid = start_bg(agent, ["sleep", "300"], timeout_ms=300)
    wait_for(lambda: entry(agent, pid)["state"] == "X")
    assert entry(agent, pid)["signal"] == signal.SIGKILL


def test_query_wait_answers_at_the_output_and_at_the_end(agent):
    """Q with W waits for output past the offsets, then for the end: both come when they happen."""
    pid = start_bg(agent, ["sh", "-c", "sleep 0.5; echo one; sleep 0.5; exit 3"])
    t0 = time.monotonic()
    p, out, err = agent.pquery(pid, wait=True)
    assert (p["state"], out, err) == ("R", b"one\n", b"")
    assert 0.3 < time.monotonic() - t0 < 3 * SLOW
    t1 = time.monotonic()
    p, out, err = agent.pquery(pid, off_out=4, wait=True)
    assert (p["state"], p["code"], out) == ("X", 3, b"")
    assert 0.3 < time.monotonic() - t1 < 3 * SLOW
    # an ended process answers at once, with what is past the offsets
    p, out, _ = agent.pquery(pid, wait=True)
    assert (p["state"], out) == ("X", b"one\n")
    agent.psignal(pid, signal.SIGTERM)


def test_query_wait_left_by_the_host_leaves_the_process(agent):
    """A host that closes a waiting query ends only the wait; the entry is not pinned after."""
    pid = start_bg(agent, ["sh", "-c", "sleep 300"])
    for _ in range(3):
        c = agent.request("Q", field("P", u32(pid)), field("W"))
        time.sleep(0.1)
        c.close()
    time.sleep(0.1)
    assert entry(agent, pid)["state"] == "R"
    agent.psignal(pid, signal.SIGKILL)
    p, _, _ = agent.pquery(pid, wait=True)
    assert (p["state"], p["signal"]) == ("X", signal.SIGKILL)
    agent.psignal(pid, signal.SIGKILL)  # forgets it: no query pins it any more
    assert entry(agent, pid) is None


def test_background_with_z_starts_with_stdin_closed(agent):
    """X with B and Z: the command's stdin reads end of file at once (as /dev/null)."""
    with agent.request("X", field("A", "sh"), field("A", "-c"),
                       field("A", "cat; echo after-eof"), field("B"), field("Z")) as c:
        pid = struct.unpack(">I", c.expect("s"))[0]
        c.expect_eof()
    p, out, _ = agent.pquery(pid, wait=True)
    while p["state"] == "R":
        p, out, _ = agent.pquery(pid, off_out=p["out"], wait=True)
    p, out, _ = agent.pquery(pid)
    assert (p["code"], out) == (0, b"after-eof\n")
    agent.psignal(pid, signal.SIGTERM)


def test_z_without_b_is_refused(agent):
    with agent.request("X", field("A", "true"), field("Z")) as c:
        with pytest.raises(AgentError) as e:
            c.expect("s")
    assert e.value.errno == 22
