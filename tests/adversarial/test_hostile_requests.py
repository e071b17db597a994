"""
Hostile requests against the live stack (real nginx + the worker pool):
oversized and malformed bodies, NUL bytes, header floods, trickling
clients, path traversal in ids and in the ports server's Host header,
missing or wrong keys on every route, and every numeric bound at and
past its edge.

Each test asserts the documented refusal (a JSON error, or nginx's own
answer where nginx refuses first), that nothing happened (no container,
no slot, no file, no port, the sandbox still alive), and that the
service still answers afterwards. The conftest's watcher also fails a
test during which a worker of the main stack died.
"""

import contextlib
import json
import os
import socket
import threading
import time

import pytest
import requests

import nbtest
from nbtest import assert_error, parse_json

MIB = 1024 * 1024
NGINX_SANDBOX_BODY_CAP = 100 * MIB   # client_max_body_size under /sandbox/
ENV_NAME = "HOSTILE"


# ------------------------------------------------------------------ helpers

def healthz(stack):
    r = requests.get(stack.url + "/healthz", timeout=10)
    assert r.status_code == 200, r.text
    return parse_json(r)


def assert_serving(stack, api=None):
    """The service still answers: /healthz, and an authorized list."""
    t0 = time.monotonic()
    healthz(stack)
    a = api or nbtest.Api(stack)
    r = a.request("GET", "/sandbox", timeout=10)
    assert r.status_code == 200, f"GET /sandbox -> {r.status_code} {r.text[:300]}"
    assert time.monotonic() - t0 < 5, "the service answered, but slowly"


@contextlib.contextmanager
def no_side_effect(stack, api=None):
    """The block creates no container and takes no slot, and the service
    answers afterwards."""
    containers = stack.live_containers()
    slots = healthz(stack)["sandboxes"]
    yield
    assert stack.live_containers() == containers, "a container appeared or vanished"
    assert healthz(stack)["sandboxes"] == slots, "the slot count changed"
    assert_serving(stack, api)


def raw_request(stack, head, body=b"", timeout=30, host_port=None):
    """Send bytes as they are (no client-side normalisation) and return
    (status, headers dict, body bytes)."""
    s = socket.create_connection(("127.0.0.1", host_port or stack.port), timeout=timeout)
    try:
        s.sendall(head + body)
        data = b""
        while True:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            data += chunk
    finally:
        s.close()
    return parse_raw(data)


def parse_raw(data):
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines and lines[0].startswith(b"HTTP/1."), f"no HTTP answer: {data[:200]!r}"
    status = int(lines[0].split()[1])
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
    return status, headers, body


def get_line(path, key=None, extra=b""):
    h = b"GET " + path + b" HTTP/1.1\r\nHost: nanobox\r\nConnection: close\r\n"
    if key:
        h += b"Authorization: Bearer " + key.encode() + b"\r\n"
    return h + extra + b"\r\n"


def assert_raw_json_error(status, headers, body, statuses, codes):
    assert status in statuses, (status, body[:300])
    assert "application/json" in headers.get("content-type", ""), (status, headers, body[:300])
    doc = json.loads(body.decode("utf-8"))
    assert doc.get("code") in codes and doc.get("error"), doc
    return doc


def assert_refused_path(status, headers, body, codes):
    """A hostile path: nginx refuses it itself (400 bad_request, 414
    too_large: it never reaches the app), or the app answers with one of
    codes; a JSON error either way."""
    assert_raw_json_error(status, headers, body, {400, 404, 414},
                          set(codes) | {"bad_request", "too_large"})


@pytest.fixture(scope="module")
def sandbox(stack):
    """One sandbox for the module, made with the right key."""
    a = nbtest.Api(stack)
    sid = a.create(ttl=900)
    yield sid
    a.cleanup()


def assert_alive(api, sid):
    r = api.get(sid)
    assert r.status_code == 200 and parse_json(r)["status"] == "running", r.text


# ----------------------------------------------------------------- bodies

