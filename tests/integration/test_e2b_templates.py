"""
E2B's template API (docs/E2B.md, "Templates") against the live stack:
the v3 build flow of E2B's Template SDK over nanobox's template builder.

- the official SDK (tests/e2b/templates.mjs, both pins): a build with
  runCmd, copy, setEnvs and setWorkdir under an alias, its logs,
  Template.exists, Sandbox.create(alias) seeing what the build made,
  fromTemplate of it, a refused base image, a failing step, delete;
- raw HTTP on E2B's paths, as a hostile tenant would send them: another
  key's template and alias are not found, its upload link refused, tar
  entries that leave the context refused with nothing stored or built, an
  upload over template_context_max 413, a base image outside the
  operator's refused, a RUN step that cannot reach the host;
- nanobox's own /templates routes unchanged for native keys.
"""

import gzip
import io
import json
import secrets
import socket
import tarfile
import threading
import time

import pytest
import requests

import nbtest
from nbtest import wait_until
from test_e2b import e2b_error, e2b_latest, e2b_sdk, sdk, sdk_script  # noqa: F401
from test_keys import add_key, tenants, KeyApi  # noqa: F401

BASE = nbtest.IMAGE


def hdr(key):
    return {"X-API-KEY": f"e2b_{key}"}


def tar_of(entries, gz=True):
    """A tar of (name, bytes) files, or (name, None, linkname) symlinks."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for e in entries:
            info = tarfile.TarInfo(e[0])
            if e[1] is None:
                info.type, info.linkname = tarfile.SYMTYPE, e[2]
                t.addfile(info)
            else:
                info.size = len(e[1])
                t.addfile(info, io.BytesIO(e[1]))
    data = buf.getvalue()
    return gzip.compress(data) if gz else data


class E2bTpl:
    """E2B's template calls as the SDK makes them, with one key."""

    def __init__(self, st, key):
        self.url, self.h = st.url, hdr(key)

    def req(self, method, path, **kw):
        return requests.request(method, self.url + path, headers=self.h, timeout=60, **kw)

    def create(self, name):
        r = self.req("POST", "/v3/templates", json={"name": name, "cpuCount": 2, "memoryMB": 1024})
        assert r.status_code == 202, r.text
        return r.json()

    def link(self, tid, h):
        return self.req("GET", f"/templates/{tid}/files/{h}")

    def upload(self, tid, data, h=None):
        h = h or secrets.token_hex(32)
        r = self.link(tid, h)
        assert r.status_code == 201, r.text
        return h, requests.put(r.json()["url"], data=data, timeout=60)

    def build(self, tid, bid, body):
        return self.req("POST", f"/v2/templates/{tid}/builds/{bid}", json=body)

    def status(self, tid, bid, offset=0):
        return self.req("GET", f"/templates/{tid}/builds/{bid}/status", params={"logsOffset": offset})

    def wait(self, tid, bid, timeout=240):
        def done():
            s = self.status(tid, bid)
            assert s.status_code == 200, s.text
            return s.json() if s.json()["status"] in ("ready", "error") else None
        return wait_until(done, timeout=timeout, interval=0.5, what=f"E2B build of {tid}")

    def alias(self, a):
        return self.req("GET", f"/templates/aliases/{a}")

    def delete(self, tid):
        return self.req("DELETE", f"/templates/{tid}")


def name():
    return "e2bt-" + secrets.token_hex(4)


# ------------------------------------------------------------------ the SDK

def test_sdk_template_build_alias_sandbox_delete(stack, sdk):
    s = sdk_script(stack, sdk, "templates.mjs", "t")
    st = s["steps"]
    try:
        assert st["existsBefore"] == {"exists": False}, st
        assert st["existsBase"] == {"exists": True}, st
        b = st["build"]
        assert "thrown" not in b and b["templateId"].startswith("tpl-") and b["sawStep"], b
        assert st["existsAfter"] == {"exists": True}, st
        sb = st["sandbox"]
        tag = b["templateId"][4:]
        assert sb["marker"] == f"built-{tag}\n" and sb["hello"] == f"hello {tag}\n", sb
        assert sb["app"] == "A\nB\n" and sb["pwd"] == "/opt\n" and sb["env"] == f"v-{tag}", sb
        assert sb["envQ"] == 'a "quoted" $value', sb
        assert st["fromTemplate"] == {"out": f"built-{tag}\n"}, st
        assert "not allowed" in st["forbiddenImage"]["message"], st
        assert "non-zero code: 3" in st["failingStep"]["message"], st
        assert st["deleteFail"] == {"deleted": 204} and st["delete"] == {"child": 204, "parent": 204}
        assert st["existsDeleted"] == {"exists": False}, st
    finally:
        for sid in s["created"]:
            stack.api.delete(sid)


