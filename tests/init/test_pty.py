"""
PTY sessions (X with Y): the command's controlling terminal, its window
size and resizes (the 'w' frame on the connection, the Y request from
another one), input from the W request, ^C, the host leaving (hang-up and
the whole tree killed), bad windows, and the sandbox's cap on PTYs.
"""
import errno
import os
import shutil
import signal
import struct
import time

import pytest

from agentclient import AgentError, field, u32, winsize
from conftest import start_agent, stop_agent
from inittest import SLOW, fd_baseline, fd_count_settles, pid_gone, proc_stat


def read_until(c, needle, timeout=10.0):
    """Output ('o' frames) until needle shows; all of it. Fails on exit or timeout."""
    got = b""
    c.sock.settimeout(timeout * SLOW)
    while needle not in got:
        f = c.recv()
        assert f is not None, f"connection closed before {needle!r}; got {got!r}"
        t, body = f
        assert t == "o", f"frame {t!r} {body[:80]!r} before {needle!r}; got {got!r}"
        got += body
    return got


def read_exit(c, timeout=10.0):
    """(output, code, signal, flags) to the exit frame."""
    out = []
    c.sock.settimeout(timeout * SLOW)
    while True:
        f = c.recv()
        assert f is not None, f"connection closed before the exit frame; got {b''.join(out)!r}"
        t, body = f
        if t == "o":
            out.append(body)
        elif t == "x":
            code, sig, flags = struct.unpack(">iBB", body)
            return b"".join(out), code, sig, flags
        else:
            raise AssertionError(f"unexpected frame {t!r} {body[:80]!r}")


def test_the_command_has_the_pty_as_stdin_stdout_stderr_and_controlling_terminal(agent):
    c, pid = agent.exec_start(
        ["sh", "-c", "for fd in 0 1 2; do test -t $fd && echo tty$fd; done; tty; "
         "echo to-stderr >&2"],
        pty=(80, 24))
    with c:
        out, code, sig, _ = read_exit(c)
    assert (code, sig) == (0, 0)
    text = out.decode()
    # the line discipline's ONLCR: lines end in \r\n; stderr comes on the same terminal
    assert "tty0\r\ntty1\r\ntty2\r\n" in text
    assert "/dev/pts/" in text
    assert "to-stderr\r\n" in text
    # a session leader of its own, whose controlling terminal is the PTY
    assert pid > 0


def test_controlling_terminal_is_the_sessions(agent):
    c, pid = agent.exec_start(["sh", "-c", "sleep 30"], pty=(80, 24))
    with c:
        state, ppid, pgrp, sid = proc_stat(pid)
        assert pgrp == pid and sid == pid
        tty_nr = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[4])
        assert tty_nr != 0, "no controlling terminal"
        # /proc's encoding: minor in bits 0-7 and 20-31, major in 8-19
        major, minor = (tty_nr >> 8) & 0xfff, (tty_nr & 0xff) | ((tty_nr >> 12) & 0xfff00)
        stdin = os.stat(f"/proc/{pid}/fd/0").st_rdev
        assert (major, minor) == (os.major(stdin), os.minor(stdin)), "ctty is not its stdin"
        assert os.readlink(f"/proc/{pid}/fd/0").startswith("/dev/pts/")
        c.send("k", bytes([signal.SIGKILL]))
        read_exit(c)


def test_initial_window_size_is_seen_by_stty(agent):
    c, _ = agent.exec_start(["stty", "size"], pty=(132, 43))
    with c:
        out, code, _, _ = read_exit(c)
    assert code == 0
    assert out == b"43 132\r\n"


def test_term_defaults_to_xterm_256color_and_env_overrides_it(agent):
    c, _ = agent.exec_start(["sh", "-c", "echo TERM=$TERM"], pty=(80, 24))
    with c:
        assert read_exit(c)[0] == b"TERM=xterm-256color\r\n"
    c, _ = agent.exec_start(["sh", "-c", "echo TERM=$TERM"], env=["TERM=vt100"], pty=(80, 24))
    with c:
        assert read_exit(c)[0] == b"TERM=vt100\r\n"
    # not on pipes
    out, *_ = agent.exec(["sh", "-c", "echo TERM=${TERM:-unset}"],
                         env=["PATH=" + os.environ["PATH"]])
    assert b"xterm-256color" not in out


