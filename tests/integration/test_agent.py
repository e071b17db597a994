"""The in-sandbox agent (nanobox-init): PID 1, exec through it, stdin,
NDJSON streaming, client disconnects, timeouts that kill whole trees,
background processes, and an agent that survives hostile frames."""

import base64
import hashlib
import json
import socket
import subprocess
import time

import pytest
import requests

from nbtest import (MAX_OUTPUT, REPO, assert_error, docker_inspect, docker_top, parse_json,
                    wait_until)


@pytest.fixture(scope="module")
def sid(stack):
    s = stack.api.create(ttl=1800)
    yield s
    stack.api.delete(s)


def cname(sid):
    return f"nanobox-{sid}"


def top_has(sid, needle):
    return any(needle in line for line in docker_top(cname(sid)))


# -- PID 1 ---------------------------------------------------------------

def test_pid_1_is_the_agent_mounted_read_only(api, sid):
    info = docker_inspect(cname(sid))
    assert info["Path"] == "/.nanobox/init"
    mounts = [m for m in info["Mounts"] if m["Destination"] == "/.nanobox/init"]
    assert len(mounts) == 1 and mounts[0]["RW"] is False, info["Mounts"]
    res = api.exec(sid, "cat /proc/1/cmdline | tr '\\0' ' '; echo; id -u < /dev/null; "
                        "awk '/^Uid/{print $2}' /proc/1/status")
    lines = res["stdout"].split("\n")
    assert lines[0].startswith("/.nanobox/init"), res
    uid = info["Config"]["User"].split(":")[0]
    assert lines[1] == lines[2] == uid, res  # PID 1 runs as the sandbox's user
    # the sandbox cannot replace the agent's binary
    res = api.exec(sid, "echo x > /.nanobox/init")
    assert res["exit_code"] != 0


# -- the code bridge's files and request K ------------------------------------

# Speaks request K to the agent from inside the sandbox (anything there may
# connect to it) and prints the first frame: "p <hello>" or "! <errno> <message>".
K_CLIENT = r"""python3 - <<'EOF'
import socket, struct
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(30)
s.connect("\0nanobox-init")
s.sendall(b"K" + struct.pack(">I", 0))
buf = b""
while len(buf) < 5 or len(buf) < 5 + struct.unpack(">I", buf[1:5])[0]:
    chunk = s.recv(65536)
    if not chunk:
        break
    buf += chunk
t, body = buf[:1].decode(), buf[5:]
if t == "!":
    print("!", struct.unpack(">I", body[:4])[0], body[4:].decode())
else:
    print(t, body.decode())
EOF"""
ENOEXEC = 8


def kernel_files():
    d = REPO / "src" / "kernel"
    return sorted(f.name for f in d.iterdir() if f.is_file() and not f.name.startswith(".")) \
        if d.is_dir() else []


def test_code_bridge_files_are_mounted_read_only(api, sid):
    info = docker_inspect(cname(sid))
    mounts = [m for m in info["Mounts"] if m["Destination"] == "/.nanobox/kernel"]
    assert len(mounts) == 1 and mounts[0]["RW"] is False, info["Mounts"]
    # the build tree's src/kernel, copied: every file and nothing else
    res = api.exec(sid, "ls -A /.nanobox/kernel")
    assert res["exit_code"] == 0, res
    assert sorted(res["stdout"].split()) == kernel_files()
    # no checkout path shows inside, and the sandbox cannot change the files
    assert str(REPO) not in api.exec(sid, "grep nanobox/kernel /proc/self/mountinfo")["stdout"]
    for cmd in ("touch /.nanobox/kernel/new", "echo x > /.nanobox/kernel/bridge.py",
                "rm -f /.nanobox/kernel/*"):
        assert api.exec(sid, cmd)["exit_code"] != 0, cmd
    assert sorted(api.exec(sid, "ls -A /.nanobox/kernel")["stdout"].split()) == kernel_files()


def test_k_reaches_the_code_bridge(api, sid):
    out = api.exec(sid, K_CLIENT)["stdout"].strip()
    if "bridge.py" in kernel_files():
        assert out == "p nanobox-kernel 1", out
    else:
        assert out == f"! {ENOEXEC} this sandbox's image has no code interpreter (python3)", out


