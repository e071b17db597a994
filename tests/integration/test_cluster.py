"""A nanobox node in a cluster on etcd (docs/CLUSTER.md): the node's
membership (a lease and a record in a real 3-member etcd on loopback), the
sandbox ids that name their node, and what the node does when etcd loses
members or quorum. Each node is a real stack (nginx, nanobox-fcgi, Docker)."""
import hashlib
import json
import os
import re
import signal
import subprocess
import threading
import time

import secrets

import pytest
import requests

import nbetcd
from nbfront import Front
from nbtest import PORTS_DOMAIN, assert_error, docker_ps, wait_until
from test_keys import CLI_BIN, KeyApi, add_key, keys_cli
from test_mcp import http_call, http_initialize
from test_ports import start_http_server

TTL = 3  # node_lease_ttl of the nodes here: renewals every second
PREFIX = "/nanobox-test/"

pytestmark = pytest.mark.xdist_group("cluster")


def tag_of(name):
    return hashlib.sha256(f"nanobox-node:{name}".encode()).hexdigest()[:12]


@pytest.fixture(scope="module")
def etcd(request):
    return nbetcd.etcd_cluster(request)


@pytest.fixture(autouse=True)
def _a_clean_cluster_state(etcd):
    """Each test starts without the keys and registry rows an earlier one
    (or an earlier try of the same one) left in the module's etcd."""
    for part in ("keys/", "sandboxes/", "onnode/", "owners/", "templates/", "recipes/"):
        etcd.delete_prefix(PREFIX + part)


def sees(st, node):
    """Does st's member's last read of the records have node?"""
    return f'nanobox_cluster_node_free_slots{{node="{node}"}}' in \
        st.api.request("GET", "/metrics").text


def node_conf(etcd, name, **more):
    conf = {"node_name": name, "node_url": f"http://{name}.nodes.test:8080",
            "etcd_endpoints": etcd.endpoints_conf, "etcd_prefix": PREFIX,
            "node_lease_ttl": str(TTL), "warm_pool": "0", "warm_pool_code": "0"}
    conf.update(more)
    return conf


def record(etcd, name):
    raw = etcd.get(f"{PREFIX}nodes/{name}")
    return json.loads(raw) if raw is not None else None


def healthz(st):
    r = st.api.request("GET", "/healthz", auth=False, timeout=10)
    assert r.status_code == 200, r.text
    return r.json()


def wait_record(etcd, name, pred=lambda rec: rec is not None, timeout=10):
    return wait_until(lambda: (lambda rec: rec if pred(rec) else None)(record(etcd, name)),
                      timeout=timeout, what=f"node {name}'s record in etcd")


def wait_member(st, timeout=10):
    """The node says it is a member (its record is written just before it says so)."""
    return wait_until(lambda: (lambda hz: hz if hz["node"]["cluster"] == "member" else None)(
        healthz(st)), timeout=timeout, what=f"{st.name} to say it is a member")


def test_a_node_joins_with_its_record_under_a_lease(etcd, make_stack):
    st = make_stack("node-a", **node_conf(etcd, "node-a"))
    rec = wait_record(etcd, "node-a")
    hz = wait_member(st)
    assert rec["name"] == "node-a" and rec["tag"] == tag_of("node-a")
    assert rec["url"] == "http://node-a.nodes.test:8080"
    assert rec["slots"] == hz["capacity"] and rec["free"] == hz["capacity"]
    assert rec["running"] == 0 and rec["drain"] is False
    assert "nanobox" in rec["templates"] and "nanobox-python" in rec["templates"]
    assert rec["memory_available"] > 0 and rec["version"]
    assert abs(rec["heartbeat"] - time.time()) < 60
    # bound to a lease of node_lease_ttl seconds, kept alive
    lease = etcd.lease_of(f"{PREFIX}nodes/node-a")
    assert lease != 0 and 0 < etcd.lease_ttl(lease) <= TTL
    time.sleep(TTL + 1)
    assert etcd.lease_of(f"{PREFIX}nodes/node-a") == lease and etcd.lease_ttl(lease) > 0
    # drained while it runs, by a file beside its state (and undrained)
    drain = st.conf["state_file"] + ".drain"
    open(drain, "w").close()
    try:
        wait_record(etcd, "node-a", lambda r: r and r["drain"] is True, timeout=TTL + 3)
        assert healthz(st)["node"]["drain"] is True
    finally:
        os.unlink(drain)
    wait_record(etcd, "node-a", lambda r: r and r["drain"] is False, timeout=TTL + 3)
    # the tag is claimed for the name, for good
    assert etcd.get(f"{PREFIX}tags/{tag_of('node-a')}") == b"node-a"
    # not node_url: /healthz answers anyone, and that address is internal
    assert hz["node"] == {"name": "node-a", "tag": tag_of("node-a"), "cluster": "member",
                          "drain": False, "renewed": hz["node"]["renewed"]}
    m = st.api.request("GET", "/metrics", timeout=10).text
    assert re.search(r"^nanobox_cluster_member 1$", m, re.M), m
    assert re.search(r'^nanobox_etcd_requests_total\{result="ok"\} [1-9]', m, re.M)


def test_sandbox_ids_name_their_node_and_the_record_counts_them(etcd, make_stack, api):
    st = make_stack("node-b", **node_conf(etcd, "node-b"))
    wait_record(etcd, "node-b")
    sid = st.api.create()
    # a UUID of version 8 whose last group is the node's tag
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", sid)
    assert sid.endswith("-" + tag_of("node-b"))
    assert len(f"65535-{sid}") <= 63  # still a DNS label with a port before it
    assert st.api.exec(sid, "echo hi")["stdout"] == "hi\n"
    rec = wait_record(etcd, "node-b", lambda r: r and r["running"] == 1)
    assert rec["free"] == rec["slots"] - 1
    # each id random but for the tag
    other = st.api.create()
    assert other != sid and other.endswith(tag_of("node-b"))
    assert st.api.delete(sid).status_code == 204
    assert st.api.delete(other).status_code == 204
    wait_record(etcd, "node-b", lambda r: r and r["running"] == 0)
    # a single machine (no node_name) keeps random version 4 ids
    single = api.create()
    assert single[14] == "4", single
    assert "node" not in healthz(api.stack)


def test_a_stopped_node_leaves_at_once_a_killed_one_when_its_lease_lapses(etcd, make_stack):
    st = make_stack("node-c", **node_conf(etcd, "node-c"))
    wait_record(etcd, "node-c")
    st.stop_fcgi()
    # SIGTERM revokes the lease: the record goes with it, not a TTL later
    assert "cluster: left (lease revoked)" in open(st.log_path).read()
    assert record(etcd, "node-c") is None
    st.start_fcgi()
    st.wait_healthy()
    wait_record(etcd, "node-c")
    # killed outright: the member first (the master's death would send it
    # SIGTERM, and a member that gets it revokes the lease)
    os.kill(member_of(st), signal.SIGKILL)
    st.crash()
    # nothing told etcd (on a loaded machine the crash itself may outlast
    # the lease's TTL, so the record's presence would say nothing)
    assert open(st.log_path).read().count("cluster: left (lease revoked)") == 1
    t0 = time.monotonic()
    wait_until(lambda: record(etcd, "node-c") is None, timeout=TTL + 3,
               what="a killed node's record to lapse")
    assert time.monotonic() - t0 <= TTL + 3
    # the same node back: it joins again, under a new lease
    st.start_fcgi()
    st.wait_healthy()
    wait_record(etcd, "node-c")
    wait_member(st)


def test_a_killed_member_process_is_restarted_and_takes_its_record_back(etcd, make_stack):
    st = make_stack("node-d", **node_conf(etcd, "node-d"))
    wait_record(etcd, "node-d")
    lease = etcd.lease_of(f"{PREFIX}nodes/node-d")
    os.kill(member_of(st), signal.SIGKILL)
    # the master starts it again; it takes over its own record (same URL)
    wait_until(lambda: etcd.lease_of(f"{PREFIX}nodes/node-d") not in (0, lease), timeout=10,
               what="the record under the new member's lease")
    assert record(etcd, "node-d")["url"] == "http://node-d.nodes.test:8080"
    wait_member(st)
    # the record put under another lease (a member of the same node not yet
    # dead, say): the member takes it back, so that lease's end deletes nothing
    mine = etcd.lease_of(f"{PREFIX}nodes/node-d")
    other = etcd.grant(60)
    etcd.put(f"{PREFIX}nodes/node-d", etcd.get(f"{PREFIX}nodes/node-d"), lease=other)
    wait_until(lambda: etcd.lease_of(f"{PREFIX}nodes/node-d") == mine, timeout=TTL + 2,
               what="the member to take its record back")
    etcd.revoke(other)
    time.sleep(TTL / 3 + 0.5)
    assert record(etcd, "node-d") is not None
    # (taken back by its check of the lease, or by a rewrite when what the
    # record says changed meanwhile: its memory moves under a busy machine)
    assert etcd.lease_of(f"{PREFIX}nodes/node-d") == mine