def test_input_frames_reach_the_terminal_and_are_echoed(agent):
    c, _ = agent.exec_start(["sh", "-c", "read line; echo got:$line"], pty=(80, 24))
    with c:
        c.send("i", b"hello\r")
        out, code, _, _ = read_exit(c)
    assert code == 0
    assert out == b"hello\r\ngot:hello\r\n"  # the echo, then the command's line


def test_resize_frame_changes_the_window_and_sends_sigwinch(agent):
    script = "trap 'echo winch; stty size' WINCH; stty size; while :; do sleep 0.05; done"
    c, _ = agent.exec_start(["sh", "-c", script], pty=(80, 24))
    with c:
        read_until(c, b"24 80\r\n")
        c.send("w", winsize(100, 30))
        out = read_until(c, b"30 100\r\n")
        assert b"winch" in out
        c.send("k", bytes([signal.SIGKILL]))
        read_exit(c)


def test_resize_request_from_another_connection(agent):
    c, pid = agent.exec_start(["sh", "-c", "stty size; read x; stty size"], pty=(80, 24))
    with c:
        read_until(c, b"24 80\r\n")
        agent.pty(pid, size=(200, 50))
        c.send("i", b"\r")
        out, code, _, _ = read_exit(c)
    assert code == 0
    assert out.endswith(b"50 200\r\n")


def test_input_request_from_another_connection(agent):
    c, pid = agent.exec_start(["sh", "-c", "read a; echo first:$a; read b; echo second:$b"],
                              pty=(80, 24))
    with c:
        agent.pty(pid, b"one\r")
        read_until(c, b"first:one\r\n")
        agent.pty(pid, b"two\r")
        out, code, _, _ = read_exit(c)
    assert code == 0
    assert b"second:two\r\n" in out


def test_ctrl_c_input_interrupts_the_foreground_command(agent):
    c, pid = agent.exec_start(["sleep", "30"], pty=(80, 24))
    with c:
        t0 = time.monotonic()
        c.send("i", b"\x03")
        out, code, sig, _ = read_exit(c)
    assert (code, sig) == (-1, signal.SIGINT)
    assert time.monotonic() - t0 < 5 * SLOW
    assert b"^C" in out  # the line discipline echoes it
    assert pid_gone(pid)


def _ignore_int_and_quit():
    # what a non-interactive shell does to a job it puts in the background
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGQUIT, signal.SIG_IGN)


def test_ctrl_c_reaches_a_command_of_an_agent_started_with_sigint_ignored(tmp_path):
    # Ignored signals survive exec: the agent, started as a background job
    # (`.ci/run &` under a plain sh), must still give its commands default
    # dispositions, or ^C and ^\ reach no command it starts.
    a = start_agent(tmp_path / "agent.log", preexec_fn=_ignore_int_and_quit)
    try:
        for key, sig in ((b"\x03", signal.SIGINT), (b"\x1c", signal.SIGQUIT)):
            c, _ = a.exec_start(["sleep", "30"], pty=(80, 24))
            with c:
                c.send("i", key)
                _, code, got, _ = read_exit(c)
            assert (code, got) == (-1, sig)
    finally:
        assert stop_agent(a) == 0


def test_eof_frame_is_ignored_and_ctrl_d_ends_input(agent):
    c, _ = agent.exec_start(["sh", "-c", "cat; echo cat-done"], pty=(80, 24))
    with c:
        c.send("e")  # a terminal has no end of file to close
        c.send("i", b"abc\r")
        read_until(c, b"abc\r\nabc\r\n")
        c.send("i", b"\x04")
        out, code, _, _ = read_exit(c)
    assert code == 0
    assert b"cat-done" in out