def test_without_code_bridge_files_sandboxes_still_work(make_stack, tmp_path):
    st = make_stack("nokernel", kernel_dir=str(tmp_path / "missing"))
    s = st.api.create()
    res = st.api.exec(s, "ls -A /.nanobox/kernel; echo rc=$?")
    assert res["stdout"] == "rc=0\n", res
    out = st.api.exec(s, K_CLIENT)["stdout"].strip()
    assert out == f"! {ENOEXEC} this sandbox's image has no code interpreter (python3)", out


def test_agent_reaps_orphans(api, sid):
    # a double fork leaves an orphan that exits: PID 1 must reap it
    api.exec(sid, "(sh -c 'sleep 0.2 &' &); sleep 1")
    res = api.exec(sid, "ps -eo stat,pid,comm | awk '$1 ~ /^Z/' | wc -l")
    assert res["stdout"].strip() == "0", res


def test_sandbox_cannot_take_the_agents_socket_name(api, sid):
    code = ("import socket\n"
            "s = socket.socket(socket.AF_UNIX)\n"
            "try:\n"
            "    s.bind('\\0nanobox-init'); print('bound')\n"
            "except OSError as e:\n"
            "    print('refused', e.errno)\n")
    res = api.exec(sid, "python3 -", stdin=code)
    assert res["stdout"].startswith("refused 98"), res  # EADDRINUSE


# -- exec parity with docker exec -----------------------------------------

@pytest.mark.parametrize("cmd", [
    "echo hello",
    "echo out; echo err >&2; exit 3",
    "printf '\\303\\251t\\303\\251'",
    "exit 255",
    "kill -9 $$",
    "/no/such/binary",
])
def test_exec_matches_docker_exec(api, sid, cmd):
    res = api.exec(sid, cmd)
    d = subprocess.run(["docker", "exec", "-w", "/workspace", cname(sid),
                        "/bin/sh", "-c", cmd], capture_output=True, timeout=60)
    assert res["exit_code"] == d.returncode, (res, d)
    assert res["stdout"] == d.stdout.decode("utf-8", "replace")
    assert res["stderr"] == d.stderr.decode("utf-8", "replace")


def test_binary_output_is_repaired_not_refused(api, sid):
    res = api.exec(sid, "printf 'a\\377b'")
    assert res["stdout"] == "a\ufffdb"


def test_huge_output_is_cut_and_says_truncated(api, sid):
    res = api.exec(sid, "head -c 50000000 /dev/zero | tr '\\0' x; echo done >&2", timeout=60)
    assert res["truncated"] is True
    assert res["exit_code"] == 0
    assert len(res["stdout"]) + len(res["stderr"]) == MAX_OUTPUT


def test_exec_is_fast_through_the_agent(api, sid):
    # warm, then a few: each well under docker exec's ~70 ms on these machines
    api.exec(sid, "true")
    best = min(api.exec(sid, "true")["duration_ms"] for _ in range(5))
    assert best < 60, best


# -- stdin ---------------------------------------------------------------

def test_stdin_text_is_delivered(api, sid):
    res = api.exec(sid, "cat; echo; echo end", stdin="line one\nline two")
    assert res["stdout"] == "line one\nline two\nend\n"


def test_stdin_base64_binary_is_delivered_byte_exact(api, sid):
    blob = bytes(range(256)) * 64
    res = api.exec(sid, "sha256sum | cut -d' ' -f1", stdin=base64.b64encode(blob).decode(),
                   stdin_encoding="base64")
    assert res["stdout"].strip() == hashlib.sha256(blob).hexdigest()


def test_without_stdin_a_reader_sees_end_of_file(api, sid):
    res = api.exec(sid, "cat; echo eof", timeout=5)
    assert res["stdout"] == "eof\n" and res["timed_out"] is False


def test_bad_stdin_encoding_is_refused(api, sid):
    assert_error(api.exec_raw(sid, "cat", stdin="!!", stdin_encoding="base64"), 400, "bad_field")
    assert_error(api.exec_raw(sid, "cat", stdin="x", stdin_encoding="rot13"), 400, "bad_field")