def proc_cpu(pid):
    """Seconds of CPU process pid has used (user + system)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def member_of(st):
    """The stack's cluster member process (it names itself, as ps shows)."""
    found = []
    for pid in st.children():
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() == "nanobox-member":
                    found.append(pid)
        except OSError:
            pass
    assert len(found) == 1, f"member processes of {st.name}: {found}"
    return found[0]


def test_a_name_held_by_another_live_node_keeps_the_second_out(etcd, make_stack):
    first = make_stack("node-e1", **node_conf(etcd, "node-e"))
    wait_record(etcd, "node-e")
    second = make_stack("node-e2", **node_conf(etcd, "node-e",
                                                node_url="http://elsewhere.nodes.test:8080"))
    wait_until(lambda: healthz(second)["node"]["cluster"] == "name_conflict", timeout=10,
               what="the second node to see the conflict")
    assert record(etcd, "node-e")["url"] == "http://node-e.nodes.test:8080"
    assert "held by a live node at http://node-e.nodes.test:8080" in open(second.log_path).read()
    # it makes no sandbox meanwhile: its ids would name the other node
    r = second.api.request("POST", "/sandbox", json={})
    assert r.status_code == 503 and r.json()["code"] == "cluster_unavailable", r.text
    assert "another node's" in r.json()["error"]
    assert docker_ps(second.instance) == []
    # the first leaves: the name is free, and the second takes it
    first.stop_fcgi()
    wait_record(etcd, "node-e", lambda r: r and r["url"] == "http://elsewhere.nodes.test:8080",
                timeout=TTL + 5)
    wait_member(second)
    sid = second.api.create()
    assert second.api.exec(sid, "true")["exit_code"] == 0
    assert second.api.delete(sid).status_code == 204


# ---- the front: nanobox-front + an nginx of render-front.sh's config (nbfront.py)

@pytest.fixture(scope="module")
def front(etcd, tmp_path_factory):
    f = Front(etcd.endpoints_conf, PREFIX, str(tmp_path_factory.mktemp("front")))
    yield f
    f.close()


def test_the_front_sends_each_request_to_the_node_of_its_sandbox(etcd, front, make_stack):
    key = secrets.token_hex(16)
    g1 = make_stack("node-g1", **node_conf(etcd, "node-g1", node_url="{url}", api_key=key))
    g2 = make_stack("node-g2", **node_conf(etcd, "node-g2", node_url="{url}", api_key=key))
    g1.api_key = g2.api_key = key  # one key on both nodes (keys in etcd: next)
    front.routes("node-g1", "node-g2")
    s1, s2 = g1.api.create(), g2.api.create()
    assert g1.api.get(s2).status_code == 404  # each sandbox is on one node only
    # each node's /metrics shows the cluster as the records say it
    wait_until(lambda: 'nanobox_cluster_node_sandboxes{node="node-g2"} 1\n' in
               g1.api.request("GET", "/metrics").text, timeout=20,
               what="node-g1's metrics to count node-g2's sandbox")
    m = g1.api.request("GET", "/metrics").text
    assert re.search(r"^nanobox_cluster_nodes_up [2-9]", m, re.M), m
    assert re.search(r'^nanobox_cluster_node_free_slots\{node="node-g1"\} [1-9]', m, re.M), m

    def until(fn, what):
        return wait_until(fn, timeout=20, what=what)

    # the native API by path: each id reaches its own node (after nginx's reload)
    until(lambda: front.request("GET", f"/sandbox/{s2}", key).status_code == 200,
          "the front to route node-g2's sandbox")
    for sid, st in ((s1, g1), (s2, g2)):
        r = front.request("GET", f"/sandbox/{sid}", key)
        assert r.status_code == 200 and r.json()["sandboxId"] == sid, r.text
        r = front.request("POST", f"/sandbox/{sid}/exec", key,
                          json={"command": f"echo {sid}"})
        assert r.status_code == 200 and r.json()["stdout"] == f"{sid}\n", r.text
    # E2B's control plane by path, and its data plane by header
    r = front.request("GET", f"/sandboxes/{s2}", None, headers={"X-API-Key": f"e2b_{key}"})
    assert r.status_code == 200 and r.json()["sandboxID"] == s2, r.text
    # an exposed port by host, through the node's own ports server
    token = start_http_server(g2.api, s2)
    g2.api.open_port(s2, 8000)
    r = front.request("GET", "/index.txt", headers={"Host": f"8000-{s2}.{PORTS_DOMAIN}"})
    assert r.status_code == 200 and r.text == token, r.text
    # a create names no sandbox: any node takes it, and its id says which
    r = front.request("POST", "/sandbox", key, json={})
    assert r.status_code == 201, r.text
    s3 = r.json()["sandboxId"]
    home = g1 if s3.endswith(tag_of("node-g1")) else g2
    assert s3.endswith(tag_of("node-g1")) or s3.endswith(tag_of("node-g2"))
    assert home.api.get(s3).status_code == 200
    assert front.request("DELETE", f"/sandbox/{s3}", key).status_code == 204
    # an id of a node that is not in the cluster: 503 node_unavailable, at the front
    ghost = s1[:24] + tag_of("node-nowhere")
    r = front.request("GET", f"/sandbox/{ghost}", key)
    assert r.status_code == 503 and r.json()["code"] == "node_unavailable", r.text
    # node-g2 dies: its sandboxes answer 503 node_unavailable, node-g1's go on
    os.kill(member_of(g2), signal.SIGKILL)
    g2.crash()
    until(lambda: front.request("GET", f"/sandbox/{s2}", key).status_code == 503,
          "the front to see node-g2 gone")
    r = front.request("GET", f"/sandbox/{s2}", key)
    assert r.json()["code"] == "node_unavailable", r.text
    assert front.request("GET", f"/sandbox/{s1}", key).status_code == 200
    # it comes back: its sandbox (the container outlived it) is served again
    g2.start_fcgi()
    g2.wait_healthy()
    until(lambda: front.request("GET", f"/sandbox/{s2}", key).status_code == 200,
          "the front to route node-g2 again")
    r = front.request("POST", f"/sandbox/{s2}/exec", key, json={"command": "echo back"})
    assert r.status_code == 200 and r.json()["stdout"] == "back\n", r.text
    for sid, st in ((s1, g1), (s2, g2)):
        assert st.api.delete(sid).status_code == 204


def test_an_id_made_before_its_machine_joined_is_found_through_the_front(etcd, front, make_stack):
    """A version 4 id names no node: the front tries each node until one has
    it (a node without it answers 404 and changes nothing)."""
    key = secrets.token_hex(16)
    h1 = make_stack("node-h1", **node_conf(etcd, "node-h1", node_url="{url}", api_key=key))
    h2 = make_stack("node-h2", api_key=key, warm_pool="0", warm_pool_code="0")
    h1.api_key = h2.api_key = key
    old = h2.api.create()
    assert old[14] == "4"
    # the machine joins the cluster: a restart with the cluster's keys
    h2.stop_fcgi()
    h2.conf.update(node_conf(etcd, "node-h2", node_url=h2.url, api_key=key))
    h2.start_fcgi()
    h2.wait_healthy()
    front.routes("node-h1", "node-h2")
    wait_until(lambda: front.request("GET", f"/sandbox/{old}", key).status_code == 200,
               timeout=15, what="the front to find the old id")
    for _ in range(4):  # whichever node the round robin starts at
        r = front.request("POST", f"/sandbox/{old}/exec", key, json={"command": "echo old"})
        assert r.status_code == 200 and r.json()["stdout"] == "old\n", r.text
    assert h1.api.get(old).status_code == 404  # it is node-h2's alone
    # an id of the same shape that no node has: 404 after every node said so
    r = front.request("GET", f"/sandbox/{old[:24]}000000000000", key)
    assert r.status_code == 404 and r.json()["code"] == "not_found", r.text
    assert h2.api.delete(old).status_code == 204


