"""
The E2B facade's control plane (docs/E2B.md) against the live stack.

Two parts:
- the official E2B SDK (npm e2b, pinned in tests/e2b/package.json) runs
  tests/e2b/control.mjs with nothing but E2B_API_URL, E2B_SANDBOX_URL (the
  stack's nginx) and E2B_API_KEY=e2b_<key>: create with metadata, envs and
  a timeout, getInfo, setTimeout both ways, connect (never shortens;
  resumes), list with its filters, order and pages, pause, kill, the
  errors it maps. Once per module; one test per behaviour, on its summary;
- raw HTTP on the same paths: E2B's error shape {"code", "message"} from
  the app and from nginx, the key with and without "e2b_", what is not
  implemented, the data plane routed on E2b-Sandbox-Id.

npm installs the SDK into tests/e2b/node_modules when it is missing.
"""

import base64
import json
import os
import secrets
import subprocess
from datetime import datetime, timezone

import pytest
import requests

import nbtest

E2B_DIR = nbtest.REPO / "tests" / "e2b"
CONTROL_JS = E2B_DIR / "control.mjs"
SDK_TIMEOUT = 300
MAX_TTL = int(nbtest.BASE_CONF["max_ttl"])


@pytest.fixture(scope="module")
def e2b_sdk():
    return nbtest.node_package(E2B_DIR, "e2b")


@pytest.fixture(scope="module")
def run(stack, e2b_sdk):
    """control.mjs once against the stack: its summary."""
    tag = "e2b-" + secrets.token_hex(4)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("E2B_", "NANOBOX_"))}
    env.update(E2B_API_URL=stack.url, E2B_SANDBOX_URL=stack.url, E2B_API_KEY=f"e2b_{stack.api_key}")
    args = ["--tag", tag] + (["--code"] if nbtest.image_present(nbtest.PYTHON_IMAGE) else [])
    r = subprocess.run([e2b_sdk, str(CONTROL_JS), *args], cwd=E2B_DIR, env=env, capture_output=True,
                       text=True, timeout=SDK_TIMEOUT)
    lines = [line for line in r.stdout.splitlines() if line.strip()]
    assert r.returncode == 0 and lines, (f"control.mjs -> {r.returncode}\nstdout: {r.stdout[-3000:]}\n"
                                         f"stderr: {r.stderr[-5000:]}")
    summary = json.loads(lines[-1])
    yield summary
    for sid in summary["created"]:
        stack.api.delete(sid)


@pytest.fixture(scope="module")
def commands(stack, e2b_sdk):
    """commands.mjs once against the stack (sbx.commands through process.Process): its summary."""
    tag = "e2b-" + secrets.token_hex(4)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("E2B_", "NANOBOX_"))}
    env.update(E2B_API_URL=stack.url, E2B_SANDBOX_URL=stack.url, E2B_API_KEY=f"e2b_{stack.api_key}")
    r = subprocess.run([e2b_sdk, str(E2B_DIR / "commands.mjs"), "--tag", tag], cwd=E2B_DIR, env=env,
                       capture_output=True, text=True, timeout=SDK_TIMEOUT)
    lines = [line for line in r.stdout.splitlines() if line.strip()]
    assert r.returncode == 0 and lines, (f"commands.mjs -> {r.returncode}\nstdout: {r.stdout[-3000:]}\n"
                                         f"stderr: {r.stderr[-5000:]}")
    summary = json.loads(lines[-1])
    yield summary
    for sid in summary["created"]:
        stack.api.delete(sid)


def step(run, name):
    s = run["steps"].get(name)
    assert s is not None, f"step {name} did not run"
    assert "thrown" not in s, f"step {name}: the SDK threw {s['thrown']}"
    return s


def thrown(run, name):
    s = run["steps"].get(name)
    assert s is not None, f"step {name} did not run"
    assert "returned" not in s, f"step {name} should have thrown; it returned {s['returned']}"
    return s


def ids(run, name):
    return [sid for page in step(run, name)["pages"] for sid in page]


def near(value, want, slack=5):
    return abs(value - want) <= slack


# ----------------------------------------------------------- through the SDK

def test_create_returns_a_nanobox_sandbox(run, api):
    sid = step(run, "create")["sandboxId"]
    assert nbtest.UUID_RE.match(sid), sid
    # the same sandbox through the native API (killed by the script at its end)
    assert sid in run["created"]