def send_big_body(stack, path, size, key):
    """POST size bytes for real (nginx reads and drops them after refusing:
    lingering close), then read the answer."""
    head = (f"POST {path} HTTP/1.1\r\nHost: nanobox\r\nConnection: close\r\n"
            f"Authorization: Bearer {key}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {size}\r\n\r\n").encode()
    s = socket.create_connection(("127.0.0.1", stack.port), timeout=60)
    chunk = b" " * MIB
    try:
        s.sendall(head)
        left = size
        while left > 0:
            n = min(left, len(chunk))
            try:
                s.sendall(chunk[:n])
            except (BrokenPipeError, ConnectionResetError):
                break
            left -= n
        data = b""
        while True:
            try:
                c = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not c:
                break
            data += c
    finally:
        s.close()
    return parse_raw(data)


def test_100_mib_body_is_refused_by_nginx_as_json(stack, api, sandbox):
    with no_side_effect(stack, api):
        # /sandbox allows 16m: nginx answers its JSON 413 from the standalone error page
        st, h, body = send_big_body(stack, "/sandbox", NGINX_SANDBOX_BODY_CAP, stack.api_key)
        assert_raw_json_error(st, h, body, {413}, {"too_large"})
        # /sandbox/ allows 100m (file uploads): one byte more is nginx's too
        st, h, body = send_big_body(stack, f"/sandbox/{sandbox}/exec",
                                    NGINX_SANDBOX_BODY_CAP + 1, stack.api_key)
        assert_raw_json_error(st, h, body, {413}, {"too_large"})
    assert_alive(api, sandbox)


def test_body_over_max_body_is_the_apps_413(stack, api, sandbox):
    with no_side_effect(stack, api):
        body = json.dumps({"command": "x" * (nbtest.MAX_BODY + 1)})
        r = api.request("POST", f"/sandbox/{sandbox}/exec", data=body,
                        headers={"Content-Type": "application/json"})
        assert_error(r, 413, "too_large")


def test_10000_deep_json_is_bad_json(stack, api, sandbox):
    deep = "[" * 10000 + "]" * 10000
    deep_obj = '{"metadata":' + '{"a":' * 10000 + "1" + "}" * 10001
    with no_side_effect(stack, api):
        for path, body in (("/sandbox", deep), ("/sandbox", deep_obj),
                           (f"/sandbox/{sandbox}/exec", deep), ("/run", deep), ("/mcp", deep)):
            r = api.request("POST", path, data=body, headers={"Content-Type": "application/json"})
            if path == "/mcp":
                # JSON-RPC's own error shape (docs/API.md, MCP): a parse error
                assert r.status_code in (200, 400), r.text[:300]
                assert "-32700" in r.text, r.text[:300]
                continue
            assert_error(r, 400, "bad_json")


@pytest.mark.parametrize("raw", [
    b"\xff",                    # never valid
    b"\xc3",                    # cut short
    b"\xc0\x80",                # overlong NUL
    b"\xed\xa0\x80",            # a surrogate, UTF-8-encoded (yajl alone lets it through)
    b"\xf4\x90\x80\x80",        # past U+10FFFF (yajl alone lets it through)
], ids=["ff", "truncated", "overlong", "surrogate", "past_10ffff"])
def test_invalid_utf8_in_json_strings_is_bad_json(stack, api, sandbox, raw):
    with no_side_effect(stack, api):
        for path, body in (("/sandbox", b'{"metadata":{"k":"' + raw + b'"}}'),
                           (f"/sandbox/{sandbox}/exec", b'{"command":"echo ' + raw + b'"}'),
                           ("/run", b'{"language":"sh","code":"echo ' + raw + b'"}')):
            r = api.request("POST", path, data=body, headers={"Content-Type": "application/json"})
            err = assert_error(r, 400, "bad_json")
            assert "UTF-8" in err["error"] or "UTF8" in err["error"], err


@pytest.mark.parametrize("esc", [b"\\udc00", b"\\ud800", b"\\ud800\\u0041"],
                         ids=["low_alone", "high_alone", "high_then_other"])
