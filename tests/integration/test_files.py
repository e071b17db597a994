"""Files through the sandbox's agent: byte-exact round trips (tmpfs
included), listings, mkdir/move/delete, caps, and every way a path may try
to escape or confuse."""

import hashlib
import os
import urllib.parse

import pytest
import requests

from nbtest import assert_error, docker_inspect, parse_json


@pytest.fixture(scope="module")
def sid(stack):
    s = stack.api.create(ttl=1800)
    yield s
    stack.api.delete(s)


def put(api, sid, path, data, **q):
    qs = urllib.parse.urlencode({"path": path, **q})
    return api.request("PUT", f"/sandbox/{sid}/files?{qs}", data=data,
                       headers={"Content-Type": "application/octet-stream"}, timeout=120)


def get(api, sid, path):
    return api.request("GET", f"/sandbox/{sid}/files?" + urllib.parse.urlencode({"path": path}),
                       timeout=120)


def delete(api, sid, path, **q):
    qs = urllib.parse.urlencode({"path": path, **q})
    return api.request("DELETE", f"/sandbox/{sid}/files?{qs}")


@pytest.mark.parametrize("path", ["/tmp/blob.bin", "/workspace/deep/er/blob.bin"])
def test_5_mib_binary_round_trips_byte_exact(api, sid, path):
    blob = os.urandom(5 * 1024 * 1024)
    r = put(api, sid, path, blob)
    assert r.status_code == 201, r.text
    info = parse_json(r)
    assert info["path"] == path and info["size"] == len(blob) and info["type"] == "file"
    # the sandbox itself sees the same bytes (tmpfs: docker cp could not)
    res = api.exec(sid, f"sha256sum {path} | cut -d' ' -f1; stat -c %u {path}")
    uid = docker_inspect(f"nanobox-{sid}")["Config"]["User"].split(":")[0]
    assert res["stdout"].split() == [hashlib.sha256(blob).hexdigest(), uid]
    r = get(api, sid, path)
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "application/octet-stream"
    assert r.content == blob



def test_a_reader_that_leaves_mid_download_breaks_nothing(api, sid):
    # a download goes to nginx in records of up to 64k written straight to
    # the FastCGI socket: a client that hangs up part-way must leave the
    # file, the worker and the next downloads as they were
    blob = os.urandom(12 * 1024 * 1024)
    assert put(api, sid, "/tmp/leave.bin", blob).status_code == 201
    url = api.base + f"/sandbox/{sid}/files?" + urllib.parse.urlencode({"path": "/tmp/leave.bin"})
    for _ in range(3):
        with requests.get(url, headers=api.headers(True, None), stream=True, timeout=60,
                          verify=api.stack.verify) as r:
            assert r.status_code == 200
            first = next(r.iter_content(65536))
            assert first == blob[:len(first)]
    r = get(api, sid, "/tmp/leave.bin")
    assert r.status_code == 200 and r.content == blob
    assert api.exec(sid, "true")["exit_code"] == 0
def test_relative_paths_are_in_the_workspace_and_mode_is_applied(api, sid):
    r = put(api, sid, "rel/run.sh", b"#!/bin/sh\necho ran\n", mode="0755")
    assert r.status_code == 201 and parse_json(r)["path"] == "/workspace/rel/run.sh"
    assert parse_json(r)["mode"] == "0755"
    assert api.exec(sid, "/workspace/rel/run.sh")["stdout"] == "ran\n"


def test_overwrite_replaces_the_content(api, sid):
    put(api, sid, "/workspace/over.txt", b"a much longer first version")
    put(api, sid, "/workspace/over.txt", b"short")
    assert get(api, sid, "/workspace/over.txt").content == b"short"


def test_empty_file(api, sid):
    assert put(api, sid, "/workspace/empty", b"").status_code == 201
    r = get(api, sid, "/workspace/empty")
    assert r.status_code == 200 and r.content == b""


def test_directory_listing(api, sid):
    api.exec(sid, "mkdir -p /workspace/ls/sub && printf 12345 > /workspace/ls/f && "
                  "ln -s /etc/hostname /workspace/ls/link")
    r = get(api, sid, "/workspace/ls")
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("application/json")
    body = parse_json(r)
    assert body["path"] == "/workspace/ls" and body["type"] == "dir" and body["truncated"] is False
    entries = {e["name"]: e for e in body["entries"]}
    assert set(entries) == {"sub", "f", "link"}
    assert entries["sub"]["type"] == "dir"
    assert entries["f"]["type"] == "file" and entries["f"]["size"] == 5
    assert entries["link"]["type"] == "symlink"
    for e in entries.values():
        assert isinstance(e["mtime"], int) and e["mtime"] > 1_600_000_000
        assert isinstance(e["mtime_nsec"], int) and 0 <= e["mtime_nsec"] < 10**9
        assert len(e["mode"]) == 4 and e["mode"].startswith("0")


def test_mtime_nsec_is_the_mtimes_fraction(api, sid):
    api.exec(sid, "mkdir -p /workspace/ns && touch -d '2024-05-01 10:00:00.123456789' /workspace/ns/f")
    f = parse_json(get(api, sid, "/workspace/ns"))["entries"][0]
    assert (f["name"], f["mtime"], f["mtime_nsec"]) == ("f", 1714557600, 123456789), f
    r = put(api, sid, "/workspace/ns/g", b"x")
    out = api.exec(sid, "stat -c %.9Y /workspace/ns/g")
    assert "%d.%09d" % (r.json()["mtime"], r.json()["mtime_nsec"]) == out["stdout"].strip(), (r.text, out)


