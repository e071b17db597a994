"""
Root mode (nanobox-init --user UID:GID), exec with R (root without
capabilities) and I (stdio passed as fds), and the sudo client (the binary
run under the name sudo). The agent runs as root here, as the container
starts it in root mode; 65123 stands for the sandbox user.
"""
import errno
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from agentclient import AgentError, field, frame, u32, winsize
from conftest import INIT_BIN, stop_agent
from inittest import SLOW, fd_baseline, fd_count_settles, pid_gone

UID = GID = 65123
NO_ROOT = "a nanobox sandbox has no root: commands run as the sandbox user, with no capabilities"
CAPS = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="root mode tests run as root")


@pytest.fixture
def ws():
    """A workspace the sandbox user owns (tmp_path is root's 0700), with sudo in it."""
    d = Path(tempfile.mkdtemp(prefix="nbroot-", dir="/tmp"))
    os.chmod(d, 0o755)
    os.chown(d, UID, GID)
    (d / "sudo").symlink_to(INIT_BIN.resolve())
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def root_agent(spawn_agent):
    """As conftest's agent fixture, in root mode: alive at the end, exit 0 on SIGTERM."""
    a = spawn_agent(extra=["--user", f"{UID}:{GID}"])
    yield a
    assert a.proc.poll() is None, f"nanobox-init died:\n{a.log_text()}"
    rc = stop_agent(a)
    assert rc == 0, f"nanobox-init exit status {rc} after SIGTERM:\n{a.log_text()}"


def status_of(text):
    """/proc/PID/status text as {key: [values]}."""
    out = {}
    for line in text.splitlines():
        k, _, v = line.partition(":")
        out[k] = v.split()
    return out


def self_status(agent, ws, **kw):
    out, err, code, _, _, _ = agent.exec(["cat", "/proc/self/status"], cwd=str(ws), **kw)
    assert code == 0, err
    return status_of(out.decode())


def assert_no_caps(st):
    for k in CAPS:
        assert int(st[k][0], 16) == 0, (k, st[k])


# --- the agent in root mode ----------------------------------------------------------------------


def test_root_mode_agent_keeps_uid_0_with_the_users_fs_ids_and_four_caps(root_agent):
    st = status_of(Path(f"/proc/{root_agent.pid}/status").read_text())
    assert st["Uid"] == ["0", "0", "0", str(UID)]
    assert st["Gid"] == ["0", "0", "0", str(GID)]
    assert st["Groups"] == [str(GID)]
    # SETGID 6, SETUID 7, SETPCAP 8, KILL 5
    want = (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8)
    assert int(st["CapEff"][0], 16) == want
    assert int(st["CapPrm"][0], 16) == want
    assert int(st["CapBnd"][0], 16) == want
    assert int(st["CapInh"][0], 16) == 0


def test_user_option_needs_uid_0(spawn_agent, tmp_path):
    def drop():
        os.setgid(GID)
        os.setuid(UID)

    a = spawn_agent(extra=["--user", f"{UID}:{GID}"], check_ready=False, preexec_fn=drop)
    assert a.proc.wait(timeout=10 * SLOW) == 2
    assert "needs to be started as uid 0" in a.log_text()


@pytest.mark.parametrize("spec", ["abc", "0:0", "65123", "65123:", "1:2:3"])
def test_user_option_bad_spec(spawn_agent, spec):
    a = spawn_agent(extra=["--user", spec], check_ready=False)
    assert a.proc.wait(timeout=10 * SLOW) == 2
    assert "--user wants UID:GID" in a.log_text()


def test_ordinary_command_runs_as_the_user_without_caps(root_agent, ws):
    st = self_status(root_agent, ws)
    assert st["Uid"] == [str(UID)] * 4
    assert st["Gid"] == [str(GID)] * 4
    assert st["Groups"] == [str(GID)]
    assert_no_caps(st)


def test_root_command_is_uid_0_without_any_capability(root_agent, ws):
    st = self_status(root_agent, ws, root=True)
    assert st["Uid"] == ["0"] * 4
    assert st["Gid"] == ["0"] * 4
    assert st["Groups"] == []
    assert_no_caps(st)
    assert st["NoNewPrivs"] == ["1"]


