"""
nbtest.py - the machinery of the integration suite: start a real stack
(nanobox-fcgi + nginx in front of it, on the machine's dockerd), talk to it,
look at its processes and containers, and tear it all down again.

Everything a test starts lives in a fresh temp dir; every container the
service creates carries the label nanobox.instance=<random instance>, which is
how teardown finds (and force-removes) whatever is left behind.

Only loopback and the project's own sandboxes are ever contacted.
"""

import json as jsonlib
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("NANOBOX_BUILD", str(REPO / "build")))
FCGI_BIN = BUILD / "nanobox-fcgi"
IMAGE = os.environ.get("NANOBOX_TEST_IMAGE", "nanobox:latest")
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
}

# What the test config implies (asserted by the tests).
DEFAULT_MEMORY = 256 * 1024 * 1024
DEFAULT_NANO_CPUS = 500_000_000
DEFAULT_PIDS = 128
MAX_OUTPUT = 65536
MAX_BODY = 65536
MAX_COMMAND = 16384

SANITIZER_PATTERNS = re.compile(
    r"ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer|"
    r"UndefinedBehaviorSanitizer|AddressSanitizer:DEADLYSIGNAL"
)

UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


# ---------------------------------------------------------------- utilities

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


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


def docker_rm_instance(instance):
    ids = run(["docker", "ps", "-aq", "--filter", f"label=nanobox.instance={instance}"],
              check=False).stdout.split()
    if ids:
        run(["docker", "rm", "-f", *ids], check=False, timeout=120)
    return len(ids)


def image_present(image=IMAGE):
    return run(["docker", "image", "inspect", image], check=False).returncode == 0


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
        return requests.request(method, self.base + path, data=data, headers=h, timeout=timeout)

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


def random_uuid():
    return str(uuid.uuid4())


# ------------------------------------------------------------------- stack

class Stack:
    """nanobox-fcgi + nginx on a temp dir, with its own instance label."""

    def __init__(self, name="main", extra_conf=None):
        self.name = name
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
        self.port = None
        self.url = None
        self.proc = None          # nanobox-fcgi master (our child)
        self.nginx_proc = None
        self.nginx_pid = None
        self.conf = {
            "instance": self.instance,
            "listen": self.sock,
            "state_file": self.state,
            "api_key": self.api_key,
            **BASE_CONF,
        }
        for k, v in (extra_conf or {}).items():
            self.conf[k] = str(v)
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
        self.proc = subprocess.Popen(
            [str(FCGI_BIN), "-c", self.conf_path, "-p", self.pidfile],
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
        return proc_children(self.master_pid) if self.proc and self.proc.poll() is None else []

    def all_pids(self):
        return ([self.master_pid] if self.proc and self.proc.poll() is None else []) + self.children()

    def listen_inodes(self):
        return {ino for ino, flags, st, path in unix_sockets()
                if path == self.sock and flags & 0x10000}

    def workers(self):
        """Children of the master that serve requests (not the reaper)."""
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
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        prefix = self.nginx_prefix
        prefix.mkdir(parents=True, exist_ok=True)
        # Temp dirs must be writable by nginx's worker user, whoever that is.
        os.chmod(prefix, 0o1777)
        conf = prefix / "nginx.conf"
        extra_g = []
        if RENDER_NGINX.exists():
            r = run(["bash", str(RENDER_NGINX), str(prefix), self.sock,
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

    # -- whole stack
    def start(self):
        self.start_fcgi()
        self.start_nginx()
        self.wait_healthy()
        return self

    def wait_healthy(self, timeout=30):
        def ok():
            r = requests.get(self.url + "/healthz", timeout=5)
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

    def live_containers(self):
        return docker_ps(self.instance, all=True)

    def container(self, sid):
        return f"nanobox-{sid}"
