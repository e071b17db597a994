"""Ephemeral ports: POST /sandbox/{id}/ephemeralport, GET .../ports,
DELETE .../ports/{sandboxport}; nanobox-fwd forwarding a host TCP port and a
unix socket (for nginx) into the sandbox's own network namespace; nginx's
host routing http://<sandboxport>-<sandboxId>.sandbox.localhost/.

The apps run inside `network: none` sandboxes and listen on 127.0.0.1 only:
the forwarder must reach them through the sandbox's namespace. Traffic goes
to loopback only (the host ports bind 127.0.0.1 in the test config, see
nbtest.PORTS_CONF).

Every test ends with no forwarder of its stack alive and no socket left in
the stack's ports_dir (the fixtures check it after deleting the test's
sandboxes, and kill and report what is left).
"""

import base64
import hashlib
import json
import os
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import pytest
import requests

import nbtest
from nbtest import (PORTS_CONF, PORTS_DOMAIN, assert_error, free_port_in, parse_json,
                    pid_alive, proc_cmdline, random_uuid, tcp_listener_pids, tcp_port_free,
                    tcp_refused, wait_until)

RANGE_LOW, RANGE_HIGH = (int(x) for x in PORTS_CONF["port_range"].split("-"))
MAX_DURATION = int(PORTS_CONF["max_port_duration"])
WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
NOT_OPEN = "is not open (closed or expired)"
# Sandboxes outlive the ports the tests open (600 s), so that no port's
# duration is capped by its sandbox's life unless a test means it to be.
SANDBOX_TTL = 1800


# ------------------------------------------------------------ leak checks

def assert_no_port_leaks(st, timeout=15):
    """No forwarder of stack st alive, no file left in its ports_dir. What is
    left is killed (so later tests start clean) and reported."""
    def clean():
        return not st.fwd_pids() and not st.port_sockets()
    try:
        wait_until(clean, timeout, 0.1, what="the stack's forwarders and sockets to be gone")
    except AssertionError:
        pids = st.fwd_pids()
        files = st.port_sockets()
        desc = [f"{p}: {proc_cmdline(p)}" for p in pids]
        st.kill_forwarders()
        for f in files:
            try:
                os.unlink(os.path.join(st.ports_dir, f))
            except OSError:
                pass
        pytest.fail(f"leaked after the test: forwarders {desc}, files in {st.ports_dir}: {files}")


@pytest.fixture
def papi(api, stack):
    """The main stack's client; at the end its sandboxes are deleted and
    nothing of their ports may be left."""
    yield api
    api.cleanup()
    assert_no_port_leaks(stack)


@pytest.fixture
def port_stack(make_stack):
    """make_stack, plus the same end-of-test leak check for each stack."""
    made = []

    def factory(name="ports", **extra_conf):
        st = make_stack(name, **extra_conf)
        made.append(st)
        return st

    yield factory
    for st in made:
        if st.proc and st.proc.poll() is None:
            st.api.cleanup()
        assert_no_port_leaks(st)


@pytest.fixture(scope="module")
def victim(stack):
    """One sandbox for the bad-input tests, which must not open anything."""
    sid = stack.api.create(ttl=1800)
    yield sid
    stack.api.delete(sid)


# ----------------------------------------------------- apps in the sandbox

def _wait_listening_py(port):
    """A python3 -c program (no single quotes) that waits until something
    accepts on 127.0.0.1:port inside the sandbox, or exits 1 after 10 s."""
    return ("import socket, time\n"
            "for i in range(200):\n"
            "    try:\n"
            f"        socket.create_connection((\"127.0.0.1\", {port}), 0.5).close()\n"
            "        break\n"
            "    except OSError:\n"
            "        time.sleep(0.05)\n"
            "else:\n"
            "    raise SystemExit(1)\n")


def start_in_sandbox(api, sid, cmd, port, name):
    """Start cmd in the background inside the sandbox, detached from the
    exec (its own session, no stdio the exec's stream would wait on), wait
    until it listens on 127.0.0.1:port, and check with a second exec that it
    outlived the first."""
    res = api.exec(sid, f"setsid nohup {cmd} >/tmp/{name}.log 2>&1 </dev/null &\n"
                        f"python3 -c '{_wait_listening_py(port)}'", timeout=20)
    assert res["exit_code"] == 0 and not res["timed_out"], (
        f"{name} did not start listening on 127.0.0.1:{port} in the sandbox: {res}\n"
        f"log: {api.exec(sid, f'cat /tmp/{name}.log')['output']}")
    # "[p]ython3 ...": the pattern does not match this exec's own shell
    again = api.exec(sid, f"python3 -c '{_wait_listening_py(port)}' && pgrep -f '[{cmd[0]}]{cmd[1:]}'")
    assert again["exit_code"] == 0, (
        f"{name} ({cmd}) did not survive the exec that started it: {again}; "
        f"log: {api.exec(sid, f'cat /tmp/{name}.log')['output']}")


def start_http_server(api, sid, port=8000, bind="127.0.0.1"):
    """python3 -m http.server bound to bind:port in the sandbox, serving
    /tmp/www, where index.txt holds a fresh token; returns the token."""
    token = f"hello from {sid} port {port} {random_uuid()}\n"
    api.exec(sid, f"mkdir -p /tmp/www && printf '%s' '{token}' > /tmp/www/index.txt")
    start_in_sandbox(api, sid, f"python3 -m http.server {port} --bind {bind} --directory /tmp/www",
                     port, f"http-{port}")
    return token


