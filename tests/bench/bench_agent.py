#!/usr/bin/python3
"""bench_agent.py - the agent and warm-pool paths against their Docker peers, same run.

Sections (all by default; pick some with --sections exec,create,files,run):

  exec    POST /sandbox/{id}/exec {"command":"true"} through nginx (the
          in-sandbox agent runs it), against `docker exec -u 1000:1000 CID
          true` on the same sandbox container, and against the raw Docker
          exec API (create + start + inspect), all in a random order each
          round. Also shown: the same exec over a new HTTP connection per
          request (what curl does), the host's own fork + exec of
          /bin/sh -c true (the floor), and nanobox alone beforehand (a
          Docker exec's runc init runs in the sandbox's cgroup and spends
          its CPU quota, which slows whatever runs next in it).
          nanobox alone is timed twice: through python-requests (the
          script's session, also used for the interleaved rounds) and
          through a bare keep-alive http.client connection, which is what
          a lean client (curl, Go, Node) pays: requests itself costs about
          1 ms of Python per call on these machines.
          The floor inside the sandbox: one exec starts a python3 that
          spawns /bin/true n times (and /bin/sh -c true, what an exec of a
          command runs), timing each with its own clock, in the sandbox's
          cgroup under its CPU limit; the lean client's p50 is shown as a
          ratio to it, beside GET /sandbox/{id} from the same client (what
          any request costs: nginx, its key check, a worker). The lean
          client also times {"argv":["/bin/true"]} (no shell: what the
          floor spawns), shown against /bin/true, and the command against
          sh -c true: the like-for-like ratios.
          Targets: p50 <= 5 ms (alone, lean client), <= 1.5x the floor
          inside the sandbox, and >= 10x faster than the CLI.
  create  POST /sandbox {} served by the warm pool, as a user sees it: before
          each timed create the script waits until GET /healthz shows
          "warm" == warm_pool (the reaper refills one sandbox at a time, on a
          1 s tick), times only the POST, then deletes the sandbox. Against
          a raw Docker create + start of the equivalent container
          (bench_core.raw_config). Every hand-out is checked warm or cold
          (its container was created before or after the request was sent).
          Then a burst of back-to-back creates, reported honestly: how many
          came warm and how many cold. Target: p50 <= 15 ms.
  files   PUT then GET of a 1 MiB file at /workspace/f, against `docker cp`
          in and out. docker cp cannot write anywhere in a sandbox (the
          root is read-only and the archive API does not see tmpfs mounts:
          "container rootfs is marked read-only"), so its peer is a plain
          container of the same image without read-only root or tmpfs,
          copying to and from /tmp/f. The raw archive API (PUT/GET
          /containers/{id}/archive) on that container is shown too.
          Target: write + read >= 5x faster than docker cp.
  run     POST /run {"language":"python","code":"print(1)"}, waiting for a
          full pool before each call, against `docker run --rm --network
          none -u 1000:1000 IMAGE python3 -c 'print(1)'`. Also /run back to
          back with no wait (the pool then runs dry). Target: <= 0.5x.

Prints p50 and p90 of each, the ratio nanobox / peer of the medians (lower is
better for nanobox) and whether the target is met. Against a running service
(src/setup/up.sh): NANOBOX_URL (default http://127.0.0.1:8080),
NANOBOX_API_KEY and NANOBOX_CONF (default /etc/nanobox/nanobox.conf, read for
api_key and warm_pool); or --stack: a test stack of its own (nbtest.Stack from
NANOBOX_BUILD, default ./build, warm_pool = 2), stopped at the end. Sends
traffic only to loopback and dockerd. Every
container it makes itself carries the label nanobox.bench and is removed at
the end; every sandbox it makes through the API is deleted.

  sudo tests/bench/bench_agent.py [-n 50] [--run-n 20] [--burst 10] [--sections exec,run] [--stack]
"""
import argparse
import http.client
import io
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.parse
import uuid
from datetime import datetime

import requests

