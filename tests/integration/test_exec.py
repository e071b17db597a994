"""Running commands in a sandbox: output, exit codes, timeouts, caps, state."""

import json
import threading
import time

import pytest

from nbtest import (MAX_COMMAND, MAX_OUTPUT, assert_error, docker_exists, docker_inspect, docker_top, parse_json,
                    wait_until)


@pytest.fixture(scope="module")
def shared_sid(stack):
    """One sandbox for the read-mostly exec tests (creation costs ~0.3 s)."""
    sid = stack.api.create(ttl=1800)
    yield sid
    stack.api.delete(sid)


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def test_exec_returns_output_and_exit_code(api, shared_sid):
    res = api.exec(shared_sid, "echo hello")
    assert res["output"] == "hello\n"
    assert res["stdout"] == "hello\n"
    assert res["stderr"] == ""
    assert res["exit_code"] == 0
    assert res["timed_out"] is False
    assert res["truncated"] is False
    assert is_int(res["duration_ms"]) and 0 <= res["duration_ms"] < 10000


def test_exec_reports_nonzero_exit_code(api, shared_sid):
    assert api.exec(shared_sid, "exit 7")["exit_code"] == 7
    assert api.exec(shared_sid, "false")["exit_code"] == 1
    assert api.exec(shared_sid, "/no/such/binary")["exit_code"] == 127


def test_exec_separates_stdout_and_stderr_and_keeps_arrival_order(api, shared_sid):
    res = api.exec(shared_sid, "echo a; sleep 0.2; echo b >&2; sleep 0.2; echo c; sleep 0.2; echo d >&2")
    assert res["stdout"] == "a\nc\n"
    assert res["stderr"] == "b\nd\n"
    assert res["output"] == "a\nb\nc\nd\n"


def test_exec_runs_as_the_sandboxs_own_uid_in_workspace(api, shared_sid):
    # each sandbox has a uid and gid of its own (sandbox_uid_base + slot)
    uid, gid = docker_inspect(f"nanobox-{shared_sid}")["Config"]["User"].split(":")
    assert int(uid) >= 200000 and gid == uid, (uid, gid)
    res = api.exec(shared_sid, "id -u; id -g; id -un; echo $HOME; pwd")
    assert res["stdout"].split() == [uid, gid, "sandbox", "/workspace", "/workspace"], res


def test_exec_runs_the_command_through_sh_c(api, shared_sid):
    res = api.exec(shared_sid, "X=1; for i in 1 2 3; do X=$((X*2)); done; echo $X | tr 8 H && echo ok")
    assert res["stdout"] == "H\nok\n"


def test_exec_honours_cwd(api, shared_sid):
    assert api.exec(shared_sid, "pwd", cwd="/tmp")["stdout"] == "/tmp\n"


def test_exec_honours_env(api, shared_sid):
    res = api.exec(shared_sid, 'printf "%s/%s" "$GREETING" "$OTHER"',
                   env={"GREETING": "hi there", "OTHER": "a=b;c"})
    assert res["stdout"] == "hi there/a=b;c"


def test_exec_env_does_not_leak_into_next_exec(api, shared_sid):
    api.exec(shared_sid, "true", env={"ONLY_ONCE": "1"})
    assert api.exec(shared_sid, 'echo "${ONLY_ONCE-unset}"')["stdout"] == "unset\n"


def test_files_persist_between_execs(api):
    sid = api.create()
    res = api.exec(sid, "echo persisted > /workspace/f.txt && mkdir -p /tmp/d && echo t > /tmp/d/g")
    assert res["exit_code"] == 0, res
    res = api.exec(sid, "cat /workspace/f.txt /tmp/d/g")
    assert res["stdout"] == "persisted\nt\n", res


def test_root_filesystem_is_read_only(api, shared_sid):
    res = api.exec(shared_sid, "touch /etc/x")
    assert res["exit_code"] != 0, res
    assert "Read-only" in res["stderr"] or "read-only" in res["stderr"].lower(), res
    assert api.exec(shared_sid, "test -e /etc/x")["exit_code"] != 0


def test_workspace_and_tmp_are_writable(api, shared_sid):
    res = api.exec(shared_sid, "touch /workspace/w /tmp/t && echo ok")
    assert res["stdout"] == "ok\n", res


