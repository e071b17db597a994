#!/usr/bin/python3
"""bench_code.py - the code interpreter against its own kernel, same run.

  (a) run_code("1+1") on a warm context through nginx (POST
      /sandbox/{id}/code), against the Jupyter kernel's own round trip
      measured inside the same sandbox (a jupyter_client script that starts
      a kernel of its own and times execute_request -> idle), and against
      POST /sandbox/{id}/exec of `python3 -c 'print(2)'`;
  (b) the first run_code on a sandbox of the code image freshly taken from
      the warm pool (create + first 1+1), against a later run_code;
  (c) a 1000x1000 matplotlib PNG returned by run_code, against the time
      the kernel itself takes to draw and encode the same figure.

Prints medians and the ratio nanobox / peer, and whether the targets of
(a) are met: p50 <= 10 ms and <= 1.5x the kernel's own round trip, both
for a lean client (a bare keep-alive http.client connection, as curl, Go
or Node pay; python-requests adds ~1 ms of its own per call, shown too).
Against a running service (src/setup/up.sh) with the nanobox-python image
allowed: NANOBOX_URL (default http://127.0.0.1:8080) and NANOBOX_API_KEY
(default: api_key from /etc/nanobox/nanobox.conf); or --stack: a test
stack of its own (nbtest.Stack from NANOBOX_BUILD, default ./build,
warm_pool_code = 1), stopped at the end. Sends traffic only to loopback.

  sudo tests/bench/bench_code.py [-n 50] [--sections a,b,c] [--stack]
"""
import argparse
import http.client
import json
import os
import statistics
import sys
import time
import urllib.parse

import requests

sys.dont_write_bytecode = True  # no __pycache__ in tests/bench from the import below
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_core import container_of, cpu_stat, cpu_usage, ms, report, service  # noqa: E402

IMAGE = "nanobox-python:latest"
TARGET_P50_MS = 10.0
TARGET_RATIO = 1.5

# The kernel's own round trip, inside the sandbox: the same jupyter_client
# Session framing the bridge uses, on sockets of its own, no nanobox between.
KERNEL_RTT = r"""
import os, statistics, sys, tempfile, time, zmq
from jupyter_client import KernelManager
d = tempfile.mkdtemp(dir="/tmp")
km = KernelManager(kernel_name="python3", transport="ipc", ip=d + "/k", connection_file=d + "/k.json")
km.start_kernel(env=dict(os.environ, PYDEVD_DISABLE_FILE_VALIDATION="1"),
                extra_arguments=["--HistoryManager.enabled=False"])
z = zmq.Context.instance()
sh = z.socket(zmq.DEALER); sh.connect(km._make_url("shell"))
io = z.socket(zmq.SUB); io.setsockopt(zmq.SUBSCRIBE, b""); io.connect(km._make_url("iopub"))
s = km.session
p = zmq.Poller(); p.register(sh, zmq.POLLIN); p.register(io, zmq.POLLIN)
def run(code):
    m = s.msg("execute_request", {"code": code, "silent": False, "store_history": True,
              "user_expressions": {}, "allow_stdin": False, "stop_on_error": True})
    s.send(sh, m); mid = m["header"]["msg_id"]; idle = reply = False
    while not (idle and reply):
        for sock, _ in p.poll(10000):
            _, msg = s.recv(sock, mode=zmq.NOBLOCK)
            if msg is None or msg["parent_header"].get("msg_id") != mid:
                continue
            if sock is sh: reply = True
            elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle": idle = True
t = time.time() + 60
while time.time() < t:
    s.send(sh, "kernel_info_request", {})
    if p.poll(200): break
time.sleep(0.5)
for _ in range(10): run("1+1")
ts = []
for _ in range(int(sys.argv[1])):
    t0 = time.perf_counter(); run("1+1"); ts.append((time.perf_counter() - t0) * 1000)
print(" ".join("%.3f" % x for x in ts), flush=True)
km.shutdown_kernel(now=True)
os._exit(0)
"""

