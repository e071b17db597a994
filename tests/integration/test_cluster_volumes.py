"""Persistent volumes in a cluster (docs/CLUSTER.md, "Volumes"): a volume
stays on the node that made it, the registry in etcd says which, and the
volume API works the same through any node or the front: a name is the
key's once in the cluster, a list shows every node's, a request for a
volume and a sandbox's create that mounts it go to its node. Real
3-member etcd, two real nodes (sharing the machine's dockerd), a front."""
import json
import os
import secrets
import signal
import subprocess

import pytest
import requests

import nbetcd
from nbfront import Front
from nbtest import wait_until
from test_cluster import PREFIX, TTL, healthz, member_of, node_conf, sees, tag_of
from test_keys import KeyApi, add_key
from test_mcp import http_call, http_initialize
from test_volumes import cli

pytestmark = pytest.mark.xdist_group("cluster")

VOLCONF = {"volume_size_max": "64m", "volume_size_default": "32m"}


@pytest.fixture(scope="module")
def etcd(request):
    return nbetcd.etcd_cluster(request)


@pytest.fixture(autouse=True)
def _a_clean_cluster_state(etcd):
    for part in ("keys/", "sandboxes/", "onnode/", "owners/", "volumes/", "volnode/",
                 "volowners/"):
        etcd.delete_prefix(PREFIX + part)


@pytest.fixture
def vol_stacks(make_stack):
    """make_stack, and what volumes a failed test left removed (they outlive
    their stack by design)."""
    made = []

    def factory(name, **conf):
        st = make_stack(name, **conf)
        made.append(st)
        return st
    yield factory
    for st in made:
        for name in docker_volumes(st):
            subprocess.run(["docker", "volume", "rm", "-f", name], capture_output=True)


class E2bKeyApi(KeyApi):
    def headers(self, auth=True, headers=None):
        h = {"X-API-Key": "e2b_" + self.key} if auth else {}
        h.update(headers or {})
        return h


def docker_volumes(st):
    return subprocess.run(["docker", "volume", "ls", "-q", "--filter",
                           f"label=nanobox.instance={st.instance}", "--filter",
                           "label=nanobox.volume"], capture_output=True, text=True,
                          check=True).stdout.split()


def rows(etcd, owner):
    return {k.rsplit("/", 1)[1]: json.loads(v)
            for k, v in etcd.get_prefix(f"{PREFIX}volumes/{owner}/").items()}


def vols(api):
    r = api.request("GET", "/volumes")
    assert r.status_code == 200, r.text
    return {v["name"]: v for v in r.json()["volumes"]}


def make_volume(api, name, **more):
    r = api.request("POST", "/volumes", json={"name": name, **more})
    assert r.status_code == 201, r.text
    return r.json()


def pair(etcd, vol_stacks, a, b, **more):
    secret = secrets.token_hex(16)
    x = vol_stacks(a, **node_conf(etcd, a, node_url="{url}", cluster_secret=secret, **VOLCONF,
                                  **more))
    y = vol_stacks(b, **node_conf(etcd, b, node_url="{url}", cluster_secret=secret, **VOLCONF,
                                  **more))
    if "api_key" in more:  # the default key, the same on both nodes
        x.api_key = y.api_key = more["api_key"]
    wait_until(lambda: sees(x, b) and sees(y, a), timeout=20, what="the nodes to see each other")
    return x, y


