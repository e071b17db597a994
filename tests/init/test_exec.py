"""
Foreground exec (X): output streams, exit status, stdin, environment,
timeouts that kill the whole tree, the host leaving, the output cap.
"""
import os
import re
import signal
import struct
import subprocess
import time

import pytest

from agentclient import AgentError, field, frame, u32
from conftest import INIT_BIN
from inittest import PONG, SLOW, TOOLED, pid_gone, proc_stat, wait_until


def test_ping_answers_the_version(agent):
    assert agent.ping() == PONG


def test_version_flag_prints_the_version():
    out = subprocess.run([str(INIT_BIN), "--version"], capture_output=True, text=True, timeout=10)
    assert out.returncode == 0
    assert out.stdout == "nanobox-init 1\n"


def test_echo_output_arrives_on_stdout(agent):
    out, err, code, sig, flags, _ = agent.exec(["echo", "hello", "world"])
    assert (out, err, code, sig, flags) == (b"hello world\n", b"", 0, 0, 0)


def test_exit_code_is_reported(agent):
    assert agent.exec(["sh", "-c", "exit 42"])[2] == 42
    assert agent.exec(["false"])[2] == 1


def test_stderr_is_kept_apart_from_stdout(agent):
    out, err, code, *_ = agent.exec(["sh", "-c", "echo to-out; echo to-err >&2; echo more-out"])
    assert out == b"to-out\nmore-out\n"
    assert err == b"to-err\n"
    assert code == 0


def test_killed_command_reports_minus_one_and_the_signal(agent):
    _, _, code, sig, flags, _ = agent.exec(["sh", "-c", "kill -TERM $$"])
    assert (code, sig, flags) == (-1, signal.SIGTERM, 0)


def test_binary_output_is_byte_exact(agent, tmp_path):
    data = os.urandom(3 * 1024 * 1024 + 17)
    (tmp_path / "blob").write_bytes(data)
    out, _, code, _, _, frames = agent.exec(["cat", str(tmp_path / "blob")])
    assert code == 0
    assert out == data
    assert all(len(b) <= 64 * 1024 for _, b in frames), "a data frame over 64 KiB"


def test_stdin_is_delivered_to_the_command(agent):
    data = os.urandom(5 * 1024 * 1024 + 3)  # more than the agent buffers: backpressure
    out, _, code, *_ = agent.exec(["cat"], stdin=data)
    assert code == 0
    assert out == data


def test_eof_frame_closes_stdin(agent):
    c, _ = agent.exec_start(["sh", "-c", "cat; echo after-eof"])
    with c:
        c.send("i", b"line\n")
        c.send("e")
        out, _, code, *_ = agent.exec_collect(c)
    assert out == b"line\nafter-eof\n"
    assert code == 0


def test_kill_frame_signals_the_command(agent):
    c, _ = agent.exec_start(["sleep", "300"])
    with c:
        c.send("k", bytes([signal.SIGTERM]))
        _, _, code, sig, flags, _ = agent.exec_collect(c)
    assert (code, sig, flags) == (-1, signal.SIGTERM, 0)


def test_kill_frame_in_the_same_write_as_the_start_reaches_the_command(agent):
    # The agent reads both frames at once and signals the command the moment
    # it has started it. Where vfork is a fork (valgrind) the child had not
    # made its group by then half the time, and the signal was lost; each
    # round here is one such race.
    for i in range(20):
        c = agent.conn()
        with c:
            c.send_raw(frame("X", field("A", "sleep") + field("A", "300")) +
                       frame("k", bytes([signal.SIGTERM])))
            pid = struct.unpack(">I", c.expect("s"))[0]
            _, _, code, sig, flags, _ = agent.exec_collect(c)
        assert (code, sig, flags) == (-1, signal.SIGTERM, 0), f"round {i}"
        assert pid_gone(pid)


def test_failed_exec_reports_127_and_the_error_on_stderr(agent):
    out, err, code, *_ = agent.exec(["no-such-command-nbtest"])
    assert code == 127
    assert out == b""
    assert b"no-such-command-nbtest" in err and b"No such file" in err


