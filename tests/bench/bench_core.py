#!/usr/bin/python3
"""bench_core.py - nanobox's core paths against their Docker peers, same run.

  (a) POST /sandbox through nginx, then the first exec answering, against the
      raw Docker API doing the same (create + start, then exec create + start
      + inspect) over the same unix socket;
      also bare create (POST /sandbox) against raw create + start.
  (b) exec of `true` through nginx against the `docker exec` CLI, and
      against the raw exec API calls (create + start + inspect) themselves.

Prints medians and the ratio nanobox / peer (lower is better for nanobox).
Needs a running service (src/setup/up.sh): NANOBOX_URL (default
http://127.0.0.1:8080) and NANOBOX_API_KEY (default: api_key from
/etc/nanobox/nanobox.conf). Sends traffic only to loopback and dockerd.

  sudo tests/bench/bench_core.py [-n 20]
"""
import argparse
import contextlib
import http.client
import fcntl
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.parse
import uuid

import requests

LABEL = "nanobox.bench"


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=120)
        self.unix_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.unix_path)


def docker_api(method, path, body=None, sock="/var/run/docker.sock"):
    c = UnixHTTP(sock)
    headers = {"Content-Type": "application/json"} if body is not None else {}
    c.request(method, "/v1.41" + path, json.dumps(body) if body is not None else None, headers)
    r = c.getresponse()
    data = r.read()
    c.close()
    if r.status >= 300:
        raise RuntimeError(f"docker {method} {path}: {r.status} {data[:200]!r}")
    return json.loads(data) if data and r.getheader("Content-Type", "").startswith("application/json") else data


REMOVE_LOCK = "/run/lock/nanobox-docker-remove.lock"  # nanobox-fcgi's (src/common/docker.c)


