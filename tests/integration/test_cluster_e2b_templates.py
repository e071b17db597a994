"""E2B's template build flow on a cluster (docs/E2B.md, "Templates";
docs/CLUSTER.md, "Templates on every node"): real etcd (3 members on
loopback), nodes of nginx + nanobox-fcgi + Docker, and a front.

- the official E2B SDK's Template.build pointed at the front, whose calls
  land on either node: the build succeeds with its copies; the template is
  then on both nodes (each node's own build, its image there), a sandbox
  of it runs on each node and one made through the front; removed through
  the front, it is gone from both and from etcd;
- the flow's calls sent to different nodes on purpose: each reaches the
  flow's home (the node that took POST /v3/templates); the upload link
  names the node the client reached; another key sees no flow and cannot
  take it over with the flow's build id or upload link (404/403, nothing
  built, nothing stored); a rebuild from the other node moves the flow's
  home and replaces the template on both;
- a node stopped during the flow builds the template when it is back,
  from the recipe in etcd; a native removal ends the flow as E2B's does.
"""
import json

import pytest
import requests

from nbtest import wait_until
from test_cluster import (PREFIX, _a_clean_cluster_state, away, entry, etcd,  # noqa: F401
                          front, record, tag_of, template_pair)
from test_e2b import e2b_sdk, sdk_script, step  # noqa: F401
from test_e2b_templates import E2bTpl, hdr, name, tar_of
from test_keys import KeyApi, add_key
from test_templates import get, wait_done

pytestmark = pytest.mark.xdist_group("cluster")


@pytest.fixture(autouse=True)
def _no_flows_left(etcd):  # noqa: F811 - the module's etcd
    etcd.delete_prefix(PREFIX + "e2bflow/")
    yield
    etcd.delete_prefix(PREFIX + "e2bflow/")


def flow(etcd, owner, nm):  # noqa: F811
    raw = etcd.get(f"{PREFIX}e2bflow/{owner}/{nm}")
    return json.loads(raw) if raw is not None else None


def on_node(st, key_name, nm):
    """A sandbox of template nm made on st itself (sent as a node's: placement
    leaves it there), for the key named key_name."""
    r = requests.post(st.url + "/sandbox", json={"template": nm}, timeout=120, headers={
        "X-Nanobox-Cluster": st.conf["cluster_secret"], "X-Nanobox-Owner": key_name})
    assert r.status_code == 201, r.text
    return r.json()["sandboxId"]


def runs_on_each(nodes, apis, key_name, nm, cmd, want):
    """A sandbox of nm on each node: its id names the node, cmd prints want."""
    for st, api in zip(nodes, apis):
        sid = on_node(st, key_name, nm)
        try:
            assert sid.endswith(tag_of(st.name)), sid
            assert api.exec(sid, cmd)["stdout"] == want
        finally:
            assert api.delete(sid).status_code == 204


def copy_step(h, src, dst):
    return {"type": "COPY", "args": [src, dst, "", ""], "filesHash": h, "force": False}


def run_step(cmd):
    return {"type": "RUN", "args": [cmd, ""], "force": False}


# ------------------------------------------------------------------ the SDK