def test_exec_timeout_returns_partial_output(api, shared_sid):
    t0 = time.monotonic()
    res = api.exec(shared_sid, "echo started; sleep 100; echo never", timeout=2)
    wall = time.monotonic() - t0
    assert res["timed_out"] is True, res
    assert res["output"] == "started\n", res
    assert res["stdout"] == "started\n", res
    assert 1.5 <= wall < 10, wall
    assert 1500 <= res["duration_ms"] < 10000, res


def _wait_gone(name, needle, timeout=5):
    def gone():
        procs = docker_top(name)
        assert procs, f"docker top {name} shows nothing (container dead?)"
        return not any(needle in line for line in procs)
    wait_until(gone, timeout, 0.2, what=f"{needle!r} to disappear from docker top {name}")


def test_exec_timeout_kills_the_command(api):
    sid = api.create()
    res = api.exec(sid, "sleep 317", timeout=1)
    assert res["timed_out"] is True
    _wait_gone(f"nanobox-{sid}", "sleep 317")


def test_exec_timeout_kills_everything_the_command_started(api):
    sid = api.create()
    res = api.exec(sid, "sleep 311 & sleep 312 & (sleep 313; echo x) & echo bg; wait", timeout=1)
    assert res["timed_out"] is True and res["stdout"] == "bg\n", res
    for n in (311, 312, 313):
        _wait_gone(f"nanobox-{sid}", f"sleep {n}")


def test_exec_timeout_kills_commands_that_ignore_sigterm(api):
    sid = api.create()
    res = api.exec(sid, "trap '' TERM INT HUP; sleep 314 & wait; sleep 315", timeout=1)
    assert res["timed_out"] is True
    _wait_gone(f"nanobox-{sid}", "sleep 314")
    _wait_gone(f"nanobox-{sid}", "sleep 315")


def test_exec_timeout_kills_children_in_a_new_session(api):
    sid = api.create()
    res = api.exec(sid, "setsid sleep 316 & sleep 318", timeout=1)
    assert res["timed_out"] is True
    _wait_gone(f"nanobox-{sid}", "sleep 316")
    _wait_gone(f"nanobox-{sid}", "sleep 318")


def test_exec_timeout_leaves_sandbox_usable(api):
    sid = api.create()
    api.exec(sid, "echo x > /workspace/keep; sleep 50", timeout=1)
    res = api.exec(sid, "cat /workspace/keep")
    assert res["stdout"] == "x\n" and res["timed_out"] is False


def test_exec_accepts_fractional_timeout(api, shared_sid):
    t0 = time.monotonic()
    res = api.exec(shared_sid, "sleep 30", timeout=0.5)
    assert res["timed_out"] is True
    assert time.monotonic() - t0 < 8


def test_fast_command_is_not_marked_timed_out(api, shared_sid):
    res = api.exec(shared_sid, "sleep 0.3; echo done", timeout=5)
    assert res["timed_out"] is False and res["stdout"] == "done\n"


def test_output_over_cap_is_truncated(api, shared_sid):
    res = api.exec(shared_sid, "head -c 200000 /dev/zero | tr '\\0' a")
    assert res["truncated"] is True, {k: v for k, v in res.items() if k not in ("output", "stdout")}
    assert res["timed_out"] is False
    assert 0 < len(res["output"].encode()) <= MAX_OUTPUT, len(res["output"])
    assert len(res["stdout"].encode()) <= MAX_OUTPUT
    assert set(res["output"]) == {"a"}


def test_stderr_counts_towards_the_cap(api, shared_sid):
    res = api.exec(shared_sid, "head -c 50000 /dev/zero | tr '\\0' o; head -c 50000 /dev/zero | tr '\\0' e >&2")
    assert res["truncated"] is True
    total = len(res["stdout"].encode()) + len(res["stderr"].encode())
    assert total <= MAX_OUTPUT, total
    assert len(res["output"].encode()) <= MAX_OUTPUT


def test_output_just_under_cap_is_whole(api, shared_sid):
    res = api.exec(shared_sid, "head -c 60000 /dev/zero | tr '\\0' x")
    assert res["truncated"] is False
    assert res["stdout"] == "x" * 60000