WS_ECHO_PY = r'''
import base64, hashlib, socket, struct, sys, threading

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def frame(op, data):
    n = len(data)
    if n < 126:
        head = struct.pack("!BB", 0x80 | op, n)
    elif n < 65536:
        head = struct.pack("!BBH", 0x80 | op, 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | op, 127, n)
    return head + data


def exact(f, n):
    b = f.read(n)
    if len(b) != n:
        raise EOFError
    return b


def serve(c):
    f = c.makefile("rb")
    try:
        status = f.readline()
        headers = {}
        while True:
            line = f.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            k, _, v = line.decode("latin-1").partition(":")
            headers[k.strip().lower()] = v.strip()
        key = headers.get("sec-websocket-key")
        if not key or headers.get("upgrade", "").lower() != "websocket":
            body = b"not a websocket request\n"
            c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\n"
                      b"Connection: close\r\n\r\n%s" % (len(body), body))
            return
        accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
        c.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                   "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n" % accept).encode())
        while True:
            b0, b1 = exact(f, 2)
            op, n = b0 & 0x0F, b1 & 0x7F
            if n == 126:
                n = struct.unpack("!H", exact(f, 2))[0]
            elif n == 127:
                n = struct.unpack("!Q", exact(f, 8))[0]
            mask = exact(f, 4) if b1 & 0x80 else b"\0\0\0\0"
            data = bytes(x ^ mask[i % 4] for i, x in enumerate(exact(f, n)))
            if op == 8:
                c.sendall(frame(8, data[:2]))
                return
            if op == 9:
                c.sendall(frame(10, data))
            elif op in (1, 2):
                c.sendall(frame(op, data))
    except (EOFError, OSError, ValueError):
        pass
    finally:
        f.close()
        c.close()


s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(64)
while True:
    conn, _ = s.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
'''

ECHO_PY = r'''
import asyncio, sys


async def handle(reader, writer):
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
        writer.write_eof()          # half-close: our EOF after theirs
        await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", int(sys.argv[1]), backlog=1024)
    async with server:
        await server.serve_forever()

asyncio.run(main())
'''


def write_file_in_sandbox(api, sid, path, text):
    assert "NBEOF" not in text
    res = api.exec(sid, f"cat > {path} <<'NBEOF'\n{text}\nNBEOF\n")
    assert res["exit_code"] == 0, res


# ------------------------------------------------------------ HTTP helpers

def via_host_port(hostport, path="/index.txt", timeout=10):
    return requests.get(f"http://127.0.0.1:{hostport}{path}", timeout=timeout)


def via_nginx(st, sid, sandboxport, path="/index.txt", host=None, timeout=10, **kw):
    """GET through nginx's host routing: Host <sandboxport>-<id>.sandbox.localhost
    (glibc does not resolve *.localhost, so the header is sent explicitly)."""
    h = {"Host": host or st.port_host(sid, sandboxport)}
    h.update(kw.pop("headers", {}))
    return requests.get(f"{st.url}{path}", headers=h, timeout=timeout, **kw)


def assert_not_open_page(resp, sid, sandboxport):
    """nginx's answer for a port with no forwarder: a 502 page that says so."""
    assert resp.status_code == 502, (resp.status_code, resp.text[:300])
    assert "text/html" in resp.headers.get("Content-Type", ""), resp.headers
    text = resp.text
    assert f"port {sandboxport} of sandbox {sid} {NOT_OPEN}" in text, text[:500]


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def check_port_fields(p, sid, sandboxport, st):
    for k in ("host", "hostport", "sandboxport", "url", "expires_at"):
        assert k in p, (k, p)
    assert p["sandboxport"] == sandboxport, p
    assert is_int(p["hostport"]) and RANGE_LOW <= p["hostport"] <= RANGE_HIGH, p
    assert p["host"] == PORTS_CONF["public_host"], p
    assert p["url"] == f"http://{sandboxport}-{sid}.{PORTS_DOMAIN}:{st.port}/", p
    assert is_int(p["expires_at"]), p


def the_forwarder(hostport):
    """The one nanobox-fwd process listening on hostport."""
    pids = tcp_listener_pids(hostport)
    assert len(pids) == 1, f"listeners on {hostport}: {[(p, proc_cmdline(p)) for p in pids]}"
    assert "nanobox-fwd" in proc_cmdline(pids[0]), proc_cmdline(pids[0])
    return pids[0]


def gone(st, sid, sandboxport, hostport, pid=None):
    """Everything of a closed port is gone: the host port refuses and can be
    bound again, the socket file is removed, the forwarder exited."""
    return (tcp_refused(hostport) and tcp_port_free(hostport)
            and not os.path.exists(st.port_socket(sid, sandboxport))
            and (pid is None or not pid_alive(pid)))


def in_threads(fns):
    """Run the callables at the same moment (a barrier); results in order."""
    barrier = threading.Barrier(len(fns))

    def go(fn):
        barrier.wait(30)
        return fn()

    with ThreadPoolExecutor(len(fns)) as ex:
        futs = [ex.submit(go, fn) for fn in fns]
        return [f.result(timeout=120) for f in futs]


# ------------------------------------------------------- the happy path

def test_open_port_answers_the_contract_and_lists_it(papi, stack):
    sid = papi.create(network="none", ttl=SANDBOX_TTL)
    before = int(time.time())
    r = papi.open_port_raw(sid, 8000, 600)
    after = int(time.time())
    assert r.status_code == 201, r.text
    assert "application/json" in r.headers.get("Content-Type", "")
    p = parse_json(r)
    check_port_fields(p, sid, 8000, stack)
    # not capped (the sandbox lives longer): the duration asked for, and
    # expires_at = the request's now + duration
    assert p["duration"] == 600, p
    assert p["expires_at"] - p["duration"] in range(before, after + 1), (before, after, p)

    listed = papi.ports(sid)
    assert len(listed) == 1, listed
    check_port_fields(listed[0], sid, 8000, stack)
    assert listed[0]["hostport"] == p["hostport"] and listed[0]["expires_at"] == p["expires_at"]

    # the forwarder is there: the host port, the unix socket nginx uses
    pid = the_forwarder(p["hostport"])
    assert pid in stack.fwd_pids()
    assert os.path.exists(stack.port_socket(sid, 8000)), stack.port_sockets()