sys.dont_write_bytecode = True  # no __pycache__ in tests/bench from the import below
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_core import (LABEL, UnixHTTP, container_of, cpu_stat, cpu_usage, docker_api,  # noqa: E402
                        docker_remove, ms, raw_config, raw_exec, service)

SECTIONS = ("exec", "create", "files", "run")
ARGV_TRUE = b'{"argv":["/bin/true"]}'  # the exec of what the floor spawns, no shell
MIB = 1 << 20
# The floor of an exec inside the sandbox: a process already there (this
# python3, started once by one exec) spawning /bin/true, and what an exec
# of a command runs (/bin/sh -c true), n times each, timed with its own
# clock; in the sandbox's cgroup, so under its CPU limit. posix_spawn is
# the vfork + exec the agent does.
SPAWN_FLOOR = r"""
import os, sys, time
def spawn(argv):
    t0 = time.perf_counter()
    os.waitpid(os.posix_spawn(argv[0], argv, {}), 0)
    return (time.perf_counter() - t0) * 1000
for argv in (["/bin/true"], ["/bin/sh", "-c", "true"]):
    for _ in range(5):
        spawn(argv)
    print(" ".join("%.3f" % spawn(argv) for _ in range(int(sys.argv[1]))))
"""


# --- helpers -------------------------------------------------------------------

def pct(samples, p):
    """Nearest-rank percentile."""
    s = sorted(samples)
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)]


def fmt(samples):
    return f"p50 {statistics.median(samples):7.1f}  p90 {pct(samples, 90):7.1f} ms"


def row(name, ours, peer=None, peer_name=""):
    """One line: ours, the peer, the ratio of the medians. Returns the ratio."""
    line = f"  {name:<36} {fmt(ours)}"
    ratio = None
    if peer:
        ratio = statistics.median(ours) / statistics.median(peer)
        line += f"   | {peer_name:<24} {fmt(peer)}   ratio {ratio:5.3f}x"
    print(line)
    return ratio


def verdict(text, ok):
    print(f"  target {text}: {'met' if ok else 'NOT MET'}")
    return ok


def docker_archive_put(cid, path_dir, name, data):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        ti = tarfile.TarInfo(name)
        ti.size = len(data)
        ti.mode = 0o644
        t.addfile(ti, io.BytesIO(data))
    c = UnixHTTP("/var/run/docker.sock")
    c.request("PUT", f"/v1.41/containers/{cid}/archive?path={urllib.parse.quote(path_dir)}",
              buf.getvalue(), {"Content-Type": "application/x-tar"})
    r = c.getresponse()
    r.read()
    c.close()
    if r.status != 200:
        raise RuntimeError(f"archive PUT: {r.status}")


def docker_archive_get(cid, path):
    c = UnixHTTP("/var/run/docker.sock")
    c.request("GET", f"/v1.41/containers/{cid}/archive?path={urllib.parse.quote(path)}")
    r = c.getresponse()
    body = r.read()
    c.close()
    if r.status != 200:
        raise RuntimeError(f"archive GET: {r.status}")
    with tarfile.open(fileobj=io.BytesIO(body)) as t:
        return t.extractfile(t.getmembers()[0]).read()


def container_created(cid):
    """Wall-clock time (epoch seconds) at which Docker created the container."""
    created = docker_api("GET", f"/containers/{cid}/json")["Created"]
    # 2026-11-29T20:30:01.123456789Z: fromisoformat wants at most 6 fraction digits
    head, _, frac = created.rstrip("Z").partition(".")
    return datetime.fromisoformat(f"{head}.{(frac + '000000')[:6]}+00:00").timestamp()


