"""test_nginx_snippet.py - nanobox behind an nginx of the operator's own.

docs/NGINX.md tells an operator to `include` the rendered snippet
(nanobox.conf) inside a server {} of theirs. Here that server is written by
hand, as an operator would: its own `location /`, its own default_type and
error pages, and the snippet included. The API must work through it, the
operator's own locations must stay theirs, and the errors nginx makes
itself on nanobox's routes (body too large, nanobox-fcgi gone) must still be
the API's JSON, while the operator's pages stay theirs elsewhere.
"""
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import requests

import nbtest

OWN_CONF = """\
{user_line}
worker_processes 1;
pid {dir}/nginx.pid;
daemon off;
error_log {dir}/error.log;
events {{ worker_connections 256; }}
http {{
    default_type text/plain;
    access_log off;
    client_body_temp_path {dir}/body;
    fastcgi_temp_path {dir}/fastcgi;
    proxy_temp_path {dir}/proxy;
    scgi_temp_path {dir}/scgi;
    uwsgi_temp_path {dir}/uwsgi;
    # the snippet's request-rate zone, at http level (docs/NGINX.md)
    include {http_snippet};
    server {{
        listen 127.0.0.1:{port};
        server_name operator.example;
        # the operator's own site and error page
        location / {{
            return 200 "the operator's site\\n";
        }}
        location = /big {{
            client_max_body_size 1k;
            return 200 "small ok\\n";
        }}
        error_page 413 502 /operator-error.txt;
        location = /operator-error.txt {{
            internal;
            return 200 "the operator's error page\\n";
        }}
        include {snippet};
    }}
}}
"""