def test_get_info_shows_template_metadata_state_and_timeout(run):
    i = step(run, "getInfo")
    assert i["sandboxId"] == step(run, "create")["sandboxId"]
    assert i["templateId"] == "base"
    assert i["metadata"] == {"suite": i["metadata"]["suite"], "n": "0", "we ird&k=y": "a=b c&d"}
    assert i["state"] == "running"
    assert near(i["endsIn"], 120), i
    assert i["cpuCount"] >= 1
    assert i["memoryMB"] == nbtest.DEFAULT_MEMORY // (1024 * 1024)
    assert i["envdVersion"] == "0.5.6"


def test_env_vars_reach_the_sandbox(run):
    s = step(run, "envVisible")
    assert s["status"] == 200, s
    assert s["body"]["stdout"] == "bar baz"


def test_is_running_answers_through_the_data_plane(run):
    assert step(run, "isRunning") == {"running": True}


def test_set_timeout_shortens_and_lengthens(run):
    assert near(step(run, "setTimeoutShorter")["endsIn"], 30)
    assert near(step(run, "setTimeoutLonger")["endsIn"], 600)


def test_connect_never_shortens_and_extends(run):
    s = step(run, "connectDoesNotShorten")
    assert s["sandboxId"] == step(run, "create")["sandboxId"]
    assert near(s["endsIn"], 600), s
    assert near(step(run, "connectExtends")["endsIn"], 900)


def test_list_pages_with_next_token(run):
    pages = step(run, "listPaged")["pages"]
    assert [len(p) for p in pages] == [2, 1], pages
    all3 = [step(run, "create")["sandboxId"], *step(run, "createMore")["ids"]]
    assert sorted(sum(pages, [])) == sorted(all3)


def test_list_order_asc_and_desc(run):
    asc, desc = ids(run, "listAsc"), ids(run, "listDesc")
    assert len(set(asc)) == 3 and asc == desc[::-1]
    # newest first by default
    assert ids(run, "listPaged") == desc
    # pages of one keep the same order
    assert ids(run, "listAscPaged") == asc
    assert [len(p) for p in step(run, "listAscPaged")["pages"]] == [1, 1, 1]


def test_list_filters(run):
    b, c = step(run, "createMore")["ids"]
    assert ids(run, "listMetadataPair") == [b]
    assert ids(run, "listMetadataOddChars") == [step(run, "create")["sandboxId"]]
    assert len(ids(run, "listTemplateBase")) == 3
    assert ids(run, "listTemplateOther") == []
    assert ids(run, "listStartedAfterFuture") == []
    assert len(ids(run, "listStartedAfterPast")) == 3
    assert ids(run, "listPausedBefore") == []


def test_list_items_have_the_sdk_fields(run):
    [item] = step(run, "listFirstItem")["items"]
    assert item["sandboxId"] == step(run, "create")["sandboxId"]
    assert item["templateId"] == "base" and item["state"] == "running"
    assert item["metadata"]["n"] == "0"
    started = datetime.fromisoformat(item["startedAt"].replace("Z", "+00:00"))
    assert abs((datetime.now(timezone.utc) - started).total_seconds()) < 600


def test_pause_then_connect_resumes(run):
    b = step(run, "createMore")["ids"][0]
    assert step(run, "pause") == {"paused": True}
    assert step(run, "pauseAgain") == {"paused": False}  # E2B's 409: already paused
    assert step(run, "pausedInfo")["state"] == "paused"
    assert step(run, "pausedIsRunning") == {"running": False}
    assert ids(run, "listPaused") == [b]
    assert b not in ids(run, "listRunning")
    s = step(run, "connectResumes")
    assert s["state"] == "running" and s["running"] is True
    assert near(s["endsIn"], 300)


def test_set_timeout_ends_the_sandbox(run):
    assert step(run, "shortTimeoutEnds") == {"running": False}


def test_kill_true_then_false(run):
    assert step(run, "kill") == {"killed": True}
    assert step(run, "killAgain") == {"killed": False}
    assert step(run, "staticKillGone") == {"killed": False}
    assert step(run, "killedIsRunning") == {"running": False}
    assert step(run, "killNotOurs") == {"killed": False}


def test_gone_sandbox_is_not_found(run):
    for name in ("getInfoGone", "connectGone", "setTimeoutGone", "getInfoNotOurs"):
        assert thrown(run, name)["name"] == "SandboxNotFoundError", (name, run["steps"][name])


