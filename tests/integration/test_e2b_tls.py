"""E2B's host routing over https beside plain http (docs/E2B.md,
"E2B_DOMAIN"; docs/NGINX.md, "TLS"): a stack rendered with
render-nginx.sh --tls-cert/--tls-key --tls-listen serves the API and the
<port>-<id>.<domain> hosts on its plain-http address and, with a wildcard
certificate of a throwaway CA (conftest.py, certs), on an https address of
its own.

- The E2B SDK (both pins: tests/e2b, tests/e2b-latest) pointed by E2B_DOMAIN alone (no E2B_API_URL, no
  E2B_SANDBOX_URL): the API at https://api.<domain>, envd and the code
  interpreter at https://49983-<id>.<domain> and 49999-...: commands, files,
  runCode, streaming through TLS; the same hosts over plain http.
- curl --cacert to a port host; a name the certificate does not cover, a
  client without the CA, a Host of another domain, http on the https
  address, https on the http one: each fails as it should.
- Another key's sandbox by host name over TLS is refused exactly as over
  plain http.
- A cluster's front ending TLS (render-front.sh); both renders refuse bad
  TLS settings before nginx sees them.
"""

import json
import os
import shutil
import signal
import subprocess
import sys

import pytest

import nbtest
from test_e2b import access_token, e2b_latest, e2b_sdk, sdk_script, step  # noqa: F401 (fixtures)
from test_keys import add_key

CURL = shutil.which("curl")
DOMAIN = nbtest.PORTS_DOMAIN

pytestmark = pytest.mark.skipif(not shutil.which("openssl") or not CURL,
                                reason="needs the openssl and curl CLIs")


def curl(url, port, ca=None, headers=(), method="GET", data=None, resolve=True):
    """(exit code, status, body, stderr) of curl on url, whose host name
    resolves to 127.0.0.1:port (SNI and Host stay the name); the certificate
    is verified against ca when given (else against the system's CAs)."""
    host = url.split("://", 1)[1].split("/", 1)[0].split(":", 1)[0]
    cmd = [CURL, "-sS", "--max-time", "30", "-X", method, "-w", "\n%{http_code}"]
    if resolve:
        cmd += ["--resolve", f"{host}:{port}:127.0.0.1"]
    if ca is not None:
        cmd += ["--cacert", str(ca)]
    for h in headers:
        cmd += ["-H", h]
    if data is not None:
        cmd += ["--data-binary", data]
    r = nbtest.run(cmd + [url], check=False)
    body, _, code = r.stdout.rpartition("\n")
    return r.returncode, code, body, r.stderr


def both_stack(make_stack, certs, name, **conf):
    """A stack on plain http (st.port, st.url) with https on st.tls_port."""
    cert, key, _ = certs
    tls_port = nbtest.free_port()
    st = make_stack(name, render_args=["--tls-cert", str(cert), "--tls-key", str(key),
                                       "--tls-listen", f"127.0.0.1:{tls_port}"], **conf)
    st.tls_port = tls_port
    assert st.url.startswith("http://")
    return st