def test_answer_duration_is_the_one_asked_across_a_second_boundary(papi):
    """duration and expires_at of one answer come from one clock reading: a
    request that straddles a second boundary gets the duration it asked
    for, not one less."""
    sid = papi.create(network="none", ttl=SANDBOX_TTL)
    # Whichever wall clock the service reads, the kernel's coarse one (as
    # time() does; it lags by up to a tick) or the precise one, its reading
    # lies between the coarse clock before the request and the precise
    # clock after it: bracket it with those two.
    def coarse():
        return int(time.clock_gettime(getattr(time, "CLOCK_REALTIME_COARSE", 5)))  # 5: Linux's
    for i in range(4):
        # start each request a few ms before the wall clock ticks
        time.sleep((0.995 - time.time() % 1.0) % 1.0)
        before = coarse()
        p = papi.open_port(sid, 8000 + i, 600)
        after = int(time.time())
        assert p["duration"] == 600, (i, before, after, p)
        assert p["expires_at"] - 600 in range(before, after + 1), (i, before, after, p)


@pytest.mark.parametrize("bind", ["127.0.0.1", "0.0.0.0"])
def test_http_server_in_network_none_sandbox_is_reachable_via_host_port_and_nginx(papi, stack, bind):
    sid = papi.create(network="none", ttl=SANDBOX_TTL)
    token = start_http_server(papi, sid, 8000, bind)
    p = papi.open_port(sid, 8000, 600)

    r = via_host_port(p["hostport"])
    assert r.status_code == 200 and r.text == token, (r.status_code, r.text[:300])
    listing = via_host_port(p["hostport"], "/")
    assert listing.status_code == 200 and "index.txt" in listing.text, listing.text[:300]

    r = via_nginx(stack, sid, 8000)
    assert r.status_code == 200 and r.text == token, (r.status_code, r.text[:300])
    # the URL of the answer, Host and port as a browser would send them
    u = urlsplit(p["url"])
    r = requests.get(f"{stack.url}/index.txt", headers={"Host": u.netloc}, timeout=10)
    assert r.status_code == 200 and r.text == token, (r.status_code, r.text[:300])
    # the API is not reachable under a port's host name
    r = via_nginx(stack, sid, 8000, "/sandbox", headers={"Authorization": f"Bearer {stack.api_key}"})
    assert r.status_code == 404 and "sandboxes" not in r.text, r.text[:300]


def test_port_of_a_sandbox_without_app_closes_connections_cleanly(papi, stack):
    """Open but nothing listens inside: the host port accepts and hangs up
    (no hang), nginx answers 502 (not the port-is-closed page)."""
    sid = papi.create(network="none", ttl=SANDBOX_TTL)
    p = papi.open_port(sid, 8000, 600)
    with pytest.raises(requests.ConnectionError):
        via_host_port(p["hostport"], "/", timeout=10)
    r = via_nginx(stack, sid, 8000, "/")
    assert r.status_code == 502, (r.status_code, r.text[:300])
    assert NOT_OPEN not in r.text, r.text[:300]
    assert the_forwarder(p["hostport"])        # and the forwarder lives on


def test_websocket_echo_round_trips_through_nginx(papi, stack):
    sid = papi.create(network="none", ttl=SANDBOX_TTL)
    write_file_in_sandbox(papi, sid, "/tmp/ws_echo.py", WS_ECHO_PY)
    start_in_sandbox(papi, sid, "python3 /tmp/ws_echo.py 8765", 8765, "ws")
    papi.open_port(sid, 8765, 600)

    s = socket.create_connection(("127.0.0.1", stack.port), timeout=15)
    try:
        f = s.makefile("rb")
        key = base64.b64encode(os.urandom(16)).decode()
        s.sendall((f"GET /chat HTTP/1.1\r\nHost: {stack.port_host(sid, 8765)}\r\n"
                   f"Upgrade: websocket\r\nConnection: Upgrade\r\n"
                   f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        status = f.readline()
        assert status.split()[1:2] == [b"101"], status
        headers = {}
        while True:
            line = f.readline()
            assert line, "connection closed during the handshake"
            if line in (b"\r\n", b"\n"):
                break
            k, _, v = line.decode("latin-1").partition(":")
            headers[k.strip().lower()] = v.strip()
        want = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        assert headers.get("sec-websocket-accept") == want, headers
        assert headers.get("upgrade", "").lower() == "websocket", headers

        for msg in ("hello nanobox", "x" * 300 + " through nginx and nanobox-fwd"):
            payload = msg.encode()
            mask = os.urandom(4)
            n = len(payload)
            head = bytes([0x81, 0x80 | n]) if n < 126 else bytes([0x81, 0x80 | 126]) + n.to_bytes(2, "big")
            s.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))
            b0, b1 = f.read(2)
            assert b0 == 0x81, f"expected a final text frame, got {b0:#x}"
            assert not b1 & 0x80, "a server frame must not be masked"
            ln = b1 & 0x7F
            if ln == 126:
                ln = int.from_bytes(f.read(2), "big")
            assert f.read(ln) == payload

        # close handshake
        mask = os.urandom(4)
        code = (1000).to_bytes(2, "big")
        s.sendall(bytes([0x88, 0x82]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(code)))
        b0, b1 = f.read(2)
        assert b0 == 0x88, f"expected a close frame, got {b0:#x}"
    finally:
        s.close()