def test_a_key_added_on_one_node_works_on_every_node(etcd, make_stack):
    """Keys live under <prefix>keys/ in etcd; each node's keys file follows.
    A node that joins brings its own keys; an add or rm on any node reaches
    the others by etcd's watch."""
    k1 = make_stack("node-k1", **node_conf(etcd, "node-k1"))
    k2 = make_stack("node-k2", warm_pool="0", warm_pool_code="0")
    bob = add_key(k2, "bob")  # k2's own, from before it joins
    wait_member(k1)
    alice = add_key(k1, "alice", "--max-sandboxes", "2")
    k2.stop_fcgi()
    k2.conf.update(node_conf(etcd, "node-k2"))
    k2.start_fcgi()
    k2.wait_healthy()
    wait_member(k2)
    a1, a2, b1 = KeyApi(k1, alice), KeyApi(k2, alice), KeyApi(k1, bob)
    # alice's key, added on k1, works on k2; bob's, k2's own, on k1
    wait_until(lambda: a2.request("GET", "/sandbox").status_code == 200, timeout=5,
               what="alice's key to work on node-k2")
    wait_until(lambda: b1.request("GET", "/sandbox").status_code == 200, timeout=5,
               what="bob's key to work on node-k1")
    assert set(etcd.get_prefix(f"{PREFIX}keys/")) == {f"{PREFIX}keys/alice", f"{PREFIX}keys/bob"}
    # with her quota on either node
    assert "max_sandboxes=2" in etcd.get(f"{PREFIX}keys/alice").decode()
    assert re.search(r"^alice\s+user\s+max_sandboxes=2$", keys_cli(k2, "ls").stdout, re.M)
    # only hashes travel: the key itself is in no file and not in etcd
    assert alice not in open(os.path.join(k2.dir, "keys")).read()
    assert all(alice.encode() not in v for v in etcd.get_prefix(f"{PREFIX}keys/").values())
    # a key added on k2 now, while both are members
    carol = add_key(k2, "carol")
    wait_until(lambda: KeyApi(k1, carol).request("GET", "/sandbox").status_code == 200,
               timeout=5, what="carol's key, added on node-k2, to work on node-k1")
    # removed on k2: refused on k1 too
    keys_cli(k2, "rm", "alice")
    wait_until(lambda: a1.request("GET", "/sandbox").status_code == 401, timeout=5,
               what="alice's key, removed on node-k2, to stop on node-k1")
    assert etcd.get(f"{PREFIX}keys/alice") is None
    # the file gone on one node is not every key removed: it comes back
    os.unlink(os.path.join(k1.dir, "keys"))
    wait_until(lambda: os.path.exists(os.path.join(k1.dir, "keys")), timeout=5,
               what="node-k1's keys file to come back")
    assert b1.request("GET", "/sandbox").status_code == 200
    # adds on both nodes at once, while the syncs run: none is lost
    made = {}

    def adds(st, names):
        for n in names:
            made[n] = add_key(st, n)
    ts = [threading.Thread(target=adds, args=(k1, [f"p{i}" for i in range(6)])),
          threading.Thread(target=adds, args=(k2, [f"q{i}" for i in range(6)]))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    want = {"bob", "carol", *made}
    names = lambda st: set(re.findall(r"^(\S+)\s+(?:user|admin)\b", keys_cli(st, "ls").stdout,
                                      re.M))
    wait_until(lambda: names(k1) == want and names(k2) == want, timeout=10,
               what="every key on both nodes")
    assert {k.rsplit("/", 1)[1] for k in etcd.get_prefix(f"{PREFIX}keys/")} == want
    assert KeyApi(k2, made["p5"]).request("GET", "/sandbox").status_code == 200
    assert KeyApi(k1, made["q5"]).request("GET", "/sandbox").status_code == 200
    etcd.delete_prefix(f"{PREFIX}keys/")


def etcd_watches(etcd):
    """The watches etcd's members have started (each POST /v3/watch is one)."""
    total = 0
    for url in etcd.endpoints_conf.split(","):
        try:
            text = requests.get(url + "/metrics", timeout=5).text
        except requests.RequestException:
            continue  # a member stopped
        total += sum(int(v) for v in re.findall(
            r'^grpc_server_started_total\{[^}]*grpc_method="Watch"[^}]*\} (\d+)$', text, re.M))
    return total


def test_the_keys_watch_is_held_open_and_falls_back_to_a_poll(etcd, make_stack):
    """Each member holds one watch of the keys open: a key added on one node
    works on the other long before the next renewal (30 s TTL: every 10 s),
    and waiting costs etcd no new watch. The member the watches are on
    stopped: the nodes read the keys at each renewal until a watch is open
    again (on the next member), and a key added meanwhile still arrives."""
    ttl = {"node_lease_ttl": "30"}
    w1 = make_stack("node-kw1", **node_conf(etcd, "node-kw1", **ttl))
    w2 = make_stack("node-kw2", **node_conf(etcd, "node-kw2", **ttl))
    wait_member(w1)
    wait_member(w2)
    first = add_key(w1, "first")
    wait_until(lambda: KeyApi(w2, first).request("GET", "/sandbox").status_code == 200,
               timeout=5, what="the first key on node-kw2")
    watches = etcd_watches(etcd)
    dave = add_key(w1, "dave")
    wait_until(lambda: KeyApi(w2, dave).request("GET", "/sandbox").status_code == 200,
               timeout=3, what="dave's key on node-kw2, by the watch")
    erin = add_key(w2, "erin")
    wait_until(lambda: KeyApi(w1, erin).request("GET", "/sandbox").status_code == 200,
               timeout=3, what="erin's key on node-kw1, by the watch")
    assert etcd_watches(etcd) == watches, "a watch was opened again for a change"
    # every watch is on the first member (each member's first endpoint)
    etcd.stop_member(0)
    try:
        for st in (w1, w2):
            wait_until(lambda: "the keys read at each renewal until it is back" in
                       open(st.log_path).read(), timeout=10, what=f"{st.name}'s watch to break")
        fred = add_key(w1, "fred")
        wait_until(lambda: KeyApi(w2, fred).request("GET", "/sandbox").status_code == 200,
                   timeout=30, what="fred's key on node-kw2 without the first member")
        for st in (w1, w2):
            wait_until(lambda: "cluster keys: watching etcd again" in open(st.log_path).read(),
                       timeout=30, what=f"{st.name}'s watch on another member")
    finally:
        etcd.start_member(0)
    etcd.delete_prefix(f"{PREFIX}keys/")


def test_what_etcd_holds_is_checked_before_a_node_or_front_uses_it(etcd, front, make_stack):
    """etcd is the cluster's, not a tenant's; still, a record or a key line
    that is not what nanobox writes changes nothing: a key line that does
    not parse leaves every keys file as it was, a node record that would
    write nginx syntax is left out of the front's map (and nginx goes on
    serving), a record that is not JSON is skipped."""
    st = make_stack("node-m", **node_conf(etcd, "node-m", node_url="{url}"))
    wait_member(st)
    alice = add_key(st, "alice")
    wait_until(lambda: etcd.get(f"{PREFIX}keys/alice") is not None, timeout=5,
               what="alice's key in etcd")
    keys_text = open(os.path.join(st.dir, "keys")).read()
    etcd.put(f"{PREFIX}keys/mallory", "mallory root 00 max_sandboxes=-1")
    time.sleep(1.5)  # a watch's wake-up and a renewal's pull, both
    assert open(os.path.join(st.dir, "keys")).read() == keys_text
    assert KeyApi(st, alice).request("GET", "/sandbox").status_code == 200
    assert "do not parse" in open(st.log_path).read()
    etcd.delete(f"{PREFIX}keys/mallory")
    # the node's own file half-edited: not pushed, said once, and the member
    # waits on etcd as before (it does not spin on it)
    path = os.path.join(st.dir, "keys")
    with open(path + ".edit", "w") as f:
        f.write(keys_text + "half a line\n")
    os.chmod(path + ".edit", 0o600)
    os.rename(path + ".edit", path)
    member = member_of(st)
    cpu0 = proc_cpu(member)
    time.sleep(3)
    assert proc_cpu(member) - cpu0 < 0.5, "the member spins on a keys file that does not parse"
    assert open(st.log_path).read().count("not shared until it reads again") == 1
    assert set(etcd.get_prefix(f"{PREFIX}keys/")) == {f"{PREFIX}keys/alice"}
    with open(path + ".edit", "w") as f:
        f.write(keys_text)
    os.chmod(path + ".edit", 0o600)
    os.rename(path + ".edit", path)
    # records no node wrote, next to a real one
    etcd.put(f"{PREFIX}nodes/evil", json.dumps({
        "name": "evil", "url": "http://127.0.0.1:1; } server { listen 9999; location / { return 200",
        "tag": "000000000000"}))
    etcd.put(f"{PREFIX}nodes/junk", "{not json")
    front.routes("node-m")
    wait_until(lambda: "left out" in open(os.path.join(front.dir, "front.log")).read(),
               timeout=10, what="the front to leave the bad records out")
    text = open(front.nodes_conf).read()
    assert "evil" not in text and "9999" not in text and "junk" not in text
    sid = st.api.create()
    wait_until(lambda: front.request("GET", f"/sandbox/{sid}", st.api_key).status_code == 200,
               timeout=10, what="the front to route node-m with the bad records there")
    etcd.delete(f"{PREFIX}nodes/evil")
    etcd.delete(f"{PREFIX}nodes/junk")
    etcd.delete_prefix(f"{PREFIX}keys/")


def test_a_create_is_placed_on_the_node_with_more_room(etcd, make_stack):
    """Placement: the better of two nodes drawn from those that take
    sandboxes. With two, both are drawn, and the one with more free slots
    gets the create, for the key that asked; a drained node, or one that
    does not answer, gets none: the create is made where it arrived."""
    secret = secrets.token_hex(16)
    p1 = make_stack("node-p1", **node_conf(etcd, "node-p1", node_url="{url}",
                                           cluster_secret=secret, max_sandboxes="8"))
    p2 = make_stack("node-p2", **node_conf(etcd, "node-p2", node_url="{url}",
                                           cluster_secret=secret, max_sandboxes="64"))
    alice = add_key(p1, "alice")
    a1, a2 = KeyApi(p1, alice), KeyApi(p2, alice)
    wait_until(lambda: a2.request("GET", "/sandbox").status_code == 200, timeout=10,
               what="alice's key on node-p2")

    wait_until(lambda: sees(p1, "node-p2"), timeout=15, what="node-p1 to see node-p2")
    # created on p1, made on p2 (more room), for alice
    r = a1.request("POST", "/sandbox", json={})
    assert r.status_code == 201, r.text
    sid = r.json()["sandboxId"]
    assert sid.endswith(tag_of("node-p2")), sid
    assert r.json()["owner"] == "alice"
    assert a2.get(sid).status_code == 200
    # node-p1 answers for it too: it sends the request to node-p2
    r = p1.api.get(sid)
    assert r.status_code == 200 and r.json()["node"] == "node-p2", r.text
    out = a2.exec(sid, "echo placed")
    assert out["stdout"] == "placed\n"
    assert "action=create-placed on node node-p2 (HTTP 201)" in open(p1.log_path).read()
    # E2B's create too, in E2B's shape
    r = requests.post(p1.url + "/v2/sandboxes", json={"templateID": "base"},
                      headers={"X-API-Key": f"e2b_{alice}"})
    assert r.status_code == 201 and r.json()["sandboxID"].endswith(tag_of("node-p2")), r.text
    assert a2.delete(r.json()["sandboxID"]).status_code == 204
    # an MCP tool's create is placed too; the session's next calls on it,
    # which reach node-p1, are sent on to node-p2
    sess = http_initialize(p1).headers["Mcp-Session-Id"]
    res = http_call(p1, sess, "sandbox_create", {})
    made = re.search(r"[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}",
                     json.dumps(res)).group(0)
    assert made.endswith(tag_of("node-p2")), res
    res = http_call(p1, sess, "sandbox_exec", {"sandbox_id": made, "command": "echo via-mcp"})
    assert "via-mcp" in json.dumps(res) and not res.get("isError"), res
    assert p2.api.get(made).status_code == 200
    res = http_call(p1, sess, "sandbox_destroy", {"sandbox_id": made})
    assert not res.get("isError"), res
    assert p2.api.get(made).status_code == 404  # gone from node-p2 (an admin sees all)
    # bad input is the other node's to refuse, and is refused the same
    r = a1.request("POST", "/sandbox", json={"ttl": -1})
    assert r.status_code == 422 and r.json()["code"] == "out_of_range", r.text
    # the cluster's headers from a client: a wrong secret passes nothing,
    # an owner without the secret is not believed
    r = requests.post(p2.url + "/sandbox", json={}, headers={
        "X-Nanobox-Cluster": "guess" * 8, "X-Nanobox-Owner": "default",
        "Authorization": f"Bearer {alice}"})
    assert r.status_code == 401, r.text
    r = requests.get(f"{p2.url}/sandbox", headers={"X-Nanobox-Owner": "default",
                                                   "Authorization": f"Bearer {alice}"})
    assert r.status_code == 200 and [s["sandboxId"] for s in r.json()["sandboxes"]] == [sid]
    assert a2.delete(sid).status_code == 204
    # node-p2 drained: creates stay where they arrive
    p2.stop_fcgi()
    p2.conf["node_drain"] = "yes"
    p2.start_fcgi()
    p2.wait_healthy()
    wait_until(lambda: 'nanobox_cluster_node_free_slots{node="node-p2"} 0\n' in
               p1.api.request("GET", "/metrics").text, timeout=15,
               what="node-p1 to see node-p2 drained")
    sid = a1.create()
    assert sid.endswith(tag_of("node-p1")), sid
    assert a1.delete(sid).status_code == 204
    # and a create that reaches the drained node is placed on one that is not
    wait_until(lambda: sees(p2, "node-p1"), timeout=15, what="node-p2 to see node-p1")
    sid = a2.create()
    assert sid.endswith(tag_of("node-p1")), sid
    assert a1.delete(sid).status_code == 204
    # node-p2 back, then its nanobox-fcgi gone (its record not lapsed yet):
    # the create is made here, not failed
    p2.stop_fcgi()
    p2.conf["node_drain"] = "no"
    p2.start_fcgi()
    p2.wait_healthy()
    wait_until(lambda: re.search(r'^nanobox_cluster_node_free_slots\{node="node-p2"\} [1-9]',
                                 p1.api.request("GET", "/metrics").text, re.M), timeout=15,
               what="node-p1 to see node-p2 take sandboxes again")
    os.kill(member_of(p2), signal.SIGKILL)
    p2.crash()
    r = a1.request("POST", "/sandbox", json={})
    assert r.status_code == 201, r.text
    assert r.json()["sandboxId"].endswith(tag_of("node-p1"))
    assert "did not take the create" in open(p1.log_path).read()
    assert a1.delete(r.json()["sandboxId"]).status_code == 204
    etcd.delete_prefix(f"{PREFIX}keys/")


# ---- one view: the sandbox registry in etcd (docs/CLUSTER.md, "One view")

def listed(api, **query):
    r = api.request("GET", "/sandbox" + ("?" + "&".join(f"{k}={v}" for k, v in query.items())
                                         if query else ""))
    assert r.status_code == 200, r.text
    return r.json()


def rows_of(etcd, owner):
    return {k.rsplit("/", 1)[1]: json.loads(v)
            for k, v in etcd.get_prefix(f"{PREFIX}sandboxes/{owner}/").items()}


def test_a_list_on_any_node_shows_every_nodes_sandboxes(etcd, make_stack):
    """Each node registers its sandboxes in etcd; a list on any node shows
    them all (this node's from its table, the others' rows), each with its
    node and whether that node is up, for the key that asks only. E2B's
    list pages through them; MCP's list names the node."""
    v1 = make_stack("node-v1", **node_conf(etcd, "node-v1"))
    v2 = make_stack("node-v2", **node_conf(etcd, "node-v2"))
    alice, bob = add_key(v1, "alice"), add_key(v1, "bob")
    a1, a2, b2 = KeyApi(v1, alice), KeyApi(v2, alice), KeyApi(v2, bob)
    wait_until(lambda: b2.request("GET", "/sandbox").status_code == 200, timeout=10,
               what="the keys on node-v2")
    wait_until(lambda: sees(v2, "node-v1") and sees(v1, "node-v2"), timeout=15,
               what="the nodes to see each other up")
    on1 = [a1.create(metadata={"n": str(i)}) for i in range(2)]
    on2 = a2.create(metadata={"n": "2"})
    theirs = b2.create()
    want = {**{s: "node-v1" for s in on1}, on2: "node-v2"}
    # a key without quotas: registered just after the create answered
    wait_until(lambda: set(rows_of(etcd, "alice")) == set(want) and
               set(rows_of(etcd, "bob")) == {theirs}, timeout=5, what="the creates registered")
    for api in (a1, a2):
        got = {s["sandboxId"]: s for s in listed(api)["sandboxes"]}
        assert set(got) == set(want), got
        for sid, node in want.items():
            assert got[sid]["node"] == node and got[sid]["node_up"] is True
            assert got[sid]["owner"] == "alice" and got[sid]["state"] == "running"
            assert got[sid]["metadata"]["n"] in ("0", "1", "2")
    assert [s["sandboxId"] for s in listed(b2)["sandboxes"]] == [theirs]
    assert {s["sandboxId"] for s in listed(v2.api, owner="alice")["sandboxes"]} == set(want)
    # the rows: who, where, and nothing of bob's under alice
    rows = rows_of(etcd, "alice")
    assert set(rows) == set(want) and rows[on2]["node"] == "node-v2"
    assert set(rows_of(etcd, "bob")) == {theirs}
    # a metadata filter reaches the other node's rows too
    assert [s["sandboxId"] for s in listed(a2, **{"metadata.n": "1"})["sandboxes"]] == [on1[1]]
    # E2B's list, two to a page, from node-v2
    e2b = {"X-API-Key": f"e2b_{alice}"}
    seen, token = [], None
    for _ in range(3):
        r = requests.get(v2.url + "/v2/sandboxes?limit=2" + (f"&nextToken={token}" if token
                                                            else ""), headers=e2b)
        assert r.status_code == 200, r.text
        seen += [s["sandboxID"] for s in r.json()]
        token = r.headers.get("X-Next-Token")
        if not token:
            break
    assert sorted(seen) == sorted(want), seen
    # MCP's list on node-v2 says where each runs
    sess = http_initialize(v2).headers["Mcp-Session-Id"]
    text = json.dumps(http_call(v2, sess, "sandbox_list", {}))
    assert all(s in text for s in want) and "node=node-v1" in text, text
    # and `nanobox ls` has a NODE column
    out = subprocess.run([str(CLI_BIN), "ls"], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, NANOBOX_URL=v2.url, NANOBOX_API_KEY=alice))
    assert out.returncode == 0, out.stderr
    assert re.search(r"^ID\s.*\sNODE$", out.stdout, re.M), out.stdout
    assert re.search(rf"^{on1[0]}\s.*\snode-v1$", out.stdout, re.M), out.stdout
    assert re.search(rf"^{on2}\s.*\snode-v2$", out.stdout, re.M), out.stdout
    # a pause on node-v1 reaches the row within a round of its member
    assert a1.request("POST", f"/sandbox/{on1[0]}/pause").status_code == 200
    wait_until(lambda: {s["sandboxId"]: s["state"] for s in listed(a2)["sandboxes"]}
               .get(on1[0]) == "paused", timeout=10, what="the pause seen on node-v2")
    # a destroy takes its row out before it answers
    assert a1.delete(on1[1]).status_code == 204
    assert on1[1] not in {s["sandboxId"] for s in listed(a2)["sandboxes"]}
    assert on1[1] not in rows_of(etcd, "alice")
    # a row and its index entry lost (etcd restored from an older backup)
    # come back; those of a sandbox the node does not have go
    etcd.delete_prefix(f"{PREFIX}sandboxes/alice/{on2}")
    etcd.delete_prefix(f"{PREFIX}onnode/{tag_of('node-v2')}/{on2}")
    ghost = on2[:-12].replace(on2[:8], "00000000") + tag_of("node-v2")
    etcd.put(f"{PREFIX}onnode/{tag_of('node-v2')}/{ghost}", "alice 0")
    etcd.put(f"{PREFIX}sandboxes/alice/{ghost}", json.dumps(dict(rows[on2], id=ghost)))
    wait_until(lambda: on2 in rows_of(etcd, "alice") and ghost not in rows_of(etcd, "alice"),
               timeout=10, what="node-v2's member to put its rows right")
    # node-v1 gone (its lease lapsed): its sandboxes are listed, on a node
    # that is down; back, they are up and served again
    os.kill(member_of(v1), signal.SIGKILL)
    v1.crash()
    wait_until(lambda: {s["sandboxId"]: s["node_up"] for s in listed(a2)["sandboxes"]}
               .get(on1[0]) is False, timeout=TTL + 10, what="node-v1's rows shown as down")
    out = subprocess.run([str(CLI_BIN), "ls"], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, NANOBOX_URL=v2.url, NANOBOX_API_KEY=alice))
    assert re.search(rf"^{on1[0]}\s.*\snode-v1 \(down\)$", out.stdout, re.M), out.stdout
    v1.start_fcgi()
    v1.wait_healthy()
    wait_until(lambda: {s["sandboxId"]: s["node_up"] for s in listed(a2)["sandboxes"]}
               .get(on1[0]) is True, timeout=15, what="node-v1's rows up again")
    assert a1.request("POST", f"/sandbox/{on1[0]}/resume").status_code == 200
    assert a1.exec(on1[0], "echo back")["stdout"] == "back\n"
    for api, sid in ((a1, on1[0]), (a2, on2), (b2, theirs)):
        assert api.delete(sid).status_code == 204
    wait_until(lambda: not rows_of(etcd, "alice") and not rows_of(etcd, "bob"), timeout=10,
               what="every row gone")
    etcd.delete_prefix(f"{PREFIX}keys/")


