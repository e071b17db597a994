"""
E2B's signed file URLs (docs/E2B.md, "Signed file URLs") against the live
stack: GET and POST /files opened by the URL's ?signature= (the SDK's
files.downloadUrl and uploadUrl) instead of the access token, for a client
without the SDK, a browser or curl.

- tests/e2b/signed.mjs with both SDK pins in E2B_SANDBOX_URL's mode (the
  URL names no sandbox: its signature does), and with the pinned SDK in
  E2B_DOMAIN's (https://49983-<id>.<domain>, a TLS stack): each URL is
  fetched with node's plain fetch, no SDK header;
- raw requests, curl among them, built as the SDK builds them (the scheme
  is re-made here from E2B's definition, so a drift on either side shows):
  the URL in both routing modes and with the header, then the hostile
  ones: a tampered signature, path, user, operation or expiration, an
  expired one, another sandbox's host or header with the first one's
  signature, a path with "..", a token header that is wrong, an upload
  whose filename names another path. Each is a 401 (400 for input that is
  no URL of the SDK's) in E2B's shape and writes nothing.
"""

import base64
import hashlib
import json
import subprocess
import time

import pytest
import requests

import nbtest
from test_e2b import access_token, e2b_error, e2b_latest, e2b_sdk, sdk, sdk_script, step  # noqa: F401
from test_keys import keys_cli, tenants  # noqa: F401

SIGNED_JS = "signed.mjs"


def xdist_group_of(item):
    if "signedrun" not in item.fixturenames:
        return None
    return f"e2b-signed-{item.callspec.params['sdk']}"


def sign(token, path, operation, user="", exp=None):
    """E2B's signature (the SDK's getSignature, envd's generateSignature):
    "v1_" + unpadded base64 of SHA-256("path:operation:user:token[:exp]")."""
    raw = f"{path}:{operation}:{user}:{token}" + ("" if exp is None else f":{exp}")
    return "v1_" + base64.b64encode(hashlib.sha256(raw.encode()).digest()).decode().rstrip("=")


def signed_query(token, path, operation, user=None, exp=None, signature=None):
    q = {"path": path}
    if user is not None:
        q["username"] = user
    q["signature"] = signature or sign(token, path, operation, user or "", exp)
    if exp is not None:
        q["signature_expiration"] = str(exp)
    return q


def host(sid, port="49983"):
    return f"{port}-{sid}.{nbtest.PORTS_DOMAIN}"


def put_file(stack, sid, path, data):
    """Write path in sid through the SDK's own upload (the token in the header)."""
    r = requests.post(f"{stack.url}/files", params={"path": path},
                      headers={"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "49983",
                               "X-Access-Token": access_token(stack, sid)},
                      files={"file": (path, data)}, timeout=60)
    assert r.status_code == 200, r.text[:300]


def read_back(stack, sid, path):
    """(status, bytes) of path in sid, read with the token in the header."""
    r = requests.get(f"{stack.url}/files", params={"path": path},
                     headers={"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "49983",
                              "X-Access-Token": access_token(stack, sid)}, timeout=60)
    return r.status_code, r.content


# ------------------------------------------------------------ the SDK's URLs

@pytest.fixture(scope="module")
def signedrun(stack, sdk):
    """signed.mjs once against the stack, E2B_SANDBOX_URL's mode: its summary."""
    summary = sdk_script(stack, sdk, SIGNED_JS, "e2bs-")
    yield summary
    for sid in summary["created"]:
        stack.api.delete(sid)


def check_common_steps(s, origin):
    assert step(s, "token") == {"hex64": True}
    step(s, "setup")
    assert step(s, "download") == {"origin": origin, "keys": ["path", "signature"], "status": 200,
                                   "text": "signed hello"}
    assert step(s, "downloadBinary") == {"status": 200, "size": 200_000, "sha": s["blobSha"]}
    assert step(s, "downloadExpiring") == {
        "origin": origin, "keys": ["path", "signature", "signature_expiration", "username"],
        "status": 200, "text": "signed hello"}
    up = step(s, "upload")
    assert (up["keys"], up["status"], up["read"], up["filenameWritten"]) == \
        (["path", "signature"], 200, "uploaded by url", False), up
    assert up["answer"] == [{"name": "up.txt", "type": "file", "path": "/home/user/signed/up.txt"}], up
    assert step(s, "uploadExpiring")["read"] == "second"
    for name in ("expired", "expiredUpload", "readUrlUsedToWrite", "otherPath"):
        got = step(s, name)
        assert got["status"] == 401 and got["json"]["code"] == 401, (name, got)
    assert "expired" in step(s, "expired")["json"]["message"]
    assert step(s, "expiredUpload")["written"] is False
    assert step(s, "readUrlUsedToWrite")["read"] == "signed hello"
    assert step(s, "connectedObject") == {"status": 200, "text": "signed hello"}
    assert step(s, "insecureGetsAToken") == {"hex64": True}
    assert step(s, "eachSandboxItsOwn") == {"mine": "signed hello", "its": "the other one"}


