"""The cluster registry's bookkeeping (docs/CLUSTER.md): what is collected
of nodes gone for good (a volume row of a node gone longer than
volume_orphan_after is taken out, its name free for a create elsewhere,
and a node that comes back after that keeps its volume without taking
the name back from the node that has it now), and snapshots counted for
max_templates over the cluster. Real 3-member etcd, real nodes sharing
the machine's dockerd (the harness of test_cluster.py and
test_cluster_volumes.py)."""
import json
import secrets

import pytest
import requests

from nbtest import assert_error, wait_until
from test_keys import KeyApi, add_key
from test_cluster import (PREFIX, entry, etcd, healthz, made_here, node_conf,  # noqa: F401
                          record, sees, tag_of, template_pair)
from test_cluster_volumes import VOLCONF, docker_volumes, make_volume, vol_stacks  # noqa: F401

pytestmark = pytest.mark.xdist_group("cluster")


@pytest.fixture(autouse=True)
def _a_clean_cluster_state(etcd):
    for part in ("keys/", "sandboxes/", "onnode/", "owners/", "volumes/", "volnode/",
                 "volowners/", "gone/", "templates/", "recipes/"):
        etcd.delete_prefix(PREFIX + part)


def all_rows(etcd):
    return {k: json.loads(v) for k, v in etcd.get_prefix(f"{PREFIX}volumes/").items()}


def listed(st):
    r = st.api.request("GET", "/volumes")
    assert r.status_code == 200, r.text
    return sorted((v["name"], v["node"]) for v in r.json()["volumes"])


def test_a_gone_nodes_volume_names_are_freed_after_the_grace_and_not_taken_back(etcd, vol_stacks):
    key, secret = secrets.token_hex(16), secrets.token_hex(16)
    conf = dict(node_url="{url}", cluster_secret=secret, api_key=key, volume_orphan_after="10",
                **VOLCONF)
    ga = vol_stacks("node-ga", **node_conf(etcd, "node-ga", **conf))
    gb = vol_stacks("node-gb", **node_conf(etcd, "node-gb", **conf))
    ga.api_key = gb.api_key = key
    wait_until(lambda: sees(ga, "node-gb") and sees(gb, "node-ga"), timeout=20,
               what="the nodes to see each other")
    mine = make_volume(ga.api, "data")
    assert mine["node"] == "node-ga"
    r = gb.api.request("POST", "/volumes", json={"name": "data"})
    assert r.status_code == 409 and "node-ga" in r.json()["error"], r.text
    # node-ga stopped for good (its volume stays on its disk): past the
    # grace, node-gb (the first by name of those up) takes its row out
    ga.stop_fcgi()
    wait_until(lambda: not sees(gb, "node-ga"), timeout=20, what="node-gb to see node-ga gone")
    since = wait_until(lambda: etcd.get(f"{PREFIX}gone/node-ga"), timeout=20,
                       what="node-ga seen gone")
    assert int(since) > 0
    wait_until(lambda: all_rows(etcd) == {}, timeout=30, what="node-ga's row taken out")
    assert etcd.get_prefix(f"{PREFIX}volnode/node-ga/") == {}
    log = open(gb.log_path).read()
    assert "volreg: node node-ga is gone since" in log and "its 1 volume rows taken out" in log
    theirs = make_volume(gb.api, "data")
    assert theirs["node"] == "node-gb" and theirs["volumeID"] != mine["volumeID"]
    assert docker_volumes(ga), "node-ga's volume was removed with its row"
    # node-ga back: its gone/ mark goes; its member finds the name node-gb's
    # and leaves that row as it is (said in its log), keeping its own volume
    ga.start_fcgi()
    ga.wait_healthy()
    wait_until(lambda: healthz(ga)["node"]["cluster"] == "member", timeout=20,
               what="node-ga to join again")
    wait_until(lambda: etcd.get(f"{PREFIX}gone/node-ga") is None, timeout=10,
               what="node-ga's gone/ key taken out")
    wait_until(lambda: "is here and on node node-gb" in open(ga.log_path).read(), timeout=30,
               what="node-ga's member to find its name taken")
    assert [(r["name"], r["node"], r["id"]) for r in all_rows(etcd).values()] == \
        [("data", "node-gb", theirs["volumeID"])]
    assert open(ga.log_path).read().count("is here and on node node-gb") == 1
    # both are listed, each with its node; each node reaches its own by id
    wait_until(lambda: sees(ga, "node-gb"), timeout=20, what="node-ga to see node-gb")
    assert listed(ga) == [("data", "node-ga"), ("data", "node-gb")]
    assert ga.api.request("GET", f"/volumes/{mine['volumeID']}").status_code == 200
    r = gb.api.request("POST", "/volumes", json={"name": "data"})
    assert r.status_code == 409, r.text
    assert gb.api.request("DELETE", "/volumes/data").status_code == 204
    assert ga.api.request("DELETE", f"/volumes/{mine['volumeID']}").status_code == 204
    assert all_rows(etcd) == {}