# ------------------------------------------------------------- lifetimes

def test_port_with_3s_duration_stops_accepting_after_it(papi, stack):
    sid = papi.create(network="none", ttl=SANDBOX_TTL)
    token = start_http_server(papi, sid, 8000)
    p = papi.open_port(sid, 8000, 3)
    assert p["expires_at"] <= int(time.time()) + 3, p
    pid = the_forwarder(p["hostport"])
    r = via_host_port(p["hostport"])
    assert r.status_code == 200 and r.text == token
    assert via_nginx(stack, sid, 8000).text == token

    # The forwarder ends itself at expires_at (a second's rounding, plus slack).
    wait_until(lambda: time.time() >= p["expires_at"], 10, 0.05, what="expires_at")
    wait_until(lambda: gone(stack, sid, 8000, p["hostport"], pid), 4, 0.1,
               what=f"port {p['hostport']} to stop accepting after its 3 s")
    assert_not_open_page(via_nginx(stack, sid, 8000), sid, 8000)
    # and the reaper drops it from the table
    wait_until(lambda: papi.ports(sid) == [], 5, 0.2, what="the expired port to leave GET /ports")
    # the sandbox itself lives on
    assert papi.get(sid).status_code == 200
    assert papi.exec(sid, "echo alive")["stdout"] == "alive\n"


def test_port_duration_is_capped_by_the_sandbox_life(papi, stack):
    info = papi.create_info(network="none", ttl=8)  # the open must land first, even under load
    sid = info["sandboxId"]
    p = papi.open_port(sid, 8000, 3600)
    assert p["expires_at"] == info["expires_at"], (p, info)
    assert 0 < p["duration"] <= 8, p
    pid = the_forwarder(p["hostport"])
    wait_until(lambda: gone(stack, sid, 8000, p["hostport"], pid), 15, 0.1,
               what="the port to close with its sandbox's expiry")


def test_delete_port_stops_the_forwarder_and_frees_the_host_port(papi, stack):
    sid = papi.create(network="none", ttl=SANDBOX_TTL)
    token = start_http_server(papi, sid, 8000)
    p = papi.open_port(sid, 8000, 600)
    pid = the_forwarder(p["hostport"])
    assert via_host_port(p["hostport"]).text == token

    r = papi.close_port(sid, 8000)
    assert r.status_code == 204, r.text
    assert r.content == b""
    wait_until(lambda: gone(stack, sid, 8000, p["hostport"], pid), 2, 0.02,
               what=f"forwarder {pid} to exit and port {p['hostport']} to be free")
    assert papi.ports(sid) == []
    assert_not_open_page(via_nginx(stack, sid, 8000), sid, 8000)
    assert_error(papi.close_port(sid, 8000), 404, "not_found")
    # the same sandboxport opens again, on the very same host port if asked
    q = papi.open_port(sid, 8000, 600, hostport=p["hostport"])
    assert q["hostport"] == p["hostport"]
    assert via_host_port(q["hostport"]).text == token


def test_destroying_the_sandbox_kills_its_forwarders(papi, stack):
    sid = papi.create(network="none", ttl=SANDBOX_TTL)
    other = papi.create(network="none", ttl=SANDBOX_TTL)
    a = papi.open_port(sid, 8000, 600)
    b = papi.open_port(sid, 9000, 600)
    c = papi.open_port(other, 8000, 600)
    pids = [the_forwarder(a["hostport"]), the_forwarder(b["hostport"])]
    keep = the_forwarder(c["hostport"])

    assert papi.delete(sid).status_code == 204
    for port, info, pid in ((8000, a, pids[0]), (9000, b, pids[1])):
        wait_until(lambda: gone(stack, sid, port, info["hostport"], pid), 10, 0.1,
                   what=f"the forwarder of port {port} to die with its sandbox")
    assert_error(papi.request("GET", f"/sandbox/{sid}/ports"), 404, "not_found")
    # the other sandbox's port is untouched
    assert pid_alive(keep) and not tcp_refused(c["hostport"])
    assert [x["sandboxport"] for x in papi.ports(other)] == [8000]


def test_forwarders_survive_sigkill_of_the_pool_and_the_restarted_pool_lists_them(port_stack):
    st = port_stack("ports-crash")
    api = st.api
    sid = api.create(network="none", ttl=SANDBOX_TTL)
    token = start_http_server(api, sid, 8000)
    p = api.open_port(sid, 8000, 600)
    pid = the_forwarder(p["hostport"])
    assert os.getsid(pid) not in (os.getsid(st.master_pid), pid_sid_or_none(os.getpid())), \
        "the forwarder shares a session with the pool or the harness: not detached"

    st.crash()                          # master, workers, reaper: SIGKILL (not the forwarders)
    assert pid_alive(pid), "the forwarder died with the pool"
    r = via_host_port(p["hostport"])
    assert r.status_code == 200 and r.text == token, "no forwarding while the pool is down"
    r = via_nginx(st, sid, 8000)
    assert r.status_code == 200 and r.text == token

    st.start_fcgi()
    st.wait_healthy()
    listed = api.ports(sid)
    assert [(x["sandboxport"], x["hostport"], x["expires_at"]) for x in listed] == \
        [(8000, p["hostport"], p["expires_at"])], listed
    assert pid_alive(pid) and the_forwarder(p["hostport"]) == pid, "reconciliation replaced the forwarder"
    assert via_host_port(p["hostport"]).text == token
    # and the new pool still controls it
    assert api.close_port(sid, 8000).status_code == 204
    wait_until(lambda: gone(st, sid, 8000, p["hostport"], pid), 2, 0.02,
               what="the forwarder to exit on DELETE from the restarted pool")


