"""
test_openapi.py - docs/openapi.yaml is the API's contract (docs/API.md,
"The contract"), and these tests keep it one:

- every route of nanobox-fcgi's route table (`nanobox-fcgi -R`, read from
  the built binary, so a route added to src/fcgi/api/api_routes.c without a
  spec entry fails here, naming it) is in the spec, and the spec has no
  route the table lacks; public rows are the spec's `security: []` ones;
- the spec lints clean under Redocly's strictest ruleset (@redocly/cli,
  pinned in tests/openapi/package.json);
- GET /openapi.json serves it (public), as the JSON of the YAML;
- live answers of the real stack validate against the spec's schema for
  their route and status (python3-jsonschema), and the requests that
  succeed against its request schemas. An answer with a status the spec
  does not list for its route fails too.

The E2B facade (/sandboxes, /v2/sandboxes, the data plane) speaks E2B's
wire, not nanobox's API (docs/E2B.md): its rows (flag e2b) are left out of
the spec on purpose, and listed as excluded when this file runs.
"""

import base64
import json as jsonlib
import os
import subprocess

import jsonschema
import pytest
import yaml

import nbtest
from nbtest import PYTHON_IMAGE, needs_image, parse_json, random_uuid, wait_until

SPEC_YAML = nbtest.REPO / "docs" / "openapi.yaml"
LINT_DIR = nbtest.REPO / "tests" / "openapi"
METHODS = ("get", "put", "post", "delete", "patch", "head", "options")

# Rows of the route table with these flags are not nanobox's API: the E2B
# facade answers in E2B's shape, on E2B's paths (docs/E2B.md).
EXCLUDED_FLAGS = {"e2b": "the E2B facade: E2B's wire, described by E2B, not by this spec"}


@pytest.fixture(scope="module")
def spec():
    with open(SPEC_YAML, encoding="utf-8") as f:
        return yaml.safe_load(f)