def test_a_volume_is_reached_through_any_node_and_its_sandboxes_go_to_it(etcd, vol_stacks,
                                                                         tmp_path):
    key = secrets.token_hex(16)
    va, vb = pair(etcd, vol_stacks, "node-va", "node-vb", api_key=key)
    alice, bob = add_key(va, "alice"), add_key(va, "bob")
    a1, a2, b1, b2 = KeyApi(va, alice), KeyApi(vb, alice), KeyApi(va, bob), KeyApi(vb, bob)
    e2 = E2bKeyApi(vb, alice)
    wait_until(lambda: b2.request("GET", "/volumes").status_code == 200, timeout=10,
               what="the keys on node-vb")
    front = Front(etcd.endpoints_conf, PREFIX, str(tmp_path))
    try:
        front.routes("node-va", "node-vb")
        # made through node-va: its row in etcd names the node
        v = make_volume(a1, "data")
        assert v["node"] == "node-va" and v["node_up"] is True, v
        row = rows(etcd, "alice")["data"]
        assert row["node"] == "node-va" and row["id"] == v["volumeID"], row
        # the name is alice's once in the cluster: node-vb answers the same 409
        r = a2.request("POST", "/volumes", json={"name": "data"})
        assert r.status_code == 409 and r.json()["code"] == "exists", r.text
        assert "node-va" in r.json()["error"]
        # ... as E2B's create through node-vb does; bob's own "data" is another volume
        r = e2.request("POST", "/volumes", json={"name": "data"})
        assert r.status_code == 409, r.text
        bob_data = make_volume(b2, "data")
        assert bob_data["node"] == "node-vb" and bob_data["volumeID"] != v["volumeID"]
        # listed from either node (and E2B's list), with its node
        for api in (a1, a2):
            listed = vols(api)
            assert set(listed) == {"data"}, listed
            assert listed["data"]["node"] == "node-va" and listed["data"]["node_up"] is True
        r = e2.request("GET", "/volumes")
        assert r.status_code == 200 and [x["volumeID"] for x in r.json()] == [v["volumeID"]]
        assert set(vols(b1)) == {"data"} and vols(b1)["data"]["node"] == "node-vb"
        out = cli(vb, alice, "volume", "ls").stdout
        assert "NODE" in out and "data" in out and "node-va" in out, out
        # MCP's volume_list on node-vb shows the default key's volume of node-va
        make_volume(va.api, "mcpvol")
        sess = http_initialize(vb).headers["Mcp-Session-Id"]
        res = http_call(vb, sess, "volume_list", {})
        assert not res.get("isError") and "node=node-va" in json.dumps(res), res
        assert [x["node"] for x in res["structuredContent"]["volumes"]] == ["node-va"], res
        r = vb.api.request("DELETE", "/volumes/mcpvol")
        assert r.status_code == 204, r.text
        # read through node-vb, by name and by id (native and E2B)
        for key in ("data", v["volumeID"]):
            r = a2.request("GET", f"/volumes/{key}")
            assert r.status_code == 200 and r.json()["volumeID"] == v["volumeID"], r.text
            assert r.json()["node"] == "node-va"
        r = e2.request("GET", f"/volumes/{v['volumeID']}")
        assert r.status_code == 200 and r.json()["name"] == "data", r.text
        # another key's request gets the 404 of a name it has not, through either node
        r = b1.request("GET", f"/volumes/{v['volumeID']}")
        assert r.status_code == 404, r.text
        r = b2.request("GET", f"/volumes/{v['volumeID']}")
        assert r.status_code == 404, r.text
        r = b2.request("DELETE", f"/volumes/{v['volumeID']}")
        assert r.status_code == 404, r.text
        # a sandbox with the volume, made through node-vb, lands on node-va and mounts it
        mount = [{"name": "data", "path": "/workspace/data"}]
        sid = a2.create(volumes=mount)
        assert sid.endswith(tag_of("node-va")), sid
        res = a2.exec(sid, "echo kept > /workspace/data/f; cat /workspace/data/f")
        assert res["stdout"] == "kept\n", res
        assert True or a2.exec(sid, "true")["stdout"] \
            == "kept\n"
        assert "action=forwarded on node node-va" in open(vb.log_path).read()
        # in use: its removal through node-vb is refused by node-va
        r = a2.request("DELETE", "/volumes/data")
        assert r.status_code == 409 and r.json()["code"] == "in_use", r.text
        assert a2.delete(sid).status_code == 204
        # through the front (a create names no node): node-va again, the data there
        r = front.request("POST", "/sandbox", key=alice, json={"volumes": mount})
        assert r.status_code == 201, r.text
        sid = r.json()["sandboxId"]
        assert sid.endswith(tag_of("node-va"))
        assert a1.exec(sid, "cat /workspace/data/f")["stdout"] == "kept\n"
        assert a1.delete(sid).status_code == 204
        # E2B's create with volumeMounts through node-vb: node-va too
        r = e2.request("POST", "/sandboxes", json={"templateID": "base", "volumeMounts": mount})
        assert r.status_code == 201, r.text
        assert r.json()["sandboxID"].endswith(tag_of("node-va")), r.text
        assert e2.request("DELETE", f"/sandboxes/{r.json()['sandboxID']}").status_code == 204
        # volumes of two nodes cannot be mounted together
        make_volume(a2, "other")
        r = a1.request("POST", "/sandbox", json={"volumes": mount + [
            {"name": "other", "path": "/workspace/other"}]})
        assert r.status_code == 409 and r.json()["code"] == "volumes_on_different_nodes", r.text
        assert "node-va" in r.json()["error"] and "node-vb" in r.json()["error"]
        # removed through node-vb: gone on node-va and from the registry
        r = a2.request("DELETE", "/volumes/other")
        assert r.status_code == 204, r.text
        assert set(rows(etcd, "alice")) == {"data"}
        r = a2.request("DELETE", "/volumes/data")
        assert r.status_code == 204, r.text
        assert a1.request("GET", "/volumes/data").status_code == 404
        assert rows(etcd, "alice") == {} and vols(a1) == {}
        assert b2.request("DELETE", "/volumes/data").status_code == 204
    finally:
        front.close()


