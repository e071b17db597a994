"""
test_keys.py - many API keys (docs/SECURITY.md, "Keys and owners"): keys
made with `nanobox keys add` on a stack of their own, a user key that sees
and touches only its own sandboxes (every route with a sandbox id, walked
from the router's own table, `nanobox-fcgi -R`), list filtering, an admin
that sees all, each quota hit once, and the keys file re-read on the next
request (removal, and a reload under load that fails no request).
"""

import json
import os
import re
import signal
import subprocess
import threading
import time

import pytest
import requests

import nbtest

CLI_BIN = nbtest.BUILD / "nanobox"


class KeyApi(nbtest.Api):
    """An Api that sends its own key instead of the stack's api_key."""

    def __init__(self, stack, key):
        super().__init__(stack)
        self.key = key

    def headers(self, auth=True, headers=None):
        h = {"Authorization": f"Bearer {self.key}"} if auth else {}
        h.update(headers or {})
        return h


def keys_cli(st, *args, check=True, env=None):
    """`nanobox keys ...` against the stack's config (and, for rm --destroy, its API)."""
    e = dict(os.environ, NANOBOX_URL=st.url, NANOBOX_API_KEY=st.api_key, **(env or {}))
    r = subprocess.run([str(CLI_BIN), "keys", *args, "--config", st.conf_path],
                       capture_output=True, text=True, timeout=60, env=e)
    if check:
        assert r.returncode == 0, (args, r.returncode, r.stdout, r.stderr)
    return r


def add_key(st, name, *opts):
    key = keys_cli(st, "add", name, *opts).stdout.strip()
    assert re.fullmatch(r"[0-9a-f]{64}", key), key
    return key


@pytest.fixture
def tenants(make_stack):
    """A stack with two user keys (alice, bob) and an admin key (ops), made by the CLI."""
    st = make_stack("keys")
    keys = {n: add_key(st, n, *o) for n, o in
            (("alice", ()), ("bob", ()), ("ops", ("--role", "admin")))}
    apis = {n: KeyApi(st, k) for n, k in keys.items()}
    yield st, apis
    for a in apis.values():
        a.cleanup()


def fill(path, sid):
    """A route of `nanobox-fcgi -R` with its placeholders filled in."""
    path = path.replace("{id}", sid).replace("{pid}", "1").replace("{ctx}", "c1")
    path = path.replace("{sandboxport}", "8080").replace("{op}", "x").replace("{name}", "t")
    return re.sub(r"/\*$", "/x", path)


def routes_with_id():
    out = subprocess.run([str(nbtest.FCGI_BIN), "-R"], capture_output=True, text=True,
                         check=True).stdout
    rows = []
    for line in out.splitlines():
        method, path, flags = line.split("\t")
        if "id" in flags.split(",") and method != "-":
            rows.append(("POST" if method == "*" else method, path))
    return rows


def test_router_rows_with_an_id_are_many():
    rows = routes_with_id()
    # the walk below covers the native routes and the E2B control plane alike
    assert ("DELETE", "/sandbox/{id}") in rows and ("GET", "/sandboxes/{id}") in rows, rows
    assert len(rows) > 30, rows


def test_another_users_sandbox_is_an_unknown_id_on_every_route(tenants):
    st, k = tenants
    sid = k["alice"].create(metadata={"who": "alice"})
    k["alice"].exec(sid, "echo mine > /workspace/marker")
    unknown = nbtest.random_uuid()
    for method, path in routes_with_id():
        body = {} if method in ("POST", "PUT") else None
        theirs = k["bob"].request(method, fill(path, sid), json=body)
        none = k["bob"].request(method, fill(path, unknown), json=body)
        desc = f"{method} {path}: {theirs.status_code} {theirs.text[:200]}"
        assert theirs.status_code == 404, desc
        assert none.status_code == 404, f"{method} {path} (unknown id): {none.status_code}"
        assert theirs.text.replace(sid, "ID") == none.text.replace(unknown, "ID"), desc
    # nothing happened to it: there, running, its file and its TTL as they were
    info = nbtest.parse_json(k["alice"].get(sid))
    assert info["state"] == "running" and info["owner"] == "alice", info
    assert k["alice"].exec(sid, "cat /workspace/marker")["stdout"] == "mine\n"
    assert k["alice"].ports(sid) == []
    assert nbtest.docker_ps(st.instance, all=False, sandbox=sid) == [f"nanobox-{sid}"]


