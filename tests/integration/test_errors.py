"""Bad input: every case answers JSON {error, code} with the right status and
changes nothing (no new container, the list unchanged). A worker crash during
any of these fails the test too (see conftest's _watch_main_stack)."""

import json
import time

import pytest

import nbtest
from nbtest import MAX_BODY, MAX_COMMAND, assert_error, docker_ps, parse_json, random_uuid


class Unchanged:
    """Snapshot the instance's containers and the listed sandboxes."""

    def __init__(self, api):
        self.api = api
        self.containers = docker_ps(api.stack.instance)
        self.listed = api.list_ids()

    def check(self):
        assert docker_ps(self.api.stack.instance) == self.containers, "containers changed"
        assert self.api.list_ids() == self.listed, "sandbox list changed"


def post_raw(api, path, body, **kw):
    if isinstance(body, (dict, list)):
        body = json.dumps(body)
    return api.request("POST", path, data=body, headers={"Content-Type": "application/json"}, **kw)


# ------------------------------------------------------------ POST /sandbox

BAD_CREATE = [
    # (id, raw body, status, code)
    ("truncated-json", '{"ttl": 60', 400, "bad_json"),
    ("garbage", "not json at all", 400, "bad_json"),
    ("trailing-garbage", '{"ttl": 60} x', 400, "bad_json"),
    ("single-quotes", "{'ttl': 60}", 400, "bad_json"),
    ("nul-in-body", '{"ttl": 60\x00}', 400, "bad_json"),
    ("invalid-utf8", b'{"metadata": {"a": "\xff\xfe"}}', 400, ("bad_json", "bad_field")),
    ("top-level-array", "[1, 2]", 400, ("bad_json", "bad_field")),
    ("top-level-string", '"hello"', 400, ("bad_json", "bad_field")),
    ("top-level-null", "null", 400, ("bad_json", "bad_field")),
    ("nesting-33", '{"metadata": ' + '[' * 40 + ']' * 40 + '}', 400, "bad_json"),
    ("nesting-30000", '[' * 30000 + ']' * 30000, 400, "bad_json"),
    ("nesting-objects", '{"a":' * 100 + '1' + '}' * 100, 400, "bad_json"),
    ("unknown-field", {"ttl": 60, "foo": 1}, 400, "bad_field"),
    ("ttl-string", {"ttl": "abc"}, 400, "bad_field"),
    ("ttl-float-string", {"ttl": "60"}, 400, "bad_field"),
    ("ttl-bool", {"ttl": True}, 400, "bad_field"),
    ("ttl-null", {"ttl": None}, 400, "bad_field"),
    ("ttl-object", {"ttl": {}}, 400, "bad_field"),
    ("image-number", {"image": 5}, 400, "bad_field"),
    ("memory-junk", {"memory": "lots"}, 400, "bad_field"),
    ("memory-bool", {"memory": False}, 400, "bad_field"),
    ("cpus-string", {"cpus": "x"}, 400, "bad_field"),
    ("pids-string", {"pids": "many"}, 400, "bad_field"),
    ("env-array", {"env": ["A=1"]}, 400, "bad_field"),
    ("env-string", {"env": "A=1"}, 400, "bad_field"),
    ("env-non-string-value", {"env": {"A": 1}}, 400, "bad_field"),
    ("env-name-with-equals", {"env": {"A=B": "c"}}, 400, "bad_field"),
    ("env-empty-name", {"env": {"": "c"}}, 400, "bad_field"),
    ("metadata-array", {"metadata": ["a"]}, 400, "bad_field"),
    ("metadata-non-string", {"metadata": {"a": 1}}, 400, "bad_field"),
    ("metadata-nested", {"metadata": {"a": {"b": "c"}}}, 400, "bad_field"),
    ("network-unknown", {"network": "host"}, (400, 403, 422), ("bad_field", "forbidden", "out_of_range")),
    ("network-number", {"network": 1}, 400, "bad_field"),
    ("ttl-zero", {"ttl": 0}, 422, "out_of_range"),
    ("ttl-negative", {"ttl": -5}, 422, "out_of_range"),
    ("ttl-over-max", {"ttl": 3601}, 422, "out_of_range"),
    ("ttl-huge", {"ttl": 10 ** 30}, (400, 422), ("bad_field", "out_of_range")),
    ("memory-over-ceiling-string", {"memory": "512m"}, 422, "out_of_range"),
    ("memory-over-ceiling-bytes", {"memory": 1024 ** 3}, 422, "out_of_range"),
    ("memory-zero", {"memory": 0}, (400, 422), ("bad_field", "out_of_range")),
    ("memory-negative", {"memory": -1}, (400, 422), ("bad_field", "out_of_range")),
    ("cpus-over-ceiling", {"cpus": 2}, 422, "out_of_range"),
    ("cpus-zero", {"cpus": 0}, (400, 422), ("bad_field", "out_of_range")),
    ("cpus-negative", {"cpus": -0.5}, (400, 422), ("bad_field", "out_of_range")),
    ("pids-over-ceiling", {"pids": 100000}, 422, "out_of_range"),
    ("pids-zero", {"pids": 0}, (400, 422), ("bad_field", "out_of_range")),
    ("network-bridge-not-allowed", {"network": "bridge"}, 403, "forbidden"),
    ("image-not-allowed", {"image": "alpine:latest"}, 403, "forbidden"),
    ("image-path-trick", {"image": "nanobox:latest/../../x"}, 403, "forbidden"),
]