@pytest.mark.parametrize("pin", ["pinned", "latest"])
def test_e2b_domain_alone_over_https_and_plain_http_beside_it(make_stack, certs, pin, request):
    _, _, ca = certs
    sdk = request.getfixturevalue("e2b_sdk" if pin == "pinned" else "e2b_latest")
    st = both_stack(make_stack, certs, "e2btls", ports_on_demand="yes")
    code = nbtest.image_present(nbtest.PYTHON_IMAGE)
    s = sdk_script(st, sdk, "domain.mjs", "e2b-", code=code,
                   env_over={"E2B_SANDBOX_URL": None, "E2B_API_URL": None, "E2B_DOMAIN": DOMAIN,
                             "NODE_EXTRA_CA_CERTS": str(ca)},
                   args_more=["--port", str(st.tls_port)])
    sid = step(s, "urls")["id"]
    assert step(s, "urls") == {"envd": f"https://49983-{sid}.{DOMAIN}", "host": f"8000-{sid}.{DOMAIN}",
                               "id": sid}
    assert step(s, "isRunning") == {"running": True}
    assert step(s, "run") == {"stdout": "hi from /home/user\n", "exitCode": 0}
    assert step(s, "files") == {"text": "over the domain", "list": ["/home/user/d/x.txt"]}
    # each line arrived while the command still ran: Connect's stream is
    # not buffered by the TLS server
    st_ = step(s, "stream")
    assert st_["stdout"] == "line1\nline2\nline3\nline4\n" and st_["chunks"] >= 2 and st_["early"], st_
    if code:
        assert step(s, "runCode") == {"stdout": ["over the domain\n"], "text": "42", "error": None}
        rc = step(s, "runCodeStream")
        assert rc["chunks"] == 4 and rc["early"], rc
    assert step(s, "getHostFetch") == {"status": 200, "text": "on demand", "again": 200}
    assert step(s, "kill") == {"killed": True}
    assert step(s, "isRunningAfterKill") == {"running": False}
    assert ("runCode" in s["steps"]) == code, sorted(s["steps"])

    # plain http keeps working beside it: the API, and the same port hosts
    sid = st.api.create()
    res = st.api.exec(sid, "echo plain")
    assert res["exit_code"] == 0 and res["output"] == "plain\n", res
    for scheme, port, ca_ in (("http", st.port, None), ("https", st.tls_port, ca)):
        rc_, status, body, err = curl(f"{scheme}://49983-{sid}.{DOMAIN}:{port}/health", port, ca_)
        assert rc_ == 0 and status in ("200", "204"), (scheme, rc_, status, body[:300], err)
        rc_, status, body, err = curl(f"{scheme}://49999-{sid}.{DOMAIN}:{port}/contexts", port, ca_)
        assert (rc_, status, json.loads(body)["code"]) == (0, "401", 401), (scheme, body[:300], err)
        rc_, status, body, err = curl(f"{scheme}://8000-{sid}.{DOMAIN}:{port}/", port, ca_)
        assert rc_ == 0 and status == "502" and "nothing listens on 127.0.0.1:8000" in body, (scheme, body[:300])
        # the API by its host name, as the SDK calls it
        rc_, status, body, err = curl(f"{scheme}://api.{DOMAIN}:{port}/sandboxes/{sid}", port, ca_,
                                      headers=[f"X-API-Key: e2b_{st.api_key}"])
        assert rc_ == 0 and status == "200" and json.loads(body)["sandboxID"] == sid, (scheme, body[:300])


