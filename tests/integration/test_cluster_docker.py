"""Two nodes of a cluster, each with its own dockerd (nbdockerd.py: its
own data root, exec root, socket, bridge, no iptables), so the two never
see each other's containers, as on two machines (docs/CLUSTER.md):
- one node dies whole, its nanobox-fcgi killed and its dockerd stopped:
  the other's sandboxes work on, the dead one's answer 503
  node_unavailable, lists mark it down, creates go to the live node;
  back, its sandboxes (kept by live-restore) are served again;
- the official E2B SDK and an MCP client through the front reach the
  sandboxes of both;
- etcd loses one member, then quorum: sandboxes on both nodes work on
  (through either node), creates answer 503 cluster_unavailable on both
  and make nothing, and all comes back by itself with quorum;
- a node stopped while a template is built builds it, back, on its own
  Docker from the recipe in etcd, and drops one removed while it was
  away."""
import json
import os
import re
import secrets
import signal

import pytest
import requests

import nbetcd
from nbdockerd import second_dockerd
from nbfront import Front
from nbtest import docker_ps, wait_until
from test_cluster import (PREFIX, healthz, listed, made_here, member_of, node_conf, sees,
                          tag_of)
from test_e2b import e2b_sdk  # noqa: F401 - the pinned SDK, a fixture
from test_keys import KeyApi, add_key
from test_mcp import http_call, http_initialize

pytestmark = pytest.mark.xdist_group("cluster")


@pytest.fixture(scope="module")
def dockerd2():
    with second_dockerd() as d:
        yield d


@pytest.fixture(scope="module")
def etcd(request):
    return nbetcd.etcd_cluster(request)


def test_a_node_that_dies_whole_takes_only_its_own_sandboxes(etcd, make_stack, dockerd2):
    secret = secrets.token_hex(16)
    x = make_stack("node-x", **node_conf(etcd, "node-x", node_url="{url}", cluster_secret=secret))
    y = make_stack("node-y", **node_conf(etcd, "node-y", node_url="{url}", cluster_secret=secret,
                                         docker_socket=dockerd2.sock))
    wait_until(lambda: sees(x, "node-y") and sees(y, "node-x"), timeout=20,
               what="the nodes to see each other")
    sx, sy = made_here(x, secret), made_here(y, secret)
    assert sx.endswith(tag_of("node-x")) and sy.endswith(tag_of("node-y"))
    # each node's containers on its own dockerd, and only there
    assert docker_ps(y.instance) == []
    assert len(dockerd2.containers()) == 1
    assert len(docker_ps(x.instance, all=False)) >= 1
    # one view, and every route from either node
    # (each registered just after its create answered)
    for st in (x, y):
        wait_until(lambda: (lambda rows: rows.get(sx) == "node-x" and rows.get(sy) == "node-y")(
            {s["sandboxId"]: s["node"] for s in listed(st.api)["sandboxes"]}), timeout=5,
            what=f"both sandboxes listed on {st.name}")
    assert x.api.exec(sy, "echo from-x")["stdout"] == "from-x\n"
    assert y.api.exec(sx, "echo from-y")["stdout"] == "from-y\n"
    # node-y dies whole: its nanobox-fcgi killed, its dockerd stopped
    os.kill(member_of(y), signal.SIGKILL)
    y.crash()
    dockerd2.stop()
    assert x.api.exec(sx, "echo alive")["stdout"] == "alive\n"
    r = x.api.request("POST", f"/sandbox/{sy}/exec", json={"command": "true"})
    assert r.status_code == 503 and r.json()["code"] == "node_unavailable", r.text
    wait_until(lambda: {s["sandboxId"]: s["node_up"] for s in listed(x.api)["sandboxes"]}
               .get(sy) is False, timeout=20, what="node-y's sandbox listed as down")
    wait_until(lambda: not sees(x, "node-y"), timeout=20, what="node-x to see node-y gone")
    made = [x.api.create() for _ in range(3)]  # placement has only node-x now
    assert all(m.endswith(tag_of("node-x")) for m in made), made
    for m in made:
        assert x.api.delete(m).status_code == 204
    # back: its dockerd (live-restore kept the container), then its nanobox-fcgi
    dockerd2.start()
    y.start_fcgi()
    y.wait_healthy()
    wait_until(lambda: x.api.request("POST", f"/sandbox/{sy}/exec",
                                     json={"command": "true"}).status_code == 200,
               timeout=30, what="node-y's sandbox served again through node-x")
    assert x.api.exec(sy, "echo back")["stdout"] == "back\n"
    wait_until(lambda: {s["sandboxId"]: s["node_up"] for s in listed(x.api)["sandboxes"]}
               .get(sy) is True, timeout=20, what="node-y's sandbox listed as up")
    for sid in (sx, sy):
        assert x.api.delete(sid).status_code == 204
    assert dockerd2.containers() == []
    etcd.delete_prefix(f"{PREFIX}keys/")


