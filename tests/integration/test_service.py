"""Running nanobox-fcgi like a service (docs/INSTALL.md): its log file (-l)
is reopened on SIGHUP in the master and in every worker, without failing a
request in flight, so logrotate can move it away (the installed logrotate
file, run for real when logrotate is installed); under systemd it tells
$NOTIFY_SOCKET when it is ready (Type=notify) and when it stops."""

import os
import shutil
import signal
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from nbtest import BUILD, random_uuid, run, wait_until


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
        time.sleep(0.8)
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