def route_table():
    """[(METHOD, path, {flags})] of `nanobox-fcgi -R`: the route table as built."""
    r = subprocess.run([str(nbtest.FCGI_BIN), "-R"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, f"nanobox-fcgi -R failed ({r.returncode}): {r.stderr}"
    rows = []
    for line in r.stdout.splitlines():
        method, path, flags = line.split("\t")
        assert path != "?", f"a route of an unknown shape: {line!r} (add it to nb_route_path)"
        rows.append((method, path, set() if flags == "-" else set(flags.split(","))))
    assert len(rows) > 20, r.stdout
    return rows


def spec_operations(spec):
    return {(m.upper(), path): op for path, item in spec["paths"].items()
            for m, op in item.items() if m in METHODS}


# ----------------------------------------------------------- the route table

def test_every_route_is_in_the_spec_and_nothing_else(spec):
    table, excluded = set(), []
    public = {}
    for method, path, flags in route_table():
        if flags & EXCLUDED_FLAGS.keys():
            excluded.append(f"{method} {path}")
            continue
        if method == "-":  # a known path no handler serves (404): not a route
            continue
        assert method != "*", f"a catch-all row outside the E2B facade: {path}"
        methods = [method] + (["HEAD"] if "head" in flags else [])
        for m in methods:
            table.add((m, path))
            public[(m, path)] = "public" in flags
    ops = spec_operations(spec)
    missing = sorted(table - ops.keys())
    extra = sorted(ops.keys() - table)
    assert not missing, ("routes of src/fcgi/api/api_routes.c with no entry in docs/openapi.yaml "
                         f"(add them there): {missing}")
    assert not extra, f"docs/openapi.yaml describes routes the route table does not have: {extra}"
    for key, is_public in public.items():
        sec = ops[key].get("security", spec["security"])
        assert (sec == []) == is_public, (
            f"{key}: the table says {'public' if is_public else 'keyed'}, the spec's security is {sec}")
    print("left out of the spec:", "; ".join(f"{v} ({k})" for k, v in EXCLUDED_FLAGS.items()),
          "->", ", ".join(excluded))
    assert excluded, "no E2B row excluded: did the front's name change (nb_http_routes_print)?"


def test_spec_lints_clean():
    node = nbtest.node_package(LINT_DIR, "@redocly/cli")
    version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
    major, minor = (int(x) for x in version.lstrip("v").split(".")[:2])
    assert (major, minor) >= (20, 19), (
        f"@redocly/cli needs Node.js >= 20.19 (this is {version}): install NodeSource's nodejs")
    env = dict(os.environ, REDOCLY_TELEMETRY="off", REDOCLY_SUPPRESS_UPDATE_NOTICE="true",
               NO_COLOR="1")
    cli = LINT_DIR / "node_modules" / "@redocly" / "cli" / "bin" / "cli.js"
    r = subprocess.run([node, str(cli), "lint", "--config", str(LINT_DIR / "redocly.yaml"),
                        "--format=stylish", str(SPEC_YAML)],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, f"redocly lint:\n{r.stdout[-6000:]}\n{r.stderr[-3000:]}"


def test_openapi_json_is_served_public_and_is_the_yaml(api, spec):
    r = api.request("GET", "/openapi.json", auth=False)
    assert r.status_code == 200, r.text[:300]
    assert r.headers["Content-Type"].split(";")[0] == "application/json"
    assert parse_json(r) == spec
    h = api.request("HEAD", "/openapi.json", auth=False)
    assert h.status_code == 200 and h.content == b""
    assert api.request("GET", "/openapi.json").status_code == 200  # a key does no harm
    r = api.request("POST", "/openapi.json", auth=False, json={})
    assert r.status_code == 405 and r.headers["Allow"] == "GET"


# ----------------------------------------------------------- live answers

class Contract:
    """Calls through the stack, each answer checked against the spec."""

    def __init__(self, api, spec):
        self.api, self.spec = api, spec
        self.resolver = jsonschema.RefResolver.from_schema(spec)
        self.seen = set()

    def deref(self, node):
        while isinstance(node, dict) and "$ref" in node:
            node = self.resolver.resolve(node["$ref"])[1]
        return node

    def validate(self, value, schema, what):
        v = jsonschema.Draft202012Validator(schema, resolver=self.resolver)
        errors = sorted(v.iter_errors(value), key=lambda e: list(e.absolute_path))
        assert not errors, (f"{what} does not match the spec: "
                            + "; ".join(f"at {list(e.absolute_path)}: {e.message}" for e in errors[:5])
                            + f"\nvalue: {jsonlib.dumps(value)[:1500]}")

    def call(self, method, template, args=None, query="", json=None, data=None, headers=None,
             auth=True, expect=None, timeout=120):
        """Send method template (its {names} from args), check the answer
        against the spec (and, when it succeeds, the JSON body sent against
        the request schema); return the response."""
        op = self.spec["paths"][template][method.lower()]
        path = template.format(**(args or {}))
        r = self.api.request(method, path + query, json=json, data=data, headers=headers, auth=auth,
                             timeout=timeout)
        what = f"{method} {path}{query} -> {r.status_code}"
        if expect is not None:
            assert r.status_code == expect, f"{what} (expected {expect}): {r.text[:500]}"
        status = str(r.status_code)
        assert status in op["responses"], (
            f"{what}: the spec lists no {status} for {method} {template}: {r.text[:300]}")
        self.seen.add((method, template, r.status_code))
        if json is not None and 200 <= r.status_code < 300:
            body = self.deref(op["requestBody"])["content"]["application/json"]["schema"]
            self.validate(json, body, f"the request of {what}")
        rsp = self.deref(op["responses"][status])
        content = rsp.get("content")
        if method == "HEAD" or not content:
            assert r.content == b"", f"{what}: the spec says no body, got {r.content[:200]!r}"
            return r
        ctype = r.headers.get("Content-Type", "").split(";")[0].strip()
        assert ctype in content, f"{what}: Content-Type {ctype!r}, the spec has {sorted(content)}"
        schema = content[ctype].get("schema")
        if ctype == "application/json":
            self.validate(parse_json(r), schema, what)
        elif ctype == "application/x-ndjson":
            lines = r.content.decode("utf-8").splitlines()
            for i, line in enumerate(lines):
                self.validate(jsonlib.loads(line), schema, f"{what}, line {i + 1}")
        return r


@pytest.fixture
def contract(api, spec):
    return Contract(api, spec)


def test_sandbox_lifecycle_answers_match_the_spec(contract, api):
    c = contract
    c.call("GET", "/healthz", auth=False, expect=200)
    c.call("HEAD", "/healthz", auth=False, expect=200)
    r = c.call("POST", "/sandbox", json={"ttl": 600, "memory": "128m", "cpus": 0.25, "pids": 64,
                                         "metadata": {"suite": "openapi"}, "env": {"A": "1"}},
               expect=201)
    sid = r.json()["sandboxId"]
    api.created.append(sid)
    ids = {"id": sid}
    c.call("GET", "/sandbox/{id}", ids, expect=200)
    c.call("GET", "/sandbox", query="?metadata.suite=openapi", expect=200)
    c.call("GET", "/sandbox", expect=200)
    c.call("POST", "/sandbox/{id}/timeout", ids, json={"ttl": 900}, expect=200)
    c.call("GET", "/sandbox/{id}/metrics", ids, query="?interval=50", expect=200)
    c.call("GET", "/sandbox/{id}/metrics", ids, expect=200)
    c.call("GET", "/sandbox/{id}/metrics", ids, query="?start=0", expect=200)
    c.call("GET", "/sandbox/{id}/metrics", ids, query="?start=9&end=8", expect=400)
    c.call("GET", "/metrics", expect=200)
    c.call("HEAD", "/metrics", expect=200)

    # exec: collected, argv, streamed, background and its process routes
    c.call("POST", "/sandbox/{id}/exec", ids, json={"command": "echo hi; echo err >&2; exit 3"},
           expect=200)
    c.call("POST", "/sandbox/{id}/exec", ids, json={"argv": ["printf", "%s|", "a b"], "timeout": 5,
                                                    "cwd": "/tmp", "stdin": "x"}, expect=200)
    r = c.call("POST", "/sandbox/{id}/exec", ids, json={"command": "echo 1; echo 2 >&2", "stream": True},
               expect=200)
    assert r.headers["Content-Type"].startswith("application/x-ndjson")
    r = c.call("POST", "/sandbox/{id}/exec", ids,
               json={"command": "read l; echo got $l; sleep 60", "background": True}, expect=201)
    pid = r.json()["pid"]
    pids = {"id": sid, "pid": pid}
    c.call("POST", "/sandbox/{id}/processes/{pid}/stdin", pids, json={"data": "x\n"}, expect=200)
    wait_until(lambda: "got x" in api.request("GET", f"/sandbox/{sid}/processes/{pid}").json()["stdout"],
               what="the background process's output")
    c.call("GET", "/sandbox/{id}/processes", ids, expect=200)
    c.call("GET", "/sandbox/{id}/processes/{pid}", pids, query="?stdout_offset=0", expect=200)
    c.call("DELETE", "/sandbox/{id}/processes/{pid}", pids, query="?signal=TERM", expect=204)
    wait_until(lambda: not api.request("GET", f"/sandbox/{sid}/processes/{pid}").json()["running"],
               what="the process to end")
    c.call("GET", "/sandbox/{id}/processes/{pid}", pids, expect=200)  # exited: exit_code, signal

    # files
    c.call("PUT", "/sandbox/{id}/files", ids, query="?path=/workspace/d/a.txt&mode=0600",
           data=b"hello\n", expect=201)
    r = c.call("GET", "/sandbox/{id}/files", ids, query="?path=/workspace/d/a.txt", expect=200)
    assert r.content == b"hello\n"
    c.call("POST", "/sandbox/{id}/files/mkdir", ids, json={"path": "d/e"}, expect=201)
    c.call("POST", "/sandbox/{id}/files/move", ids, json={"from": "d/a.txt", "to": "d/e/b.txt"},
           expect=200)
    c.call("GET", "/sandbox/{id}/files", ids, query="?path=/workspace/d", expect=200)
    c.call("DELETE", "/sandbox/{id}/files", ids, query="?path=/workspace/d&recursive=1", expect=204)

    # ports
    c.call("POST", "/sandbox/{id}/ephemeralport", ids, json={"sandboxport": 8000, "duration": 60},
           expect=201)
    c.call("GET", "/sandbox/{id}/ports", ids, expect=200)
    c.call("DELETE", "/sandbox/{id}/ports/{sandboxport}", {"id": sid, "sandboxport": 8000}, expect=204)

    # pause, and what a paused sandbox answers
    c.call("POST", "/sandbox/{id}/pause", ids, expect=200)
    c.call("GET", "/sandbox/{id}", ids, expect=200)  # paused_at, pause_expires_at
    c.call("POST", "/sandbox/{id}/exec", ids, json={"command": "true"}, expect=409)
    c.call("POST", "/sandbox/{id}/resume", ids, json={}, expect=200)

    # errors
    c.call("POST", "/sandbox", data="[1]", headers={"Content-Type": "application/json"}, expect=400)
    c.call("POST", "/sandbox", json={"tll": 5}, expect=400)
    c.call("POST", "/sandbox", json={"ttl": 10 ** 7}, expect=422)
    c.call("POST", "/sandbox", json={"image": "not-allowed:latest"}, expect=403)
    c.call("GET", "/sandbox/{id}", {"id": "NOT-AN-ID"}, expect=400)
    c.call("GET", "/sandbox/{id}", {"id": random_uuid()}, expect=404)
    c.call("GET", "/sandbox", auth=False, expect=401)
    # not_bridge (409), or forbidden (403) first where the operator allows no bridge at all
    r = c.call("PUT", "/sandbox/{id}/network", ids, json={"allow": ["203.0.113.7:443"]})
    assert r.status_code in (403, 409), r.text
    c.call("GET", "/sandbox/{id}/processes/{pid}", {"id": sid, "pid": 4194304}, expect=404)
    c.call("POST", "/sandbox/{id}/code", ids, json={"code": "1"}, expect=409)  # no_kernel
    c.call("DELETE", "/sandbox/{id}", ids, expect=204)
    c.call("DELETE", "/sandbox/{id}", ids, expect=404)


def test_run_templates_and_mcp_answers_match_the_spec(contract, api):
    c = contract
    c.call("POST", "/run", json={"language": "python", "code": "print(6*7)", "timeout": 20}, expect=200)
    c.call("POST", "/run", json={"language": "cobol", "code": "x"}, expect=422)

    c.call("GET", "/templates", expect=200)
    c.call("GET", "/templates/{name}", {"name": "nanobox"}, expect=200)
    c.call("GET", "/templates/{name}/logs", {"name": "nanobox"}, expect=200)
    c.call("DELETE", "/templates/{name}", {"name": "nanobox"}, expect=403)
    c.call("GET", "/templates/{name}", {"name": "no-such-template"}, expect=404)
    name = "oa-" + random_uuid()[:8]
    dockerfile = "FROM nanobox:latest\nCOPY hello.txt /opt/hello.txt\n"
    c.call("POST", "/templates", json={"name": name, "dockerfile": dockerfile,
                                       "files": {"hello.txt": base64.b64encode(b"hi\n").decode()}},
           expect=202)
    try:
        wait_until(lambda: api.request("GET", f"/templates/{name}").json()["status"] != "building",
                   timeout=180, interval=0.5, what=f"template {name} to build")
        c.call("GET", "/templates/{name}", {"name": name}, expect=200)
        c.call("GET", "/templates/{name}/logs", {"name": name}, query="?follow=1", expect=200)
    finally:
        c.call("DELETE", "/templates/{name}", {"name": name}, query="?force=1", expect=204)

    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "openapi-test", "version": "0"}}}
    hdrs = {"Accept": "application/json, text/event-stream"}
    r = c.call("POST", "/mcp", json=init, headers=hdrs, expect=200)
    session = {"Mcp-Session-Id": r.headers["Mcp-Session-Id"], "MCP-Protocol-Version": "2025-06-18"}
    c.call("POST", "/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"},
           headers={**hdrs, **session}, expect=202)
    c.call("POST", "/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
           headers={**hdrs, **session}, expect=200)
    c.call("DELETE", "/mcp", headers=session, expect=204)
    c.call("DELETE", "/mcp", headers=session, expect=404)


