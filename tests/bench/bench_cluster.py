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
      other node, and vs a single machine without etcd (target: at most
      5 ms added over the single machine);
  (d) etcd requests per create, read from the nodes' /metrics (the
      requests of an idle spell as long subtracted: renewals, the
      registry's rounds);
  (e) the front's map for 100 nodes: nanobox-front --once against
      100 node records, and nginx -t of the config that includes it;
  (f) GET /sandbox with 1000 sandboxes in the registry (rows of another
      node put in etcd) vs the same list on the single machine (its own
      few sandboxes, no etcd);
  (g) with --throughput S: creates a second (create, then delete) by 32
      clients for S seconds, through the front to the two nodes vs
      straight to the single machine. The nodes share this machine's cores;
      with --dockerd2 bench-b runs on a dockerd of its own (nbdockerd.py:
      its own data root, containerd, bridge), as on a second machine, so
      Docker's own serialisation (one daemon, one containerd) is split in
      two, while the CPU is not: the ratio says how much of a create's
      time is one daemon's queue rather than the cores.
  (h) with --registry N: N rows of 100 owners in the registry (loaded in
      transactions of 64 rows), etcd's size, a key's list of its 1000
      among them, and an admin's list of all N;

Sends traffic only to loopback. Everything it starts is stopped at the end.

  sudo tests/bench/bench_cluster.py [-n 200] [--throughput 30 [--dockerd2]] [--registry N]
