"""Snapshots: POST /sandbox/{id}/snapshot turns a sandbox's files as its
processes see them (/workspace and /tmp are tmpfs mounts, the rest is the
read-only image) into a template; a sandbox created from it finds them
byte-exact, with their modes and symlinks, and a package installed with
pip --user works there. The parent keeps running (or stays paused), a
snapshot of a snapshot's sandbox works, and bad input changes nothing.

Images a stack built carry its instance label and go when the stack stops.
"""

import io
import json
import os
import secrets
import time
import zipfile

import nbtest
from nbtest import assert_error, docker_exists, docker_inspect, parse_json

PY = nbtest.PYTHON_IMAGE

# In the sandbox: every entry under /workspace and /tmp with its type, mode,
# size, sha256 and link target, as JSON (what "byte-exact" compares).
MANIFEST = r"""
import hashlib, json, os, stat
out = {}
for top in ("/workspace", "/tmp"):
    for d, dirs, files in os.walk(top):
        for n in dirs + files:
            p = os.path.join(d, n)
            st = os.lstat(p)
            e = {"mode": stat.S_IMODE(st.st_mode), "uid_is_mine": st.st_uid == os.getuid()}
            if stat.S_ISLNK(st.st_mode):
                e["link"] = os.readlink(p)
            elif stat.S_ISREG(st.st_mode):
                e["sha256"] = hashlib.sha256(open(p, "rb").read()).hexdigest()
                e["size"] = st.st_size
            elif stat.S_ISDIR(st.st_mode):
                e["dir"] = True
            out[p] = e
print(json.dumps(out, sort_keys=True))
"""


def name():
    return "s-" + secrets.token_hex(4)


def put(api, sid, path, data):
    r = api.request("PUT", f"/sandbox/{sid}/files?path={path}", data=data)
    assert r.status_code in (200, 201, 204), r.text


def get_file(api, sid, path):
    r = api.request("GET", f"/sandbox/{sid}/files?path={path}")
    assert r.status_code == 200, r.text
    return r.content


def sh(api, sid, cmd):
    res = api.exec(sid, cmd)
    assert res["exit_code"] == 0, res
    return res["stdout"]


def manifest(api, sid):
    put(api, sid, "/tmp/.manifest.py", MANIFEST.encode())
    m = json.loads(sh(api, sid, "python3 /tmp/.manifest.py"))
    m.pop("/tmp/.manifest.py", None)
    return m


def wheel():
    """A pure-python wheel of package nbsnap_pkg with a console script (pip
    installs it with no network)."""
    buf = io.BytesIO()
    di = "nbsnap_pkg-1.0.dist-info"
    files = {
        "nbsnap_pkg/__init__.py": "ANSWER = 42\ndef main():\n    print('nbsnap-tool', ANSWER)\n",
        f"{di}/METADATA": "Metadata-Version: 2.1\nName: nbsnap-pkg\nVersion: 1.0\n",
        f"{di}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                       "Tag: py3-none-any\n",
        f"{di}/entry_points.txt": "[console_scripts]\nnbsnap-tool = nbsnap_pkg:main\n",
    }
    with zipfile.ZipFile(buf, "w") as z:
        for p, t in files.items():
            z.writestr(p, t)
        z.writestr(f"{di}/RECORD", "".join(f"{p},,\n" for p in files) + f"{di}/RECORD,,\n")
    return buf.getvalue()


def snapshot(api, sid, nm=None):
    r = api.request("POST", f"/sandbox/{sid}/snapshot", json={"name": nm} if nm else {},
                    timeout=300)
    assert r.status_code == 201, r.text
    return parse_json(r)


def template_count(api):
    return len(parse_json(api.request("GET", "/templates"))["templates"])


