#!/usr/bin/python3
"""bench_pause.py - pause and resume through nanobox against Docker's own.

  POST /sandbox/{id}/pause and POST /sandbox/{id}/resume through nginx, on a
  sandbox with a busy process in it, against `docker pause` / `docker
  unpause` (the CLI) and the raw Docker API calls (POST
  /containers/{id}/pause, /unpause) on a container of the same hardened
  configuration (bench_core.raw_config) running the same process. The
  paths take turns, in a random order each round.

Prints p50 and p90 of each, the ratio of the medians (nanobox / peer, lower
is better for nanobox) and whether the issue's target (p50 <= 30 ms each)
is met. Needs a running service (src/setup/up.sh): NANOBOX_URL (default
http://127.0.0.1:8080) and NANOBOX_API_KEY (default: api_key from
/etc/nanobox/nanobox.conf). Its container carries the label nanobox.bench
and is removed at the end, failure or not; the sandbox is deleted.

  sudo tests/bench/bench_pause.py [-n 50]
"""
import argparse
import os
import random
import statistics
import subprocess
import sys
import time
import uuid

import requests

sys.dont_write_bytecode = True  # no __pycache__ in tests/bench from the import below
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_core import conf_key, docker_api, docker_remove, ms, raw_config  # noqa: E402

TARGET_MS = 30.0
# the same busy process in both: a python loop that writes through an open fd
BUSY = ("import time\nf = open('/workspace/n', 'w')\ni = 0\nwhile True:\n"
        "    i += 1\n    f.seek(0)\n    f.write(str(i))\n    f.flush()\n    time.sleep(0.01)\n")


def p(values, q):
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def line(name, ours, peer, peer_name):
    mo, mp = statistics.median(ours), statistics.median(peer)
    print(f"{name:<10} nanobox p50 {mo:6.1f} ms p90 {p(ours, 90):6.1f}   "
          f"{peer_name:<18} p50 {mp:6.1f} ms p90 {p(peer, 90):6.1f}   ratio {mo / mp:5.2f}x")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=50, help="rounds (default 50)")
    ap.add_argument("--image", default="nanobox:latest")
    args = ap.parse_args()
    url = os.environ.get("NANOBOX_URL", "http://127.0.0.1:8080").rstrip("/")
    key = os.environ.get("NANOBOX_API_KEY") or conf_key()
    s = requests.Session()
    s.headers["Authorization"] = f"Bearer {key}"
    sid = cid = None

    def api(op):
        t0 = time.perf_counter()
        r = s.post(f"{url}/sandbox/{sid}/{op}")
        took = ms(t0)
        assert r.status_code == 200, r.text
        return took

    def cli(op):
        t0 = time.perf_counter()
        r = subprocess.run(["docker", op, cid], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True)
        took = ms(t0)
        if r.returncode != 0:
            raise RuntimeError(f"docker {op}: exit {r.returncode}: {r.stderr.strip()}")
        return took

    def raw(op):
        t0 = time.perf_counter()
        docker_api("POST", f"/containers/{cid}/{op}")
        return ms(t0)

    try:
        r = s.post(url + "/sandbox", json={"ttl": 3600})
        assert r.status_code == 201, r.text
        sid = r.json()["sandboxId"]
        r = s.post(f"{url}/sandbox/{sid}/exec",
                   json={"command": f"setsid nohup python3 -c \"{BUSY}\" >/dev/null 2>&1 </dev/null &"})
        assert r.status_code == 200, r.text
        cfg = raw_config(args.image)
        cfg["Cmd"] = ["python3", "-c", BUSY]
        cid = docker_api("POST", f"/containers/create?name=nbbench-{uuid.uuid4()}", cfg)["Id"]
        docker_api("POST", f"/containers/{cid}/start")
        # warm every path once
        for f in (api, cli, raw):
            f("pause")
            f("unpause" if f is not api else "resume")

        times = {k: [] for k in ("api pause", "api resume", "cli pause", "cli unpause",
                                 "raw pause", "raw unpause")}
        for _ in range(args.n):
            paths = [("api", api, "resume"), ("cli", cli, "unpause"), ("raw", raw, "unpause")]
            random.shuffle(paths)
            for name, f, thaw in paths:
                times[f"{name} pause"].append(f("pause"))
                time.sleep(0.02)
                times[f"{name} {thaw}"].append(f(thaw))

        load = os.getloadavg()
        print(f"nanobox pause/resume benchmark: {args.n} rounds, "
              f"{time.strftime('%Y-%m-%d %H:%M')}, load average {load[0]:.1f} {load[1]:.1f}")
        line("pause", times["api pause"], times["cli pause"], "docker pause CLI")
        line("", times["api pause"], times["raw pause"], "raw API pause")
        line("resume", times["api resume"], times["cli unpause"], "docker unpause CLI")
        line("", times["api resume"], times["raw unpause"], "raw API unpause")
        for k in ("api pause", "api resume"):
            p50 = statistics.median(times[k])
            print(f"target: {k.split()[1]} p50 {p50:.1f} ms <= {TARGET_MS:.0f} ms: "
                  f"{'met' if p50 <= TARGET_MS else 'NOT met'}")
    finally:
        if sid is not None:
            s.delete(f"{url}/sandbox/{sid}")
        if cid is not None:
            try:
                docker_remove(cid)
            except Exception as e:  # noqa: BLE001 - report and go on
                print(f"cleanup of {cid[:12]} failed: {e}", file=sys.stderr)


if __name__ == "__main__":
    main()
