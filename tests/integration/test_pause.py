"""Pause and resume (docs/API.md, "Pause and resume"): a paused sandbox's
processes are frozen (docker pause: the cgroup freezer), keep their memory,
PIDs and open files, and go on where they were after a resume; its TTL
stops while its pause TTL (max_pause) runs; the calls that need its
processes answer 409 paused (or resume it first with auto_resume); its
ports refuse new connections; a restart of nanobox-fcgi keeps it paused.

Everything is checked from outside the sandbox, where a paused sandbox's
own exec cannot go: the counter's CPU time in /proc/<host pid>/schedstat,
its file through /proc/<host pid>/root, Docker's own State.Paused."""

import os
import time

import pytest
import requests

from nbtest import assert_error, docker_exists, docker_inspect, docker_top, parse_json, wait_until
from test_ports import papi, start_http_server, via_host_port, via_nginx  # noqa: F401 - papi: a fixture

# A counter that writes its count through one open fd, about 100 times a second.
COUNTER_PY = ("import os, time\n"
              "f = open(\"/workspace/count\", \"w\")\n"
              "i = 0\n"
              "while True:\n"
              "    i += 1\n"
              "    f.seek(0)\n"
              "    f.write(\"%d %d\\n\" % (os.getpid(), i))\n"
              "    f.flush()\n"
              "    time.sleep(0.01)\n")


def start_counter(api, sid):
    """Start the counter detached from the exec; its host pid."""
    res = api.exec(sid, f"setsid nohup python3 -c '{COUNTER_PY}' >/dev/null 2>&1 </dev/null &\n"
                        "for i in $(seq 100); do [ -s /workspace/count ] && break; sleep 0.05; done\n"
                        "cat /workspace/count")
    assert res["exit_code"] == 0 and res["stdout"].strip(), res
    pids = [int(line.split()[0]) for line in docker_top(f"nanobox-{sid}")
            if "python3 -c" in line]
    assert len(pids) == 1, docker_top(f"nanobox-{sid}")
    return pids[0]


def cpu_ns(pid):
    """CPU time the process has used so far, in ns, read on the host."""
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0])


def count(pid):
    """(pid the counter wrote, its count), read on the host through its root."""
    with open(f"/proc/{pid}/root/workspace/count") as f:
        p, n = f.read().split()
    return int(p), int(n)


def count_fd(pid):
    """The fd of the counter that is open on /workspace/count."""
    for fd in os.listdir(f"/proc/{pid}/fd"):
        if os.readlink(f"/proc/{pid}/fd/{fd}") == "/workspace/count":
            return int(fd)
    return None


def pause(api, sid):
    return api.request("POST", f"/sandbox/{sid}/pause")


def resume(api, sid):
    return api.request("POST", f"/sandbox/{sid}/resume")


def ok(r):
    """The sandbox a 200 answer of pause or resume shows."""
    assert r.status_code == 200, f"{r.request.method} {r.request.url} -> {r.status_code} {r.text}"
    return parse_json(r)


def docker_paused(sid):
    return docker_inspect(f"nanobox-{sid}")["State"]["Paused"]


# ------------------------------------------------------------- the freeze

def test_pause_freezes_the_processes_and_resume_goes_on(api):
    sid = api.create(ttl=600)
    pid = start_counter(api, sid)
    fd = count_fd(pid)
    assert fd is not None

    r = pause(api, sid)
    assert r.status_code == 200, r.text
    info = parse_json(r)
    assert info["sandboxId"] == sid and info["state"] == "paused", info
    assert docker_paused(sid) is True

    # frozen: not one ns of CPU over half a second (fifty of the counter's
    # steps), the count stands still
    cpu, seen = cpu_ns(pid), count(pid)
    time.sleep(0.5)
    assert cpu_ns(pid) == cpu
    assert count(pid) == seen
    assert count_fd(pid) == fd  # its open file is still open

    # what needs the processes is refused, with the way out in the message
    body = assert_error(api.exec_raw(sid, "echo hi"), 409, "paused")
    assert "resume" in body["error"], body

    r = resume(api, sid)
    assert r.status_code == 200, r.text
    assert parse_json(r)["state"] == "running"
    assert docker_paused(sid) is False
    # the same process goes on from where it was
    wait_until(lambda: count(pid)[1] > seen[1], timeout=10, what="the counter to go on")
    assert count(pid)[0] == seen[0]  # the pid it wrote is its own: same process
    assert cpu_ns(pid) > cpu
    assert count_fd(pid) == fd
    res = api.exec(sid, "cat /workspace/count")
    p, n = (int(x) for x in res["stdout"].split())
    assert n > seen[1]
    assert p == seen[0]


