"""
Issue 12, item 5: a bridge sandbox gets outbound access only. From inside
sandboxes, against targets started on this machine (nbnet.py says which and
how nothing can leave it):

- another bridge sandbox's listener is out of reach;
- a listener of the host bound to 0.0.0.0 is out of reach at the host's
  address on the sandbox network (the gateway);
- an exposed port's forwarder (bound to 0.0.0.0, of a network-less sandbox)
  is out of reach the same way;
- 169.254.0.0/16 is refused by a kernel rule, before any packet leaves;
- while "the internet" (a namespace of ours) stays reachable: the blocks
  above are rules, not a broken network.
"""

import socket
import sys

import pytest

import nbnet
from nbnet import is_open, probe

# One NetTarget at a time on this machine (a netns, its veth on
# 198.51.100.254/24, a host route for 169.254.77.0/24): the module's tests
# share one xdist worker (tests/run.sh and check-adversarial use
# --dist loadgroup), so its module fixture is made once and alone.
pytestmark = [pytest.mark.xdist_group("nettarget")] if "xdist.plugin" in sys.modules else []


@pytest.fixture(scope="module")
def bstack():
    st = nbnet.start_bridge_stack("isolation", port_bind="0.0.0.0")
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
def api(bstack):
    a = bstack.api
    yield a
    a.cleanup()


def test_bridge_sandbox_reaches_the_outside(api, internet):
    sid = api.create(network="bridge")
    internet.check_routes()
    assert probe(api, sid, nbnet.INTERNET_A, nbnet.TARGET_PORT) == f"OPEN {nbnet.INTERNET_A}:{nbnet.TARGET_PORT}"


def test_bridge_sandbox_cannot_reach_another_sandbox(api):
    a, b = api.create(network="bridge"), api.create(network="bridge")
    nbnet.sandbox_listener(api, b, 8000, "sandbox-b")
    addr = nbnet.sandbox_addr(api, b)
    assert is_open(probe(api, b, addr, 8000)), "the listener answers on its own address"
    result = probe(api, a, addr, 8000)
    assert not is_open(result), f"sandbox {a} reached sandbox {b} at {addr}:8000: {result}"


def test_bridge_sandbox_cannot_reach_a_host_listener(api):
    listener = nbnet.HostListener("host")
    try:
        sid = api.create(network="bridge")
        gw = nbnet.gateway(api, sid)
        result = probe(api, sid, gw, listener.port)
        assert not is_open(result), f"a sandbox reached the host's 0.0.0.0:{listener.port} at {gw}: {result}"
        assert listener.accepted == 0
    finally:
        listener.close()


def test_bridge_sandbox_cannot_reach_an_exposed_port(api):
    owner = api.create()  # network "none": its port is meant for clients only
    nbnet.sandbox_listener(api, owner, 8000, "exposed")
    port = api.open_port(owner, 8000)
    hostport = port["hostport"]
    with socket.create_connection(("127.0.0.1", hostport), timeout=5) as s:
        s.sendall(b"ping\n")
        assert s.recv(100).strip() == b"exposed", "the forwarder answers on the host"
    sid = api.create(network="bridge")
    result = probe(api, sid, nbnet.gateway(api, sid), hostport)
    assert not is_open(result), f"a bridge sandbox reached forwarder {hostport}: {result}"


def test_bridge_sandbox_cannot_reach_link_local(api, bstack, internet):
    nbf = nbnet.iptables_S(f"NBF-{bstack.conf['bridge_interface']}") or ""
    assert "-d 169.254.0.0/16" in nbf and "REJECT" in nbf, nbf
    internet.check_routes()
    assert internet.reachable_from_host(nbnet.LINK_LOCAL, nbnet.TARGET_PORT)
    sid = api.create(network="bridge")
    result = probe(api, sid, nbnet.LINK_LOCAL, nbnet.TARGET_PORT)
    assert not is_open(result), f"a sandbox reached {nbnet.LINK_LOCAL}: {result}"
    assert "OSError" in result or "No route" in result or "unreachable" in result.lower(), \
        f"refused at once by the rule, not timed out: {result}"


def test_bridge_sandbox_has_no_ipv6_path_to_the_host(bstack):
    ifc = bstack.conf["bridge_interface"]
    chain = nbnet.iptables_S("INPUT", "ip6tables") or ""
    assert f"-i {ifc} -j NB6-{ifc}" in chain, chain
