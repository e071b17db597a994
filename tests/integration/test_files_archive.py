"""A directory tree in and out of a sandbox as one tar
(GET/PUT /sandbox/{id}/files/archive?path=DIR): subdirectories, binary
files, an empty directory, a symlink and modes round-trip byte-exact; a tar
whose entries would land outside the directory is refused whole, with
nothing written; the caps answer 413."""

import hashlib
import io
import os
import tarfile
import urllib.parse

import pytest

from nbtest import assert_error, parse_json


@pytest.fixture(scope="module")
def sid(stack):
    s = stack.api.create(ttl=1800)
    yield s
    stack.api.delete(s)


def put_tar(api, sid, path, data):
    return api.request("PUT", f"/sandbox/{sid}/files/archive?" + urllib.parse.urlencode({"path": path}),
                       data=data, headers={"Content-Type": "application/x-tar"}, timeout=120)


def get_tar(api, sid, path):
    return api.request("GET", f"/sandbox/{sid}/files/archive?" + urllib.parse.urlencode({"path": path}),
                       timeout=120)


def make_tar(entries):
    """entries: (name, kind, payload, mode); kind file|dir|symlink|hardlink|fifo."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, kind, payload, mode in entries:
            ti = tarfile.TarInfo(name)
            ti.mode = mode
            ti.mtime = 1700000000
            if kind == "file":
                ti.size = len(payload)
                t.addfile(ti, io.BytesIO(payload))
                continue
            ti.type = {"dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE, "hardlink": tarfile.LNKTYPE,
                       "fifo": tarfile.FIFOTYPE, "chr": tarfile.CHRTYPE}[kind]
            if kind in ("symlink", "hardlink"):
                ti.linkname = payload
            t.addfile(ti)
    return buf.getvalue()


def tree(data):
    """{name: (kind, bytes-or-target, mode)} of a tar, names without ./"""
    out = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as t:
        for m in t.getmembers():
            name = m.name[2:] if m.name.startswith("./") else m.name
            if m.isfile():
                out[name] = ("file", t.extractfile(m).read(), m.mode)
            elif m.isdir():
                out[name] = ("dir", b"", m.mode)
            elif m.issym():
                out[name] = ("symlink", m.linkname, None)
            else:
                out[name] = ("other", b"", m.mode)
    return out


BIN = os.urandom(300 * 1024) + bytes(range(256))
TREE = [
    (".", "dir", None, 0o755),
    ("src", "dir", None, 0o755),
    ("src/app.py", "file", b"print(6*7)\n", 0o644),
    ("src/run.sh", "file", b"#!/bin/sh\necho run\n", 0o755),
    ("src/deep", "dir", None, 0o700),
    ("src/deep/blob.bin", "file", BIN, 0o600),
    ("src/deep/zero", "file", b"", 0o640),
    ("empty", "dir", None, 0o750),
    ("src/link-to-app", "symlink", "app.py", 0o777),
    ("up-link", "symlink", "src/deep/../app.py", 0o777),
]


def test_a_tree_round_trips_byte_exact(api, sid):
    body = make_tar(TREE)
    r = put_tar(api, sid, "/workspace/proj", body)
    assert r.status_code == 200, r.text
    ans = parse_json(r)
    assert ans == {"path": "/workspace/proj", "entries": len(TREE),
                   "bytes": sum(len(p) for _, k, p, _ in TREE if k == "file")}, ans
    # what is in the sandbox, seen by its own tools
    out = api.exec(sid, "cd /workspace/proj && stat -c '%n %F %a' src src/run.sh src/deep src/deep/blob.bin "
                        "src/deep/zero empty src/link-to-app && readlink src/link-to-app && "
                        "sha256sum src/deep/blob.bin && ./src/run.sh")
    assert out["exit_code"] == 0, out
    lines = out["stdout"].splitlines()
    assert lines[:7] == ["src directory 755", "src/run.sh regular file 755", "src/deep directory 700",
                         "src/deep/blob.bin regular file 600", "src/deep/zero regular empty file 640",
                         "empty directory 750", "src/link-to-app symbolic link 777"], lines
    assert lines[7] == "app.py"
    assert lines[8].split()[0] == hashlib.sha256(BIN).hexdigest()
    assert lines[9] == "run"
    # and back out, one request: the same tree, bytes, modes and link
    g = get_tar(api, sid, "/workspace/proj")
    assert g.status_code == 200, g.text[:300]
    assert g.headers["content-type"] == "application/x-tar", g.headers
    assert 'filename="proj.tar"' in g.headers.get("content-disposition", ""), g.headers
    got = tree(g.content)
    want = tree(body)
    assert got.keys() == want.keys(), (sorted(got), sorted(want))
    for name, (kind, payload, mode) in want.items():
        assert got[name][0] == kind and got[name][1] == payload, name
        if kind != "symlink":
            assert got[name][2] == mode, (name, oct(got[name][2]), oct(mode))


def test_a_tar_goes_into_an_existing_directory_and_replaces_files(api, sid):
    api.exec(sid, "mkdir -p /workspace/into && echo old > /workspace/into/keep && echo old > /workspace/into/f")
    r = put_tar(api, sid, "/workspace/into", make_tar([("f", "file", b"new\n", 0o644)]))
    assert r.status_code == 200, r.text
    out = api.exec(sid, "cat /workspace/into/f /workspace/into/keep")["stdout"]
    assert out == "new\nold\n"


@pytest.mark.parametrize("entries, why", [
    ([("../evil", "file", b"x", 0o644)], ".."),
    ([("/workspace/evil", "file", b"x", 0o644)], "absolute"),
    ([("a", "dir", None, 0o755), ("a/../../evil", "file", b"x", 0o644)], ".."),
    ([("l", "symlink", "/workspace", 0o777), ("l/evil", "file", b"x", 0o644)], "absolute"),
    ([("l", "symlink", "../..", 0o777)], "above"),
    ([("d", "dir", None, 0o755), ("d/l", "symlink", "../../evil", 0o777)], "above"),
    ([("ok", "file", b"x", 0o644), ("h", "hardlink", "../evil", 0o644)], "hard link"),
    ([("fifo", "fifo", None, 0o644)], "FIFO"),
    ([("dev", "chr", None, 0o644)], "device"),
])
def test_an_escaping_tar_is_refused_and_nothing_is_written(api, sid, entries, why):
    # a harmless first entry, so that a partial extraction would show
    body = make_tar([("first.txt", "file", b"first", 0o644)] + entries)
    r = put_tar(api, sid, "/workspace/jail/inner", body)
    assert_error(r, 400, "bad_archive")
    assert why in r.json()["error"], r.json()
    assert "nothing was extracted" in r.json()["error"]
    left = api.exec(sid, "ls -A /workspace/jail 2>&1; ls -A /workspace | grep -c evil || true")
    assert left["stdout"].splitlines() == ["ls: cannot access '/workspace/jail': No such file or directory", "0"], left


@pytest.mark.parametrize("body, what", [
    (b"", "empty"),
    (b"this is not a tar at all" * 40, "tar"),
    (make_tar([("a", "file", b"x" * 5000, 0o644)])[:2048], "cut short"),
])
def test_a_body_that_is_no_tar_is_refused(api, sid, body, what):
    r = put_tar(api, sid, "/workspace/notar", body)
    assert_error(r, 400, "bad_archive")
    assert what in r.json()["error"], r.json()
    assert api.exec(sid, "test -e /workspace/notar; echo $?")["stdout"] == "1\n"


def test_a_gzipped_tar_is_refused(api, sid):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        ti = tarfile.TarInfo("a")
        ti.size = 1
        t.addfile(ti, io.BytesIO(b"x"))
    assert_error(put_tar(api, sid, "/workspace/gz", buf.getvalue()), 400, "bad_archive")


def test_archive_errors_are_json(api, sid):
    assert_error(get_tar(api, sid, "/workspace/no-such-dir"), 404, "not_found")
    api.exec(sid, "echo hi > /workspace/plain")
    assert_error(get_tar(api, sid, "/workspace/plain"), 409, "conflict")
    assert_error(put_tar(api, sid, "/workspace/plain", make_tar([("a", "file", b"x", 0o644)])), 409, "conflict")
    assert_error(get_tar(api, sid, "/workspace/../etc"), 400, "bad_path")
    assert_error(api.request("GET", f"/sandbox/{sid}/files/archive"), 400, "bad_path")
    assert_error(api.request("POST", f"/sandbox/{sid}/files/archive?path=/workspace"), 405, "method_not_allowed")
    # a file the sandbox user cannot read would be left out of the tar: refused first
    api.exec(sid, "mkdir -p /workspace/locked && echo x > /workspace/locked/f && chmod 000 /workspace/locked/f")
    r = get_tar(api, sid, "/workspace/locked")
    assert_error(r, 403, "forbidden")
    assert "./f" in r.json()["error"], r.json()
    # the sandbox user cannot write there: the sandbox's own answer
    assert_error(put_tar(api, sid, "/etc/nope", make_tar([("a", "file", b"x", 0o644)])), 403, "forbidden")


def test_archives_over_max_file_are_413(make_stack):
    st = make_stack("tarcap", max_file="1m")
    s = st.api.create()
    try:
        big = make_tar([("big", "file", b"\0" * (1024 * 1024 + 1), 0o644)])
        assert_error(put_tar(st.api, s, "/workspace/t", big), 413, "too_large")
        assert st.api.exec(s, "ls -A /workspace | wc -l")["stdout"].strip() == "0"
        # a directory whose tar is over the cap is not sent
        st.api.exec(s, "mkdir -p /workspace/d && head -c 1100000 /dev/zero > /workspace/d/f")
        assert_error(get_tar(st.api, s, "/workspace/d"), 413, "too_large")
        st.api.exec(s, "truncate -s 1000 /workspace/d/f")
        r = get_tar(st.api, s, "/workspace/d")
        assert r.status_code == 200 and tree(r.content)["f"][1] == b"\0" * 1000
    finally:
        st.api.delete(s)
