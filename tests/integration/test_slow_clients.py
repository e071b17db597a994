"""Clients that never read a download hold no worker that others need.

Functional, not timed: with more stalled downloads than workers_max, a
/healthz and an exec in another sandbox still answer, within a generous
bound. The downloads come from a sandbox held to 1% of a CPU, so each takes
its worker for seconds; before, they took every worker and the rest
waited in the socket's backlog until they were done (here some 20 s).
Now a worker moving a file's bytes does not count toward workers_max (up
to 2 x workers_max of them).
"""

import socket
import time
from urllib.parse import urlsplit

import requests

from nbtest import parse_json

STALLED = 4  # > workers_max below (2); <= the transfers outside it (2 x workers_max)
BOUND_S = 8  # generous: the answers take milliseconds; the old wait was the downloads'


def stall(stack, sid, path, n):
    u = urlsplit(stack.url)
    req = (f"GET /sandbox/{sid}/files?path={path} HTTP/1.1\r\nHost: {u.hostname}\r\n"
           f"Authorization: Bearer {stack.api_key}\r\n\r\n").encode()
    socks = []
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect((u.hostname, u.port))
        s.sendall(req)
        socks.append(s)
    return socks


def test_stalled_downloads_leave_workers_for_healthz_and_exec(make_stack):
    st = make_stack("slow-clients", workers_min=1, workers_spare=1, workers_max=2)
    api = st.api
    slow = api.create(cpus=0.01)
    other = api.create()
    path = "/workspace/big"
    r = api.exec_raw(slow, f"head -c 96M /dev/zero > {path}; stat -c %s {path}", timeout=120)
    assert r.status_code == 200 and parse_json(r)["stdout"].strip() == str(96 << 20), r.text
    socks = stall(st, slow, path, STALLED)
    try:
        # the downloads reached the workers: each one's answer has begun
        # (its first bytes read, the rest left unread)
        for s in socks:
            s.settimeout(30)
            assert s.recv(12) == b"HTTP/1.1 200", "a download did not start"
        time.sleep(0.5)
        t0 = time.monotonic()
        r = requests.get(f"{st.url}/healthz", timeout=BOUND_S)
        assert r.status_code == 200, r.text
        r = api.request("POST", f"/sandbox/{other}/exec", json={"command": "echo ok"},
                        timeout=BOUND_S)
        assert r.status_code == 200 and parse_json(r)["stdout"] == "ok\n", r.text
        print(f"healthz + exec answered in {time.monotonic() - t0:.2f} s "
              f"with {STALLED} stalled downloads and workers_max 2")
    finally:
        for s in socks:
            s.close()
