"""
nbetcd.py - a real etcd cluster on loopback for the cluster tests: start n
members of Debian's etcd (etcd-server, /usr/bin/etcd), talk to them through
etcd's v3 JSON gateway (POST /v3/kv/put, /v3/kv/range, ...: keys and values
base64, int64s as JSON strings), stop and start members, tear it all down.

    cl = EtcdCluster(3)            # or, in a fixture: etcd_cluster(request)
    conf["etcd_endpoints"] = cl.endpoints_conf
    cl.put("k", "v", lease=cl.grant(5)); cl.get("k") -> b"v"
    cl.stop_member(0); cl.start_member(0)
    cl.close()

Ports: every member's client and peer port is taken with nbtest.free_port()
from the port band this test process holds alone (nbtest, "port bands"),
never etcd's well-known 2379/2380 (a system etcd may listen there), so xdist
workers, other checkouts' runs and a system etcd coexist. They stay reserved
(nbtest.RESERVED_PORTS) until close(), so that a member stopped for a while
finds its ports again when it starts. Everything else is
the cluster's own too: a temp dir (data dirs and a log per member), a
cluster token, the pids it started. Only those pids are ever signalled, and
only while their process is still our unreaped child.

Helpers try the members that are up, in turn: a stopped member (or one that
does not answer) makes them try the next. When none answers, or all answer
an error, they raise EtcdError, which the caller can catch.

Quorum lost (one member of three up), etcd 3.4's gateway holds a write, a
lease grant or a default (linearizable) read for its request timeout, 5 s +
2 election timeouts = 7 s, then answers 503 {"error": "etcdserver: request
timed out", "code": 14} or, once the member has noticed it has no leader,
500 {"error": "context deadline exceeded", "code": 2}: no quick "no leader"
answer. A serializable read (get(..., serializable=True)) still answers
from the member's own copy. A write that timed out is not undone either:
when the member left still held it in its log (it was, or had just become,
the leader), it commits once quorum is back; its outcome is unknown.

Standard library only (urllib, subprocess, json, base64), plus nbtest's
port band and process helpers.
"""

import atexit
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

import nbtest

ETCD = os.environ.get("NANOBOX_TEST_ETCD") or shutil.which(
    "etcd", path=os.environ.get("PATH", "") + ":/usr/bin")
START_TIMEOUT = 30.0      # a cluster (or a restarted member) serves within this
STOP_TIMEOUT = 10.0       # SIGTERM, then SIGKILL after this
REQUEST_TIMEOUT = 10.0    # one gateway request to one member (> etcd's 7 s)

_LIVE = []                # clusters not closed yet, closed at exit whatever happens


class EtcdError(Exception):
    """No member that is up carried out the request (the errors of each)."""


def _b64(data):
    if isinstance(data, str):
        data = data.encode()
    return base64.b64encode(data).decode()


def _unb64(s):
    return base64.b64decode(s or "")


def _prefix_end(prefix):
    """etcd's range_end for every key starting with prefix: its last byte
    below 0xff plus one, the rest dropped ("\\0": up to the end of keys)."""
    p = bytearray(prefix.encode() if isinstance(prefix, str) else prefix)
    while p:
        if p[-1] < 0xFF:
            p[-1] += 1
            return bytes(p)
        p.pop()
    return b"\0"


def need_etcd():
    """The etcd binary, or a test failure naming its package."""
    if ETCD is None or not os.access(ETCD, os.X_OK):
        import pytest  # only the test files use pytest here
        pytest.fail("the cluster tests need etcd (tests/run.sh installs it: apt install etcd-server)")
    return ETCD