def test_calls_that_need_the_processes_answer_409_while_paused(api):
    sid = api.create()
    assert pause(api, sid).status_code == 200
    for method, path, body in (
            ("POST", "exec", {"command": "true"}),
            ("GET", "files?path=/workspace", None),
            ("PUT", "files?path=/workspace/x", None),
            ("GET", "processes", None),
            ("POST", "code", {"code": "1"}),
            ("GET", "contexts", None),
            ("POST", "ephemeralport", {"sandboxport": 8000}),
            ("GET", "ports", None)):
        r = api.request(method, f"/sandbox/{sid}/{path}", json=body)
        assert_error(r, 409, "paused")
    # what does not need them still works
    assert parse_json(api.get(sid))["state"] == "paused"
    r = api.request("POST", f"/sandbox/{sid}/timeout", json={"ttl": 100})
    assert r.status_code == 200, r.text
    assert resume(api, sid).status_code == 200
    assert api.exec(sid, "echo back")["stdout"] == "back\n"


def test_pause_and_resume_are_idempotent(api):
    sid = api.create()
    for _ in range(2):
        r = pause(api, sid)
        assert r.status_code == 200, r.text
        assert parse_json(r)["state"] == "paused"
    for _ in range(2):
        r = resume(api, sid)
        assert r.status_code == 200, r.text
        assert parse_json(r)["state"] == "running"
    assert docker_paused(sid) is False


# ------------------------------------------------------------------- TTLs

def test_ttl_stops_while_paused_and_resumes_with_what_was_left(api):
    sid = api.create(ttl=300)
    before = parse_json(api.get(sid))
    info = ok(pause(api, sid))
    left = info["ttl_remaining"]
    assert before["ttl_remaining"] - 2 <= left <= before["ttl_remaining"], (before, info)
    assert info["paused_at"] <= time.time() + 1
    # the default pause TTL: 24 h
    assert abs(info["pause_expires_at"] - (info["paused_at"] + 86400)) <= 1, info
    time.sleep(1.5)  # past a second boundary: a running TTL would be a second less
    info = parse_json(api.get(sid))
    assert info["state"] == "paused" and info["ttl_remaining"] == left, info
    listed = [s for s in api.list() if s["sandboxId"] == sid]
    assert len(listed) == 1 and listed[0]["state"] == "paused", listed
    after = ok(resume(api, sid))
    assert left - 1 <= after["ttl_remaining"] <= left, (left, after)
    assert abs(after["expires_at"] - (time.time() + left)) <= 2, after


def test_timeout_while_paused_is_the_ttl_it_resumes_with(api):
    sid = api.create(ttl=300)
    assert pause(api, sid).status_code == 200
    r = api.request("POST", f"/sandbox/{sid}/timeout", json={"ttl": 42})
    assert r.status_code == 200, r.text
    assert parse_json(api.get(sid))["ttl_remaining"] == 42
    after = ok(resume(api, sid))
    assert 41 <= after["ttl_remaining"] <= 42, after


def test_pause_ttl_end_destroys_the_sandbox(make_stack):
    st = make_stack("pausettl", max_pause=2)
    api = st.api
    sid = api.create(ttl=600)
    info = ok(pause(api, sid))
    assert info["pause_expires_at"] - info["paused_at"] == 2, info
    wait_until(lambda: api.get(sid).status_code == 404, timeout=15,
               what="the paused sandbox to be destroyed at its pause TTL")
    wait_until(lambda: not docker_exists(f"nanobox-{sid}"), timeout=15,
               what="its container to be removed")
    assert_error(resume(api, sid), 404, "not_found")


# ---------------------------------------------------------- auto_resume

def test_auto_resume_resumes_on_the_first_call_that_needs_it(api):
    info = api.create_info(auto_resume=True)
    sid = info["sandboxId"]
    assert info["auto_resume"] is True
    assert ok(pause(api, sid))["state"] == "paused"
    assert docker_paused(sid) is True
    assert api.exec(sid, "echo awake")["stdout"] == "awake\n"
    got = parse_json(api.get(sid))
    assert got["state"] == "running" and got["auto_resume"] is True, got
    assert docker_paused(sid) is False
    # without it: false, and 409
    other = api.create_info()
    assert other["auto_resume"] is False


def test_auto_resume_must_be_a_boolean(api):
    r = api.request("POST", "/sandbox", json={"auto_resume": "yes"})
    assert_error(r, 400, "bad_field")


# ------------------------------------------------------- on_timeout pause

def test_on_timeout_pause_pauses_at_the_ttl_and_keeps_everything(api):
    """A sandbox created with "on_timeout": "pause" is paused at its TTL's
    end instead of destroyed: its processes frozen where they were, its pause
    TTL running; a resume gives it default_ttl (its own was spent)."""
    info = api.create_info(ttl=3, on_timeout="pause")
    sid = info["sandboxId"]
    assert info["on_timeout"] == "pause" and info["auto_resume"] is False, info
    assert docker_inspect(f"nanobox-{sid}")["Config"]["Labels"]["nanobox.on_timeout"] == "pause"
    pid = start_counter(api, sid)
    wait_until(lambda: parse_json(api.get(sid))["state"] == "paused", timeout=15,
               what="the sandbox paused at its TTL")
    got = parse_json(api.get(sid))
    assert got["pause_expires_at"] - got["paused_at"] >= 86400 - 2, got  # max_pause
    assert got["ttl_remaining"] == 600, got  # default_ttl, for a resume
    assert docker_paused(sid) is True
    seen = count(pid)
    time.sleep(0.5)
    assert count(pid) == seen  # frozen
    assert_error(api.exec_raw(sid, "true"), 409, "paused")
    r = resume(api, sid)
    assert r.status_code == 200, r.text
    assert 590 <= parse_json(r)["ttl_remaining"] <= 600
    wait_until(lambda: count(pid)[1] > seen[1], timeout=10, what="the counter to go on")
    assert count(pid)[0] == seen[0]  # the same process