def test_exit_code_and_all_output_come_before_the_exit_frame(agent):
    c, _ = agent.exec_start(["sh", "-c", "seq 1 20000; exit 3"], pty=(80, 24))
    with c:
        out, code, sig, flags = read_exit(c)
    assert (code, sig, flags) == (3, 0, 0)
    assert out.endswith(b"19999\r\n20000\r\n")
    assert out.count(b"\r\n") == 20000


def test_output_is_not_capped_by_default_but_m_still_caps(agent):
    n = 17 * 1024 * 1024  # over the 16 MiB cap of exec on pipes
    c, _ = agent.exec_start(["head", "-c", str(n), "/dev/zero"], pty=(80, 24))
    with c:
        out, code, _, flags = read_exit(c, timeout=60)
    assert code == 0 and flags == 0
    assert len(out) == n
    c, _ = agent.exec_start(["head", "-c", "100000", "/dev/zero"], pty=(80, 24), maxout=1000)
    with c:
        out, code, _, flags = read_exit(c)
    assert len(out) == 1000 and flags & 2


def test_host_leaving_hangs_up_and_kills_the_whole_tree(agent):
    # a shell with job control, a background job in its own group, and one
    # that ignores SIGHUP
    script = "sleep 301 & nohup sleep 302 >/dev/null 2>&1 & echo started; wait"
    c, pid = agent.exec_start(["bash", "-i", "-c", script] if shutil.which("bash")
                              else ["sh", "-c", script], pty=(80, 24))
    read_until(c, b"started")
    kids = []
    deadline = time.time() + 5 * SLOW
    while len(kids) < 2 and time.time() < deadline:
        kids = [int(p) for p in os.listdir("/proc") if p.isdigit() and _descends(int(p), pid)]
        time.sleep(0.05)
    assert len(kids) >= 2, kids
    c.close()
    assert pid_gone(pid), "the session leader survived its host"
    for k in kids:
        assert pid_gone(k), f"{k} survived the hang-up"
    assert agent.proc.poll() is None


def _descends(p, root):
    try:
        for _ in range(64):
            _, ppid, _, _ = proc_stat(p)
            if ppid == root:
                return True
            if ppid <= 1:
                return False
            p = ppid
    except (FileNotFoundError, ProcessLookupError):
        return False
    return False


def test_unknown_pid_is_esrch_for_resize_and_input(agent):
    for kw in ({"size": (80, 24)}, {"data": b"x"}, {}):
        with pytest.raises(AgentError) as e:
            agent.pty(999999, **kw)
        assert e.value.errno == errno.ESRCH
        assert "no PTY session 999999" in e.value.message


def test_y_reaches_only_pty_sessions_and_w_only_background_processes(agent):
    c, pid = agent.exec_start(["sleep", "30"])  # on pipes
    with c:
        with pytest.raises(AgentError) as e:
            agent.pty(pid, data=b"x", size=(80, 24))
        assert e.value.errno == errno.ESRCH
        c.send("k", bytes([signal.SIGKILL]))
    c, pid = agent.exec_start(["cat"], pty=(80, 24))
    with c:
        with pytest.raises(AgentError) as e:
            agent.pstdin(pid, b"x")
        assert e.value.errno == errno.ESRCH
        agent.pty(pid, data=b"both\r", size=(90, 30))  # input and window in one request
        read_until(c, b"both\r\nboth\r\n")
        c.send("k", bytes([signal.SIGKILL]))
        read_exit(c)


@pytest.mark.parametrize("cols,rows", [(0, 24), (80, 0), (1001, 24), (80, 1001), (0, 0)])
def test_a_bad_window_is_refused(agent, cols, rows):
    with pytest.raises(AgentError) as e:
        agent.exec_start(["true"], pty=(cols, rows))
    assert e.value.errno == errno.EINVAL
    assert "1 to 1000" in e.value.message
    c, pid = agent.exec_start(["sleep", "30"], pty=(80, 24))
    with c:
        with pytest.raises(AgentError) as e:
            agent.pty(pid, size=(cols, rows))
        assert e.value.errno == errno.EINVAL
        c.send("k", bytes([signal.SIGKILL]))
        read_exit(c)