def test_lists_show_a_user_its_own_and_an_admin_all(tenants):
    st, k = tenants
    a = k["alice"].create()
    b = k["bob"].create()
    d = st.api.create()  # the config's api_key: the admin "default"
    try:
        assert k["alice"].list_ids() == [a]
        assert k["bob"].list_ids() == [b]
        # a user's ?owner= is no way into another's
        assert k["bob"].list_ids("?owner=alice") == [b]
        assert k["ops"].list_ids() == sorted([a, b, d])
        assert k["ops"].list_ids("?owner=alice") == [a]
        assert st.api.list_ids("?owner=default") == [d]
        assert {s["sandboxId"]: s["owner"] for s in st.api.list()} == {a: "alice", b: "bob", d: "default"}
        # the E2B facade's list, with the key as its SDK sends it
        r = requests.get(st.url + "/v2/sandboxes", headers={"X-API-KEY": "e2b_" + k["bob"].key}, timeout=30)
        assert r.status_code == 200 and [s["sandboxID"] for s in r.json()] == [b], r.text[:300]
        r = requests.get(st.url + "/v2/sandboxes?owner=alice", headers={"X-API-KEY": k["ops"].key}, timeout=30)
        assert r.status_code == 200 and [s["sandboxID"] for s in r.json()] == [a], r.text[:300]
        # the admin touches anyone's
        assert k["ops"].exec(a, "echo hi")["stdout"] == "hi\n"
        # Docker knows the owner too
        labels = nbtest.docker_inspect(f"nanobox-{a}")["Config"]["Labels"]
        assert labels.get("nanobox.owner") == "alice", labels
    finally:
        st.api.cleanup()


def test_mcp_sandbox_list_is_the_keys_own(tenants):
    st, k = tenants
    a = k["alice"].create()
    k["bob"].create()

    def mcp(api, body, sid=None):
        h = {"Accept": "application/json, text/event-stream"}
        if sid:
            h["Mcp-Session-Id"] = sid
        return api.request("POST", "/mcp", json=body, headers=h)

    r = mcp(k["alice"], {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "t", "version": "1"}}})
    assert r.status_code == 200, r.text[:300]
    session = r.headers.get("Mcp-Session-Id")
    r = mcp(k["alice"], {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                         "params": {"name": "sandbox_list", "arguments": {}}}, session)
    assert r.status_code == 200, r.text[:300]
    text = json.dumps(r.json())
    assert a in text and text.count("sandboxId") == 1, text[:600]
    # the session is alice's: for bob it does not exist, and he cannot end it
    call = {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}
    assert mcp(k["bob"], call, session).status_code == 404
    assert k["bob"].request("DELETE", "/mcp", headers={"Mcp-Session-Id": session}).status_code == 404
    assert mcp(k["alice"], call, session).status_code == 200


def test_e2b_keys_and_access_tokens_work_for_file_keys(tenants):
    st, k = tenants
    for key in ("e2b_" + k["alice"].key, k["alice"].key):
        r = requests.post(st.url + "/sandboxes", json={"templateID": "base", "timeout": 120},
                          headers={"X-API-KEY": key}, timeout=120)
        assert r.status_code == 201, r.text[:300]
        sbx = r.json()
        k["alice"].created.append(sbx["sandboxID"])
        h = {"E2b-Sandbox-Id": sbx["sandboxID"], "E2b-Sandbox-Port": "49983",
             "Content-Type": "application/json", "X-Access-Token": sbx["envdAccessToken"]}
        r = requests.post(st.url + "/process.Process/List", headers=h, data="{}", timeout=30)
        assert r.status_code == 200, r.text[:300]
        # bob cannot see it through the facade either
        r = requests.get(st.url + f"/sandboxes/{sbx['sandboxID']}",
                         headers={"X-API-KEY": "e2b_" + k["bob"].key}, timeout=30)
        assert r.status_code == 404, r.text[:300]
    # once alice's key is gone, her sandbox's token opens nothing
    keys_cli(st, "rm", "alice")
    r = requests.post(st.url + "/process.Process/List", headers=h, data="{}", timeout=30)
    assert r.status_code == 401, r.text[:300]