def pid_sid_or_none(pid):
    try:
        return os.getsid(pid)
    except OSError:
        return None


# ---------------------------------------------------- host-port conflicts

def test_two_concurrent_requests_for_one_hostport_one_201_one_409(papi, stack):
    a = papi.create(network="none", ttl=SANDBOX_TTL)
    b = papi.create(network="none", ttl=SANDBOX_TTL)
    hostport = free_port_in(RANGE_LOW, RANGE_HIGH)
    ra, rb = in_threads([lambda: papi.open_port_raw(a, 8000, 600, hostport),
                         lambda: papi.open_port_raw(b, 8000, 600, hostport)])
    statuses = sorted([ra.status_code, rb.status_code])
    assert statuses == [201, 409], (ra.status_code, ra.text[:300], rb.status_code, rb.text[:300])
    win, lose, win_sid, lose_sid = (ra, rb, a, b) if ra.status_code == 201 else (rb, ra, b, a)
    assert parse_json(win)["hostport"] == hostport
    assert_error(lose, 409, "port_in_use")
    assert the_forwarder(hostport)
    assert len(stack.fwd_pids()) == 1, stack.fwd_pids()
    assert papi.ports(lose_sid) == []
    assert not os.path.exists(stack.port_socket(lose_sid, 8000))
    assert [x["hostport"] for x in papi.ports(win_sid)] == [hostport]


def test_same_sandbox_two_sandboxports_racing_for_one_hostport(papi, stack):
    sid = papi.create(network="none", ttl=SANDBOX_TTL)
    hostport = free_port_in(RANGE_LOW, RANGE_HIGH)
    r1, r2 = in_threads([lambda: papi.open_port_raw(sid, 8000, 600, hostport),
                         lambda: papi.open_port_raw(sid, 8001, 600, hostport)])
    assert sorted([r1.status_code, r2.status_code]) == [201, 409], (r1.text[:300], r2.text[:300])
    assert_error(r1 if r1.status_code == 409 else r2, 409, "port_in_use")
    assert len(papi.ports(sid)) == 1
    assert len(stack.fwd_pids()) == 1, stack.fwd_pids()


def test_hostport_held_by_another_process_is_409_port_in_use(papi, stack):
    sid = papi.create(network="none", ttl=SANDBOX_TTL)
    hostport = free_port_in(RANGE_LOW, RANGE_HIGH)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", hostport))
        squatter.listen(1)
        assert_error(papi.open_port_raw(sid, 8000, 600, hostport), 409, "port_in_use")
        assert papi.ports(sid) == []
        assert stack.fwd_pids() == [] and stack.port_sockets() == []
    # free again: now it opens
    assert papi.open_port(sid, 8000, 600, hostport)["hostport"] == hostport


def test_reopening_an_open_sandboxport_is_409_port_open(papi, stack):
    sid = papi.create(network="none", ttl=SANDBOX_TTL)
    p = papi.open_port(sid, 8000, 600)
    pid = the_forwarder(p["hostport"])
    assert_error(papi.open_port_raw(sid, 8000, 600), 409, "port_open")
    other = free_port_in(RANGE_LOW, RANGE_HIGH, avoid={p["hostport"]})
    assert_error(papi.open_port_raw(sid, 8000, 60, other), 409, "port_open")
    listed = papi.ports(sid)
    assert [(x["hostport"], x["expires_at"]) for x in listed] == [(p["hostport"], p["expires_at"])]
    assert stack.fwd_pids() == [pid] and tcp_port_free(other)


# ----------------------------------------------------------------- load

def test_200_concurrent_connections_through_one_forwarder_keep_every_byte(papi, stack):
    sid = papi.create(network="none", ttl=SANDBOX_TTL)
    write_file_in_sandbox(papi, sid, "/tmp/echo.py", ECHO_PY)
    start_in_sandbox(papi, sid, "python3 /tmp/echo.py 7000", 7000, "echo")
    p = papi.open_port(sid, 7000, 600)
    fwd = the_forwarder(p["hostport"])

    n, size = 200, 256 * 1024
    barrier = threading.Barrier(n)

    def one(i):
        payload = os.urandom(size)
        s = socket.create_connection(("127.0.0.1", p["hostport"]), timeout=60)
        try:
            barrier.wait(60)            # all 200 connected before any byte moves
            err = []

            def send():
                try:
                    s.sendall(payload)
                    s.shutdown(socket.SHUT_WR)
                except OSError as e:
                    err.append(e)
            t = threading.Thread(target=send, daemon=True)
            t.start()
            got = hashlib.sha256()
            total = 0
            while True:
                chunk = s.recv(1 << 16)
                if not chunk:
                    break
                got.update(chunk)
                total += len(chunk)
            t.join(60)
            assert not err, f"connection {i}: send failed: {err}"
            return total, got.hexdigest() == hashlib.sha256(payload).hexdigest()
        finally:
            s.close()

    t0 = time.monotonic()
    with ThreadPoolExecutor(n) as ex:
        results = list(ex.map(one, range(n), timeout=240))
    elapsed = time.monotonic() - t0
    short = [(i, total) for i, (total, _) in enumerate(results) if total != size]
    bad = [i for i, (_, ok) in enumerate(results) if not ok]
    assert not short and not bad, f"short: {short[:10]}, corrupted: {bad[:10]} (of {n}, {elapsed:.1f}s)"
    assert stack.fwd_pids() == [fwd], "one forwarder process serves them all"