def test_what_tls_refuses(make_stack, certs):
    _, _, ca = certs
    st = both_stack(make_stack, certs, "e2btlsno")
    sid = st.api.create()
    good = f"49983-{sid}.{DOMAIN}"
    rc, status, body, err = curl(f"https://{good}:{st.tls_port}/health", st.tls_port, ca)
    assert rc == 0 and status in ("200", "204"), (rc, status, body[:300], err)

    # a name the certificate does not cover: curl refuses it (60: the
    # peer's certificate is not OK), whatever nginx would answer
    rc, status, body, err = curl(f"https://49983-{sid}.other.test:{st.tls_port}/health", st.tls_port, ca)
    assert rc == 60 and "49983-" in err, (rc, err)
    # two labels under the domain: a wildcard covers one
    rc, status, body, err = curl(f"https://x.{good}:{st.tls_port}/health", st.tls_port, ca)
    assert rc == 60, (rc, err)
    # a client without the CA does not connect
    rc, status, body, err = curl(f"https://{good}:{st.tls_port}/health", st.tls_port)
    assert rc == 60, (rc, err)

    # SNI a good name, Host another domain: nginx's server for the port
    # hosts is not picked (a port of the sandbox is not reached: the API
    # server answers, in its JSON) ...
    for bad in (f"8000-{sid}.other.test", f"8000-{sid[:-1]}z.{DOMAIN}"):
        rc, status, body, err = curl(f"https://8000-{sid}.{DOMAIN}:{st.tls_port}/index.txt", st.tls_port, ca,
                                     headers=[f"Host: {bad}"])
        assert rc == 0 and status == "404" and json.loads(body)["code"] == "no_route", (bad, status, body[:300])
    rc, status, body, err = curl(f"https://8000-{sid}.{DOMAIN}:{st.tls_port}/index.txt", st.tls_port, ca)
    assert rc == 0 and status == "502" and "<html>" in body, (status, body[:300])
    # ... and the facade's ports there are E2B's routing by host on the API
    # server, which is no more than its E2b-Sandbox-Id header: the access
    # token still decides
    host = f"Host: 49983-{sid}.other.test"
    rc, status, body, err = curl(f"https://{good}:{st.tls_port}/files?path=/etc/hostname", st.tls_port, ca,
                                 headers=[host])
    assert rc == 0 and status == "401", (status, body[:300])
    rc, status, body, err = curl(f"https://{good}:{st.tls_port}/files?path=/etc/hostname", st.tls_port, ca,
                                 headers=[host, "X-Access-Token: " + access_token(st, sid)])
    assert rc == 0 and status == "200", (status, body[:300])
    # a host that names no sandbox id: the API's "names no sandbox"
    rc, status, body, err = curl(f"https://{good}:{st.tls_port}/files?path=/etc/hostname", st.tls_port, ca,
                                 headers=[f"Host: 49983-{sid[:-1]}z.{DOMAIN}"])
    assert rc == 0 and status == "401" and "names no sandbox" in body, (status, body[:300])
    # a sandbox that is not there: a host of its shape gets the facade's 502
    rc, status, body, err = curl(f"https://49983-{nbtest.random_uuid()}.{DOMAIN}:{st.tls_port}/files?path=x",
                                 st.tls_port, ca)
    assert rc == 0 and status == "502" and "is not running" in body, (status, body[:300])

    # plain http on the https address: nginx's 400; https on the http one:
    # no handshake
    rc, status, body, err = curl(f"http://{good}:{st.tls_port}/health", st.tls_port)
    assert rc == 0 and status == "400", (status, body[:300])
    rc, status, body, err = curl(f"https://{good}:{st.port}/health", st.port, ca)
    assert rc == 35, (rc, err)