# --- background PTYs (X with B and Y) ------------------------------------------------------------


def start_bg_pty(agent, argv, size=(80, 24), **kw):
    """A background process on a PTY: 's' then close; its pid."""
    c, pid = agent.exec_start(argv, pty=size, background=True, **kw)
    with c:
        c.expect_eof()
    return pid


def query_until(agent, pid, needle, off=0, timeout=10.0):
    """Q (with W) from offset off until the output from there holds needle: (entry, output)."""
    deadline = time.time() + timeout * SLOW
    got = b""
    while needle not in got:
        assert time.time() < deadline, f"{needle!r} never came; got {got!r}"
        p, out, err = agent.pquery(pid, off_out=off + len(got), wait=True)
        assert err == b"", "a terminal has one output"
        got += out
        if p["state"] == "X":
            assert needle in got, f"exited before {needle!r}; got {got!r}"
    return p, got


def wait_exited(agent, pid, timeout=5.0):
    deadline = time.time() + timeout * SLOW
    while True:
        p, _, _ = agent.pquery(pid)
        if p["state"] == "X":
            return p
        assert time.time() < deadline, p
        time.sleep(0.02)


def test_background_pty_outlives_its_connection_and_is_read_by_offset(agent):
    pid = start_bg_pty(agent, ["sh", "-c", "stty size; test -t 0 && test -t 2 && echo tty; "
                                           "echo to-stderr >&2; exec cat"])
    # the start's connection is closed: the terminal runs on, its output kept
    p, out = query_until(agent, pid, b"to-stderr\r\n")
    assert out.startswith(b"24 80\r\ntty\r\n")
    assert p["state"] == "R" and p["pty"] and p["err"] == 0
    n = p["out"]
    assert n == len(out)
    # input through Y reaches it (echoed by the line discipline, then cat's copy)
    agent.pty(pid, data=b"typed\r")
    _, more = query_until(agent, pid, b"typed\r\ntyped\r\n", off=n)
    assert more == b"typed\r\ntyped\r\n"
    # W reaches it too; an older offset reads again what is kept
    agent.pstdin(pid, b"w-input\r")
    query_until(agent, pid, b"w-input\r\nw-input\r\n", off=n)
    _, again, _ = agent.pquery(pid, off_out=3)
    assert again.startswith(b"80\r\ntty\r\n")
    agent.psignal(pid, signal.SIGKILL)
    p = wait_exited(agent, pid)
    assert (p["code"], p["signal"], p["pty"]) == (-1, signal.SIGKILL, True)


def test_background_pty_window_follows_y(agent):
    pid = start_bg_pty(agent, ["sh"], size=(100, 30))
    try:
        agent.pty(pid, data=b"stty size\r")
        _, out = query_until(agent, pid, b"30 100\r\n")
        agent.pty(pid, size=(120, 40))
        agent.pty(pid, data=b"stty size\r")
        query_until(agent, pid, b"40 120\r\n", off=len(out))
    finally:
        agent.psignal(pid, signal.SIGKILL)


def test_background_pty_is_listed_with_t_and_a_pipe_one_without(agent):
    tty = start_bg_pty(agent, ["sleep", "300"])
    c, piped = agent.exec_start(["sleep", "300"], background=True)
    c.close()
    try:
        got = {p["pid"]: p for p in agent.plist()}
        assert got[tty]["pty"] is True and got[tty]["argv"] == ["sleep", "300"]
        assert got[piped]["pty"] is False
        # Y reaches the background PTY, not the process on pipes
        agent.pty(tty, size=(90, 30))
        with pytest.raises(AgentError) as e:
            agent.pty(piped, size=(90, 30))
        assert e.value.errno == errno.ESRCH
    finally:
        agent.psignal(tty, signal.SIGKILL)
        agent.psignal(piped, signal.SIGKILL)