def test_root_command_environment(root_agent, ws):
    sh = ["sh", "-c", 'echo "$HOME $USER $LOGNAME"']
    out, _, code, _, _, _ = root_agent.exec(sh, cwd=str(ws), root=True)
    assert (code, out) == (0, b"/root root root\n")
    out, _, code, _, _, _ = root_agent.exec(sh, cwd=str(ws), root=True, env=["HOME=/x", "USER=u"])
    assert (code, out) == (0, b"/x u root\n")


def test_root_has_no_capabilities_for_what_the_kernel_guards(root_agent, ws):
    # a file only its owner may read: root without DAC_OVERRIDE is refused
    secret = ws / "secret"
    secret.write_text("x")
    os.chown(secret, UID, GID)
    os.chmod(secret, 0o600)
    _, err, code, _, _, _ = root_agent.exec(["cat", str(secret)], cwd=str(ws), root=True)
    assert code != 0 and b"Permission denied" in err
    # but what root owns it may write
    rootfile = ws / "rootfile"
    rootfile.write_text("")
    os.chmod(rootfile, 0o644)
    _, err, code, _, _, _ = root_agent.exec(["sh", "-c", f"echo hi > {rootfile}"], cwd=str(ws),
                                            root=True)
    assert code == 0, err
    assert rootfile.read_text() == "hi\n"


def test_files_are_handled_as_the_user(root_agent, ws):
    i = root_agent.write(str(ws / "up.txt"), b"data")
    st = os.stat(ws / "up.txt")
    assert (st.st_uid, st.st_gid, i["size"]) == (UID, GID, 4)
    root_agent.mkdir(str(ws / "d/e"))
    assert os.stat(ws / "d/e").st_uid == UID
    # a directory root owns is not the user's to write
    rootdir = ws / "rootdir"
    rootdir.mkdir(mode=0o755)
    with pytest.raises(AgentError) as e:
        root_agent.write(str(rootdir / "f"), b"x")
    assert e.value.errno == errno.EACCES
    assert not (rootdir / "f").exists()


def test_root_without_root_mode_is_eperm(agent, ws):
    with pytest.raises(AgentError) as e:
        agent.exec(["true"], cwd=str(ws), root=True)
    assert e.value.errno == errno.EPERM
    assert e.value.message == NO_ROOT


@pytest.mark.parametrize("root", [True, False])
def test_timeout_kills_the_whole_tree(root_agent, ws, root):
    sh = "sleep 100 & echo $!; setsid sleep 100 & echo $!; wait"
    out, _, _, sig, flags, _ = root_agent.exec(["sh", "-c", sh], cwd=str(ws), root=root,
                                               timeout_ms=int(500 * SLOW))
    assert flags & 1 and sig == signal.SIGKILL
    pids = [int(p) for p in out.split()]
    assert len(pids) == 2
    for p in pids:
        assert pid_gone(p), p


def test_background_root_process_list_signal(root_agent, ws):
    c, pid = root_agent.exec_start(["sleep", "100"], cwd=str(ws), root=True, background=True)
    c.close()
    st = status_of(Path(f"/proc/{pid}/status").read_text())
    assert st["Uid"] == ["0"] * 4
    assert_no_caps(st)
    assert pid in [p["pid"] for p in root_agent.plist()]
    root_agent.psignal(pid, signal.SIGTERM)
    deadline = time.time() + 5 * SLOW
    while True:
        p, _, _ = root_agent.pquery(pid)
        if p["state"] == "X" or time.time() > deadline:
            break
        time.sleep(0.02)
    assert (p["state"], p["signal"]) == ("X", signal.SIGTERM)


def test_pty_root_command(root_agent, ws):
    out, _, code, _, _, _ = root_agent.exec(["id", "-u"], cwd=str(ws), root=True, pty=(80, 24))
    assert code == 0
    assert out == b"0\r\n"