def test_unpaired_surrogate_escapes_are_bad_json(stack, api, sandbox, esc):
    # yajl alone would run `echo ?` for a lone high half, pair a high half with
    # any \u after it, and hand a lone low half on as invalid UTF-8
    marker = b"/tmp/hostile-surrogate-marker"
    with no_side_effect(stack, api):
        for path, body in (("/sandbox", b'{"metadata":{"k":"' + esc + b'"}}'),
                           (f"/sandbox/{sandbox}/exec", b'{"command":"touch ' + marker + esc + b'"}'),
                           ("/run", b'{"language":"sh","code":"echo ' + esc + b'"}')):
            r = api.request("POST", path, data=body, headers={"Content-Type": "application/json"})
            err = assert_error(r, 400, "bad_json")
            assert "surrogate" in err["error"], err
    r = api.exec(sandbox, "ls /tmp")
    assert "hostile-surrogate-marker" not in r["stdout"], r
    # a real pair still goes through, byte-exact
    r = api.request("POST", f"/sandbox/{sandbox}/exec",
                    data=b'{"command":"printf %s \\ud83d\\ude00"}', headers={"Content-Type": "application/json"})
    assert r.status_code == 200, r.text
    assert r.json()["stdout"] == "\U0001F600", r.json()


# ---------------------------------------------------------------- NUL bytes

def test_nul_in_command_is_refused_and_nothing_runs(stack, api, sandbox):
    marker = "/tmp/hostile-nul-marker"
    with no_side_effect(stack, api):
        # /bin/sh -c would see only "touch /tmp/…": the command must not run cut short
        r = api.exec_raw(sandbox, f"touch {marker}\u0000; echo rest")
        err = assert_error(r, 400, "bad_field")
        assert "NUL" in err["error"], err
        for body in ({"command": "true", "cwd": "/tmp\u0000/x"},
                     {"command": "true", "env": {"A\u0000B": "1"}},
                     {"command": "true", "env": {"A": "1\u00002"}},
                     {"command": "cat", "stdin": "a\u0000b"}):
            assert_error(api.request("POST", f"/sandbox/{sandbox}/exec", json=body), 400, "bad_field")
        # /run and create pass strings on the same way
        assert_error(api.request("POST", "/run", json={"language": "sh", "code": f"touch {marker}\u0000"}),
                     400, "bad_field")
        assert_error(api.request("POST", "/sandbox", json={"metadata": {"k": "v\u0000w"}}),
                     400, "bad_field")
        # and a background process's stdin (refused by the one JSON reader, like the rest)
        assert_error(api.request("POST", f"/sandbox/{sandbox}/processes/1/stdin", json={"data": "a\u0000b"}),
                     400, "bad_field")
    assert api.exec(sandbox, f"test -e {marker}; echo $?")["stdout"] == "1\n", "the cut command ran"
    # an escaped backslash before u0000 is text, not a NUL
    out = api.exec(sandbox, "printf '%s' '\\u0000'")
    assert out["stdout"] == "\\u0000", out
    # and binary stdin still has its way in
    out = api.exec(sandbox, "od -An -tx1", stdin="YQBi", stdin_encoding="base64")
    assert out["stdout"].split() == ["61", "00", "62"], out


def test_nul_in_paths_is_bad_path(stack, api, sandbox):
    with no_side_effect(stack, api):
        r = api.request("PUT", f"/sandbox/{sandbox}/files?path=/tmp/a%00b", data=b"x")
        assert_error(r, 400, "bad_path")
        r = api.request("GET", f"/sandbox/{sandbox}/files?path=/etc/passwd%00.txt")
        assert_error(r, 400, "bad_path")
        r = api.request("POST", f"/sandbox/{sandbox}/files/mkdir", json={"path": "/tmp/d\u0000x"})
        assert_error(r, 400, "bad_path")
        r = api.request("POST", f"/sandbox/{sandbox}/files/move",
                        json={"from": "/etc/hostname", "to": "/tmp/x\u0000y"})
        assert_error(r, 400, "bad_path")
    ls = api.exec(sandbox, "ls -a /tmp")["stdout"].split()
    assert not {"a", "d", "x"} & set(ls), f"a path cut at its NUL was written: {ls}"


# ------------------------------------------------------------------ headers

