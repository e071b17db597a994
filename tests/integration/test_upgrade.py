"""
test_upgrade.py - an upgrade of nanobox keeps the running sandboxes
(docs/ARCHITECTURE.md, "Adoption"): the service is stopped, its state file
is made one of another layout version (what a new build finds after an
upgrade), replaced by garbage or deleted, and the service started again.
The file goes to <state>.old, a fresh table is made, and every running
sandbox is adopted from Docker: same id, owner (a user still sees only its
own), remaining TTL, files, processes, exec, open ports; and it expires or
is destroyed normally afterwards, leaving nothing behind.
"""

import os
import struct

import pytest
import requests

from nbtest import docker_ps, parse_json, random_uuid, wait_until
from test_keys import KeyApi, add_key

VERSION_OFFSET = 8  # struct nb_table_header: magic[8], then the u32 version


def fetch(url, host=None):
    try:
        r = requests.get(url, headers={"Host": host} if host else {}, timeout=5)
    except requests.RequestException as e:
        return f"<{e}>"
    return r.text if r.status_code == 200 else f"<{r.status_code}>"


def make_old(path, how):
    """What a new build may find at state_file."""
    if how == "version1":
        with open(path, "r+b") as f:
            f.seek(VERSION_OFFSET)
            f.write(struct.pack("<I", 1))
    elif how == "garbage":
        with open(path, "wb") as f:
            f.write(b"not a nanobox table\n" * 100)
    elif how == "missing":
        os.unlink(path)


def log_since(st, offset):
    with open(st.log_path, "rb") as f:
        f.seek(offset)
        return f.read().decode("utf-8", "replace")


def prepare(st, api, ttl):
    """A sandbox with a file in /workspace, a background server and an open port."""
    sid = api.create(ttl=ttl, metadata={"who": api.key[:6]})
    token = f"kept across the upgrade {random_uuid()}\n"
    r = api.request("PUT", f"/sandbox/{sid}/files?path=/workspace/keep.txt", data=token,
                    headers={"Content-Type": "application/octet-stream"})
    assert r.status_code in (200, 201), r.text
    r = api.exec_raw(sid, "exec python3 -m http.server 8000 --bind 127.0.0.1 --directory /workspace",
                     background=True)
    assert r.status_code == 201, r.text
    port = api.open_port(sid, 8000)
    url = f"http://127.0.0.1:{port['hostport']}/keep.txt"
    wait_until(lambda: fetch(url) == token, 15, what="the server to answer through the host port")
    info = parse_json(api.get(sid))
    return {"sid": sid, "token": token, "url": url, "hostport": port["hostport"],
            "expires_at": info["expires_at"], "api": api}


@pytest.fixture
def tenants(make_stack):
    st = make_stack("upgrade")
    apis = {n: KeyApi(st, add_key(st, n, *o)) for n, o in
            (("alice", ()), ("bob", ()), ("ops", ("--role", "admin")))}
    yield st, apis
    for a in apis.values():
        a.cleanup()


@pytest.mark.parametrize("how", ["version1", "garbage", "missing"])
def test_running_sandboxes_are_adopted_after_an_upgrade(tenants, how):
    st, apis = tenants
    alice, bob, ops = apis["alice"], apis["bob"], apis["ops"]
    boxes = [prepare(st, alice, 900), prepare(st, bob, 1200)]
    short = alice.create(ttl=25) if how == "version1" else None
    fwd_before = sorted(st.fwd_pids())
    assert len(fwd_before) == 2

    assert st.stop_fcgi()
    make_old(st.state, how)
    log_at = st.log_size()
    st.start_fcgi()
    st.wait_healthy()
    log = log_since(st, log_at)

    if how == "missing":
        assert not os.path.exists(st.state + ".old")
    else:
        assert os.path.exists(st.state + ".old"), log
        assert "moved it to" in log, log
    for b in boxes:
        assert f"adopted sandbox {b['sid']}" in log, log

    # the same ids, each seen by its owner only; the admin sees all
    a, b = boxes
    assert [s for s in alice.list_ids() if s != short] == [a["sid"]]
    assert bob.list_ids() == [b["sid"]]
    assert bob.get(a["sid"]).status_code == 404
    assert alice.get(b["sid"]).status_code == 404
    assert {a["sid"], b["sid"]} <= set(ops.list_ids())
    for box in boxes:
        api, sid = box["api"], box["sid"]
        info = parse_json(api.get(sid))
        assert abs(info["expires_at"] - box["expires_at"]) <= 2, (info, box)
        assert info["metadata"] == {"who": api.key[:6]}, info
        # the file, the process, exec, and the port (directly and through nginx)
        assert api.exec(sid, "cat /workspace/keep.txt")["stdout"] == box["token"]
        assert api.exec(sid, "pgrep -f '[h]ttp.server 8000'")["exit_code"] == 0
        assert fetch(box["url"]) == box["token"]
        assert fetch(f"{st.url}/keep.txt", st.port_host(sid, 8000)) == box["token"]
        ports = api.ports(sid)
        assert [p["hostport"] for p in ports] == [box["hostport"]], ports
    # the forwarders are the same processes, re-adopted
    assert sorted(st.fwd_pids()) == fwd_before

    if short is not None:
        # it expires normally after the adoption
        wait_until(lambda: alice.get(short).status_code == 404, 40, 0.5,
                   what="the short-lived adopted sandbox to expire")
        wait_until(lambda: not docker_ps(st.instance, sandbox=short), 20, 0.5,
                   what="its container to go")

    # destroyed normally: container, forwarder and port socket go
    for box in boxes:
        r = box["api"].delete(box["sid"])
        assert r.status_code in (200, 204), r.text
    wait_until(lambda: not docker_ps(st.instance), 20, 0.5, what="every container to go")
    wait_until(lambda: not st.fwd_pids(), 20, 0.5, what="the forwarders to stop")
    assert not [f for f in st.port_sockets() if f.endswith(".sock")]
    # and no slot is left in the table: the admin lists nothing
    assert ops.list_ids() == []