def test_sdk_build_through_the_front_lands_on_every_node(etcd, front, make_stack,  # noqa: F811
                                                        e2b_sdk):  # noqa: F811
    n1, n2, k1, k2 = template_pair(etcd, make_stack, "node-es", "alice")
    front.routes("node-es1", "node-es2")

    class ViaFront:
        url, api_key = front.url, k1.key
    s = sdk_script(ViaFront, e2b_sdk, "cluster_templates.mjs", "c")
    b = step(s, "build")
    nm, tag = b["alias"], b["alias"][4:]
    try:
        assert b["templateId"] == nm and b["sawStep"], b
        assert step(s, "exists") == {"exists": True}
        home = flow(etcd, "alice", nm)["node"]
        assert home in ("node-es1", "node-es2")
        # the front took turns: the other node had calls of the flow, and sent them home
        other = n2 if home == "node-es1" else n1
        assert f"action=forwarded on node {home} (HTTP 2" in open(other.log_path).read()
        # built on both nodes, each its own image; the records list it
        for api in (k1, k2):
            t = wait_done(api, nm)
            assert t["status"] == "ready" and t["owner"] == "alice", t
        assert get(k1, nm).json()["image"] != get(k2, nm).json()["image"]
        ent = entry(etcd, "alice", nm)
        assert ent == {**ent, "node": home, "removed": False, "recipe": True}, ent
        recipe = json.loads(etcd.get(f"{PREFIX}recipes/alice/{nm}"))
        assert recipe["name"] == nm and recipe["dockerfile"].count("COPY ") == 3, recipe
        assert sorted(p.split("/", 1)[1] for p in recipe["files"]) == \
            ["one.txt", "three.txt", "two.txt"], recipe["files"]
        wait_until(lambda: all(f"alice/{nm}" in (record(etcd, n) or {}).get("templates", [])
                               for n in ("node-es1", "node-es2")),
                   timeout=15, what="both records to list the template")
        runs_on_each((n1, n2), (k1, k2), "alice", nm,
                     "cat /opt/one.txt /opt/two.txt /opt/three.txt /etc/nb-ctpl-marker",
                     f"one {tag}\ntwo {tag}\nthree {tag}\nbuilt-{tag}\n")
        # a create through the front goes to a node that has it
        r = front.request("POST", "/sandbox", key=k1.key, json={"template": nm})
        assert r.status_code == 201, r.text
        sid = r.json()["sandboxId"]
        assert sid[-12:] in (tag_of("node-es1"), tag_of("node-es2")), sid
        r = front.request("POST", f"/sandbox/{sid}/exec", key=k1.key,
                          json={"command": "cat /opt/two.txt"})
        assert r.status_code == 200 and r.json()["stdout"] == f"two {tag}\n", r.text
        assert front.request("DELETE", f"/sandbox/{sid}", key=k1.key).status_code == 204
    finally:
        # removed through the front: gone from both nodes, from etcd, and the flow with it
        r = front.request("DELETE", f"/templates/{nm}", headers=hdr(k1.key))
        assert r.status_code == 204, r.text
    for api in (k1, k2):
        assert get(api, nm).status_code == 404
    assert entry(etcd, "alice", nm)["removed"] is True
    assert etcd.get(f"{PREFIX}recipes/alice/{nm}") is None and flow(etcd, "alice", nm) is None
    r = front.request("GET", f"/templates/aliases/{nm}", headers=hdr(k1.key))
    assert r.status_code == 404, r.text
    etcd.delete_prefix(f"{PREFIX}keys/")


# ------------------------------------------------- the flow's calls, raw