def test_mkdir_move_delete(api, sid):
    r = api.request("POST", f"/sandbox/{sid}/files/mkdir", json={"path": "/workspace/m/a/b"})
    assert r.status_code == 201
    r = api.request("POST", f"/sandbox/{sid}/files/mkdir", json={"path": "/workspace/m/a/b"})
    assert r.status_code == 201  # already there is fine
    put(api, sid, "/workspace/m/a/b/x.txt", b"x")
    r = api.request("POST", f"/sandbox/{sid}/files/move",
                    json={"from": "/workspace/m/a/b/x.txt", "to": "/workspace/m/y.txt"})
    assert r.status_code == 200 and parse_json(r)["path"] == "/workspace/m/y.txt"
    assert get(api, sid, "/workspace/m/y.txt").content == b"x"
    assert_error(get(api, sid, "/workspace/m/a/b/x.txt"), 404, "not_found")
    assert_error(delete(api, sid, "/workspace/m"), 409, "conflict")  # not empty
    assert delete(api, sid, "/workspace/m/y.txt").status_code == 204
    assert delete(api, sid, "/workspace/m", recursive="true").status_code == 204
    assert api.exec(sid, "test -e /workspace/m; echo $?")["stdout"] == "1\n"


def test_recursive_delete_does_not_follow_symlinks(api, sid):
    api.exec(sid, "mkdir -p /workspace/keep /workspace/tree && echo precious > /workspace/keep/f && "
                  "ln -s /workspace/keep /workspace/tree/link")
    assert delete(api, sid, "/workspace/tree", recursive="1").status_code == 204
    assert api.exec(sid, "cat /workspace/keep/f")["stdout"] == "precious\n"


def test_missing_and_forbidden_paths(api, sid):
    assert_error(get(api, sid, "/workspace/nope"), 404, "not_found")
    assert_error(delete(api, sid, "/workspace/nope"), 404, "not_found")
    # the agent has the sandbox user's rights, nothing more
    assert_error(get(api, sid, "/etc/shadow"), 403, "forbidden")
    assert_error(put(api, sid, "/etc/passwd", b"x"), 403, "forbidden")
    assert_error(put(api, sid, "/usr/bin/evil", b"x"), 403, "forbidden")  # read-only root or perms


def test_symlink_is_resolved_inside_the_sandbox(api, sid):
    # a symlink can only lead elsewhere in the same sandbox: the sandbox's own hostname
    api.exec(sid, "ln -sf /etc/hostname /workspace/host-link")
    r = get(api, sid, "/workspace/host-link")
    assert r.status_code == 200
    assert r.content.decode().strip() == sid[:8]


@pytest.mark.parametrize("path", ["/workspace/../etc/passwd", "../x", "/workspace/./a", "a/..", ".."])
def test_dot_components_are_refused(api, sid, path):
    assert_error(get(api, sid, path), 400, "bad_path")
    assert_error(put(api, sid, path, b"x"), 400, "bad_path")
    assert_error(delete(api, sid, path), 400, "bad_path")


def test_nul_bytes_and_missing_or_long_paths_are_refused(api, sid):
    r = api.request("GET", f"/sandbox/{sid}/files?path=/workspace/a%00b")
    assert_error(r, 400, "bad_path")
    assert_error(api.request("GET", f"/sandbox/{sid}/files"), 400, "bad_path")
    assert_error(api.request("GET", f"/sandbox/{sid}/files?path="), 400, "bad_path")
    assert_error(get(api, sid, "/workspace/" + "a" * 300), 400, "bad_request")  # NAME_MAX
    assert_error(get(api, sid, "/workspace/" + "a" * 2100), 414, "too_large")
    r = api.request("POST", f"/sandbox/{sid}/files/mkdir", data='{"path": "/workspace/a\\u0000b"}')
    assert_error(r, 400, "bad_path")
    assert_error(api.request("POST", f"/sandbox/{sid}/files/move", json={"from": "/workspace/x"}),
                 400, "bad_field")


def test_reading_a_fifo_does_not_hang(api, sid):
    api.exec(sid, "mkfifo /workspace/pipe")
    r = get(api, sid, "/workspace/pipe")
    assert_error(r, 400, "bad_request")


def test_unknown_sandbox_and_methods(api):
    assert_error(api.request("GET", "/sandbox/00000000-0000-4000-8000-000000000000/files?path=/tmp"),
                 404, "not_found")
    r = api.request("POST", "/sandbox/00000000-0000-4000-8000-000000000000/files?path=/tmp")
    assert_error(r, 405, "method_not_allowed")


def test_file_over_the_cap_is_refused_and_nothing_is_written(make_stack):
    st = make_stack("filecap", max_file="1m")
    s = st.api.create()
    try:
        assert_error(put(st.api, s, "/workspace/big", b"\0" * (1024 * 1024 + 1)), 413, "too_large")
        assert st.api.exec(s, "ls -A /workspace | wc -l")["stdout"].strip() == "0"
        assert put(st.api, s, "/workspace/ok", b"\0" * (1024 * 1024)).status_code == 201
    finally:
        st.api.delete(s)


def test_filling_the_tmpfs_is_a_clear_error(api, sid):
    # /tmp is a small tmpfs: a write past it gets 507 and leaves no partial file
    size = api.exec(sid, "df -B1 --output=size /tmp | tail -1")["stdout"].strip()
    r = put(api, sid, "/tmp/fill", b"\0" * (int(size) + 1024 * 1024))
    assert_error(r, 507, "no_space")
    assert api.exec(sid, "ls -A /tmp | grep -c fill || true")["stdout"].strip() == "0"