def test_wrong_key_is_the_sdk_auth_error(run):
    for name in ("wrongKeyCreate", "wrongKeyList"):
        e = thrown(run, name)
        assert e["name"] == "AuthenticationError", e
        assert "X-API-KEY: e2b_<key>" in e["message"], e


def test_bare_key_works_too(run):
    assert step(run, "bareKeyList")["count"] >= 1


def test_unknown_template_and_errors_read_well(run):
    e = thrown(run, "unknownTemplate")
    assert e["name"] == "SandboxError" and e["message"] == "404: template 'no-such-template' not found", e
    e = thrown(run, "metricsNotImplemented")
    assert e["name"] == "SandboxError" and e["message"].startswith("501: "), e
    e = thrown(run, "timeoutTooLong")
    assert e["name"] == "SandboxError" and e["message"].startswith("400: timeout must be between"), e


def test_code_interpreter_template(run):
    if not nbtest.image_present(nbtest.PYTHON_IMAGE):
        pytest.skip(f"{nbtest.PYTHON_IMAGE} not built")
    i = step(run, "codeTemplate")
    assert i["templateId"] == "code-interpreter-v1" and i["state"] == "running"


def test_sdk_left_nothing_running(run, stack):
    # every sandbox it created was killed (the module's teardown would too: assert before it)
    live = set(stack.live_containers())
    assert not [sid for sid in run["created"] if any(sid in c for c in live)]


# ------------------------------------------- commands through the SDK

def test_run_echo(commands):
    assert step(commands, "echo") == {"stdout": "hi\n", "stderr": "", "exitCode": 0, "error": None}


def test_run_stderr(commands):
    s = step(commands, "stderr")
    assert (s["stdout"], s["stderr"], s["exitCode"]) == ("out\n", "oops\n", 0)


def test_non_zero_exit_is_command_exit_error(commands):
    e = thrown(commands, "exitCode")
    assert e["name"] == "CommandExitError" and e["exitCode"] == 3, e
    assert e["stdout"] == "partial\n" and e["message"] == "exit status 3"


def test_envs_and_cwd(commands):
    assert step(commands, "envsAndCwd")["stdout"] == "per command|sandbox-wide\n/tmp\n"
    # a command's envs are its own
    assert step(commands, "envsDoNotLeak")["stdout"] == "[]\n"


def test_stdin_is_closed_unless_asked_for(commands):
    assert step(commands, "stdinClosedByDefault")["stdout"] == "ended\n"


def test_output_streams_to_callbacks(commands):
    s = step(commands, "streamedCallbacks")
    assert s["stdout"] == "line1\nline2\nline3\n"
    assert "".join(s["chunks"]) == s["stdout"] and len(s["chunks"]) >= 2, s["chunks"]


def test_big_output_arrives_whole(commands):
    assert step(commands, "bigOutput") == {"length": 300002, "tail": "aaé€", "allA": True}


def test_timeout_is_the_sdk_timeout_error_and_kills(commands):
    e = thrown(commands, "timeout")
    assert e["name"] == "TimeoutError", e
    assert 1000 <= commands["steps"]["timeoutElapsedMs"] < 8000
    assert step(commands, "timeoutKilled") == {"sleeps": 0}


def test_background_then_kill(commands):
    s = step(commands, "backgroundKill")
    assert s["listed"] and s["listed"]["pid"] == s["pid"]
    assert s["listed"]["cmd"] == "/bin/bash" and s["listed"]["args"] == ["-l", "-c", "sleep 60"]
    assert s["killed"] is True
    # the stream ends with the kill: SIGKILL, as envd reports it
    assert s["waited"]["name"] == "CommandExitError" and s["waited"]["exitCode"] == -1, s
    assert s["waited"]["message"] == "signal: killed"
    assert s["killAgain"] is False


def test_send_stdin_and_close_stdin(commands):
    assert step(commands, "stdin") == {"stdout": "hello world\n[eof]\n", "stderr": "", "exitCode": 0,
                                       "error": None}


def test_connect_to_a_running_command(commands):
    s = step(commands, "connect")
    assert s["samePid"] is True
    w = s["waited"]
    assert w["name"] == "CommandExitError" and w["exitCode"] == 4 and w["stdout"] == "done\n", w


