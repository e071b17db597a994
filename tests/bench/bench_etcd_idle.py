#!/usr/bin/python3
"""bench_etcd_idle.py - what an idle cluster node costs etcd, per second
(docs/CLUSTER.md "Growing to 100 nodes", docs/PERFORMANCE.md).

Starts a 3-member etcd on loopback and one node (a test stack of the
integration suite, from NANOBOX_BUILD, default ./build, with its keys
file shared through etcd as every node's is), waits until it has joined
and a key added on it is in etcd, then counts for --seconds:

  - the node's own count of its etcd calls (nanobox_etcd_requests_total
    of its /metrics: every call, a watch opened counted once);
  - etcd's count of the calls it started, by method
    (grpc_server_started_total of every member's /metrics: the JSON
    gateway's requests become these), against the named peer in the
    same run: the lease keepalives, the membership's own floor (one a
    renewal, every third of node_lease_ttl).

Prints requests per second of each and the ratio of all the node's
calls to its keepalives. Sends traffic only to loopback; everything it
starts is stopped at the end.

  sudo tests/bench/bench_etcd_idle.py [--seconds 30]
"""
import argparse
import os
import re
import secrets
import subprocess
import sys
import tempfile
import time

import requests

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

import nbetcd  # noqa: E402
import nbtest  # noqa: E402

PREFIX = "/nanobox-bench-idle/"


def node_calls(st, key):
    text = requests.get(st.url + "/metrics", headers={"Authorization": f"Bearer {key}"},
                        timeout=10).text
    return sum(int(v) for v in re.findall(r'^nanobox_etcd_requests_total\{[^}]*\} (\d+)$',
                                           text, re.M))


def etcd_started(etcd):
    """grpc_server_started_total by method, summed over the members."""
    out = {}
    for url in etcd.endpoints_conf.split(","):
        text = requests.get(url + "/metrics", timeout=10).text
        for method, v in re.findall(
                r'^grpc_server_started_total\{[^}]*grpc_method="([^"]+)"[^}]*\} (\d+)$', text,
                re.M):
            out[method] = out.get(method, 0) + int(v)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30.0)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="nanobox-bench-idle-")
    key = secrets.token_hex(16)
    etcd = nbetcd.EtcdCluster(3, tmpdir=os.path.join(tmp, "etcd"))
    st = None
    try:
        st = nbtest.Stack("bench-idle", extra_conf={
            "node_name": "bench-idle", "node_url": "{url}",
            "etcd_endpoints": etcd.endpoints_conf, "etcd_prefix": PREFIX, "api_key": key,
            "log_level": "info"})
        st.api_key = key
        st.start()
        nbtest.wait_until(lambda: st.api.request("GET", "/healthz", auth=False).json()
                          ["node"]["cluster"] == "member", timeout=20, what="the node to join")
        subprocess.run([str(nbtest.BUILD / "nanobox"), "keys", "add", "idle", "--config",
                        st.conf_path], capture_output=True, check=True, timeout=60)
        nbtest.wait_until(lambda: etcd.get(f"{PREFIX}keys/idle") is not None, timeout=10,
                          what="the key in etcd")
        time.sleep(5)  # past the join's first rounds
        n0, e0, t0 = node_calls(st, key), etcd_started(etcd), time.monotonic()
        time.sleep(args.seconds)
        n1, e1, dt = node_calls(st, key), etcd_started(etcd), time.monotonic() - t0
        rates = {m: (e1.get(m, 0) - e0.get(m, 0)) / dt for m in e1}
        node_rate = (n1 - n0) / dt
        keepalive = rates.get("LeaseKeepAlive", 0.0)
        print(f"idle node, {dt:.0f} s: {node_rate:.2f} etcd requests/s (the node's count)")
        for m, r in sorted(rates.items(), key=lambda x: -x[1]):
            if r > 0:
                print(f"  etcd {m:<24} {r:6.2f}/s")
        if keepalive > 0:
            print(f"ratio to the lease keepalives (the peer): {node_rate / keepalive:.2f}x")
    finally:
        if st is not None:
            st.stop()
        etcd.close()


if __name__ == "__main__":
    main()