def test_snapshot_restores_workspace_tmp_and_an_install_byte_exact(api, stack):
    sid = api.create(image=PY)
    blob = os.urandom(300_000) + bytes(range(256))
    put(api, sid, "/workspace/data/blob.bin", blob)
    put(api, sid, "/tmp/scratch/t.bin", bytes(range(256)) * 7)
    put(api, sid, "/workspace/run.sh", b"#!/bin/sh\necho ran\n")
    put(api, sid, "/workspace/secret", b"mine only\n")
    put(api, sid, "/tmp/nbsnap_pkg-1.0-py3-none-any.whl", wheel())
    sh(api, sid, "chmod 0751 /workspace/run.sh && chmod 0600 /workspace/secret && "
                 "ln -s data/blob.bin /workspace/link && ln -s /etc/hostname /tmp/abs && "
                 "mkdir -m 0700 /workspace/private && : > /workspace/empty && "
                 "python3 -m pip install -q --user --no-index --break-system-packages "
                 "/tmp/nbsnap_pkg-1.0-py3-none-any.whl")
    assert sh(api, sid, "~/.local/bin/nbsnap-tool") == "nbsnap-tool 42\n"
    before = manifest(api, sid)
    assert before["/workspace/link"]["link"] == "data/blob.bin"
    assert before["/workspace/run.sh"]["mode"] == 0o751

    nm = name()
    t = snapshot(api, sid, nm)
    assert t["name"] == nm and t["kind"] == "snapshot" and t["status"] == "ready", t
    assert t["parent"] == sid and t["parent_template"] == "nanobox-python", t
    assert t["digest"].startswith("sha256:") and t["size"] > 0
    labels = docker_inspect(t["image"])["Config"]["Labels"]
    assert labels["nanobox.kind"] == "snapshot" and labels["nanobox.parent"] == sid
    assert labels["nanobox.instance"] == stack.instance
    listed = {x["name"]: x for x in parse_json(api.request("GET", "/templates"))["templates"]}
    assert listed[nm]["parent"] == sid and listed[nm]["kind"] == "snapshot"
    assert parse_json(api.request("GET", f"/templates/{nm}"))["parent_template"] == "nanobox-python"

    # the parent kept running, thawed, with its files
    assert parse_json(api.request("GET", f"/sandbox/{sid}"))["status"] == "running"
    assert sh(api, sid, "cat /workspace/run.sh | tail -1") == "echo ran\n"
    assert api.delete(sid).status_code == 204

    child = api.create_info(template=nm)
    assert child["image"] == t["image"]
    cid = child["sandboxId"]
    after = manifest(api, cid)
    assert after == before
    assert all(e["uid_is_mine"] for e in after.values()), after
    assert get_file(api, cid, "/workspace/data/blob.bin") == blob
    assert get_file(api, cid, "/tmp/scratch/t.bin") == bytes(range(256)) * 7
    assert sh(api, cid, "/workspace/run.sh") == "ran\n"
    assert sh(api, cid, "~/.local/bin/nbsnap-tool") == "nbsnap-tool 42\n"
    assert sh(api, cid, "python3 -c 'import nbsnap_pkg; print(nbsnap_pkg.ANSWER)'") == "42\n"
    # the tar the image carries is not the sandbox's to read
    assert api.exec(cid, "cat /.nanobox/snapshot.tar > /dev/null")["exit_code"] != 0

    # a snapshot of the child (no name given): the first files and the new one
    put(api, cid, "/workspace/second.txt", b"second generation\n")
    t2 = snapshot(api, cid)
    assert t2["name"].startswith("snap-" + cid[:8]), t2
    assert t2["parent"] == cid and t2["parent_template"] == nm
    gid = api.create(template=t2["name"])
    assert get_file(api, gid, "/workspace/second.txt") == b"second generation\n"
    assert get_file(api, gid, "/workspace/data/blob.bin") == blob
    assert sh(api, gid, "readlink /workspace/link") == "data/blob.bin\n"

    # removed like templates: refused while used, then gone
    assert_error(api.request("DELETE", f"/templates/{t2['name']}"), 409, "in_use")
    assert api.delete(gid).status_code == 204
    assert api.request("DELETE", f"/templates/{t2['name']}").status_code == 204
    assert not docker_exists(t2["image"])


def test_snapshot_of_a_paused_sandbox_leaves_it_paused(api):
    sid = api.create()
    put(api, sid, "/workspace/p.txt", b"while paused\n")
    assert api.request("POST", f"/sandbox/{sid}/pause").status_code == 200
    t = snapshot(api, sid, name())
    assert parse_json(api.request("GET", f"/sandbox/{sid}"))["status"] == "paused"
    assert t["parent_template"] == "nanobox"
    kid = api.create(template=t["name"])
    assert get_file(api, kid, "/workspace/p.txt") == b"while paused\n"
    assert api.request("POST", f"/sandbox/{sid}/resume").status_code == 200
    assert sh(api, sid, "cat /workspace/p.txt") == "while paused\n"