def test_snapshots_count_for_max_templates_on_every_node(etcd, make_stack):
    """A snapshot is its node's alone, but counts for the key's
    max_templates over the cluster as templates do: with 2, a snapshot on
    node 1 and a template built on node 2 leave no third anywhere. No
    other node builds it (it has no recipe) or lists it; an E2B create of
    it through node 2 reaches node 1; its removal frees the unit."""
    from test_snapshots import snapshot
    from test_templates import SMALL, b64, submit, wait_done
    files = {"hello.txt": b64("hi\n")}
    s1, s2, k1, k2 = template_pair(etcd, make_stack, "node-s", "sam", "--max-templates", "2")
    secret = s1.conf["cluster_secret"]
    src = made_here(s1, secret, "sam")
    assert src.endswith(tag_of("node-s1"))
    k1.exec(src, "echo kept > /tmp/kept.txt")
    assert snapshot(k1, src, "snap1")["name"] == "snap1"
    e = entry(etcd, "sam", "snap1")
    assert e["snapshot"] is True and e["recipe"] is False and e["node"] == "node-s1", e
    assert submit(k2, "tpl", SMALL, files).status_code == 202
    # 2 of 2: a third is refused on either node, snapshot or build, E2B's too
    body = assert_error(k1.request("POST", f"/sandbox/{src}/snapshot", json={"name": "snap2"},
                                   timeout=300), 429, "quota")
    assert "quota max_templates=2 of key \"sam\" reached: it has 2 templates" in body["error"]
    r = requests.post(f"{s1.url}/sandboxes/{src}/snapshots", json={"name": "snap3"},
                      headers={"X-API-Key": f"e2b_{k1.key}"}, timeout=300)
    assert r.status_code == 429, r.text
    for api in (k1, k2):
        assert_error(submit(api, "tpl2", SMALL, files), 429, "quota")
    assert entry(etcd, "sam", "snap2") is None and entry(etcd, "sam", "tpl2") is None
    assert k1.request("GET", "/templates/snap2").status_code == 404
    # node-s1's record lists it, node-s2's not (it has no copy)
    wait_until(lambda: "sam/snap1" in (record(etcd, "node-s1") or {}).get("templates", []),
               timeout=15, what="node-s1's record to list sam/snap1")
    assert wait_done(k2, "tpl")["status"] == "ready"
    assert "sam/snap1" not in record(etcd, "node-s2")["templates"]
    assert k2.request("GET", "/templates/snap1").status_code == 404
    # E2B's create of it through node-s2 goes to node-s1 (once node-s2's
    # member has read node-s1's record listing it; a 404 until then makes nothing)
    made = wait_until(lambda: (lambda r: r if r.status_code == 201 else None)(requests.post(
        f"{s2.url}/sandboxes", json={"templateID": "snap1"},
        headers={"X-API-Key": f"e2b_{k2.key}"}, timeout=60)), timeout=20,
        what="an E2B create of snap1 through node-s2")
    sid = made.json()["sandboxID"]
    assert sid.endswith(tag_of("node-s1")), made.text
    info = k2.get(sid).json()
    out = k2.exec(sid, "cat /tmp/kept.txt")
    assert out["stdout"] == "kept\n", (out, info)
    assert k2.delete(sid).status_code == 204
    assert k1.delete(src).status_code == 204
    assert "template snap1 of sam" not in open(s2.log_path).read()  # never built there
    # another key's removal through node-s2 finds nothing and changes nothing
    eve = KeyApi(s1, add_key(s1, "eve"))
    eve2 = KeyApi(s2, eve.key)
    wait_until(lambda: eve2.request("GET", "/sandbox").status_code == 200, timeout=10,
               what="eve's key on node-s2")
    assert eve2.request("DELETE", "/templates/snap1").status_code == 404
    r = requests.delete(f"{s2.url}/templates/snap1", headers={"X-API-Key": f"e2b_{eve.key}"},
                        timeout=60)
    assert r.status_code == 404, r.text
    assert k1.request("GET", "/templates/snap1").status_code == 200
    # removed through node-s2 (E2B's deleteSnapshot): sent to node-s1, and
    # the unit is free on every node
    r = requests.delete(f"{s2.url}/templates/snap1", headers={"X-API-Key": f"e2b_{k2.key}"},
                        timeout=60)
    assert r.status_code == 204, r.text
    assert k1.request("GET", "/templates/snap1").status_code == 404
    assert entry(etcd, "sam", "snap1")["removed"] is True
    assert submit(k2, "tpl2", SMALL, files).status_code == 202
    for api in (k1, k2):
        wait_done(api, "tpl2")
        wait_done(api, "tpl")
    # a native removal through node-s2 of node-s1's snapshot goes there too
    assert k2.request("DELETE", "/templates/tpl2").status_code == 204
    src = made_here(s1, secret, "sam")
    assert snapshot(k1, src, "snap4")["name"] == "snap4"
    assert k1.delete(src).status_code == 204
    assert k2.request("DELETE", "/templates/snap4").status_code == 204
    assert k1.request("GET", "/templates/snap4").status_code == 404
    assert entry(etcd, "sam", "snap4")["removed"] is True
    assert k2.request("DELETE", "/templates/snap4").status_code == 404
    etcd.delete_prefix(f"{PREFIX}keys/")