def test_a_create_without_quotas_is_registered_just_after_its_answer(etcd, make_stack):
    """A key that no quota counts rows against has its create registered
    right after the answer went out (the etcd write off the create's time):
    the row is there a moment later, and a destroy that comes before it
    leaves no row behind. A key with quotas is registered before."""
    st = make_stack("node-late", **node_conf(etcd, "node-late"))
    wait_member(st)
    dan = KeyApi(st, add_key(st, "dan"))
    cap = KeyApi(st, add_key(st, "cap", "--max-sandboxes", "3"))
    sid = dan.create()
    wait_until(lambda: sid in rows_of(etcd, "dan"), timeout=5, what="the row after the answer")
    assert rows_of(etcd, "dan")[sid]["node"] == "node-late"
    # each created and destroyed at once: the late write finds it gone,
    # or the member takes out a row that landed after its destroy
    for _ in range(8):
        assert dan.delete(dan.create()).status_code == 204
    wait_until(lambda: set(rows_of(etcd, "dan")) == {sid}, timeout=TTL + 5,
               what="only the live sandbox's row")
    assert len(listed(st.api, owner="dan")["sandboxes"]) == 1
    capped = cap.create()
    assert set(rows_of(etcd, "cap")) == {capped}  # before its answer
    for api, s in ((dan, sid), (cap, capped)):
        assert api.delete(s).status_code == 204
    assert not rows_of(etcd, "dan") and not rows_of(etcd, "cap")
    etcd.delete_prefix(f"{PREFIX}keys/")
    etcd.delete_prefix(f"{PREFIX}owners/")