def test_env_entries_are_added_and_override_the_agents(agent):
    out, _, code, *_ = agent.exec(
        ["sh", "-c", "echo $NBTEST_NEW; echo $NBTEST_FROM_AGENT; env | grep -c ^NBTEST_FROM_AGENT="],
        env=["NBTEST_NEW=new value", "NBTEST_FROM_AGENT=overridden"])
    assert out == b"new value\noverridden\n1\n"
    assert code == 0


def test_agent_environment_is_inherited(agent):
    out, *_ = agent.exec(["sh", "-c", "echo $NBTEST_FROM_AGENT"])
    assert out == b"agent\n"


def test_argv0_is_looked_up_in_the_commands_path(agent, tmp_path):
    tool = tmp_path / "bin" / "nbtest-tool"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\necho tool ran with $1\n")
    tool.chmod(0o755)
    out, _, code, *_ = agent.exec(["nbtest-tool", "x"], env=[f"PATH={tool.parent}:/usr/bin:/bin"])
    assert (out, code) == (b"tool ran with x\n", 0)
    # not in the agent's own PATH
    assert agent.exec(["nbtest-tool"])[2] == 127


def test_script_without_shebang_runs_with_sh(agent, tmp_path):
    script = tmp_path / "noshebang"
    script.write_text("echo from sh\n")
    script.chmod(0o755)
    out, _, code, *_ = agent.exec([str(script)])
    assert (out, code) == (b"from sh\n", 0)


def test_cwd_is_the_working_directory(agent, tmp_path):
    out, *_ = agent.exec(["pwd"], cwd=str(tmp_path))
    assert out.decode().strip() == str(tmp_path)


def test_missing_cwd_is_an_enoent_error(agent, tmp_path):
    with pytest.raises(AgentError) as e:
        agent.exec(["pwd"], cwd=str(tmp_path / "missing"))
    assert e.value.errno == 2


def test_command_runs_in_its_own_session_and_group(agent):
    out, *_ = agent.exec(["sh", "-c", "echo $$; cat /proc/$$/stat"])
    pid = int(out.split(b"\n")[0])
    stat = out.split(b"\n")[1].decode()
    f = stat[stat.rindex(")") + 2:].split()
    assert int(f[2]) == pid and int(f[3]) == pid  # pgrp, session


def test_output_streams_before_the_command_ends(agent):
    c, _ = agent.exec_start(["sh", "-c", "echo a; sleep 2; echo b"])
    with c:
        t0 = time.time()
        t, body = c.recv()
        first = time.time() - t0
        assert (t, body) == ("o", b"a\n")
        out, _, code, *_ = agent.exec_collect(c)
        total = time.time() - t0
    assert first < 1.0 * SLOW, f"first output after {first:.2f}s"
    assert total >= 1.8
    assert out == b"b\n" and code == 0


def test_exit_frame_is_the_last_frame(agent):
    _, _, _, _, _, frames = agent.exec(["sh", "-c", "head -c 300000 /dev/zero; echo e >&2"])
    assert frames[-1][0] == "x"
    assert [t for t, _ in frames[:-1]] and all(t in "or" for t, _ in frames[:-1])


def test_background_child_holding_the_pipes_does_not_hold_the_command(agent):
    t0 = time.time()
    out, _, code, *_ = agent.exec(["sh", "-c", "sleep 30 & echo $!"])
    elapsed = time.time() - t0
    bg = int(out)
    try:
        assert code == 0
        assert elapsed < 2 * SLOW, f"took {elapsed:.2f}s: waited for the background sleep"
        os.kill(bg, 0)  # it keeps running, as after a shell exits
    finally:
        os.kill(bg, signal.SIGKILL)


def test_timeout_kills_group_session_and_escaped_descendants(agent):
    script = ("setsid sleep 300 & echo $!; "        # own session: found through /proc
              "sleep 300 & echo $!; "               # same group, background
              "echo $$; sleep 300")
    c, pid = agent.exec_start(["sh", "-c", script], timeout_ms=int(1500 * SLOW))
    with c:
        t0 = time.time()
        first = b""
        while first.count(b"\n") < 3:
            t, body = c.recv()
            assert t == "o"
            first += body
        escaped, bg, sh = (int(x) for x in first.split())
        assert sh == pid
        # $! is the pid setsid has before it calls setsid(): a new session comes a moment later
        wait_until(lambda: proc_stat(escaped)[3] != pid, 1, what="setsid to make a new session")
        out, _, code, sig, flags, _ = agent.exec_collect(c)
        elapsed = time.time() - t0
    assert flags & 1, "timed-out flag not set"
    assert (code, sig) == (-1, signal.SIGKILL)
    assert elapsed < 5 * SLOW
    for p in (escaped, bg, sh):
        assert pid_gone(p), f"pid {p} survived the timeout"


