"""TLS (docs/NGINX.md, "TLS"): the standalone nginx rendered with
render-nginx.sh --tls-cert/--tls-key serves the API and the sandbox ports'
host names over https only, with one certificate whose names cover the API's
host and *.<ports domain>. The certificate (conftest.py, certs) is made with the openssl CLI,
signed by a CA made there too, and every client verifies against that CA:
the API (create, exec, open a port, destroy) and a port URL reached by its
own host name (SNI and Host), as a browser would."""

import shutil
import subprocess

import pytest
import requests

from nbtest import PORTS_DOMAIN, assert_error, run
from test_ports import start_http_server

OPENSSL = shutil.which("openssl")
CURL = shutil.which("curl")

pytestmark = pytest.mark.skipif(not OPENSSL or not CURL, reason="needs the openssl and curl CLIs")


def curl_https(url, host, port, ca):
    """GET url (https://HOST:PORT/...) with HOST resolved to 127.0.0.1: SNI
    and Host are HOST, the certificate is verified against ca."""
    r = run([CURL, "-sS", "--max-time", "20", "--cacert", str(ca),
             "--resolve", f"{host}:{port}:127.0.0.1", "-w", "\n%{http_code}", url], check=False)
    body, _, code = r.stdout.rpartition("\n")
    return r.returncode, code, body, r.stderr


def test_api_and_a_port_url_over_https_verified_against_the_ca(make_stack, certs):
    cert, key, ca = certs
    st = make_stack("tls", tls=(cert, key, ca))
    assert st.url.startswith("https://127.0.0.1:")
    api = st.api

    # the API: create, exec, list, open a port, destroy, all over https
    info = api.create_info(ttl=600)
    sid = info["sandboxId"]
    res = api.exec(sid, "echo hello over tls")
    assert res["exit_code"] == 0 and res["output"] == "hello over tls\n", res
    r = api.request("GET", "/sandbox")
    assert r.status_code == 200 and sid in r.text, r.text[:300]

    token = start_http_server(api, sid, 8000)
    p = api.open_port(sid, 8000, 600)
    host = f"8000-{sid}.{PORTS_DOMAIN}"
    assert p["url"] == f"https://{host}:{st.port}/", p

    # the port by its own name: SNI picks the certificate (the wildcard),
    # Host the ports server
    rc, code, body, err = curl_https(p["url"] + "index.txt", host, st.port, ca)
    assert rc == 0 and code == "200" and body == token, (rc, code, body[:300], err)
    # the API's name does not reach the port, the port's name not the API
    rc, code, body, err = curl_https(f"https://{host}:{st.port}/sandbox", host, st.port, ca)
    assert rc == 0 and code == "404" and sid not in body, (rc, code, body[:300], err)

    r = api.request("DELETE", f"/sandbox/{sid}")
    assert r.status_code in (200, 204), r.text[:300]
    assert_error(api.get(sid), 404, "not_found")
    rc, code, body, err = curl_https(p["url"] + "index.txt", host, st.port, ca)
    assert rc == 0 and code == "502", (rc, code, body[:300], err)

    # https only, and the verification is real: plain http on the TLS port
    # is refused by nginx, and a client without the CA does not connect
    r = requests.get(f"http://127.0.0.1:{st.port}/healthz", timeout=10)
    assert r.status_code == 400, (r.status_code, r.text[:200])
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(st.url + "/healthz", timeout=10, verify=True)
    rc, code, body, err = curl_https(f"https://localhost:{st.port}/healthz", "localhost", st.port, ca)
    assert rc == 0 and code == "200", (rc, code, body[:300], err)
