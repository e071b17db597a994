"""Running nanobox-fcgi like a service (docs/INSTALL.md): its log file (-l)
is reopened on SIGHUP in the master and in every worker, without failing a
request in flight, so logrotate can move it away (the installed logrotate
file, run for real when logrotate is installed); under systemd it tells
$NOTIFY_SOCKET when it is ready (Type=notify) and when it stops."""

import os
import shutil
import signal
import subprocess
import socket
import tempfile
import time
from pathlib import Path
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from nbtest import BUILD, docker_top, random_uuid, run, wait_until


def text(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def probe(st):
    """A request whose access line is unmistakable: GET of an unknown sandbox."""
    sid = random_uuid()
    r = st.api.get(sid)
    assert r.status_code == 404, r.text[:300]
    return f"/sandbox/{sid}"


def test_sighup_reopens_the_log_file_and_requests_in_flight_all_succeed(make_stack):
    st = make_stack("hup", log_file=True, workers_min=4)
    sid = st.api.create(ttl=600)
    before = probe(st)
    wait_until(lambda: before in text(st.log_path), 10, what="the access line in the log")

    # slow execs in flight across the rotation and the HUP
    def slow(i):
        r = st.api.exec_raw(sid, f"sleep 2; echo done {i}", timeout=30)
        return r.status_code, r.text

    with ThreadPoolExecutor(6) as pool:
        futures = [pool.submit(slow, i) for i in range(6)]
        started = set()

        def all_started():
            started.update(line.split(None, 1)[0] for line in docker_top(f"nanobox-{sid}")
                           if line.split(None, 1)[-1] == "sleep 2")
            return len(started) >= 6
        wait_until(all_started, 10, 0.05, what="the six execs to start")
        rotated = st.log_path + ".1"
        os.rename(st.log_path, rotated)            # what logrotate does
        os.kill(st.master_pid, signal.SIGHUP)
        wait_until(lambda: "log file reopened" in text(st.log_path), 10,
                   what="the master to reopen its log file")
        results = [f.result(timeout=60) for f in futures]
    for i, (status, body) in enumerate(results):
        assert status == 200 and f"done {i}" in body, (i, status, body[:300])

    # every worker follows: requests afterwards land in the new file only,
    # whichever worker serves them
    after = [probe(st) for _ in range(12)]
    wait_until(lambda: all(p in text(st.log_path) for p in after), 10,
               what="the new requests' lines in the new log file")
    old = text(rotated)
    assert before in old and not any(p in old for p in after)
    assert st.proc.poll() is None, "nanobox-fcgi died on SIGHUP"


def test_installed_logrotate_file_rotates_the_log_and_nanobox_reopens_it(make_stack, tmp_path):
    logrotate = shutil.which("logrotate", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
    if not logrotate:
        pytest.skip("logrotate is not installed")
    conf = BUILD / "nanobox.logrotate"
    assert conf.exists(), f"`make` did not build {conf}"
    st = make_stack("logrotate", log_file=True)
    before = probe(st)
    wait_until(lambda: before in text(st.log_path), 10, what="the access line in the log")

    # the installed file, pointed at this stack's log and pid files
    t = conf.read_text()
    first = t.index("{")
    head, body = t[:first], t[first:]
    assert "/log/nanobox/*.log" in head
    body = body.replace("/run/nanobox/fcgi.pid", st.pidfile)
    body = body.replace("/run/nanobox/nginx.pid", str(tmp_path / "no-nginx.pid"))
    mine = tmp_path / "nanobox.logrotate"
    mine.write_text(f"{st.log_path} {body}")
    r = run([logrotate, "-f", "-s", str(tmp_path / "state"), str(mine)], check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert os.path.exists(st.log_path + ".1"), os.listdir(st.dir)
    wait_until(lambda: "log file reopened" in text(st.log_path), 10,
               what="the master to reopen its log file after postrotate")
    after = probe(st)
    wait_until(lambda: after in text(st.log_path), 10, what="the new request's line in the new file")
    assert before in text(st.log_path + ".1") and after not in text(st.log_path + ".1")


def test_notify_socket_gets_ready_then_stopping(make_stack, tmp_path, monkeypatch):
    """Type=notify without systemd: a datagram socket as $NOTIFY_SOCKET."""
    sock_path = str(tmp_path / "notify")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.bind(sock_path)
        s.settimeout(30)
        with monkeypatch.context() as m:
            m.setenv("NOTIFY_SOCKET", sock_path)
            st = make_stack("notify")
        # ready once it listens (make_stack saw the socket) and serves
        assert s.recv(4096) == b"READY=1"
        r = st.api.request("GET", "/healthz")
        assert r.status_code == 200
        # a HUP is no readiness change: the next datagram is the stop's
        os.kill(st.master_pid, signal.SIGHUP)
        os.kill(st.master_pid, signal.SIGTERM)
        assert s.recv(4096) == b"STOPPING=1"
        assert st.proc.wait(timeout=60) == 0


# ------------------------------------------- up.sh's supervisor (no systemd)

def _pid_in(path):
    try:
        with open(path) as f:
            return int(f.read().strip() or 0)
    except (FileNotFoundError, ValueError):
        return 0


def test_up_sh_supervises_a_killed_master_back_with_everything_kept():
    """up.sh, where systemd is not PID 1, runs nanobox-fcgi and nginx under
    src/setup/supervise.sh, in a temp prefix (NB_* paths, a config of our
    own, this build as it is). kill -9 of the master: the API answers again
    within seconds, and the sandbox made before still execs, its file still
    there, its background process and its open port still serving. kill -9
    of nginx: it comes back too. up.sh again changes nothing; down.sh
    leaves nothing running."""
    import nbtest
    from nbtest import (BASE_CONF, PORTS_CONF, PORTS_DOMAIN, REPO, Api, docker_rm_instance,
                        free_port, pid_alive, ports_keys_known, stack_uid_base, tail)

    # not under pytest's 0700 tmp: nginx's workers reach the sockets through it
    d = Path(tempfile.mkdtemp(prefix="nanobox-it-upsh-"))
    os.chmod(d, 0o755)
    for sub in ("etc", "run", "lib", "log"):
        os.mkdir(d / sub, 0o755)
    port = free_port()
    instance = "test-" + os.urandom(4).hex()
    conf = {
        "instance": instance,
        "listen": str(d / "run" / "fcgi.sock"),
        "state_file": str(d / "lib" / "state"),
        "api_key": os.urandom(16).hex(),
        "sandbox_uid_base": str(stack_uid_base()),
        **BASE_CONF,
    }
    if ports_keys_known():
        conf.update(PORTS_CONF)
        conf["ports_dir"] = str(d / "run" / "ports")
        conf["port_url"] = f"http://{{port}}-{{id}}.{PORTS_DOMAIN}:{port}/"
    conf_path = d / "etc" / "nanobox.conf"
    conf_path.write_text("".join(f"{k} = {v}\n" for k, v in conf.items()))
    os.chmod(conf_path, 0o600)
    env = dict(os.environ, NB_CONF=str(conf_path), NB_NGINX_DIR=str(d / "etc" / "nginx"),
               NB_RUN_DIR=str(d / "run"), NB_LIB_DIR=str(d / "lib"), NB_LOG_DIR=str(d / "log"),
               NANOBOX_PORT=str(port), NANOBOX_BUILD=str(BUILD), NANOBOX_NO_SYSTEMD="1",
               NANOBOX_DOCKER_LIVE_RESTORE="no")
    up = [str(REPO / "src" / "setup" / "up.sh")]
    down = [str(REPO / "src" / "setup" / "down.sh")]
    run_dir = d / "run"
    fcgi_log = d / "log" / "fcgi.log"

    class Here:  # what nbtest.Api needs of a stack
        url = f"http://127.0.0.1:{port}"
        api_key = conf["api_key"]
        verify = True

    api = Api(Here)
    pids_seen = set()

    def pids():
        now = {n: _pid_in(run_dir / n) for n in
               ("fcgi.pid", "nginx.pid", "fcgi.supervise.pid", "nginx.supervise.pid")}
        pids_seen.update(p for p in now.values() if p)
        return now

    def healthy():
        try:
            return requests.get(f"{Here.url}/healthz", timeout=2).status_code == 200
        except requests.RequestException:
            return False

    try:
        r = subprocess.run(up, env=env, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"up.sh -> {r.returncode}\n{r.stdout}\n{r.stderr}"
        assert f"nanobox is up at http://127.0.0.1:{port}" in r.stdout, r.stdout
        assert "nanobox-fcgi: listening on" in r.stderr and "nginx: starting on" in r.stderr, r.stderr
        first = pids()
        assert all(pid_alive(p) for p in first.values()), (first, r.stderr)

        sid = api.create()
        assert api.exec(sid, "echo kept > /workspace/f; cat /workspace/f")["stdout"] == "kept\n"
        def background(cmd):
            r = api.exec_raw(sid, cmd, background=True)
            assert r.status_code == 201, r.text
            return r.json()["pid"]
        bg_pid = background("sleep 600")
        served = None
        if ports_keys_known():
            background("cd /workspace && exec python3 -m http.server 8000 >/dev/null 2>&1")
            served = api.open_port(sid, 8000)["hostport"]
            wait_until(lambda: requests.get(f"http://127.0.0.1:{served}/f", timeout=2).text == "kept\n",
                       15, 0.2, what="the sandbox's server through its port")

        # kill -9 of the master: its supervisor starts it again
        os.kill(first["fcgi.pid"], signal.SIGKILL)
        wait_until(lambda: pids()["fcgi.pid"] not in (0, first["fcgi.pid"]) and
                   pid_alive(pids()["fcgi.pid"]) and healthy(), 30, 0.2,
                   what="the API to answer again with a new master")
        assert pids()["fcgi.supervise.pid"] == first["fcgi.supervise.pid"]
        assert api.exec(sid, "cat /workspace/f")["stdout"] == "kept\n"
        procs = api.request("GET", f"/sandbox/{sid}/processes")
        assert procs.status_code == 200 and any(
            p.get("pid") == bg_pid and p.get("running", True) for p in procs.json()["processes"]), procs.text
        if served:
            assert requests.get(f"http://127.0.0.1:{served}/f", timeout=5).text == "kept\n"
            assert any(p["sandboxport"] == 8000 for p in api.ports(sid))
        assert "nanobox-fcgi killed by signal 9; starting it again" in fcgi_log.read_text(errors="replace")

        # kill -9 of nginx's master: it comes back too
        os.kill(first["nginx.pid"], signal.SIGKILL)
        wait_until(lambda: pids()["nginx.pid"] not in (0, first["nginx.pid"]) and
                   pid_alive(pids()["nginx.pid"]) and healthy(), 30, 0.2,
                   what="nginx to answer again")
        assert api.exec(sid, "cat /workspace/f")["stdout"] == "kept\n"

        # up.sh again: nothing started, the same answer
        r = subprocess.run(up, env=env, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"up.sh -> {r.returncode}\n{r.stdout}\n{r.stderr}"
        assert "nanobox-fcgi: already running" in r.stderr and "nginx: already running" in r.stderr, r.stderr
        assert f"nanobox is up at http://127.0.0.1:{port}" in r.stdout
        assert "not supervised" not in r.stderr, r.stderr
        before_down = pids()

        r = subprocess.run(down, env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, f"down.sh -> {r.returncode}\n{r.stdout}\n{r.stderr}"
        alive = [p for p in before_down.values() if p and pid_alive(p)]
        assert not alive, (alive, r.stderr)
        assert not any(os.path.exists(run_dir / n) for n in
                       ("fcgi.pid", "nginx.pid", "fcgi.supervise.pid", "nginx.supervise.pid")), \
            os.listdir(run_dir)
        assert not healthy()
    finally:
        subprocess.run(down, env=env, capture_output=True, text=True, timeout=120)
        for p in pids_seen:
            if pid_alive(p):
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        docker_rm_instance(instance)
        if fcgi_log.exists():
            print(tail(str(fcgi_log), 40))
        if not os.environ.get("NANOBOX_TEST_KEEP"):
            shutil.rmtree(d, ignore_errors=True)