def test_a_handed_out_warm_sandbox_keeps_its_owner(make_stack):
    """A warm sandbox's owner (and auto_resume, on_timeout) is set at
    hand-out, which its labels cannot record: its lease file keeps them for
    the adoption."""
    st = make_stack("upgrade-warm", warm_pool=1)
    alice = KeyApi(st, add_key(st, "alice"))
    bob = KeyApi(st, add_key(st, "bob"))
    try:
        wait_until(lambda: "created warm sandbox" in log_since(st, 0), 60, 0.2,
                   what="the warm sandbox")
        sid = alice.create(ttl=700, auto_resume=True, on_timeout="pause")
        assert "handed out warm sandbox " + sid in log_since(st, 0)
        expires_at = parse_json(alice.get(sid))["expires_at"]
        assert st.stop_fcgi()
        make_old(st.state, "version1")
        log_at = st.log_size()
        st.start_fcgi()
        st.wait_healthy()
        log = log_since(st, log_at)
        assert f"adopted sandbox {sid}" in log, log
        assert alice.list_ids() == [sid]
        assert bob.list_ids() == []
        got = parse_json(alice.get(sid))
        assert abs(got["expires_at"] - expires_at) <= 2
        assert got["auto_resume"] is True and got["on_timeout"] == "pause", got
        assert alice.exec(sid, "echo hi")["stdout"] == "hi\n"
        # the pool (its unhanded warm sandbox was not adopted) fills again
        wait_until(lambda: len(docker_ps(st.instance)) == 2, 60, 0.5,
                   what="the pool to refill beside the adopted sandbox")
        assert alice.delete(sid).status_code in (200, 204)
    finally:
        alice.cleanup()
        bob.cleanup()


def test_reconciliation_reads_back_an_owner_missing_from_the_table(tenants):
    """Same layout: a slot whose owner is empty takes its container's label."""
    st, apis = tenants
    alice = apis["alice"]
    sid = alice.create(ttl=600)
    assert st.stop_fcgi()
    # blank the owner in the table file, as a table from before owners would have it
    raw = open(st.state, "rb").read()
    at = raw.index(sid.encode())
    own = raw.index(b"alice\0", at)
    with open(st.state, "r+b") as f:
        f.seek(own)
        f.write(b"\0" * 5)
    st.start_fcgi()
    st.wait_healthy()
    wait_until(lambda: alice.list_ids() == [sid], 10, 0.5,
               what="the owner to be read back from the label")
    assert "read back from its container's label" in log_since(st, 0)
    assert apis["bob"].get(sid).status_code == 404


def test_a_paused_sandbox_is_adopted_paused(tenants):
    """Its stopped TTL and its pause's end come from its lease (written at
    pause); it resumes with its processes and files where they were."""
    st, apis = tenants
    alice, bob = apis["alice"], apis["bob"]
    sid = alice.create(ttl=800)
    alice.exec(sid, "echo kept > /workspace/p.txt")
    r = alice.request("POST", f"/sandbox/{sid}/pause")
    assert r.status_code == 200, r.text
    before = parse_json(alice.get(sid))
    assert before["state"] == "paused", before
    assert st.stop_fcgi()
    make_old(st.state, "version1")
    st.start_fcgi()
    st.wait_healthy()
    after = parse_json(alice.get(sid))
    assert after["state"] == "paused", after
    assert after["ttl_remaining"] == before["ttl_remaining"], (before, after)
    assert after["pause_expires_at"] == before["pause_expires_at"], (before, after)
    assert bob.get(sid).status_code == 404
    r = alice.request("POST", f"/sandbox/{sid}/resume")
    assert r.status_code == 200, r.text
    assert alice.exec(sid, "cat /workspace/p.txt")["stdout"] == "kept\n"
    assert alice.delete(sid).status_code in (200, 204)
    wait_until(lambda: not docker_ps(st.instance), 20, 0.5, what="the container to go")