def test_another_keys_sandbox_by_host_is_refused_over_tls_as_over_http(make_stack, certs):
    _, _, ca = certs
    st = both_stack(make_stack, certs, "e2btlskeys")
    keys = {n: add_key(st, n) for n in ("alice", "bob")}
    sbx = {}
    for n, k in keys.items():
        rc, status, body, err = curl(f"https://api.{DOMAIN}:{st.tls_port}/sandboxes", st.tls_port, ca,
                                     method="POST", headers=[f"X-API-Key: e2b_{k}", "Content-Type: application/json"],
                                     data=json.dumps({"templateID": "base", "timeout": 300}))
        assert rc == 0 and status == "201", (n, status, body[:300], err)
        sbx[n] = json.loads(body)
    a, b = sbx["alice"], sbx["bob"]
    try:
        def calls(scheme, port, ca_):
            """What each caller gets on alice's sandbox by its host name."""
            out = {}
            host = f"{scheme}://49983-{a['sandboxID']}.{DOMAIN}:{port}"
            rpc = ["Content-Type: application/json", "Connect-Protocol-Version: 1"]
            alice_tok = f"X-Access-Token: {a['envdAccessToken']}"
            bob_tok = f"X-Access-Token: {b['envdAccessToken']}"
            bob_key = f"X-API-Key: e2b_{keys['bob']}"
            for who, hdrs in (("alice token", [alice_tok]), ("bob token", [bob_tok]), ("bob key", [bob_key]),
                              ("bob key and token", [bob_key, bob_tok]), ("nothing", [])):
                rc, status, body, err = curl(host + "/process.Process/List", port, ca_, method="POST",
                                             headers=rpc + hdrs, data="{}")
                assert rc == 0, (scheme, who, err)
                out[who + " list"] = status
                rc, status, body, err = curl(host + "/files?path=/etc/hostname", port, ca_, headers=hdrs)
                assert rc == 0, (scheme, who, err)
                out[who + " file"] = status
            # bob's key on the API host: alice's sandbox is not his
            rc, status, body, err = curl(f"{scheme}://api.{DOMAIN}:{port}/sandboxes/{a['sandboxID']}", port,
                                         ca_, headers=[f"X-API-Key: e2b_{keys['bob']}"])
            out["bob api"] = status
            return out

        plain = calls("http", st.port, None)
        tls = calls("https", st.tls_port, ca)
        print(f"another key's sandbox by host: {tls}", file=sys.stderr)
        assert tls == plain, (tls, plain)
        assert tls["alice token list"] == "200" and tls["alice token file"] == "200", tls
        refused = {k: v for k, v in tls.items() if not k.startswith("alice")}
        assert all(v in ("401", "403", "404") for v in refused.values()), tls
    finally:
        for n, s in sbx.items():
            curl(f"http://api.{DOMAIN}:{st.port}/sandboxes/{s['sandboxID']}", st.port, method="DELETE",
                 headers=[f"X-API-Key: e2b_{keys[n]}"])