def test_on_timeout_destroy_is_the_default_and_pause_needs_a_known_word(api):
    info = api.create_info(ttl=2)
    assert info["on_timeout"] == "destroy"
    sid = info["sandboxId"]
    wait_until(lambda: api.get(sid).status_code == 404, timeout=15, what="the sandbox destroyed at its TTL")
    wait_until(lambda: not docker_exists(f"nanobox-{sid}"), timeout=15, what="its container removed")
    assert api.create_info(on_timeout="destroy")["on_timeout"] == "destroy"
    before = len(parse_json(api.request("GET", "/sandbox"))["sandboxes"])
    for bad in ("sleep", "", 1, True, None, ["pause"]):
        r = api.request("POST", "/sandbox", json={"on_timeout": bad})
        assert_error(r, 400, "bad_field")
    assert len(parse_json(api.request("GET", "/sandbox"))["sandboxes"]) == before


def test_on_timeout_pause_with_auto_resume_wakes_on_a_call(api):
    sid = api.create(ttl=2, on_timeout="pause", auto_resume=True)
    api.exec(sid, "echo kept > /workspace/f")
    wait_until(lambda: parse_json(api.get(sid))["state"] == "paused", timeout=15,
               what="the sandbox paused at its TTL")
    assert api.exec(sid, "cat /workspace/f")["stdout"] == "kept\n"
    got = parse_json(api.get(sid))
    assert got["state"] == "running" and got["on_timeout"] == "pause", got
    assert docker_paused(sid) is False


# ------------------------------------------------------------------ ports

def test_a_paused_sandboxs_ports_refuse_new_connections(papi, stack):
    api = papi
    sid = api.create(ttl=600)
    token = start_http_server(api, sid, 8000)
    port = api.open_port(sid, 8000)
    assert via_nginx(stack, sid, 8000).text == token
    assert pause(api, sid).status_code == 200
    # through nginx: a 409 that says so, at once (not a hang)
    t0 = time.monotonic()
    r = via_nginx(stack, sid, 8000, timeout=5)
    assert time.monotonic() - t0 < 3
    body = assert_error(r, 409, "paused")
    assert "paused" in body["error"]
    # the host port: closed at once
    with pytest.raises(requests.ConnectionError):
        via_host_port(port["hostport"], timeout=5)
    assert resume(api, sid).status_code == 200
    assert via_nginx(stack, sid, 8000).text == token
    assert via_host_port(port["hostport"]).text == token


# -------------------------------------------------- destroy and restart

def test_a_paused_sandbox_can_be_deleted(api):
    sid = api.create()
    assert pause(api, sid).status_code == 200
    assert api.delete(sid).status_code == 204
    assert not docker_exists(f"nanobox-{sid}")
    assert_error(api.get(sid), 404, "not_found")


def test_a_paused_sandbox_survives_a_restart(make_stack):
    st = make_stack("pauserestart")
    api = st.api
    sid = api.create(ttl=600)
    pid = start_counter(api, sid)
    left = ok(pause(api, sid))["ttl_remaining"]
    seen = count(pid)
    st.restart()
    # after the start-up reconciliation: still there, still paused, on both sides
    time.sleep(1.5)
    got = parse_json(api.get(sid))
    assert got["state"] == "paused" and got["ttl_remaining"] == left, got
    assert docker_paused(sid) is True
    assert count(pid) == seen
    assert_error(api.exec_raw(sid, "true"), 409, "paused")
    assert resume(api, sid).status_code == 200
    wait_until(lambda: count(pid)[1] > seen[1], timeout=10, what="the counter to go on")
    assert count(pid)[0] == seen[0]


# ------------------------------------------------------------- bad input

def test_unknown_sandbox_is_404_and_bad_input_400(api):
    ghost = "0f8fad5b-d9cb-469f-a165-70867728950e"
    assert_error(pause(api, ghost), 404, "not_found")
    assert_error(resume(api, ghost), 404, "not_found")
    assert_error(pause(api, "not-an-id"), 400, "bad_id")
    sid = api.create()
    r = api.request("POST", f"/sandbox/{sid}/pause", json={"persist": True})
    assert_error(r, 400, "bad_field")
    assert parse_json(api.get(sid))["state"] == "running"  # changed nothing
    r = api.request("POST", f"/sandbox/{sid}/pause", data="[1]",
                    headers={"Content-Type": "application/json"})
    assert_error(r, 400, "bad_json")
    r = api.request("GET", f"/sandbox/{sid}/pause")
    assert_error(r, 405, "method_not_allowed")
    assert r.headers.get("Allow") == "POST"
    assert parse_json(api.get(sid))["state"] == "running"
