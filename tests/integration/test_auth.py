"""API key auth: Bearer or X-API-Key; 401 without; /healthz open."""

import pytest

from nbtest import assert_error, docker_exists, parse_json, random_uuid

ROUTES = [
    ("POST", "/sandbox", {}),
    ("GET", "/sandbox", None),
    ("GET", "/sandbox/{id}", None),
    ("DELETE", "/sandbox/{id}", None),
    ("POST", "/sandbox/{id}/exec", {"command": "touch /workspace/pwned"}),
    ("POST", "/sandbox/{id}/timeout", {"ttl": 5}),
    ("POST", "/sandbox/{id}/pause", None),
    ("POST", "/sandbox/{id}/exec", {"argv": ["touch", "/workspace/pwned"], "pty": {"cols": 80, "rows": 24}}),
    ("POST", "/sandbox/{id}/pty/1/input", {"data": "x"}),
    ("POST", "/sandbox/{id}/pty/1/resize", {"cols": 80, "rows": 24}),
]


@pytest.fixture(scope="module")
def target(stack):
    sid = stack.api.create()
    yield sid
    stack.api.delete(sid)


def _bad_auth_variants(key):
    return {
        "none": {},
        "wrong-bearer": {"Authorization": "Bearer " + "0" * len(key)},
        "wrong-x-api-key": {"X-API-Key": "nope"},
        "key-prefix": {"Authorization": "Bearer " + key[:-1]},
        "key-plus-char": {"Authorization": "Bearer " + key + "x"},
        "basic-scheme": {"Authorization": "Basic " + key},
        "bare-key": {"Authorization": key},
        "empty-bearer": {"Authorization": "Bearer "},
        "empty-x-api-key": {"X-API-Key": ""},
        "key-with-nul": {"X-API-Key": key[:8]},
    }


@pytest.mark.parametrize("method,path,body", ROUTES, ids=[f"{m} {p}" for m, p, _ in ROUTES])
def test_request_without_valid_key_is_401_and_changes_nothing(api, stack, target, method, path, body):
    before = parse_json(api.get(target))
    n_containers = len(stack.live_containers())
    for name, hdrs in _bad_auth_variants(stack.api_key).items():
        r = api.request(method, path.format(id=target), json=body, headers=hdrs, auth=False)
        try:
            assert_error(r, 401, "unauthorized")
        except AssertionError as e:
            raise AssertionError(f"[{name}] {e}") from None
    assert len(stack.live_containers()) == n_containers
    after = parse_json(api.get(target))
    assert after["expires_at"] == before["expires_at"]
    assert after["state"] == "running"  # not paused
    assert docker_exists(f"nanobox-{target}")
    assert api.exec(target, "test -e /workspace/pwned")["exit_code"] == 1


def test_auth_is_checked_before_ids_are_validated(api):
    for path in ("/sandbox/not-a-uuid", f"/sandbox/{random_uuid()}"):
        assert_error(api.request("GET", path, auth=False), 401, "unauthorized")


def test_auth_is_checked_before_the_body_is_parsed(api):
    r = api.request("POST", "/sandbox", data="{broken", auth=False)
    assert_error(r, 401, "unauthorized")


def test_bearer_key_is_accepted(api):
    r = api.request("GET", "/sandbox", auth="bearer")
    assert r.status_code == 200, r.text


def test_x_api_key_is_accepted(api, stack):
    r = api.request("GET", "/sandbox", auth="x-api-key")
    assert r.status_code == 200, r.text
    r = api.request("POST", "/sandbox", json={}, auth="x-api-key", timeout=120)
    assert r.status_code == 201, r.text
    sid = parse_json(r)["sandboxId"]
    api.created.append(sid)
    r = api.request("POST", f"/sandbox/{sid}/exec", json={"command": "echo k"}, auth="x-api-key")
    assert r.status_code == 200 and parse_json(r)["stdout"] == "k\n"
    assert api.request("DELETE", f"/sandbox/{sid}", auth="x-api-key").status_code == 204


def test_bearer_scheme_is_case_insensitive(api, stack):
    r = api.request("GET", "/sandbox", headers={"Authorization": "bearer " + stack.api_key}, auth=False)
    assert r.status_code == 200, r.text