# -- timeouts kill the whole tree -----------------------------------------

def test_timeout_kills_group_session_and_escaped_children(api, sid):
    res = api.exec(sid, "sleep 7771 & setsid sleep 7772 & (sleep 7773 &) ; sleep 7774", timeout=1)
    assert res["timed_out"] is True
    for n in ("7771", "7772", "7773", "7774"):
        wait_until(lambda: not top_has(sid, f"sleep {n}"), timeout=5, what=f"sleep {n} gone")


# -- streaming -----------------------------------------------------------

def stream(api, sid, cmd, **kw):
    body = {"command": cmd, **kw}
    return requests.post(api.base + f"/sandbox/{sid}/exec", data=json.dumps(body),
                         headers=api.headers(headers={"Accept": "application/x-ndjson",
                                                      "Content-Type": "application/json"}),
                         stream=True, timeout=60)


def test_ndjson_events_arrive_while_the_command_runs(api, sid):
    t0 = time.monotonic()
    r = stream(api, sid, "echo first; sleep 2; echo second >&2; exit 4")
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("application/x-ndjson")
    events, first_at = [], None
    for line in r.iter_lines():
        if not line:
            continue
        ev = json.loads(line)
        if first_at is None:
            first_at = time.monotonic() - t0
        events.append(ev)
    assert first_at < 1.5, first_at
    assert events[0] == {"type": "stdout", "data": "first\n"}
    assert {"type": "stderr", "data": "second\n"} in events
    assert events[-1]["type"] == "exit" and events[-1]["exit_code"] == 4
    assert events[-1]["timed_out"] is False


def test_stream_field_works_without_accept_header(api, sid):
    r = api.exec_raw(sid, "echo hi", stream=True)
    lines = [json.loads(x) for x in r.text.splitlines() if x]
    assert lines[0] == {"type": "stdout", "data": "hi\n"}
    assert lines[-1]["type"] == "exit"


def test_stream_keeps_multibyte_characters_whole(api, sid):
    # 3-byte characters printed one byte at a time across writes
    r = stream(api, sid, "for i in 1 2 3; do printf '\\342'; sleep 0.1; printf '\\202\\254'; sleep 0.1; done")
    data = "".join(json.loads(x).get("data", "") for x in r.iter_lines() if x)
    assert data == "\u20ac" * 3


def test_client_disconnect_kills_a_streamed_command(api, sid):
    r = stream(api, sid, "echo go; exec sleep 8881")
    it = r.iter_lines()
    assert json.loads(next(it))["data"] == "go\n"
    wait_until(lambda: top_has(sid, "sleep 8881"), timeout=5, what="sleep running")
    r.close()
    wait_until(lambda: not top_has(sid, "sleep 8881"), timeout=10, what="sleep killed")


def test_client_disconnect_kills_a_plain_exec(api, sid):
    with pytest.raises(requests.exceptions.ReadTimeout):
        api.request("POST", f"/sandbox/{sid}/exec", json={"command": "sleep 8882", "timeout": 60},
                    timeout=1.5)
    wait_until(lambda: top_has(sid, "sleep 8882") is False, timeout=10, what="sleep killed")


def test_background_and_stream_together_are_refused(api, sid):
    assert_error(api.exec_raw(sid, "true", background=True, stream=True), 400, "bad_field")


# -- background processes -------------------------------------------------

def start_bg(api, sid, cmd, **kw):
    r = api.exec_raw(sid, cmd, background=True, **kw)
    assert r.status_code == 201, r.text
    body = parse_json(r)
    assert isinstance(body["pid"], int) and body["pid"] > 1
    return body["pid"]


def proc(api, sid, pid, **q):
    qs = "&".join(f"{k}={v}" for k, v in q.items())
    r = api.request("GET", f"/sandbox/{sid}/processes/{pid}" + ("?" + qs if qs else ""))
    assert r.status_code == 200, r.text
    return parse_json(r)