def test_background_pty_root_command(root_agent, ws):
    c, pid = root_agent.exec_start(["sh", "-c", "id -u; exec cat"], cwd=str(ws), root=True,
                                   background=True, pty=(80, 24))
    c.close()
    st = status_of(Path(f"/proc/{pid}/status").read_text())
    assert st["Uid"] == ["0"] * 4
    assert_no_caps(st)
    def output_holds(needle):
        deadline = time.time() + 5 * SLOW
        while True:
            p, out, _ = root_agent.pquery(pid, wait=True)
            if needle in out or time.time() > deadline:
                return p, out
            time.sleep(0.02)

    _, out = output_holds(b"\r\n")
    assert out == b"0\r\n"
    root_agent.pty(pid, data=b"typed\r")
    p, out = output_holds(b"typed\r\ntyped\r\n")
    assert out == b"0\r\ntyped\r\ntyped\r\n"
    assert p["pty"] is True
    root_agent.psignal(pid, signal.SIGKILL)
    assert pid_gone(pid)


# --- I: stdio passed as fds ----------------------------------------------------------------------


def exec_fds(agent, argv, fds, extra=(), ws=None):
    """An X with I and the given fds attached to its frame: the open connection."""
    body = b"".join(field("A", a) for a in argv) + field("I") + b"".join(extra)
    if ws is not None:
        body += field("C", str(ws))
    c = agent.conn()
    socket.send_fds(c.sock, [frame("X", body)], fds)
    return c


def wait_exit(c):
    """The x frame's (code, signal, flags); an error frame raises AgentError."""
    return struct.unpack(">iBB", c.expect("x"))


@pytest.mark.parametrize("root", [True, False])
def test_stdio_passed_output_lands_in_the_pipes(root_agent, ws, root):
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    before = fd_baseline(root_agent, ws)
    sh = 'echo out; echo err >&2; read x; echo "got $x $(id -u)"; exit 3'
    c = exec_fds(root_agent, ["sh", "-c", sh], [in_r, out_w, err_w],
                 extra=[field("R")] if root else [], ws=ws)
    for fd in (in_r, out_w, err_w):
        os.close(fd)
    os.write(in_w, b"hello\n")
    os.close(in_w)
    with c:
        assert c.expect("s")
        assert wait_exit(c) == (3, 0, 0)
        c.expect_eof()
    # end of file: the agent holds no copy of the write ends
    with os.fdopen(out_r, "rb") as f:
        assert f.read() == f"out\ngot hello {0 if root else UID}\n".encode()
    with os.fdopen(err_r, "rb") as f:
        assert f.read() == b"err\n"
    assert fd_count_settles(root_agent.pid, before) == before


def test_stdio_passed_k_frame_and_host_gone(root_agent, ws):
    r, w = os.pipe()
    try:
        c = exec_fds(root_agent, ["sh", "-c", "echo $$; exec sleep 100"], [r, w, w],
                     extra=[field("R")], ws=ws)
        with c:
            c.expect("s")
            pid = int(os.read(r, 100))
            c.send("k", bytes([signal.SIGTERM]))
            assert wait_exit(c) == (-1, signal.SIGTERM, 0)
        assert pid_gone(pid)
        c = exec_fds(root_agent, ["sh", "-c", "echo $$; exec sleep 100"], [r, w, w],
                     extra=[field("R")], ws=ws)
        c.expect("s")
        pid = int(os.read(r, 100))
        c.close()
        assert pid_gone(pid)
    finally:
        os.close(r)
        os.close(w)


@pytest.mark.parametrize("extra,nfds", [([field("B")], 3), ([field("Y", winsize(80, 24))], 3),
                                        ([], 2), ([], 0)])
def test_stdio_passed_invalid(root_agent, ws, extra, nfds):
    r, w = os.pipe()
    before = fd_baseline(root_agent, ws)
    try:
        c = exec_fds(root_agent, ["true"], [r, w, w][:nfds], extra=extra, ws=ws)
        with c, pytest.raises(AgentError) as e:
            c.expect("s")
        assert e.value.errno == errno.EINVAL
    finally:
        os.close(r)
        os.close(w)
    assert fd_count_settles(root_agent.pid, before) == before


def test_fds_on_other_requests_and_frames_are_closed(root_agent, ws):
    r, w = os.pipe()
    before = fd_baseline(root_agent, ws)
    try:
        for _ in range(5):
            c = root_agent.conn()
            socket.send_fds(c.sock, [frame("P")], [r, w, w, r])
            with c:
                assert c.expect("p").startswith(b"nanobox-init")
        # a plain exec, fds on its stdin frame
        c, _ = root_agent.exec_start(["cat"], cwd=str(ws))
        with c:
            socket.send_fds(c.sock, [frame("i", b"abc")], [r, w])
            c.send("e")
            out, _, code, _, _, _ = root_agent.exec_collect(c)
        assert (out, code) == (b"abc", 0)
        os.close(w)
        w = -1
        # the agent kept no copy of the write end: end of file at once
        assert os.read(r, 10) == b""
    finally:
        os.close(r)
        if w != -1:
            os.close(w)
    assert fd_count_settles(root_agent.pid, before) == before