def test_bad_input_is_refused_and_changes_nothing(api):
    sid = api.create()
    n0 = template_count(api)
    assert_error(api.request("POST", "/sandbox/00000000-0000-4000-8000-000000000000/snapshot",
                             json={}), 404, "not_found")
    assert api.request("POST", "/sandbox/not-an-id/snapshot", json={}).status_code == 400
    for bad in ["A", "-x", "x" * 64, "a/b"]:
        assert_error(api.request("POST", f"/sandbox/{sid}/snapshot", json={"name": bad}),
                     400, "bad_name")
    assert_error(api.request("POST", f"/sandbox/{sid}/snapshot", json={"name": 3}), 400,
                 "bad_field")
    assert_error(api.request("POST", f"/sandbox/{sid}/snapshot", json={"other": 1}), 400,
                 "bad_field")
    assert_error(api.request("POST", f"/sandbox/{sid}/snapshot", json={"name": "nanobox"}),
                 409, "name_taken")
    nm = name()
    snapshot(api, sid, nm)
    assert_error(api.request("POST", f"/sandbox/{sid}/snapshot", json={"name": nm}), 409,
                 "name_taken")
    assert template_count(api) == n0 + 1
    assert parse_json(api.request("GET", f"/sandbox/{sid}"))["status"] == "running"


def test_workspace_over_snapshot_max_is_413(make_stack):
    st = make_stack("snapcap", snapshot_max="1m")
    api = st.api
    sid = api.create()
    n0 = template_count(api)
    put(api, sid, "/workspace/big.bin", os.urandom(600_000))
    put(api, sid, "/tmp/big.bin", os.urandom(600_000))
    nm = name()
    assert_error(api.request("POST", f"/sandbox/{sid}/snapshot", json={"name": nm}), 413,
                 "too_large")
    assert_error(api.request("GET", f"/templates/{nm}"), 404, "not_found")
    assert template_count(api) == n0
    # thawed again, files intact
    assert parse_json(api.request("GET", f"/sandbox/{sid}"))["status"] == "running"
    assert sh(api, sid, "stat -c %s /workspace/big.bin") == "600000\n"


def test_warm_pool_of_a_snapshot_template_hands_out_and_refills(make_stack):
    """warm_pool_template = name:2: once the template is ready the reaper keeps
    two sandboxes of it started (files restored); a create from it is handed
    one that was already running, and the pool refills."""
    st = make_stack("snapwarm", warm_pool_template="snapwarm:2")
    api = st.api

    def warm():
        return api.request("GET", "/healthz").json()["warm"]

    def containers():
        return set(nbtest.docker_ps(st.instance))

    sid = api.create()
    put(api, sid, "/workspace/w.txt", b"from the pool\n")
    assert warm() == 0  # no template of that name yet: no pool, no error
    snapshot(api, sid, "snapwarm")
    nbtest.wait_until(lambda: warm() == 2, timeout=60, what="two warm sandboxes of the snapshot")
    before = containers()
    t0 = time.monotonic()
    info = api.create_info(template="snapwarm")
    took = time.monotonic() - t0
    kid = info["sandboxId"]
    assert f"nanobox-{kid}" in before, "not handed a pooled sandbox"
    assert took < 2, took
    assert get_file(api, kid, "/workspace/w.txt") == b"from the pool\n"
    assert sh(api, kid, "stat -c %u /workspace/w.txt") == sh(api, kid, "id -u")
    nbtest.wait_until(lambda: warm() == 2 and len(containers()) == 4, timeout=60,
                      what="the template's pool refilled")
    # a create from another template is not served from it
    other = api.create()
    assert f"nanobox-{other}" not in before
    # the warm ones do not hold the template: once it is removed, they go
    assert_error(api.request("DELETE", "/templates/snapwarm"), 409, "in_use")  # kid runs it
    assert api.delete(kid).status_code == 204
    assert api.request("DELETE", "/templates/snapwarm").status_code == 204
    nbtest.wait_until(lambda: warm() == 0 and len(containers()) == 2, timeout=60,
                      what="the removed template's pool drained")