def test_background_process_runs_between_calls_and_reports_output(api, sid):
    pid = start_bg(api, sid, "for i in 1 2 3; do echo tick $i; sleep 0.3; done; echo bye >&2; exit 5")
    listed = parse_json(api.request("GET", f"/sandbox/{sid}/processes"))["processes"]
    assert any(p["pid"] == pid and p["running"] for p in listed), listed
    wait_until(lambda: not proc(api, sid, pid)["running"], timeout=10, what="process done")
    p = proc(api, sid, pid)
    assert p["exit_code"] == 5 and p["stdout"] == "tick 1\ntick 2\ntick 3\n" and p["stderr"] == "bye\n"
    assert p["stdout_next"] == len(p["stdout"]) and p["stdout_offset"] == 0
    # from an offset: only what follows it
    p2 = proc(api, sid, pid, stdout_offset=7)
    assert p2["stdout"] == "tick 2\ntick 3\n" and p2["stdout_offset"] == 7


def test_background_process_stdin_and_signal(api, sid):
    pid = start_bg(api, sid, "while read l; do echo got $l; done; echo closed")
    r = api.request("POST", f"/sandbox/{sid}/processes/{pid}/stdin", json={"data": "a\nb\n"})
    assert r.status_code == 200 and parse_json(r)["written"] == 4
    wait_until(lambda: proc(api, sid, pid)["stdout"] == "got a\ngot b\n", timeout=5, what="echoed")
    r = api.request("POST", f"/sandbox/{sid}/processes/{pid}/stdin", json={"data": "c\n", "eof": True})
    assert r.status_code == 200
    wait_until(lambda: not proc(api, sid, pid)["running"], timeout=5, what="exit after eof")
    assert proc(api, sid, pid)["stdout"].endswith("got c\nclosed\n")

    pid = start_bg(api, sid, "exec sleep 9991")
    r = api.request("DELETE", f"/sandbox/{sid}/processes/{pid}?signal=TERM")
    assert r.status_code == 204
    wait_until(lambda: not proc(api, sid, pid)["running"], timeout=5, what="terminated")
    p = proc(api, sid, pid)
    assert p["signal"] == 15 and p["exit_code"] == 143
    assert not top_has(sid, "sleep 9991")


def test_process_errors(api, sid):
    assert_error(api.request("GET", f"/sandbox/{sid}/processes/999999"), 404, "no_process")
    assert_error(api.request("GET", f"/sandbox/{sid}/processes/abc"), 400, "bad_pid")
    assert_error(api.request("GET", f"/sandbox/{sid}/processes/0"), 400, "bad_pid")
    assert_error(api.request("DELETE", f"/sandbox/{sid}/processes/999999"), 404, "no_process")
    pid = start_bg(api, sid, "sleep 30")
    assert_error(api.request("DELETE", f"/sandbox/{sid}/processes/{pid}?signal=BOGUS"), 400, "bad_field")
    assert_error(api.request("GET", f"/sandbox/{sid}/processes/{pid}?stdout_offset=-1"), 400, "bad_field")
    api.request("DELETE", f"/sandbox/{sid}/processes/{pid}")


def test_background_web_server_is_reachable_through_a_port(api, stack):
    s = api.create()  # network none
    start_bg(api, s, "exec python3 -m http.server 8000 --bind 127.0.0.1")
    api.exec(s, "echo served > /workspace/hello.txt")
    port = api.open_port(s, 8000)

    def fetch():
        try:
            return requests.get(f"http://127.0.0.1:{port['hostport']}/hello.txt", timeout=2).text
        except requests.RequestException:
            return None
    wait_until(lambda: fetch() == "served\n", timeout=15, what="dev server answering")