# ----------------------------------------------------- the flow, raw, per key

def test_raw_flow_is_the_keys_own(tenants):
    st, k = tenants
    alice, bob = E2bTpl(st, k["alice"].key), E2bTpl(st, k["bob"].key)
    nm = name()
    t = alice.create(nm)
    tid, bid = t["templateID"], t["buildID"]
    assert tid == nm and t["aliases"] == [nm]
    # before the build: waiting, no logs
    s = alice.status(tid, bid).json()
    assert s["status"] == "waiting" and s["logEntries"] == [], s
    h, r = alice.upload(tid, tar_of([("hello.txt", b"hi from alice\n")]))
    assert r.status_code == 200, r.text
    assert alice.link(tid, h).json()["present"] is True
    # bob: the template, its build, its alias, its upload link are not his
    e2b_error(bob.link(tid, h), 404)
    e2b_error(bob.status(tid, bid), 404)
    e2b_error(bob.build(tid, bid, {"fromTemplate": "base", "steps": []}), 404)
    assert bob.alias(nm).status_code == 404
    # alice's link, its owner changed to bob's: the signature no longer holds
    url = alice.link(tid, h).json()["url"]
    e2b_error(requests.put(url.replace("owner=alice", "owner=bob"), data=b"x", timeout=30), 403)
    e2b_error(requests.put(url.replace("signature=", "signature=0"), data=b"x", timeout=30), 403)
    e2b_error(requests.put(url.split("?")[0], data=b"x", timeout=30), 403)
    # bob's own upload of the same hash is his own (alice's "present" says nothing to him)
    bt = bob.create(nm)
    assert bob.link(bt["templateID"], h).json()["present"] is False

    r = alice.build(tid, bid, {"fromTemplate": "base", "steps": [
        {"type": "RUN", "args": ["echo step-ran > /etc/e2b-marker"], "force": False},
        {"type": "COPY", "args": ["hello.txt", "/opt/hello.txt", "", ""], "filesHash": h,
         "force": False},
        {"type": "ENV", "args": ["A_VAR", "x y"], "force": False},
    ], "force": False})
    assert r.status_code == 202, r.text
    done = alice.wait(tid, bid)
    assert done["status"] == "ready", done
    assert any("e2b-marker" in e["message"] for e in done["logEntries"]), done
    # logsOffset: the entries from there on
    assert len(alice.status(tid, bid, offset=2).json()["logEntries"]) == len(done["logEntries"]) - 2
    assert alice.alias(nm).json() == {"templateID": nm, "public": False}
    # the create: alice's alias is hers; bob's same name is his (not built): not found
    r = requests.post(f"{st.url}/sandboxes", headers=alice.h, json={"templateID": nm}, timeout=120)
    assert r.status_code == 201, r.text
    sid = r.json()["sandboxID"]
    out = k["alice"].exec(sid, "cat /etc/e2b-marker /opt/hello.txt; printf %s \"$A_VAR\"")
    assert out["stdout"] == "step-ran\nhi from alice\nx y", out
    k["alice"].delete(sid)
    e2b_error(requests.post(f"{st.url}/sandboxes", headers=bob.h, json={"templateID": nm},
                            timeout=60), 404)
    # bob deletes his own, not alice's
    assert bob.delete(nm).status_code == 204
    e2b_error(bob.delete(nm), 404)
    assert alice.alias(nm).status_code == 200
    # the native API still sees alice's template as hers (GET /templates/{name} with Bearer)
    assert k["alice"].request("GET", f"/templates/{nm}").json()["status"] == "ready"
    assert alice.delete(nm).status_code == 204
    e2b_error(alice.alias(nm), 404)
    e2b_error(alice.status(tid, bid), 404)


