"""
Request K: the agent hands the host's connection to the code bridge
(docs/AGENT-PROTOCOL.md). The bridge here is a stand-in written for these
tests: it takes each connection from fd 3 as the real one does, sends the
hello, answers one `j` frame with the same JSON and one with its pid, then
`.`. The agent runs as a plain process, so $NANOBOX_KERNEL_BRIDGE (read
only when not PID 1) points it at the stand-in instead of
/.nanobox/kernel/bridge.py.
"""
import ctypes
import json
import os
import select
import shutil
import signal
import struct
import tempfile
import time
from pathlib import Path

import pytest

from agentclient import AgentError, frame
from conftest import WRAPPER, start_agent, stop_agent
from inittest import PONG, SLOW, pid_gone, proc_stat

ENOEXEC, EAGAIN = 8, 11
HELLO = b"nanobox-kernel 1"

FAKE_BRIDGE = r'''
import json, os, socket, struct, sys, threading, time

mode = os.environ.get("FAKE_BRIDGE_MODE", "")
ctl = socket.socket(fileno=int(os.environ["NANOBOX_KERNEL_FD"]))
assert ctl.type == socket.SOCK_SEQPACKET, ctl.type
if mode == "stuck":
    time.sleep(3600)

def send(s, t, body=b""):
    s.sendall(t + struct.pack(">I", len(body)) + body)

def recv_exact(s, n):
    b = b""
    while len(b) < n:
        chunk = s.recv(n - len(b))
        if not chunk:
            return None
        b += chunk
    return b

def serve(s, ahead):
    ahead_len = len(ahead)

    def take(n):
        nonlocal ahead
        got, ahead = ahead[:n], ahead[n:]
        rest = recv_exact(s, n - len(got)) if len(got) < n else b""
        return None if rest is None else got + rest

    with s:
        assert s.getblocking(), "the agent passed a non-blocking socket"
        send(s, b"p", b"nanobox-kernel 1")
        hdr = take(5)
        if hdr is None:
            return
        body = take(struct.unpack(">I", hdr[1:])[0])
        if hdr[:1] != b"j":
            send(s, b"!", struct.pack(">I", 22) + b"want j")
            return
        send(s, b"j", body)
        send(s, b"j", json.dumps({"pid": os.getpid(), "stdin": os.isatty(0) or
                                  os.path.realpath("/proc/self/fd/0"), "ahead": ahead_len}).encode())
        send(s, b".")

while True:
    msg, fds, _flags, _addr = socket.recv_fds(ctl, 1 + 65536, 4)
    if not msg:
        sys.exit(0)
    assert msg[:1] == b"K" and len(fds) == 1, (msg[:16], fds)
    if mode == "once":
        # broken: takes no more connections, yet stays alive. It closes its
        # end before it answers, so the next K always meets a closed socket
        # (closing after would race with a K already queued, and lose it).
        ctl.close()
        serve(socket.socket(fileno=fds[0]), msg[1:])
        time.sleep(3600)
    t = threading.Thread(target=serve, args=(socket.socket(fileno=fds[0]), msg[1:]), daemon=True)
    t.start()
'''


@pytest.fixture
def bridge(tmp_path):
    p = tmp_path / "bridge.py"
    p.write_text(FAKE_BRIDGE)
    return p


@pytest.fixture
def kagent(tmp_path, bridge):
    """Start an agent whose K runs the stand-in bridge; at the end it must
    still be alive (unless the test stopped it) and exit 0 on SIGTERM."""
    started = []

    def start(mode="", path=None, **kw):
        env = {**os.environ, "NANOBOX_KERNEL_BRIDGE": str(path or bridge),
               "FAKE_BRIDGE_MODE": mode}
        a = start_agent(tmp_path / f"agent{len(started)}.log", env=env, **kw)
        started.append(a)
        return a

    yield start
    for a in started:
        stopped = a.proc.returncode is not None
        alive = a.proc.poll() is None
        rc = stop_agent(a)
        assert stopped or alive, f"nanobox-init died during the test:\n{a.log_text()}"
        assert rc == 0, f"nanobox-init exit status {rc}:\n{a.log_text()}"


def kernel_conn(agent):
    c = agent.conn(timeout=10 * SLOW)
    c.send("K")
    return c


def round_trip(c, req):
    """After K: hello, one request, its echo and the bridge's pid, end."""
    assert c.expect("p") == HELLO
    c.send("j", json.dumps(req).encode())
    assert json.loads(c.expect("j")) == req
    info = json.loads(c.expect("j"))
    c.expect(".")
    c.expect_eof()
    return info