def test_a_keys_quota_counts_its_sandboxes_on_every_node(etcd, make_stack):
    """max_sandboxes is the key's over the cluster: each create is
    registered under the key's guard in one etcd transaction, so creates on
    two nodes at once cannot both take the last one."""
    q1 = make_stack("node-q1", **node_conf(etcd, "node-q1"))
    q2 = make_stack("node-q2", **node_conf(etcd, "node-q2"))
    carl = add_key(q1, "carl", "--max-sandboxes", "2", "--max-memory", "450m")
    c1, c2 = KeyApi(q1, carl), KeyApi(q2, carl)
    wait_until(lambda: c2.request("GET", "/sandbox").status_code == 200, timeout=10,
               what="carl's key on node-q2")
    first = c1.create(memory="200m")
    second = c2.create(memory="200m")
    for api in (c1, c2):
        r = api.request("POST", "/sandbox", json={})
        assert r.status_code == 429 and r.json()["code"] == "quota", r.text
        assert "max_sandboxes=2" in r.json()["error"] and "it has 2" in r.json()["error"]
    assert set(rows_of(etcd, "carl")) == {first, second}
    assert c1.delete(first).status_code == 204
    # memory counts across nodes too: 200m there and 256m here is over 450m
    r = c1.request("POST", "/sandbox", json={"memory": "256m"})
    assert r.status_code == 429 and "max_memory" in r.json()["error"], r.text
    assert "hold 209715200 bytes" in r.json()["error"], r.text
    assert c2.delete(second).status_code == 204
    # four at once, two on each node, for two places: exactly two are made
    codes, made = [], []

    def one(api):
        r = api.request("POST", "/sandbox", json={"memory": "128m"})
        codes.append(r.status_code)
        if r.status_code == 201:
            made.append((api, r.json()["sandboxId"]))
    ts = [threading.Thread(target=one, args=(api,)) for api in (c1, c2, c1, c2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert sorted(codes) == [201, 201, 429, 429], codes
    assert set(rows_of(etcd, "carl")) == {sid for _, sid in made}
    # the undone ones left nothing behind: no container, no row
    assert len(listed(q1.api, owner="carl")["sandboxes"]) == 2
    for api, sid in made:
        assert api.delete(sid).status_code == 204
    assert not rows_of(etcd, "carl")
    etcd.delete_prefix(f"{PREFIX}keys/")
    etcd.delete_prefix(f"{PREFIX}owners/")


def test_every_node_is_a_front_for_the_others_sandboxes(etcd, make_stack):
    """A request that reaches a node with another node's sandbox id is sent
    to that node under the cluster's secret and the key's name, and its
    answer relayed (streams as streams): one node's address reaches every
    sandbox, MCP's tool calls included. The other node checks the owner;
    a node that is down answers 503 node_unavailable, not 404."""
    secret = secrets.token_hex(16)
    f1 = make_stack("node-w1", **node_conf(etcd, "node-w1", node_url="{url}",
                                           cluster_secret=secret))
    f2 = make_stack("node-w2", **node_conf(etcd, "node-w2", node_url="{url}",
                                           cluster_secret=secret))
    alice, bob = add_key(f1, "alice"), add_key(f1, "bob")
    a1, a2, b2 = KeyApi(f1, alice), KeyApi(f2, alice), KeyApi(f2, bob)
    wait_until(lambda: b2.request("GET", "/sandbox").status_code == 200, timeout=10,
               what="the keys on node-w2")
    wait_until(lambda: sees(f2, "node-w1"), timeout=15, what="node-w2 to see node-w1")
    # made on node-w1 (a user's create through a node is placed, so ask it straight)
    sid = a1.create(metadata={"who": "alice"})
    assert sid.endswith(tag_of("node-w1"))
    # through node-w2: read, exec (whole and streamed), files, pause, delete
    r = a2.get(sid)
    assert r.status_code == 200 and r.json()["node"] == "node-w1", r.text
    assert a2.exec(sid, "echo through")["stdout"] == "through\n"
    r = a2.request("POST", f"/sandbox/{sid}/exec", json={"command": "echo a; echo b >&2"},
                   headers={"Accept": "application/x-ndjson"})
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("application/x-ndjson")
    lines = [json.loads(x) for x in r.text.splitlines() if x]
    assert {"type": "stdout", "data": "a\n"} in lines and {"type": "stderr", "data": "b\n"} \
        in lines, lines
    assert lines[-1]["type"] == "exit" and lines[-1]["exit_code"] == 0, lines
    r = a2.request("PUT", f"/sandbox/{sid}/files?path=/workspace/f.txt", data=b"via w2",
                   headers={"Content-Type": "application/octet-stream"})
    assert r.status_code in (200, 201, 204), r.text
    assert a1.exec(sid, "cat /workspace/f.txt")["stdout"] == "via w2"
    r = a2.request("GET", f"/sandbox/{sid}/files?path=/workspace/f.txt")
    assert r.status_code == 200 and r.content == b"via w2"
    # another key's request is refused by the sandbox's node, as an unknown id
    r = b2.get(sid)
    assert r.status_code == 404 and r.json()["code"] == "not_found", r.text
    assert b2.exec_raw(sid, "true").status_code == 404
    # MCP on node-w2 drives the sandbox on node-w1
    sess = http_initialize(f2).headers["Mcp-Session-Id"]
    res = http_call(f2, sess, "sandbox_exec", {"sandbox_id": sid, "command": "echo mcp"})
    assert "mcp" in json.dumps(res) and not res.get("isError"), res
    assert "action=forwarded on node node-w1" in open(f2.log_path).read()
    # a made-up id of a node nobody runs: the node is unknown, 503
    ghost = "0" * 8 + sid[8:-12] + "0" * 12
    r = a2.get(ghost)
    assert r.status_code == 503 and r.json()["code"] == "node_unavailable", r.text
    # node-w1 gone: its sandbox answers 503 node_unavailable through node-w2
    os.kill(member_of(f1), signal.SIGKILL)
    f1.crash()
    r = a2.get(sid)
    assert r.status_code == 503 and r.json()["code"] == "node_unavailable", r.text
    wait_until(lambda: "node-w1" not in {s["node"] for s in listed(a2)["sandboxes"]
                                         if s["node_up"]}, timeout=TTL + 10,
               what="node-w1 shown down")
    r = a2.exec_raw(sid, "true")
    assert r.status_code == 503 and r.json()["code"] == "node_unavailable", r.text
    # back: served again through node-w2, and destroyed through it
    f1.start_fcgi()
    f1.wait_healthy()
    wait_until(lambda: a2.get(sid).status_code == 200, timeout=15,
               what="node-w1's sandbox through node-w2 again")
    assert a2.delete(sid).status_code == 204
    assert a1.get(sid).status_code == 404
    assert docker_ps(f1.instance, all=False) == []
    etcd.delete_prefix(f"{PREFIX}keys/")


def test_a_template_is_built_on_every_node_and_its_creates_go_where_it_is(etcd, make_stack):
    """A template build (and its removal) on one node is sent on to every
    other node, each building its own; a create of a template is placed
    only on a node that has it ready. A snapshot is one node's template:
    its creates go to that node, wherever they arrive."""
    from test_snapshots import snapshot
    from test_templates import build_ready, get, wait_done
    secret = secrets.token_hex(16)
    t1 = make_stack("node-t1", **node_conf(etcd, "node-t1", node_url="{url}",
                                           cluster_secret=secret, max_sandboxes="8"))
    t2 = make_stack("node-t2", **node_conf(etcd, "node-t2", node_url="{url}",
                                           cluster_secret=secret, max_sandboxes="64"))
    dana = add_key(t1, "dana")
    d1, d2 = KeyApi(t1, dana), KeyApi(t2, dana)
    wait_until(lambda: d2.request("GET", "/sandbox").status_code == 200, timeout=10,
               what="dana's key on node-t2")
    wait_until(lambda: sees(t1, "node-t2") and sees(t2, "node-t1"), timeout=15,
               what="the nodes to see each other")
    build_ready(d1, "shared")
    t = wait_done(d2, "shared")  # built on node-t2 too, by node-t2
    assert t["status"] == "ready" and t["owner"] == "dana", t
    assert "action=fanned-out to node node-t2 (HTTP 202)" in open(t1.log_path).read()
    # the records list it; a create of it from node-t1 goes to node-t2 (more room)
    wait_until(lambda: "dana/shared" in (record(etcd, "node-t2") or {}).get("templates", []) and
               "dana/shared" in (record(etcd, "node-t1") or {}).get("templates", []),
               timeout=15, what="both records to list dana/shared")
    time.sleep(6)  # a read of the records by each member (every 5 s)
    sid = d1.create(template="shared")
    assert sid.endswith(tag_of("node-t2")), sid
    assert d1.exec(sid, "cat /etc/tpl-marker")["stdout"] == "hi\n"
    assert d1.delete(sid).status_code == 204
    # a snapshot of a sandbox on node-t1 is node-t1's alone
    src = made_here(t1, secret, "dana")
    assert src.endswith(tag_of("node-t1"))
    d1.exec(src, "echo kept > /workspace/kept.txt")
    snap = snapshot(d1, src, "snap")
    assert snap["name"] == "snap"
    assert get(d2, "snap").status_code == 404
    wait_until(lambda: "dana/snap" in (record(etcd, "node-t1") or {}).get("templates", []),
               timeout=15, what="node-t1's record to list dana/snap")
    time.sleep(6)
    for api in (d1, d2):  # node-t1 has less room, but only it has the snapshot
        made = api.create(template="snap")
        assert made.endswith(tag_of("node-t1")), made
        assert api.exec(made, "cat /workspace/kept.txt")["stdout"] == "kept\n"
        assert api.delete(made).status_code == 204
    assert d1.delete(src).status_code == 204
    # removed on node-t2: gone from node-t1 too
    assert d2.request("DELETE", "/templates/shared").status_code == 204
    assert get(d1, "shared").status_code == 404
    assert d1.request("DELETE", "/templates/snap").status_code == 204
    etcd.delete_prefix(f"{PREFIX}keys/")


def template_pair(etcd, make_stack, prefix, key, *key_opts):
    """Two nodes under one cluster secret (the second with more room) and a
    key of the cluster: (node 1, node 2, the key's API on each)."""
    secret = secrets.token_hex(16)
    n1 = make_stack(f"{prefix}1", **node_conf(etcd, f"{prefix}1", node_url="{url}",
                                              cluster_secret=secret, max_sandboxes="8"))
    n2 = make_stack(f"{prefix}2", **node_conf(etcd, f"{prefix}2", node_url="{url}",
                                              cluster_secret=secret, max_sandboxes="64"))
    k = add_key(n1, key, *key_opts)
    k1, k2 = KeyApi(n1, k), KeyApi(n2, k)
    wait_until(lambda: k2.request("GET", "/sandbox").status_code == 200, timeout=10,
               what=f"{key}'s key on {prefix}2")
    wait_until(lambda: sees(n1, f"{prefix}2") and sees(n2, f"{prefix}1"), timeout=15,
               what="the nodes to see each other")
    return n1, n2, k1, k2


def made_here(st, secret, owner="default"):
    """A sandbox of owner made on st itself (sent as a node's: placement
    leaves it there): its id."""
    r = requests.post(st.url + "/sandbox", json={}, timeout=120, headers={
        "X-Nanobox-Cluster": secret, "X-Nanobox-Owner": owner})
    assert r.status_code == 201, r.text
    return r.json()["sandboxId"]


def away(etcd, st):
    """st's nanobox-fcgi stopped: its record gone, the other nodes' view without it."""
    st.stop_fcgi()
    wait_until(lambda: record(etcd, st.name) is None, timeout=10, what=f"{st.name} gone")


def entry(etcd, owner, nm):
    raw = etcd.get(f"{PREFIX}templates/{owner}/{nm}")
    return json.loads(raw) if raw is not None else None


def test_a_node_that_was_away_builds_what_it_missed_and_drops_what_was_removed(etcd, make_stack):
    """A build accepted while a node is away is in etcd (its entry, and its
    request as its recipe); the node, back, builds it from the recipe by
    itself, its record lists it and a create of it is placed there. A
    removal while it is away reaches it when it is back. The template stays
    its key's: another key does not see it on either node."""
    from test_templates import SMALL, b64, get, wait_done
    j1, j2, e1, e2 = template_pair(etcd, make_stack, "node-j", "erin")
    mal = KeyApi(j1, add_key(j1, "mal"))
    away(etcd, j2)
    files = {"hello.txt": b64("hello from the template\n")}
    r = e1.request("POST", "/templates", json={"name": "late", "dockerfile": SMALL,
                                                "files": files})
    assert r.status_code == 202, r.text
    assert wait_done(e1, "late")["status"] == "ready"
    ent = entry(etcd, "erin", "late")
    assert ent["removed"] is False and ent["recipe"] is True and ent["node"] == "node-j1", ent
    recipe = json.loads(etcd.get(f"{PREFIX}recipes/erin/late"))
    assert recipe == {"name": "late", "dockerfile": SMALL, "files": files}
    # back: node-j2 builds it, as erin's, from the recipe
    j2.start_fcgi()
    j2.wait_healthy()
    wait_until(lambda: get(e2, "late").status_code == 200, timeout=40,
               what="node-j2 to build erin's late by itself")
    t = wait_done(e2, "late")
    assert t["status"] == "ready" and t["owner"] == "erin", t
    assert "built here too, from its recipe" in open(j2.log_path).read()
    wait_until(lambda: "erin/late" in (record(etcd, "node-j2") or {}).get("templates", []),
               timeout=15, what="node-j2's record to list erin/late")
    time.sleep(6)  # a read of the records by each member (every 5 s)
    sid = e1.create(template="late")  # node-j2 has more room
    assert sid.endswith(tag_of("node-j2")), sid
    assert e1.exec(sid, "cat /etc/tpl-marker /opt/hello.txt")["stdout"] == \
        "hi\nhello from the template\n"
    assert e1.delete(sid).status_code == 204
    # another key: no such template on either node, and no create of it
    for api in (mal, KeyApi(j2, mal.key)):
        assert get(api, "late").status_code == 404
        r = api.request("POST", "/sandbox", json={"template": "late"})
        assert r.status_code == 404, r.text
    # a build that says it is a node's needs the secret: refused, nothing kept
    r = e1.request("POST", "/templates", json={"name": "evil", "dockerfile": SMALL},
                   headers={"X-Nanobox-Cluster": "wrong", "X-Nanobox-Owner": "erin"})
    assert r.status_code == 401, r.text
    assert entry(etcd, "erin", "evil") is None and get(e1, "evil").status_code == 404
    # removed while node-j2 is away: node-j2, back, drops it
    away(etcd, j2)
    assert e1.request("DELETE", "/templates/late").status_code == 204
    ent = entry(etcd, "erin", "late")
    assert ent["removed"] is True and ent["node"] == "node-j1", ent
    assert etcd.get(f"{PREFIX}recipes/erin/late") is None
    j2.start_fcgi()
    j2.wait_healthy()
    wait_until(lambda: get(e2, "late").status_code == 404, timeout=30,
               what="node-j2 to drop erin's late")
    wait_until(lambda: "erin/late" not in (record(etcd, "node-j2") or {"templates": ["erin/late"]})
               .get("templates", []), timeout=15, what="node-j2's record without erin/late")
    # built again under the same name: an entry again, and the key's own
    r = e2.request("POST", "/templates", json={"name": "late", "dockerfile": SMALL,
                                                "files": files})
    assert r.status_code == 202, r.text
    assert entry(etcd, "erin", "late")["removed"] is False
    assert wait_done(e1, "late")["status"] == "ready"  # and sent on to node-j1
    # a recipe is built only under its entry's name (one written into etcd by hand here)
    etcd.put(f"{PREFIX}recipes/erin/other", json.dumps({"name": "sly", "dockerfile": SMALL}))
    etcd.put(f"{PREFIX}templates/erin/other", json.dumps(
        {"at": int(time.time()), "node": "node-j1", "removed": False, "recipe": True}))
    wait_until(lambda: "template other of erin: its recipe is not a build of that name" in
               open(j2.log_path).read(), timeout=30, what="node-j2 to refuse the recipe")
    assert get(e2, "sly").status_code == 404 and get(e2, "other").status_code == 404
    etcd.delete_prefix(f"{PREFIX}keys/")


def test_max_templates_counts_the_key_s_templates_on_every_node(etcd, make_stack):
    """max_templates over the cluster: a template built on node 1 while node 2
    was away (so node 2 has none yet) counts on node 2, which refuses a
    second with the same 429 a single machine gives; two builds at once on
    two nodes take one unit once; a removal frees it on every node."""
    from test_templates import SMALL, b64, get, submit, wait_done
    files = {"hello.txt": b64("hi\n")}
    q1, q2, k1, k2 = template_pair(etcd, make_stack, "node-q", "quin", "--max-templates", "1")
    away(etcd, q2)
    assert submit(k1, "one", SMALL, files).status_code == 202
    q2.start_fcgi()
    q2.wait_healthy()
    wait_member(q2)
    assert get(k2, "one").status_code == 404  # not built there yet
    body = assert_error(submit(k2, "two", SMALL, files), 429, "quota")
    assert "quota max_templates=1 of key \"quin\" reached: it has 1 templates" in body["error"]
    assert get(k2, "two").status_code == 404 and entry(etcd, "quin", "two") is None
    assert_error(submit(k1, "two", SMALL, files), 429, "quota")
    # removed (once built): a unit free again on either node
    assert wait_done(k1, "one")["status"] == "ready"
    assert k1.request("DELETE", "/templates/one").status_code == 204
    # two at once, one on each node: one unit, taken once
    out = {}

    def build(api, nm):
        out[nm] = submit(api, nm, SMALL, files)
    threads = [threading.Thread(target=build, args=a) for a in ((k1, "x1"), (k2, "x2"))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    codes = sorted(r.status_code for r in out.values())
    assert codes == [202, 429], {k: (r.status_code, r.text[:200]) for k, r in out.items()}
    live = [nm for nm in ("x1", "x2") if (entry(etcd, "quin", nm) or {}).get("removed") is False]
    assert len(live) == 1, live
    for api in (k1, k2):
        wait_done(api, live[0])
    etcd.delete_prefix(f"{PREFIX}keys/")


def test_max_ports_counts_the_key_s_open_ports_on_every_node(etcd, make_stack):
    """max_ports over the cluster: a port open on a sandbox of node 1 counts
    on node 2, which refuses another with the same 429 a single machine
    gives, and opens nothing; closed, the unit is free on node 2 once node
    1's row says so (within a round)."""
    import nbtest
    if not nbtest.ports_keys_known():
        pytest.skip("this build has no ephemeral ports")
    p1, p2, k1, k2 = template_pair(etcd, make_stack, "node-p", "pia", "--max-ports", "1")
    secret = p1.conf["cluster_secret"]
    here = {"X-Nanobox-Cluster": secret, "X-Nanobox-Owner": "pia"}
    sids = []
    for api, st in ((k1, p1), (k2, p2)):  # one sandbox on each node, made there
        r = api.request("POST", "/sandbox", json={}, headers=here)
        assert r.status_code == 201, r.text
        sids.append(r.json()["sandboxId"])
        assert sids[-1].endswith(tag_of(st.name))
    s1, s2 = sids
    k1.open_port(s1, 8000)
    row = json.loads(etcd.get(f"{PREFIX}sandboxes/pia/{s1}"))
    assert row["ports"] == 1, row  # registered with the port, before the answer
    body = assert_error(k2.open_port_raw(s2, 8001, 60), 429, "quota")
    assert "quota max_ports=1 of key \"pia\" reached: its sandboxes have 1 open ports" in \
        body["error"], body
    assert k2.ports(s2) == []
    assert k1.close_port(s1, 8000).status_code == 204
    wait_until(lambda: "ports" not in json.loads(etcd.get(f"{PREFIX}sandboxes/pia/{s1}")),
               timeout=TTL + 5, what="node-p1's row without the port")
    assert k2.open_port(s2, 8001)["sandboxport"] == 8001
    assert_error(k1.open_port_raw(s1, 8002, 60), 429, "quota")
    for api, sid in ((k1, s1), (k2, s2)):
        assert api.delete(sid).status_code == 204
    etcd.delete_prefix(f"{PREFIX}keys/")


def test_an_admin_s_list_reads_every_row_in_pages(etcd, make_stack):
    """An admin's list reads the registry in pages of 1000 rows, each from
    the last key of the one before (so one etcd answer stays small however
    many rows there are): 2500 rows of a node that is down, of two owners,
    put straight into etcd, are each listed once, beside this node's own
    sandbox (from its table)."""
    st = make_stack("node-l", **node_conf(etcd, "node-l"))
    wait_member(st)
    own = st.api.create()
    tag, now, ghosts = tag_of("node-gone"), int(time.time()), {}
    for batch in range(25):  # 100 puts a transaction
        puts = []
        for i in range(batch * 100, batch * 100 + 100):
            owner, gid = ("alice", "bob")[i % 2], f"{i:08x}-0000-8000-8000-{tag}"
            row = {"id": gid, "node": "node-gone", "owner": owner, "state": "running",
                   "image": "nanobox:latest", "created": now, "expires": now + 3600,
                   "memory": 268435456, "nano_cpus": 500000000, "pids": 128, "network": 0,
                   "lifecycle": 0, "metadata": json.dumps({"i": str(i)})}
            puts.append({"request_put": {"key": nbetcd._b64(f"{PREFIX}sandboxes/{owner}/{gid}"),
                                         "value": nbetcd._b64(json.dumps(row))}})
            ghosts[gid] = owner
        etcd.call("/v3/kv/txn", {"success": puts})
    def ranges():
        """Range calls the etcd members have served (the gateway's are gRPC's)."""
        n = 0
        for ep in etcd.endpoints:
            text = requests.get(ep + "/metrics", timeout=10).text
            n += sum(int(float(m)) for m in re.findall(
                r'^grpc_server_handled_total\{[^}]*grpc_method="Range"[^}]*\} (\S+)$', text, re.M))
        return n
    try:
        before = ranges()
        listed = st.api.list()
        # three pages at least (the node's member reads too, meanwhile)
        assert ranges() - before >= 3
        ids = [s["sandboxId"] for s in listed]
        assert len(ids) == len(set(ids)) == 2501, (len(ids), len(set(ids)))
        assert set(ids) == set(ghosts) | {own}
        for s in listed:
            if s["sandboxId"] == own:
                assert s["node"] == "node-l" and s["node_up"] is True, s
            else:
                assert s["node"] == "node-gone" and s["node_up"] is False, s
                assert s["owner"] == ghosts[s["sandboxId"]], s
        assert st.api.delete(own).status_code == 204
    finally:
        etcd.delete_prefix(f"{PREFIX}sandboxes/")


def test_etcd_over_tls_with_client_certificates(make_stack, certs, tmp_path):
    """etcd serving https and asking every client for a certificate of its
    CA: a node given the CA, its certificate and key joins and registers its
    sandboxes; one without a client certificate is refused by etcd and
    stays out (its creates 503), serving nothing it could not register."""
    _, _, ca = certs
    ca_key = os.path.join(os.path.dirname(str(ca)), "ca.key")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]

    def signed(name, ext):
        """A certificate of the test CA: (cert, key) files."""
        crt, k = str(tmp_path / f"{name}.pem"), str(tmp_path / f"{name}.key")
        subprocess.run(["openssl", "req", *ec, "-keyout", k, "-out", str(tmp_path / f"{name}.csr"),
                        "-subj", f"/CN=nanobox {name}"], check=True, capture_output=True)
        (tmp_path / f"{name}.cnf").write_text(ext)
        subprocess.run(["openssl", "x509", "-req", "-in", str(tmp_path / f"{name}.csr"), "-CA",
                        str(ca), "-CAkey", ca_key, "-CAcreateserial", "-days", "2", "-extfile",
                        str(tmp_path / f"{name}.cnf"), "-out", crt], check=True,
                       capture_output=True)
        os.chmod(k, 0o644)  # read by whoever the processes run as
        return crt, k
    # etcd's gateway dials its own gRPC with the member's certificate: both uses
    cert, key = signed("member", "subjectAltName=IP:127.0.0.1\n"
                       "extendedKeyUsage=serverAuth,clientAuth\n")
    ccert, ckey = signed("client", "extendedKeyUsage=clientAuth\n")
    tls = {"ca": ca, "cert": cert, "key": key, "client_cert": ccert, "client_key": ckey}
    with nbetcd.EtcdCluster(1, tmpdir=str(tmp_path / "etcd"), tls=tls) as etls:
        assert etls.endpoints_conf.startswith("https://")
        conf = node_conf(etls, "node-tls", etcd_cacert=str(ca), etcd_cert=ccert, etcd_key=ckey)
        st = make_stack("node-tls", **conf)
        wait_until(lambda: (lambda raw: raw and json.loads(raw))(
            etls.get(f"{PREFIX}nodes/node-tls")), timeout=10, what="the record over TLS")
        wait_member(st)
        sid = st.api.create()
        wait_until(lambda: etls.get_prefix(f"{PREFIX}sandboxes/default/"), timeout=5,
                   what="the sandbox registered over TLS")
        assert st.api.delete(sid).status_code == 204
        # without a client certificate etcd refuses it: it stays out, makes nothing
        bare = make_stack("node-bare", **node_conf(etls, "node-bare", etcd_cacert=str(ca)))
        wait_until(lambda: healthz(bare)["node"]["cluster"] == "etcd_unreachable", timeout=10,
                   what="the node without a certificate to be refused")
        r = bare.api.request("POST", "/sandbox", json={})
        assert r.status_code == 503 and r.json()["code"] == "cluster_unavailable", r.text
        assert etls.get(f"{PREFIX}nodes/node-bare") is None
        st.stop_fcgi()
        bare.stop_fcgi()


def test_the_rows_of_a_node_gone_for_good_go_past_their_end(etcd, make_stack):
    """A node that never comes back leaves rows: the first node by name
    takes out those whose sandbox's end is past (by a minute), and those
    its index lists without a row, and keeps the rest: they may still run
    when their node returns."""
    gone = tag_of("node-gone")
    etcd.put(f"{PREFIX}tags/{gone}", "node-gone")
    now = int(time.time())
    ids = {k: f"{i:08x}-0000-8000-8000-{gone}" for i, k in enumerate(("over", "live", "rowless"))}
    for k, sid in ids.items():
        etcd.put(f"{PREFIX}onnode/{gone}/{sid}", "erin 0")
        if k != "rowless":
            etcd.put(f"{PREFIX}sandboxes/erin/{sid}", json.dumps({
                "id": sid, "node": "node-gone", "owner": "erin", "state": "running",
                "image": "nanobox:latest", "created": now - 7200,
                "expires": now - 120 if k == "over" else now + 3600, "memory": 1, "nano_cpus": 1,
                "pids": 1, "network": 0, "lifecycle": 0, "metadata": "{}"}))
    st = make_stack("node-aaa", **node_conf(etcd, "a-first"))  # first by name
    wait_until(lambda: set(rows_of(etcd, "erin")) == {ids["live"]} and
               {k.rsplit("/", 1)[1] for k in etcd.get_prefix(f"{PREFIX}onnode/{gone}/")} ==
               {ids["live"]}, timeout=20, what="the gone node's dead rows taken out")
    assert "cluster: node node-gone is gone: 2 of its rows past their end taken out" in \
        open(st.log_path).read()
    etcd.delete_prefix(f"{PREFIX}tags/{gone}")