def test_background_jobs_outlive_a_short_exec_timeout(make_stack):
    """A background command runs until it exits or the sandbox ends, whatever
    exec_timeout says (it was killed at exec_timeout, 30 s by default: no
    test kept one alive that long, so none saw it). A stack whose
    exec_timeout is 1 s shows it in seconds: a sleeper, one started with its
    own "timeout" (ignored with background, as documented), and a dev server
    behind an open port all live well past it."""
    st = make_stack("bgtimeout", exec_timeout="1", exec_timeout_max="5")
    api = st.api
    s = api.create()
    sleeper = start_bg(api, s, "exec sleep 600")
    timed = start_bg(api, s, "exec sleep 601", timeout=1)
    server = start_bg(api, s, "exec python3 -m http.server 8000 --bind 127.0.0.1")
    api.exec(s, "echo alive > /workspace/hello.txt")
    port = api.open_port(s, 8000)

    def fetch():
        try:
            return requests.get(f"http://127.0.0.1:{port['hostport']}/hello.txt", timeout=2).text
        except requests.RequestException:
            return None
    wait_until(lambda: fetch() == "alive\n", timeout=15, what="dev server answering")
    # five exec timeouts (plus the host's slack) later, all three still run
    started = time.monotonic()
    while time.monotonic() - started < 5 + 5 + 2:
        for pid in (sleeper, timed, server):
            assert proc(api, s, pid)["running"], proc(api, s, pid)
        time.sleep(1)
    assert fetch() == "alive\n"
    # a foreground command still ends at the 1 s exec_timeout
    res = api.exec(s, "sleep 10")
    assert res["timed_out"] is True, res
    api.delete(s)


# -- a hostile sandbox against its own agent --------------------------------

GARBAGE = r'''
import os, socket, struct, random, time
random.seed(7)
def conn():
    # a busy agent may have a full backlog (EAGAIN): a client retries
    for _ in range(400):
        s = socket.socket(socket.AF_UNIX); s.settimeout(2)
        try:
            s.connect('\0nanobox-init'); return s
        except BlockingIOError:
            s.close(); time.sleep(0.005)
    raise SystemExit('agent never accepted')
sent = 0
for i in range(300):
    s = conn()
    kind = i % 5
    try:
        if kind == 0: s.sendall(os.urandom(random.randint(1, 4000)))
        elif kind == 1: s.sendall(b'X' + struct.pack('>I', 0xFFFFFFFF))
        elif kind == 2: s.sendall(b'X' + struct.pack('>I', 100) + b'A' + struct.pack('>I', 1000))
        elif kind == 3: s.sendall(b'X' + struct.pack('>I', 10) + b'\x00' * 3)
        else: s.sendall(bytes([random.randint(0, 255)]) + struct.pack('>I', 5) + os.urandom(5))
        sent += 1
    except OSError:
        pass
    s.close()
conns = [conn() for _ in range(150)]
for c in conns: c.close()
print('sent', sent)
'''


def test_agent_survives_random_and_truncated_frames(api, sid):
    res = api.exec(sid, "python3 -", stdin=GARBAGE, timeout=60)
    assert res["stdout"].startswith("sent"), res
    assert api.exec(sid, "echo alive")["stdout"] == "alive\n"
    assert api.exec(sid, "head -c 100 /proc/1/cmdline | tr '\\0' ' '")["stdout"].startswith("/.nanobox/init")


# -- no agent: docker exec fallback -----------------------------------------

NOT_AN_AGENT = "#include <unistd.h>\nint main(void) { for (;;) pause(); }\n"


@pytest.fixture
def agentless_stack(make_stack, tmp_path):
    """Sandboxes whose PID 1 is not an agent (as an older nanobox made them)."""
    src = tmp_path / "pause.c"
    src.write_text(NOT_AN_AGENT)
    binary = tmp_path / "pause"
    subprocess.run(["gcc", "-static", "-O2", "-o", str(binary), str(src)], check=True)
    binary.chmod(0o755)
    tmp_path.chmod(0o755)
    return make_stack("agentless", init_path=str(binary))


def test_without_an_agent_exec_falls_back_to_docker_exec(agentless_stack):
    st = agentless_stack
    s = st.api.create()
    res = st.api.exec(s, "echo via docker; exit 3")
    assert res["stdout"] == "via docker\n" and res["exit_code"] == 3
    # what needs the agent says so
    assert_error(st.api.exec_raw(s, "cat", stdin="x"), 503, "agent_unavailable")
    r = st.api.request("GET", f"/sandbox/{s}/files?path=/workspace")
    assert_error(r, 503, "agent_unavailable")
    assert_error(st.api.request("GET", f"/sandbox/{s}/processes"), 503, "agent_unavailable")
    with open(st.log_path, errors="replace") as f:
        assert "using docker exec" in f.read()
    st.api.delete(s)
