#!/usr/bin/python3
"""bench_burst.py - concurrent creates, after a warm-up burst taught the
adaptive warm pool its size, against raw Docker in the same run.

Three measurements, each against its raw Docker peer (the same hardened
container, bench_core.raw_config, over the same unix socket):

  burst (default): N concurrent POST /sandbox, p50/p95, against N
      concurrent raw Docker API create+start. -n 50 is the issue's target
      (p95 <= 150 ms); -n 200 the large burst.
  --code: the same burst of nanobox-python:latest sandboxes, each followed
      by its first run_code of `1+1` (POST /sandbox/{id}/code): create+first
      run p50/p95, against raw create+start of the python image and a
      `python3 -c 'print(1+1)'` through the raw exec API. The code image has
      a pool of its own (warm_pool_code, up to warm_pool_code_max), each warm
      sandbox with its python kernel started; the warm-up teaches it.
  --cycles C --seconds S: C clients, each doing create / exec `true` /
      delete cycles for S seconds: create p50/p95, exec p50, delete p50 and
      cycles per second, against C clients doing raw create+start / exec
      (create + start + inspect) / remove cycles for S seconds.

Each run, in this order:
  1. the peer (raw Docker), its containers removed at once: measured while
     nanobox holds only its pool's floor, so that no refill competes with it
     and never more than N containers of this benchmark live at a time;
  2. warm-up: N (or C) concurrent creates (they find the pool short: its
     target grows by what they missed, up to its ceiling), then deleted;
  3. the pool refills (healthz: the pool of the image ready = target);
  4. the measured burst (or cycles) through nginx; deleted at once.

Prints p50 and p95 (the warm-up's too), how many creates the pool served,
failures by status (a failed request is counted, not retried) and the
ratios nanobox / Docker (lower is better for nanobox).

Against a running service (src/setup/up.sh): NANOBOX_URL (default
http://127.0.0.1:8080) and NANOBOX_API_KEY (default: api_key from
/etc/nanobox/nanobox.conf); its warm_pool_max (warm_pool_code_max for
--code) must be at least N for the burst to be served warm. Or --stack: a
test stack of its own (nbtest.Stack) with the pool's floor 1, its ceiling N
(C), warm_pool_parallel = --parallel, workers_max = --workers (default
2N, at least 8: every create of the burst has a worker at once; --workers
32 shows the product's default) and max_sandboxes = 2N + 8: a pool
keeps as many free slots as its target, so it cannot refill while the
measured sandboxes live (no more than about N containers at once).
Raw containers carry the label nanobox.bench and are removed, failure or
not; the sandboxes are deleted.

  sudo tests/bench/bench_burst.py [-n 10] [--stack [--parallel 2]]
  NANOBOX_BUILD=$PWD/build tests/bench/bench_burst.py -n 200 --stack
  NANOBOX_BUILD=$PWD/build tests/bench/bench_burst.py -n 50 --code --stack
  NANOBOX_BUILD=$PWD/build tests/bench/bench_burst.py --cycles 48 --seconds 60 --stack
"""
import argparse
import collections
import os
import statistics
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import requests

sys.dont_write_bytecode = True  # no __pycache__ in tests/bench from the import below
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_core import LABEL, conf_key, docker_api, docker_remove, ms, raw_config, raw_exec  # noqa: E402

TARGET_P95_MS = 150.0
BASE_IMAGE = "nanobox:latest"
CODE_IMAGE = "nanobox-python:latest"


def pct(values, q):
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def line(name, took):
    if not took:
        print(f"{name:<30} n=0")
        return
    print(f"{name:<30} n={len(took):<5} p50 {statistics.median(took):7.1f} ms   "
          f"p95 {pct(took, 95):7.1f} ms   max {max(took):7.1f} ms")


def ratio(name, ours, peer):
    if ours and peer:
        print(f"ratio nanobox/Docker, {name}: p50 {statistics.median(ours) / statistics.median(peer):.3f}x   "
              f"p95 {pct(ours, 95) / pct(peer, 95):.3f}x")


class Failures:
    """Failed calls by what failed (a status, an exception's class), thread-safe."""

    def __init__(self):
        self.count = collections.Counter()
        self.first = {}
        self.lock = threading.Lock()

    def add(self, what, detail):
        with self.lock:
            self.count[what] += 1
            self.first.setdefault(what, detail[:300])

    def report(self, name):
        for what, k in self.count.most_common():
            print(f"FAILED {name}: {k} x {what}, the first: {self.first[what]}")
        return sum(self.count.values())


def burst(n, fn, fails):
    """n calls of fn at once, each in its own thread: the ms of those that succeeded."""
    def one(_):
        try:
            return fn()
        except Exception as e:  # noqa: BLE001 - counted, the others go on
            fails.add(getattr(e, "what", type(e).__name__), str(e))
            return None
    with ThreadPoolExecutor(max_workers=n) as ex:
        return [t for t in ex.map(one, range(n)) if t is not None]


