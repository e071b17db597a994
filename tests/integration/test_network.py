"""
Bridge sandboxes' egress policy through the API (issue 12, item 5): the
network object on create, PUT /sandbox/{id}/network on a running sandbox,
what a request may ask for, bad input refused with nothing changed, and the
kernel rules removed on every path a sandbox leaves by (destroy, expiry,
reconciliation). Traffic goes only to a network namespace of ours
(nbnet.NetTarget), from inside sandboxes.
"""

import socket
import sys

import pytest

import nbnet
from nbnet import INTERNET_A, INTERNET_B, TARGET_PORT, TARGET_PORT_2, is_open, probe
from nbtest import assert_error, docker_ps, in_thread, parse_json, wait_until

# One NetTarget at a time on this machine (a netns, its veth on
# 198.51.100.254/24, a host route for 169.254.77.0/24): the module's tests
# share one xdist worker (tests/run.sh and check-adversarial use
# --dist loadgroup), so its module fixture is made once and alone.
pytestmark = [pytest.mark.xdist_group("nettarget")] if "xdist.plugin" in sys.modules else []


@pytest.fixture(scope="module")
def bstack():
    st = nbnet.start_bridge_stack("network", default_ttl="600",
                                  egress_widen="10.99.0.0/16")
    yield st
    nbnet.stop_bridge_stack(st)


@pytest.fixture(scope="module")
def internet():
    t = nbnet.NetTarget()
    try:
        t.start()
        yield t
    finally:
        t.stop()


@pytest.fixture
def api(bstack, internet):
    internet.check_routes()
    a = bstack.api
    yield a
    a.cleanup()


def put_network(api, sid, body):
    return api.request("PUT", f"/sandbox/{sid}/network", json=body)


# ---- create

def test_create_with_a_policy_denies_what_it_lists(api):
    sid = api.create(network={"mode": "bridge", "deny": [f"{INTERNET_A}/32"]})
    assert not is_open(probe(api, sid, INTERNET_A, TARGET_PORT))
    assert is_open(probe(api, sid, INTERNET_B, TARGET_PORT))


def test_allow_beats_deny_down_to_the_port(api):
    sid = api.create(network={"allow": [f"{INTERNET_B}:{TARGET_PORT}"], "deny": ["0.0.0.0/0"]})
    assert is_open(probe(api, sid, INTERNET_B, TARGET_PORT))
    assert not is_open(probe(api, sid, INTERNET_B, TARGET_PORT_2))
    assert not is_open(probe(api, sid, INTERNET_A, TARGET_PORT))


def test_plain_bridge_gets_the_operators_default(api):
    sid = api.create(network="bridge")
    assert is_open(probe(api, sid, INTERNET_A, TARGET_PORT))
    assert parse_json(api.get(sid))["network"] == "bridge"


def test_operator_deny_holds_by_default(bstack):
    st = nbnet.start_bridge_stack("network-deny", egress_deny=f"{INTERNET_A}/32")
    try:
        sid = st.api.create(network="bridge")
        assert not is_open(probe(st.api, sid, INTERNET_A, TARGET_PORT))
        assert is_open(probe(st.api, sid, INTERNET_B, TARGET_PORT))
        # a request cannot open what the operator closed without egress_widen
        r = st.api.request("POST", "/sandbox", json={"network": {"allow": [f"{INTERNET_A}/32"]}})
        assert_error(r, 403, "forbidden")
    finally:
        nbnet.stop_bridge_stack(st)