"""
import argparse
import contextlib
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
from nbdockerd import second_dockerd  # noqa: E402
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


def registry_of(etcd, node, key, n, own=1000):
    """A registry of n rows (a node that is not running, 100 owners, own
    of them the asking key's): the time to load it, etcd's size, a key's
    list (one owner's prefix) and an admin's list of every row."""
    ghost, now, t0 = "0badc0ffee01", int(time.time()), time.perf_counter()
    ops = []
    for i in range(n):
        owner = "default" if i < own else f"o{i % 99:03d}"
        gid = f"{i:08x}-0000-8000-8000-{ghost}"
        row = json.dumps({
            "id": gid, "node": "bench-ghost", "owner": owner, "state": "running",
            "image": "nanobox:latest", "created": now, "expires": now + 3600,
            "memory": 268435456, "nano_cpus": 500000000, "pids": 128, "network": 0,
            "lifecycle": 0, "metadata": json.dumps({"i": str(i)})})
        ops.append({"requestPut": {"key": nbetcd._b64(f"{PREFIX}sandboxes/{owner}/{gid}"),
                                   "value": nbetcd._b64(row)}})
        ops.append({"requestPut": {"key": nbetcd._b64(f"{PREFIX}onnode/{ghost}/{gid}"),
                                   "value": nbetcd._b64(f"{owner} 0")}})
        if len(ops) >= 128 or i == n - 1:  # etcd's --max-txn-ops
            etcd.call("/v3/kv/txn", {"success": ops}, timeout=60)
            ops = []
    t_load = time.perf_counter() - t0
    st = etcd.call("/v3/maintenance/status", {})
    s = requests.Session()
    s.headers["Authorization"] = f"Bearer {key}"
    mine, every, size = [], [], 0
    for _ in range(20):
        t1 = time.perf_counter()
        r = s.get(f"{node.url}/sandbox?owner=default", timeout=120)
        mine.append(ms(t1))
        assert r.status_code == 200 and len(r.json()["sandboxes"]) >= own, r.text[:300]
    for _ in range(3):
        t1 = time.perf_counter()
        r = s.get(f"{node.url}/sandbox", timeout=300)
        every.append(ms(t1))
        size = len(r.content)
        got = len(r.json().get("sandboxes", [])) if r.status_code == 200 else r.status_code
    etcd.delete_prefix(f"{PREFIX}sandboxes/")
    etcd.delete_prefix(f"{PREFIX}onnode/{ghost}/")
    print(f"{f'registry of {n} rows':<34} loaded in {t_load:6.1f} s ({n / t_load:.0f} rows/s), "
          f"etcd db {int(st.get('dbSize', 0)) / 2**20:.1f} MiB")
    print(f"{f'GET /sandbox, a key with {own} of {n}':<34} p50 {p50(mine):7.2f} ms "
          f"p95 {p95(mine):7.2f}")
    print(f"{f'GET /sandbox, an admin: all {n}':<34} p50 {p50(every):9.1f} ms "
          f"({size / 2**20:.1f} MiB answer, {got} rows)")


def throughput(base, key, seconds, clients=32):
    """Creates a second by clients each creating and deleting in a loop."""
    import threading
    done, stop = [0], time.monotonic() + seconds
    lock = threading.Lock()

    def client():
        s = requests.Session()
        s.headers["Authorization"] = f"Bearer {key}"
        while time.monotonic() < stop:
            r = s.post(f"{base}/sandbox", json={}, timeout=120)
            if r.status_code != 201:
                time.sleep(0.2)  # full for a moment: not a create
                continue
            s.delete(f"{base}/sandbox/{r.json()['sandboxId']}", timeout=120)
            with lock:
                done[0] += 1
    t0 = time.monotonic()
    ts = [threading.Thread(target=client) for _ in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return done[0] / (time.monotonic() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=200, help="samples per measurement (default 200)")
    ap.add_argument("--creates", type=int, default=30, help="create samples (default 30)")
    ap.add_argument("--throughput", type=float, default=0,
                    help="seconds of 32 clients creating, per side (default 0: not measured)")
    ap.add_argument("--registry", type=int, default=0,
                    help="rows of a large registry to measure lists against (e.g. 100000)")
    ap.add_argument("--dockerd2", action="store_true",
                    help="run bench-b on a dockerd of its own (a second machine's Docker)")
    args = ap.parse_args()
    with contextlib.ExitStack() as stack:
        d2 = stack.enter_context(second_dockerd()) if args.dockerd2 else None
        run(args, d2)


def run(args, d2):
    tmp = tempfile.mkdtemp(prefix="nanobox-bench-cluster-")
    key = secrets.token_hex(16)
    etcd = nbetcd.EtcdCluster(3, tmpdir=os.path.join(tmp, "etcd"))
    nodes, front = [], None
    try:
        secret = secrets.token_hex(16)
        solo = nbtest.Stack("bench-solo", extra_conf={"api_key": key, "warm_pool": "2",
                                                      "log_level": "info"})
        solo.api_key = key
        nodes.append(solo)
        solo.start()
        # bench-a has fewer slots: placement sends every create made on it to bench-b
        for name, slots in (("bench-a", "16"), ("bench-b", "64")):
            st = nbtest.Stack(name, extra_conf={
                "node_name": name, "node_url": "{url}", "etcd_endpoints": etcd.endpoints_conf,
                "etcd_prefix": PREFIX, "api_key": key, "warm_pool": "2", "log_level": "info",
                "cluster_secret": secret, "max_sandboxes": slots,
                **({"docker_socket": d2.sock} if d2 and name == "bench-b" else {})})
            st.api_key = key
            nodes.append(st)
            st.start()
        front = Front(etcd.endpoints_conf, PREFIX, os.path.join(tmp, "front"))
        front.routes("bench-a", "bench-b")
        auth = {"Authorization": f"Bearer {key}"}
        sf, sd = requests.Session(), requests.Session()
        sf.headers.update(auth)
        sd.headers.update(auth)
        a = nodes[1]
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
        b = nodes[2]
        nbtest.wait_until(lambda: 'nanobox_cluster_node_free_slots{node="bench-b"}' in
                          sd.get(f"{a.url}/metrics").text, timeout=15,
                          what="bench-a to see bench-b")
        # the idle rate of etcd requests (renewals, registry rounds), over a spell
        calls0, t_idle = sum(etcd_calls(st.url, key) for st in nodes[1:]), time.monotonic()
        time.sleep(10)
        idle_rate = (sum(etcd_calls(st.url, key) for st in nodes[1:]) - calls0) / \
            (time.monotonic() - t_idle)
        calls0, t_cr = sum(etcd_calls(st.url, key) for st in nodes[1:]), time.monotonic()
        cr_p, cr_b, cr_s = [], [], []
        for _ in range(args.creates):
            # made on bench-b (placed there from bench-a, and straight), and alone
            for base, out, on in ((a.url, cr_p, b.url), (b.url, cr_b, b.url),
                                  (solo.url, cr_s, solo.url)):
                t0 = time.perf_counter()
                r = sd.post(f"{base}/sandbox", json={})
                out.append(ms(t0))
                assert r.status_code == 201, r.text
                new = r.json()["sandboxId"]
                assert sd.get(f"{on}/sandbox/{new}").status_code == 200, "not where expected"
                assert sd.delete(f"{on}/sandbox/{new}").status_code == 204
                time.sleep(0.05)  # let the warm pools refill: measure the path, not Docker
        calls1 = sum(etcd_calls(st.url, key) for st in nodes[1:])
        per_create = (calls1 - calls0 - idle_rate * (time.monotonic() - t_cr)) / \
            (2 * args.creates)
        # a registry of 1000 sandboxes: rows of a node that is not running
        ghost_tag = "0badc0ffee00"
        for i in range(1000):
            gid = f"{i:08x}-0000-8000-8000-{ghost_tag}"
            etcd.put(f"{PREFIX}sandboxes/default/{gid}", json.dumps({
                "id": gid, "node": "bench-ghost", "owner": "default", "state": "running",
                "image": "nanobox:latest", "created": int(time.time()),
                "expires": int(time.time()) + 3600, "memory": 268435456,
                "nano_cpus": 500000000, "pids": 128, "network": 0, "lifecycle": 0,
                "metadata": json.dumps({"i": str(i)})}))
        r = sd.get(f"{a.url}/sandbox")
        assert r.status_code == 200 and len(r.json()["sandboxes"]) >= 1001, r.text[:300]
        ls_c, ls_s = [], []
        for _ in range(max(20, args.n // 5)):
            for base, out in ((a.url, ls_c), (solo.url, ls_s)):
                t0 = time.perf_counter()
                r = sd.get(f"{base}/sandbox")
                out.append(ms(t0))
                assert r.status_code == 200, r.text[:300]
        etcd.delete_prefix(f"{PREFIX}sandboxes/default/")
        print(f"bench_cluster: 2 nodes + a front on one machine ({os.cpu_count()} cores, "
              f"{'a dockerd each' if d2 else 'one dockerd'}), n={args.n}, creates={args.creates}")
        line("exec `true`", ex_f, ex_d)
        line("GET /sandbox/{id}", get_f, get_d)
        print(f"{'create placed from bench-a on bench-b':<34} placed p50 {p50(cr_p):7.2f} ms p95 "
              f"{p95(cr_p):7.2f}   straight p50 {p50(cr_b):7.2f} ms p95 {p95(cr_b):7.2f}   "
              f"added {p50(cr_p) - p50(cr_b):+6.2f} ms   ratio {p50(cr_p) / p50(cr_b):5.2f}x")
        print(f"{'create on bench-b vs a single machine':<34} cluster p50 {p50(cr_b):7.2f} ms "
              f"p95 {p95(cr_b):7.2f}   single p50 {p50(cr_s):7.2f} ms p95 {p95(cr_s):7.2f}   "
              f"added {p50(cr_b) - p50(cr_s):+6.2f} ms (placed: "
              f"{p50(cr_p) - p50(cr_s):+6.2f} ms)")
        print(f"{'etcd requests per create':<34} {per_create:.2f} "
              f"(both nodes, less their idle rate of {idle_rate:.1f}/s)")
        print(f"{'GET /sandbox, 1000 in the registry':<34} cluster p50 {p50(ls_c):7.2f} ms "
              f"p95 {p95(ls_c):7.2f}   single machine (its own) p50 {p50(ls_s):7.2f} ms "
              f"p95 {p95(ls_s):7.2f}")
        map_of_100(etcd, tmp)
        if args.registry > 0:
            registry_of(etcd, a, key, args.registry)
        if args.throughput > 0:
            two = throughput(front.url, key, args.throughput)
            one = throughput(solo.url, key, args.throughput)
            print(f"{'creates/s, 32 clients':<34} two nodes via the front {two:6.1f}/s   "
                  f"single machine {one:6.1f}/s   ratio {two / one:5.2f}x "
                  f"({'a dockerd each' if d2 else 'one dockerd shared'})")
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