# ------------------------------------------------------------ bad input

BAD_OPEN = [
    # (id, body, status, code)
    ("sandboxport-0", {"sandboxport": 0, "duration": 60}, 422, "out_of_range"),
    ("sandboxport-65536", {"sandboxport": 65536, "duration": 60}, 422, "out_of_range"),
    ("sandboxport-negative", {"sandboxport": -1, "duration": 60}, 422, "out_of_range"),
    ("sandboxport-string", {"sandboxport": "80", "duration": 60}, 400, "bad_field"),
    ("sandboxport-float", {"sandboxport": 80.5, "duration": 60}, 400, "bad_field"),
    ("sandboxport-bool", {"sandboxport": True, "duration": 60}, 400, "bad_field"),
    ("sandboxport-null", {"sandboxport": None, "duration": 60}, 400, "bad_field"),
    ("sandboxport-huge", '{"sandboxport": 99999999999999999999999, "duration": 60}',
     (400, 422), ("bad_field", "out_of_range", "bad_json")),
    ("sandboxport-missing", {"duration": 60}, 400, "bad_field"),
    ("duration-missing", {"sandboxport": 8000}, 400, "bad_field"),
    ("duration-0", {"sandboxport": 8000, "duration": 0}, 422, "out_of_range"),
    ("duration-negative", {"sandboxport": 8000, "duration": -5}, 422, "out_of_range"),
    ("duration-over-max", {"sandboxport": 8000, "duration": MAX_DURATION + 1}, 422, "out_of_range"),
    ("duration-string", {"sandboxport": 8000, "duration": "60"}, 400, "bad_field"),
    ("hostport-below-range", {"sandboxport": 8000, "duration": 60, "hostport": RANGE_LOW - 1},
     422, "out_of_range"),
    ("hostport-above-range", {"sandboxport": 8000, "duration": 60, "hostport": RANGE_HIGH + 1},
     422, "out_of_range"),
    ("hostport-0", {"sandboxport": 8000, "duration": 60, "hostport": 0}, 422, "out_of_range"),
    ("hostport-65536", {"sandboxport": 8000, "duration": 60, "hostport": 65536}, 422, "out_of_range"),
    ("hostport-negative", {"sandboxport": 8000, "duration": 60, "hostport": -1}, 422, "out_of_range"),
    ("hostport-string", {"sandboxport": 8000, "duration": 60, "hostport": str(RANGE_LOW)},
     400, "bad_field"),
    ("unknown-field", {"sandboxport": 8000, "duration": 60, "protocol": "udp"}, 400, "bad_field"),
    ("truncated-json", '{"sandboxport": 8000, "duration": 60', 400, "bad_json"),
    ("not-an-object", "[8000, 60]", 400, ("bad_json", "bad_field")),
    ("empty-body", "", 400, ("bad_json", "bad_field")),
]


@pytest.mark.parametrize("body,status,code", [c[1:] for c in BAD_OPEN], ids=[c[0] for c in BAD_OPEN])
def test_bad_open_port_request_is_rejected_and_opens_nothing(papi, stack, victim, body, status, code):
    data = body if isinstance(body, str) else json.dumps(body)
    r = papi.request("POST", f"/sandbox/{victim}/ephemeralport", data=data,
                     headers={"Content-Type": "application/json"})
    assert_error(r, status, code)
    assert papi.ports(victim) == []
    assert stack.fwd_pids() == [] and stack.port_sockets() == []


def test_unknown_sandbox_is_404_on_every_port_route(papi):
    sid = random_uuid()
    assert_error(papi.open_port_raw(sid, 8000, 60), 404, "not_found")
    assert_error(papi.request("GET", f"/sandbox/{sid}/ports"), 404, "not_found")
    assert_error(papi.close_port(sid, 8000), 404, "not_found")


def test_malformed_sandbox_id_on_port_routes_is_rejected(papi):
    for bad in ("not-a-uuid", "0123456789abcdef0123456789abcdef0123"):
        assert_error(papi.open_port_raw(bad, 8000, 60), (400, 404), ("bad_id", "not_found"))
        assert_error(papi.request("GET", f"/sandbox/{bad}/ports"), (400, 404), ("bad_id", "not_found"))
        assert_error(papi.close_port(bad, 8000), (400, 404), ("bad_id", "not_found"))


def test_delete_port_that_is_not_open_is_404_and_non_number_is_400(papi, victim):
    assert_error(papi.close_port(victim, 8000), 404, "not_found")
    for bad in ("abc", "80x", "%20", "0x50"):
        assert_error(papi.close_port(victim, bad), 400, "bad_field")
    # numbers that cannot be an open port: never a success, never a crash
    for odd in ("0", "-1", "65536", "8000.0", "99999999999999999999"):
        assert_error(papi.close_port(victim, odd), (400, 404, 422),
                     ("bad_field", "not_found", "out_of_range"))


def test_port_routes_need_the_api_key(papi, victim):
    assert_error(papi.request("POST", f"/sandbox/{victim}/ephemeralport",
                              json={"sandboxport": 8000, "duration": 60}, auth=False), 401, "unauthorized")
    assert_error(papi.request("GET", f"/sandbox/{victim}/ports", auth=False), 401, "unauthorized")
    assert_error(papi.request("DELETE", f"/sandbox/{victim}/ports/8000", auth=False), 401, "unauthorized")
    assert papi.ports(victim) == []