@pytest.mark.parametrize("network,status,code", [
    ({"allow": "198.51.100.1"}, 400, "bad_field"),
    ({"allow": [1]}, 400, "bad_field"),
    ({"mode": "wifi"}, 400, "bad_field"),
    ({"color": "red"}, 400, "bad_field"),
    ({"allow": ["example.com"]}, 422, "bad_rule"),
    ({"deny": ["2001:db8::/32"]}, 422, "bad_rule"),
    ({"deny": ["10.1.2.3/24"]}, 422, "bad_rule"),
    ({"deny": ["198.51.100.1:0"]}, 422, "bad_rule"),
    ({"deny": ["198.51.100.1/33"]}, 422, "bad_rule"),
    ({"deny": ["0.0.0.0/0"] * 65}, 422, "out_of_range"),
    ({"mode": "none", "deny": ["0.0.0.0/0"]}, 422, "bad_rule"),
    ({"allow": ["10.0.0.0/8"]}, 403, "forbidden"),        # egress_deny, beyond egress_widen
    ({"allow": ["169.254.169.254"]}, 403, "forbidden"),   # never reachable
    ("wifi", 400, "bad_field"),
])
def test_create_with_a_bad_network_changes_nothing(api, bstack, network, status, code):
    before = len(docker_ps(bstack.instance))
    r = api.request("POST", "/sandbox", json={"network": network})
    assert_error(r, status, code)
    assert len(docker_ps(bstack.instance)) == before


def test_a_request_may_open_what_egress_widen_allows(api):
    r = api.request("POST", "/sandbox", json={"network": {"allow": ["10.99.1.0/24:443"]}})
    assert r.status_code == 201, r.text
    api.created.append(parse_json(r)["sandboxId"])


def test_a_bridge_sandbox_still_exposes_ports_and_runs_commands(api):
    sid = api.create(network={"deny": ["0.0.0.0/0"]})
    nbnet.sandbox_listener(api, sid, 8000, "mine")  # exec and background work as before
    port = api.open_port(sid, 8000)
    with socket.create_connection(("127.0.0.1", port["hostport"]), timeout=5) as s:
        s.sendall(b"ping\n")
        assert s.recv(100).strip() == b"mine"


def test_bridge_policy_needs_allow_bridge(make_stack):
    st = make_stack("nobridge")
    r = st.api.request("POST", "/sandbox", json={"network": {"deny": ["0.0.0.0/0"]}})
    assert_error(r, 403, "forbidden")


# ---- PUT /sandbox/{id}/network

def test_put_network_changes_a_running_sandbox(api):
    sid = api.create(network="bridge")
    assert is_open(probe(api, sid, INTERNET_A, TARGET_PORT))
    r = put_network(api, sid, {"deny": [f"{INTERNET_A}/32"]})
    assert r.status_code == 200, r.text
    assert parse_json(r) == {"sandboxId": sid, "mode": "bridge", "allow": [], "deny": [f"{INTERNET_A}/32"]}
    assert not is_open(probe(api, sid, INTERNET_A, TARGET_PORT))
    assert is_open(probe(api, sid, INTERNET_B, TARGET_PORT))
    r = put_network(api, sid, {})
    assert r.status_code == 200, r.text
    assert is_open(probe(api, sid, INTERNET_A, TARGET_PORT))


@pytest.mark.parametrize("body,status,code", [
    ({"allow": ["example.com"]}, 422, "bad_rule"),
    ({"deny": "0.0.0.0/0"}, 400, "bad_field"),
    ({"mode": "none"}, 422, "bad_rule"),
    ({"allow": ["10.0.0.0/8"]}, 403, "forbidden"),
    ({"extra": 1}, 400, "bad_field"),
    ([], 400, "bad_json"),
])
def test_put_network_bad_input_changes_nothing(api, body, status, code):
    sid = api.create(network={"deny": [f"{INTERNET_A}/32"]})
    r = put_network(api, sid, body)
    assert_error(r, status, code)
    assert not is_open(probe(api, sid, INTERNET_A, TARGET_PORT)), "the old policy still holds"
    assert is_open(probe(api, sid, INTERNET_B, TARGET_PORT))


def test_put_network_on_a_sandbox_without_network_is_409(api):
    sid = api.create()
    assert_error(put_network(api, sid, {"deny": ["0.0.0.0/0"]}), 409, "not_bridge")