def test_sdk_urls_work_without_the_sdk_on_one_origin(signedrun, stack):
    """E2B_SANDBOX_URL: the URL is the origin's /files, and names no sandbox."""
    check_common_steps(signedrun, stack.url)
    # once the sandbox is gone its signature is no live sandbox's
    assert step(signedrun, "killed") == {"status": 401}


def test_sdk_urls_work_without_the_sdk_by_host_name(make_stack, e2b_sdk, certs):
    """E2B_DOMAIN: https://49983-<id>.<domain>/files?..., over TLS."""
    cert, key, ca = certs
    st = make_stack("e2bsigned", tls=(cert, key, ca))
    s = sdk_script(st, e2b_sdk, SIGNED_JS, "e2bs-",
                   env_over={"E2B_SANDBOX_URL": None, "E2B_DOMAIN": nbtest.PORTS_DOMAIN,
                             "NODE_EXTRA_CA_CERTS": str(ca)},
                   args_more=["--port", str(st.port)])
    try:
        check_common_steps(s, f"https://{host(s['id'])}")
        got = step(s, "otherHost")
        assert got["status"] == 401 and got["json"]["code"] == 401, got
        assert step(s, "killed")["status"] == 502  # as E2B's proxy says for a sandbox gone
    finally:
        for sid in s["created"]:
            st.api.delete(sid)


# ------------------------------------------------------------ raw requests

@pytest.fixture
def two(stack, api):
    """Two sandboxes, each with signed/a.txt of its own."""
    sid, other = api.create(), api.create()
    put_file(stack, sid, "signed/a.txt", b"first")
    put_file(stack, other, "signed/a.txt", b"second")
    return sid, other