def start_own_nginx(tmp, snippet):
    port = nbtest.free_port()
    for d in ("body", "fastcgi", "proxy", "scgi", "uwsgi"):
        (tmp / d).mkdir(exist_ok=True)
    os.chmod(tmp, 0o755)
    user_line = "user www-data;" if os.geteuid() == 0 else ""
    conf = tmp / "nginx.conf"
    conf.write_text(OWN_CONF.format(user_line=user_line, dir=tmp, port=port, snippet=snippet,
                                    http_snippet=Path(snippet).parent / "nanobox-http.conf"))
    # the snippet includes fastcgi_params by a relative name: nginx's own, next to our conf
    params = Path("/etc/nginx/fastcgi_params")
    (tmp / "fastcgi_params").write_text(params.read_text())
    t = nbtest.run([nbtest.NGINX, "-t", "-c", str(conf), "-p", str(tmp) + "/"], check=False)
    assert t.returncode == 0, f"nginx -t on the operator's config with the snippet:\n{t.stderr}"
    proc = subprocess.Popen([nbtest.NGINX, "-c", str(conf), "-p", str(tmp) + "/"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 10
    while True:
        try:
            requests.get(url + "/", timeout=1)
            break
        except requests.ConnectionError:
            assert proc.poll() is None and time.time() < deadline, \
                f"nginx did not start: {(tmp / 'error.log').read_text(errors='replace')[-2000:]}"
            time.sleep(0.05)
    return proc, url


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGQUIT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def render(tmp, socket):
    out = tmp / "rendered"
    r = nbtest.run(["bash", str(nbtest.RENDER_NGINX), str(out), socket, "127.0.0.1:1", str(tmp / "prefix")],
                   check=False)
    assert r.returncode == 0, f"render-nginx.sh: {r.stderr}"
    return out / "nanobox.conf"


@pytest.fixture
def tmp_dir():
    """A temp dir nginx's www-data workers can reach (pytest's tmp_path sits
    under a 0700 directory)."""
    d = Path(tempfile.mkdtemp(prefix="nanobox-snippet-"))
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def own_nginx(stack, tmp_dir):
    proc, url = start_own_nginx(tmp_dir, render(tmp_dir, stack.sock))
    yield url
    stop(proc)


def test_the_api_works_inside_the_operators_server_and_their_site_stays_theirs(stack, own_nginx):
    url, h = own_nginx, {"Authorization": f"Bearer {stack.api_key}"}
    r = requests.get(url + "/", timeout=10)
    assert r.status_code == 200 and r.text == "the operator's site\n"
    r = requests.get(url + "/healthz", timeout=10)
    assert r.status_code == 200 and r.json()["status"] == "ok", r.text
    r = requests.post(url + "/sandbox", json={"ttl": 120}, headers=h, timeout=120)
    assert r.status_code == 201, r.text
    sid = r.json()["sandboxId"]
    try:
        r = requests.post(f"{url}/sandbox/{sid}/exec", json={"command": "echo through-the-operator"},
                          headers=h, timeout=60)
        assert r.status_code == 200 and r.json()["stdout"] == "through-the-operator\n", r.text
        # NDJSON streams through the operator's server too
        r = requests.post(f"{url}/sandbox/{sid}/exec", json={"command": "echo a; echo b"},
                          headers={**h, "Accept": "application/x-ndjson"}, timeout=60)
        assert r.status_code == 200 and r.headers["content-type"].startswith("application/x-ndjson"), r.text
        assert '"type":"exit"' in r.text.replace(" ", ""), r.text
    finally:
        requests.delete(f"{url}/sandbox/{sid}", headers=h, timeout=120)
    assert nbtest.docker_ps(stack.instance, sandbox=sid) == []
    # unauthorized is the app's JSON, as ever
    nbtest.assert_error(requests.get(url + "/sandbox", timeout=10), 401, "unauthorized")


def test_nginx_own_errors_on_nanobox_routes_are_json_and_the_operators_elsewhere(stack, own_nginx):
    url, h = own_nginx, {"Authorization": f"Bearer {stack.api_key}"}
    before = nbtest.docker_ps(stack.instance)
    # over the snippet's client_max_body_size (16m on /sandbox): nginx's 413, as JSON
    r = requests.post(url + "/sandbox", data=b"x" * (17 << 20), headers=h, timeout=60)
    nbtest.assert_error(r, 413, "too_large")
    assert r.headers["content-type"].startswith("application/json"), r.headers
    # the operator's own location keeps the operator's 413 page
    r = requests.post(url + "/big", data=b"x" * 4096, timeout=10)
    assert r.status_code == 413 and r.text == "the operator's error page\n", (r.status_code, r.text)
    assert nbtest.docker_ps(stack.instance) == before


def test_a_snippet_whose_fcgi_is_gone_answers_json_502(stack, tmp_dir):
    proc, url = start_own_nginx(tmp_dir, render(tmp_dir, str(tmp_dir / "no-such-fcgi.sock")))
    try:
        for method, path in (("GET", "/healthz"), ("GET", "/sandbox"), ("POST", "/run"), ("POST", "/mcp")):
            r = requests.request(method, url + path, headers={"Authorization": f"Bearer {stack.api_key}"},
                                 timeout=10)
            nbtest.assert_error(r, 502, "upstream_unavailable")
        r = requests.get(url + "/", timeout=10)
        assert r.status_code == 200 and r.text == "the operator's site\n"
    finally:
        stop(proc)


def test_the_operators_server_refuses_a_request_without_the_key_before_its_body(stack, own_nginx):
    """The snippet's key check runs in the operator's server too: the 401
    comes while the 50 MiB body has not been sent."""
    import json
    import socket
    import urllib.parse
    u = urllib.parse.urlsplit(own_nginx)
    s = socket.create_connection((u.hostname, u.port), timeout=5)
    try:
        s.sendall(b"PUT /sandbox/00000000-0000-4000-8000-000000000000/files?path=/workspace/x HTTP/1.1\r\n"
                  b"Host: operator.example\r\nConnection: close\r\nContent-Length: 52428800\r\n\r\n")
        data = b""
        while not data.rstrip().endswith(b"}"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    finally:
        s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.split()[1] == b"401", data[:300]
    assert json.loads(body)["code"] == "unauthorized", body