def test_e2b_paths_answer_e2b_shaped(stack):
    a = E2bTpl(stack, stack.api_key)
    assert a.alias("base").json() == {"templateID": "base", "public": True}
    assert a.alias("code-interpreter-v1").json()["public"] is True
    e2b_error(a.alias("no-such-" + secrets.token_hex(3)), 404)
    e2b_error(a.delete("base"), 403)
    for taken in ("base", "code-interpreter-v1", "nanobox"):
        e2b_error(a.req("POST", "/v3/templates", json={"name": taken}), 409)
    e2b_error(a.status("nope", "x"), 404)
    e2b_error(a.req("GET", "/v2/templates/x/y"), 501)
    lst = a.req("GET", "/templates").json()
    assert isinstance(lst, list) and any(t["templateID"] == "base" for t in lst), lst
    # a native key on the native routes: nanobox's shapes, unchanged
    r = stack.api.request("GET", "/templates")
    assert r.status_code == 200 and "templates" in r.json()
    r = stack.api.request("GET", "/templates/nanobox")
    assert r.json()["kind"] == "image"


# ------------------------------------------------------------ hostile uploads

@pytest.mark.parametrize("entries", [
    [("../escape.txt", b"x")],
    [("/etc/abs.txt", b"x")],
    [("a/../../up.txt", b"x")],
    [("ok.txt", b"x"), ("link", None, "/etc/passwd")],
    [("link", None, "../../outside")],
], ids=["dotdot", "absolute", "nested-dotdot", "symlink-abs", "symlink-up"])
def test_upload_leaving_the_context_is_refused(stack, entries):
    a = E2bTpl(stack, stack.api_key)
    nm = name()
    t = a.create(nm)
    h, r = a.upload(nm, tar_of(entries))
    e2b_error(r, 400)
    assert a.link(nm, h).json()["present"] is False
    # a build naming it: refused, nothing built
    r = a.build(nm, t["buildID"], {"fromTemplate": "base", "steps": [
        {"type": "COPY", "args": [".", "/opt/x", "", ""], "filesHash": h}]})
    assert "not uploaded" in e2b_error(r, 400)
    assert a.status(nm, t["buildID"]).json()["status"] == "waiting"
    assert stack.api.request("GET", f"/templates/{nm}").status_code == 404
    assert a.delete(nm).status_code == 204


def test_not_a_tar_is_refused(stack):
    a = E2bTpl(stack, stack.api_key)
    nm = name()
    a.create(nm)
    _, r = a.upload(nm, b"this is no tar" * 100)
    e2b_error(r, 400)
    a.delete(nm)


