"""
The edges of the front door (issue 12, items 2-4 and the background cap),
tried from the host against the live stack (real nginx + the worker pool):

- a client without the key cannot make nginx spool its body to disk: the
  401 comes before the body is read, and nothing lands in nginx's temp
  files;
- a client that never reads its answer holds no worker: nginx absorbs the
  answer (a file download), or the worker's write gives up after a few
  seconds (a streamed exec) and the command is ended as if the client had
  left;
- a timeout below 1 ms is refused the same way on every route that takes
  one (exec, streamed exec, /run, MCP), rather than meaning "none";
- a sandbox keeps at most 64 background processes, and an exited one stays
  until it has been read: the 65th start is 429 busy, not the silent loss
  of an unread exit.

Everything is measured from the host: nginx's open files, the pool's
accepted FastCGI connections (/proc), the containers' process lists.
"""

import json
import os
import select
import socket
import threading
import time
import urllib.parse

import pytest
import requests

import nbtest
from nbtest import assert_error, parse_json

MIB = 1024 * 1024


@pytest.fixture(scope="module")
def sandbox(stack):
    a = nbtest.Api(stack)
    sid = a.create(ttl=900)
    yield sid
    a.cleanup()


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, max(0, round(p / 100 * len(v) + 0.5) - 1))]


def nginx_pids(stack):
    """The stack's nginx master and its workers."""
    return [stack.nginx_pid] + nbtest.proc_children(stack.nginx_pid)