def test_stdin_frames_with_passed_stdio_are_a_protocol_error(root_agent, ws):
    r, w = os.pipe()
    try:
        c = exec_fds(root_agent, ["sleep", "100"], [r, w, w], ws=ws)
        with c:
            c.expect("s")
            c.send("i", b"x")
            with pytest.raises(AgentError) as e:
                wait_exit(c)
            assert e.value.errno == errno.EPROTO
    finally:
        os.close(r)
        os.close(w)


# --- sudo ----------------------------------------------------------------------------------------


def as_user():
    os.setgroups([GID])
    os.setgid(GID)
    os.setuid(UID)


def sudo(agent_name, ws, *args, env=None, **kw):
    e = {"PATH": "/usr/bin:/bin", "NANOBOX_INIT_SOCKET": agent_name, **(env or {})}
    return subprocess.run([str(ws / "sudo"), *args], cwd=ws, env=e, preexec_fn=as_user,
                          capture_output=True, timeout=30 * SLOW, **kw)


def test_sudo_runs_as_root(root_agent, ws):
    p = sudo(root_agent.name, ws, "id", "-u")
    assert (p.returncode, p.stdout, p.stderr) == (0, b"0\n", b"")
    p = sudo(root_agent.name, ws, "cat", "/proc/self/status")
    st = status_of(p.stdout.decode())
    assert st["Uid"] == ["0"] * 4
    assert_no_caps(st)
    p = sudo(root_agent.name, ws, "pwd")
    assert p.stdout.decode().strip() == str(ws)


@pytest.mark.parametrize("user", [str(UID), f"#{UID}"])
def test_sudo_u_the_user(root_agent, ws, user):
    p = sudo(root_agent.name, ws, "-u", user, "id", "-u")
    assert (p.returncode, p.stdout) == (0, f"{UID}\n".encode())
    p = sudo(root_agent.name, ws, "-u", "root", "id", "-u")
    assert (p.returncode, p.stdout) == (0, b"0\n")


def test_sudo_u_another_user_is_refused(root_agent, ws):
    p = sudo(root_agent.name, ws, "-u", "nobody", "id")
    assert p.returncode == 1
    assert b"as root or as" in p.stderr


def test_sudo_exit_code_passes_through(root_agent, ws):
    assert sudo(root_agent.name, ws, "sh", "-c", "exit 7").returncode == 7
    assert sudo(root_agent.name, ws, "sh", "-c", "kill -9 $$").returncode == 128 + 9
    p = sudo(root_agent.name, ws, "no-such-command-x")
    assert p.returncode == 127 and b"no-such-command-x" in p.stderr


def test_sudo_stdin_passes_through(root_agent, ws):
    p = sudo(root_agent.name, ws, "tr", "a-z", "A-Z", input=b"hello")
    assert (p.returncode, p.stdout) == (0, b"HELLO")


def test_sudo_forwards_sigterm(root_agent, ws):
    e = {"PATH": "/usr/bin:/bin", "NANOBOX_INIT_SOCKET": root_agent.name}
    p = subprocess.Popen([str(ws / "sudo"), "sh", "-c", "echo $$; exec sleep 100"], cwd=ws,
                         env=e, preexec_fn=as_user, stdout=subprocess.PIPE)
    try:
        pid = int(p.stdout.readline())
        assert status_of(Path(f"/proc/{pid}/status").read_text())["Uid"][0] == "0"
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=10 * SLOW) == 128 + signal.SIGTERM
        assert pid_gone(pid)
    finally:
        p.kill()
        p.wait()
        p.stdout.close()


def test_sudo_killed_kills_the_root_command(root_agent, ws):
    """An exec's timeout kills sudo (the user's tree); the root command goes with it."""
    env = [f"PATH={ws}:/usr/bin:/bin", f"NANOBOX_INIT_SOCKET={root_agent.name}"]
    out, _, _, _, flags, _ = root_agent.exec(
        ["sh", "-c", "sudo sh -c 'echo $$; exec sleep 100'"], cwd=str(ws), env=env,
        timeout_ms=int(1000 * SLOW))
    assert flags & 1
    pid = int(out)
    assert pid_gone(pid)