def test_a_front_terminates_tls_for_the_port_hosts(make_stack, certs, tmp_path):
    """render-front.sh --tls-cert/--tls-key --tls-listen: a cluster's front
    ends TLS with the wildcard certificate and sends plain http to the node
    with the client's Host, so E2B's data plane by host name works through
    it (a map of one node, written here as nanobox-front would)."""
    cert, key, ca = certs
    st = make_stack("e2btlsfront")
    sid = st.api.create()
    conf_dir, prefix = tmp_path / "conf", tmp_path / "prefix"
    prefix.mkdir()
    os.chmod(prefix, 0o1777)
    port, tls_port = nbtest.free_port(), nbtest.free_port()
    r = subprocess.run(["bash", str(nbtest.REPO / "src/setup/render-front.sh"), "--tls-cert", str(cert),
                        "--tls-key", str(key), "--tls-listen", f"127.0.0.1:{tls_port}", str(conf_dir),
                        f"127.0.0.1:{port}", str(prefix)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    node = f"127.0.0.1:{st.port}"
    (conf_dir / "nodes.conf").write_text(
        f"upstream nb_nodes {{\n    server {node};\n}}\nupstream nb_all {{\n    server {node};\n}}\n"
        "map $nb_tag $nb_node {\n    default nb_nodes;\n    legacy nb_legacy;\n"
        '    "~^[0-9a-f]{12}$" nb_gone;\n}\n')
    log = open(tmp_path / "front.log", "ab")
    proc = subprocess.Popen([nbtest.NGINX, "-c", str(conf_dir / "nanobox-front.conf"), "-p", str(prefix) + "/",
                             "-g", "daemon off;"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        nbtest.wait_until(lambda: not nbtest.tcp_port_free(tls_port), timeout=10, what="the front's https port")
        tok = "X-Access-Token: " + access_token(st, sid)
        for scheme, p, ca_ in (("https", tls_port, ca), ("http", port, None)):
            rc, status, body, err = curl(f"{scheme}://49983-{sid}.{DOMAIN}:{p}/files?path=/etc/hostname", p, ca_,
                                         headers=[tok])
            assert rc == 0 and status == "200" and body.strip() == sid[:8], (scheme, status, body[:300], err)
            rc, status, body, err = curl(f"{scheme}://8000-{sid}.{DOMAIN}:{p}/", p, ca_)
            assert rc == 0 and status == "502" and "port 8000" in body, (scheme, status, body[:300], err)
            rc, status, body, err = curl(f"{scheme}://api.{DOMAIN}:{p}/sandboxes/{sid}", p, ca_,
                                         headers=[f"X-API-Key: e2b_{st.api_key}"])
            assert rc == 0 and status == "200" and json.loads(body)["sandboxID"] == sid, (scheme, body[:300])
        rc, status, body, err = curl(f"https://x.{DOMAIN}.other.test:{tls_port}/", tls_port, ca)
        assert rc == 60, (rc, err)
    finally:
        os.kill(proc.pid, signal.SIGQUIT)
        proc.wait(timeout=20)
        log.close()


def test_render_checks_the_tls_settings_before_nginx(certs, tmp_path):
    """render-nginx.sh (and render-front.sh) stop with an error naming the
    setting: one of the pair alone, a relative path, a missing file, a file
    of the wrong kind, --tls-listen without a certificate; a certificate
    that does not name *.<ports domain> is only a warning."""
    cert, key, _ = certs
    render = str(nbtest.RENDER_NGINX)
    env = {k: v for k, v in os.environ.items() if not k.startswith("NANOBOX_")}
    env["NANOBOX_NGINX_TEST"] = "0"

    def run(*opts, script=render, pos=None):
        pos = pos or [str(tmp_path / "out"), "/run/x.sock", "127.0.0.1:1", str(tmp_path / "prefix")]
        return subprocess.run(["bash", script, *opts, *pos], capture_output=True, text=True, env=env)

    for opts, says in ((["--tls-cert", str(cert)], "--tls-cert and --tls-key go together"),
                       (["--tls-key", str(key)], "--tls-cert and --tls-key go together"),
                       (["--tls-listen", "443"], "--tls-listen needs --tls-cert and --tls-key"),
                       (["--tls-cert", "cert.pem", "--tls-key", str(key)], "must be an absolute path"),
                       (["--tls-cert", str(tmp_path / "none.pem"), "--tls-key", str(key)], "no such file"),
                       (["--tls-cert", str(key), "--tls-key", str(key)], "no PEM 'CERTIFICATE' block"),
                       (["--tls-cert", str(cert), "--tls-key", str(cert)], "no PEM 'PRIVATE KEY' block"),
                       (["--tls-cert", str(cert), "--tls-key", str(key), "--tls-listen", "127.0.0.1:1"],
                        "is LISTEN itself")):
        r = run(*opts)
        assert r.returncode == 2 and says in r.stderr, (opts, r.returncode, r.stderr)
    r = run("--ports-domain", "sbx.example.com", "--tls-cert", str(cert), "--tls-key", str(key))
    assert r.returncode == 0 and "does not name *.sbx.example.com" in r.stderr, r.stderr
    r = run("--tls-cert", str(cert), "--tls-key", str(key))
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr

    front = str(nbtest.REPO / "src/setup/render-front.sh")
    pos = [str(tmp_path / "front"), "127.0.0.1:1", str(tmp_path / "fprefix")]
    for opts, says in ((["--tls-cert", str(cert)], "--tls-cert and --tls-key go together"),
                       (["--tls-listen", "443"], "--tls-listen needs --tls-cert and --tls-key"),
                       (["--tls-cert", "cert.pem", "--tls-key", str(key)], "absolute paths"),
                       (["--tls-cert", str(tmp_path / "none.pem"), "--tls-key", str(key)], "no such file")):
        r = run(*opts, script=front, pos=pos)
        assert r.returncode == 2 and says in r.stderr, (opts, r.returncode, r.stderr)
    # no TLS asked: none rendered
    r = run(script=front, pos=pos)
    text = (tmp_path / "front/nanobox-front.conf").read_text()
    assert r.returncode == 0 and "ssl_certificate " not in text and " ssl" not in text, r.stderr