def owned(st, name):
    out = nbtest.run(["docker", "ps", "-a", "--format", "{{.Names}}",
                      "--filter", f"label=nanobox.instance={st.instance}",
                      "--filter", f"label=nanobox.owner={name}"]).stdout
    return sorted(out.split())


@pytest.mark.parametrize("opt,field,value,quota", [
    ("--max-sandboxes", None, "1", "max_sandboxes=1"),
    ("--max-memory", "memory", "300m", "max_memory="),
    ("--max-cpus", "cpus", "0.75", "max_cpus=0.750"),
])
def test_each_sandbox_quota_answers_429_and_creates_nothing(make_stack, opt, field, value, quota):
    st = make_stack("quota")
    q = KeyApi(st, add_key(st, "q", opt, value))
    try:
        first = q.create()  # 256m, 0.5 CPU: within each quota
        r = q.request("POST", "/sandbox", json={})
        body = nbtest.assert_error(r, 429, "quota")
        assert quota in body["error"] and '"q"' in body["error"], body
        assert owned(st, "q") == [f"nanobox-{first}"]
        assert q.list_ids() == [first]
        # a smaller one that fits is still let in (memory, CPUs)
        if field == "memory":
            q.create(memory="32m")
        if field == "cpus":
            q.create(cpus=0.25)
        # the quota counts live sandboxes: one destroyed frees its share
        for sid in list(q.created):
            assert q.delete(sid).status_code == 204
        q.created = []
        q.create()
    finally:
        q.cleanup()


def test_port_quota_counts_over_the_keys_sandboxes(make_stack):
    st = make_stack("portquota")
    if not nbtest.ports_keys_known():
        pytest.skip("this build has no ephemeral ports")
    q = KeyApi(st, add_key(st, "p", "--max-ports", "1"))
    try:
        a, b = q.create(), q.create()
        q.open_port(a, 8000)
        body = nbtest.assert_error(q.open_port_raw(b, 8001, 60), 429, "quota")
        assert "max_ports=1" in body["error"], body
        assert q.ports(b) == []
    finally:
        q.cleanup()


def test_a_removed_key_stops_on_the_next_request_and_its_sandboxes_live(tenants):
    st, k = tenants
    sid = k["bob"].create()
    assert k["bob"].request("GET", "/sandbox").status_code == 200
    keys_cli(st, "rm", "bob")
    nbtest.assert_error(k["bob"].request("GET", "/sandbox"), 401, "unauthorized")
    nbtest.assert_error(k["bob"].request("GET", f"/sandbox/{sid}"), 401, "unauthorized")
    # an exec's small body gets no early check from nginx: the request's own refuses it
    r = k["bob"].request("POST", f"/sandbox/{sid}/exec", json={"command": "touch /workspace/after-rm"})
    nbtest.assert_error(r, 401, "unauthorized")
    assert k["ops"].exec(sid, "test -e /workspace/after-rm")["exit_code"] == 1
    # its sandbox lives on (to its TTL), for an admin to see
    assert nbtest.parse_json(k["ops"].get(sid))["owner"] == "bob"
    assert "action=keys-reload" in open(st.log_path).read()
    k["ops"].created.append(sid)


def test_keys_rm_destroy_takes_the_sandboxes_with_it(tenants):
    st, k = tenants
    a1, a2 = k["alice"].create(), k["alice"].create()
    b = k["bob"].create()
    r = keys_cli(st, "rm", "alice", "--destroy")
    assert sorted(r.stdout.split()) == sorted([a1, a2]), r.stdout
    assert owned(st, "alice") == [] or all(
        not nbtest.docker_exists(n) for n in owned(st, "alice"))
    assert k["ops"].list_ids() == [b]
    k["alice"].created = []