FIGURE = (
    "import matplotlib\nimport matplotlib.pyplot as plt, numpy as np, io, time\n"
    "np.random.seed(1)\n"
    "def fig():\n"
    "    f = plt.figure(figsize=(10, 10), dpi=100)\n"
    "    plt.plot(np.cumsum(np.random.randn(2000)))\n"
    "    return f\n"
)
DRAW_SHOWN = "fig(); plt.show()"
DRAW_ALONE = (
    "t0 = time.perf_counter(); f = fig(); b = io.BytesIO(); "
    "f.savefig(b, format='png', bbox_inches='tight'); plt.close(f); "
    "print('%.3f' % ((time.perf_counter() - t0) * 1000))"
)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=50, help="samples per measurement (default 50)")
    ap.add_argument("--fresh", type=int, default=5, help="warm-pool sandboxes to take for (b) (default 5)")
    ap.add_argument("--sections", default="a,b,c", help="which of a,b,c to run (default all)")
    ap.add_argument("--stack", action="store_true",
                    help="start a test stack of its own (nbtest.Stack, warm_pool_code = 1)")
    args = ap.parse_args()
    with service(args.stack, "bench-code", {"warm_pool_code": "1", "workers_min": "4"}) as (url, key, _):
        print(f"nanobox code benchmark, {time.strftime('%Y-%m-%d %H:%M')}: {os.cpu_count()} CPUs, "
              f"load average {os.getloadavg()[0]:.2f} at start; {url}")
        met = bench(args, url, key)
        print(f"load average {os.getloadavg()[0]:.2f} at the end")
    for text, ok in met:
        print(f"  {'met    ' if ok else 'NOT MET'}  {text}")


