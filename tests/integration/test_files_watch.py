"""GET /sandbox/{id}/files/watch (NDJSON changes of a directory until the
client leaves; the agent's inotify watch goes with it) and moves across
the sandbox's mounts (/workspace -> /tmp: the agent copies then deletes)."""

import json
import os
import threading
import time
import urllib.parse

import pytest
import requests

from nbtest import assert_error, docker_inspect, parse_json, wait_until


@pytest.fixture(scope="module")
def sid(stack):
    s = stack.api.create(ttl=1800)
    yield s
    stack.api.delete(s)


def open_watch(api, sid, path, **q):
    qs = urllib.parse.urlencode({"path": path, **q})
    r = requests.get(f"{api.base}/sandbox/{sid}/files/watch?{qs}", headers=api.headers(),
                     stream=True, timeout=30, verify=api.stack.verify)
    return r


def lines_of(r):
    for raw in r.iter_lines():
        if raw:
            yield json.loads(raw)


def until(it, pred, limit=200):
    seen = []
    for ev in it:
        seen.append(ev)
        if pred(ev):
            return seen
        assert len(seen) < limit, seen
    raise AssertionError(f"stream ended first: {seen}")


def inotify_fds(sid):
    pid = docker_inspect(f"nanobox-{sid}")["State"]["Pid"]
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            n += os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:inotify"
        except OSError:
            pass
    return n


def test_watch_streams_changes_with_relative_names(api, sid):
    api.exec(sid, "mkdir -p /workspace/w1")
    r = open_watch(api, sid, "/workspace/w1")
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"].startswith("application/x-ndjson")
    it = lines_of(r)
    start = next(it)
    assert start == {"type": "start", "path": "/workspace/w1", "recursive": False, "dirs": 1}
    api.exec(sid, "echo hi > /workspace/w1/a.txt && chmod 600 /workspace/w1/a.txt && "
                  "mv /workspace/w1/a.txt /workspace/w1/b.txt && rm /workspace/w1/b.txt")
    seen = until(it, lambda e: e == {"type": "remove", "name": "b.txt"})
    kinds = [(e["type"], e.get("name")) for e in seen]
    for want in [("create", "a.txt"), ("write", "a.txt"), ("chmod", "a.txt"),
                 ("rename", "a.txt"), ("create", "b.txt")]:
        assert want in kinds, kinds
    r.close()


def test_recursive_watch_and_upload_events(api, sid):
    api.exec(sid, "mkdir -p /workspace/w2/sub")
    r = open_watch(api, sid, "w2", recursive="1")
    it = lines_of(r)
    assert next(it)["dirs"] == 2
    qs = urllib.parse.urlencode({"path": "/workspace/w2/sub/up.bin"})
    assert api.request("PUT", f"/sandbox/{sid}/files?{qs}", data=b"data").status_code == 201
    seen = until(it, lambda e: e == {"type": "write", "name": "sub/up.bin"})
    assert not any(".nanobox" in e.get("name", "") for e in seen), seen
    r.close()


def test_client_leaving_frees_the_agents_watch(api, sid):
    api.exec(sid, "mkdir -p /workspace/w3/a/b")
    streams = [open_watch(api, sid, "/workspace/w3", recursive="true") for _ in range(3)]
    its = [lines_of(r) for r in streams]  # a dropped iterator would close its response
    for it in its:
        assert next(it) == {"type": "start", "path": "/workspace/w3", "recursive": True, "dirs": 3}
    assert inotify_fds(sid) == 3
    for r in streams:
        r.close()
    wait_until(lambda: inotify_fds(sid) == 0, 10, 0.1, what="the agent to drop its watches")


def test_watch_errors(api, sid):
    api.exec(sid, "mkdir -p /workspace/w4 && touch /workspace/w4/file")
    assert_error(open_watch(api, sid, "/workspace/nope"), 404, "not_found")
    assert_error(open_watch(api, sid, "/workspace/w4/file"), 409, "conflict")
    assert_error(open_watch(api, sid, "../etc"), 400, "bad_path")
    r = requests.get(f"{api.base}/sandbox/{sid}/files/watch", headers=api.headers(), timeout=30,
                     verify=api.stack.verify)
    assert_error(r, 400, "bad_path")
    assert inotify_fds(sid) == 0


def test_directory_cap_from_the_config(make_stack):
    st = make_stack("watchcap", files_watch_max_dirs=2)
    s = st.api.create(ttl=600)
    try:
        st.api.exec(s, "mkdir -p /workspace/c/d1 /workspace/c/d2")
        assert_error(open_watch(st.api, s, "/workspace/c", recursive="1"), 429, "too_many_watches")
        r = open_watch(st.api, s, "/workspace/c")
        it = lines_of(r)
        assert r.status_code == 200 and next(it)["dirs"] == 1
        r.close()
    finally:
        st.api.delete(s)


def test_move_from_workspace_to_tmp_crosses_mounts(api, sid):
    api.exec(sid, "mkdir -p /workspace/mv/sub && printf abc > /workspace/mv/sub/f && "
                  "chmod 750 /workspace/mv/sub && ln -s sub/f /workspace/mv/link && "
                  "printf x > /workspace/single && chmod 640 /workspace/single")
    r = api.request("POST", f"/sandbox/{sid}/files/move", json={"from": "/workspace/mv", "to": "/tmp/mv"})
    assert r.status_code == 200, r.text
    assert parse_json(r)["path"] == "/tmp/mv"
    res = api.exec(sid, "cat /tmp/mv/sub/f; echo; stat -c %a /tmp/mv/sub; readlink /tmp/mv/link; "
                        "test -e /workspace/mv; echo $?; ls -a /tmp | grep -c nanobox-move")
    assert res["stdout"].split("\n")[:5] == ["abc", "750", "sub/f", "1", "0"], res
    r = api.request("POST", f"/sandbox/{sid}/files/move",
                    json={"from": "/workspace/single", "to": "/tmp/single"})
    assert r.status_code == 200, r.text
    res = api.exec(sid, "cat /tmp/single; echo; stat -c %a /tmp/single; test -e /workspace/single; echo $?")
    assert res["stdout"].split() == ["x", "640", "1"]


def test_watch_sees_a_move_in_from_another_mount(api, sid):
    api.exec(sid, "mkdir -p /workspace/w5 && printf q > /tmp/q.txt")
    r = open_watch(api, sid, "/workspace/w5")
    it = lines_of(r)
    next(it)
    done = []
    t = threading.Thread(target=lambda: done.append(api.request(
        "POST", f"/sandbox/{sid}/files/move", json={"from": "/tmp/q.txt", "to": "/workspace/w5/q.txt"})))
    t.start()
    seen = until(it, lambda e: e.get("name") == "q.txt" and e["type"] == "create")
    t.join()
    assert done[0].status_code == 200
    assert not any(".nanobox" in e.get("name", "") for e in seen), seen
    r.close()
    time.sleep(0.1)