class Failed(Exception):
    def __init__(self, what, detail):
        super().__init__(detail)
        self.what = what


def check(r, status, what):
    if r.status_code != status:
        raise Failed(f"{what} {r.status_code}", r.text)
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=10, help="creates per burst (default 10)")
    ap.add_argument("--code", action="store_true",
                    help=f"{CODE_IMAGE} sandboxes, each followed by its first run_code of 1+1")
    ap.add_argument("--cycles", type=int, default=0, metavar="C",
                    help="C clients doing create/exec/delete cycles instead of a burst")
    ap.add_argument("--seconds", type=float, default=60.0, help="how long --cycles runs, each side (default 60)")
    ap.add_argument("--image", default=None, help="the raw containers' image (default: the sandboxes')")
    ap.add_argument("--stack", action="store_true", help="start a test stack of its own")
    ap.add_argument("--parallel", type=int, default=2, help="--stack's warm_pool_parallel")
    ap.add_argument("--workers", type=int, default=0,
                    help="--stack's workers_max (default: twice the clients, at least 8; 32 is the product's)")
    args = ap.parse_args()
    if args.code and args.cycles:
        ap.error("--code measures a burst: not with --cycles")
    args.clients = args.cycles or args.n
    args.sandbox_image = CODE_IMAGE if args.code else BASE_IMAGE
    args.image = args.image or args.sandbox_image
    stack = None
    if args.stack:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
        import nbtest
        k = args.clients
        pools = ({"warm_pool": "1", "warm_pool_max": "1", "warm_pool_code": "1", "warm_pool_code_max": str(k)}
                 if args.code else {"warm_pool": "1", "warm_pool_max": str(k)})
        stack = nbtest.Stack("bench-burst", extra_conf={
            **pools, "warm_pool_idle": "600", "warm_pool_parallel": str(args.parallel),
            "max_sandboxes": str(2 * k + 8), "workers_max": str(args.workers or max(8, 2 * k)),
            "log_level": "info"}).start()
        url, key = stack.url, stack.api_key
    else:
        url = os.environ.get("NANOBOX_URL", "http://127.0.0.1:8080").rstrip("/")
        key = os.environ.get("NANOBOX_API_KEY") or conf_key()
    try:
        return bench(args, url, key)
    finally:
        if stack is not None:
            stack.stop()