def pair(etcd, make_stack, dockerd2, x_name, y_name, **more):
    """Two nodes that see each other: x on the machine's dockerd, y on dockerd2."""
    secret = secrets.token_hex(16)
    x = make_stack(x_name, **node_conf(etcd, x_name, node_url="{url}", cluster_secret=secret, **more))
    y = make_stack(y_name, **node_conf(etcd, y_name, node_url="{url}", cluster_secret=secret,
                                       docker_socket=dockerd2.sock, **more))
    wait_until(lambda: sees(x, y_name) and sees(y, x_name), timeout=20,
               what="the nodes to see each other")
    return x, y, secret


def test_sandboxes_work_on_both_nodes_while_etcd_loses_a_member_then_quorum(etcd, make_stack,
                                                                             dockerd2):
    x, y, secret = pair(etcd, make_stack, dockerd2, "node-qx", "node-qy")
    sx, sy = made_here(x, secret), made_here(y, secret)

    def both_work(word):
        # each sandbox through either node: routing needs no etcd
        for st in (x, y):
            for sid in (sx, sy):
                assert st.api.exec(sid, f"echo {word}")["stdout"] == f"{word}\n"

    def creates_refused():
        for st, containers in ((x, lambda: docker_ps(x.instance)), (y, dockerd2.containers)):
            before = containers()
            r = st.api.request("POST", "/sandbox", json={})
            assert r.status_code == 503 and r.json()["code"] == "cluster_unavailable", r.text
            r = requests.post(st.url + "/v2/sandboxes", json={"templateID": "base"},
                              headers={"X-API-Key": f"e2b_{st.api_key}"}, timeout=60)
            assert r.status_code == 503, r.text
            assert containers() == before, f"{st.name} made a container without quorum"

    etcd.stop_member(0)
    try:
        # one member of three lost: nothing changes, creates are placed and work
        for st in (x, y):
            r0 = healthz(st)["node"]["renewed"]
            wait_until(lambda: healthz(st)["node"]["renewed"] > r0, timeout=5,
                       what=f"{st.name}'s renewal with one member down")
            assert healthz(st)["node"]["cluster"] == "member"
        both_work("one-down")
        made = [x.api.create() for _ in range(2)]
        for sid in made:
            assert x.api.exec(sid, "true")["exit_code"] == 0
            assert x.api.delete(sid).status_code == 204
        etcd.stop_member(1)
        try:
            for st in (x, y):
                wait_until(lambda: healthz(st)["node"]["cluster"] == "etcd_unreachable",
                           timeout=15, what=f"{st.name} to see etcd without quorum")
            both_work("no-quorum")
            # a list answers from the member left: each node's own sandbox at least
            assert sx in {s["sandboxId"] for s in listed(x.api)["sandboxes"]}
            assert sy in {s["sandboxId"] for s in listed(y.api)["sandboxes"]}
            creates_refused()
        finally:
            etcd.start_member(1)
    finally:
        etcd.start_member(0)
    # quorum back: both are members again by themselves, and creates work
    for st in (x, y):
        wait_until(lambda: healthz(st)["node"]["cluster"] == "member", timeout=30,
                   what=f"{st.name} to be a member again")
    for st in (x, y):
        sid = st.api.create()
        assert st.api.exec(sid, "true")["exit_code"] == 0
        assert st.api.delete(sid).status_code == 204
    both_work("back")
    for sid in (sx, sy):
        assert x.api.delete(sid).status_code == 204
    assert dockerd2.containers() == []
    assert docker_ps(x.instance) == []
    etcd.delete_prefix(f"{PREFIX}keys/")


@pytest.fixture(scope="module")
def front(etcd, tmp_path_factory):
    f = Front(etcd.endpoints_conf, PREFIX, str(tmp_path_factory.mktemp("front")))
    yield f
    f.close()


