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

Prints medians and the ratio nanobox / peer. Needs a running service
(src/setup/up.sh) with the nanobox-python image allowed: NANOBOX_URL
(default http://127.0.0.1:8080) and NANOBOX_API_KEY (default: api_key from
/etc/nanobox/nanobox.conf). Sends traffic only to loopback.

  sudo tests/bench/bench_code.py [-n 50]
"""
import argparse
import os
import statistics
import sys
import time

import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_core import conf_key, ms, report  # noqa: E402  (one set of helpers)

IMAGE = "nanobox-python:latest"

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
    args = ap.parse_args()
    url = os.environ.get("NANOBOX_URL", "http://127.0.0.1:8080").rstrip("/")
    key = os.environ.get("NANOBOX_API_KEY") or conf_key()
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
        r = s.put(f"{url}/sandbox/{sid}/files?path=/tmp/krtt.py", data=KERNEL_RTT.encode())
        assert r.status_code in (200, 201), r.text
        r = s.post(f"{url}/sandbox/{sid}/exec",
                   json={"command": f"python3 /tmp/krtt.py {args.n} 2>/dev/null", "timeout": 120})
        assert r.status_code == 200 and r.json()["exit_code"] == 0, r.text
        kernel = [float(x) for x in r.json()["stdout"].split()]
        execs = []
        for _ in range(args.n):
            t0 = time.perf_counter()
            r = s.post(f"{url}/sandbox/{sid}/exec", json={"command": "python3 -c 'print(2)'"})
            assert r.status_code == 200 and r.json()["stdout"] == "2\n", r.text
            execs.append(ms(t0))
        print(f"(a) run_code 1+1, warm context: p50 {statistics.median(ours):.1f} ms, "
              f"p90 {sorted(ours)[int(len(ours) * 0.9)]:.1f} ms")
        report("(a) run_code 1+1 vs the kernel's own round trip", ours, kernel, "kernel in sandbox")
        report("(a) run_code 1+1 vs exec python3 -c", ours, execs, "exec python3 -c")

        # (c) a 1000x1000 PNG
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
    finally:
        for sid in made:
            s.delete(f"{url}/sandbox/{sid}")


if __name__ == "__main__":
    main()