def bench(args, url, key):
    h = {"Authorization": f"Bearer {key}"}
    made, raw = set(), set()
    body = {"image": args.sandbox_image} if args.code else {}

    def create():
        """POST /sandbox: (ms, id)."""
        t0 = time.perf_counter()
        r = check(requests.post(url + "/sandbox", json=body, headers=h, timeout=330), 201, "create")
        took = ms(t0)
        sid = r.json()["sandboxId"]
        made.add(sid)
        return took, sid

    def first_run(sid):
        r = check(requests.post(f"{url}/sandbox/{sid}/code", json={"code": "1+1"}, headers=h, timeout=330),
                  200, "run_code")
        res = r.json()["results"]
        if not res or res[0]["data"].get("text/plain") != "2":
            raise Failed("run_code answer", r.text)

    def ours():
        t0 = time.perf_counter()
        _, sid = create()
        if args.code:
            first_run(sid)
        return ms(t0)

    def delete(sid):
        check(requests.delete(f"{url}/sandbox/{sid}", headers=h, timeout=330), 204, "delete")
        made.discard(sid)

    def raw_create():
        """Raw create+start: (ms, container id)."""
        t0 = time.perf_counter()
        c = docker_api("POST", f"/containers/create?name=nanobox-bench-{uuid.uuid4().hex[:12]}",
                       raw_config(args.image))
        raw.add(c["Id"])
        docker_api("POST", f"/containers/{c['Id']}/start")
        return ms(t0), c["Id"]

    def raw_true(cid, cmd):
        if raw_exec(cid, cmd) != 0:
            raise Failed("raw exec exit", f"{cmd} in {cid[:12]}")

    def peer():
        t0 = time.perf_counter()
        _, cid = raw_create()
        if args.code:
            raw_true(cid, ["python3", "-c", "print(1+1)"])
        return ms(t0)

    def raw_remove(cid):
        docker_remove(cid)
        raw.discard(cid)

    def pool():
        for p in requests.get(url + "/healthz", headers=h, timeout=30).json().get("pools", []):
            if p["layout"] == "nanobox" and "template" not in p and p["image"] == args.sandbox_image:
                return p
        return {"target": 0, "ready": 0, "hits": 0, "misses": 0}

    def each(fn, items):
        with ThreadPoolExecutor(max_workers=min(8, max(1, len(items)))) as ex:
            list(ex.map(fn, list(items)))

    def delete_made():
        each(lambda sid: requests.delete(f"{url}/sandbox/{sid}", headers=h, timeout=330), made)
        made.clear()

    def remove_raw():
        def rm(cid):
            try:
                raw_remove(cid)
            except RuntimeError as e:
                print(f"could not remove {cid[:12]}: {e}", file=sys.stderr)
        each(rm, raw)

    fails = {"nanobox": Failures(), "warm-up": Failures(), "Docker": Failures()}
    try:
        if args.cycles:
            cyc_peer = cycles(args, raw_create, lambda cid: raw_true(cid, ["/bin/sh", "-c", "true"]),
                              raw_remove, fails["Docker"])
        else:
            peer_took = burst(args.n, peer, fails["Docker"])
        remove_raw()
        warmup = burst(args.clients, ours, fails["warm-up"])
        delete_made()
        target = pool()["target"]
        t0 = time.monotonic()
        while pool()["ready"] < pool()["target"] and time.monotonic() - t0 < 300:
            time.sleep(0.1)
        fill_s = time.monotonic() - t0
        before = pool()
        if args.cycles:
            def exec_true(sid):
                r = check(requests.post(f"{url}/sandbox/{sid}/exec", json={"command": "true"}, headers=h,
                                        timeout=330), 200, "exec")
                if r.json()["exit_code"] != 0:
                    raise Failed("exec exit", r.text)
            cyc_ours = cycles(args, create, exec_true, delete, fails["nanobox"])
        else:
            ours_took = burst(args.n, ours, fails["nanobox"])
        after = pool()
        delete_made()
    finally:
        delete_made()
        remove_raw()
        # whatever else this benchmark labelled (an interrupted run)
        for c in docker_api("GET", f'/containers/json?all=1&filters={{"label":["{LABEL}"]}}'):
            if c["Names"] and c["Names"][0].startswith("/nanobox-bench-"):
                docker_remove(c['Id'])

    hits = after["hits"] - before["hits"]
    misses = after["misses"] - before["misses"]
    what = "creates + first run_code 1+1" if args.code else "creates"
    if args.cycles:
        print(f"{args.cycles} clients, create/exec true/delete cycles for {args.seconds:.0f} s each side")
    else:
        print(f"{args.n} concurrent {what} ({args.sandbox_image})")
    # the target can go on growing while the pool fills: warm_pool_reserve caps it by MemAvailable
    print(f"{args.sandbox_image} pool: target {target} after the warm-up; {before['ready']} ready "
          f"of target {before['target']} after {fill_s:.1f} s of refill")
    line("warm-up burst (nanobox)", warmup)
    if args.cycles:
        for part in ("create", "exec", "delete"):
            line(f"{part} (nanobox)", cyc_ours[part])
            line(f"{part} (raw Docker)", cyc_peer[part])
        print(f"cycles per second: nanobox {cyc_ours['rate']:.1f}   raw Docker {cyc_peer['rate']:.1f}   "
              f"ratio {cyc_ours['rate'] / max(cyc_peer['rate'], 1e-9):.2f}x (higher is better for nanobox)")
        print(f"served warm: {hits} of {hits + misses} creates")
        for part in ("create", "exec", "delete"):
            ratio(part, cyc_ours[part], cyc_peer[part])
    else:
        line("burst (nanobox)", ours_took)
        line("burst (raw Docker)", peer_took)
        print(f"served warm: {hits}/{args.n}")
        ratio(what, ours_took, peer_took)
    failed = sum(f.report(name) for name, f in fails.items())
    if args.cycles or args.code:
        return 1 if failed else 0
    ok = not failed and bool(ours_took) and pct(ours_took, 95) <= TARGET_P95_MS
    print(f"target p95 <= {TARGET_P95_MS:.0f} ms: {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


def cycles(args, make, run, remove, fails):
    """args.cycles clients, each making, running `true` in and removing one
    sandbox (or container) after another for args.seconds: the ms of each
    step and the cycles completed per second."""
    took = {"create": [], "exec": [], "delete": []}
    done = [0]
    lock = threading.Lock()
    deadline = time.monotonic() + args.seconds

    def client():
        while time.monotonic() < deadline:
            step, made = "create", None
            try:
                t = {}
                t0 = time.perf_counter()
                t["create"], made = make()
                step = "exec"
                t0 = time.perf_counter()
                run(made)
                t["exec"] = ms(t0)
                step = "delete"
                t0 = time.perf_counter()
                remove(made)
                t["delete"] = ms(t0)
                with lock:
                    for k, v in t.items():
                        took[k].append(v)
                    done[0] += 1
            except Exception as e:  # noqa: BLE001 - counted, the client goes on
                fails.add(f"{step}: {getattr(e, 'what', type(e).__name__)}", str(e))
                time.sleep(0.1)

    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=args.cycles) as ex:
        list(ex.map(lambda _: client(), range(args.cycles)))
    took["rate"] = done[0] / (time.monotonic() - t0)
    return took


if __name__ == "__main__":
    sys.exit(main())