def test_host_disconnect_kills_the_command(agent):
    c, pid = agent.exec_start(["sh", "-c", "sleep 300 & echo $!; sleep 300"])
    t, body = c.recv()
    child = int(body)
    c.close()
    assert pid_gone(pid), "the command survived its host"
    assert pid_gone(child), "the command's child survived its host"
    assert agent.ping()


def test_output_cap_sets_truncated_and_the_command_completes(agent):
    cap = 1024 * 1024
    t0 = time.time()
    out, err, code, sig, flags, _ = agent.exec(["head", "-c", "50M", "/dev/zero"], maxout=cap)
    assert len(out) == cap
    assert out == b"\0" * cap
    assert (code, sig) == (0, 0)
    assert flags == 2
    assert time.time() - t0 < 20 * SLOW


def test_output_cap_counts_stdout_and_stderr_together(agent):
    out, err, code, _, flags, _ = agent.exec(
        ["sh", "-c", "printf 0123456789; printf abcdefghij >&2; printf XYZ"], maxout=15)
    assert len(out) + len(err) == 15
    assert flags == 2 and code == 0


def test_slow_host_gets_all_output_through_backpressure(agent):
    c, _ = agent.exec_start(["head", "-c", "8M", "/dev/zero"])
    with c:
        time.sleep(1.0)  # the agent must stop reading, not buffer 8 MiB
        rss = agent.rss_kib()
        out, _, code, _, flags, _ = agent.exec_collect(c)
    assert len(out) == 8 * 1024 * 1024 and code == 0 and flags == 0
    assert rss < 6 * 1024 or TOOLED, f"RSS {rss} KiB while held"


def test_exec_request_errors(agent):
    def err_of(*fields):
        with agent.request("X", *fields) as c:
            t, body = c.recv()
            assert t == "!"
            c.expect_eof()
            return int.from_bytes(body[:4], "big"), body[4:].decode()

    assert err_of()[0] == 22                                      # no argv
    assert err_of(field("A", "a\0b"))[0] == 22                    # NUL in argv
    assert err_of(field("A", ""))[0] == 22                        # empty argv[0]
    assert err_of(field("A", "true"), field("E", "NOEQUALS"))[0] == 22
    assert err_of(field("A", "true"), field("E", "=x"))[0] == 22
    assert err_of(field("A", "true"), field("E", "A=\0"))[0] == 22
    assert err_of(field("A", "true"), field("T", b"\0\0\1"))[0] == 22   # u32 of 3 bytes
    assert err_of(field("A", "true"), field("C", "relative"))[0] == 22
    assert err_of(field("A", "true"), field("T", u32(1)), field("T", u32(2)))[0] == 22
    assert err_of(field("A", "true"), field("B", "x"))[0] == 22
    assert err_of(*[field("A", "x")] * 4097)[0] == 22
    assert err_of(field("A", "true"), *[field("E", "A=1")] * 1025)[0] == 22
    assert re.search("4096", err_of(*[field("A", "x")] * 4097)[1])
    assert agent.ping()


def test_4096_args_and_1024_env_entries_are_accepted(agent):
    args = ["sh", "-c", 'echo $#; echo "$NB1023"', "sh"] + [str(i) for i in range(4092)]
    out, _, code, *_ = agent.exec(args, env=[f"NB{i}=v{i}" for i in range(1024)])
    assert out == b"4092\nv1023\n" and code == 0


def test_unexpected_frame_during_exec_is_an_error_and_kills(agent):
    c, pid = agent.exec_start(["sleep", "300"])
    with c:
        c.send("Q", b"")
        t, body = c.recv()
        assert t == "!"
        assert int.from_bytes(body[:4], "big") == 71  # EPROTO
        c.expect_eof()
    assert pid_gone(pid)