def lean_code(conn, key, sid, src):
    """POST /sandbox/{id}/code over a bare keep-alive http.client connection:
    what a lean client (curl, Go, Node) pays, without python-requests' own
    ~1 ms of Python per call."""
    conn.request("POST", f"/sandbox/{sid}/code", body=json.dumps({"code": src}).encode(),
                 headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    r = conn.getresponse()
    body = r.read()
    if r.status != 200:
        raise SystemExit(f"code: {r.status} {body[:300]!r}")
    return json.loads(body)


def bench(args, url, key):
    sections = set(args.sections.split(","))
    met = []
    s = requests.Session()
    s.headers["Authorization"] = f"Bearer {key}"
    made = []

    def create():
        r = s.post(url + "/sandbox", json={"image": IMAGE, "ttl": 900})
        assert r.status_code == 201, r.text
        made.append(r.json()["sandboxId"])
        return made[-1]

    def code(sid, src, **kw):
        r = s.post(f"{url}/sandbox/{sid}/code", json={"code": src, **kw})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["error"] is None, body["error"]
        return body

    try:
        sid = create()
        code(sid, "1+1")
        # (a) a warm context
        for _ in range(10):
            code(sid, "1+1")
        ours = []
        for _ in range(args.n):
            t0 = time.perf_counter()
            assert code(sid, "1+1")["results"][0]["data"]["text/plain"] == "2"
            ours.append(ms(t0))
        u = urllib.parse.urlsplit(url)
        conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=60)
        for _ in range(3):
            lean_code(conn, key, sid, "1+1")
        cid = container_of(sid)
        lean = []
        cpu0, thr0 = cpu_usage(cid), cpu_stat(cid)
        for _ in range(args.n):
            t0 = time.perf_counter()
            assert lean_code(conn, key, sid, "1+1")["results"][0]["data"]["text/plain"] == "2"
            lean.append(ms(t0))
        cpu1, thr1 = cpu_usage(cid), cpu_stat(cid)
        conn.close()
        r = s.put(f"{url}/sandbox/{sid}/files?path=/tmp/krtt.py", data=KERNEL_RTT.encode())
        assert r.status_code in (200, 201), r.text
        r = s.post(f"{url}/sandbox/{sid}/exec",
                   json={"command": f"python3 /tmp/krtt.py {args.n} 2>/dev/null", "timeout": 120})
        assert r.status_code == 200 and r.json()["exit_code"] == 0, r.text
        kernel = [float(x) for x in r.json()["stdout"].split()]
        thr2 = cpu_stat(cid)
        execs = []
        for _ in range(args.n):
            t0 = time.perf_counter()
            r = s.post(f"{url}/sandbox/{sid}/exec", json={"command": "python3 -c 'print(2)'"})
            assert r.status_code == 200 and r.json()["stdout"] == "2\n", r.text
            execs.append(ms(t0))
        for name, t in (("python-requests", ours), ("a lean client (http.client)", lean)):
            print(f"(a) run_code 1+1, warm context, {name}: p50 {statistics.median(t):.1f} ms, "
                  f"p90 {sorted(t)[int(len(t) * 0.9)]:.1f} ms")
        print(f"    the kernel's own round trip in the sandbox: p50 {statistics.median(kernel):.1f} ms, "
              f"p90 {sorted(kernel)[int(len(kernel) * 0.9)]:.1f} ms")
        if cpu0 is not None and cpu1 is not None:
            print(f"    CPU time charged to the sandbox's cgroup per run_code (lean): {(cpu1 - cpu0) / args.n / 1e6:.2f} ms")
        if thr0 and thr1 and thr2:
            print(f"    the sandbox's CPU quota (CFS) throttled it {thr1[0] - thr0[0]} times "
                  f"({(thr1[1] - thr0[1]) / 1e6:.0f} ms) during the lean run_codes, {thr2[0] - thr1[0]} times "
                  f"({(thr2[1] - thr1[1]) / 1e6:.0f} ms) during the kernel's own (its start included)")
        ratio = report("(a) run_code 1+1 (lean) vs the kernel's own", lean, kernel, "kernel in sandbox")
        report("    run_code 1+1 (requests) vs the kernel's own", ours, kernel, "kernel in sandbox")
        report("(a) run_code 1+1 (lean) vs exec python3 -c", lean, execs, "exec python3 -c")
        met.append((f"run_code 1+1 p50 <= {TARGET_P50_MS:.0f} ms (lean client: "
                     f"{statistics.median(lean):.1f} ms)", statistics.median(lean) <= TARGET_P50_MS))
        met.append((f"run_code 1+1 p50 <= {TARGET_RATIO}x the kernel's own round trip ({ratio:.2f}x)",
                    ratio <= TARGET_RATIO))

        # (c) a 1000x1000 PNG
        if "c" in sections:
            code(sid, FIGURE)
            code(sid, DRAW_SHOWN)
            shown, alone = [], []
            for _ in range(max(5, args.n // 5)):
                t0 = time.perf_counter()
                body = code(sid, DRAW_SHOWN)
                shown.append(ms(t0))
                assert any("image/png" in x["data"] for x in body["results"]), body
                alone.append(float(code(sid, DRAW_ALONE)["stdout"]))
            report("(c) 1000x1000 PNG returned vs drawn in kernel", shown, alone, "kernel draw+encode")
        s.delete(f"{url}/sandbox/{sid}")
        made.remove(sid)

        # (b) first run_code on a sandbox taken from the warm pool
        if "b" in sections:
            bench_fresh(args, s, url, create, code, made, ours)
    finally:
        for sid in made:
            s.delete(f"{url}/sandbox/{sid}")
    return met


def bench_fresh(args, s, url, create, code, made, ours):
    """(b): the first run_code on each of --fresh sandboxes just handed out by the pool."""
    def warm():
        return s.get(url + "/healthz").json()["warm"]

    def pool_full():
        """The pool's size once it stops growing (both pools: plain and code)."""
        seen, since, deadline = warm(), time.time(), time.time() + 180
        while time.time() - since < 5 and time.time() < deadline:
            time.sleep(0.5)
            now = warm()
            if now != seen:
                seen, since = now, time.time()
        return seen

    first = []
    full = pool_full()
    for _ in range(args.fresh):
        deadline = time.time() + 180
        while warm() < full and time.time() < deadline:
            time.sleep(0.5)
        sid = create()
        t0 = time.perf_counter()
        code(sid, "1+1")
        first.append(ms(t0))
        assert warm() < full, "the sandbox did not come from the warm pool (warm_pool_code = 0?)"
        s.delete(f"{url}/sandbox/{sid}")
        made.remove(sid)
    report("(b) first run_code on a warm sandbox vs later ones", first, ours, "run_code, warm context")


if __name__ == "__main__":
    main()
