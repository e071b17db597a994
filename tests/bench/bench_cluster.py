#!/usr/bin/python3
"""bench_cluster.py - what a cluster's front costs, against going to the
node straight, in one run (docs/CLUSTER.md, docs/PERFORMANCE.md).

Starts everything itself, on loopback: a 3-member etcd, two nodes (test
stacks of the integration suite, from NANOBOX_BUILD, default ./build, on
this machine's one dockerd), and a front (nanobox-front + its nginx).
Then, interleaved sample by sample:

  (a) exec of `true`, through the front vs straight to the node
      (target: at most 1 ms added at p50);
  (b) GET /sandbox/{id}, the same;
  (c) create (POST /sandbox, then DELETE) placed: sent to a node that
      places it on the other (it has more free slots) vs straight to that
      other node (target: at most 5 ms added);
  (d) etcd requests per create, read from the nodes' /metrics;
  (e) the front's map for 100 nodes: nanobox-front --once against
      100 node records, and nginx -t of the config that includes it.

Sends traffic only to loopback. Everything it starts is stopped at the end.

  sudo tests/bench/bench_cluster.py [-n 200]
"""
import argparse
import json
import os
import re
import secrets
import statistics
import subprocess
import sys
import tempfile
import time

import requests

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

import nbetcd  # noqa: E402
import nbtest  # noqa: E402
from nbfront import Front  # noqa: E402

PREFIX = "/nanobox-bench/"


def ms(t0):
    return (time.perf_counter() - t0) * 1000.0


def p50(xs):
    return statistics.median(xs)