def test_header_floods_get_a_4xx_and_the_service_still_answers(stack, api):
    key = stack.api_key
    with no_side_effect(stack, api):
        # one header larger than a large_client_header_buffers buffer (8k)
        st, h, body = raw_request(stack, get_line(b"/healthz", extra=b"X-Big: " + b"a" * 20000 + b"\r\n"))
        assert_raw_json_error(st, h, body, {400}, {"headers_too_large"})
        # a request line longer than one buffer: nginx's 414, in JSON
        st, h, body = raw_request(stack, get_line(b"/sandbox/" + b"a" * 9000))
        assert_raw_json_error(st, h, body, {414}, {"too_large"})
        # many headers, more than the buffers hold together
        many = b"".join(b"X-H%d: %s\r\n" % (i, b"v" * 60) for i in range(2000))
        st, h, body = raw_request(stack, get_line(b"/sandbox", key, many))
        assert_raw_json_error(st, h, body, {400}, {"headers_too_large"})
        # a huge Authorization header is the same 4xx, never a crash
        st, h, body = raw_request(stack, get_line(b"/sandbox", "k" * 20000))
        assert_raw_json_error(st, h, body, {400}, {"headers_too_large"})
        # a request line nginx cannot parse, and a Host it refuses
        st, h, body = raw_request(stack, b"GET /sandbox HTTP/1.1 junk\r\nHost: nanobox\r\n\r\n")
        assert_raw_json_error(st, h, body, {400}, {"bad_request"})
        st, h, body = raw_request(stack, b"GET /healthz HTTP/1.1\r\nHost: a/../b\r\nConnection: close\r\n\r\n")
        assert_raw_json_error(st, h, body, {400}, {"bad_request"})
        # many headers that do fit: they reach the app as params, which answers normally
        fits = b"".join(b"X-H%d: %s\r\n" % (i, b"v" * 20) for i in range(300))
        st, h, body = raw_request(stack, get_line(b"/sandbox", key, fits))
        assert st == 200, (st, body[:200])
        st, h, body = raw_request(stack, get_line(b"/sandbox", None, fits))
        assert_raw_json_error(st, h, body, {401}, {"unauthorized"})


def test_trickling_clients_do_not_hold_workers(stack, api, sandbox):
    """50 clients send their headers 1 byte a second, 20 more a body (nginx
    reads both before it takes a worker: client_header_timeout,
    client_body_timeout, fastcgi_request_buffering on): meanwhile requests
    answer fast and no worker holds a connection for them."""
    head = get_line(b"/healthz")
    body_head = (f"POST /sandbox/{sandbox}/exec HTTP/1.1\r\nHost: nanobox\r\n"
                 f"Authorization: Bearer {stack.api_key}\r\nContent-Type: application/json\r\n"
                 f"Content-Length: 4096\r\n\r\n").encode()
    slow_head, slow_body = [], []
    try:
        for _ in range(50):
            slow_head.append(socket.create_connection(("127.0.0.1", stack.port), timeout=5))
        for _ in range(20):
            s = socket.create_connection(("127.0.0.1", stack.port), timeout=5)
            s.sendall(body_head)
            slow_body.append(s)
        # A body this small gets no early key check (nanobox.conf.in's
        # /.nanobox/auth); a bigger one would: nginx asks a worker about the
        # key once its headers are in (a few ms each), and 20 such checks at
        # once hold workers for a moment. Then the bodies trickle, and no
        # worker may be held: wait until no FastCGI connection is open at all.
        def fcgi_connections():
            return [ino for ino, flags, state, path in nbtest.unix_sockets()
                    if path == stack.sock and state == 3 and not flags & 0x10000]
        nbtest.wait_until(lambda: not fcgi_connections(), 5, 0.01,
                          what="the key checks of the trickling requests to end")
        worst = 0.0
        deadline = time.monotonic() + 8
        i = 0
        while time.monotonic() < deadline:
            for s in slow_head:
                if i < len(head) - 2:      # never the final CRLF
                    s.sendall(head[i:i + 1])
            for s in slow_body:
                s.sendall(b" ")
            i += 1
            # sampled a while after our own last request: only the trickling clients are open
            busy = stack.busy_workers()
            assert not busy, f"workers {busy} hold a connection while only trickling clients are open"
            t0 = time.monotonic()
            healthz(stack)
            r = api.request("GET", f"/sandbox/{sandbox}", timeout=10)
            assert r.status_code == 200, r.text
            worst = max(worst, time.monotonic() - t0)
            time.sleep(max(0.0, 1.0 - (time.monotonic() - t0)))
        assert worst < 2.0, f"a request took {worst:.2f}s while clients trickled"
    finally:
        for s in slow_head + slow_body:
            s.close()
    assert_serving(stack, api)