def test_more_than_max_ports_is_429(port_stack):
    st = port_stack("ports-max", max_ports=2)
    api = st.api
    sid = api.create(network="none", ttl=SANDBOX_TTL)
    api.open_port(sid, 8000, 600)
    api.open_port(sid, 8001, 600)
    assert_error(api.open_port_raw(sid, 8002, 600), 429, "too_many_ports")
    assert len(api.ports(sid)) == 2 and len(st.fwd_pids()) == 2
    # the cap is per sandbox
    other = api.create(network="none", ttl=SANDBOX_TTL)
    api.open_port(other, 8000, 600)
    # closing one makes room
    assert api.close_port(sid, 8000).status_code == 204
    api.open_port(sid, 8002, 600)
    assert sorted(x["sandboxport"] for x in api.ports(sid)) == [8001, 8002]


def test_exhausted_host_port_range_is_503(port_stack):
    # two adjacent free ports, outside the main stack's range (this process's own)
    first, last = nbtest.SCRATCH_PORTS
    for low in range(first, last, 2):
        if all(tcp_port_free(p) and tcp_port_free(p, "0.0.0.0") for p in (low, low + 1)):
            break
    else:
        pytest.fail(f"no two adjacent free ports in {first}-{last}")
    st = port_stack("ports-range", port_range=f"{low}-{low + 1}")
    api = st.api
    sid = api.create(network="none", ttl=SANDBOX_TTL)
    got = {api.open_port(sid, 8000, 600)["hostport"], api.open_port(sid, 8001, 600)["hostport"]}
    assert got == {low, low + 1}
    assert_error(api.open_port_raw(sid, 8002, 600), 503, "no_free_port")
    assert len(st.fwd_pids()) == 2


# ------------------------------------------------------- ports on demand
#
# ports_on_demand = yes: a request to <port>-<id>.<domain> for a port with no
# forwarder yet opens it through the same engine as the API (E2B's cloud
# serves any port an app listens on, sbx.getHost(port)), when something in
# the sandbox listens on it.

NOTHING_LISTENS = "nothing listens on 127.0.0.1:{port} inside sandbox {sid}"


def ondemand_stack(port_stack, name="ports-ondemand", **extra):
    return port_stack(name, ports_on_demand="yes", ports_on_demand_duration="900", **extra)


def test_on_demand_port_serves_an_app_never_opened_and_dies_with_its_sandbox(port_stack):
    st = ondemand_stack(port_stack)
    api = st.api
    sid = api.create(network="none", ttl=SANDBOX_TTL)
    token = start_http_server(api, sid, 8000)
    assert api.ports(sid) == []
    t0 = time.time()
    r = via_nginx(st, sid, 8000)
    assert (r.status_code, r.text) == (200, token), (r.status_code, r.text[:300])
    # and the next ones, through the forwarder it opened
    for _ in range(3):
        assert via_nginx(st, sid, 8000).text == token
    # it is an ordinary open port: listed, with the on-demand duration, one forwarder
    [p] = api.ports(sid)
    check_port_fields(p, sid, 8000, st)
    assert int(t0) + 900 - 2 <= p["expires_at"] <= int(time.time()) + 900 + 1, p
    pid = the_forwarder(p["hostport"])
    assert os.path.exists(st.port_socket(sid, 8000))
    # a second request racing for another app's first one opens it once
    api.exec(sid, "mkdir -p /tmp/w2 && printf two > /tmp/w2/index.txt")
    start_in_sandbox(api, sid, "python3 -m http.server 8001 --bind 0.0.0.0 --directory /tmp/w2",
                     8001, "http-8001")
    rs = in_threads([lambda: via_nginx(st, sid, 8001)] * 4)
    assert [(x.status_code, x.text) for x in rs] == [(200, "two")] * 4, [x.text[:200] for x in rs]
    assert sorted(x["sandboxport"] for x in api.ports(sid)) == [8000, 8001]
    assert len(st.fwd_pids()) == 2

    assert api.delete(sid).status_code == 204
    wait_until(lambda: gone(st, sid, 8000, p["hostport"], pid), 10, 0.1,
               what="the on-demand forwarder to die with its sandbox")
    r = via_nginx(st, sid, 8000)
    assert r.status_code == 404 and f"no sandbox {sid}" in r.text, (r.status_code, r.text[:300])
    assert st.fwd_pids() == [] and st.port_sockets() == []


def test_on_demand_port_nothing_listens_on_is_a_502_page_and_opens_nothing(port_stack):
    st = ondemand_stack(port_stack)
    api = st.api
    sid = api.create(network="none", ttl=SANDBOX_TTL)
    r = via_nginx(st, sid, 8000, timeout=10)
    assert r.status_code == 502 and "text/html" in r.headers["Content-Type"], r.status_code
    assert NOTHING_LISTENS.format(port=8000, sid=sid) in r.text, r.text[:500]
    assert api.ports(sid) == [] and st.fwd_pids() == [] and st.port_sockets() == []
    # ports out of range: the page of a port that is not open, nothing opened
    for port in (0, 70000):
        assert_not_open_page(via_nginx(st, sid, port), sid, port)
    assert api.ports(sid) == [] and st.fwd_pids() == []
    # an unknown sandbox: 404 page
    other = random_uuid()
    r = via_nginx(st, other, 8000)
    assert r.status_code == 404 and f"no sandbox {other}" in r.text, (r.status_code, r.text[:300])


