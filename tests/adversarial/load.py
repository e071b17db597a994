#!/usr/bin/env python3
"""
load.py - mixed load against a live nanobox, then a leak check from the host.

N sandboxes are kept alive while C client threads run, for S seconds, a mix
of: exec (the most common), file write + read back (byte-exact), port open +
close, and the churn of a private sandbox (create, exec, open a port,
destroy it with the port still open). Every answer is counted by operation
and status. At the end every sandbox the run made is deleted and the host is
checked, not nanobox's view of itself:

- `docker ps -a` with the stack's instance label: no container left;
- /proc: no nanobox-fwd process with a socket in the stack's ports_dir;
- ports_dir: no socket file left; every host port handed out is free again;
- GET /healthz: "sandboxes" and "warm" back to what they were before.

Failures: any 5xx other than `503 capacity` on a create (the documented
answer of a full table), any transport error, any answer outside the
operation's expected set, any leak. p50/p99 exec latency is printed.

    sudo tests/adversarial/load.py                      # own stack, 120 s
    sudo tests/adversarial/load.py --seconds 30 --sandboxes 20 --clients 16
    tests/adversarial/load.py --url http://127.0.0.1:8080 --key KEY \\
        --instance default --ports-dir /run/nanobox/ports   # a running service

With no --url it starts its own stack (tests/integration/nbtest.Stack:
nanobox-fcgi from $NANOBOX_BUILD, default <repo>/build, plus nginx) with
workers_max and max_sandboxes sized for the run, and stops it at the end.
Exit status: 0 when clean, 1 otherwise. test_faults.py runs it briefly.
"""

import argparse
import collections
import json
import os
import random
import sys
import threading
import time
import urllib.parse
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
import nbtest  # noqa: E402

# A create may meet a full table: that is the documented answer, not a fault.
ALLOWED_5XX = {("create", 503, "capacity")}

# What each operation may answer; anything else is counted as unexpected.
EXPECTED = {
    "exec": {200},
    "file_put": {201},
    "file_get": {200},
    "port_open": {201, 429},          # 429: this sandbox has max_ports open
    "port_close": {204},
    "create": {201, 503},             # 503 only with code "capacity" (checked)
    "churn_exec": {200},
    "churn_port": {201},
    "delete": {204},
    "healthz": {200},
}


# ------------------------------------------------------------ host checks

def healthz(session, url):
    r = session.get(url + "/healthz", timeout=30)
    r.raise_for_status()
    return r.json()


def host_view(instance=None, ports_dir=None, hostports=()):
    """What the host shows of a stack, whatever nanobox thinks: containers
    carrying its instance label (any state), its forwarder processes, the
    files in its ports_dir, and which of hostports still have a listener."""
    view = {}
    if instance:
        view["containers"] = nbtest.docker_ps(instance, all=True)
    if ports_dir:
        view["forwarders"] = nbtest.fwd_pids(ports_dir)
        try:
            view["port_sockets"] = sorted(os.listdir(ports_dir))
        except OSError:
            view["port_sockets"] = []
    view["listening_hostports"] = sorted(p for p in hostports if nbtest.tcp_listener_inodes(p))
    return view


def leaks(view, allowed_containers=()):
    """The parts of a host_view that should be empty, minus what is allowed."""
    out = {}
    extra = sorted(set(view.get("containers", ())) - set(allowed_containers))
    if extra:
        out["containers"] = extra
    for k in ("forwarders", "port_sockets", "listening_hostports"):
        if view.get(k):
            out[k] = view[k]
    return out


# --------------------------------------------------------------- the load