def p95(xs):
    return sorted(xs)[max(0, -(-len(xs) * 95 // 100) - 1)]  # nearest rank


def line(name, front, direct):
    print(f"{name:<34} front p50 {p50(front):7.2f} ms p95 {p95(front):7.2f}   "
          f"node p50 {p50(direct):7.2f} ms p95 {p95(direct):7.2f}   "
          f"added {p50(front) - p50(direct):+6.2f} ms   ratio {p50(front) / p50(direct):5.2f}x")


def etcd_calls(url, key):
    text = requests.get(url + "/metrics", headers={"Authorization": f"Bearer {key}"},
                        timeout=10).text
    return sum(int(v) for v in re.findall(r'^nanobox_etcd_requests_total\{[^}]*\} (\d+)$',
                                           text, re.M))


def map_of_100(etcd, tmp):
    """nanobox-front --once over 100 node records, and nginx -t of it."""
    prefix = "/nanobox-bench-100/"
    for i in range(100):
        rec = {"name": f"n{i}", "tag": "", "url": f"http://10.9.{i // 250}.{i % 250 + 1}:8080",
               "version": "bench", "slots": 1024, "free": 1000, "running": 24,
               "memory_available": 1 << 34, "drain": False, "since": 0, "heartbeat": 0,
               "templates": ["nanobox", "nanobox-python"]}
        etcd.put(f"{prefix}nodes/n{i}", json.dumps(rec))
    out = os.path.join(tmp, "map100")
    r = subprocess.run(["bash", os.path.join(HERE, "..", "..", "src/setup/render-front.sh"), out,
                        "127.0.0.1:1", os.path.join(tmp, "p100")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    t0 = time.perf_counter()
    r = subprocess.run([str(nbtest.BUILD / "nanobox-front"), "--etcd", etcd.endpoints_conf,
                        "--prefix", prefix, "--out", os.path.join(out, "nodes.conf"), "--once"],
                       capture_output=True, text=True)
    t_map = ms(t0)
    assert r.returncode == 0, r.stderr
    size = os.path.getsize(os.path.join(out, "nodes.conf"))
    t0 = time.perf_counter()
    r = subprocess.run([nbtest.NGINX, "-t", "-c", os.path.join(out, "nanobox-front.conf"),
                        "-p", os.path.join(tmp, "p100") + "/"], capture_output=True, text=True)
    t_test = ms(t0)
    assert r.returncode == 0, r.stderr
    etcd.delete_prefix(prefix)
    print(f"{'front map of 100 nodes':<34} nanobox-front --once {t_map:7.1f} ms "
          f"({size} bytes)   nginx -t of it {t_test:7.1f} ms")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=200, help="samples per measurement (default 200)")
    ap.add_argument("--creates", type=int, default=30, help="create samples (default 30)")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="nanobox-bench-cluster-")
    key = secrets.token_hex(16)
    etcd = nbetcd.EtcdCluster(3, tmpdir=os.path.join(tmp, "etcd"))
    nodes, front = [], None
    try:
        secret = secrets.token_hex(16)
        # bench-a has fewer slots: placement sends every create made on it to bench-b
        for name, slots in (("bench-a", "16"), ("bench-b", "64")):
            st = nbtest.Stack(name, extra_conf={
                "node_name": name, "node_url": "{url}", "etcd_endpoints": etcd.endpoints_conf,
                "etcd_prefix": PREFIX, "api_key": key, "warm_pool": "2", "log_level": "info",
                "cluster_secret": secret, "max_sandboxes": slots})
            st.api_key = key
            nodes.append(st)
            st.start()
        front = Front(etcd.endpoints_conf, PREFIX, os.path.join(tmp, "front"))
        front.routes("bench-a", "bench-b")
        auth = {"Authorization": f"Bearer {key}"}
        sf, sd = requests.Session(), requests.Session()
        sf.headers.update(auth)
        sd.headers.update(auth)
        a = nodes[0]
        sid = a.api.create()
        nbtest.wait_until(lambda: sf.get(f"{front.url}/sandbox/{sid}").status_code == 200,
                          timeout=15, what="the front to route bench-a")
        for s, base in ((sf, front.url), (sd, a.url)):  # warm both paths
            for _ in range(20):
                s.post(f"{base}/sandbox/{sid}/exec", json={"command": "true"})
        ex_f, ex_d, get_f, get_d = [], [], [], []
        for _ in range(args.n):
            for s, base, out in ((sf, front.url, ex_f), (sd, a.url, ex_d)):
                t0 = time.perf_counter()
                r = s.post(f"{base}/sandbox/{sid}/exec", json={"command": "true"})
                out.append(ms(t0))
                assert r.status_code == 200, r.text
            for s, base, out in ((sf, front.url, get_f), (sd, a.url, get_d)):
                t0 = time.perf_counter()
                r = s.get(f"{base}/sandbox/{sid}")
                out.append(ms(t0))
                assert r.status_code == 200, r.text
        b = nodes[1]
        nbtest.wait_until(lambda: 'nanobox_cluster_node_free_slots{node="bench-b"}' in
                          sd.get(f"{a.url}/metrics").text, timeout=15,
                          what="bench-a to see bench-b")
        calls0 = sum(etcd_calls(st.url, key) for st in nodes)
        cr_p, cr_b = [], []
        for _ in range(args.creates):
            # both made on bench-b: placed there from bench-a, and straight
            for base, out in ((a.url, cr_p), (b.url, cr_b)):
                t0 = time.perf_counter()
                r = sd.post(f"{base}/sandbox", json={})
                out.append(ms(t0))
                assert r.status_code == 201, r.text
                new = r.json()["sandboxId"]
                assert sd.get(f"{b.url}/sandbox/{new}").status_code == 200, "not on bench-b"
                assert sd.delete(f"{b.url}/sandbox/{new}").status_code == 204
                time.sleep(0.05)  # let the warm pools refill: measure the path, not Docker
        calls1 = sum(etcd_calls(st.url, key) for st in nodes)
        print(f"bench_cluster: 2 nodes + a front on one machine ({os.cpu_count()} cores), "
              f"n={args.n}, creates={args.creates}")
        line("exec `true`", ex_f, ex_d)
        line("GET /sandbox/{id}", get_f, get_d)
        print(f"{'create placed from bench-a on bench-b':<34} placed p50 {p50(cr_p):7.2f} ms p95 "
              f"{p95(cr_p):7.2f}   straight p50 {p50(cr_b):7.2f} ms p95 {p95(cr_b):7.2f}   "
              f"added {p50(cr_p) - p50(cr_b):+6.2f} ms   ratio {p50(cr_p) / p50(cr_b):5.2f}x")
        print(f"{'etcd requests per create':<34} {(calls1 - calls0) / (2 * args.creates):.2f} "
              f"(renewals and record rewrites of both nodes over the create phase)")
        map_of_100(etcd, tmp)
        a.api.delete(sid)
    finally:
        if front:
            front.close()
        for st in nodes:
            try:
                st.api.cleanup()
            finally:
                st.stop()
                st.remove_tmp()
        etcd.close()
        subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