def test_the_member_puts_the_registry_right_and_a_dead_node_answers_503(etcd, vol_stacks):
    va, vb = pair(etcd, vol_stacks, "node-vc", "node-vd")
    carol = add_key(va, "carol", "--max-volumes", "2")
    c1, c2 = KeyApi(va, carol), KeyApi(vb, carol)
    wait_until(lambda: c2.request("GET", "/volumes").status_code == 200, timeout=10,
               what="the key on node-vd")
    keep = make_volume(c1, "keep")
    # max_volumes counts every node's: one here, one there, no third anywhere
    make_volume(c2, "there")
    for api in (c1, c2):
        r = api.request("POST", "/volumes", json={"name": "third"})
        assert r.status_code == 429 and r.json()["code"] == "quota", r.text
    assert c2.request("DELETE", "/volumes/there").status_code == 204
    # a row lost from etcd is put back by its node's member; a row of a
    # volume the node does not have is taken out
    etcd.delete(f"{PREFIX}volumes/carol/keep")
    etcd.delete(f"{PREFIX}volnode/node-vc/carol/keep")
    etcd.put(f"{PREFIX}volumes/carol/ghost", json.dumps(
        {"name": "ghost", "id": "0123456789abcdef", "owner": "carol", "node": "node-vc",
         "size": 33554432, "created": 1000}))
    etcd.put(f"{PREFIX}volnode/node-vc/carol/ghost", "0123456789abcdef")
    wait_until(lambda: set(rows(etcd, "carol")) == {"keep"}, timeout=30,
               what="node-vc's member to put its rows right")
    assert rows(etcd, "carol")["keep"]["id"] == keep["volumeID"]
    # node-vc killed: its volume answers 503 node_unavailable through node-vd,
    # and so does a create that mounts it; the list shows it down
    mount = [{"name": "keep", "path": "/workspace/keep"}]
    os.kill(member_of(va), signal.SIGKILL)
    va.crash()
    try:
        r = c2.request("GET", "/volumes/keep")
        assert r.status_code == 503 and r.json()["code"] == "node_unavailable", r.text
        r = c2.request("POST", "/sandbox", json={"volumes": mount})
        assert r.status_code == 503 and r.json()["code"] == "node_unavailable", r.text
        wait_until(lambda: vols(c2)["keep"]["node_up"] is False, timeout=TTL + 10,
                   what="node-vc shown down")
        r = c2.request("POST", "/volumes", json={"name": "keep"})
        assert r.status_code == 409, r.text
    finally:
        va.start_fcgi()
        va.wait_healthy()
    wait_until(lambda: c2.request("GET", "/volumes/keep").status_code == 200, timeout=15,
               what="node-vc's volume through node-vd again")
    assert c2.request("DELETE", "/volumes/keep").status_code == 204
    assert rows(etcd, "carol") == {}


def test_a_volume_create_without_quorum_answers_503_and_makes_nothing(etcd, vol_stacks):
    st = vol_stacks("node-ve", **node_conf(etcd, "node-ve", **VOLCONF))
    wait_until(lambda: healthz(st)["node"]["cluster"] == "member", timeout=15,
               what="node-ve to join")
    before = st.api.request("GET", "/volumes").json()["volumes"]
    etcd.stop_member(0)
    etcd.stop_member(1)
    try:
        wait_until(lambda: healthz(st)["node"]["cluster"] == "etcd_unreachable", timeout=15,
                   what="node-ve to see etcd without quorum")
        r = st.api.request("POST", "/volumes", json={"name": "nq"})
        assert r.status_code == 503 and r.json()["code"] == "cluster_unavailable", r.text
        r = requests.post(st.url + "/volumes", json={"name": "nq"}, timeout=60,
                          headers={"X-API-Key": f"e2b_{st.api_key}"})
        assert r.status_code == 503, r.text
        assert docker_volumes(st) == [], "a volume was made without quorum"
        # the list answers still (this node's volumes, from Docker)
        r = st.api.request("GET", "/volumes")
        assert r.status_code == 200 and r.json()["volumes"] == before, r.text
    finally:
        etcd.start_member(1)
        etcd.start_member(0)
    wait_until(lambda: healthz(st)["node"]["cluster"] == "member", timeout=30,
               what="node-ve to be a member again")
    v = make_volume(st.api, "nq")
    assert v["node"] == "node-ve" and len(docker_volumes(st)) == 1
    assert st.api.request("DELETE", "/volumes/nq").status_code == 204