def test_sudo_env_reset_and_keep(root_agent, ws):
    sh = ["sh", "-c", 'echo "${FOO-unset} $HOME $USER $LOGNAME $SUDO_USER $SUDO_UID $SUDO_GID '
          '${LANG-} $PATH"']
    env = {"FOO": "bar", "LANG": "C.UTF-8", "HOME": str(ws)}
    p = sudo(root_agent.name, ws, *sh, env=env)
    assert p.stdout.decode().split() == [
        "unset", "/root", "root", "root", str(UID), str(UID), str(GID), "C.UTF-8",
        "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]
    p = sudo(root_agent.name, ws, "-E", *sh, env=env)
    assert p.stdout.decode().split() == [
        "bar", str(ws), "root", "root", str(UID), str(UID), str(GID), "C.UTF-8", "/usr/bin:/bin"]
    p = sudo(root_agent.name, ws, "-EH", *sh, env=env)
    assert p.stdout.decode().split()[1] == "/root"


def test_sudo_login_and_shell(root_agent, ws):
    p = sudo(root_agent.name, ws, "-i", "pwd")
    assert (p.returncode, p.stdout) == (0, b"/root\n")
    # as sudo does: the arguments are escaped for the shell's -c but for $
    p = sudo(root_agent.name, ws, "-s", "echo", "a  b;", "$HOME")
    assert (p.returncode, p.stdout) == (0, b"a  b; /root\n")


def test_sudo_without_root_mode(agent, ws):
    p = sudo(agent.name, ws, "id")
    assert p.returncode == 1
    assert p.stderr.decode().strip() == f"sudo: {NO_ROOT}"


def test_sudo_cannot_reach_the_agent(ws):
    p = sudo("nbtest-nobody-listens", ws, "id")
    assert p.returncode == 1
    assert p.stderr.decode().startswith("sudo: cannot reach nanobox-init: Connection refused")


@pytest.mark.parametrize("args,rc,text", [
    ([], 1, b"usage: sudo"),
    (["-Z", "id"], 1, b"sudo: unknown option: -Z"),
    (["--frobnicate", "id"], 1, b"sudo: unknown option: --frobnicate"),
    (["-b", "id"], 1, b"-b is not supported"),
    (["-u"], 1, b"requires a user"),
    (["-i", "-s"], 1, b"only one of -i and -s"),
    (["-h"], 0, b"usage: sudo"),
    (["-V"], 0, b"sudo"),
    (["-k"], 0, b""),
])
def test_sudo_usage(ws, args, rc, text):
    p = sudo("nbtest-nobody-listens", ws, *args)
    assert p.returncode == rc
    assert text in p.stdout + p.stderr


# --- files and watches keep the user's rights --------------------------------------------------


def test_watch_in_root_mode(root_agent, ws):
    from test_fwatch import events_until, watch

    c, dirs, _ = watch(root_agent, ws)
    with c:
        assert dirs == 1
        root_agent.write(str(ws / "w.txt"), b"x")
        events_until(c, ("create", "w.txt"))


def test_move_across_mounts_checks_the_users_rights_first(root_agent, ws):
    """The source's directory is root's: the user may not remove from it, so
    nothing is copied (access() would have asked for uid 0)."""
    if os.stat("/dev/shm").st_dev == os.stat("/tmp").st_dev:
        pytest.skip("no second file system to move to")
    dst = Path(tempfile.mkdtemp(prefix="nbroot-", dir="/dev/shm"))
    try:
        os.chown(dst, UID, GID)
        rootdir = ws / "rootdir"
        rootdir.mkdir(mode=0o755)
        (rootdir / "f").write_text("x")
        os.chmod(rootdir / "f", 0o644)
        with pytest.raises(AgentError) as e:
            root_agent.move(str(rootdir / "f"), str(dst / "g"))
        assert e.value.errno == errno.EACCES
        assert os.listdir(dst) == []
        assert (rootdir / "f").read_text() == "x"
    finally:
        shutil.rmtree(dst, ignore_errors=True)