class Load:
    def __init__(self, url, key, sandboxes, clients, seconds, file_max=65536, ttl=1800,
                 log=print):
        self.url = url.rstrip("/")
        self.key = key
        self.n_sandboxes = sandboxes
        self.n_clients = clients
        self.seconds = seconds
        self.file_max = file_max
        self.ttl = ttl
        self.log = log
        self.lock = threading.Lock()
        self.counts = collections.Counter()      # (op, status or exception name)
        self.unexpected = []                     # (op, status, text)
        self.exec_ms = []
        self.alive = []                          # the long-lived sandboxes
        self.made = set()                        # every sandbox id this run created
        self.hostports = set()                   # every host port handed out
        self.local = threading.local()

    # -- plumbing
    def session(self):
        s = getattr(self.local, "s", None)
        if s is None:
            s = self.local.s = requests.Session()
            s.headers["Authorization"] = f"Bearer {self.key}"
        return s

    def call(self, op, method, path, timeout=120, **kw):
        """One request; counts it; returns the response or None (transport error)."""
        try:
            r = self.session().request(method, self.url + path, timeout=timeout, **kw)
        except requests.RequestException as e:
            with self.lock:
                self.counts[(op, type(e).__name__)] += 1
                self.unexpected.append((op, type(e).__name__, str(e)[:200]))
            return None
        code = ""
        if r.status_code >= 400:
            try:
                code = r.json().get("code", "")
            except ValueError:
                code = "<not json>"
        ok = r.status_code in EXPECTED[op]
        if r.status_code >= 500:
            ok = (op, r.status_code, code) in ALLOWED_5XX
        with self.lock:
            self.counts[(op, r.status_code)] += 1
            if not ok:
                self.unexpected.append((op, r.status_code, r.text[:200]))
        return r

    def create(self, op="create", **fields):
        body = {"ttl": self.ttl, "metadata": {"load": "1"}, **fields}
        r = self.call(op, "POST", "/sandbox", json=body)
        if r is None or r.status_code != 201:
            return None
        sid = r.json()["sandboxId"]
        with self.lock:
            self.made.add(sid)
        return sid

    def delete(self, sid):
        r = self.call("delete", "DELETE", f"/sandbox/{sid}")
        if r is not None and r.status_code == 204:
            with self.lock:
                self.made.discard(sid)

    # -- operations
    def op_exec(self, rnd, sid):
        n = rnd.randrange(1 << 30)
        t0 = time.monotonic()
        r = self.call("exec", "POST", f"/sandbox/{sid}/exec", json={"command": f"echo {n}", "timeout": 30})
        ms = (time.monotonic() - t0) * 1000
        if r is not None and r.status_code == 200:
            with self.lock:
                self.exec_ms.append(ms)
            if r.json().get("stdout") != f"{n}\n":
                with self.lock:
                    self.unexpected.append(("exec", 200, f"wrong output {r.text[:200]}"))

    def op_file(self, rnd, sid, cid):
        data = rnd.randbytes(rnd.randrange(1, self.file_max))
        q = urllib.parse.urlencode({"path": f"/workspace/load-{cid}.bin"})
        r = self.call("file_put", "PUT", f"/sandbox/{sid}/files?{q}", data=data,
                      headers={"Content-Type": "application/octet-stream"})
        if r is None or r.status_code != 201:
            return
        r = self.call("file_get", "GET", f"/sandbox/{sid}/files?{q}")
        if r is not None and r.status_code == 200 and r.content != data:
            with self.lock:
                self.unexpected.append(("file_get", 200, f"{len(r.content)} bytes back, "
                                                          f"{len(data)} written, or different"))

    def op_port(self, rnd, sid, cid):
        # a sandboxport of its own per client: no 409 port_open between clients
        port = 10000 + cid
        r = self.call("port_open", "POST", f"/sandbox/{sid}/ephemeralport",
                      json={"sandboxport": port, "duration": 600})
        if r is None or r.status_code != 201:
            return
        with self.lock:
            self.hostports.add(r.json()["hostport"])
        self.call("port_close", "DELETE", f"/sandbox/{sid}/ports/{port}")

    def op_churn(self, rnd, cid):
        sid = self.create()
        if sid is None:
            return
        self.call("churn_exec", "POST", f"/sandbox/{sid}/exec", json={"command": "true"})
        r = self.call("churn_port", "POST", f"/sandbox/{sid}/ephemeralport",
                      json={"sandboxport": 8000, "duration": 600})
        if r is not None and r.status_code == 201:
            with self.lock:
                self.hostports.add(r.json()["hostport"])
        self.delete(sid)          # with its port open: the forwarder must go too

    def client(self, cid, deadline):
        rnd = random.Random(cid * 7919 + int(time.time()))
        while time.monotonic() < deadline:
            sid = rnd.choice(self.alive)
            x = rnd.random()
            if x < 0.55:
                self.op_exec(rnd, sid)
            elif x < 0.75:
                self.op_file(rnd, sid, cid)
            elif x < 0.90:
                self.op_port(rnd, sid, cid)
            elif x < 0.98:
                self.op_churn(rnd, cid)
            else:
                self.call("healthz", "GET", "/healthz")

    # -- the run
    def run(self):
        h0 = healthz(self.session(), self.url)
        t0 = time.monotonic()
        # the long-lived sandboxes, made a few at a time
        with_threads(min(8, self.n_sandboxes), self.n_sandboxes, lambda i: self.create())
        self.alive = sorted(self.made)
        self.log(f"load: {len(self.alive)} sandboxes alive in {time.monotonic() - t0:.1f} s; "
                 f"{self.n_clients} clients for {self.seconds} s")
        if not self.alive:
            raise SystemExit("load: no sandbox could be created")
        deadline = time.monotonic() + self.seconds
        threads = [threading.Thread(target=self.client, args=(c, deadline), daemon=True)
                   for c in range(self.n_clients)]
        t1 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(self.seconds + 600)
        wall = time.monotonic() - t1
        stuck = sum(t.is_alive() for t in threads)
        # tear down what the run made
        with_threads(8, len(self.made), lambda i, ids=sorted(self.made): self.delete(ids[i]))
        return self.report(h0, wall, stuck)

    def report(self, h0, wall, stuck):
        total = sum(self.counts.values())
        ms = sorted(self.exec_ms)
        lat = {"p50": pct(ms, 50), "p99": pct(ms, 99), "max": ms[-1] if ms else None}
        by_op = collections.defaultdict(dict)
        for (op, st), n in sorted(self.counts.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
            by_op[op][str(st)] = n
        return {
            "requests": total,
            "seconds": round(wall, 1),
            "rate": round(total / wall, 1) if wall else 0,
            "statuses": dict(by_op),
            "exec_ms": {k: (round(v, 1) if v is not None else None) for k, v in lat.items()},
            "execs": len(ms),
            "unexpected": self.unexpected[:50],
            "unexpected_count": len(self.unexpected),
            "stuck_clients": stuck,
            "healthz_before": h0,
            "hostports": sorted(self.hostports),
            "left_undeleted": sorted(self.made),
        }


def pct(sorted_values, p):
    if not sorted_values:
        return None
    k = min(len(sorted_values) - 1, max(0, round(p / 100 * len(sorted_values) + 0.5) - 1))
    return sorted_values[k]


def with_threads(n, count, fn):
    """fn(0..count-1) on n threads."""
    it = iter(range(count))
    lock = threading.Lock()

    def loop():
        while True:
            with lock:
                i = next(it, None)
            if i is None:
                return
            fn(i)

    ts = [threading.Thread(target=loop, daemon=True) for _ in range(max(1, min(n, count)))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def settle_and_check(load, result, instance=None, ports_dir=None, timeout=60):
    """After the run: wait until the host shows nothing left of it (and the
    table is back to where it was); return the leaks still there."""
    session = load.session()
    h0 = result["healthz_before"]
    before = set(nbtest.docker_ps(instance)) if instance and h0["sandboxes"] else set()
    last = {}
    end = time.monotonic() + timeout
    while True:
        view = host_view(instance, ports_dir, result["hostports"])
        h = healthz(session, load.url)
        last = leaks(view, allowed_containers=before)
        if h["sandboxes"] != h0["sandboxes"] or h.get("warm") != h0.get("warm"):
            last["healthz"] = {"before": {k: h0.get(k) for k in ("sandboxes", "warm")},
                               "after": {k: h.get(k) for k in ("sandboxes", "warm")}}
        if result["left_undeleted"]:
            last["undeleted"] = result["left_undeleted"]
        if not last or time.monotonic() > end:
            return last
        time.sleep(0.5)


def run_load(url, key, instance=None, ports_dir=None, sandboxes=50, clients=32, seconds=120,
             log=print):
    load = Load(url, key, sandboxes, clients, seconds, log=log)
    result = load.run()
    result["leaks"] = settle_and_check(load, result, instance, ports_dir)
    return result


def start_stack(sandboxes, clients):
    conf = {
        "workers_max": str(max(8, clients + 4)),
        "workers_min": "4",
        "max_sandboxes": str(sandboxes + clients + 8),
        "warm_pool": "0",
    }
    st = nbtest.Stack("load", conf)
    try:
        st.start()
    except BaseException:
        st.stop()
        raise
    return st


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, default=120)
    ap.add_argument("--sandboxes", type=int, default=50, help="sandboxes kept alive (50)")
    ap.add_argument("--clients", type=int, default=32, help="concurrent clients (32)")
    ap.add_argument("--url", help="a running service (default: start a stack)")
    ap.add_argument("--key", help="its API key")
    ap.add_argument("--instance", help="its instance label, for the container leak check")
    ap.add_argument("--ports-dir", help="its ports_dir, for the forwarder leak check")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    a = ap.parse_args()

    st = None
    if a.url:
        url, key, instance, ports_dir = a.url, a.key or "", a.instance, a.ports_dir
    else:
        st = start_stack(a.sandboxes, a.clients)
        url, key, instance, ports_dir = st.url, st.api_key, st.instance, st.ports_dir
        print(f"load: stack {st.dir} (instance {instance})")
    try:
        res = run_load(url, key, instance, ports_dir, a.sandboxes, a.clients, a.seconds)
    finally:
        if st is not None:
            st.stop()
            st.remove_tmp()
    if a.json:
        print(json.dumps(res, indent=1))
    else:
        print(f"requests {res['requests']} in {res['seconds']} s ({res['rate']}/s)")
        for op, sts in res["statuses"].items():
            print(f"  {op:12} " + "  ".join(f"{k}: {v}" for k, v in sts.items()))
        e = res["exec_ms"]
        print(f"exec latency over {res['execs']} execs: p50 {e['p50']} ms, p99 {e['p99']} ms, "
              f"max {e['max']} ms")
        print(f"unexpected answers: {res['unexpected_count']}")
        for u in res["unexpected"][:20]:
            print(f"  {u}")
        print(f"leaks: {res['leaks'] or 'none'}")
    bad = res["unexpected_count"] or res["leaks"] or res["stuck_clients"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