def test_on_demand_ports_respect_max_ports(port_stack):
    st = ondemand_stack(port_stack, "ports-ondemand-max", max_ports=2)
    api = st.api
    sid = api.create(network="none", ttl=SANDBOX_TTL)
    # three servers of one /tmp/www: each serves the last token written
    token = [start_http_server(api, sid, port) for port in (8000, 8001, 8002)][-1]
    for port in (8000, 8001):
        assert via_nginx(st, sid, port).text == token
    r = via_nginx(st, sid, 8002)
    assert r.status_code == 429 and "max_ports" in r.text, (r.status_code, r.text[:300])
    assert sorted(x["sandboxport"] for x in api.ports(sid)) == [8000, 8001]
    assert len(st.fwd_pids()) == 2
    # on-demand ports count like the API's: the API is refused too
    assert_error(api.open_port_raw(sid, 8003, 600), 429, "too_many_ports")
    # closing one makes room for the next on-demand request
    assert api.close_port(sid, 8000).status_code == 204
    assert via_nginx(st, sid, 8002).text == token
    assert sorted(x["sandboxport"] for x in api.ports(sid)) == [8001, 8002]


def test_ports_on_demand_off_keeps_the_not_open_page(papi, stack):
    assert stack.conf.get("ports_on_demand", "no") == "no"
    sid = papi.create(network="none", ttl=SANDBOX_TTL)
    start_http_server(papi, sid, 8000)
    assert_not_open_page(via_nginx(stack, sid, 8000), sid, 8000)
    assert papi.ports(sid) == [] and stack.fwd_pids() == []
    # unknown sandboxes too, as before
    other = random_uuid()
    assert_not_open_page(via_nginx(stack, other, 8000), other, 8000)
    # a port opened through the API without its .open file (one opened by a
    # version before there were such files) is served, and gets the file
    p = papi.open_port(sid, 8000, 600)
    marker = os.path.join(stack.ports_dir, f"{sid}-8000.open")
    os.unlink(marker)
    assert via_nginx(stack, sid, 8000).status_code == 200
    assert os.path.exists(marker) and papi.ports(sid)[0]["hostport"] == p["hostport"]


def test_on_demand_ports_count_against_the_owner_keys_quota(port_stack):
    from test_keys import KeyApi, add_key
    st = ondemand_stack(port_stack, "ports-ondemand-quota")
    q = KeyApi(st, add_key(st, "p", "--max-ports", "1"))
    try:
        a, b = q.create(network="none", ttl=SANDBOX_TTL), q.create(network="none", ttl=SANDBOX_TTL)
        ta, _ = start_http_server(q, a, 8000), start_http_server(q, b, 8000)
        assert via_nginx(st, a, 8000).text == ta
        r = via_nginx(st, b, 8000)
        assert r.status_code == 429 and "max_ports" in r.text, (r.status_code, r.text[:300])
        assert q.ports(b) == [] and len(st.fwd_pids()) == 1
        # the owner's own API request is refused alike
        assert_error(q.open_port_raw(b, 8001, 60), 429, "quota")
    finally:
        q.cleanup()


def test_on_demand_calls_have_nginx_request_rate_and_open_ports_do_not(port_stack):
    st = port_stack("ports-ondemand-rate", ports_on_demand="yes",
                    render_args=["--rate", "2r/s", "--rate-burst", "3"])
    api = st.api
    sid = api.create(network="none", ttl=SANDBOX_TTL)
    token = start_http_server(api, sid, 8000)
    assert via_nginx(st, sid, 8000).text == token
    time.sleep(2)  # a full bucket again
    s = requests.Session()
    codes = [s.get(f"{st.url}/", headers={"Host": st.port_host(sid, p)}, timeout=10).status_code
             for p in range(9000, 9020)]
    assert codes.count(503) >= 10 and set(codes) <= {502, 503}, codes
    r = s.get(f"{st.url}/", headers={"Host": st.port_host(sid, 9100)}, timeout=10)
    assert r.status_code == 503 and "cannot open it now" in r.text, r.text[:300]
    # the open port is not counted: every request of a burst is served
    assert [via_nginx(st, sid, 8000).status_code for _ in range(20)] == [200] * 20
    assert [x["sandboxport"] for x in api.ports(sid)] == [8000]


def test_a_stale_open_file_is_swept_and_the_port_opens_on_demand_again(port_stack):
    st = ondemand_stack(port_stack, "ports-ondemand-stale")
    api = st.api
    sid = api.create(network="none", ttl=SANDBOX_TTL)
    token = start_http_server(api, sid, 8000)
    # as left by a crash: nginx's sign of an open port, with no port behind it
    stale = os.path.join(st.ports_dir, f"{sid}-8000.open")
    open(stale, "w").close()
    os.chmod(stale, 0o644)
    wait_until(lambda: not os.path.exists(stale), 10, 0.1, what="the reaper to sweep the .open file")
    assert via_nginx(st, sid, 8000).text == token
    assert os.path.exists(stale) and [x["sandboxport"] for x in api.ports(sid)] == [8000]
    # closing the port removes it with the socket
    assert api.close_port(sid, 8000).status_code == 204
    assert not os.path.exists(stale) and not os.path.exists(st.port_socket(sid, 8000))


def test_a_paused_sandboxs_port_is_409_and_not_opened_on_demand(port_stack):
    st = ondemand_stack(port_stack, "ports-ondemand-paused")
    api = st.api
    sid = api.create(network="none", ttl=SANDBOX_TTL)
    token = start_http_server(api, sid, 8000)
    assert api.request("POST", f"/sandbox/{sid}/pause").status_code in (200, 204)
    r = via_nginx(st, sid, 8000)
    assert r.status_code == 409 and parse_json(r)["code"] == "paused", r.text[:300]
    assert st.fwd_pids() == [] and st.port_sockets() == [f"{sid}.paused"]
    assert api.request("POST", f"/sandbox/{sid}/resume").status_code in (200, 204)
    assert api.ports(sid) == []
    assert via_nginx(st, sid, 8000).text == token
