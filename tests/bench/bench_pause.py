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

--cold measures the pause that releases the memory ({"keep_memory": false})
instead: pause and resume p50 with and without the memory against a cold
create (POST /sandbox with no warm pool) in the same run, on sandboxes
holding a 4 MiB workspace file and a process holding --hold MiB, and the
MemAvailable (/proc/meminfo) a paused sandbox frees, over --mem sandboxes.
--stack starts a test stack of its own (nbtest.Stack, the built tree,
warm_pool = 0) instead of using a service.

  NANOBOX_BUILD=$PWD/build flock /tmp/nanobox-bench.lock tests/bench/bench_pause.py --stack --cold
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


def mem_available():
    with open("/proc/meminfo") as f:
        for ln in f:
            if ln.startswith("MemAvailable:"):
                return int(ln.split()[1]) * 1024
    raise RuntimeError("no MemAvailable in /proc/meminfo")


HOLD = ("import time\nb = bytearray({n} << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\n"
        "open('/tmp/held', 'w').write('1')\ntime.sleep(100000)\n")


def cold(args, url, key):
    """The pause without memory against the freezer's and a cold create."""
    s = requests.Session()
    s.headers["Authorization"] = f"Bearer {key}"
    made = []

    def timed(method, path, want, **kw):
        t0 = time.perf_counter()
        r = s.request(method, url + path, **kw)
        took = ms(t0)
        assert r.status_code == want, f"{method} {path}: {r.status_code} {r.text}"
        return took, r

    def sandbox():
        took, r = timed("POST", "/sandbox", 201, json={"ttl": 3600})
        sid = r.json()["sandboxId"]
        made.append(sid)
        return took, sid

    def fill(sid, hold):
        cmd = "head -c 4194304 /dev/urandom > /workspace/data"
        if hold:
            cmd += (f"; setsid nohup python3 -c \"{HOLD.format(n=hold)}\" >/dev/null 2>&1 </dev/null &"
                    " for i in $(seq 200); do [ -e /tmp/held ] && break; sleep 0.05; done")
        timed("POST", f"/sandbox/{sid}/exec", 200, json={"command": cmd, "timeout": 60})

    try:
        times = {k: [] for k in ("create", "pause kept", "resume kept", "pause released",
                                 "resume released", "first exec after resume")}
        for _ in range(args.n):
            took, sid = sandbox()
            times["create"].append(took)
            fill(sid, args.hold)
            for keep in random.sample([True, False], 2):
                what = "kept" if keep else "released"
                times[f"pause {what}"].append(
                    timed("POST", f"/sandbox/{sid}/pause", 200, json={"keep_memory": keep})[0])
                times[f"resume {what}"].append(timed("POST", f"/sandbox/{sid}/resume", 200)[0])
                if not keep:
                    times["first exec after resume"].append(
                        timed("POST", f"/sandbox/{sid}/exec", 200,
                              json={"command": "cat /workspace/data | wc -c"})[0])
            s.delete(f"{url}/sandbox/{sid}")
            made.remove(sid)

        # MemAvailable a pause frees: --mem sandboxes each holding --hold MiB
        sids = [sandbox()[1] for _ in range(args.mem)]
        for sid in sids:
            fill(sid, args.hold)
        time.sleep(1)
        base = mem_available()
        for sid in sids:
            timed("POST", f"/sandbox/{sid}/pause", 200, json={"keep_memory": True})
        time.sleep(1)
        kept = mem_available()
        for sid in sids:
            timed("POST", f"/sandbox/{sid}/resume", 200)
            timed("POST", f"/sandbox/{sid}/pause", 200, json={"keep_memory": False})
        time.sleep(1)
        released = mem_available()

        load = os.getloadavg()
        print(f"nanobox pause without memory: {args.n} rounds, {time.strftime('%Y-%m-%d %H:%M')}, "
              f"load average {load[0]:.1f} {load[1]:.1f}; sandboxes hold a 4 MiB workspace file "
              f"and a process of {args.hold} MiB")
        c50 = statistics.median(times["create"])
        for k, v in times.items():
            print(f"{k:<24} p50 {statistics.median(v):7.1f} ms  p90 {p(v, 90):7.1f} ms"
                  f"  ({statistics.median(v) / c50:4.2f}x a cold create)")
        r50 = statistics.median(times["resume released"])
        print(f"target: resume without memory p50 {r50:.0f} ms <= 1.5x a cold create "
              f"({1.5 * c50:.0f} ms): {'met' if r50 <= 1.5 * c50 else 'NOT met'}")
        mib = 1 << 20
        print(f"MemAvailable over {args.mem} sandboxes: running {base / mib:.0f} MiB, "
              f"paused with memory {kept / mib:.0f} MiB ({(kept - base) / args.mem / mib:+.1f} MiB "
              f"each), paused without {released / mib:.0f} MiB "
              f"({(released - base) / args.mem / mib:+.1f} MiB each)")
    finally:
        for sid in made:
            s.delete(f"{url}/sandbox/{sid}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=50, help="rounds (default 50; --cold: 20)")
    ap.add_argument("--image", default="nanobox:latest")
    ap.add_argument("--cold", action="store_true", help="the pause that releases the memory")
    ap.add_argument("--hold", type=int, default=64, help="--cold: MiB a process in each holds")
    ap.add_argument("--mem", type=int, default=8, help="--cold: sandboxes for MemAvailable")
    ap.add_argument("--stack", action="store_true",
                    help="start a test stack of its own (nbtest.Stack, warm_pool = 0)")
    args = ap.parse_args()
    stack = None
    if args.stack:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
        import nbtest
        stack = nbtest.Stack("bench-pause", extra_conf={"warm_pool": "0", "warm_pool_code": "0",
                                                        "log_level": "info"}).start()
        os.environ["NANOBOX_URL"], os.environ["NANOBOX_API_KEY"] = stack.url, stack.api_key
    try:
        if args.cold:
            if "-n" not in sys.argv:
                args.n = 20
            return cold(args, os.environ.get("NANOBOX_URL", "http://127.0.0.1:8080").rstrip("/"),
                        os.environ.get("NANOBOX_API_KEY") or conf_key())
        return freezer(args)
    finally:
        if stack is not None:
            stack.stop()


def freezer(args):
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
