#!/usr/bin/python3
"""bench_fork.py - fork through nanobox against Docker's own commit + run.

  POST /sandbox/{id}/fork {"count": 1} of a sandbox with 100 MiB in
  /workspace (answered once the fork runs with the 100 MiB in place),
  against `docker commit` of a container of the same hardened configuration
  (bench_core.raw_config) holding the same 100 MiB, then `docker run -d` of
  the committed image (the CLI, as a user would). The peer keeps its
  /workspace in the container's writable layer (no tmpfs there), or
  `docker commit` would not carry the files at all. The two take turns, in
  a random order each round. Also: a fork of count 4 (the time per fork).

Prints p50 (and p90) of each and the ratio of the medians (nanobox / peer,
lower is better for nanobox). Needs a running service (src/setup/up.sh):
NANOBOX_URL (default http://127.0.0.1:8080) and NANOBOX_API_KEY (default:
api_key from /etc/nanobox/nanobox.conf); or --stack: a test stack of its
own. Run it under the bench lock:

  flock /tmp/nanobox-bench.lock tests/bench/bench_fork.py --stack [-n 7]

Its containers and images carry the label nanobox.bench or the tag
nbbench-fork and are removed at the end, failure or not.
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
from bench_core import LABEL, docker_api, ms, raw_config, service  # noqa: E402

FILL = "head -c 104857600 /dev/urandom > /workspace/big.bin && echo x > /tmp/small"


def p(values, q):
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def line(name, ours, peer, peer_name):
    mo, mp = statistics.median(ours), statistics.median(peer)
    print(f"{name:<22} nanobox p50 {mo:7.1f} ms p90 {p(ours, 90):7.1f}   "
          f"{peer_name:<20} p50 {mp:7.1f} ms p90 {p(peer, 90):7.1f}   ratio {mo / mp:5.2f}x")
    return mo / mp


def sh(*cmd):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True).stdout.strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=7, help="rounds (default 7)")
    ap.add_argument("--image", default="nanobox:latest")
    ap.add_argument("--stack", action="store_true", help="start a test stack of its own")
    args = ap.parse_args()
    made_ctr, made_img = [], []
    with service(args.stack, "bench-fork", {"max_ttl": "3600"}) as (url, key, _conf):
        s = requests.Session()
        s.headers["Authorization"] = f"Bearer {key}"
        made_sbx = []

        def create():
            r = s.post(f"{url}/sandbox", json={}, timeout=120)
            assert r.status_code == 201, r.text
            made_sbx.append(r.json()["sandboxId"])
            return made_sbx[-1]

        def fork(sid, count):
            t0 = time.perf_counter()
            r = s.post(f"{url}/sandbox/{sid}/fork", json={"count": count}, timeout=600)
            took = ms(t0)
            assert r.status_code == 201, r.text
            kids = [x["sandboxId"] for x in r.json()["sandboxes"]]
            made_sbx.extend(kids)
            return took, kids

        def delete(sid):
            s.delete(f"{url}/sandbox/{sid}", timeout=120)
            made_sbx.remove(sid)

        def ours_once(sid):
            took, kids = fork(sid, 1)
            r = s.post(f"{url}/sandbox/{kids[0]}/exec", json={"command": "stat -c %s /workspace/big.bin"})
            assert r.json()["stdout"] == "104857600\n", r.text
            delete(kids[0])
            return took

        def peer_once(cid, i):
            tag = f"nbbench-fork:{uuid.uuid4().hex[:12]}"
            t0 = time.perf_counter()
            sh("docker", "commit", cid, tag)
            made_img.append(tag)
            new = sh("docker", "run", "-d", "--label", f"{LABEL}=1", "--network", "none",
                     "--user", "1000:1000", "--memory", "256m", "--cpus", "0.5", "--cap-drop", "ALL",
                     "--security-opt", "no-new-privileges", "--tmpfs", "/tmp:rw,nosuid,nodev,size=64m",
                     "--log-driver", "none", tag, "sleep", "infinity")
            took = ms(t0)
            made_ctr.append(new)
            assert sh("docker", "exec", new, "stat", "-c", "%s", "/workspace/big.bin") == "104857600"
            subprocess.run(["docker", "rm", "-f", "-v", new], stdout=subprocess.DEVNULL)
            made_ctr.remove(new)
            subprocess.run(["docker", "rmi", "-f", tag], stdout=subprocess.DEVNULL)
            made_img.remove(tag)
            return took

        try:
            sid = create()
            r = s.post(f"{url}/sandbox/{sid}/exec", json={"command": FILL, "timeout": 120})
            assert r.status_code == 200 and r.json()["exit_code"] == 0, r.text
            cfg = raw_config(args.image)
            del cfg["HostConfig"]["Tmpfs"]["/workspace"]  # the files in the writable layer
            cfg["HostConfig"]["ReadonlyRootfs"] = False
            cid = docker_api("POST", f"/containers/create?name=nbbench-{uuid.uuid4()}", cfg)["Id"]
            made_ctr.append(cid)
            docker_api("POST", f"/containers/{cid}/start")
            sh("docker", "exec", cid, "sh", "-c",
               "mkdir -p /workspace && " + FILL)
            ours, peer = [], []
            for i in range(args.n):
                turns = [lambda: ours.append(ours_once(sid)), lambda: peer.append(peer_once(cid, i))]
                random.shuffle(turns)
                for t in turns:
                    t()
            ratio = line("fork, 100 MiB", ours, peer, "docker commit + run")
            many = []
            for _ in range(max(1, args.n // 3)):
                took, kids = fork(sid, 4)
                many.append(took / 4)
                for k in kids:
                    delete(k)
            print(f"{'fork count 4, per fork':<22} nanobox p50 {statistics.median(many):7.1f} ms")
            print(f"ratio (nanobox / docker commit + run): {ratio:.2f}")
        finally:
            for x in list(made_sbx):
                s.delete(f"{url}/sandbox/{x}", timeout=120)
            for c in made_ctr:
                subprocess.run(["docker", "rm", "-f", "-v", c], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
            for img in made_img:
                subprocess.run(["docker", "rmi", "-f", img], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