def test_unknown_pid(commands):
    assert thrown(commands, "connectUnknown")["name"] == "NotFoundError"
    assert step(commands, "killUnknown") == {"killed": False}
    assert thrown(commands, "sendStdinUnknown")["name"] == "NotFoundError"


def test_data_plane_needs_the_access_token(commands):
    for name in ("wrongToken", "noToken"):
        e = thrown(commands, name)
        assert e["name"] == "AuthenticationError" and "X-Access-Token" in e["message"], e
    assert step(commands, "rightTokenByConnect")["stdout"] == "again\n"


def test_killed_sandbox_ends_the_stream(commands):
    w = step(commands, "killedSandbox")["waited"]
    assert "returned" not in w, w
    assert thrown(commands, "runOnKilledSandbox")["name"] in ("TimeoutError", "SandboxNotFoundError")


# --------------------------------------------------------------- raw HTTP

def e2b(stack, method, path, key="e2b", headers=None, **kw):
    h = dict(headers or {})
    if key == "e2b":
        h["X-API-KEY"] = f"e2b_{stack.api_key}"
    elif key == "bare":
        h["X-API-KEY"] = stack.api_key
    elif key is not None:
        h["X-API-KEY"] = key
    return requests.request(method, stack.url + path, headers=h, timeout=60, **kw)


def e2b_error(r, status):
    assert r.status_code == status, (r.status_code, r.text[:300])
    body = r.json()
    assert set(body) == {"code", "message"} and body["code"] == status, body
    return body["message"]


@pytest.mark.parametrize("method,path", [("GET", "/v2/sandboxes"), ("POST", "/sandboxes"),
                                         # a fixed id: xdist workers must collect the same names
                                         ("DELETE", "/sandboxes/6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f")])
def test_wrong_key_is_401_in_e2b_shape(stack, method, path):
    for key in (None, "e2b_0123", stack.api_key + "x", "e2b_e2b_" + stack.api_key):
        msg = e2b_error(e2b(stack, method, path, key=key, json={} if method == "POST" else None), 401)
        assert "X-API-KEY: e2b_<key>" in msg


def test_a_refused_create_reads_no_body_and_makes_nothing(stack):
    before = len(stack.live_containers())
    r = e2b(stack, "POST", "/sandboxes", key="e2b_00", data=b"x" * (8 * 1024 * 1024),
            headers={"Content-Type": "application/json"})
    e2b_error(r, 401)
    assert len(stack.live_containers()) == before


def test_key_with_and_without_prefix(stack):
    for key in ("e2b", "bare"):
        r = e2b(stack, "GET", "/v2/sandboxes", key=key)
        assert r.status_code == 200 and isinstance(r.json(), list), r.text[:300]
    # the native routes keep their own key and shape
    r = requests.get(stack.url + "/sandbox", headers={"X-API-Key": f"e2b_{stack.api_key}"}, timeout=30)
    assert r.status_code == 401 and r.json()["code"] == "unauthorized"


def test_create_get_kill_raw(stack, api):
    r = e2b(stack, "POST", "/sandboxes", json={"templateID": "base", "timeout": 60, "metadata": {"k": "v"},
                                                "secure": True, "someFutureField": {"x": 1}})
    assert r.status_code == 201, r.text[:300]
    body = r.json()
    sid = body["sandboxID"]
    api.created.append(sid)
    assert body["templateID"] == "base" and body["envdVersion"] == "0.5.6" and body["clientID"]
    # the same sandbox, natively
    native = api.get(sid).json()
    assert native["metadata"] == {"k": "v"} and native["image"] == nbtest.IMAGE
    r = e2b(stack, "GET", f"/sandboxes/{sid}")
    assert r.status_code == 200 and r.json()["endAt"].endswith("Z")
    assert e2b(stack, "DELETE", f"/sandboxes/{sid}").status_code == 204
    assert sid in e2b_error(e2b(stack, "DELETE", f"/sandboxes/{sid}"), 404)
    assert api.get(sid).status_code == 404