# ------------------------------------------------------------ ids and paths

@pytest.mark.parametrize("path", [
    b"/sandbox/..%2f..%2fetc/exec",
    b"/sandbox/%2e%2e/ports/1",
    b"/sandbox/%2e%2e%2f%2e%2e%2fstate/exec",
    b"/sandbox/../../etc/passwd",
    b"/sandbox/a%2fb/exec",
    b"/sandbox/%00/exec",
    b"/sandbox/9d5ad481-3179-4bd9-9d2f-c00aae4a0279%00/exec",
    b"/sandbox/9D5AD481-3179-4BD9-9D2F-C00AAE4A0279/exec",
    b"/sandbox/" + b"a" * 400 + b"/exec",
    b"/sandbox/" + b"a" * 5000 + b"/exec",
    b"/sandbox/x/ports/..%2f..%2f",
    b"/sandbox/%2e%2e%2f%2e%2e%2frun%2fdocker.sock/exec",
], ids=lambda p: p.decode("latin-1")[:48])
def test_ids_that_try_traversal_are_refused(stack, api, path):
    files = sorted(os.listdir(stack.dir))
    with no_side_effect(stack, api):
        for method in (b"GET", b"POST", b"DELETE"):
            req = get_line(path, stack.api_key).replace(b"GET ", method + b" ", 1)
            st, h, body = raw_request(stack, req)
            assert_refused_path(st, h, body, {"bad_id", "no_route", "too_large"})
    assert sorted(os.listdir(stack.dir)) == files and stack.port_sockets() == []


@pytest.mark.parametrize("host", [
    b"80-../../etc.sandbox.localhost",
    b"8000-../../../../../../../../../etc/passwd.sandbox.localhost",
    b"8000-------------------------------------.sandbox.localhost",
    b"8000-..%2f..%2f..%2f..%2f..%2fetc%2fpasswd.sandbox.localhost",
    b"99999-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.sandbox.localhost",
    b"8000-9d5ad481-3179-4bd9-9d2f-c00aae4a0279.sandbox.localhost/../../x",
    b"8000-9d5ad481-3179-4bd9-9d2f-c00aae4a0279.sandbox.localhost.evil",
    b"0-\x00aaaa.sandbox.localhost",
], ids=lambda h: h.decode("latin-1")[:40])
def test_hostile_host_header_reaches_no_socket(stack, api, host):
    before = stack.port_sockets()
    with no_side_effect(stack, api):
        st, h, body = raw_request(
            stack, b"GET /etc/passwd HTTP/1.1\r\nHost: " + host + b"\r\nConnection: close\r\n\r\n")
        # nginx refuses the Host (400), no port server matches (the API's 404),
        # a well-formed name of no sandbox (the ports page's 404), or of a
        # port whose socket does not exist (the 502 page)
        assert st in (400, 404, 502), (st, body[:300])
        assert b"root:" not in body
        if st == 502:
            assert b"is not open" in body, body[:300]
        if st == 404 and "text/html" in h.get("content-type", ""):
            assert b"may have expired or been destroyed" in body, body[:300]
        elif st == 404:
            assert_raw_json_error(st, h, body, {404}, {"no_route"})
    assert stack.port_sockets() == before


# ---------------------------------------------------------------------- auth