def test_healthz_is_open(api):
    r = api.request("GET", "/healthz", auth=False)
    assert r.status_code == 200
    assert parse_json(r)["status"] == "ok"
    r = api.request("GET", "/healthz", auth=False, headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 200


def test_unauthorized_response_does_not_leak_the_key(api, stack):
    r = api.request("GET", "/sandbox", auth=False, headers={"X-API-Key": "wrong"})
    assert stack.api_key not in r.text
    assert stack.api_key not in str(r.headers)


def _refused_before_the_body(url, path, headers=b"", framing=b"Content-Length: 52428800\r\n"):
    """Send only the headers of a PUT with a body of framing (50 MiB by
    default): the answer must come without a byte of the body. Returns
    (status, parsed JSON body)."""
    import json
    import socket
    import urllib.parse
    u = urllib.parse.urlsplit(url)
    s = socket.create_connection((u.hostname, u.port), timeout=5)
    try:
        s.sendall(b"PUT " + path.encode() + b" HTTP/1.1\r\nHost: nanobox\r\nConnection: close\r\n"
                  b"Content-Type: application/octet-stream\r\n" + framing
                  + headers + b"\r\n")
        data = b""
        while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
            chunk = s.recv(65536)      # socket.timeout here: nginx waited for the body
            if not chunk:
                break
            data += chunk
    finally:
        s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body.decode())


# a body nginx would spool: 50 MiB; the smallest that still gets the early
# check (8000 bytes, nanobox.conf.in's /.nanobox/auth); one of no declared size
BODY_FRAMINGS = {
    "50MiB": b"Content-Length: 52428800\r\n",
    "8000": b"Content-Length: 8000\r\n",
    "chunked": b"Transfer-Encoding: chunked\r\n",
}


@pytest.mark.parametrize("framing", BODY_FRAMINGS.values(), ids=BODY_FRAMINGS.keys())
def test_without_the_key_the_401_comes_before_the_body(stack, target, framing):
    path = f"/sandbox/{target}/files?path=/workspace/early"
    for hdr in (b"", b"X-API-Key: nope\r\n", b"Authorization: Bearer nope\r\n"):
        status, body = _refused_before_the_body(stack.url, path, hdr, framing)
        assert status == 401 and body["code"] == "unauthorized", (hdr, status, body)


def _auth_checks(stack):
    """How many early key checks (nginx's auth_request) the log shows so far."""
    with open(stack.log_path) as f:
        return sum(" worker: AUTH /" in line for line in f)


def test_a_request_without_a_body_to_spool_has_its_key_checked_once(api, stack, target):
    """An exec, a GET: no early check (one FastCGI round trip less), the
    request's own check refuses them without the key and nothing runs; a
    body of 8000 bytes or more still gets the check before nginx reads it."""
    before = _auth_checks(stack)
    assert api.exec(target, "true")["exit_code"] == 0
    assert api.request("GET", f"/sandbox/{target}").status_code == 200
    r = api.request("POST", f"/sandbox/{target}/exec", auth=False,
                    json={"command": "touch /workspace/early-small", "pad": "x" * 7900})
    assert_error(r, 401, "unauthorized")
    assert_error(api.request("GET", f"/sandbox/{target}", auth=False), 401, "unauthorized")
    assert _auth_checks(stack) == before
    assert api.exec(target, "test -e /workspace/early-small")["exit_code"] == 1
    r = api.request("PUT", f"/sandbox/{target}/files?path=/workspace/big", data=b"b" * 8000)
    assert r.status_code == 201, r.text
    assert _auth_checks(stack) == before + 1


def test_an_empty_api_key_lets_every_request_through_nginx_too(make_stack):
    st = make_stack("nokey", api_key="")
    r = st.api.request("POST", "/sandbox", json={}, auth=False, timeout=120)
    assert r.status_code == 201, r.text
    sid = parse_json(r)["sandboxId"]
    st.api.created.append(sid)
    r = st.api.request("PUT", f"/sandbox/{sid}/files?path=/workspace/a", data=b"open", auth=False)
    assert r.status_code == 201, r.text
    assert st.api.request("GET", f"/sandbox/{sid}/files?path=/workspace/a", auth=False).content == b"open"
    r = st.api.request("POST", f"/sandbox/{sid}/exec", json={"command": "cat /workspace/a"}, auth=False)
    assert r.status_code == 200 and parse_json(r)["stdout"] == "open", r.text