def test_upload_of_too_many_entries_is_refused(stack):
    """Directories count too: a gzip'd stream of headers is no build context."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for i in range(4100):
            info = tarfile.TarInfo(f"d{i}")
            info.type = tarfile.DIRTYPE
            t.addfile(info)
    a = E2bTpl(stack, stack.api_key)
    nm = name()
    a.create(nm)
    h, r = a.upload(nm, gzip.compress(buf.getvalue()))
    assert "4096 entries" in e2b_error(r, 400)
    assert a.link(nm, h).json()["present"] is False
    a.delete(nm)


def test_upload_over_the_cap_is_413(make_stack):
    st = make_stack("e2btpl-cap", template_context_max="8k")
    a = E2bTpl(st, st.api_key)
    nm = name()
    a.create(nm)
    h, r = a.upload(nm, b"\0" * 16384)
    e2b_error(r, 413)
    # within the cap in bytes, over it once unpacked
    h, r = a.upload(nm, tar_of([("big.bin", b"\0" * 65536)]))
    e2b_error(r, 413)
    assert a.link(nm, h).json()["present"] is False
    # the key's kept uploads hold at most 4 x template_context_max: the oldest go first
    kept = []
    for _ in range(5):
        h, r = a.upload(nm, tar_of([("f.bin", secrets.token_bytes(7500))]))
        assert r.status_code == 200, r.text
        kept.append(h)
        time.sleep(1.1)  # mtimes a second apart: the order is the uploads'
    present = [a.link(nm, x).json()["present"] for x in kept]
    assert present == [False, True, True, True, True], present


# --------------------------------------------------------------- the steps

@pytest.mark.parametrize("body,status,words", [
    ({"fromImage": "ubuntu:22.04", "steps": []}, 403, "not allowed"),
    ({"fromImage": "nanobox-evil:latest", "steps": []}, 403, "not allowed"),
    ({"fromImage": "nanobox:latest", "fromImageRegistry": {"type": "registry", "username": "u",
      "password": "p"}, "steps": []}, 403, "registry"),
    ({"fromTemplate": "someone-elses", "steps": []}, 400, "no such template"),
    ({"fromTemplate": "base", "startCmd": "sleep 1", "steps": []}, 400, "startCmd"),
    ({"fromTemplate": "base", "steps": [{"type": "EXPOSE", "args": ["80"]}]}, 400, "not supported"),
    ({"fromTemplate": "base", "steps": [{"type": "ENV", "args": ["1BAD", "x"]}]}, 400, "ENV"),
    ({"fromTemplate": "base", "steps": [{"type": "WORKDIR", "args": ["/a\nRUN x"]}]}, 400, "WORKDIR"),
    ({"fromTemplate": "base", "steps": [{"type": "USER", "args": ["root\nRUN x"]}]}, 400, "user"),
    ({"fromTemplate": "base", "steps": [{"type": "COPY", "args": ["a", "/b", "", ""]}]}, 400,
     "filesHash"),
], ids=["registry-image", "prefixed", "credentials", "other-template", "startcmd", "expose",
        "env-name", "workdir-newline", "user-newline", "copy-no-hash"])
def test_refused_builds_build_nothing(stack, body, status, words):
    a = E2bTpl(stack, stack.api_key)
    nm = name()
    t = a.create(nm)
    msg = e2b_error(a.build(nm, t["buildID"], body), status)
    assert words in msg, msg
    assert stack.api.request("GET", f"/templates/{nm}").status_code == 404
    a.delete(nm)


def test_run_step_cannot_reach_the_host(stack):
    """A build's RUN (the builds' own network, template_network bridge) reaches
    neither the host's services on its addresses nor Docker's bridge."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", 0))
    srv.listen(8)
    port = srv.getsockname()[1]
    hits = []

    def accept():
        srv.settimeout(1)
        end = time.time() + 200
        while time.time() < end:
            try:
                c, addr = srv.accept()
                hits.append(addr)
                c.close()
            except OSError:
                if srv.fileno() < 0:
                    return
    th = threading.Thread(target=accept, daemon=True)
    th.start()
    a = E2bTpl(stack, stack.api_key)
    nm = name()
    t = a.create(nm)
    probe = " ; ".join(
        f"(timeout 3 bash -c 'echo > /dev/tcp/{ip}/{port}' 2>/dev/null && echo REACHED-{ip} "
        f"|| echo BLOCKED-{ip})"
        for ip in ("127.0.0.1", "172.17.0.1", "10.214.0.1"))
    r = a.build(nm, t["buildID"], {"fromTemplate": "base",
                                    "steps": [{"type": "RUN", "args": [probe]}]})
    assert r.status_code == 202, r.text
    done = a.wait(nm, t["buildID"])
    srv.close()
    said = [e["message"].strip() for e in done["logEntries"]]
    assert done["status"] == "ready", done
    assert [x for x in said if x.startswith(("REACHED-", "BLOCKED-"))] == \
        ["BLOCKED-127.0.0.1", "BLOCKED-172.17.0.1", "BLOCKED-10.214.0.1"], said
    assert hits == [], hits
    a.delete(nm)


def test_upload_link_needs_the_template(stack):
    a = E2bTpl(stack, stack.api_key)
    e2b_error(a.link("never-made-" + secrets.token_hex(3), "0" * 64), 404)
    nm = name()
    a.create(nm)
    e2b_error(a.link(nm, "not-a-hash"), 400)
    a.delete(nm)
    e2b_error(a.link(nm, "0" * 64), 404)