@pytest.mark.parametrize("body,status", [
    ({"templateID": 7}, 400),
    ({"timeout": "60"}, 400),
    ({"timeout": 0}, 400),
    ({"timeout": MAX_TTL + 1}, 400),
    ({"metadata": {"k": 1}}, 400),
    ({"envVars": {"1BAD": "x"}}, 400),
    ({"templateID": "nope"}, 404),
    ({"autoPause": True}, 501),
])
def test_bad_create_changes_nothing(stack, body, status):
    before = len(stack.live_containers())
    e2b_error(e2b(stack, "POST", "/sandboxes", json=body), status)
    e2b_error(e2b(stack, "POST", "/sandboxes", data=b"{not json",
                  headers={"Content-Type": "application/json"}), 400)
    assert len(stack.live_containers()) == before


def test_list_states_as_the_sdk_joins_them(stack, api):
    sid = api.create()
    for q in ("state=running,paused", "state=running%2Cpaused", "state=running"):
        r = e2b(stack, "GET", "/v2/sandboxes?" + q)
        assert r.status_code == 200 and sid in [s["sandboxID"] for s in r.json()], (q, r.text[:300])
    r = e2b(stack, "GET", "/v2/sandboxes?state=paused")
    assert sid not in [s["sandboxID"] for s in r.json()]


def test_bad_list_queries(stack):
    for q in ("state=sleeping", "limit=0", "limit=101", "limit=x", "order=up", "startedAfter=yesterday",
              "nextToken=abc"):
        e2b_error(e2b(stack, "GET", "/v2/sandboxes?" + q), 400)


def test_ids_that_are_not_ours_are_404(stack):
    for path in ("/sandboxes/i3b7ktq1xk1z0c4l9mr8s", "/sandboxes/%2F", "/sandboxes/" + "a" * 300,
                 "/sandboxes/" + nbtest.random_uuid().upper()):
        e2b_error(e2b(stack, "GET", path), 404)
    e2b_error(e2b(stack, "POST", "/sandboxes/nope/timeout", json={"timeout": 5}), 404)


def test_unimplemented_is_501_in_e2b_shape(stack, api):
    sid = api.create()
    for method, path in (("GET", f"/sandboxes/{sid}/metrics"), ("POST", f"/sandboxes/{sid}/snapshots"),
                         ("GET", f"/v2/sandboxes/{sid}/logs")):
        r = e2b(stack, method, path, json={} if method == "POST" else None)
        assert r.status_code in (404, 501), (path, r.status_code)
        e2b_error(r, r.status_code)
    e2b_error(e2b(stack, "PUT", f"/sandboxes/{sid}"), 405)
    e2b_error(e2b(stack, "GET", "/sandboxes/x/y/z"), 404)