class Bench:
    def __init__(self, args, url, key, conf):
        self.args = args
        self.url = url
        self.key = key
        self.warm_pool = int(conf.get("warm_pool", "2"))
        self.s = requests.Session()
        self.s.headers["Authorization"] = f"Bearer {self.key}"
        self.containers = []   # made directly: removed at the end
        self.sandboxes = []    # made through the API: deleted at the end
        self.results = []      # (target, met) for the summary

    # API --------------------------------------------------------------------

    def create(self):
        r = self.s.post(self.url + "/sandbox", json={})
        if r.status_code != 201:
            raise SystemExit(f"POST /sandbox: {r.status_code} {r.text[:200]}")
        sid = r.json()["sandboxId"]
        self.sandboxes.append(sid)
        return sid

    def delete(self, sid):
        r = self.s.delete(f"{self.url}/sandbox/{sid}")
        if r.status_code != 204:
            raise SystemExit(f"DELETE /sandbox/{sid}: {r.status_code} {r.text[:200]}")
        self.sandboxes.remove(sid)

    def lean_exec_true(self, conn, sid, body=b'{"command":"true"}'):
        """The same exec over a bare keep-alive http.client connection: what
        a lean client (curl, Go, Node) pays, without requests' own ~1 ms of
        Python per call on this machine. body: {"argv":["/bin/true"]} runs
        /bin/true itself, no shell: what the floor spawns."""
        conn.request("POST", f"/sandbox/{sid}/exec", body=body,
                     headers={"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"})
        r = conn.getresponse()
        body = r.read()
        if r.status != 200 or json.loads(body)["exit_code"] != 0:
            raise SystemExit(f"exec: {r.status} {body[:200]!r}")

    def exec_true(self, sid, session=None):
        r = (session or self.s).post(f"{self.url}/sandbox/{sid}/exec", json={"command": "true"},
                                     headers={"Authorization": f"Bearer {self.key}"})
        if r.status_code != 200 or r.json()["exit_code"] != 0:
            raise SystemExit(f"exec: {r.status_code} {r.text[:200]}")

    def spawn_floor(self, sid):
        """SPAWN_FLOOR in the sandbox: its /bin/true and sh -c true spawn times (ms)."""
        r = self.s.post(f"{self.url}/sandbox/{sid}/exec", json={
            "argv": ["python3", "-c", SPAWN_FLOOR, str(self.args.n)], "timeout": 120})
        if r.status_code != 200 or r.json()["exit_code"] != 0:
            raise SystemExit(f"exec of the spawn loop: {r.status_code} {r.text[:300]}")
        lines = r.json()["stdout"].split("\n")
        return [float(x) for x in lines[0].split()], [float(x) for x in lines[1].split()]

    def container_of(self, sid):
        return container_of(sid)

    def healthz(self):
        return self.s.get(self.url + "/healthz").json()

    def wait_warm(self, timeout=60):
        """Until the pool is full again (GET /healthz "warm" == warm_pool)."""
        deadline = time.time() + timeout
        while True:
            h = self.healthz()
            if h.get("warm", 0) >= self.warm_pool:
                return
            if time.time() > deadline:
                raise SystemExit(f"the warm pool did not refill within {timeout} s: {h}")
            time.sleep(0.02)

    # Docker -----------------------------------------------------------------

    def raw_container(self, config):
        cid = docker_api("POST", f"/containers/create?name=nbbench-{uuid.uuid4()}", config)["Id"]
        self.containers.append(cid)
        docker_api("POST", f"/containers/{cid}/start")
        return cid

    def raw_remove(self, cid):
        docker_remove(cid)
        self.containers.remove(cid)

    def cleanup(self):
        for sid in list(self.sandboxes):
            try:
                self.s.delete(f"{self.url}/sandbox/{sid}", timeout=60)
            except Exception as e:  # noqa: BLE001 - report and go on cleaning
                print(f"cleanup of sandbox {sid} failed: {e}", file=sys.stderr)
        for cid in list(self.containers):
            try:
                docker_remove(cid)
            except Exception as e:  # noqa: BLE001
                print(f"cleanup of container {cid[:12]} failed: {e}", file=sys.stderr)
        # docker run --rm containers that an interrupt left behind
        flt = urllib.parse.quote(json.dumps({"label": [LABEL]}))
        for c in docker_api("GET", f"/containers/json?all=1&filters={flt}"):
            if c["Names"] and c["Names"][0].startswith("/nbbench-run-"):
                try:
                    docker_remove(c['Id'])
                except Exception as e:  # noqa: BLE001
                    print(f"cleanup of container {c['Id'][:12]} failed: {e}", file=sys.stderr)

    def target(self, text, ok):
        self.results.append((text, ok))
        return verdict(text, ok)

    # 1. exec ------------------------------------------------------------------

    def bench_exec(self):
        n = self.args.n
        sid = self.create()
        cid = self.container_of(sid)
        cli = ["docker", "exec", "-u", "1000:1000", cid, "true"]

        def fresh_conn():
            with requests.Session() as one:
                self.exec_true(sid, one)

        def raw():
            if raw_exec(cid, ["true"]) != 0:
                raise SystemExit("raw exec of true failed")

        paths = [  # name, what one sample does
            ("ours", lambda: self.exec_true(sid)),
            ("fresh", fresh_conn),
            ("cli", lambda: subprocess.run(cli, check=True)),
            ("raw", raw),
            ("spawn", lambda: os.waitpid(os.posix_spawn("/bin/sh", ["/bin/sh", "-c", "true"], {}), 0)),
        ]
        # first nanobox alone: nothing else runs in the sandbox, as a user sees it
        for _ in range(3):
            self.exec_true(sid)
        alone = []
        throttled0, cpu0 = cpu_stat(cid), cpu_usage(cid)
        for _ in range(n):
            t0 = time.perf_counter()
            self.exec_true(sid)
            alone.append(ms(t0))
        throttled1, cpu1 = cpu_stat(cid), cpu_usage(cid)
        # the same, from a lean client
        u = urllib.parse.urlsplit(self.url)
        conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=60)
        for _ in range(3):
            self.lean_exec_true(conn, sid)
        lean, lean_argv, get = [], [], []
        for _ in range(n):
            t0 = time.perf_counter()
            self.lean_exec_true(conn, sid)
            lean.append(ms(t0))
            t0 = time.perf_counter()
            self.lean_exec_true(conn, sid, ARGV_TRUE)
            lean_argv.append(ms(t0))
            # what any request costs: nginx, its key check (auth_request), a worker
            t0 = time.perf_counter()
            conn.request("GET", f"/sandbox/{sid}", headers={"Authorization": f"Bearer {self.key}"})
            r = conn.getresponse()
            r.read()
            get.append(ms(t0))
            if r.status != 200:
                raise SystemExit(f"GET /sandbox/{sid}: {r.status}")
        conn.close()
        floor_true, floor_sh = self.spawn_floor(sid)
        for _ in range(3):  # warm the Docker paths
            subprocess.run(cli, check=True)
            raw_exec(cid, ["true"])
        # then every path in a random order each round: a noisy moment, and the
        # sandbox's CPU quota spent by a Docker exec (runc init runs in the
        # sandbox's cgroup), hit every path alike
        t = {name: [] for name, _ in paths}
        rnd = random.Random(1)
        for _ in range(n):
            for name, fn in rnd.sample(paths, len(paths)):
                t0 = time.perf_counter()
                fn()
                t[name].append(ms(t0))
        throttled2 = cpu_stat(cid)
        ours, fresh, cli_t, raw_t, spawn = (t[k] for k in ("ours", "fresh", "cli", "raw", "spawn"))
        self.delete(sid)

        print(f"\n1. exec of `true`, {n} samples each (nanobox: keep-alive session through nginx)")
        row("exec true, nanobox alone", alone)
        r_floor = row("  ... from a lean client (http.client)", lean, floor_true,
                      "in the sandbox: /bin/true")
        r_sh = row("", lean, floor_sh, "in the sandbox: sh -c true")
        r_argv = row('  ... argv ["/bin/true"], no shell', lean_argv, floor_true, "in the sandbox: /bin/true")
        row("  GET /sandbox/{id}, same client (any request)", get)
        if cpu0 is not None and cpu1 is not None:
            print(f"  CPU time charged to the sandbox's cgroup per exec: {(cpu1 - cpu0) / n / 1e6:.2f} ms")
        print("  interleaved with the peers, in a random order each round:")
        r_cli = row("exec true (nginx -> agent)", ours, cli_t, "docker exec CLI")
        row("", ours, raw_t, "raw Docker exec API")
        row("  ... new connection per request", fresh)
        row("host: spawn /bin/sh -c true (floor)", spawn)
        if throttled0 and throttled2:
            print(f"  the sandbox's CPU quota (CFS) throttled it {throttled1[0] - throttled0[0]} times "
                  f"({(throttled1[1] - throttled0[1]) / 1e6:.0f} ms) during the {n} execs alone, "
                  f"{throttled2[0] - throttled1[0]} times ({(throttled2[1] - throttled1[1]) / 1e6:.0f} ms) "
                  "while interleaved")
        self.target("exec p50 <= 5 ms (nanobox alone, lean client)", statistics.median(lean) <= 5.0)
        self.target(f"exec p50 <= 1.5x spawning /bin/true in the sandbox ({r_floor:.2f}x)", r_floor <= 1.5)
        print(f"  like for like: command `true` vs sh -c true {r_sh:.2f}x; "
              f"argv /bin/true vs /bin/true {r_argv:.2f}x")
        print(f"  (through python-requests, which adds its own per-call cost: p50 {statistics.median(alone):.1f} ms)")
        self.target(f"exec >= 10x faster than docker exec CLI ({1 / r_cli:.0f}x)", r_cli <= 0.1)

    # 2. create from the warm pool -----------------------------------------------

    def timed_create(self):
        """POST /sandbox: (ms, sid, warm?) - warm when its container predates the request."""
        wall = time.time()
        t0 = time.perf_counter()
        r = self.s.post(self.url + "/sandbox", json={})
        dt = ms(t0)
        if r.status_code != 201:
            raise SystemExit(f"POST /sandbox: {r.status_code} {r.text[:200]}")
        sid = r.json()["sandboxId"]
        self.sandboxes.append(sid)
        return dt, sid, container_created(self.container_of(sid)) < wall

    def bench_create(self):
        n = self.args.n
        print(f"\n2. POST /sandbox with the warm pool (warm_pool = {self.warm_pool}), {n} samples each")
        if self.warm_pool < 1:
            print("  warm_pool is 0 in the config: nothing to measure")
            return
        sid = self.create()  # warm both paths once
        self.exec_true(sid)
        self.delete(sid)
        self.raw_remove(self.raw_container(raw_config(self.args.image)))

        create, ready, delete, cold = [], [], [], 0
        raw_create, raw_ready, raw_delete = [], [], []
        for _ in range(n):
            self.wait_warm()
            dt, sid, warm = self.timed_create()
            create.append(dt)
            cold += not warm
            t0 = time.perf_counter()
            self.exec_true(sid)
            ready.append(dt + ms(t0))
            t0 = time.perf_counter()
            self.delete(sid)
            delete.append(ms(t0))

            t0 = time.perf_counter()
            cid = self.raw_container(raw_config(self.args.image))
            raw_create.append(ms(t0))
            if raw_exec(cid, ["true"]) != 0:
                raise SystemExit("raw exec of true failed")
            raw_ready.append(ms(t0))
            t0 = time.perf_counter()
            self.raw_remove(cid)
            raw_delete.append(ms(t0))

        print(f"  waiting for a full pool before each create; {n - cold} of {n} hand-outs were warm")
        r = row("POST /sandbox (warm pool)", create, raw_create, "raw create+start")
        row("  ... until the first exec answers", ready, raw_ready, "raw create+start+exec")
        row("DELETE /sandbox", delete, raw_delete, "raw remove (force)")
        self.target("create p50 <= 15 ms", statistics.median(create) <= 15.0)
        print(f"  (create is {1 / r:.0f}x faster than the raw create + start)")

        refill = []  # a hand-out, then how long until GET /healthz shows a full pool again
        for _ in range(5):
            self.wait_warm()
            _, sid, _ = self.timed_create()
            t0 = time.perf_counter()
            self.wait_warm()
            refill.append(ms(t0))
            self.delete(sid)
        row("pool full again after one hand-out", refill)

        for b in range(self.args.bursts):
            self.wait_warm()
            got = [self.timed_create() for _ in range(self.args.burst)]
            t0 = time.perf_counter()
            self.wait_warm()
            full = ms(t0)
            for _, sid, _ in got:
                self.delete(sid)
            warm = [dt for dt, _, w in got if w]
            cold_t = [dt for dt, _, w in got if not w]
            print(f"  burst {b + 1}: {self.args.burst} creates back to back: {len(warm)} warm, "
                  f"{len(cold_t)} cold; in order: " + " ".join(f"{dt:.0f}{'w' if w else 'c'}"
                                                              for dt, _, w in got) + " ms; "
                  f"pool full again {full / 1000:.1f} s after the burst")
            if warm:
                row("  burst, warm hand-outs", warm)
            if cold_t:
                row("  burst, cold creates", cold_t)

    # 3. files -------------------------------------------------------------------

    def bench_files(self):
        n = self.args.n
        data = os.urandom(MIB)
        sid = self.create()
        url = f"{self.url}/sandbox/{sid}/files"
        path = {"path": "/workspace/f"}
        # docker cp's peer: the same image, no read-only root, no tmpfs
        plain = raw_config(self.args.image)
        plain["HostConfig"] = {"NetworkMode": "none", "LogConfig": {"Type": "none"}}
        cid = self.raw_container(plain)
        tmp = tempfile.mkdtemp(prefix="nbbench-")
        src, back = os.path.join(tmp, "f"), os.path.join(tmp, "back")
        with open(src, "wb") as f:
            f.write(data)
        cp_in = ["docker", "cp", src, f"{cid}:/tmp/f"]
        cp_out = ["docker", "cp", f"{cid}:/tmp/f", back]
        try:
            for _ in range(3):
                self.s.put(url, params=path, data=data)
                self.s.get(url, params=path)
                subprocess.run(cp_in, check=True)
                subprocess.run(cp_out, check=True)
                os.unlink(back)
            put, get, cpi, cpo, api_put, api_get = [], [], [], [], [], []
            for _ in range(n):
                t0 = time.perf_counter()
                r = self.s.put(url, params=path, data=data)
                put.append(ms(t0))
                if r.status_code != 201:
                    raise SystemExit(f"PUT file: {r.status_code} {r.text[:200]}")
                t0 = time.perf_counter()
                r = self.s.get(url, params=path)
                get.append(ms(t0))
                if r.status_code != 200 or r.content != data:
                    raise SystemExit(f"GET file: {r.status_code}, {len(r.content)} bytes, not what was written")

                t0 = time.perf_counter()
                subprocess.run(cp_in, check=True)
                cpi.append(ms(t0))
                t0 = time.perf_counter()
                subprocess.run(cp_out, check=True)
                cpo.append(ms(t0))
                with open(back, "rb") as f:
                    if f.read() != data:
                        raise SystemExit("docker cp out: not what was written")
                os.unlink(back)

                t0 = time.perf_counter()
                docker_archive_put(cid, "/tmp", "g", data)
                api_put.append(ms(t0))
                t0 = time.perf_counter()
                if docker_archive_get(cid, "/tmp/g") != data:
                    raise SystemExit("archive GET: not what was written")
                api_get.append(ms(t0))
        finally:
            for p in (src, back):
                if os.path.exists(p):
                    os.unlink(p)
            os.rmdir(tmp)
        self.delete(sid)

        both = [a + b for a, b in zip(put, get)]
        print(f"\n3. write + read of 1 MiB, {n} samples each (docker cp and the archive API on a"
              " plain container of the same image:\n   docker cp cannot write into a sandbox,"
              " whose root is read-only and whose /workspace and /tmp are tmpfs)")
        row("PUT /workspace/f", put, cpi, "docker cp in")
        row("GET /workspace/f", get, cpo, "docker cp out")
        r = row("PUT + GET", both, [a + b for a, b in zip(cpi, cpo)], "docker cp in + out")
        row("", both, [a + b for a, b in zip(api_put, api_get)], "raw archive API in + out")
        self.target(f"files >= 5x faster than docker cp ({1 / r:.1f}x)", r <= 0.2)

    # 4. /run --------------------------------------------------------------------

    def run_once(self):
        r = self.s.post(self.url + "/run", json={"language": "python", "code": "print(1)"})
        if r.status_code != 200 or r.json().get("stdout") != "1\n":
            raise SystemExit(f"/run: {r.status_code} {r.text[:200]}")

    def bench_run(self):
        n = self.args.run_n
        cmd = ["docker", "run", "--rm", "--network", "none", "-u", "1000:1000", "--label", f"{LABEL}=1",
               None, self.args.image, "python3", "-c", "print(1)"]
        self.wait_warm()
        self.run_once()
        ours, peer, burst = [], [], []
        for _ in range(n):
            self.wait_warm()
            t0 = time.perf_counter()
            self.run_once()
            ours.append(ms(t0))
            cmd[-5] = f"--name=nbbench-run-{uuid.uuid4()}"
            t0 = time.perf_counter()
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            peer.append(ms(t0))
            if out != "1\n":
                raise SystemExit(f"docker run printed {out!r}")
        # the same work by hand, to show where a /run's time goes
        p_create, p_exec, p_delete = [], [], []
        for _ in range(n):
            self.wait_warm()
            dt, sid, _ = self.timed_create()
            p_create.append(dt)
            t0 = time.perf_counter()
            r = self.s.post(f"{self.url}/sandbox/{sid}/exec", json={"command": "python3 -c 'print(1)'"})
            p_exec.append(ms(t0))
            if r.status_code != 200 or r.json()["stdout"] != "1\n":
                raise SystemExit(f"exec of python3: {r.status_code} {r.text[:200]}")
            t0 = time.perf_counter()
            self.delete(sid)
            p_delete.append(ms(t0))
        self.wait_warm()
        for _ in range(n):
            t0 = time.perf_counter()
            self.run_once()
            burst.append(ms(t0))

        print(f"\n4. POST /run of print(1), {n} samples each")
        r = row("/run (full pool before each)", ours, peer, "docker run --rm")
        row("/run back to back (pool runs dry)", burst, peer, "docker run --rm")
        print("  the same steps as separate requests (full pool before each):")
        row("  POST /sandbox (warm)", p_create)
        row("  exec python3 -c 'print(1)'", p_exec)
        row("  DELETE /sandbox", p_delete)
        self.target(f"/run <= 0.5x docker run ({r:.2f}x)", r <= 0.5)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=50, help="samples per measurement (default 50)")
    ap.add_argument("--run-n", type=int, default=20, help="samples for /run and docker run (default 20)")
    ap.add_argument("--burst", type=int, default=10, help="creates in the back-to-back burst (default 10)")
    ap.add_argument("--bursts", type=int, default=1, help="bursts to run (default 1)")
    ap.add_argument("--sections", default=",".join(SECTIONS), help="comma-separated: " + ",".join(SECTIONS))
    ap.add_argument("--image", default="nanobox:latest")
    ap.add_argument("--stack", action="store_true",
                    help="start a test stack of its own (nbtest.Stack, warm_pool = 2)")
    args = ap.parse_args()
    sections = [x for x in args.sections.split(",") if x]
    if any(x not in SECTIONS for x in sections):
        ap.error(f"sections are {', '.join(SECTIONS)}")

    with service(args.stack, "bench-agent", {"warm_pool": "2", "workers_min": "4"}) as (url, key, conf):
        b = Bench(args, url, key, conf)
        h = b.healthz()
        print(f"nanobox agent benchmark, {time.strftime('%Y-%m-%d %H:%M')}: {os.cpu_count()} CPUs, "
              f"load average {os.getloadavg()[0]:.2f} at start; {b.url}, warm_pool {b.warm_pool}, "
              f"{h.get('sandboxes')} sandboxes in the table")
        try:
            for name in sections:
                getattr(b, "bench_" + name)()
        finally:
            b.cleanup()
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end")
    for text, ok in b.results:
        print(f"  {'met    ' if ok else 'NOT MET'}  {text}")


if __name__ == "__main__":
    main()