@pytest.mark.parametrize("body,status,code", [c[1:] for c in BAD_CREATE], ids=[c[0] for c in BAD_CREATE])
def test_bad_create_request_is_rejected_and_changes_nothing(api, body, status, code):
    snap = Unchanged(api)
    r = post_raw(api, "/sandbox", body)
    assert_error(r, status, code)
    snap.check()


@pytest.mark.parametrize("field,value", [
    ("metadata", {f"k{i}": "v" * 20 for i in range(500)}),
    ("metadata", {"k": "v" * 20000}),
    ("env", {f"E{i}": "v" for i in range(1000)}),
    ("env", {"BIG": "v" * 60000}),
], ids=["metadata-many-keys", "metadata-huge-value", "env-many-entries", "env-huge-value"])
def test_oversized_field_is_rejected_and_changes_nothing(api, field, value):
    snap = Unchanged(api)
    body = json.dumps({field: value})
    size = len(body)
    assert size < MAX_BODY, f"keep this under max_body ({size}): it tests the field caps"
    r = post_raw(api, "/sandbox", body)
    assert_error(r, (400, 413, 422), ("bad_field", "too_large", "out_of_range"))
    snap.check()


def test_body_over_app_cap_is_413_json(api):
    snap = Unchanged(api)
    body = json.dumps({"metadata": {"k": "v" * (MAX_BODY + 1000)}})
    r = post_raw(api, "/sandbox", body)
    assert_error(r, 413, "too_large")
    snap.check()


def test_body_of_2mib_is_413(api):
    snap = Unchanged(api)
    r = post_raw(api, "/sandbox", "{" + " " * (2 * 1024 * 1024) + "}")
    assert r.status_code == 413, r.text[:300]
    if "application/json" in r.headers.get("Content-Type", ""):
        assert_error(r, 413, "too_large")
    snap.check()


def test_service_answers_after_bad_input(api):
    for body in ('{"a":' * 10000, "\xff" * 100, "[" * 60000, '{"ttl": 1e400}'):
        r = post_raw(api, "/sandbox", body)
        assert 400 <= r.status_code < 500, (body[:20], r.status_code, r.text[:200])
    sid = api.create()
    assert api.exec(sid, "echo alive")["stdout"] == "alive\n"


# --------------------------------------------------------------- ids, routes

