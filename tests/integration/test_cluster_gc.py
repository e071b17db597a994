"""What the cluster collects of nodes gone for good (docs/CLUSTER.md,
"When things fail"): a volume row of a node gone longer than
volume_orphan_after is taken out, its name free for a create elsewhere,
and a node that comes back after that keeps its volume without taking
the name back from the node that has it now. Real 3-member etcd, real
nodes sharing the machine's dockerd (the harness of test_cluster.py and
test_cluster_volumes.py)."""
import json
import secrets

import pytest

import nbetcd
from nbtest import wait_until
from test_cluster import PREFIX, healthz, node_conf, sees
from test_cluster_volumes import VOLCONF, docker_volumes, make_volume, vol_stacks  # noqa: F401

pytestmark = pytest.mark.xdist_group("cluster")


@pytest.fixture(scope="module")
def etcd(request):
    return nbetcd.etcd_cluster(request)


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
    conf = dict(node_url="{url}", cluster_secret=secret, api_key=key, volume_orphan_after="3",
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