def test_the_e2b_sdk_and_mcp_work_through_the_front(etcd, front, make_stack, dockerd2, e2b_sdk):
    """The official E2B SDK pointed at the front alone (E2B_API_URL and
    E2B_SANDBOX_URL): its creates are placed on both nodes, each sandbox's
    commands and files reach its own node and dockerd, its list pages over
    the whole cluster, and its kills end them where they run. An MCP
    client through the front likewise."""
    from test_e2b import sdk_script, step
    n1, n2, _ = pair(etcd, make_stack, dockerd2, "node-e1", "node-e2")
    alice = add_key(n1, "alice")
    wait_until(lambda: KeyApi(n2, alice).request("GET", "/sandbox").status_code == 200,
               timeout=10, what="alice's key on node-e2")
    front.routes("node-e1", "node-e2")

    def containers():
        return {"node-e1": docker_ps(n1.instance), "node-e2": dockerd2.containers()}

    class ViaFront:
        url, api_key = front.url, alice
    s = sdk_script(ViaFront, e2b_sdk, "cluster.mjs", "cluster-", args_more=["--count", "4"])
    try:
        ids = step(s, "create")["ids"]
        assert len(ids) == 4
        tags = {sid[-12:] for sid in ids}
        assert tags == {tag_of("node-e1"), tag_of("node-e2")}, ids   # placed on both
        assert step(s, "commands") == {"ok": [True] * 4}
        assert step(s, "files") == {"ok": [True] * 4}
        assert step(s, "getInfo") == {"ok": [True] * 4}
        assert step(s, "list") == {"ids": sorted(ids), "pages": 2}
        assert step(s, "kill") == {"killed": [True] * 4}
        assert step(s, "listAfterKill") == {"ids": []}
        assert containers() == {"node-e1": [], "node-e2": []}, "a killed sandbox's container kept"
        # an MCP client through the front too: its session's calls all reach
        # the node that holds it (its id names it), which drives the
        # sandboxes of both nodes; its own creates are made there (a tie of
        # free slots stays where it is)
        made = [KeyApi(n1, alice).create(), KeyApi(n2, alice).create()]
        s["created"] += made
        sess = http_initialize(ViaFront).headers["Mcp-Session-Id"]
        assert sess[-12:] in (tag_of("node-e1"), tag_of("node-e2")), sess
        for _ in range(2):
            res = http_call(ViaFront, sess, "sandbox_create", {})
            made.append(re.search(r"[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}",
                                  json.dumps(res)).group(0))
            s["created"].append(made[-1])
        for sid in made:
            res = http_call(ViaFront, sess, "sandbox_exec", {"sandbox_id": sid, "command": f"echo {sid}"})
            assert f"{sid}\\n" in json.dumps(res) and not res.get("isError"), res
            res = http_call(ViaFront, sess, "sandbox_destroy", {"sandbox_id": sid})
            assert not res.get("isError"), res
        assert containers() == {"node-e1": [], "node-e2": []}, "a destroyed sandbox's container kept"
    finally:
        for sid in s["created"]:
            for st in (n1, n2):
                KeyApi(st, alice).delete(sid)
        etcd.delete_prefix(f"{PREFIX}keys/")


def test_a_node_on_its_own_dockerd_builds_the_template_it_missed(etcd, make_stack, dockerd2):
    """A node on a dockerd of its own, stopped while a template was built:
    back, it builds the template from its recipe on its own Docker (the
    image was never there), and a sandbox of it runs there; removed while
    it is stopped again, the node drops it, image and all."""
    from test_cluster import record
    from test_templates import SMALL, b64, get, wait_done
    secret = secrets.token_hex(16)
    x = make_stack("node-lx", **node_conf(etcd, "node-lx", node_url="{url}",
                                          cluster_secret=secret))
    y = make_stack("node-ly", **node_conf(etcd, "node-ly", node_url="{url}",
                                          cluster_secret=secret, docker_socket=dockerd2.sock))
    wait_until(lambda: sees(x, "node-ly") and sees(y, "node-lx"), timeout=20,
               what="the nodes to see each other")
    y.stop_fcgi()
    wait_until(lambda: record(etcd, "node-ly") is None, timeout=10, what="node-ly gone")
    r = x.api.request("POST", "/templates", json={
        "name": "far", "dockerfile": SMALL, "files": {"hello.txt": b64("from far\n")}})
    assert r.status_code == 202, r.text
    assert wait_done(x.api, "far")["status"] == "ready"
    y.start_fcgi()
    y.wait_healthy()
    wait_until(lambda: get(y.api, "far").status_code == 200, timeout=40,
               what="node-ly to build far by itself")
    t = wait_done(y.api, "far")
    assert t["status"] == "ready", t
    assert dockerd2.docker("image", "inspect", t["image"], check=False).returncode == 0
    r = requests.post(y.url + "/sandbox", json={"template": "far"}, timeout=120, headers={
        "X-Nanobox-Cluster": secret, "X-Nanobox-Owner": "default"})
    assert r.status_code == 201, r.text
    sid = r.json()["sandboxId"]
    assert sid.endswith(tag_of("node-ly"))
    assert y.api.exec(sid, "cat /opt/hello.txt")["stdout"] == "from far\n"
    assert y.api.delete(sid).status_code == 204
    y.stop_fcgi()
    wait_until(lambda: record(etcd, "node-ly") is None, timeout=10, what="node-ly gone")
    assert x.api.request("DELETE", "/templates/far").status_code == 204
    y.start_fcgi()
    y.wait_healthy()
    wait_until(lambda: get(y.api, "far").status_code == 404, timeout=30,
               what="node-ly to drop far")
    assert dockerd2.docker("image", "inspect", t["image"], check=False).returncode != 0
    etcd.delete_prefix(f"{PREFIX}templates/")
    etcd.delete_prefix(f"{PREFIX}recipes/")