@pytest.mark.parametrize("bad_id", [
    "not-a-uuid",
    "12345",
    "0000000-0000-0000-0000-000000000000",        # 35 chars
    "zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz",
    "abc%20def",
    "a" * 300,
    # a fresh id each run, under a fixed name: parallel workers must collect the same tests
    pytest.param(random_uuid().upper().replace("-", "") + "xxxx", id="uppercase-undashed-uuid-xxxx"),
])
def test_bad_sandbox_id_is_400(api, bad_id):
    snap = Unchanged(api)
    assert_error(api.request("GET", f"/sandbox/{bad_id}"), 400, "bad_id")
    assert_error(api.request("DELETE", f"/sandbox/{bad_id}"), 400, "bad_id")
    assert_error(api.request("POST", f"/sandbox/{bad_id}/exec", json={"command": "true"}), 400, "bad_id")
    assert_error(api.request("POST", f"/sandbox/{bad_id}/timeout", json={"ttl": 60}), 400, "bad_id")
    snap.check()


def test_unknown_sandbox_is_404(api):
    snap = Unchanged(api)
    sid = random_uuid()
    assert_error(api.request("GET", f"/sandbox/{sid}"), 404, "not_found")
    assert_error(api.request("DELETE", f"/sandbox/{sid}"), 404, "not_found")
    assert_error(api.request("POST", f"/sandbox/{sid}/exec", json={"command": "true"}), 404, "not_found")
    assert_error(api.request("POST", f"/sandbox/{sid}/timeout", json={"ttl": 60}), 404, "not_found")
    snap.check()


@pytest.mark.parametrize("method,path", [
    ("GET", "/sandbox/{id}/nope"),
    ("POST", "/sandbox/{id}/exec/extra"),
    ("POST", "/sandbox/{id}/start"),
])
def test_unknown_route_is_404_no_route(api, method, path):
    sid = api.create()
    snap = Unchanged(api)
    r = api.request(method, path.format(id=sid), json={} if method == "POST" else None)
    assert_error(r, 404, "no_route")
    snap.check()


@pytest.mark.parametrize("method,path", [
    ("PUT", "/sandbox"),
    ("DELETE", "/sandbox"),
    ("PATCH", "/sandbox/{id}"),
    ("POST", "/sandbox/{id}"),
    ("PUT", "/sandbox/{id}"),
    ("GET", "/sandbox/{id}/exec"),
    ("DELETE", "/sandbox/{id}/exec"),
    ("GET", "/sandbox/{id}/timeout"),
    ("POST", "/healthz"),
])
def test_wrong_method_is_405(api, method, path):
    sid = api.create()
    snap = Unchanged(api)
    r = api.request(method, path.format(id=sid), json={} if method in ("POST", "PUT", "PATCH") else None)
    assert_error(r, 405, "method_not_allowed")
    snap.check()
    assert api.get(sid).status_code == 200


# --------------------------------------------------------------------- exec

BAD_EXEC = [
    ("malformed", '{"command": ', 400, "bad_json"),
    ("empty-body", "", 400, ("bad_field", "bad_json")),
    ("missing-command", {}, 400, "bad_field"),
    ("command-number", {"command": 5}, 400, "bad_field"),
    ("command-array", {"command": ["echo", "x"]}, 400, "bad_field"),
    ("command-null", {"command": None}, 400, "bad_field"),
    ("unknown-field", {"command": "true", "shell": "/bin/bash"}, 400, "bad_field"),
    ("timeout-string", {"command": "true", "timeout": "x"}, 400, "bad_field"),
    ("timeout-zero", {"command": "true", "timeout": 0}, 422, "out_of_range"),
    ("timeout-negative", {"command": "true", "timeout": -1}, 422, "out_of_range"),
    ("timeout-over-max", {"command": "true", "timeout": 121}, 422, "out_of_range"),
    ("cwd-number", {"command": "true", "cwd": 5}, 400, "bad_field"),
    ("env-array", {"command": "true", "env": ["A=1"]}, 400, "bad_field"),
    ("env-non-string", {"command": "true", "env": {"A": 1}}, 400, "bad_field"),
    ("env-name-with-equals", {"command": "true", "env": {"A=B": "c"}}, 400, "bad_field"),
    ("deep", '{"command": "true", "env": ' + '{"a":' * 50 + '"x"' + '}' * 50 + '}', 400, "bad_json"),
]


