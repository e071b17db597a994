"""
nbtest.py - the machinery of the integration suite: start a real stack
(nanobox-fcgi + nginx in front of it, on the machine's dockerd), talk to it,
look at its processes and containers, and tear it all down again.

Everything a test starts lives in a fresh temp dir; every container the
service creates carries the label nanobox.instance=<random instance>, which is
how teardown finds (and force-removes) whatever is left behind.

Only loopback and the project's own sandboxes are ever contacted.

Parallel runs (pytest-xdist workers, the adversarial suite beside the
integration one, a second checkout's suite) share one machine: each test
process claims a band of TCP ports of its own (see "port bands" below), so a
stack's nginx port, its host port_range and the ranges tests pick ports
from never overlap another process's. Everything else a test sees is
already its own: a temp dir, an instance label, the pids it started.
"""

import fcntl
import json as jsonlib
import os
import random
import re
import secrets
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
import uuid
import zlib
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("NANOBOX_BUILD", str(REPO / "build")))
FCGI_BIN = BUILD / "nanobox-fcgi"
IMAGE = os.environ.get("NANOBOX_TEST_IMAGE", "nanobox:latest")
# The data-science template (src/setup/image.sh python), allowed by default.
PYTHON_IMAGE = os.environ.get("NANOBOX_TEST_PYTHON_IMAGE", "nanobox-python:latest")
RENDER_NGINX = REPO / "src" / "setup" / "render-nginx.sh"
NGINX = shutil.which("nginx", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
KEEP_TMP = bool(os.environ.get("NANOBOX_TEST_KEEP"))

# The configuration every test stack starts from. Small output/body caps keep
# the tests fast; worker_idle_timeout is long so that a worker that vanishes
# from the main stack during a test can only mean it crashed.
BASE_CONF = {
    "socket_group": "",
    "socket_mode": "0666",
    "workers_min": "2",
    "workers_max": "8",
    "worker_idle_timeout": "3600",
    "max_sandboxes": "64",
    "default_ttl": "600",
    "max_ttl": "3600",
    "exec_timeout": "30",
    "exec_timeout_max": "120",
    "max_output": "65536",
    "max_body": "65536",
    "max_command": "16384",
    "log_level": "debug",
    # leak checks count containers by label: warm sandboxes only where a test asks
    "warm_pool": "0",
    "warm_pool_code": "0",
}
# Images under test (NANOBOX_TEST_IMAGE, NANOBOX_TEST_PYTHON_IMAGE, e.g. a
# rebuilt template under a tag of its own): allowed, and the code
# interpreter's (E2B's code-interpreter template) when it is the python one.
if (IMAGE, PYTHON_IMAGE) != ("nanobox:latest", "nanobox-python:latest"):
    BASE_CONF["images"] = ",".join(dict.fromkeys(("nanobox:latest", "nanobox-python:latest", IMAGE, PYTHON_IMAGE)))
    BASE_CONF["code_image"] = PYTHON_IMAGE

# What the test config implies (asserted by the tests).
DEFAULT_MEMORY = 256 * 1024 * 1024
DEFAULT_NANO_CPUS = 500_000_000
DEFAULT_PIDS = 128
MAX_OUTPUT = 65536
MAX_BODY = 65536
MAX_COMMAND = 16384

# ------------------------------------------------------------- port bands
#
# Every TCP port a test process listens on, or configures a stack to listen
# on, comes from a band that process holds alone: band k (0 <= k < BANDS) is
#   LISTEN_BASE + k*BAND ..  +BAND-1   free_port(): nginx's port, dead URLs
#   HOST_BASE   + k*BAND ..  +BAND-1   the stacks' port_range (PORTS_CONF)
#   SCRATCH_BASE + k*SCRATCH .. +SCRATCH-1   ranges a test configures itself
# all below Linux's ephemeral range (32768-60999), so that no outgoing
# connection of the machine can hold one. A process holds band k by an
# exclusive flock on <tmp>/nanobox-test-band-<k>.lock, taken at import and
# dropped by the kernel when the process ends however it ends: no stale
# claims, and any number of pytest processes (xdist workers, two suites, two
# checkouts) get disjoint ports without being told about each other.
BAND = 50
BANDS = 40
SCRATCH = 20
LISTEN_BASE = 22000
HOST_BASE = 24000
SCRATCH_BASE = 26000


def _claim_band():
    """(k, fd): the first band no other process holds, its lock kept open.
    When all are held (more than BANDS test processes), wait for one."""
    lockdir = tempfile.gettempdir()
    for k in range(BANDS):
        fd = os.open(os.path.join(lockdir, f"nanobox-test-band-{k}.lock"), os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return k, fd
        except BlockingIOError:
            os.close(fd)
    k = os.getpid() % BANDS
    fd = os.open(os.path.join(lockdir, f"nanobox-test-band-{k}.lock"), os.O_RDWR | os.O_CREAT, 0o666)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return k, fd


BAND_INDEX, _BAND_FD = _claim_band()
LISTEN_PORTS = (LISTEN_BASE + BAND_INDEX * BAND, LISTEN_BASE + BAND_INDEX * BAND + BAND - 1)
HOST_PORTS = (HOST_BASE + BAND_INDEX * BAND, HOST_BASE + BAND_INDEX * BAND + BAND - 1)
# For a test that configures a port_range of its own (the exhausted-range
# tests): outside every stack's port_range, and this process's alone.
SCRATCH_PORTS = (SCRATCH_BASE + BAND_INDEX * SCRATCH, SCRATCH_BASE + BAND_INDEX * SCRATCH + SCRATCH - 1)

# Ephemeral ports (test_ports.py). Host ports are allocated from this
# process's band (above); listeners bind loopback only, and answers name
# 127.0.0.1 as the host.
PORTS_CONF = {
    "port_range": f"{HOST_PORTS[0]}-{HOST_PORTS[1]}",
    "port_bind": "127.0.0.1",
    "public_host": "127.0.0.1",
    "max_port_duration": "3600",
}
PORTS_DOMAIN = "sandbox.localhost"
FWD_NAME = "nanobox-fwd"

SANITIZER_PATTERNS = re.compile(
    r"ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer|"
    r"UndefinedBehaviorSanitizer|AddressSanitizer:DEADLYSIGNAL"
)

UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


# ---------------------------------------------------------------- utilities

def in_thread(fn):
    """Run fn in a daemon thread: (thread, box) where box gets "result" or "error"."""
    box = {}

    def target():
        try:
            box["result"] = fn()
        except Exception as e:  # noqa: BLE001
            box["error"] = e

    t = threading.Thread(target=target, daemon=True)
    t.start()
    return t, box


def wait_until(fn, timeout=10.0, interval=0.1, what="condition"):
    """Call fn until it returns something truthy; return that, or raise."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            last = fn()
        except Exception as e:  # noqa: BLE001 - keep polling, report the last
            last = e
        else:
            if last:
                return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")
        time.sleep(interval)


def reconciliations(api):
    """How many reconciliations the service has run since it started
    (nanobox_reconciliations_total of GET /metrics; the key must be admin)."""
    r = api.request("GET", "/metrics")
    m = re.search(r"^nanobox_reconciliations_total (\d+)$", r.text, re.M)
    return int(m.group(1)) if r.status_code == 200 and m else 0


def wait_reconciled(api, passes=2, timeout=20):
    """Wait until the service has reconciled its table with Docker passes
    times since it started: 2 is the start-up pair (the reaper's first
    pass and its third, which judges what turned RUNNING in the second of
    the first listing), after which only Docker's events or the next
    periodic pass (30 s on) act on a container."""
    return wait_until(lambda: reconciliations(api) >= passes, timeout, 0.1,
                      what=f"{passes} reconciliations")


def node_package(pkg_dir, name, skip_without_node=False):
    """node, once pkg_dir/node_modules holds package `name` at the version
    pkg_dir/package.json pins (npm ci from package-lock.json when missing).
    Without node or npm the test fails (or skips), saying what to install."""
    import pytest
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        (pytest.skip if skip_without_node else pytest.fail)(
            "node and npm are needed (tests/run.sh installs them: apt install nodejs npm)")
    pkg = Path(pkg_dir) / "node_modules" / name / "package.json"
    # Parallel workers share pkg_dir: one installs, the others wait for it.
    lockname = "nanobox-test-npm" + str(Path(pkg_dir).resolve()).replace("/", "-") + ".lock"
    with open(Path(tempfile.gettempdir()) / lockname, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _npm_install(pkg_dir, pkg, npm)
    version = jsonlib.loads(pkg.read_text())["version"]
    pinned = jsonlib.loads((Path(pkg_dir) / "package.json").read_text())["dependencies"][name]
    assert version == pinned, f"node_modules has {name} {version}, package.json pins {pinned}: rm -rf node_modules"
    return node


def _npm_install(pkg_dir, pkg, npm):
    import pytest
    if not pkg.exists():
        cmd = [npm, "ci", "--no-audit", "--no-fund"] if (Path(pkg_dir) / "package-lock.json").exists() \
            else [npm, "install", "--no-audit", "--no-fund"]
        r = subprocess.run(cmd, cwd=pkg_dir, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            pytest.fail(f"{' '.join(cmd)} in {pkg_dir} failed ({r.returncode}):\n{r.stdout[-2000:]}\n"
                        f"{r.stderr[-4000:]}")


_next_listen = 0
# Ports handed out that must not be handed out again while nothing listens
# on them (an etcd member nbetcd stopped and will start on the same port).
RESERVED_PORTS = set()


def free_port():
    """A port of this process's LISTEN_PORTS band that nothing listens on
    (for nginx, or a URL where nothing may answer). Handed out in turn, so
    that a port is not handed out twice before its first taker binds it."""
    global _next_listen
    low, high = LISTEN_PORTS
    for reuse in (False, True):       # not even in TIME_WAIT, if there is one
        for _ in range(high - low + 1):
            p = low + _next_listen % (high - low + 1)
            _next_listen += 1
            if p in RESERVED_PORTS:
                continue
            if tcp_port_free(p, reuse=reuse) and tcp_port_free(p, "0.0.0.0", reuse):
                return p
    raise AssertionError(f"no free port in this process's band {low}-{high}")


def run(cmd, check=True, timeout=60):
    return subprocess.run(cmd, check=check, timeout=timeout, capture_output=True, text=True)


def tail(path, n=80):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        return f"<cannot read {path}: {e}>"
    lines = data.decode("utf-8", "replace").splitlines()
    return "\n".join(lines[-n:])


# ------------------------------------------------------------------ docker

def docker_ps(instance, all=True, sandbox=None):  # noqa: A002 - the brief's name
    """Names of the containers labelled with this instance (and sandbox id)."""
    cmd = ["docker", "ps", "--no-trunc", "--format", "{{.Names}}",
           "--filter", f"label=nanobox.instance={instance}"]
    if sandbox:
        cmd += ["--filter", f"label=nanobox.sandbox={sandbox}"]
    if all:
        cmd.insert(2, "-a")
    out = run(cmd).stdout
    return sorted(line.strip() for line in out.splitlines() if line.strip())


def docker_inspect(name):
    out = run(["docker", "inspect", name]).stdout
    return jsonlib.loads(out)[0]


def docker_exists(name):
    return run(["docker", "inspect", "--format", "{{.Id}}", name], check=False).returncode == 0


def docker_top(name):
    """The container's processes as seen from the host (text lines)."""
    r = run(["docker", "top", name, "-eo", "pid,args"], check=False)
    if r.returncode != 0:
        return []
    return r.stdout.splitlines()[1:]


# nanobox-fcgi's host-wide lock on container removals (src/common/docker.c)
REMOVE_LOCK = "/run/lock/nanobox-docker-remove.lock"


def docker_rm(*ids, volumes=True):
    """docker rm -fv, one container at a time under nanobox's removal lock:
    Docker 20.10.24 deadlocks when containers of one network exit at once,
    and `docker rm` of several removes them in parallel. volumes=False: -f
    alone, leaving the anonymous volumes behind (as a lost removal would)."""
    with open(REMOVE_LOCK, "a+") as lock:
        for cid in ids:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                run(["docker", "rm", "-fv" if volumes else "-f", cid], check=False, timeout=120)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


def docker_rm_instance(instance):
    ids = run(["docker", "ps", "-aq", "--filter", f"label=nanobox.instance={instance}"],
              check=False).stdout.split()
    docker_rm(*ids)
    return len(ids)


def docker_rmi_instance(instance):
    """Remove every image labelled with this instance (templates, their
    build records): what a stack built goes with it. Returns the count."""
    def listed():
        return set(run(["docker", "images", "-aq", "--filter", f"label=nanobox.instance={instance}"],
                       check=False).stdout.split())
    ids = left = listed()
    # an image with a child (a snapshot a template was built FROM) cannot go
    # before the child, in whatever order one rmi takes them: again until
    # nothing more goes
    for _ in range(4):
        if not left:
            break
        run(["docker", "rmi", "-f", *sorted(left)], check=False, timeout=120)
        before, left = left, listed()
        if left == before:
            break
    return len(ids)


def image_present(image=IMAGE):
    return run(["docker", "image", "inspect", image], check=False).returncode == 0


def needs_image(image):
    """A skip mark for tests of an image Docker does not have: the base one
    is checked at session start (conftest.py), the python template may be
    missing where only `image.sh base` was run."""
    import pytest  # only the test files use pytest here
    return pytest.mark.skipif(not image_present(image),
                              reason=f"image {image} missing: build it with "
                                     f"src/setup/image.sh python (tests/run.sh and .ci/run do)")


def every_image():
    """pytest params: each image nanobox ships, for the tests of what must hold
    in every one of them (the hardening), with ids `base` and `python`."""
    import pytest
    return [pytest.param(IMAGE, id="base"),
            pytest.param(PYTHON_IMAGE, id="python", marks=needs_image(PYTHON_IMAGE))]


# --------------------------------------------------------------- processes

def _stat(pid):
    """(state, ppid) of pid, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
    except OSError:
        return None
    rest = s[s.rfind(")") + 2:].split()
    return rest[0], int(rest[1])


def pid_alive(pid):
    st = _stat(pid)
    return st is not None and st[0] != "Z"


def proc_children(ppid):
    """Live (non-zombie) children of ppid."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        st = _stat(int(d))
        if st and st[1] == ppid and st[0] != "Z":
            out.append(int(d))
    return sorted(out)


def proc_cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return ""


def proc_socket_inodes(pid):
    inodes = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return inodes
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        m = re.match(r"socket:\[(\d+)\]", link)
        if m:
            inodes.add(int(m.group(1)))
    return inodes


def unix_sockets():
    """Rows of /proc/net/unix as (inode, flags, state, path)."""
    rows = []
    with open("/proc/net/unix") as f:
        next(f)
        for line in f:
            p = line.split()
            if len(p) < 7:
                continue
            rows.append((int(p[6]), int(p[3], 16), int(p[5], 16), p[7] if len(p) > 7 else ""))
    return rows


# --------------------------------------------------------------------- API

class Api:
    """A client of one stack. Sandboxes made with create() are deleted at the
    end of the test that made them (see the api fixture)."""

    def __init__(self, stack):
        self.stack = stack
        self.created = []

    @property
    def base(self):
        return self.stack.url

    def headers(self, auth=True, headers=None):
        h = {}
        if auth is True or auth == "bearer":
            h["Authorization"] = f"Bearer {self.stack.api_key}"
        elif auth == "x-api-key":
            h["X-API-Key"] = self.stack.api_key
        if headers:
            h.update(headers)
        return h

    def request(self, method, path, json=None, data=None, headers=None, auth=True, timeout=60):
        h = self.headers(auth, headers)
        if json is not None:
            data = jsonlib.dumps(json)
            h.setdefault("Content-Type", "application/json")
        return requests.request(method, self.base + path, data=data, headers=h, timeout=timeout,
                                verify=self.stack.verify)

    def create_info(self, **fields):
        r = self.request("POST", "/sandbox", json=fields, timeout=120)
        assert r.status_code == 201, f"create {fields} -> {r.status_code} {r.text[:500]}"
        info = parse_json(r)
        self.created.append(info["sandboxId"])
        return info

    def create(self, **fields):
        return self.create_info(**fields)["sandboxId"]

    def exec_raw(self, sid, cmd, timeout=None, **kw):
        body = {"command": cmd, **kw}
        if timeout is not None:
            body["timeout"] = timeout
        http_timeout = 30 + (timeout or 30) * 2
        return self.request("POST", f"/sandbox/{sid}/exec", json=body, timeout=http_timeout)

    def exec(self, sid, cmd, **kw):  # noqa: A003 - the brief's name
        r = self.exec_raw(sid, cmd, **kw)
        assert r.status_code == 200, f"exec {cmd!r} -> {r.status_code} {r.text[:500]}"
        return parse_json(r)

    def get(self, sid):
        return self.request("GET", f"/sandbox/{sid}")

    def delete(self, sid):
        return self.request("DELETE", f"/sandbox/{sid}")

    def list(self, query=""):  # noqa: A003
        r = self.request("GET", "/sandbox" + query)
        assert r.status_code == 200, f"list -> {r.status_code} {r.text[:500]}"
        body = parse_json(r)
        assert isinstance(body.get("sandboxes"), list), body
        return body["sandboxes"]

    def list_ids(self, query=""):
        return sorted(s["sandboxId"] for s in self.list(query))

    # -- ephemeral ports
    def open_port_raw(self, sid, sandboxport=None, duration=None, hostport=None, **extra):
        """POST /sandbox/{sid}/ephemeralport; None fields are left out."""
        body = {k: v for k, v in (("sandboxport", sandboxport), ("duration", duration),
                                  ("hostport", hostport)) if v is not None}
        body.update(extra)
        return self.request("POST", f"/sandbox/{sid}/ephemeralport", json=body)

    def open_port(self, sid, sandboxport, duration=600, hostport=None):
        r = self.open_port_raw(sid, sandboxport, duration, hostport)
        assert r.status_code == 201, (f"open port {sandboxport} of {sid} (hostport {hostport}) -> "
                                      f"{r.status_code} {r.text[:500]}")
        return parse_json(r)

    def ports(self, sid):
        r = self.request("GET", f"/sandbox/{sid}/ports")
        assert r.status_code == 200, f"ports of {sid} -> {r.status_code} {r.text[:500]}"
        body = parse_json(r)
        assert isinstance(body.get("ports"), list), body
        return body["ports"]

    def close_port(self, sid, sandboxport):
        return self.request("DELETE", f"/sandbox/{sid}/ports/{sandboxport}")

    def cleanup(self):
        for sid in self.created:
            try:
                self.delete(sid)
            except requests.RequestException:
                pass
        self.created = []


def parse_json(resp):
    """Decode a response body as strict UTF-8 JSON (no lenient fallback)."""
    try:
        text = resp.content.decode("utf-8", "strict")
    except UnicodeDecodeError as e:
        raise AssertionError(f"response is not valid UTF-8: {e}: {resp.content[:200]!r}")
    try:
        return jsonlib.loads(text)
    except ValueError as e:
        raise AssertionError(f"response is not JSON ({e}): {resp.status_code} {text[:500]!r}")


def assert_error(resp, status, code):
    """The error shape: the status, a JSON body {error: str, code: slug}."""
    codes = {code} if isinstance(code, str) else set(code)
    statuses = {status} if isinstance(status, int) else set(status)
    desc = f"{resp.request.method} {resp.request.url} -> {resp.status_code} {resp.text[:300]!r}"
    assert resp.status_code in statuses, f"expected {sorted(statuses)} {sorted(codes)}; got {desc}"
    ctype = resp.headers.get("Content-Type", "")
    assert "application/json" in ctype, f"error is not JSON (Content-Type {ctype!r}): {desc}"
    body = parse_json(resp)
    assert isinstance(body, dict), desc
    assert isinstance(body.get("error"), str) and body["error"], f"no error message: {desc}"
    assert body.get("code") in codes, f"expected code {sorted(codes)}: {desc}"
    return body


def png_size(data):
    """(width, height) of a PNG, after checking it whole: signature, every
    chunk's CRC, and IDAT inflating to exactly the rows IHDR announces."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:16]
    pos, chunks, idat = 8, [], b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        crc, = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        assert zlib.crc32(kind + body) == crc, f"bad CRC in chunk {kind}"
        chunks.append(kind)
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
        if kind == b"IDAT":
            idat += body
        pos += 12 + length
    assert chunks[0] == b"IHDR" and chunks[-1] == b"IEND", chunks
    channels = {0: 1, 2: 3, 4: 2, 6: 4}[color]
    assert depth == 8, depth
    assert len(zlib.decompress(idat)) == height * (1 + width * channels)
    return width, height


def random_uuid():
    return str(uuid.uuid4())


_PORTS_KEYS_KNOWN = None


def ports_keys_known():
    """Does this nanobox-fcgi know the ephemeral-port config keys? (A build
    from before they landed would refuse to start with them.)"""
    global _PORTS_KEYS_KNOWN
    if _PORTS_KEYS_KNOWN is None:
        try:
            r = run([str(FCGI_BIN), "-c", "/dev/null", "-o", "ports_dir=/nonexistent",
                     "-o", f"port_range={PORTS_CONF['port_range']}", "-t"], check=False, timeout=30)
            _PORTS_KEYS_KNOWN = r.returncode == 0
        except (OSError, subprocess.SubprocessError):
            _PORTS_KEYS_KNOWN = False
    return _PORTS_KEYS_KNOWN


# ------------------------------------------------------------------- ports

def is_fwd(pid):
    """Is pid a nanobox-fwd process (by its argv[0])?"""
    argv0 = proc_cmdline(pid).split(" ", 1)[0]
    return FWD_NAME in os.path.basename(argv0)


def fwd_pids(ports_dir=None):
    """Live nanobox-fwd processes; with ports_dir, only those whose command
    line names a socket in it (the forwarders of one stack)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        pid = int(d)
        if not is_fwd(pid) or not pid_alive(pid):
            continue
        cmd = proc_cmdline(pid)
        if ports_dir is not None and str(ports_dir).rstrip("/") + "/" not in cmd:
            continue
        out.append(pid)
    return sorted(out)


def tcp_listener_inodes(port):
    """Inodes of TCP sockets listening on port (any address, v4 or v6)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    p = line.split()
                    local, state, inode = p[1], p[3], int(p[9])
                    if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                        inodes.add(inode)
        except OSError:
            continue
    return inodes


def tcp_listener_pids(port):
    """Pids holding a socket that listens on TCP port."""
    inodes = tcp_listener_inodes(port)
    if not inodes:
        return []
    return sorted(int(d) for d in os.listdir("/proc")
                  if d.isdigit() and proc_socket_inodes(int(d)) & inodes)


def tcp_refused(port, host="127.0.0.1", timeout=2.0):
    """True when a connect to host:port is refused (nothing listens)."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return False
    except ConnectionRefusedError:
        return True


def tcp_port_free(port, host="127.0.0.1", reuse=True):
    """Can a new listener bind host:port right now? With reuse (as the
    forwarder and nginx bind), a port whose old connections linger in
    TIME_WAIT counts as free; without it (as a test's plain bind), not."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        if reuse:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
            s.listen(1)
        except OSError:
            return False
    return True


def free_port_in(low, high, host="127.0.0.1", avoid=()):
    """A port in [low, high] nothing listens on, picked at random; one with
    no connection left in TIME_WAIT either when there is one, so that any
    caller can bind it (a band of 50 ports is reused within a minute)."""
    ports = [p for p in range(low, high + 1) if p not in avoid]
    random.shuffle(ports)
    for reuse in (False, True):
        for p in ports:
            if tcp_port_free(p, host, reuse) and tcp_port_free(p, "0.0.0.0", reuse):
                return p
    raise AssertionError(f"no free port in {low}-{high}")


# ------------------------------------------------------------------- stack

_stacks_made = 0


def stack_uid_base():
    """A uid range of its own for each stack this process starts: stacks
    that run at once (xdist workers, a test's extra stack beside the main
    one) must not share the sandboxes' uids, or the kernel's per-user limits
    (inotify, mqueues, processes) would be shared between tests as between
    tenants. 4096 uids a stack, 256 stacks a band, above any login uid."""
    global _stacks_made
    _stacks_made += 1
    return 1_000_000 + (BAND_INDEX * 256 + _stacks_made % 256) * 4096


class Stack:
    """nanobox-fcgi + nginx on a temp dir, with its own instance label."""

    def __init__(self, name="main", extra_conf=None, spawn_fcgi=False, tls=None, log_file=False,
                 render_args=()):
        self.name = name
        # more options of render-nginx.sh (a test's own request rate: --rate 2r/s)
        self.render_args = list(render_args)
        # True: started the spawn-fcgi way (socket bound by spawn-fcgi, handed over on fd 0)
        self.spawn_fcgi = spawn_fcgi
        # (certificate, key, CA file): nginx serves https only, rendered with
        # render-nginx.sh --tls-cert/--tls-key; clients verify against the CA
        self.tls = tls
        # True: nanobox-fcgi writes log_path itself (-l), reopened on SIGHUP
        self.log_file = log_file
        self.dir = Path(tempfile.mkdtemp(prefix=f"nanobox-it-{name}-"))
        # nginx workers may run as another user: they need to reach the socket.
        os.chmod(self.dir, 0o755)
        self.instance = "test-" + secrets.token_hex(4)
        self.api_key = secrets.token_hex(16)
        self.sock = str(self.dir / "fcgi.sock")
        self.state = str(self.dir / "state")
        self.conf_path = str(self.dir / "nanobox.conf")
        self.pidfile = str(self.dir / "nanobox.pid")
        self.log_path = str(self.dir / "nanobox.log")
        self.nginx_prefix = self.dir / "nginx"
        self.nginx_log = str(self.nginx_prefix / "error.log")
        # Forwarders' unix sockets; nginx's workers must reach into it.
        self.ports_dir = str(self.dir / "ports")
        os.mkdir(self.ports_dir, 0o755)
        # nginx's port is chosen now: port_url names it.
        self.port = free_port()
        self.scheme = "https" if tls else "http"
        self.url = f"{self.scheme}://127.0.0.1:{self.port}"
        self.proc = None          # nanobox-fcgi master (our child)
        self.nginx_proc = None
        self.nginx_pid = None
        self.conf = {
            "instance": self.instance,
            "listen": self.sock,
            "state_file": self.state,
            "api_key": self.api_key,
            "sandbox_uid_base": str(stack_uid_base()),
            **BASE_CONF,
        }
        if ports_keys_known():
            self.conf.update(PORTS_CONF)
            self.conf["ports_dir"] = self.ports_dir
            self.conf["port_url"] = f"{self.scheme}://{{port}}-{{id}}.{PORTS_DOMAIN}:{self.port}/"
        for k, v in (extra_conf or {}).items():
            self.conf[k] = str(v).replace("{url}", self.url)  # a node's node_url: its own
        self.api = Api(self)
        self.notes = []           # things teardown noticed

    # -- configuration
    def write_conf(self):
        with open(self.conf_path, "w") as f:
            f.write(f"# nanobox integration test stack {self.name}\n")
            for k, v in self.conf.items():
                f.write(f"{k} = {v}\n")

    def conf_int(self, key):
        return int(self.conf[key])

    # -- nanobox-fcgi
    def start_fcgi(self):
        self.write_conf()
        env = dict(os.environ)
        logf = open(self.log_path, "ab")
        logf.write(f"\n==== test harness: starting {FCGI_BIN} at {time.ctime()} ====\n".encode())
        logf.flush()
        cmd = [str(FCGI_BIN), "-c", self.conf_path, "-p", self.pidfile]
        if self.log_file:
            cmd += ["-l", self.log_path]
        if self.spawn_fcgi:
            # -n: spawn-fcgi binds the socket, then execs us in place (same pid)
            cmd = ["spawn-fcgi", "-n", "-s", self.sock, "-M", "0666", "--"] + cmd
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
            env=env, start_new_session=True, cwd=str(self.dir))
        logf.close()

        def ready():
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"nanobox-fcgi exited with {self.proc.returncode} at start\n"
                    f"--- {self.log_path} ---\n{tail(self.log_path)}")
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(1)
                s.connect(self.sock)
            return True

        deadline = time.monotonic() + 30
        while True:
            try:
                ready()
                break
            except RuntimeError:
                raise
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"nanobox-fcgi socket {self.sock} not connectable after 30 s\n"
                                       f"--- log ---\n{tail(self.log_path)}")
                time.sleep(0.05)

    @property
    def master_pid(self):
        return self.proc.pid if self.proc else None

    def children(self):
        """The pool's processes under the master: workers and the reaper. Not
        the port forwarders, although the master (a child subreaper) is
        their parent too: they are not the pool, outlive it by design, and
        come and go with the ports."""
        if not self.proc or self.proc.poll() is not None:
            return []
        return [p for p in proc_children(self.master_pid) if not is_fwd(p)]

    def all_pids(self):
        return ([self.master_pid] if self.proc and self.proc.poll() is None else []) + self.children()

    def listen_inodes(self):
        return {ino for ino, flags, st, path in unix_sockets()
                if path == self.sock and flags & 0x10000}

    def workers(self):
        """Children of the master that serve requests (not the reaper, not the
        events follower: they do not hold the listening socket)."""
        kids = self.children()
        named = [p for p in kids if "reaper" in proc_cmdline(p).lower()]
        if named:
            return [p for p in kids if p not in named]
        listen = self.listen_inodes()
        holders = [p for p in kids if proc_socket_inodes(p) & listen]
        return holders if holders and len(holders) < len(kids) else kids

    def busy_workers(self):
        """Children holding an accepted FastCGI connection right now."""
        accepted = {ino for ino, flags, st, path in unix_sockets()
                    if path == self.sock and st == 3 and not flags & 0x10000}
        if not accepted:
            return []
        return [p for p in self.children() if proc_socket_inodes(p) & accepted]

    def kill_all(self, sig=signal.SIGKILL):
        """Signal the master and all its children (processes this stack started)."""
        pids = self.all_pids()
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        return pids

    def crash(self):
        """SIGKILL master + workers + reaper and wait until they are all gone."""
        pids = self.kill_all(signal.SIGKILL)
        if self.proc:
            self.proc.wait(timeout=10)
        wait_until(lambda: not any(pid_alive(p) for p in pids), timeout=10,
                   what=f"killed nanobox processes {pids} to die")

    def restart(self):
        """Crash the service (SIGKILL everything) and start it again on the same
        config and state file; nginx stays up."""
        self.crash()
        self.start_fcgi()
        self.wait_healthy()

    def stop_fcgi(self, timeout=20):
        """SIGTERM, then SIGKILL what is left. Returns True if SIGTERM sufficed."""
        if not self.proc or self.proc.poll() is not None:
            return True
        kids = self.children()
        os.kill(self.master_pid, signal.SIGTERM)
        graceful = True
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            graceful = False
            self.notes.append(f"nanobox-fcgi did not exit within {timeout}s of SIGTERM")
            self.kill_all(signal.SIGKILL)
            self.proc.wait(timeout=10)
        for pid in kids:
            if pid_alive(pid) and "nanobox" in proc_cmdline(pid):
                self.notes.append(f"child {pid} outlived the master")
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        return graceful

    # -- nginx
    def start_nginx(self):
        if self.port is None:
            self.port = free_port()
        self.url = f"{self.scheme}://127.0.0.1:{self.port}"
        prefix = self.nginx_prefix
        prefix.mkdir(parents=True, exist_ok=True)
        # Temp dirs must be writable by nginx's worker user, whoever that is.
        os.chmod(prefix, 0o1777)
        conf = prefix / "nginx.conf"
        extra_g = []
        if RENDER_NGINX.exists():
            tls = ["--tls-cert", str(self.tls[0]), "--tls-key", str(self.tls[1])] if self.tls else []
            r = run(["bash", str(RENDER_NGINX), "--ports-dir", self.ports_dir,
                     "--ports-domain", PORTS_DOMAIN, *tls, *self.render_args, str(prefix), self.sock,
                     f"127.0.0.1:{self.port}", str(prefix)], check=False)
            if r.returncode != 0 or not conf.exists():
                raise RuntimeError(f"render-nginx.sh failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
        else:
            self._write_own_nginx_conf(conf)
        text = conf.read_text()
        if not re.search(r"^\s*pid\s", text, re.M):
            extra_g.append(f"pid {prefix}/nginx.pid;")
        if not re.search(r"^\s*daemon\s", text, re.M):
            extra_g.append("daemon off;")
        cmd = [NGINX, "-e", self.nginx_log, "-c", str(conf), "-p", str(prefix) + "/"]
        if extra_g:
            cmd += ["-g", " ".join(extra_g)]
        t = run(cmd + ["-t"], check=False)
        if t.returncode != 0:
            raise RuntimeError(f"nginx -t failed for {conf}:\n{t.stderr}\n--- conf ---\n{text}")
        out = open(prefix / "nginx.stdout", "ab")
        self.nginx_proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out,
                                           stderr=subprocess.STDOUT, start_new_session=True)
        out.close()
        time.sleep(0.2)
        if self.nginx_proc.poll() is None:
            self.nginx_pid = self.nginx_proc.pid          # foreground: ours
        elif self.nginx_proc.returncode == 0:
            # it daemonized: find its pid file
            m = re.search(r"^\s*pid\s+([^;\s]+)\s*;", text, re.M)
            pidf = Path(m.group(1)) if m else prefix / "nginx.pid"
            if not pidf.is_absolute():
                pidf = prefix / pidf
            self.nginx_pid = int(wait_until(lambda: pidf.read_text().strip(), 5,
                                            what=f"nginx pid file {pidf}"))
        else:
            raise RuntimeError(f"nginx exited {self.nginx_proc.returncode}:\n{tail(self.nginx_log)}")

    def _write_own_nginx_conf(self, conf):
        p = self.nginx_prefix
        loc = f"""
            include /etc/nginx/fastcgi_params;
            fastcgi_pass unix:{self.sock};
            fastcgi_buffering off;
            fastcgi_request_buffering on;
            fastcgi_read_timeout 300s;
            fastcgi_send_timeout 300s;
"""
        conf.write_text(f"""# written by tests/integration (no src/setup/render-nginx.sh yet)
worker_processes 1;
pid {p}/nginx.pid;
daemon off;
error_log {p}/error.log info;
events {{ worker_connections 512; }}
http {{
    access_log {p}/access.log;
    client_body_temp_path {p}/client_body;
    fastcgi_temp_path {p}/fastcgi;
    proxy_temp_path {p}/proxy;
    uwsgi_temp_path {p}/uwsgi;
    scgi_temp_path {p}/scgi;
    client_max_body_size 4m;
    server {{
        listen 127.0.0.1:{self.port};
        location = /sandbox {{ {loc} }}
        location /sandbox/ {{ {loc} }}
        location = /healthz {{ {loc} }}
    }}
}}
""")

    def stop_nginx(self):
        if not self.nginx_pid:
            return
        try:
            os.kill(self.nginx_pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        if self.nginx_proc and self.nginx_proc.pid == self.nginx_pid:
            try:
                self.nginx_proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.nginx_pid, signal.SIGKILL)
                self.nginx_proc.wait(timeout=10)
        else:
            try:
                wait_until(lambda: not pid_alive(self.nginx_pid), 10, what="nginx to stop")
            except AssertionError:
                os.kill(self.nginx_pid, signal.SIGKILL)
        self.nginx_pid = None

    # -- ports
    def fwd_pids(self):
        """The forwarders of this stack (their socket is in its ports_dir)."""
        return fwd_pids(self.ports_dir)

    def port_sockets(self):
        """Names of the files in ports_dir."""
        try:
            return sorted(os.listdir(self.ports_dir))
        except OSError:
            return []

    def port_socket(self, sid, sandboxport):
        return os.path.join(self.ports_dir, f"{sid}-{sandboxport}.sock")

    def port_host(self, sid, sandboxport):
        """The Host header nginx routes to a port's forwarder."""
        return f"{sandboxport}-{sid}.{PORTS_DOMAIN}"

    def kill_forwarders(self):
        """Teardown's safety net: SIGKILL forwarders of this stack that are
        still alive (the service should have ended them). Returns their pids."""
        pids = self.fwd_pids()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return pids

    # -- whole stack
    def start(self):
        self.start_fcgi()
        self.start_nginx()
        self.wait_healthy()
        return self

    @property
    def verify(self):
        """requests' verify= for this stack: its CA file under TLS."""
        return str(self.tls[2]) if self.tls else True

    def wait_healthy(self, timeout=30):
        def ok():
            r = requests.get(self.url + "/healthz", timeout=5, verify=self.verify)
            return r.status_code == 200
        wait_until(ok, timeout, 0.1, what=f"{self.url}/healthz to answer 200")

    def stop(self):
        """Stop everything the stack started, then remove every container with
        its instance label. Returns the number of containers left behind."""
        try:
            self.stop_nginx()
        finally:
            try:
                self.stop_fcgi()
            finally:
                left = docker_rm_instance(self.instance)
                images = docker_rmi_instance(self.instance)
                if images:
                    self.notes.append(f"{images} image(s) of this instance removed")
                fwd = self.kill_forwarders()
                if fwd:
                    self.notes.append(f"forwarder(s) {fwd} outlived the stack: killed")
                msg = (f"==== test harness: stack {self.name} stopped; {left} container(s) with "
                       f"nanobox.instance={self.instance} force-removed at teardown; "
                       f"notes: {self.notes} ====\n")
                with open(self.log_path, "a") as f:
                    f.write(msg)
                print(msg, end="")
        return left

    def remove_tmp(self):
        if not KEEP_TMP:
            shutil.rmtree(self.dir, ignore_errors=True)

    def sanitizer_reports(self, since=0):
        try:
            with open(self.log_path, "rb") as f:
                f.seek(since)
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return []
        return [ln for ln in text.splitlines() if SANITIZER_PATTERNS.search(ln)]

    def log_size(self):
        try:
            return os.path.getsize(self.log_path)
        except OSError:
            return 0

    def settle(self, timeout=30):
        """Wait until every container with this stack's label is a sandbox
        the service lists, i.e. none is still going away after its answer
        (POST /run's sandbox, an expired one the reaper has not removed yet).
        In a parallel run a worker's tests follow one another in any order,
        and a test that compares the stack's containers before and after
        must not see the previous test's go. What is still there after
        timeout is noted, not failed: leaks are for the leak tests."""
        if not self.proc or self.proc.poll() is not None:
            return []

        def stray():
            listed = {self.container(sid) for sid in self.api.list_ids()}
            return [c for c in docker_ps(self.instance) if c not in listed]

        try:
            wait_until(lambda: not stray(), timeout, 0.1,
                       what=f"the containers of stack {self.name} to be its listed sandboxes")
            return []
        except AssertionError:
            left = stray()
            self.notes.append(f"containers not listed after {timeout}s: {left}")
            return left
        except (requests.RequestException, OSError, subprocess.SubprocessError):
            return []

    def live_containers(self):
        return docker_ps(self.instance, all=True)

    def container(self, sid):
        return f"nanobox-{sid}"