def test_huge_output_returns_promptly_and_truncated(api, shared_sid):
    t0 = time.monotonic()
    res = api.exec(shared_sid, "head -c 50000000 /dev/zero; echo end", timeout=60)
    assert res["truncated"] is True
    assert len(res["output"].encode()) <= MAX_OUTPUT
    assert time.monotonic() - t0 < 30


def test_invalid_utf8_output_gives_valid_json(api, shared_sid):
    # api.exec decodes the body as strict UTF-8 JSON
    res = api.exec(shared_sid, "printf '\\377\\376abc'")
    assert res["stdout"].endswith("abc"), res
    assert "\ufffd" in res["stdout"], res
    assert res["output"] == res["stdout"]


def test_invalid_utf8_on_stderr_gives_valid_json(api, shared_sid):
    res = api.exec(shared_sid, "printf 'x\\300\\301y\\355\\240\\200z' >&2")
    assert res["stderr"].startswith("x") and res["stderr"].endswith("z"), res
    assert "\ufffd" in res["stderr"]


def test_valid_utf8_output_is_kept_intact(api, shared_sid):
    res = api.exec(shared_sid, "printf 'h\\303\\251llo \\342\\234\\223 \\360\\237\\230\\200'")
    assert res["stdout"] == "héllo ✓ 😀"


def test_utf8_character_split_across_writes_is_kept_intact(api, shared_sid):
    res = api.exec(shared_sid, "printf '\\303'; sleep 0.3; printf '\\251'; sleep 0.3; printf '\\342\\234'; sleep 0.3; printf '\\223'")
    assert res["stdout"] == "é✓", res


def test_nul_and_control_bytes_give_valid_json(api, shared_sid):
    res = api.exec(shared_sid, "printf 'a\\000b\\001c\\033d\"e\\\\f'")
    # NUL may come back as \u0000 or as U+FFFD; everything else verbatim
    assert res["stdout"] in ("a\x00b\x01c\x1bd\"e\\f", "a\ufffdb\x01c\x1bd\"e\\f"), res


def test_concurrent_execs_on_one_sandbox(api):
    sid = api.create()
    results, errors = {}, []

    def one(i):
        try:
            results[i] = api.exec(sid, f"sleep 1; echo job{i} > /workspace/j{i}; echo job{i}")
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    t0 = time.monotonic()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    wall = time.monotonic() - t0
    assert not errors, errors
    for i in range(4):
        assert results[i]["stdout"] == f"job{i}\n"
    assert wall < 3.5, f"4 concurrent 1 s execs took {wall:.1f} s: they ran one after another"
    assert api.exec(sid, "cat /workspace/j0 /workspace/j3")["stdout"] == "job0\njob3\n"


def test_exec_stdin_is_not_inherited(api, shared_sid):
    """A command reading stdin must see EOF, not hang until the timeout."""
    res = api.exec(shared_sid, "cat; echo eof", timeout=10)
    assert res["timed_out"] is False and res["stdout"] == "eof\n", res


def test_truncation_inside_a_multibyte_character_gives_valid_json(api, shared_sid):
    # 1 + 2*40000 bytes: the 65536-byte cut falls in the middle of an "é"
    res = api.exec(shared_sid, "printf a; i=0; while [ $i -lt 400 ]; do printf '%s' \"$E\"; i=$((i+1)); done",
                   env={"E": "é" * 100})
    assert res["truncated"] is True
    out = res["stdout"]
    assert out.startswith("aé")
    assert set(out[1:].rstrip("\ufffd")) == {"é"}, out[-10:]
    assert len(out.encode()) <= MAX_OUTPUT + 3


def test_exec_in_missing_cwd_answers_cleanly(api, shared_sid):
    r = api.exec_raw(shared_sid, "pwd", cwd="/no/such/dir")
    body = assert_error(r, 400, "bad_field")
    assert "/no/such/dir" in body["error"] or "No such file" in body["error"], body
    assert api.exec(shared_sid, "echo fine")["stdout"] == "fine\n"


def test_delete_during_exec_ends_the_exec(api, stack):
    sid = api.create()
    box = {}

    def run_exec():
        t0 = time.monotonic()
        box["r"] = api.exec_raw(sid, "sleep 20", timeout=60)
        box["t"] = time.monotonic() - t0

    t = threading.Thread(target=run_exec)
    t.start()
    wait_until(lambda: any("sleep 20" in line for line in docker_top(f"nanobox-{sid}")), 15, 0.05,
               what="the exec's sleep to run")
    assert api.delete(sid).status_code == 204
    t.join(60)
    assert not t.is_alive()
    assert box["t"] < 15, f"exec outlived its deleted sandbox ({box['t']:.1f}s)"
    assert not docker_exists(f"nanobox-{sid}")