@pytest.fixture(scope="module")
def victim(stack):
    sid = stack.api.create()
    yield sid
    stack.api.delete(sid)


@pytest.mark.parametrize("body,status,code", [c[1:] for c in BAD_EXEC], ids=[c[0] for c in BAD_EXEC])
def test_bad_exec_request_is_rejected(api, victim, body, status, code):
    snap = Unchanged(api)
    r = post_raw(api, f"/sandbox/{victim}/exec", body)
    assert_error(r, status, code)
    snap.check()
    assert api.exec(victim, "echo ok")["stdout"] == "ok\n"


def test_bad_exec_runs_nothing(api, victim):
    r = post_raw(api, f"/sandbox/{victim}/exec", {"command": "touch /workspace/marker", "timeout": 0})
    assert_error(r, 422, "out_of_range")
    r = post_raw(api, f"/sandbox/{victim}/exec", {"command": "touch /workspace/marker", "bogus": 1})
    assert_error(r, 400, "bad_field")
    time.sleep(0.5)
    assert api.exec(victim, "test -e /workspace/marker")["exit_code"] == 1


def test_exec_command_over_max_command_is_rejected(api, victim):
    snap = Unchanged(api)
    body = json.dumps({"command": "touch /workspace/marker; echo " + "x" * (MAX_COMMAND + 10)})
    r = post_raw(api, f"/sandbox/{victim}/exec", body)
    assert_error(r, (400, 413, 422), ("bad_field", "too_large", "out_of_range"))
    snap.check()
    assert api.exec(victim, "test -e /workspace/marker")["exit_code"] == 1


def test_exec_command_at_max_command_runs(api, victim):
    cmd = "printf %s " + "y" * (MAX_COMMAND - len("printf %s "))
    assert len(cmd) == MAX_COMMAND
    res = api.exec(victim, cmd)
    assert res["stdout"] == "y" * (MAX_COMMAND - len("printf %s "))


# ------------------------------------------------------------------ timeout

BAD_TIMEOUT = [
    ("malformed", "{", 400, "bad_json"),
    ("missing-ttl", {}, 400, "bad_field"),
    ("ttl-string", {"ttl": "x"}, 400, "bad_field"),
    ("unknown-field", {"ttl": 60, "x": 1}, 400, "bad_field"),
    ("ttl-zero", {"ttl": 0}, 422, "out_of_range"),
    ("ttl-negative", {"ttl": -10}, 422, "out_of_range"),
    ("ttl-over-max", {"ttl": 3601}, 422, "out_of_range"),
]


@pytest.mark.parametrize("body,status,code", [c[1:] for c in BAD_TIMEOUT], ids=[c[0] for c in BAD_TIMEOUT])
def test_bad_timeout_request_leaves_expiry_unchanged(api, victim, body, status, code):
    before = parse_json(api.get(victim))["expires_at"]
    snap = Unchanged(api)
    r = post_raw(api, f"/sandbox/{victim}/timeout", body)
    assert_error(r, status, code)
    snap.check()
    assert parse_json(api.get(victim))["expires_at"] == before


# ------------------------------------------------------- query string abuse

def test_bad_list_query_does_not_crash(api):
    for q in ("?metadata.=x", "?metadata.a", "?%ff%fe=1", "?metadata.a=%00", "?" + "a=1&" * 2000,
              "?metadata." + "k" * 5000 + "=v"):
        r = api.request("GET", "/sandbox" + q)
        assert r.status_code in (200, 400, 414), (q[:40], r.status_code, r.text[:200])
        if r.status_code == 200:
            assert isinstance(parse_json(r)["sandboxes"], list)
        elif r.status_code == 400:
            assert_error(r, 400, ("bad_field", "bad_json", "bad_query"))
    assert api.request("GET", "/healthz").status_code == 200


def test_many_unknown_ids_do_not_change_anything(api):
    snap = Unchanged(api)
    for _ in range(20):
        assert api.request("GET", f"/sandbox/{nbtest.random_uuid()}").status_code == 404
    snap.check()