def test_curl_downloads_and_uploads_with_the_url_alone(stack, api, two, tmp_path):
    """curl "$url" and curl -F file=@x "$uploadUrl", nothing else, in
    E2B_SANDBOX_URL's mode (the signature names the sandbox) and by host."""
    sid, other = two
    tok = access_token(stack, sid)
    q = requests.models.RequestEncodingMixin._encode_params
    url = f"{stack.url}/files?" + q(signed_query(tok, "signed/a.txt", "read"))
    r = subprocess.run(["curl", "-sS", "-w", "\n%{http_code}", url], capture_output=True, timeout=60)
    assert r.returncode == 0 and r.stdout == b"first\n200", r
    # the other sandbox's own URL reaches the other one
    url2 = f"{stack.url}/files?" + q(signed_query(access_token(stack, other), "signed/a.txt", "read"))
    assert requests.get(url2, timeout=30).content == b"second"

    x = tmp_path / "x"
    x.write_bytes(b"by curl -F\x00\xff")
    exp = int(time.time()) + 60
    url = f"{stack.url}/files?" + q(signed_query(tok, "/home/user/signed/up.bin", "write", user="user", exp=exp))
    r = subprocess.run(["curl", "-sS", "-F", f"file=@{x}", url], capture_output=True, timeout=60)
    assert r.returncode == 0, r
    # the signed path, not the part's filename ("x")
    assert json.loads(r.stdout) == [{"name": "up.bin", "type": "file", "path": "/home/user/signed/up.bin"}]
    assert read_back(stack, sid, "/home/user/signed/up.bin") == (200, b"by curl -F\x00\xff")
    assert read_back(stack, sid, "/home/user/x")[0] == 404
    # by host (E2B_DOMAIN's names; plain http here, as nginx's ports server serves)
    r = requests.get(f"{stack.url}/files", params=signed_query(tok, "signed/a.txt", "read"),
                     headers={"Host": host(sid)}, timeout=30)
    assert (r.status_code, r.content) == (200, b"first")
    # and with the SDK's header instead of the host, no token
    r = requests.get(f"{stack.url}/files", params=signed_query(tok, "signed/a.txt", "read"),
                     headers={"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "49983"}, timeout=30)
    assert (r.status_code, r.content) == (200, b"first")


ROUTES = ["origin", "host", "header"]


def request_as(stack, route, sid, method, params, **kw):
    """/files with params, the sandbox named the way route says (origin: not at all)."""
    headers = dict(kw.pop("headers", {}))
    if route == "host":
        headers["Host"] = host(sid)
    elif route == "header":
        headers.update({"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "49983"})
    return requests.request(method, f"{stack.url}/files", params=params, headers=headers, timeout=30, **kw)


@pytest.mark.parametrize("route", ROUTES)
def test_a_wrong_signature_is_401_and_reads_nothing(stack, two, route):
    sid, other = two
    tok = access_token(stack, sid)
    now = int(time.time())
    good = signed_query(tok, "signed/a.txt", "read")
    assert request_as(stack, route, sid, "GET", good).content == b"first"
    flipped = good["signature"][:-1] + ("A" if good["signature"][-1] != "A" else "B")
    bad = {
        "tampered": {**good, "signature": flipped},
        "truncated": {**good, "signature": good["signature"][:-1]},
        "longer": {**good, "signature": good["signature"] + "A"},
        "v2 prefix": {**good, "signature": "v2_" + good["signature"][3:]},
        "empty": {**good, "signature": ""},
        "another path": {**good, "path": "signed/b.txt"},
        "dot-dot path": {**good, "path": "signed/../signed/a.txt"},
        "another user": {**good, "username": "root"},
        "write's signature": signed_query(tok, "signed/a.txt", "write"),
        "another token's": signed_query(access_token(stack, other), "signed/a.txt", "read"),
        "expired": signed_query(tok, "signed/a.txt", "read", exp=now - 5),
        "expiration moved": {**signed_query(tok, "signed/a.txt", "read", exp=now + 60),
                             "signature_expiration": str(now + 6000)},
        "expiration dropped": {k: v for k, v in signed_query(tok, "signed/a.txt", "read", exp=now + 60).items()
                               if k != "signature_expiration"},
        "no signature": {"path": "signed/a.txt"},
    }
    if route == "origin":
        # the other sandbox's signature names the other one: its own file, not ours
        del bad["another token's"]
    for name, params in bad.items():
        msg = e2b_error(request_as(stack, route, sid, "GET", params), 401)
        if name == "expired":
            assert "expired" in msg, msg
        elif name != "no signature":
            assert "signature" in msg, (name, msg)
    # an expiration that is no number is not the SDK's URL at all
    e2b_error(request_as(stack, route, sid, "GET", {**good, "signature_expiration": "soon"}), 400)


def test_another_sandboxs_name_with_the_first_ones_signature_is_401(stack, two):
    """A valid signature of the first sandbox, sent to the second by host or
    header: 401, and the second's file is not read."""
    sid, other = two
    good = signed_query(access_token(stack, sid), "signed/a.txt", "read")
    for route in ("host", "header"):
        r = request_as(stack, route, other, "GET", good)
        msg = e2b_error(r, 401)
        assert other in msg and b"second" not in r.content, msg


def test_a_wrong_token_header_is_not_saved_by_a_good_signature(stack, two):
    """As envd: a token in the header decides, right or wrong."""
    sid, other = two
    good = signed_query(access_token(stack, sid), "signed/a.txt", "read")
    for route in ROUTES[1:]:
        r = request_as(stack, route, sid, "GET", good,
                       headers={"X-Access-Token": access_token(stack, other)})
        e2b_error(r, 401)


def test_a_signed_dot_dot_path_is_still_refused(stack, two):
    """Even signed with the right token, "../" out of the sandbox's paths is bad input."""
    sid, _ = two
    tok = access_token(stack, sid)
    for route in ROUTES:
        for path in ("../../etc/passwd", "/home/user/../../etc/shadow", "signed/../../x"):
            r = request_as(stack, route, sid, "GET", signed_query(tok, path, "read"))
            e2b_error(r, 400)


@pytest.mark.parametrize("route", ROUTES)
def test_a_signed_upload_writes_its_path_or_nothing(stack, api, two, route):
    sid, other = two
    tok = access_token(stack, sid)
    now = int(time.time())
    part = {"file": ("/home/user/.bashrc", b"pwned")}
    refused = {
        "read's signature": signed_query(tok, "signed/w.txt", "read"),
        "another path": {**signed_query(tok, "signed/w.txt", "write"), "path": "signed/other.txt"},
        "expired": signed_query(tok, "signed/w.txt", "write", exp=now - 1),
        "tampered": {**signed_query(tok, "signed/w.txt", "write"), "signature": "v1_" + "A" * 43},
    }
    if route != "origin":
        refused["another token's"] = signed_query(access_token(stack, other), "signed/w.txt", "write")
    for name, params in refused.items():
        e2b_error(request_as(stack, route, sid, "POST", params, files=part), 401)
    for s in (sid, other):
        assert read_back(stack, s, "/home/user/signed/w.txt")[0] == 404
        assert read_back(stack, s, "/home/user/signed/other.txt")[0] == 404
        assert read_back(stack, s, "/home/user/.bashrc")[0] == 404
    # the signed path, whatever the part's filename says
    r = request_as(stack, route, sid, "POST", signed_query(tok, "signed/w.txt", "write", exp=now + 30),
                   files=part)
    assert r.status_code == 200 and r.json() == [
        {"name": "w.txt", "type": "file", "path": "/home/user/signed/w.txt"}], r.text[:300]
    assert read_back(stack, sid, "/home/user/signed/w.txt") == (200, b"pwned")
    assert read_back(stack, sid, "/home/user/.bashrc")[0] == 404
    # one path, one part: a second one is refused (the first stays written, as envd)
    r = request_as(stack, route, sid, "POST", signed_query(tok, "signed/w2.txt", "write"),
                   files=[("file", ("a", b"1")), ("file", ("b", b"2"))])
    e2b_error(r, 400)
    assert read_back(stack, sid, "/home/user/signed/w2.txt") == (200, b"1")
    assert read_back(stack, sid, "/home/user/b")[0] == 404


def test_unsigned_files_without_a_sandbox_say_what_is_missing(stack):
    """/files that names no sandbox and carries no signature: E2B's 401, not
    the native no_route."""
    for method in ("GET", "POST"):
        msg = e2b_error(requests.request(method, f"{stack.url}/files?path=x", timeout=30), 401)
        assert "names no sandbox" in msg and "downloadUrl" in msg, msg


def test_file_keys_sandboxes_sign_with_their_own_tokens(tenants):
    """A sandbox of a keys-file key: its token (create's envdAccessToken,
    under the key's hash) signs its URLs, found on one origin among the
    default key's too; once the key is removed its URLs open nothing."""
    st, k = tenants
    r = requests.post(st.url + "/sandboxes", json={"templateID": "base", "timeout": 120},
                      headers={"X-API-KEY": "e2b_" + k["alice"].key}, timeout=120)
    assert r.status_code == 201, r.text[:300]
    sbx = r.json()
    sid, tok = sbx["sandboxID"], sbx["envdAccessToken"]
    k["alice"].created.append(sid)
    mine = st.api.create()  # the default key's, beside it
    put_file(st, mine, "k.txt", b"default's")
    r = requests.post(f"{st.url}/files", params=signed_query(tok, "k.txt", "write"),
                      files={"file": ("k.txt", b"alice's")}, timeout=30)
    assert r.status_code == 200, r.text[:300]
    for route in ROUTES:
        r = request_as(st, route, sid, "GET", signed_query(tok, "k.txt", "read"))
        assert (r.status_code, r.content) == (200, b"alice's"), (route, r.text[:300])
    # the default key's token does not sign for alice's sandbox
    e2b_error(request_as(st, "host", sid, "GET", signed_query(access_token(st, sid), "k.txt", "read")), 401)
    keys_cli(st, "rm", "alice")
    for route in ROUTES:
        e2b_error(request_as(st, route, sid, "GET", signed_query(tok, "k.txt", "read")), 401)


def test_a_paused_sandbox_is_found_and_says_it_is_paused(stack, two):
    """One origin: a paused sandbox's signature still names it (it is live),
    and the answer is the data plane's 409 for a paused sandbox; once
    resumed the same URL works."""
    sid, _ = two
    good = signed_query(access_token(stack, sid), "signed/a.txt", "read")
    r = requests.post(f"{stack.url}/sandboxes/{sid}/pause", headers={"X-API-KEY": f"e2b_{stack.api_key}"},
                      json={}, timeout=60)
    assert r.status_code == 204, r.text[:300]
    for route in ROUTES:
        e2b_error(request_as(stack, route, sid, "GET", good), 409)
    r = requests.post(f"{stack.url}/sandboxes/{sid}/connect", headers={"X-API-KEY": f"e2b_{stack.api_key}"},
                      json={"timeout": 120}, timeout=60)
    assert r.status_code in (200, 201), r.text[:300]
    assert request_as(stack, "origin", sid, "GET", good).content == b"first"
