"""E2B's snapshots and fork through the official SDK (tests/e2b/snapshots.mjs,
pinned and newest npm versions), and the hostile-tenant probes on E2B's
paths: another key's sandbox and snapshot ids are not found, a fork the
key's quota cannot hold is 429 with nothing made.
"""

import pytest

import nbtest
from nbtest import parse_json
from test_e2b import e2b, e2b_error, e2b_latest, e2b_sdk, sdk, sdk_script, step, thrown  # noqa: F401
from test_keys import KeyApi, add_key

READ_PARENT = '{"step": 1}\nfrom parent\nno-procs\n'


@pytest.fixture(scope="module")
def snaprun(stack, sdk):
    summary = sdk_script(stack, sdk, "snapshots.mjs", "e2bs-")
    yield summary
    for sid in summary["created"]:
        stack.api.delete(sid)
    for s in parse_json(stack.api.request("GET", "/templates"))["templates"]:
        if s["kind"] == "snapshot" and s.get("parent") == summary["sandbox"]:
            stack.api.request("DELETE", f"/templates/{s['name']}?force=1")


def test_create_snapshot_named_and_not(snaprun):
    named = step(snaprun, "createNamed")
    assert named["snapshotId"] == named["names"][0] and named["snapshotId"].startswith("snap-e2bs-")
    unnamed = step(snaprun, "createUnnamed")
    assert unnamed["snapshotId"].startswith("snap-" + snaprun["sandbox"][:8]), unnamed


def test_list_snapshots_all_of_a_sandbox_and_paged(snaprun):
    want = {step(snaprun, "createNamed")["snapshotId"], step(snaprun, "createUnnamed")["snapshotId"]}
    assert want <= {x["snapshotId"] for x in step(snaprun, "listAll")}
    assert {x["snapshotId"] for x in step(snaprun, "listOfSandbox")} == want
    pages = step(snaprun, "listPaged")["pages"]
    assert all(len(p) <= 1 for p in pages) and want <= {x["snapshotId"] for p in pages for x in p}


def test_a_sandbox_from_a_snapshot_has_its_files(snaprun):
    s = step(snaprun, "fromSnapshot")
    assert s["stdout"] == '{"step": 1}\n\nno-procs\n', s  # the files; env is the create's own


def test_fork_copies_files_env_metadata_and_restarts_processes(snaprun):
    forks = step(snaprun, "fork")["forks"]
    assert len(forks) == 2 and len({f["sandboxId"] for f in forks}) == 2, forks
    for f in forks:
        assert f["stdout"] == READ_PARENT, f
        assert f["metadata"]["suite"].startswith("e2bs-"), f
    # the parent keeps its processes
    assert step(snaprun, "parentRunsOn")["stdout"].startswith('{"step": 1}\nfrom parent\n')
    assert "no-procs" not in step(snaprun, "parentRunsOn")["stdout"]


def test_delete_snapshot_true_then_false(snaprun):
    assert snaprun["steps"]["deleteUnnamed"] is True, snaprun["steps"]["deleteUnnamed"]
    assert snaprun["steps"]["deleteAgain"] is False, snaprun["steps"]["deleteAgain"]
    gone = step(snaprun, "createUnnamed")["snapshotId"]
    assert gone not in {x["snapshotId"] for x in step(snaprun, "listAfterDelete")}


def test_killed_sandboxes_are_not_found_and_count_is_capped(snaprun):
    assert thrown(snaprun, "forkKilled")["name"] == "SandboxNotFoundError"
    assert thrown(snaprun, "snapshotKilled")["name"] == "SandboxNotFoundError"
    assert "fork_max" in thrown(snaprun, "forkTooMany")["message"]


def test_other_keys_ids_are_not_found_and_quota_is_429(make_stack):
    st = make_stack("e2bsnapkeys")
    ka, kb = add_key(st, "alice", "--max-sandboxes", "2"), add_key(st, "bob")
    alice, bob = KeyApi(st, ka), KeyApi(st, kb)
    try:
        a = alice.create()
        r = e2b(st, "POST", f"/sandboxes/{a}/snapshots", key="e2b_" + ka, json={"name": "mine"})
        assert r.status_code == 201 and r.json() == {"snapshotID": "mine", "names": ["mine"]}, r.text
        for method, path, body in (("POST", f"/sandboxes/{a}/snapshots", {}),
                                   ("POST", f"/sandboxes/{a}/fork", {"count": 1}),
                                   ("DELETE", "/templates/mine", None),
                                   ("POST", "/sandboxes", {"templateID": "mine"})):
            e2b_error(e2b(st, method, path, key="e2b_" + kb, json=body), 404)
        r = e2b(st, "GET", "/snapshots", key="e2b_" + kb)
        assert r.status_code == 200 and r.json() == [], r.text
        r = e2b(st, "GET", "/snapshots", key="e2b_" + ka)
        assert r.json() == [{"snapshotID": "mine", "names": ["mine"]}], r.text
        # alice holds 1 of 2: a fork of 2 is 429 and makes nothing
        before = set(nbtest.docker_ps(st.instance))
        e2b_error(e2b(st, "POST", f"/sandboxes/{a}/fork", key="e2b_" + ka,
                      json={"count": 2, "timeout": 60}), 429)
        assert set(nbtest.docker_ps(st.instance)) == before
        r = e2b(st, "POST", f"/sandboxes/{a}/fork", key="e2b_" + ka, json={"count": 1, "timeout": 60})
        assert r.status_code == 201, r.text
        kid = r.json()[0]["sandbox"]["sandboxID"]
        alice.created.append(kid)
        assert r.json()[0]["sandbox"]["envdAccessToken"]
        # the native templates route still answers nanobox's key and shape
        assert alice.request("DELETE", "/templates/mine").status_code == 204
        e2b_error(e2b(st, "DELETE", "/templates/mine", key="e2b_" + ka), 404)
    finally:
        alice.cleanup()
        bob.cleanup()