# ------------------------------------------------------------------- argv

def exec_argv(api, sid, argv, **kw):
    return api.request("POST", f"/sandbox/{sid}/exec", json={"argv": argv, **kw})


def test_exec_argv_passes_each_word_exactly_without_a_shell(api, shared_sid):
    r = exec_argv(api, shared_sid, ["python3", "-c", "print(6*7)"])
    assert r.status_code == 200, r.text
    assert parse_json(r)["stdout"] == "42\n"
    words = ["a b", "it's", "$HOME", "", "*", "x;y", "é"]
    res = parse_json(exec_argv(api, shared_sid, ["printf", "%s|", *words], cwd="/tmp"))
    assert (res["exit_code"], res["stdout"]) == (0, "|".join(words) + "|")
    # no shell: "A=1" is a program's name, a missing program is the shell's 127
    res = parse_json(exec_argv(api, shared_sid, ["A=1", "true"]))
    assert res["exit_code"] == 127 and "A=1" in res["stderr"]
    # env and stdin reach it as they reach a command
    res = parse_json(exec_argv(api, shared_sid, ["sh", "-c", 'echo "$V"; cat'], env={"V": "v 1"},
                               stdin="in\n"))
    assert res["stdout"] == "v 1\nin\n"


def test_exec_argv_streams_and_runs_in_the_background(api, shared_sid):
    r = exec_argv(api, shared_sid, ["echo", "streamed"], stream=True)
    assert r.headers["Content-Type"].startswith("application/x-ndjson")
    events = [json.loads(line) for line in r.text.splitlines()]
    assert events[0] == {"type": "stdout", "data": "streamed\n"} and events[-1]["exit_code"] == 0
    r = exec_argv(api, shared_sid, ["sleep", "30"], background=True)
    assert r.status_code == 201, r.text
    pid = parse_json(r)["pid"]
    listed = parse_json(api.request("GET", f"/sandbox/{shared_sid}/processes"))["processes"]
    assert [p["command"] for p in listed if p["pid"] == pid] == [["sleep", "30"]]
    api.request("DELETE", f"/sandbox/{shared_sid}/processes/{pid}")


REFUSED_MARK = "/tmp/argv-refused"
TOUCH = ["sh", "-c", f"touch {REFUSED_MARK}"]


@pytest.mark.parametrize("body, status", [
    ({}, 400),                                                         # neither
    ({"command": f"touch {REFUSED_MARK}", "argv": TOUCH}, 400),        # both
    ({"argv": []}, 400),
    ({"argv": ["", *TOUCH]}, 400),                                     # no program
    ({"argv": [*TOUCH, 1]}, 400),
    ({"argv": f"touch {REFUSED_MARK}"}, 400),
    ({"argv": [*TOUCH, "a\u0000b"]}, 400),
    ({"argv": TOUCH + ["x"] * 4096}, 422),                             # over 4096 strings
    ({"argv": [*TOUCH, "x" * MAX_COMMAND]}, 422),                      # over max_command in all
])
def test_exec_bad_argv_is_refused_and_runs_nothing(api, shared_sid, body, status):
    api.exec(shared_sid, f"rm -f {REFUSED_MARK}")
    r = api.request("POST", f"/sandbox/{shared_sid}/exec", json=body)
    assert_error(r, status, "bad_field" if status == 400 else "out_of_range")
    assert api.exec(shared_sid, f"test -e {REFUSED_MARK} && echo ran || echo not")["stdout"] == "not\n"


def test_exec_argv_at_max_command_runs(api, shared_sid):
    half = MAX_COMMAND // 2
    argv = ["printf", "%s", "x" * (half - len("printf%s")), "y" * half]
    assert sum(map(len, argv)) == MAX_COMMAND
    res = parse_json(exec_argv(api, shared_sid, argv))
    assert res["exit_code"] == 0 and len(res["stdout"]) == MAX_COMMAND - len("printf%s")