class EtcdCluster:
    """n etcd members on loopback, started and serving when the constructor
    returns (a write through the gateway succeeded)."""

    def __init__(self, n=3, tmpdir=None, timeout=REQUEST_TIMEOUT, tls=None):
        """tls: None (plain http), or a dict of PEM files: ca (that signed
        every certificate), cert and key (the members'), client_cert and
        client_key (what the harness's own calls present): the members then
        serve https and ask every client for a certificate of that CA."""
        self.etcd = need_etcd()
        self.tls = tls
        self.ssl = None
        if tls:
            import ssl
            self.ssl = ssl.create_default_context(cafile=str(tls["ca"]))
            self.ssl.load_cert_chain(str(tls["client_cert"]), str(tls["client_key"]))
        self.n = n
        self.timeout = timeout
        self.dir = tmpdir or tempfile.mkdtemp(prefix="nanobox-etcd-")
        os.makedirs(self.dir, exist_ok=True)
        self.token = f"nbetcd-{os.getpid()}-{os.urandom(6).hex()}"
        self.names = [f"m{i}" for i in range(n)]
        self.client_ports = []
        self.peer_ports = []
        for _ in range(n):
            self.client_ports.append(nbtest.free_port())
            self.peer_ports.append(nbtest.free_port())
        # a stopped member's ports are its own until close()
        nbtest.RESERVED_PORTS.update(self.client_ports + self.peer_ports)
        scheme = "https" if tls else "http"
        self.endpoints = [f"{scheme}://127.0.0.1:{p}" for p in self.client_ports]
        self.endpoints_conf = ",".join(self.endpoints)
        self.peer_urls = [f"http://127.0.0.1:{p}" for p in self.peer_ports]
        self.initial_cluster = ",".join(f"{nm}={u}" for nm, u in zip(self.names, self.peer_urls))
        self.data_dirs = [os.path.join(self.dir, f"{nm}.etcd") for nm in self.names]
        self.log_paths = [os.path.join(self.dir, f"{nm}.log") for nm in self.names]
        self.procs = [None] * n
        self.started_pids = []    # every pid this cluster ever started
        self.closed = False
        _LIVE.append(self)
        try:
            for i in range(n):
                self._spawn(i, "new")
            self.wait_writable(START_TIMEOUT, what=f"a new cluster of {n}")
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------ members

    def _spawn(self, i, state):
        env = {k: v for k, v in os.environ.items() if not k.startswith("ETCD")}
        cmd = [self.etcd, "--name", self.names[i], "--data-dir", self.data_dirs[i],
               "--listen-client-urls", self.endpoints[i], "--advertise-client-urls", self.endpoints[i],
               "--listen-peer-urls", self.peer_urls[i],
               "--initial-advertise-peer-urls", self.peer_urls[i],
               "--initial-cluster", self.initial_cluster, "--initial-cluster-state", state,
               "--initial-cluster-token", self.token,
               "--logger", "zap", "--log-outputs", "stderr"]
        if self.tls:
            cmd += ["--cert-file", str(self.tls["cert"]), "--key-file", str(self.tls["key"]),
                    "--client-cert-auth", "--trusted-ca-file", str(self.tls["ca"])]
        with open(self.log_paths[i], "ab") as log:
            log.write(f"==== nbetcd: {' '.join(cmd)}\n".encode())
            log.flush()
            self.procs[i] = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                             stderr=subprocess.STDOUT, env=env,
                                             start_new_session=True, cwd=self.dir)
        self.started_pids.append(self.procs[i].pid)

    def running(self, i):
        p = self.procs[i]
        return p is not None and p.poll() is None

    def up(self):
        """Indexes of the members whose process runs."""
        return [i for i in range(self.n) if self.running(i)]

    def pid(self, i):
        return self.procs[i].pid if self.running(i) else None

    def _terminate(self, i):
        """SIGTERM member i's process (ours, not reaped yet), SIGKILL after
        STOP_TIMEOUT; wait for it."""
        p = self.procs[i]
        if p is None:
            return
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)     # Popen signals only its own, unreaped child
            try:
                p.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(STOP_TIMEOUT)
        self.procs[i] = None

    def stop_member(self, i):
        """Stop member i (SIGTERM, wait for its exit); its data dir is kept."""
        if not self.running(i):
            raise AssertionError(f"etcd member {i} is not running")
        self._terminate(i)

    def start_member(self, i, timeout=START_TIMEOUT):
        """Start member i again on its data dir and ports. Returns when it
        answers (a serializable read); when a quorum of members then runs,
        also when a write through it succeeds."""
        if self.running(i):
            raise AssertionError(f"etcd member {i} is running already")
        self._spawn(i, "existing")
        deadline = time.monotonic() + timeout

        def serves():
            if not self.running(i):
                raise AssertionError(f"etcd member {i} exited while starting\n{self.logs()}")
            try:
                return self.get("nbetcd/ready", serializable=True, members=[i], timeout=2) or True
            except EtcdError:
                return False
        while not serves():
            if time.monotonic() > deadline:
                raise AssertionError(f"etcd member {i} did not serve within {timeout:.0f} s\n{self.logs()}")
            time.sleep(0.1)
        if len(self.up()) > self.n // 2:
            self.wait_writable(max(1.0, deadline - time.monotonic()), members=[i],
                               what=f"a write through restarted member {i}")

    def leader(self):
        """Index of the member that is leader, as the members that are up
        see it (/v3/maintenance/status); None when none knows one."""
        ids = {}
        leader = 0
        for i in self.up():
            try:
                st = self.call("/v3/maintenance/status", {}, members=[i], timeout=2)
            except EtcdError:
                continue
            ids[int(st["header"]["member_id"])] = i
            leader = leader or int(st.get("leader", 0))
        return ids.get(leader) if leader else None

    def wait_writable(self, timeout=START_TIMEOUT, members=None, what="the cluster"):
        """Wait until a write through the gateway succeeds; on timeout an
        AssertionError with the last error and the tail of every member's log."""
        deadline = time.monotonic() + timeout
        last = None
        while True:
            for i in (members if members is not None else range(self.n)):
                if self.procs[i] is not None and self.procs[i].poll() is not None:
                    raise AssertionError(f"etcd member {i} exited ({self.procs[i].returncode}) while "
                                         f"waiting for {what}\n{self.logs()}")
            try:
                self.put("nbetcd/ready", str(time.time()), members=members, timeout=2)
                return
            except EtcdError as e:
                last = e
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: no write succeeded within {timeout:.0f} s: {last}\n"
                                     f"{self.logs()}")
            time.sleep(0.2)

    def logs(self, n=25):
        return "\n".join(f"--- {self.log_paths[i]} (tail) ---\n{nbtest.tail(self.log_paths[i], n)}"
                         for i in range(self.n))

    def close(self):
        """Stop every member this cluster started (SIGTERM, SIGKILL after a
        bound) and remove its temp dir (kept with NANOBOX_TEST_KEEP=1)."""
        if self.closed:
            return
        self.closed = True
        try:
            for i in range(self.n):
                self._terminate(i)
        finally:
            if self in _LIVE:
                _LIVE.remove(self)
            nbtest.RESERVED_PORTS.difference_update(self.client_ports + self.peer_ports)
            if not nbtest.KEEP_TMP:
                shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------- gateway calls

    def call(self, path, body, members=None, timeout=None):
        """POST body (a dict) to path on each member that is up, in turn,
        until one answers 200; its JSON answer. EtcdError when none did."""
        errors = []
        for i in (members if members is not None else range(self.n)):
            if not self.running(i):
                errors.append(f"member {i}: not running")
                continue
            req = urllib.request.Request(self.endpoints[i] + path, data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"}, method="POST")
            t0 = time.monotonic()
            try:
                with urllib.request.urlopen(req, timeout=timeout or self.timeout,
                                            context=self.ssl) as r:
                    return json.loads(r.read() or b"{}")
            except urllib.error.HTTPError as e:
                detail = e.read()[:500].decode("utf-8", "replace")
                errors.append(f"member {i}: HTTP {e.code} {detail} after {time.monotonic() - t0:.1f} s")
            except (urllib.error.URLError, OSError, socket.timeout, ValueError) as e:
                errors.append(f"member {i}: {type(e).__name__}: {getattr(e, 'reason', e)} "
                              f"after {time.monotonic() - t0:.1f} s")
        raise EtcdError(f"POST {path}: " + "; ".join(errors or ["no member"]))

    def put(self, key, value, lease=None, **kw):
        body = {"key": _b64(key), "value": _b64(value)}
        if lease:
            body["lease"] = str(lease)
        self.call("/v3/kv/put", body, **kw)

    def _range(self, key, range_end=None, serializable=False, **kw):
        body = {"key": _b64(key)}
        if range_end is not None:
            body["range_end"] = _b64(range_end)
        if serializable:
            body["serializable"] = True
        return self.call("/v3/kv/range", body, **kw).get("kvs", [])

    def get(self, key, serializable=False, **kw):
        """The value of key (bytes), or None."""
        kvs = self._range(key, serializable=serializable, **kw)
        return _unb64(kvs[0].get("value")) if kvs else None

    def get_prefix(self, prefix, serializable=False, **kw):
        """{key (str): value (bytes)} of every key starting with prefix."""
        kvs = self._range(prefix, _prefix_end(prefix), serializable=serializable, **kw)
        return {_unb64(kv["key"]).decode("utf-8", "replace"): _unb64(kv.get("value")) for kv in kvs}

    def lease_of(self, key, **kw):
        """The id of the lease key is attached to; 0 when none (or no key)."""
        kvs = self._range(key, **kw)
        return int(kvs[0].get("lease", 0)) if kvs else 0

    def delete(self, key, **kw):
        """Delete key; the number of keys deleted."""
        return int(self.call("/v3/kv/deleterange", {"key": _b64(key)}, **kw).get("deleted", 0))

    def delete_prefix(self, prefix, **kw):
        body = {"key": _b64(prefix), "range_end": _b64(_prefix_end(prefix))}
        return int(self.call("/v3/kv/deleterange", body, **kw).get("deleted", 0))

    def grant(self, ttl, **kw):
        """A new lease of ttl seconds; its id."""
        return int(self.call("/v3/lease/grant", {"TTL": str(int(ttl))}, **kw)["ID"])

    def lease_ttl(self, lease_id, **kw):
        """Seconds left on the lease; -1 when it is gone (expired, revoked)."""
        return int(self.call("/v3/lease/timetolive", {"ID": str(lease_id)}, **kw).get("TTL", -1))

    def revoke(self, lease_id, **kw):
        """Revoke the lease (its keys go with it)."""
        self.call("/v3/lease/revoke", {"ID": str(lease_id)}, **kw)


def etcd_cluster(request, n=3, **kw):
    """An EtcdCluster closed when request's fixture scope ends: for a fixture,
    `return nbetcd.etcd_cluster(request)`. A failure shows the members' logs."""
    cl = EtcdCluster(n, **kw)
    request.addfinalizer(cl.close)
    return cl


@atexit.register
def _close_all():
    for cl in list(_LIVE):
        cl.close()