def test_put_network_on_an_unknown_sandbox_is_404(api):
    assert_error(put_network(api, "00000000-0000-4000-8000-000000000000", {}), 404, "not_found")


def test_put_network_is_in_the_allow_header(api):
    sid = api.create()
    r = api.request("GET", f"/sandbox/{sid}/network")
    assert r.status_code == 405 and r.headers.get("Allow") == "PUT", (r.status_code, r.headers)


# ---- no leaked rules

def test_destroy_removes_the_rules(api, bstack):
    sid = api.create(network={"deny": ["0.0.0.0/0"]})
    assert nbnet.sandbox_rules_present(bstack, sid)
    assert api.delete(sid).status_code == 204
    assert not nbnet.sandbox_rules_present(bstack, sid)


def test_expiry_removes_the_rules(api, bstack):
    sid = api.create(network="bridge", ttl=1)
    assert nbnet.sandbox_rules_present(bstack, sid)
    wait_until(lambda: not nbnet.sandbox_rules_present(bstack, sid), timeout=20,
               what="the expired sandbox's rules to go")


def test_reconciliation_removes_the_rules_of_a_vanished_sandbox(api, bstack):
    sid = api.create(network="bridge")
    assert nbnet.sandbox_rules_present(bstack, sid)
    nbnet.sh("docker", "rm", "-f", f"nanobox-{sid}")
    bstack.restart()  # reconciliation runs at start
    wait_until(lambda: not nbnet.sandbox_rules_present(bstack, sid), timeout=30,
               what="reconciliation to remove the vanished sandbox's rules")


def test_no_rules_outlive_their_sandboxes(api, bstack):
    ids = [api.create(network="bridge") for _ in range(3)]
    for sid in ids:
        assert nbnet.sandbox_rules_present(bstack, sid)
    for sid in ids:
        assert api.delete(sid).status_code == 204
    api.created = []
    jumps = nbnet.sandbox_jumps(bstack)
    assert not any(nbnet.sandbox_chain(s) in j for s in ids for j in jumps), jumps
    for sid in ids:
        assert nbnet.iptables_S(nbnet.sandbox_chain(sid)) is None


def test_concurrent_bridge_creates_each_get_their_own_rules(api, bstack):
    threads = [in_thread(lambda: api.create(network={"deny": [f"{INTERNET_A}/32"]})) for _ in range(6)]
    for t, box in threads:
        t.join(120)
        assert not t.is_alive(), "a create did not answer within 120 s"
        assert "result" in box, f"a create failed: {box.get('error')}"
    ids = [box["result"] for _, box in threads]
    jumps = nbnet.sandbox_jumps(bstack)
    for sid in ids:
        mine = [j for j in jumps if nbnet.sandbox_chain(sid) in j]
        assert len(mine) == 1, (sid, jumps)
    assert len({j.split(" -s ")[1].split()[0] for j in jumps}) == len(jumps), "one address per sandbox"
    for sid in ids:
        assert api.delete(sid).status_code == 204
    api.created = []
    assert not any(nbnet.sandbox_chain(s) in j for s in ids for j in nbnet.sandbox_jumps(bstack))


def test_purge_removes_every_rule_and_the_network():
    st = nbnet.start_bridge_stack("network-purge")
    try:
        st.api.create(network="bridge")
        ifc = st.conf["bridge_interface"]
        assert nbnet.iptables_S(f"NBS-{ifc}") is not None
    finally:
        nbnet.stop_bridge_stack(st)
    assert nbnet.iptables_S(f"NBF-{ifc}") is None and nbnet.iptables_S(f"NBS-{ifc}") is None
    assert ifc not in (nbnet.iptables_S("DOCKER-USER") or "")
    assert ifc not in (nbnet.iptables_S("INPUT") or "")
    assert nbnet.sh("docker", "network", "inspect", st.conf["bridge_network"], check=False).returncode != 0