def docker_remove(cid):
    """DELETE /containers/{cid}?force=1&v=1 under nanobox's host-wide removal
    lock: Docker 20.10.24 deadlocks when containers of one network exit at
    once, raw peers' containers as much as sandboxes."""
    with open(REMOVE_LOCK, "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return docker_remove(cid)


def raw_config(image):
    """The same container nanobox makes: hardening, tmpfs, limits, init."""
    return {
        "Image": image, "Cmd": ["sleep", "infinity"], "User": "1000:1000",
        "WorkingDir": "/workspace", "Labels": {LABEL: "1"},
        "HostConfig": {
            "Init": True, "NetworkMode": "none", "Memory": 256 << 20, "MemorySwap": 256 << 20,
            "NanoCpus": 500000000, "PidsLimit": 128, "CapDrop": ["ALL"],
            "SecurityOpt": ["no-new-privileges"], "ReadonlyRootfs": True,
            "Tmpfs": {"/tmp": "rw,nosuid,nodev,size=67108864,mode=1777",
                      "/workspace": "rw,nosuid,nodev,exec,size=268435456,uid=1000,gid=1000,mode=0755"},
            "LogConfig": {"Type": "none"},
        },
    }


def raw_exec(cid, cmd):
    e = docker_api("POST", f"/containers/{cid}/exec",
                   {"AttachStdout": True, "AttachStderr": True, "Cmd": cmd, "User": "1000:1000"})
    docker_api("POST", f"/exec/{e['Id']}/start", {"Detach": False, "Tty": False})
    return docker_api("GET", f"/exec/{e['Id']}/json")["ExitCode"]


def container_of(sid):
    """The Docker id of a sandbox's container."""
    flt = urllib.parse.quote(json.dumps({"label": [f"nanobox.sandbox={sid}"]}))
    found = docker_api("GET", f"/containers/json?filters={flt}")
    if len(found) != 1:
        raise SystemExit(f"no single container for sandbox {sid}: {found}")
    return found[0]["Id"]


def cpu_stat(cid):
    """(nr_throttled, throttled_time ns) of a container's cpu cgroup (v1), or None."""
    for path in (f"/sys/fs/cgroup/cpu/docker/{cid}/cpu.stat", f"/sys/fs/cgroup/docker/{cid}/cpu.stat"):
        try:
            with open(path) as f:
                st = dict(line.split() for line in f)
        except OSError:
            continue
        if "nr_throttled" in st:
            return int(st["nr_throttled"]), int(st.get("throttled_time", int(st.get("throttled_usec", 0)) * 1000))
    return None


def cpu_usage(cid):
    """CPU time (ns) charged to a container's cgroup (v1 cpuacct), or None."""
    try:
        with open(f"/sys/fs/cgroup/cpuacct/docker/{cid}/cpuacct.usage") as f:
            return int(f.read())
    except OSError:
        return None


def ms(t0):
    return (time.perf_counter() - t0) * 1000.0


def conf_key(path="/etc/nanobox/nanobox.conf"):
    return conf_values(path).get("api_key", "")


@contextlib.contextmanager
def service(stack, name, extra_conf=None):
    """(url, key, conf) of the service to measure: with stack, a test stack of
    its own (the integration tests' nbtest.Stack from NANOBOX_BUILD, default
    ./build, with extra_conf), stopped and removed at the end; else the
    running one (NANOBOX_URL, NANOBOX_API_KEY, NANOBOX_CONF). conf: the
    key -> value of its nanobox.conf that could be read ({} if none)."""
    if not stack:
        path = os.environ.get("NANOBOX_CONF", "/etc/nanobox/nanobox.conf")
        conf = conf_values(path)
        yield (os.environ.get("NANOBOX_URL", "http://127.0.0.1:8080").rstrip("/"),
               os.environ.get("NANOBOX_API_KEY") or conf.get("api_key", ""), conf)
        return
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
    import nbtest
    st = nbtest.Stack(name, extra_conf={"log_level": "info", **(extra_conf or {})})
    try:
        st.start()
        yield st.url, st.api_key, dict(st.conf)
    finally:
        st.stop()
        st.remove_tmp()


def conf_values(path):
    """The "key = value" lines of a nanobox.conf ({} if unreadable)."""
    out = {}
    try:
        with open(path) as f:
            for line in f:
                k, sep, v = line.partition("=")
                if sep and not k.lstrip().startswith("#"):
                    out[k.strip()] = v.split("#")[0].strip()
    except OSError:
        pass
    return out


def report(name, ours, peer, peer_name):
    mo, mp = statistics.median(ours), statistics.median(peer)
    print(f"{name:<44} nanobox {mo:8.1f} ms   {peer_name:<22} {mp:8.1f} ms   ratio {mo / mp:5.2f}x")
    return mo / mp


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=20, help="samples per measurement (default 20)")
    ap.add_argument("--image", default="nanobox:latest")
    args = ap.parse_args()
    url = os.environ.get("NANOBOX_URL", "http://127.0.0.1:8080").rstrip("/")
    key = os.environ.get("NANOBOX_API_KEY") or conf_key()
    s = requests.Session()
    s.headers["Authorization"] = f"Bearer {key}"
    made = []

    try:
        # warm both paths once
        sid = s.post(url + "/sandbox", json={}).json()["sandboxId"]
        s.post(f"{url}/sandbox/{sid}/exec", json={"command": "true"})
        s.delete(f"{url}/sandbox/{sid}")

        create_ours, ready_ours, create_raw, ready_raw = [], [], [], []
        for _ in range(args.n):
            t0 = time.perf_counter()
            r = s.post(url + "/sandbox", json={})
            assert r.status_code == 201, r.text
            create_ours.append(ms(t0))
            sid = r.json()["sandboxId"]
            r = s.post(f"{url}/sandbox/{sid}/exec", json={"command": "true"})
            assert r.status_code == 200 and r.json()["exit_code"] == 0, r.text
            ready_ours.append(ms(t0))
            s.delete(f"{url}/sandbox/{sid}")

            t0 = time.perf_counter()
            cid = docker_api("POST", f"/containers/create?name=nbbench-{uuid.uuid4()}",
                             raw_config(args.image))["Id"]
            made.append(cid)
            docker_api("POST", f"/containers/{cid}/start")
            create_raw.append(ms(t0))
            assert raw_exec(cid, ["/bin/sh", "-c", "true"]) == 0
            ready_raw.append(ms(t0))
            docker_remove(cid)
            made.remove(cid)

        sid = s.post(url + "/sandbox", json={}).json()["sandboxId"]
        cid = docker_api("POST", f"/containers/create?name=nbbench-{uuid.uuid4()}",
                         raw_config(args.image))["Id"]
        made.append(cid)
        docker_api("POST", f"/containers/{cid}/start")
        exec_ours, exec_cli, exec_raw = [], [], []
        for _ in range(args.n):
            t0 = time.perf_counter()
            assert raw_exec(cid, ["/bin/sh", "-c", "true"]) == 0
            exec_raw.append(ms(t0))
            t0 = time.perf_counter()
            r = s.post(f"{url}/sandbox/{sid}/exec", json={"command": "true"})
            exec_ours.append(ms(t0))
            assert r.status_code == 200, r.text
            t0 = time.perf_counter()
            subprocess.run(["docker", "exec", "-u", "1000:1000", cid, "/bin/sh", "-c", "true"], check=True)
            exec_cli.append(ms(t0))
        s.delete(f"{url}/sandbox/{sid}")

        print(f"nanobox core benchmark: {args.n} samples each, medians, {time.strftime('%Y-%m-%d %H:%M')}")
        report("(a) create, until the first exec answers", ready_ours, ready_raw, "raw Docker API")
        report("    create alone (POST /sandbox)", create_ours, create_raw, "raw create+start")
        report("(b) exec `true`", exec_ours, exec_cli, "docker exec CLI")
        report("    exec `true`, against the API itself", exec_ours, exec_raw, "raw Docker API exec")
    finally:
        for cid in made:
            try:
                docker_remove(cid)
            except Exception as e:  # noqa: BLE001 - report and go on cleaning
                print(f"cleanup of {cid[:12]} failed: {e}", file=sys.stderr)


if __name__ == "__main__":
    main()