def every_route(sid):
    """(method, path, json body or None) for every route and method."""
    s = f"/sandbox/{sid}"
    return [
        ("GET", "/sandbox", None), ("POST", "/sandbox", {"ttl": 60}),
        ("GET", s, None), ("DELETE", s, None),
        ("POST", f"{s}/timeout", {"ttl": 1}),
        ("POST", f"{s}/pause", None), ("POST", f"{s}/resume", None),
        ("POST", f"{s}/exec", {"command": "touch /tmp/unauthorized"}),
        ("POST", f"{s}/ephemeralport", {"sandboxport": 8000, "duration": 60}),
        ("GET", f"{s}/ports", None), ("DELETE", f"{s}/ports/8000", None),
        ("GET", f"{s}/files?path=/etc/hostname", None),
        ("PUT", f"{s}/files?path=/tmp/unauthorized", "x"),
        ("DELETE", f"{s}/files?path=/tmp", None),
        ("POST", f"{s}/files/mkdir", {"path": "/tmp/unauthorized"}),
        ("POST", f"{s}/files/move", {"from": "/tmp", "to": "/tmp/unauthorized"}),
        ("GET", f"{s}/processes", None), ("GET", f"{s}/processes/1", None),
        ("POST", f"{s}/processes/1/stdin", {"data": "x"}),
        ("DELETE", f"{s}/processes/1?signal=KILL", None),
        ("POST", f"{s}/pty/1/input", {"data": "x"}),
        ("POST", f"{s}/pty/1/resize", {"cols": 80, "rows": 24}),
        ("POST", "/run", {"language": "sh", "code": "true"}),
        ("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        ("DELETE", "/mcp", None),
        ("GET", "/metrics", None), ("GET", f"{s}/metrics", None),
        # methods a route does not take: still 401 first (docs/API.md: auth before 405)
        ("PATCH", s, None), ("PUT", "/sandbox", None), ("OPTIONS", f"{s}/exec", None),
    ]


BAD_AUTH = {
    "missing": {},
    "wrong_bearer": {"Authorization": "Bearer not-the-key"},
    "wrong_x_api_key": {"X-API-Key": "not-the-key"},
    "empty_bearer": {"Authorization": "Bearer "},
    "basic_scheme": {"Authorization": "Basic YWRtaW46YWRtaW4="},
}


def test_wrong_or_missing_key_on_every_route_is_401_and_does_nothing(stack, api, sandbox):
    key = stack.api_key
    near = {
        "key_prefix": {"Authorization": "Bearer " + key[:-1]},
        "key_plus_byte": {"X-API-Key": key + "0"},
        "key_with_nul": {"Authorization": "Bearer " + key + "%00"},
        "key_in_query_only": {},
    }
    ports_before = api.ports(sandbox)
    with no_side_effect(stack, api):
        for name, headers in {**BAD_AUTH, **near}.items():
            for method, path, body in every_route(sandbox):
                if name == "key_in_query_only":
                    path += ("&" if "?" in path else "?") + f"api_key={key}&key={key}"
                h = dict(headers)
                data = None
                if isinstance(body, dict):
                    data = json.dumps(body)
                    h["Content-Type"] = "application/json"
                elif body is not None:
                    data = body
                r = requests.request(method, stack.url + path, headers=h, data=data, timeout=30)
                assert r.status_code == 401, f"{name}: {method} {path} -> {r.status_code} {r.text[:200]}"
                assert_error(r, 401, "unauthorized")
    assert_alive(api, sandbox)
    assert api.ports(sandbox) == ports_before
    out = api.exec(sandbox, "ls /tmp")["stdout"]
    assert "unauthorized" not in out, out
    # /healthz alone needs no key, and a key does not change it
    assert requests.get(stack.url + "/healthz", headers=BAD_AUTH["wrong_bearer"], timeout=10).status_code == 200


# --------------------------------------------------------------- bounds

def test_port_numbers_and_durations_at_and_past_every_bound(stack, api, sandbox):
    low, high = (int(x) for x in stack.conf["port_range"].split("-"))
    dmax = stack.conf_int("max_port_duration")
    refused = [
        ({"sandboxport": 0, "duration": 60}, 422, "out_of_range"),
        ({"sandboxport": -1, "duration": 60}, 422, "out_of_range"),
        ({"sandboxport": 65536, "duration": 60}, 422, "out_of_range"),
        ({"sandboxport": 2 ** 63, "duration": 60}, 400, "bad_field"),
        ({"sandboxport": "80", "duration": 60}, 400, "bad_field"),
        ({"sandboxport": 1.5, "duration": 60}, 400, "bad_field"),
        ({"sandboxport": 8000, "duration": 0}, 422, "out_of_range"),
        ({"sandboxport": 8000, "duration": -1}, 422, "out_of_range"),
        ({"sandboxport": 8000, "duration": dmax + 1}, 422, "out_of_range"),
        ({"sandboxport": 8000, "duration": 2 ** 32 + 60}, 422, "out_of_range"),
        ({"sandboxport": 8000, "duration": "60"}, 400, "bad_field"),
        ({"sandboxport": 8000, "duration": 60, "hostport": low - 1}, 422, "out_of_range"),
        ({"sandboxport": 8000, "duration": 60, "hostport": high + 1}, 422, "out_of_range"),
        ({"sandboxport": 8000, "duration": 60, "hostport": 0}, 422, "out_of_range"),
        ({"sandboxport": 8000, "duration": 60, "hostport": 65536 + low}, 422, "out_of_range"),
    ]
    with no_side_effect(stack, api):
        for body, status, code in refused:
            r = api.request("POST", f"/sandbox/{sandbox}/ephemeralport", json=body)
            assert_error(r, status, code)
        for port in ("0", "65536", "-1", "abc", "1.5", "99999999999999999999"):
            r = api.close_port(sandbox, port)
            assert r.status_code in (400, 404, 422), (port, r.status_code, r.text)
            assert_error(r, r.status_code, {"bad_field", "out_of_range", "not_found"})
    assert api.ports(sandbox) == [] and stack.port_sockets() == []
    # at the bounds: accepted, then closed again
    for sp, dur in ((1, 1), (65535, dmax)):
        info = api.open_port(sandbox, sp, duration=dur)
        assert info["sandboxport"] == sp and low <= info["hostport"] <= high, info
        # a 1 s port may have expired already
        assert api.close_port(sandbox, sp).status_code in ((204, 404) if dur == 1 else (204,))
    hp = nbtest.free_port_in(low, high)
    info = api.open_port(sandbox, 8000, duration=60, hostport=hp)
    assert info["hostport"] == hp
    assert api.close_port(sandbox, 8000).status_code == 204
    nbtest.wait_until(lambda: stack.port_sockets() == [], 10, what="the port sockets to go")


def test_ttl_bounds_on_create_and_timeout(stack, api, sandbox):
    tmax = stack.conf_int("max_ttl")
    bad = [
        ({"ttl": 0}, 422, "out_of_range"), ({"ttl": -1}, 422, "out_of_range"),
        ({"ttl": tmax + 1}, 422, "out_of_range"), ({"ttl": 2 ** 62}, 422, "out_of_range"),
        ({"ttl": "NaN"}, 400, "bad_field"), ({"ttl": "600"}, 400, "bad_field"),
        ({"ttl": 1.5}, 400, "bad_field"), ({"ttl": None}, 400, "bad_field"),
        ({"ttl": True}, 400, "bad_field"), ({"ttl": [600]}, 400, "bad_field"),
    ]
    raw_bad = [b'{"ttl":1e309}', b'{"ttl":-1e309}', b'{"ttl":1e300}', b'{"ttl":9223372036854775808}',
               b'{"ttl":NaN}', b'{"ttl":Infinity}', b'{"ttl":0x10}', b'{"ttl":-0}']
    with no_side_effect(stack, api):
        for path in ("/sandbox", f"/sandbox/{sandbox}/timeout"):
            for body, status, code in bad:
                assert_error(api.request("POST", path, json=body), status, code)
            for body in raw_bad:
                r = api.request("POST", path, data=body, headers={"Content-Type": "application/json"})
                # not a number JSON has (bad_json), or not an integer we take
                assert_error(r, (400, 422), {"bad_json", "bad_field", "out_of_range"})
    # at the bound: accepted (on the existing sandbox: no container to make)
    r = api.request("POST", f"/sandbox/{sandbox}/timeout", json={"ttl": tmax})
    assert r.status_code == 200 and parse_json(r)["ttl"] == tmax, r.text
    r = api.request("POST", f"/sandbox/{sandbox}/timeout", json={"ttl": 1.0e3})
    assert r.status_code == 200 and parse_json(r)["ttl"] == 1000, r.text
    assert_alive(api, sandbox)


def test_exec_timeout_bounds(stack, api, sandbox):
    tmax = stack.conf_int("exec_timeout_max")
    with no_side_effect(stack, api):
        for t in (0, -1, tmax + 1, tmax + 0.001, 1e300, "5", None, False):
            r = api.request("POST", f"/sandbox/{sandbox}/exec", json={"command": "true", "timeout": t})
            assert_error(r, (400, 422), {"bad_field", "out_of_range"})
        for raw in (b'{"command":"true","timeout":1e309}', b'{"command":"true","timeout":-1e309}',
                    b'{"command":"true","timeout":NaN}'):
            r = api.request("POST", f"/sandbox/{sandbox}/exec", data=raw,
                            headers={"Content-Type": "application/json"})
            assert_error(r, (400, 422), {"bad_json", "out_of_range"})
        for t in (tmax, 0.5):
            out = api.exec(sandbox, "echo ok", timeout=t)
            assert out["stdout"] == "ok\n" and out["exit_code"] == 0, out


def test_env_caps_at_and_past_the_bound_on_exec(stack, api, sandbox):
    nmax = int(stack.conf.get("max_env", 64))
    bmax = int(stack.conf.get("max_env_bytes", 4096))
    at_count = {f"E{i}": "v" for i in range(nmax)}
    at_bytes = {ENV_NAME: "x" * (bmax - len(ENV_NAME) - 1)}    # NAME=value is bmax bytes
    with no_side_effect(stack, api):
        out = api.exec(sandbox, "env | grep -c '^E[0-9]'", env=at_count)
        assert out["stdout"] == f"{nmax}\n", out
        out = api.exec(sandbox, f'printf %s "${ENV_NAME}" | wc -c', env=at_bytes)
        assert out["stdout"].strip() == str(bmax - len(ENV_NAME) - 1), out
        for env in ({**at_count, "ONE_MORE": "v"},
                    {ENV_NAME: at_bytes[ENV_NAME] + "x"}):
            r = api.request("POST", f"/sandbox/{sandbox}/exec", json={"command": "true", "env": env})
            assert_error(r, 422, "out_of_range")
        for env in ({"1BAD": "v"}, {"A-B": "v"}, {"": "v"}, {"A": 1}, {"A": None}, {"A=B": "v"}):
            r = api.request("POST", f"/sandbox/{sandbox}/exec", json={"command": "true", "env": env})
            assert_error(r, 400, "bad_field")


def test_metadata_and_env_caps_on_create(stack, api):
    nmax = int(stack.conf.get("max_metadata", 16))
    bmax = int(stack.conf.get("max_metadata_bytes", 1000))
    emax = int(stack.conf.get("max_env", 64))
    # nmax entries whose compact JSON is exactly bmax bytes
    md = {f"k{i:02d}": "" for i in range(nmax)}
    pad = bmax - len(json.dumps(md, separators=(",", ":")))
    md["k00"] = "v" * pad
    assert len(json.dumps(md, separators=(",", ":"))) == bmax
    past = [
        {"metadata": {**md, "k99": ""}},                          # one entry too many
        {"metadata": {**md, "k00": md["k00"] + "v"}},             # one byte too many
        {"env": {f"E{i}": "v" for i in range(emax + 1)}},
        {"env": {ENV_NAME: "x" * int(stack.conf.get("max_env_bytes", 4096))}},
    ]
    with no_side_effect(stack, api):
        for body in past:
            assert_error(api.request("POST", "/sandbox", json=body), 422, "out_of_range")
        for body in ({"metadata": {"k": 1}}, {"metadata": ["k"]}, {"env": {"1X": "v"}},
                     {"metadata": {"k": {"nested": "v"}}}):
            assert_error(api.request("POST", "/sandbox", json=body), 400, "bad_field")
    # at every bound at once: one sandbox, made and checked
    info = api.create_info(ttl=stack.conf_int("max_ttl"), metadata=md,
                           env={f"E{i}": "v" for i in range(emax)})
    assert info["metadata"] == md and info["ttl"] == stack.conf_int("max_ttl"), info