def test_json_of_status(stack):
    a = E2bTpl(stack, stack.api_key)
    nm = name()
    t = a.create(nm)
    r = a.build(nm, t["buildID"], {"fromImage": BASE, "steps": [
        {"type": "RUN", "args": ["echo will-fail; exit 4"]}]})
    assert r.status_code == 202, r.text
    done = a.wait(nm, t["buildID"])
    assert done["status"] == "error" and "non-zero code: 4" in done["reason"]["message"], done
    assert set(done) >= {"templateID", "buildID", "status", "logs", "logEntries", "reason"}
    assert any("will-fail" in x for x in done["logs"]), done
    json.dumps(done)
    a.delete(nm)


# -------------------------------------------------------------- E2B's CLI

E2B_CLI_DIR = nbtest.REPO / "tests" / "e2b-cli"


def test_cli_template_create_list_delete(stack, tmp_path):
    """`e2b template create` (npm @e2b/cli, pinned in tests/e2b-cli): a
    Dockerfile read by the CLI into the SDK's steps, built here; a sandbox
    of it; `template list` and `template delete`. The CLI needs nothing but
    E2B_API_URL and E2B_API_KEY (its `auth login` is e2b.dev's)."""
    node = nbtest.node_package(E2B_CLI_DIR, "@e2b/cli")
    cli = E2B_CLI_DIR / "node_modules" / "@e2b" / "cli" / "dist" / "index.js"
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "greeting.txt").write_text("hello from the CLI\n")
    (ctx / "Dockerfile").write_text(f"FROM {BASE}\nRUN echo cli-built > /etc/cli-marker\n"
                                    "COPY greeting.txt /opt/greeting.txt\n")
    nm = name()
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith(("E2B_", "NANOBOX_"))}
    env.update(E2B_API_URL=stack.url, E2B_SANDBOX_URL=stack.url, E2B_API_KEY=f"e2b_{stack.api_key}",
               HOME=str(tmp_path), NO_COLOR="1", CI="1")

    def run(*args):
        r = __import__("subprocess").run([node, str(cli), *args], cwd=ctx, env=env, capture_output=True,
                                         text=True, timeout=300)
        return r.returncode, r.stdout + r.stderr

    rc, out = run("template", "create", nm, "-p", str(ctx), "-d", "Dockerfile")
    assert rc == 0, out
    a = E2bTpl(stack, stack.api_key)
    assert a.alias(nm).json() == {"templateID": nm, "public": False}
    r = requests.post(f"{stack.url}/sandboxes", headers=a.h, json={"templateID": nm}, timeout=120)
    assert r.status_code == 201, r.text
    sid = r.json()["sandboxID"]
    try:
        out_ = stack.api.exec(sid, "cat /etc/cli-marker /opt/greeting.txt")
        assert out_["stdout"] == "cli-built\nhello from the CLI\n", out_
    finally:
        stack.api.delete(sid)
    rc, out = run("template", "list", "-f", "json")
    assert rc == 0 and nm in out, out
    rc, out = run("template", "delete", nm, "-y")
    assert rc == 0, out
    assert a.alias(nm).status_code == 404
    # a Dockerfile FROM an image the operator does not have: refused, in words
    (ctx / "Dockerfile").write_text("FROM ubuntu:22.04\nRUN true\n")
    rc, out = run("template", "create", name(), "-p", str(ctx), "-d", "Dockerfile")
    assert rc != 0 and "not allowed" in out, out


def test_rebuild_of_an_alias_replaces_it(stack):
    """Template.build of an alias the key has: the new build replaces the old."""
    a = E2bTpl(stack, stack.api_key)
    nm = name()
    for word in ("first", "second"):
        t = a.create(nm)
        r = a.build(nm, t["buildID"], {"fromImage": BASE, "steps": [
            {"type": "RUN", "args": [f"echo {word} > /etc/which"]}]})
        assert r.status_code == 202, r.text
        assert a.wait(nm, t["buildID"])["status"] == "ready"
    r = requests.post(f"{stack.url}/sandboxes", headers=a.h, json={"templateID": nm}, timeout=120)
    assert r.status_code == 201, r.text
    sid = r.json()["sandboxID"]
    try:
        assert stack.api.exec(sid, "cat /etc/which")["stdout"] == "second\n"
    finally:
        stack.api.delete(sid)
    assert a.delete(nm).status_code == 204