def bridge_pid(agent):
    with kernel_conn(agent) as c:
        return round_trip(c, {"op": "contexts"})["pid"]


def open_fds(pid):
    return sorted(int(f) for f in os.listdir(f"/proc/{pid}/fd"))


def settled_fds(pid):
    """The agent's fds once connections just closed by the client are gone."""
    prev, deadline = None, time.time() + 3 * SLOW
    while True:
        cur = open_fds(pid)
        if cur == prev or time.time() > deadline:
            return cur
        prev = cur
        time.sleep(0.1)


def wait_fds(pid, want):
    deadline = time.time() + 3 * SLOW
    while open_fds(pid) != want and time.time() < deadline:
        time.sleep(0.02)
    return open_fds(pid)


def test_connection_goes_to_the_bridge(kagent, bridge):
    a = kagent()
    fds_before = settled_fds(a.pid)
    with kernel_conn(a) as c:
        info = round_trip(c, {"op": "run", "code": "1+1"})
    pid = info["pid"]
    assert info["stdin"] == "/dev/null"
    # the bridge is the agent's child, in a session of its own
    _state, ppid, pgrp, sid = proc_stat(pid)
    assert (ppid, pgrp, sid) == (a.pid, pid, pid)
    env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    assert b"NANOBOX_KERNEL_FD=3" in env
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    assert cmdline[:3] == [b"python3", b"-I", str(bridge).encode()]
    # the same bridge serves the next K; the agent keeps one fd for it, no more
    assert bridge_pid(a) == pid
    assert len(settled_fds(a.pid)) == len(fds_before) + 1
    assert a.ping() == PONG


def test_two_kernel_connections_at_once(kagent):
    a = kagent()
    c1, c2 = kernel_conn(a), kernel_conn(a)
    with c1, c2:
        assert c1.expect("p") == HELLO
        assert c2.expect("p") == HELLO
        c2.send("j", b'{"n":2}')
        c1.send("j", b'{"n":1}')
        assert json.loads(c2.expect("j")) == {"n": 2}
        assert json.loads(c1.expect("j")) == {"n": 1}
        p1, p2 = json.loads(c1.expect("j"))["pid"], json.loads(c2.expect("j"))["pid"]
        assert p1 == p2
        for c in (c1, c2):
            c.expect(".")
            c.expect_eof()


def test_a_dead_bridge_is_reaped_and_respawned(kagent):
    a = kagent()
    fds_before = settled_fds(a.pid)
    first = bridge_pid(a)
    os.kill(first, signal.SIGKILL)
    assert pid_gone(first), "the agent did not reap its bridge"
    # its end of the socketpair is closed with it
    assert wait_fds(a.pid, fds_before) == fds_before
    second = bridge_pid(a)
    assert second != first
    assert proc_stat(second)[1] == a.pid


def test_a_bridge_that_closed_its_socket_is_replaced(kagent):
    # sendmsg fails (EPIPE): the agent kills the broken bridge and passes
    # the same connection to a new one
    a = kagent(mode="once")
    first = bridge_pid(a)
    second = bridge_pid(a)
    assert second != first
    assert pid_gone(first), "the broken bridge was left running"
    assert proc_stat(second)[1] == a.pid


def test_exec_kill_tree_spares_the_bridge(kagent):
    a = kagent()
    pid = bridge_pid(a)
    # a command that times out is killed with its whole tree
    _out, _err, _code, _sig, flags, _ = a.exec(["sh", "-c", "sleep 100 & sleep 100"],
                                                timeout_ms=300)
    assert flags & 1
    assert proc_stat(pid)[0] != "Z"
    assert bridge_pid(a) == pid


def test_shutdown_ends_the_bridge(kagent):
    a = kagent()
    pid = bridge_pid(a)
    a.proc.send_signal(signal.SIGTERM)
    assert a.proc.wait(timeout=5 * SLOW) == 0
    assert pid_gone(pid)


def test_missing_bridge_file_is_enoexec(kagent, tmp_path):
    a = kagent(path=tmp_path / "nope" / "bridge.py")
    fds_before = settled_fds(a.pid)
    for _ in range(2):
        with kernel_conn(a) as c:
            with pytest.raises(AgentError) as e:
                c.expect("p")
            assert e.value.errno == ENOEXEC
            assert e.value.message == "this sandbox's image has no code interpreter (python3)"
            c.expect_eof()
    assert wait_fds(a.pid, fds_before) == fds_before
    assert a.ping() == PONG


