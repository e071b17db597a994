"""
The etcd harness itself (nbetcd.py) against Debian's real etcd: a 3-member
cluster on this process's loopback ports, reached through etcd's v3 JSON
gateway. No nanobox stack is started (conftest's NO_STACK_FILES).

The cluster tests (tests/cluster/, issue 25) build on what is checked here:
every member serves reads and writes, a leased key lapses with its lease,
one member lost of three changes nothing, two lost make a write fail (an
EtcdError, after etcd's own 7 s request timeout) while the cluster keeps its
data, and all comes back when the members do; close() leaves no process.
"""

import os
import time

import pytest

import nbetcd
import nbtest


@pytest.fixture(scope="module")
def etcd(request):
    return nbetcd.etcd_cluster(request)


def test_round_trip_through_each_member(etcd):
    assert len(etcd.endpoints) == 3 and etcd.endpoints_conf == ",".join(etcd.endpoints)
    for port in etcd.client_ports + etcd.peer_ports:
        assert nbtest.LISTEN_PORTS[0] <= port <= nbtest.LISTEN_PORTS[1], "a port outside our band"
        assert port in nbtest.RESERVED_PORTS
    for i in range(3):
        etcd.put(f"rt/{i}", f"value {i}\0\xff", members=[i])
        for j in range(3):
            assert etcd.get(f"rt/{i}", members=[j]) == f"value {i}\0\xff".encode()
    assert etcd.get("rt/none") is None
    assert etcd.get_prefix("rt/") == {f"rt/{i}": f"value {i}\0\xff".encode() for i in range(3)}
    assert etcd.delete("rt/0") == 1 and etcd.get("rt/0") is None
    assert etcd.delete_prefix("rt/") == 2 and etcd.get_prefix("rt/") == {}


def test_leased_key_lapses(etcd):
    lease = etcd.grant(2)
    assert 0 < etcd.lease_ttl(lease) <= 2
    etcd.put("lease/k", "v", lease=lease)
    etcd.put("lease/plain", "v")
    assert etcd.lease_of("lease/k") == lease
    assert etcd.lease_of("lease/plain") == 0 and etcd.lease_of("lease/none") == 0
    t0 = time.monotonic()
    nbtest.wait_until(lambda: etcd.get("lease/k") is None, timeout=6, interval=0.1,
                      what="the leased key to lapse")
    assert time.monotonic() - t0 > 1.0, "the key went before its lease's TTL"
    assert etcd.lease_ttl(lease) == -1
    assert etcd.get("lease/plain") == b"v"
    lease = etcd.grant(60)
    etcd.put("lease/revoked", "v", lease=lease)
    etcd.revoke(lease)
    assert etcd.get("lease/revoked") is None and etcd.lease_ttl(lease) == -1
    etcd.delete_prefix("lease/")


def test_member_loss_and_quorum(etcd):
    try:
        assert etcd.leader() in (0, 1, 2)
        etcd.stop_member(0)
        assert etcd.up() == [1, 2]
        # its ports wait for it: free_port() hands out neither
        held = {etcd.client_ports[0], etcd.peer_ports[0]}
        assert not held & {nbtest.free_port() for _ in range(nbtest.BAND + 5)}
        etcd.put("q/one-down", "1")
        assert etcd.get("q/one-down") == b"1"
        assert etcd.lease_ttl(etcd.grant(5)) > 0

        etcd.stop_member(1)
        t0 = time.monotonic()
        with pytest.raises(nbetcd.EtcdError) as e:
            etcd.put("q/two-down", "2")
        took = time.monotonic() - t0
        assert took < 12, f"a write without quorum failed only after {took:.1f} s"
        assert "member 2" in str(e.value), e.value
        assert etcd.leader() is None
        # what member 2 holds can still be read, serializably
        assert etcd.get("q/one-down", serializable=True) == b"1"

        etcd.start_member(0)
        etcd.start_member(1)
        assert etcd.up() == [0, 1, 2]
        assert etcd.leader() in (0, 1, 2)
        etcd.put("q/back", "3")
        for i in range(3):
            assert etcd.get("q/back", members=[i]) == b"3"
            assert etcd.get("q/one-down", members=[i]) == b"1"
    finally:
        for i in range(3):
            if not etcd.running(i):
                etcd.start_member(i)
        etcd.delete_prefix("q/")


def test_close_leaves_nothing(tmp_path):
    cl = nbetcd.EtcdCluster(3, tmpdir=str(tmp_path / "etcd"))
    cl.put("k", "v")
    cl.stop_member(2)
    cl.start_member(2)
    pids = list(cl.started_pids)
    assert len(pids) == 4 and [nbtest.pid_alive(p) for p in pids] == [True, True, False, True]
    assert sorted(cl.pid(i) for i in range(3)) == sorted(pids[:2] + pids[3:])
    cl.close()
    assert [p for p in pids if nbtest.pid_alive(p)] == []
    assert not os.path.exists(cl.dir) or nbtest.KEEP_TMP
    assert cl not in nbetcd._LIVE
    assert not set(cl.client_ports + cl.peer_ports) & nbtest.RESERVED_PORTS
    cl.close()  # twice is harmless


def test_missing_etcd_names_the_package(monkeypatch):
    monkeypatch.setattr(nbetcd, "ETCD", None)
    with pytest.raises(pytest.fail.Exception, match="apt install etcd-server"):
        nbetcd.EtcdCluster(1)