def test_data_plane_routes_on_the_sandbox_headers(stack, api):
    sid = api.create()
    dp = {"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "49983"}
    r = e2b(stack, "GET", "/health", key=None, headers=dp)
    assert r.status_code == 204, r.text[:300]
    for other in (nbtest.random_uuid(), "not-an-id"):
        e2b_error(e2b(stack, "GET", "/health", key=None, headers={**dp, "E2b-Sandbox-Id": other}), 502)
    # not served yet: E2B's shape, never HTML
    r = e2b(stack, "POST", "/filesystem.Filesystem/WatchDir", key=None, data=b"\0\0\0\0\2{}",
            headers={**dp, "Content-Type": "application/connect+json"})
    assert connect_stream(r) == ([], {"error": {"code": "unimplemented", "message": ANY}})
    r = e2b(stack, "POST", "/process.Process/Update", key=None, json={}, headers=dp)
    assert r.status_code == 501 and r.json()["code"] == "unimplemented"
    api.delete(sid)
    e2b_error(e2b(stack, "GET", "/health", key=None, headers=dp), 502)


def test_pause_and_resume_raw(stack, api):
    sid = api.create()
    assert e2b(stack, "POST", f"/sandboxes/{sid}/pause", json={"memory": True}).status_code == 204
    e2b_error(e2b(stack, "POST", f"/sandboxes/{sid}/pause", json={}), 409)
    assert api.get(sid).json()["state"] == "paused"
    r = e2b(stack, "POST", f"/sandboxes/{sid}/resume", json={"timeout": 120})
    assert r.status_code == 201 and r.json()["sandboxID"] == sid, r.text[:300]
    e2b_error(e2b(stack, "POST", f"/sandboxes/{sid}/resume", json={}), 409)
    assert api.get(sid).json()["state"] == "running"
    r = e2b(stack, "POST", f"/sandboxes/{sid}/connect", json={"timeout": 30})
    assert r.status_code == 200
    assert api.get(sid).json()["ttl_remaining"] > 100  # connect did not shorten it
    # the timeout is required on connect and timeout
    e2b_error(e2b(stack, "POST", f"/sandboxes/{sid}/connect", json={}), 400)
    e2b_error(e2b(stack, "POST", f"/sandboxes/{sid}/timeout", json={}), 400)


# ------------------------------------------------ Connect-RPC, raw

class _Any:
    def __eq__(self, other):
        return isinstance(other, str) and other != ""


ANY = _Any()


def envelope(msg, flags=0):
    body = json.dumps(msg).encode() if not isinstance(msg, bytes) else msg
    return bytes([flags]) + len(body).to_bytes(4, "big") + body


def connect_stream(r):
    """A Connect stream's messages and its end-of-stream message."""
    assert r.status_code == 200, (r.status_code, r.text[:300])
    assert r.headers["Content-Type"] == "application/connect+json"
    data, msgs = r.content, []
    while data:
        flags, n = data[0], int.from_bytes(data[1:5], "big")
        msg = json.loads(data[5:5 + n])
        data = data[5 + n:]
        if flags & 2:
            assert not data, "bytes after the end of the stream"
            return msgs, msg
        msgs.append(msg)
    raise AssertionError("no end-of-stream message")


@pytest.fixture
def envd(stack, api):
    """A sandbox made through E2B's create, and a call on its data plane with its token."""
    r = e2b(stack, "POST", "/sandboxes", json={"templateID": "base", "timeout": 120})
    assert r.status_code == 201, r.text[:300]
    sbx = r.json()
    api.created.append(sbx["sandboxID"])
    assert len(sbx["envdAccessToken"]) == 64

    def call(proc, msg=None, token=sbx["envdAccessToken"], stream=False, raw=None, headers=None):
        h = {"E2b-Sandbox-Id": sbx["sandboxID"], "E2b-Sandbox-Port": "49983", "Connect-Protocol-Version": "1",
             "Content-Type": "application/connect+json" if stream else "application/json", **(headers or {})}
        if token is not None:
            h["X-Access-Token"] = token
        body = raw if raw is not None else envelope(msg or {}) if stream else json.dumps(msg or {})
        return requests.post(f"{stack.url}/{proc}", headers=h, data=body, timeout=60)
    call.sandbox = sbx
    return call


def test_start_stream_events(envd):
    r = envd("process.Process/Start", {"process": {"cmd": "/bin/sh", "args": ["-c", "printf hi; printf err >&2; exit 2"]},
                                         "stdin": False}, stream=True)
    msgs, end = connect_stream(r)
    assert end == {}
    events = [m["event"] for m in msgs if "keepalive" not in m["event"]]
    assert set(events[0]) == {"start"} and events[0]["start"]["pid"] > 0
    out = b"".join(base64.b64decode(e["data"]["stdout"]) for e in events if "stdout" in e.get("data", {}))
    err = b"".join(base64.b64decode(e["data"]["stderr"]) for e in events if "stderr" in e.get("data", {}))
    assert (out, err) == (b"hi", b"err")
    assert events[-1] == {"end": {"exitCode": 2, "exited": True, "status": "exit status 2", "error": "exit status 2"}}


def test_connect_errors_are_connects(stack, envd):
    # unary: {"code": "<connect code>", "message"} with Connect's status
    r = envd("process.Process/SendSignal", {"process": {"pid": 999999}, "signal": "SIGNAL_SIGKILL"})
    assert (r.status_code, r.json()) == (404, {"code": "not_found", "message": "process with pid 999999 not found"})
    r = envd("process.Process/SendSignal", {"process": {"pid": 1}, "signal": "SIGNAL_SIGHUP"})
    assert (r.status_code, r.json()["code"]) == (400, "invalid_argument")
    r = envd("process.Process/SendInput", {"process": {"pid": "x"}})
    assert (r.status_code, r.json()["code"]) == (400, "invalid_argument")
    r = envd("process.Process/List", raw=b"[1]")
    assert (r.status_code, r.json()["code"]) == (400, "invalid_argument")
    # streaming: 200, and the error in the end-of-stream message
    r = envd("process.Process/Connect", {"process": {"pid": 999999}}, stream=True)
    assert connect_stream(r) == ([], {"error": {"code": "not_found", "message": "process with pid 999999 not found"}})
    for raw in (b"", b"\0\0\0\0\x09{}", envelope({}, flags=2), envelope(b"not json"), envelope([1])):
        msgs, end = connect_stream(envd("process.Process/Start", raw=raw, stream=True))
        assert msgs == [] and end["error"]["code"] == "invalid_argument", (raw, end)
    msgs, end = connect_stream(envd("process.Process/Start", raw=envelope({}, flags=1), stream=True))
    assert end["error"]["code"] == "unimplemented"
    msgs, end = connect_stream(envd("process.Process/Start", {"process": {"cmd": ""}}, stream=True))
    assert end["error"]["code"] == "invalid_argument"
    msgs, end = connect_stream(envd("process.Process/Start", {"process": {"cmd": "true", "envs": {"1X": "y"}}},
                                    stream=True))
    assert end["error"]["code"] == "invalid_argument"
    # a procedure is POST only
    r = requests.get(f"{stack.url}/process.Process/List", timeout=30,
                     headers={"E2b-Sandbox-Id": envd.sandbox["sandboxID"], "E2b-Sandbox-Port": "49983"})
    assert (r.status_code, r.json()["code"]) == (501, "unimplemented")
    # a unary call as a stream, and the other way round
    r = envd("process.Process/List", stream=True)
    assert connect_stream(r)[1]["error"]["code"] == "invalid_argument"
    r = envd("process.Process/Start", {"process": {"cmd": "true"}})
    assert r.status_code == 400 and r.json()["code"] == "invalid_argument"


def test_access_token_is_per_sandbox(stack, envd, api):
    for token in (None, "", "0" * 64, envd.sandbox["envdAccessToken"][:-1],
                  envd.sandbox["envdAccessToken"].upper()):
        r = envd("process.Process/List", token=token)
        assert (r.status_code, r.json()["code"]) == (401, "unauthenticated"), token
        msgs, end = connect_stream(envd("process.Process/Start", {"process": {"cmd": "true"}}, token=token,
                                        stream=True))
        assert end["error"]["code"] == "unauthenticated"
    # another sandbox's token opens only that one
    other = e2b(stack, "POST", "/sandboxes", json={"timeout": 60}).json()
    api.created.append(other["sandboxID"])
    assert other["envdAccessToken"] != envd.sandbox["envdAccessToken"]
    assert envd("process.Process/List", token=other["envdAccessToken"]).status_code == 401
    # connect answers the same token
    r = e2b(stack, "POST", f"/sandboxes/{envd.sandbox['sandboxID']}/connect", json={"timeout": 60})
    assert r.json()["envdAccessToken"] == envd.sandbox["envdAccessToken"]
    assert envd("process.Process/List").json() == {"processes": []}


def test_native_and_e2b_see_the_same_processes(envd, api):
    sid = envd.sandbox["sandboxID"]
    r = api.exec_raw(sid, "sleep 30", background=True)
    assert r.status_code == 201, r.text[:300]
    pid = r.json()["pid"]
    procs = envd("process.Process/List").json()["processes"]
    assert [p["pid"] for p in procs] == [pid]
    assert envd("process.Process/SendSignal", {"process": {"pid": pid}, "signal": 15}).json() == {}
    # the agent shows it exited once it reaped it: a moment after the signal
    def ended():
        g = api.request("GET", f"/sandbox/{sid}/processes/{pid}").json()
        return None if g["running"] else g
    got = nbtest.wait_until(ended, what=f"process {pid} to end")
    assert got["signal"] == 15, got


def test_stream_sends_keepalives(envd):
    r = envd("process.Process/Start", {"process": {"cmd": "sleep", "args": ["2.5"]}, "stdin": False}, stream=True,
             headers={"Keepalive-Ping-Interval": "1"})
    msgs, end = connect_stream(r)
    kinds = [next(iter(m["event"])) for m in msgs]
    assert kinds[0] == "start" and kinds[-1] == "end" and kinds.count("keepalive") >= 2, kinds
    assert end == {}


def test_stream_deadline(envd):
    r = envd("process.Process/Start", {"process": {"cmd": "sleep", "args": ["30"]}}, stream=True,
             headers={"Connect-Timeout-Ms": "800"})
    msgs, end = connect_stream(r)
    assert end["error"]["code"] == "deadline_exceeded"
    assert r.elapsed.total_seconds() < 5