def hide_python():
    """preexec: a mount namespace where /usr/local/bin, /usr/bin and /bin are empty."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(0x00020000) != 0:  # CLONE_NEWNS
        raise OSError(ctypes.get_errno(), "unshare")
    libc.mount(b"none", b"/", None, 0x4000 | 0x40000, None)  # MS_REC | MS_PRIVATE
    for d in (b"/usr/local/bin", b"/usr/bin", b"/bin"):
        if libc.mount(b"tmpfs", d, b"tmpfs", 0, None) != 0:
            raise OSError(ctypes.get_errno(), "mount tmpfs")


@pytest.mark.skipif(os.geteuid() != 0 or bool(WRAPPER),
                    reason="needs root (a mount namespace) and a static agent without a wrapper")
def test_no_python3_is_enoexec(kagent):
    a = kagent(preexec_fn=hide_python)
    with kernel_conn(a) as c:
        with pytest.raises(AgentError) as e:
            c.expect("p")
        assert e.value.errno == ENOEXEC
        assert "no code interpreter (python3)" in e.value.message


@pytest.mark.parametrize("size", [2, 200_000])
def test_a_request_sent_with_k_reaches_the_bridge_whole(kagent, size):
    """kernel-pipe: the host sends the j request right after K, without
    waiting for the hello; what the agent read of it goes to the bridge
    with the connection, the rest the bridge reads itself."""
    a = kagent()
    req = {"op": "run", "code": "x" * size}
    body = json.dumps(req).encode()
    with a.conn(timeout=10 * SLOW) as c:
        c.send_raw(frame("K") + frame("j", body))
        assert c.expect("p") == HELLO
        assert json.loads(c.expect("j")) == req
        info = json.loads(c.expect("j"))
        c.expect(".")
        c.expect_eof()
    # the agent passed what it had read of the request (all of a small one)
    assert 0 < info["ahead"] <= 65536
    if size == 2:
        assert info["ahead"] == len(frame("j", body))
    # and the next K without a request ahead still works
    assert bridge_pid(a) == info["pid"]


def test_k_with_a_field_is_einval(kagent):
    a = kagent()
    with a.conn() as c:
        c.send("K", b"F" + struct.pack(">I", 2) + b"/x")
        with pytest.raises(AgentError) as e:
            c.expect("p")
        assert e.value.errno == 22


def test_a_bridge_not_taking_connections_is_eagain(kagent):
    # the socketpair's send buffer fills with connections the bridge does
    # not take (a few hundred): then K answers EAGAIN, the loop never blocks
    a = kagent(mode="stuck")
    held, err = [], None
    try:
        while err is None and len(held) < 4000:
            batch = [kernel_conn(a) for _ in range(50)]
            held += batch
            ready, _, _ = select.select([c.sock for c in batch], [], [], 0.5 * SLOW)
            for c in batch:
                if c.sock in ready:
                    f = c.recv()
                    assert f is not None and f[0] == "!", f
                    err = struct.unpack(">I", f[1][:4])[0]
                    break
    finally:
        for c in held:
            c.close()
    assert err == EAGAIN, f"no EAGAIN after {len(held)} connections"
    assert a.ping() == PONG


def test_no_fds_leak(kagent):
    a = kagent()
    fds_before = settled_fds(a.pid)
    for _ in range(20):
        bridge_pid(a)
        with a.conn() as c:
            c.send("K", b"F" + struct.pack(">I", 2) + b"/x")  # refused: EINVAL
            with pytest.raises(AgentError):
                c.expect("p")
        with a.conn() as c:
            c.send_raw(frame("K") + b"x")  # passed on with its byte ahead; the host leaves
            assert c.expect("p") == HELLO
    # one fd for the live bridge, nothing else
    assert len(settled_fds(a.pid)) == len(fds_before) + 1
    pid = bridge_pid(a)
    os.kill(pid, signal.SIGKILL)
    assert pid_gone(pid)
    assert wait_fds(a.pid, fds_before) == fds_before


@pytest.mark.skipif(os.geteuid() != 0, reason="root mode needs the agent started as root")
def test_root_mode_bridge_runs_as_the_user_without_caps(kagent):
    """In root mode (--user) the bridge drops to the sandbox user, as commands do."""
    d = Path(tempfile.mkdtemp(prefix="nbroot-", dir="/tmp"))
    try:
        os.chmod(d, 0o755)
        p = d / "bridge.py"
        p.write_text(FAKE_BRIDGE)
        p.chmod(0o644)
        a = kagent(path=p, extra=["--user", "65123:65123"])
        pid = bridge_pid(a)
        st = dict(line.split(":", 1) for line in
                  Path(f"/proc/{pid}/status").read_text().splitlines())
        assert st["Uid"].split() == ["65123"] * 4
        for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
            assert int(st[k], 16) == 0, k
    finally:
        shutil.rmtree(d, ignore_errors=True)