def test_reload_under_load_fails_no_request_of_a_surviving_key(tenants):
    st, k = tenants
    sid = k["alice"].create()
    failures, done, count = [], threading.Event(), [0]

    def hammer():
        s = requests.Session()
        while not done.is_set():
            r = s.get(f"{st.url}/sandbox/{sid}", headers={"Authorization": f"Bearer {k['alice'].key}"},
                      timeout=30)
            count[0] += 1
            if r.status_code != 200:
                failures.append((r.status_code, r.text[:200]))

    threads = [threading.Thread(target=hammer) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        for i in range(15):
            add_key(st, f"tmp{i}")
            if i % 2:
                keys_cli(st, "rm", f"tmp{i - 1}")
            if i % 5 == 0:
                os.kill(st.master_pid, signal.SIGHUP)  # not needed, and harmless
    finally:
        done.set()
        for t in threads:
            t.join()
    assert failures == [], failures[:5]
    assert count[0] > 30, count


def test_cli_keys_add_ls_rm(make_stack):
    st = make_stack("keyscli")
    key = add_key(st, "carol", "--max-sandboxes", "3", "--max-memory", "1g", "--max-cpus", "2",
                  "--max-ports", "4", "--max-templates", "2", "--rate", "5r/s")
    text = open(os.path.join(st.dir, "keys")).read()
    assert key not in text  # only its hash is kept
    assert oct(os.stat(os.path.join(st.dir, "keys")).st_mode & 0o777) == "0o600"
    ls = keys_cli(st, "ls").stdout
    assert re.search(r"^carol\s+user\s+max_sandboxes=3 max_memory=1g max_cpus=2 max_ports=4 "
                     r"max_templates=2 rate=5r/s$", ls, re.M), ls
    assert not re.search(r"[0-9a-f]{64}", ls)
    listed = json.loads(keys_cli(st, "ls", "--json").stdout)
    assert listed["keys"][0]["name"] == "carol" and "hash" not in listed["keys"][0]
    # the key works at once, as a user key
    c = KeyApi(st, key)
    assert c.list_ids() == []
    # bad input changes nothing
    for args in (("add", "carol"), ("add", "default"), ("add", "x/y"), ("add", "d", "--role", "root"),
                 ("add", "d", "--max-memory", "lots"), ("rm", "nobody")):
        r = keys_cli(st, *args, check=False)
        assert r.returncode != 0 and r.stderr.startswith("nanobox:") or "usage" in r.stderr, (args, r)
    assert open(os.path.join(st.dir, "keys")).read() == text
    keys_cli(st, "rm", "carol")
    assert "carol" not in keys_cli(st, "ls").stdout
    nbtest.assert_error(c.request("GET", "/sandbox"), 401, "unauthorized")


def test_a_keys_file_others_may_read_is_refused_at_start(make_stack, tmp_path):
    bad = tmp_path / "keys"
    bad.write_text("x user " + "0" * 64 + "\n")
    os.chmod(bad, 0o644)
    with pytest.raises(RuntimeError, match="chmod 600"):
        make_stack("badkeys", keys_file=str(bad))


def test_user_keys_do_not_read_the_service_metrics_which_count_per_key(tenants):
    st, k = tenants
    nbtest.assert_error(k["alice"].request("GET", "/metrics"), 403, "forbidden")
    k["alice"].create()
    k["alice"].create(memory="64m")
    text = k["ops"].request("GET", "/metrics").text
    assert 'nanobox_key_sandboxes{key="alice"} 2' in text, text[-2000:]
    assert f'nanobox_key_memory_bytes{{key="alice"}} {(256 + 64) << 20}' in text
    assert 'nanobox_key_cpus{key="alice"} 1.000' in text
    assert 'key="bob"' not in text  # a key with nothing live has no series


def test_a_warm_sandbox_is_handed_to_the_creating_key(make_stack):
    st = make_stack("keyswarm", warm_pool="1")
    nbtest.wait_until(lambda: len(nbtest.docker_ps(st.instance, all=False)) == 1, timeout=60,
                      what="the warm pool filled")
    warm = nbtest.docker_ps(st.instance, all=False)[0]
    alice = KeyApi(st, add_key(st, "alice", "--max-sandboxes", "1"))
    bob = KeyApi(st, add_key(st, "bob"))
    try:
        sid = alice.create()
        assert f"nanobox-{sid}" == warm  # the warm one it was
        assert nbtest.parse_json(alice.get(sid))["owner"] == "alice"
        assert bob.list_ids() == [] and bob.get(sid).status_code == 404
        # the quota counts it, and a second warm one is not handed out past it
        nbtest.assert_error(alice.request("POST", "/sandbox", json={}), 429, "quota")
    finally:
        alice.cleanup()


def test_templates_are_their_builders_and_counted_against_max_templates(make_stack):
    st = make_stack("keystpl")
    alice = KeyApi(st, add_key(st, "alice", "--max-templates", "1"))
    bob = KeyApi(st, add_key(st, "bob"))
    df = f"FROM {nbtest.IMAGE}\nRUN echo hi > /etc/tpl-marker\n"
    r = alice.request("POST", "/templates", json={"name": "mine", "dockerfile": df})
    assert r.status_code == 202 and nbtest.parse_json(r)["owner"] == "alice", r.text[:300]
    # the quota: a second build is refused and nothing is recorded
    body = nbtest.assert_error(alice.request("POST", "/templates", json={"name": "more", "dockerfile": df}),
                               429, "quota")
    assert "max_templates=1" in body["error"], body
    assert alice.request("GET", "/templates/more").status_code == 404

    def ready():
        t = nbtest.parse_json(alice.request("GET", "/templates/mine"))
        return t if t["status"] != "building" else None
    assert nbtest.wait_until(ready, timeout=180, interval=0.3, what="the build")["status"] == "ready"
    # bob: no such template, on every route, with the body of a name that does not exist
    for method, path in (("GET", "/templates/{}"), ("GET", "/templates/{}/logs"), ("DELETE", "/templates/{}")):
        theirs, none = bob.request(method, path.format("mine")), bob.request(method, path.format("nope"))
        assert theirs.status_code == none.status_code == 404, (method, path, theirs.text)
        assert theirs.text.replace("mine", "X") == none.text.replace("nope", "X")
    names = [t["name"] for t in nbtest.parse_json(bob.request("GET", "/templates"))["templates"]]
    assert "mine" not in names and names, names  # the operator's images are everyone's
    nbtest.assert_error(bob.request("POST", "/sandbox", json={"template": "mine"}), 404, "not_found")
    # alice starts from it; the admin sees it
    alice.create(template="mine")
    assert "mine" in [t["name"] for t in nbtest.parse_json(st.api.request("GET", "/templates"))["templates"]]
    alice.cleanup()
    assert alice.request("DELETE", "/templates/mine").status_code == 204


def test_parallel_creates_never_pass_a_quota_together(make_stack):
    st = make_stack("keysrace", workers_min="4", workers_max="8")
    q = KeyApi(st, add_key(st, "q", "--max-sandboxes", "2"))
    results = []

    def one():
        results.append(q.request("POST", "/sandbox", json={}, timeout=120))

    threads = [threading.Thread(target=one) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    made = [nbtest.parse_json(r)["sandboxId"] for r in results if r.status_code == 201]
    q.created.extend(made)
    try:
        assert sorted(r.status_code for r in results) == [201, 201, 429, 429, 429, 429], \
            [(r.status_code, r.text[:120]) for r in results]
        assert owned(st, "q") == sorted(f"nanobox-{sid}" for sid in made)
    finally:
        q.cleanup()


def test_snapshots_are_listed_for_their_owner_and_an_admin_filters_by_owner(tenants):
    """A snapshot carries its key (nanobox.owner): listed for its owner and
    admins, never for another user key, and GET /templates?owner=NAME of an
    admin lists NAME's own templates only (a user key's ?owner is ignored)."""
    st, k = tenants
    sid = k["alice"].create()
    nm = "snap-" + st.instance[-8:]
    r = k["alice"].request("POST", f"/sandbox/{sid}/snapshot", json={"name": nm}, timeout=120)
    assert r.status_code == 201 and nbtest.parse_json(r)["owner"] == "alice", r.text[:300]
    try:
        def names(api, q=""):
            r = api.request("GET", "/templates" + q)
            assert r.status_code == 200, r.text[:300]
            return [t["name"] for t in nbtest.parse_json(r)["templates"]]
        assert nm in names(k["alice"])
        assert nm not in names(k["bob"]) and nm not in names(k["bob"], "?owner=alice")
        assert nm in names(k["ops"]) and nm in names(st.api)
        assert names(k["ops"], "?owner=alice") == [nm]
        assert names(st.api, "?owner=bob") == []
        assert nm not in names(k["ops"], "?owner=ops")
        assert k["bob"].request("GET", f"/templates/{nm}").status_code == 404
    finally:
        assert k["alice"].request("DELETE", f"/templates/{nm}").status_code == 204