def test_background_pty_killed_and_forgotten_leaves_no_fd(agent):
    base = fd_baseline(agent)
    pid = start_bg_pty(agent, ["sh", "-c", "sleep 300 & exec cat"])
    assert fd_count_settles(agent.pid, base + 2) == base + 2, [
        os.readlink(f"/proc/{agent.pid}/fd/{f}") for f in os.listdir(f"/proc/{agent.pid}/fd")
    ]  # the master, twice (to write, to read)
    agent.pty(pid, data=b"x")
    agent.psignal(pid, signal.SIGKILL)
    p = wait_exited(agent, pid)
    assert p["signal"] == signal.SIGKILL
    assert fd_count_settles(agent.pid, base) == base
    # the terminal is gone with it: Y finds no PTY
    with pytest.raises(AgentError) as e:
        agent.pty(pid, data=b"x")
    assert e.value.errno == errno.ESRCH
    agent.psignal(pid, signal.SIGKILL)  # forgets the exited entry
    assert pid not in [q["pid"] for q in agent.plist()]


def test_background_pty_timeout_kills_it(agent):
    pid = start_bg_pty(agent, ["sleep", "300"], timeout_ms=300)
    p = wait_exited(agent, pid)
    assert (p["signal"], p["pty"]) == (signal.SIGKILL, True)


def test_background_pty_exit_code_after_all_its_output(agent):
    pid = start_bg_pty(agent, ["sh", "-c", "echo last; exit 3"])
    p = wait_exited(agent, pid)
    _, out, _ = agent.pquery(pid)
    assert (p["code"], out) == (3, b"last\r\n")


def test_a_bad_resize_frame_is_a_protocol_error_and_kills_the_command(agent):
    c, pid = agent.exec_start(["sleep", "30"], pty=(80, 24))
    with c:
        c.send("w", b"\x00\x50")  # 2 bytes
        body = c.expect("!")
        assert struct.unpack(">I", body[:4])[0] == errno.EPROTO
    assert pid_gone(pid)
    c, pid = agent.exec_start(["sleep", "30"])  # not on a PTY
    with c:
        c.send("w", winsize(80, 24))
        body = c.expect("!")
        assert struct.unpack(">I", body[:4])[0] == errno.EPROTO
        assert b"PTY" in body
    assert pid_gone(pid)


@pytest.fixture
def capped_agent(tmp_path):
    """An agent whose /dev/pts is a devpts of its own with max=2, as a sandbox's."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) to mount a devpts of its own")
    prefix = ["unshare", "-m", "sh", "-c",
              "mount --make-rprivate / && "
              "mount -t devpts -o newinstance,ptmxmode=0666,max=2 devpts /dev/pts && "
              'exec "$@"', "sh"]
    a = start_agent(tmp_path / "agent.log", prefix=prefix)
    yield a
    stop_agent(a)


def test_the_sandboxs_pty_cap_gives_eagain_with_a_clear_message(capped_agent):
    a = capped_agent
    c1, _ = a.exec_start(["sleep", "30"], pty=(80, 24))
    c2, _ = a.exec_start(["sleep", "30"], pty=(80, 24))
    with pytest.raises(AgentError) as e:
        a.exec_start(["sleep", "30"], pty=(80, 24))
    assert e.value.errno == errno.EAGAIN
    assert "sandbox_ptys" in e.value.message
    # commands on pipes still run
    assert a.exec(["echo", "ok"])[0] == b"ok\n"
    # a terminal closed frees its place
    c1.close()
    deadline = time.time() + 5 * SLOW
    while True:
        try:
            c3, _ = a.exec_start(["stty", "size"], pty=(80, 24))
            break
        except AgentError as e:
            assert e.errno == errno.EAGAIN and time.time() < deadline
            time.sleep(0.05)
    with c3:
        assert read_exit(c3)[0] == b"24 80\r\n"
    c2.close()
    assert a.proc.poll() is None