@needs_image(PYTHON_IMAGE)
def test_code_answers_match_the_spec(contract, api):
    c = contract
    sid = api.create(image=PYTHON_IMAGE)
    ids = {"id": sid}
    c.call("POST", "/sandbox/{id}/code", ids, json={"code": "x = 6 * 7\nprint('x is', x)\nx"}, expect=200)
    c.call("POST", "/sandbox/{id}/code", ids, json={"code": "1 / 0"}, expect=200)  # error
    r = c.call("POST", "/sandbox/{id}/code", ids,
               json={"code": "from IPython.display import display, HTML\ndisplay(HTML('<b>b</b>'))\nprint(1)\n2",
                     "stream": True}, expect=200)
    assert r.headers["Content-Type"].startswith("application/x-ndjson")
    c.call("POST", "/sandbox/{id}/code", ids, json={"code": "echo $((2+3))", "language": "bash"},
           expect=200)
    r = c.call("POST", "/sandbox/{id}/contexts", ids, json={"language": "python", "cwd": "/tmp",
                                                            "env": {"K": "v"}}, expect=201)
    ctx = {"id": sid, "ctx": r.json()["id"]}
    c.call("GET", "/sandbox/{id}/contexts", ids, expect=200)
    c.call("POST", "/sandbox/{id}/contexts/{ctx}/restart", ctx, expect=200)
    c.call("POST", "/sandbox/{id}/code/interrupt", ids, json={"context": ctx["ctx"]}, expect=200)
    c.call("DELETE", "/sandbox/{id}/contexts/{ctx}", ctx, expect=204)
    c.call("DELETE", "/sandbox/{id}/contexts/{ctx}", ctx, expect=404)
    c.call("POST", "/sandbox/{id}/code", ids, json={"code": "1", "language": "cobol"}, expect=422)
    c.call("POST", "/sandbox/{id}/code", ids, json={"code": "1", "context": "Bad!"}, expect=400)


def test_a_schema_mismatch_is_caught(contract):
    """The check itself: an answer that breaks its schema fails loudly."""
    sandbox = contract.spec["components"]["schemas"]["Sandbox"]
    with pytest.raises(AssertionError, match="does not match the spec"):
        contract.validate({"sandboxId": "x"}, sandbox, "a made-up answer")
    ok = {"error": "m", "code": "not_found"}
    contract.validate(ok, contract.spec["components"]["schemas"]["Error"], "an error")
    with pytest.raises(AssertionError):
        contract.validate({**ok, "extra": 1}, contract.spec["components"]["schemas"]["Error"], "an error")