def nginx_disk_bytes(stack):
    """Bytes of disk held by the stack's nginx: the blocks of every regular
    file its processes have open (nginx unlinks a temp file as it creates
    it, so only its fd shows it) plus whatever sits in its temp dirs."""
    total, seen = 0, set()
    for pid in nginx_pids(stack):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                st = os.stat(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if (st.st_mode & 0o170000) == 0o100000 and (st.st_dev, st.st_ino) not in seen:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.endswith(".log"):
                    continue    # its own logs
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    for sub in ("client_body_temp", "fastcgi_temp"):
        for root, _, files in os.walk(stack.nginx_prefix / sub):
            for f in files:
                try:
                    st = os.stat(os.path.join(root, f))
                except OSError:
                    continue
                if (st.st_dev, st.st_ino) not in seen:
                    total += st.st_blocks * 512
    return total


def fs_used(path):
    s = os.statvfs(path)
    return (s.f_blocks - s.f_bfree) * s.f_frsize


# ------------------------------------------------ 2. no key, no disk

def trickle_unauthenticated(stack, path, declared, send_total, seconds, out):
    """PUT with no key, Content-Length `declared`, `send_total` bytes of it
    sent over `seconds` and the last byte never: when did an answer come,
    and what was it."""
    head = (f"PUT {path} HTTP/1.1\r\nHost: nanobox\r\nContent-Type: application/octet-stream\r\n"
            f"Content-Length: {declared}\r\n\r\n").encode()
    s = socket.create_connection(("127.0.0.1", stack.port), timeout=10)
    s.sendall(head)
    t0 = time.monotonic()
    s.setblocking(False)
    chunk = b"x" * (256 * 1024)
    sent, answer, answered_at = 0, b"", None
    end = t0 + seconds
    while time.monotonic() < end:
        want_w = [s] if sent < send_total else []
        r, w, _ = select.select([s], want_w, [], 0.05)
        if r:
            try:
                data = s.recv(65536)
            except OSError:
                data = b""
            if data and answered_at is None:
                answered_at = time.monotonic() - t0
            answer += data
            if not data:
                break
        if w:
            try:
                sent += s.send(chunk[:min(len(chunk), send_total - sent)])
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                sent = send_total
    out.append({"sock": s, "answered_at": answered_at, "answer": answer, "sent": sent})


def test_unauthenticated_trickled_bodies_cost_no_disk_and_get_401_at_once(stack, api, sandbox):
    """10 clients without a key each declare a 100 MiB upload, push 8 MiB
    of it and hold back the rest: each gets the 401 within a second, and
    nginx holds no temp file for any of them."""
    q = urllib.parse.urlencode({"path": "/workspace/unauth.bin"})
    path = f"/sandbox/{sandbox}/files?{q}"
    disk0, fs0 = nginx_disk_bytes(stack), fs_used(stack.dir)
    results, threads = [], []
    for _ in range(10):
        t = threading.Thread(target=trickle_unauthenticated,
                             args=(stack, path, 100 * MIB, 8 * MIB, 3.0, results))
        t.start()
        threads.append(t)
    for t in threads:
        t.join(30)
    try:
        disk1, fs1 = nginx_disk_bytes(stack), fs_used(stack.dir)
        print(f"nginx-held disk {disk0} -> {disk1} bytes; filesystem used {fs0} -> {fs1} "
              f"({(fs1 - fs0) / MIB:+.1f} MiB, other processes included)")
        assert len(results) == 10
        for res in results:
            assert res["answered_at"] is not None and res["answered_at"] < 1.0, \
                f"no answer within 1 s of the headers (sent {res['sent']} bytes): {res['answered_at']}"
            status, headers, body = parse_raw(res["answer"])
            assert status == 401, (status, body[:300])
            assert json.loads(body) == UNAUTHORIZED, body
            assert headers.get("content-type", "").startswith("application/json"), headers
        assert disk1 - disk0 < MIB, f"nginx holds {(disk1 - disk0) / MIB:.1f} MiB more on disk"
    finally:
        for res in results:
            res["sock"].close()
    r = api.request("GET", f"/sandbox/{sandbox}/files?{q}")
    assert_error(r, 404, "not_found")


UNAUTHORIZED = {"error": "missing or wrong API key: send \"Authorization: Bearer <key>\" "
                         "or \"X-API-Key: <key>\"",
                "code": "unauthorized"}


def parse_raw(data):
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines and lines[0].startswith(b"HTTP/1."), f"no HTTP answer: {data[:200]!r}"
    headers = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(b":")
        headers[k.strip().lower().decode()] = v.strip().decode("latin-1")
    if headers.get("transfer-encoding", "").lower() == "chunked":
        out, rest = b"", body
        while rest:
            size_line, _, rest = rest.partition(b"\r\n")
            n = int(size_line.split(b";")[0] or b"0", 16)
            if n == 0:
                break
            out, rest = out + rest[:n], rest[n + 2:]
        body = out
    else:
        n = int(headers.get("content-length", len(body)))
        body = body[:n]
    return int(lines[0].split()[1]), headers, body


def test_the_401_before_the_body_is_the_apps_shape_on_every_route(stack, sandbox):
    """nginx's early 401 and the app's are the same answer, with either
    header scheme wrong, on each route that takes a body."""
    for path in ("/sandbox", f"/sandbox/{sandbox}/exec", "/run", "/mcp",
                 f"/sandbox/{sandbox}/files?path=/workspace/x"):
        for h in ({}, {"X-API-Key": "nope"}, {"Authorization": "Bearer nope"}):
            r = requests.post(stack.url + path, data=b"{}", headers=h, timeout=10)
            assert r.status_code == 401, (path, h, r.status_code, r.text)
            assert r.json() == UNAUTHORIZED, r.text
            assert r.headers["Content-Type"].startswith("application/json"), r.headers
            assert stack.api_key not in r.text


# --------------------------------------- 3. a client that never reads

def never_reader(stack, request):
    """A client with a 4 KiB receive buffer that sends request and never reads."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(10)
    s.connect(("127.0.0.1", stack.port))
    s.sendall(request)
    return s


def timed(fn, n):
    ms = []
    for _ in range(n):
        t0 = time.monotonic()
        fn()
        ms.append((time.monotonic() - t0) * 1000)
    return ms


def test_64_clients_that_never_read_a_download_hold_no_worker(stack, api, sandbox):
    """64 clients GET a 4 MiB file and never read: within a few seconds no
    worker holds a connection for them, and /healthz and other clients'
    execs keep a p99 under 100 ms while they stay connected."""
    q = urllib.parse.urlencode({"path": "/workspace/big.bin"})
    r = api.request("PUT", f"/sandbox/{sandbox}/files?{q}", data=os.urandom(4 * MIB),
                    headers={"Content-Type": "application/octet-stream"}, timeout=120)
    assert r.status_code == 201, r.text
    other = api.create(ttl=600)
    api.exec(other, "true")
    req = (f"GET /sandbox/{sandbox}/files?{q} HTTP/1.1\r\nHost: nanobox\r\n"
           f"Authorization: Bearer {stack.api_key}\r\n\r\n").encode()
    clients = []
    log_at = stack.log_size()
    try:
        for _ in range(64):
            clients.append(never_reader(stack, req))
        t0 = time.monotonic()

        def all_answered():
            # each worker logs a request once it is done with it
            with open(stack.log_path, "rb") as f:
                f.seek(log_at)
                done = f.read().count(f"GET /sandbox/{sandbox}/files 200".encode())
            return done == 64 and not stack.busy_workers()
        nbtest.wait_until(all_answered, timeout=30,
                          what="the workers to be done with 64 never-reading clients' downloads")
        print(f"workers done with them {time.monotonic() - t0:.1f} s after 64 never-reading "
              f"downloads began")
        hz = timed(lambda: requests.get(stack.url + "/healthz", timeout=10).raise_for_status(), 100)
        ex = timed(lambda: api.exec(other, "true"), 40)
        print(f"/healthz p50 {pct(hz, 50):.1f} ms p99 {pct(hz, 99):.1f} ms; "
              f"exec p50 {pct(ex, 50):.1f} ms p99 {pct(ex, 99):.1f} ms")
        assert pct(hz, 99) < 100, f"/healthz p99 {pct(hz, 99):.0f} ms"
        assert pct(ex, 99) < 100, f"exec p99 {pct(ex, 99):.0f} ms"
    finally:
        for s in clients:
            s.close()


def test_a_never_reader_of_a_99_mib_download_frees_its_worker_in_seconds(stack, api, sandbox):
    q = urllib.parse.urlencode({"path": "/workspace/huge.bin"})
    r = api.request("PUT", f"/sandbox/{sandbox}/files?{q}", data=b"\x5a" * (99 * MIB),
                    headers={"Content-Type": "application/octet-stream"}, timeout=300)
    assert r.status_code == 201, r.text
    log_at = stack.log_size()
    req = (f"GET /sandbox/{sandbox}/files?{q} HTTP/1.1\r\nHost: nanobox\r\n"
           f"Authorization: Bearer {stack.api_key}\r\n\r\n").encode()
    s = never_reader(stack, req)
    try:
        t0 = time.monotonic()

        def done():
            with open(stack.log_path, "rb") as f:
                f.seek(log_at)
                return f"GET /sandbox/{sandbox}/files 200".encode() in f.read() and not stack.busy_workers()
        nbtest.wait_until(done, timeout=10, what="the worker to be done with a never-read 99 MiB download")
        print(f"worker done with a never-read 99 MiB download after {time.monotonic() - t0:.1f} s")
    finally:
        s.close()
        api.exec(sandbox, "rm -f /workspace/huge.bin")


def test_a_client_that_never_reads_a_streamed_exec_is_let_go(make_stack):
    """A streamed exec writing without end to a client that never reads:
    the worker gives the write up after a few seconds, ends the command
    (as when the client leaves), and takes the next request. (A stack whose
    max_output lets the stream outgrow every buffer on the way.)"""
    stack = make_stack("edge-stream", max_output="256m")
    sandbox = stack.api.create(ttl=600)
    body = json.dumps({"command": "exec yes nanobox-edge-stream", "timeout": 120}).encode()
    req = (f"POST /sandbox/{sandbox}/exec HTTP/1.1\r\nHost: nanobox\r\n"
           f"Authorization: Bearer {stack.api_key}\r\nAccept: application/x-ndjson\r\n"
           f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
    s = never_reader(stack, req)
    try:
        nbtest.wait_until(lambda: stack.busy_workers(), timeout=10, what="the streamed exec to start")
        t0 = time.monotonic()
        nbtest.wait_until(lambda: not stack.busy_workers(), timeout=20,
                          what="the worker to let the never-reading client go")
        held = time.monotonic() - t0
        print(f"worker let go after {held:.1f} s of a client not reading")
        assert held < 12, f"the worker held a never-reading client for {held:.1f} s"
        nbtest.wait_until(lambda: not any("nanobox-edge-stream" in ln
                                          for ln in nbtest.docker_top(stack.container(sandbox))),
                          timeout=10, what="the command to be ended")
    finally:
        s.close()


# ------------------------------------------------ 4. sub-millisecond timeouts

TINY = (0.0009, 1e-300, 5e-324)


def test_a_timeout_below_1_ms_is_refused_on_every_route(stack, api, sandbox):
    for t in TINY:
        t0 = time.monotonic()
        r = api.request("POST", f"/sandbox/{sandbox}/exec", json={"command": "sleep 3", "timeout": t})
        assert_error(r, 422, "out_of_range")
        r = api.request("POST", f"/sandbox/{sandbox}/exec", json={"command": "sleep 3", "timeout": t},
                        headers={"Accept": "application/x-ndjson"})
        assert_error(r, 422, "out_of_range")
        r = api.request("POST", "/run", json={"language": "sh", "code": "sleep 3", "timeout": t})
        assert_error(r, 422, "out_of_range")
        assert time.monotonic() - t0 < 2.5, "a refused timeout still ran the command"
    # MCP: the same refusal, as a tool error naming it
    h = {"Authorization": f"Bearer {stack.api_key}", "Accept": "application/json, text/event-stream",
         "Content-Type": "application/json"}
    r = requests.post(stack.url + "/mcp", headers=h, timeout=30, data=json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "pytest", "version": "0"}}}))
    assert r.status_code == 200, r.text
    h["Mcp-Session-Id"] = r.headers["Mcp-Session-Id"]
    h["MCP-Protocol-Version"] = "2025-06-18"
    t0 = time.monotonic()
    r = requests.post(stack.url + "/mcp", headers=h, timeout=30, data=json.dumps(
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "sandbox_exec",
                    "arguments": {"sandbox_id": sandbox, "command": "sleep 3", "timeout": 0.0009}}}))
    assert r.status_code == 200, r.text
    res = r.json()["result"]
    assert res["isError"] is True and "out_of_range" in json.dumps(res), res
    assert time.monotonic() - t0 < 2.5
    # 1 ms is a timeout, and it is kept
    t0 = time.monotonic()
    out = api.exec(sandbox, "sleep 3", timeout=0.001)
    assert out["timed_out"] is True, out
    assert time.monotonic() - t0 < 2.5


# ------------------------------------------------ the background cap

def test_the_65th_background_process_is_429_and_unread_exits_stay(stack, api):
    sid = api.create(ttl=600)
    pids = []
    for i in range(64):
        r = api.exec_raw(sid, f"exit {i % 7}", background=True)
        assert r.status_code == 201, (i, r.status_code, r.text)
        pids.append(parse_json(r)["pid"])

    def all_exited():
        ps = parse_json(api.request("GET", f"/sandbox/{sid}/processes"))["processes"]
        return len(ps) == 64 and not any(p["running"] for p in ps)
    nbtest.wait_until(all_exited, timeout=30, what="the 64 to exit")
    for _ in range(6):
        assert_error(api.exec_raw(sid, "true", background=True), 429, "busy")
    ps = parse_json(api.request("GET", f"/sandbox/{sid}/processes"))["processes"]
    assert sorted(p["pid"] for p in ps) == sorted(pids), "an unread exit vanished"
    # reading one exit frees its place for the next
    r = api.request("GET", f"/sandbox/{sid}/processes/{pids[0]}")
    assert r.status_code == 200 and parse_json(r)["exit_code"] == 0, r.text
    r = api.exec_raw(sid, "true", background=True)
    assert r.status_code == 201, r.text
    for pid in pids[1:]:
        r = api.request("GET", f"/sandbox/{sid}/processes/{pid}")
        assert r.status_code == 200, (pid, r.text)
        assert parse_json(r)["exit_code"] == pids.index(pid) % 7
    # DELETE forgets one at once, too
    assert api.request("DELETE", f"/sandbox/{sid}/processes/{pids[1]}").status_code == 204