def test_each_call_reaches_the_flow_s_home_and_no_other_key(etcd, make_stack):  # noqa: F811
    n1, n2, k1, k2 = template_pair(etcd, make_stack, "node-ef", "alice")
    bob = add_key(n1, "bob")
    b1, b2 = E2bTpl(n1, bob), E2bTpl(n2, bob)
    wait_until(lambda: KeyApi(n2, bob).request("GET", "/sandbox").status_code == 200,
               timeout=10, what="bob's key on node-ef2")
    a1, a2 = E2bTpl(n1, k1.key), E2bTpl(n2, k1.key)
    nm = name()
    bid = a1.create(nm)["buildID"]
    assert flow(etcd, "alice", nm)["node"] == "node-ef1"
    assert flow(etcd, "bob", nm) is None
    # the link asked of node-ef2 is node-ef1's (its signature), on the origin the client reached
    h = "ab" * 32
    link = a2.link(nm, h)
    assert link.status_code == 201 and link.json()["present"] is False, link.text
    url = link.json()["url"]
    assert url.startswith(f"{n2.url}/templates/{nm}/files/{h}?owner=alice&"), url
    assert requests.put(url, data=tar_of([("hello.txt", b"hello across\n")]),
                        timeout=60).status_code == 200
    r = a1.link(nm, h)
    assert r.status_code == 201 and r.json()["present"] is True, r.text  # kept on the home
    assert a2.link(nm, h).json()["present"] is True
    # another key: no flow of that name, on either node, whatever it sends
    for b in (b1, b2):
        assert b.link(nm, h).status_code == 404
        assert b.alias(nm).status_code == 404
        assert b.status(nm, bid).status_code == 404
        assert b.build(nm, bid, {"fromImage": "nanobox:latest",
                                 "steps": [run_step("true")]}).status_code == 404
        forged = url.replace("owner=alice", "owner=bob")
        r = requests.put(forged, data=tar_of([("evil.txt", b"x")]), timeout=60)
        assert r.status_code == 403, r.text
        # the cluster's header without its secret is no node's call
        r = requests.put(forged.replace(n2.url, b.url), data=tar_of([("evil.txt", b"x")]),
                         headers={"X-Nanobox-Cluster": "wrong", "X-Nanobox-Owner": "bob"},
                         timeout=60)
        assert r.status_code == 403, r.text
        r = b.req("DELETE", f"/templates/{nm}")
        assert r.status_code == 404, r.text
    assert flow(etcd, "alice", nm)["node"] == "node-ef1"
    assert entry(etcd, "alice", nm) is None  # nothing built
    # a forged build id is not the flow's, wherever it lands
    r = a2.build(nm, "0" * 8 + "-0000-0000-0000-" + "0" * 12, {"fromImage": "nanobox:latest"})
    assert r.status_code == 404, r.text
    # the build, sent to node-ef2, is built by node-ef1 and sent on to node-ef2 as a native one
    r = a2.build(nm, bid, {"fromImage": "nanobox:latest",
                           "steps": [copy_step(h, "hello.txt", "/opt/hello.txt"),
                                     run_step("echo across > /etc/nb-across")]})
    assert r.status_code == 202 and r.headers.get("Content-Length") == "0", r.text
    done = a2.wait(nm, bid)
    assert done["status"] == "ready" and done["buildID"] == bid, done
    assert any("nb-across" in e["message"] for e in done["logEntries"]), done
    assert "action=fanned-out to node node-ef2 (HTTP 202)" in open(n1.log_path).read()
    for api in (k1, k2):
        assert wait_done(api, nm)["status"] == "ready"
    assert entry(etcd, "alice", nm)["node"] == "node-ef1"
    runs_on_each((n1, n2), (k1, k2), "alice", nm, "cat /opt/hello.txt /etc/nb-across",
                 "hello across\nacross\n")
    # built again from node-ef2: the flow's home moves there, both nodes get the new one
    bid2 = a2.create(nm)["buildID"]
    assert flow(etcd, "alice", nm)["node"] == "node-ef2"
    h2 = "cd" * 32
    link = a1.link(nm, h2)
    assert link.status_code == 201 and link.json()["url"].startswith(n1.url), link.text
    assert requests.put(link.json()["url"], data=tar_of([("v.txt", b"v2\n")]),
                        timeout=60).status_code == 200
    r = a1.build(nm, bid2, {"fromImage": "nanobox:latest",
                            "steps": [copy_step(h2, "v.txt", "/opt/v.txt")]})
    assert r.status_code == 202, r.text
    assert a1.wait(nm, bid2)["status"] == "ready"
    for api in (k1, k2):
        assert wait_done(api, nm)["status"] == "ready"
    assert entry(etcd, "alice", nm)["node"] == "node-ef2"
    runs_on_each((n1, n2), (k1, k2), "alice", nm, "cat /opt/v.txt; test ! -e /opt/hello.txt",
                 "v2\n")
    # removed on node-ef1 (not the home now): gone everywhere
    assert a1.delete(nm).status_code == 204
    for api in (k1, k2):
        assert get(api, nm).status_code == 404
    assert flow(etcd, "alice", nm) is None and entry(etcd, "alice", nm)["removed"] is True
    assert a2.alias(nm).status_code == 404 and a1.alias(nm).status_code == 404
    etcd.delete_prefix(f"{PREFIX}keys/")


def test_a_node_stopped_during_the_flow_builds_it_when_back(etcd, make_stack):  # noqa: F811
    n1, n2, k1, k2 = template_pair(etcd, make_stack, "node-ew", "erin")
    a1 = E2bTpl(n1, k1.key)
    nm = name()
    bid = a1.create(nm)["buildID"]
    away(etcd, n2)
    h, put = a1.upload(nm, tar_of([("late.txt", b"built late\n")]))
    assert put.status_code == 200
    r = a1.build(nm, bid, {"fromImage": "nanobox:latest",
                           "steps": [copy_step(h, "late.txt", "/opt/late.txt")]})
    assert r.status_code == 202, r.text
    assert a1.wait(nm, bid)["status"] == "ready"
    assert entry(etcd, "erin", nm)["recipe"] is True
    n2.start_fcgi()
    n2.wait_healthy()
    wait_until(lambda: get(k2, nm).status_code == 200, timeout=40,
               what="node-ew2 to build the template by itself")
    assert wait_done(k2, nm)["status"] == "ready"
    assert "built here too, from its recipe" in open(n2.log_path).read()
    runs_on_each((n2,), (k2,), "erin", nm, "cat /opt/late.txt", "built late\n")
    # a native removal, on the node that is not the home, ends the flow too
    assert k2.request("DELETE", f"/templates/{nm}").status_code == 204
    for api in (k1, k2):
        assert get(api, nm).status_code == 404
    assert flow(etcd, "erin", nm) is None and entry(etcd, "erin", nm)["removed"] is True
    assert a1.alias(nm).status_code == 404 and a1.status(nm, bid).status_code == 404
    etcd.delete_prefix(f"{PREFIX}keys/")
