"""
The E2B facade's control plane (docs/E2B.md) against the live stack.

Two parts:
- the official E2B SDK (npm e2b, pinned in tests/e2b/package.json; the
  newest, tests/e2b-latest/package.json, runs control, commands, data,
  fs, pty, watch, user and root too: their tests are [pinned] and
  [latest]) runs
  tests/e2b/control.mjs with nothing but E2B_API_URL, E2B_SANDBOX_URL (the
  stack's nginx) and E2B_API_KEY=e2b_<key>: create with metadata, envs and
  a timeout, getInfo, setTimeout both ways, connect (never shortens;
  resumes), list with its filters, order and pages, pause, kill, the
  errors it maps. Once per module; one test per behaviour, on its summary;
- raw HTTP on the same paths: E2B's error shape {"code", "message"} from
  the app and from nginx, the key with and without "e2b_", what is not
  implemented, the data plane routed on E2b-Sandbox-Id.

npm installs the SDKs into tests/e2b/node_modules and
tests/e2b-latest/node_modules when they are missing.
"""

import base64
import hashlib
import hmac
import json
import os
import secrets
import shutil
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import NamedTuple

import pytest
import requests

import nbtest
from conftest import _start, _stop

E2B_DIR = nbtest.REPO / "tests" / "e2b"
# The newest SDKs on npm (tests/e2b-latest/package.json) run the same scripts.
E2B_LATEST_DIR = nbtest.REPO / "tests" / "e2b-latest"
CONTROL_JS = E2B_DIR / "control.mjs"
SDK_TIMEOUT = 300
MAX_TTL = int(nbtest.BASE_CONF["max_ttl"])


class Sdk(NamedTuple):
    node: str
    dir: Path  # the scripts and the node_modules they import from


def _sdk(pkg_dir):
    node = nbtest.node_package(pkg_dir, "e2b")
    nbtest.node_package(pkg_dir, "@e2b/code-interpreter")
    return node


@pytest.fixture(scope="module")
def e2b_sdk():
    """The pinned SDKs (tests/e2b/package.json), run from tests/e2b."""
    return Sdk(_sdk(E2B_DIR), E2B_DIR)


@pytest.fixture(scope="module")
def e2b_latest(tmp_path_factory):
    """The newest SDKs (tests/e2b-latest/package.json) with the same scripts:
    ESM resolves "e2b" from the script's own directory (NODE_PATH does not
    apply), so tests/e2b/*.mjs are copied into a scratch directory whose
    node_modules is tests/e2b-latest's."""
    node = _sdk(E2B_LATEST_DIR)
    d = tmp_path_factory.mktemp("e2b-latest")
    for f in E2B_DIR.glob("*.mjs"):
        shutil.copy(f, d / f.name)
    (d / "node_modules").symlink_to(E2B_LATEST_DIR / "node_modules", target_is_directory=True)
    return Sdk(node, d)


@pytest.fixture(scope="module", params=["pinned", "latest"])
def sdk(request):
    """Both SDK pins, for every script but domain.mjs (a stack of its own
    with TLS certificates, on the pinned SDK only)."""
    return request.getfixturevalue("e2b_sdk" if request.param == "pinned" else "e2b_latest")


# The module fixtures that run one SDK script (per pin): the tests on one
# script's summary share an xdist group, so that it runs once (conftest.py).
SCRIPT_FIXTURES = ("run", "commands", "ptyrun", "data", "modern", "charts", "ctxrun", "fsrun",
                   "watchrun", "userrun", "rootrun")


def xdist_group_of(item):
    used = [f for f in SCRIPT_FIXTURES if f in item.fixturenames]
    if not used:
        return None
    return f"e2b-{'+'.join(used)}-{item.callspec.params['sdk']}"


def sdk_script(stack, sdk, script, prefix, code=False, env_over=None, args_more=()):
    """Run <script> of sdk.dir (tests/e2b/) once against the stack, with
    nothing but the three E2B variables set (env_over changes them: a None
    value unsets one), and a unique --tag (and --code when asked and the
    nanobox-python image is there, then args_more): the summary its last
    line prints. The caller deletes the sandboxes listed in its "created"."""
    tag = prefix + secrets.token_hex(4)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("E2B_", "NANOBOX_"))}
    env.update(E2B_API_URL=stack.url, E2B_SANDBOX_URL=stack.url, E2B_API_KEY=f"e2b_{stack.api_key}")
    for k, v in (env_over or {}).items():
        env.pop(k, None) if v is None else env.__setitem__(k, v)
    args = ["--tag", tag] + (["--code"] if code and nbtest.image_present(nbtest.PYTHON_IMAGE) else [])
    args += list(args_more)
    r = subprocess.run([sdk.node, str(sdk.dir / script), *args], cwd=sdk.dir, env=env, capture_output=True,
                       text=True, timeout=SDK_TIMEOUT)
    lines = [line for line in r.stdout.splitlines() if line.strip()]
    assert r.returncode == 0 and lines, (f"{script} -> {r.returncode}\nstdout: {r.stdout[-3000:]}\n"
                                         f"stderr: {r.stderr[-5000:]}")
    summary = json.loads(lines[-1])
    # where the script's time went (steps.mjs): shown with a failing test, or with -s
    slow = sorted(summary.get("ms", {}).items(), key=lambda kv: -kv[1])[:8]
    print(f"{script}: slowest steps (ms): {slow}")
    return summary


@pytest.fixture(scope="module")
def run(stack, sdk):
    """control.mjs once against the stack: its summary."""
    summary = sdk_script(stack, sdk, CONTROL_JS.name, "e2b-", code=True)
    yield summary
    for sid in summary["created"]:
        stack.api.delete(sid)


@pytest.fixture(scope="module")
def commands(stack, sdk):
    """commands.mjs once against the stack (sbx.commands through process.Process): its summary."""
    summary = sdk_script(stack, sdk, "commands.mjs", "e2b-")
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
    assert i["envdVersion"] == "0.6.4"
    assert i["lifecycle"] == {"onTimeout": "kill", "autoResume": False}


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


def test_create_without_timeout_is_e2bs_300_s(run):
    assert near(step(run, "createMore")["defaultEndsIn"], 300)


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


def test_on_timeout_pause_pauses_it_and_connect_resumes(run):
    """lifecycle {onTimeout: 'pause', autoResume: true}: paused at its
    timeout; connect resumes it with default_ttl (600 here), which the
    60 s it asks for does not shorten."""
    s = step(run, "onTimeoutPause")
    assert s["paused"]["state"] == "paused", s
    assert s["paused"]["lifecycle"] == {"onTimeout": "pause", "autoResume": True}, s
    assert s["resumed"]["state"] == "running", s
    assert near(s["resumed"]["endsIn"], int(nbtest.BASE_CONF["default_ttl"])), s


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
    e = thrown(run, "metricsUnknown")
    assert e["name"] == "SandboxNotFoundError", e
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
    """A sandbox killed under a running command: wait() throws the SDK's TimeoutError saying
    the sandbox was killed, as E2B's SDK test (sandboxKilledDuringRun) expects."""
    w = step(commands, "killedSandbox")["waited"]
    assert "returned" not in w, w
    assert w["name"] == "TimeoutError", w
    assert "sandbox was killed or reached its end of life" in w["message"], w
    assert thrown(commands, "runOnKilledSandbox")["name"] in ("TimeoutError", "SandboxNotFoundError")


# ------------------------------------------- sbx.pty through the SDK

@pytest.fixture(scope="module")
def ptyrun(stack, sdk):
    """pty.mjs once against the stack (sbx.pty over nanobox's PTY sessions): its summary."""
    summary = sdk_script(stack, sdk, "pty.mjs", "e2bp-")
    yield summary
    for sid in summary["created"]:
        stack.api.delete(sid)


def test_pty_types_and_answers_in_a_login_shell(ptyrun):
    s = step(ptyrun, "echo")
    assert s["seen"], json.dumps(s)
    # TERM from the SDK, envs and cwd applied, a real terminal
    assert s["line"].split()[1:4] == ["xterm-256color", "yes", "/tmp"], s
    assert s["line"].split()[4].startswith("/dev/pts/"), s
    assert s["listed"] is True  # a terminal is listed among the commands, as envd lists it


def test_pty_resize_reaches_the_terminal(ptyrun):
    s = step(ptyrun, "echo")
    assert (s["size"], s["resized"]) == (True, True), s


def test_pty_exit_code_is_wait(ptyrun):
    assert step(ptyrun, "echo")["waited"] == {"name": "CommandExitError",
                                               "message": ANY, "exitCode": 3}
    assert step(ptyrun, "exitZero")["waited"] == {"exitCode": 0}


def test_pty_kill_ends_it(ptyrun):
    s = step(ptyrun, "kill")
    assert (s["ready"], s["killed"], s["killedAgain"]) == (True, True, False), s
    assert s["waited"].get("exitCode") == -1, s  # killed by a signal, as envd says


def test_pty_ctrl_c_interrupts_the_foreground_job(ptyrun):
    s = step(ptyrun, "interrupt")
    assert (s["back"], s["after"]) == (True, False), s


def test_pty_outlives_its_handle_and_connect_streams_it_again(ptyrun):
    s = step(ptyrun, "reconnect")
    assert (s["hi"], s["samePid"], s["connected"]) == (True, True, True), s
    assert (s["sawBefore"], s["oldHandleSawAfter"]) == (False, False), s
    assert (s["listed"], s["killed"]) == (True, True), s
    assert s["waited"].get("exitCode") == -1, s  # the connected handle sees the kill


def test_pty_unknown_pid(ptyrun):
    assert thrown(ptyrun, "sendInputUnknown")["name"] == "NotFoundError"
    assert thrown(ptyrun, "resizeUnknown")["name"] == "NotFoundError"
    assert thrown(ptyrun, "connectUnknown")["name"] == "NotFoundError"
    assert step(ptyrun, "killUnknown") == {"killed": False}


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
    assert body["templateID"] == "base" and body["envdVersion"] == "0.6.4" and body["clientID"]
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
    ({"autoPause": "yes"}, 400),
    ({"autoResume": True}, 400),
])
@pytest.mark.parametrize("path", ["/sandboxes", "/v2/sandboxes"])
def test_bad_create_changes_nothing(stack, body, status, path):
    before = len(stack.live_containers())
    e2b_error(e2b(stack, "POST", path, json=body), status)
    e2b_error(e2b(stack, "POST", path, data=b"{not json", headers={"Content-Type": "application/json"}), 400)
    assert len(stack.live_containers()) == before


def test_v2_create_and_connect_raw(stack, api):
    """e2b 2.50's POST /v2/sandboxes and /v2/sandboxes/{id}/connect: no
    "secure", and no timeout unless the caller set one (E2B's 300 s then)."""
    r = e2b(stack, "POST", "/v2/sandboxes", json={"templateID": "base", "metadata": {"v": "2"}})
    assert r.status_code == 201, r.text[:300]
    body = r.json()
    sid = body["sandboxID"]
    api.created.append(sid)
    assert body["envdAccessToken"] and body["envdVersion"] == "0.6.4"
    native = api.get(sid).json()
    assert native["metadata"] == {"v": "2"} and near(native["ttl_remaining"], 300)
    # connect: no body at all, or no timeout, is 300 s; it never shortens
    r = e2b(stack, "POST", f"/v2/sandboxes/{sid}/connect")
    assert r.status_code == 200 and r.json()["envdAccessToken"] == body["envdAccessToken"], r.text[:300]
    assert e2b(stack, "POST", f"/v2/sandboxes/{sid}/connect", json={"timeout": 600}).status_code == 200
    assert near(api.get(sid).json()["ttl_remaining"], 600)
    assert e2b(stack, "POST", f"/v2/sandboxes/{sid}/connect", json={}).status_code == 200
    assert near(api.get(sid).json()["ttl_remaining"], 600)
    # {"memory": false} (onResume: 'reboot') is nothing on a running sandbox ...
    assert e2b(stack, "POST", f"/v2/sandboxes/{sid}/connect", json={"memory": False}).status_code == 200
    # ... and what nanobox cannot do on a paused one: it stays paused
    assert e2b(stack, "POST", f"/sandboxes/{sid}/pause").status_code == 204
    assert "reboot" in e2b_error(e2b(stack, "POST", f"/v2/sandboxes/{sid}/connect", json={"memory": False}), 501)
    assert api.get(sid).json()["state"] == "paused"
    for bad in ({"timeout": 0}, {"timeout": "9"}, {"memory": "no"}):
        e2b_error(e2b(stack, "POST", f"/v2/sandboxes/{sid}/connect", json=bad), 400)
    assert api.get(sid).json()["state"] == "paused"
    r = e2b(stack, "POST", f"/v2/sandboxes/{sid}/connect", json={"memory": True, "timeout": 60})
    assert r.status_code == 201 and api.get(sid).json()["state"] == "running", r.text[:300]
    e2b_error(e2b(stack, "POST", f"/v2/sandboxes/{nbtest.random_uuid()}/connect"), 404)
    e2b_error(e2b(stack, "GET", f"/v2/sandboxes/{sid}/connect"), 405)
    # the v2 tree has no sandbox of its own
    e2b_error(e2b(stack, "GET", f"/v2/sandboxes/{sid}"), 404)


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
    for method, path in (("GET", f"/sandboxes/{sid}/logs"), ("POST", f"/sandboxes/{sid}/refreshes"),
                         ("GET", f"/v2/sandboxes/{sid}/logs")):
        e2b_error(e2b(stack, method, path, json={} if method == "POST" else None), 501)
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
    r = e2b(stack, "POST", "/filesystem.Filesystem/Nope", key=None, data=b"\0\0\0\0\2{}",
            headers={**dp, "Content-Type": "application/connect+json"})
    assert connect_stream(r) == ([], {"error": {"code": "unimplemented", "message": ANY}})
    r = e2b(stack, "POST", "/process.Process/StreamInput", key=None, json={}, headers=dp)
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

    def call(proc, msg=None, token=sbx["envdAccessToken"], stream=False, raw=None, headers=None,
             early=False):
        """early: return at the response's headers, its body still to come (requests' stream=True)."""
        h = {"E2b-Sandbox-Id": sbx["sandboxID"], "E2b-Sandbox-Port": "49983", "Connect-Protocol-Version": "1",
             "Content-Type": "application/connect+json" if stream else "application/json", **(headers or {})}
        if token is not None:
            h["X-Access-Token"] = token
        body = raw if raw is not None else envelope(msg or {}) if stream else json.dumps(msg or {})
        return requests.post(f"{stack.url}/{proc}", headers=h, data=body, timeout=60, stream=early)
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



def test_pty_start_update_and_input_raw(envd):
    r = envd("process.Process/Start", {"process": {"cmd": "/bin/sh"}, "pty": {"size": {"cols": 0, "rows": 5}}},
             stream=True)
    assert connect_stream(r)[1]["error"]["code"] == "invalid_argument"
    for bad in ({"process": {"pid": 5}},                                    # no pty
                {"process": {"pid": 5}, "pty": {"size": {"cols": 80}}},      # no rows
                {"process": {"pid": 5}, "pty": {"size": {"cols": "x", "rows": 5}}},
                {"process": {"pid": 5}, "pty": {"size": {"cols": 1001, "rows": 5}}},
                {"process": {"pid": 5}, "pty": "80x24"},
                {"pty": {"size": {"cols": 80, "rows": 24}}}):                # no process
        r = envd("process.Process/Update", bad)
        assert (r.status_code, r.json()["code"]) == (400, "invalid_argument"), (bad, r.text)
    r = envd("process.Process/Update", {"process": {"pid": 999999}, "pty": {"size": {"cols": 80, "rows": 24}}})
    assert (r.status_code, r.json()["code"]) == (404, "not_found")
    r = envd("process.Process/SendInput", {"process": {"pid": 999999}, "input": {"pty": "!!"}})
    assert (r.status_code, r.json()["code"]) == (400, "invalid_argument")
    # a command on pipes is no terminal: no window to set
    r = envd("process.Process/Start", {"process": {"cmd": "/bin/sh", "args": ["-c", "exit 0"]}}, stream=True)
    pid = connect_stream(r)[0][0]["event"]["start"]["pid"]
    r = envd("process.Process/Update", {"process": {"pid": pid}, "pty": {"size": {"cols": 80, "rows": 24}}})
    assert (r.status_code, r.json()["code"]) == (404, "not_found")

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
# ------------------------------------------- the data plane through the SDKs

DATA_JS = E2B_DIR / "data.mjs"


@pytest.fixture(scope="module")
def data(stack, sdk):
    """data.mjs once against the stack (files; the code interpreter when its image is there)."""
    summary = sdk_script(stack, sdk, DATA_JS.name, "e2bd-", code=True)
    yield summary
    for sid in summary["created"]:
        stack.api.delete(sid)


def needs_code(data):
    if "codeSandbox" not in data:
        pytest.skip(f"{nbtest.PYTHON_IMAGE} not built")


def test_files_write_and_read_1mib_bytes_exact(data, stack):
    w = step(data, "writeBinary")["entry"]
    assert w == {"name": "blob.bin", "type": "file", "path": "/home/user/bin/blob.bin"}, w
    assert step(data, "readBinary") == {"size": 1 << 20, "sha": data["blobSha"]}
    assert step(data, "readBinaryAbsolute") == {"size": 1 << 20, "sha": data["blobSha"]}
    # the file nanobox sees is the same (native API, same engine)
    r = stack.api.request("GET", f"/sandbox/{data['filesSandbox']}/files?path=/home/user/bin/blob.bin")
    assert r.status_code == 200 and hashlib.sha256(r.content).hexdigest() == data["blobSha"]


def test_files_text_empty_and_overwrite(data):
    t = step(data, "textRoundTrip")
    assert t["text"] == "h\u00e9llo\nw\u00f6rld\n"
    assert t["entry"]["path"] == "/tmp/hello dir/h\u00e9llo.txt" and t["entry"]["name"] == "h\u00e9llo.txt"
    assert step(data, "emptyFile") == {"entry": {"name": "empty.txt", "type": "file",
                                                 "path": "/home/user/empty.txt"}, "text": "", "bytes": 0}
    assert step(data, "overwrite") == {"text": "second"}


def test_files_write_several_in_one_upload(data):
    m = step(data, "writeMany")
    assert [e["path"] for e in m["entries"]] == ["/home/user/many/a.txt", "/tmp/many/deep/b.txt",
                                                  "/home/user/many/c.bin"]
    assert [e["name"] for e in m["entries"]] == ["a.txt", "b.txt", "c.bin"]
    assert m["back"] == ["A", "BB"] and m["c"] == [0, 255, 1, 254]


def test_files_errors_are_the_sdk_errors(data):
    e = thrown(data, "readMissing")
    assert e["name"] == "FileNotFoundError" and "missing.txt" in e["message"], e
    assert thrown(data, "readDirectory")["name"] == "InvalidArgumentError"
    assert thrown(data, "readBadPath")["name"] == "InvalidArgumentError"


def test_run_code_keeps_state(data):
    needs_code(data)
    s = step(data, "state")
    assert s["text"] == "2" and s["error"] is None, s
    assert s["results"][0]["isMainResult"] is True
    assert isinstance(s["executionCount"], int) and s["executionCount"] >= 2
    assert step(data, "stringResult")["text"] == "abc"


def test_run_code_streams_stdout_and_stderr(data):
    needs_code(data)
    s = step(data, "streaming")
    outs = [x for x in s["seen"] if x["kind"] == "stdout"]
    assert [x["line"] for x in outs] == ["out 0\n", "out 1\n", "out 2\n"], s
    assert all(x["error"] is False for x in outs)
    assert [x["line"] for x in s["seen"] if x["kind"] == "stderr"] == ["err\n"]
    # the callbacks came as the code ran, not all at its end
    assert outs[1]["at"] - outs[0]["at"] >= 250, s
    assert s["stdout"] == ["out 0\n", "out 1\n", "out 2\n"] and s["stderr"] == ["err\n"]


def test_run_code_error(data):
    needs_code(data)
    s = step(data, "error")
    assert s["error"]["name"] == "ZeroDivisionError" and s["error"]["value"] == "division by zero"
    assert "ZeroDivisionError" in s["error"]["traceback"] and "f()" in s["error"]["traceback"]
    assert s["callback"] == "ZeroDivisionError" and s["results"] == []


def test_run_code_rich_results(data):
    needs_code(data)
    p = step(data, "png")
    assert p["pngMagic"] == "89504e470d0a1a0a", p
    assert p["callbackFormats"] == [["png"]], p  # onResult, once (the SDK lists no "text")
    h = step(data, "pandasHtml")
    assert "<table" in h["html"] and h["isMainResult"] is True and "html" in h["formats"], h
    assert "a" in h["text"] and "x" in h["text"]


def test_run_code_env_vars_per_run(data):
    needs_code(data)
    assert step(data, "envVars")["text"] == "v1"
    assert step(data, "envVarsDoNotLeak")["text"] == "unset"


def test_run_code_javascript_and_bash(data):
    needs_code(data)
    assert step(data, "javascript")["text"] == "42"
    assert step(data, "js")["stdout"] == ["from js\n"]
    b = step(data, "bash")
    assert "".join(b["stdout"]).startswith("hi from") and "".join(b["stderr"]) == "oops\n", b
    e = thrown(data, "unknownLanguage")
    assert e["name"] == "SandboxError" and e["message"].startswith("400"), e


@pytest.fixture(scope="module")
def modern(stack, sdk):
    """modern.mjs once against the stack: typescript, ES modules, top-level await."""
    if not nbtest.image_present(nbtest.PYTHON_IMAGE):
        pytest.skip(f"{nbtest.PYTHON_IMAGE} not built")
    summary = sdk_script(stack, sdk, "modern.mjs", "e2bm-", code=True)
    yield summary
    for sid in summary["created"]:
        stack.api.delete(sid)


def test_run_code_es_modules_and_top_level_await(modern):
    # E2B's own tests (defaultKernels.test.ts), word for word
    assert step(modern, "esmImport")["stdout"] == ["function\n"]
    assert step(modern, "topLevelAwait")["text"] == "Hello World!"
    d = step(modern, "jsDeclarations")
    assert d["first"]["error"] is None, d
    assert d["next"]["text"] == "42" and d["dyn"]["text"] == "41", d


def test_run_code_typescript(modern):
    assert step(modern, "tsKernel")["stdout"] == ["Hello World!\n"]
    t = step(modern, "tsContext")
    assert t["language"] == "typescript" and t["first"]["error"] is None, t
    assert t["next"]["text"] == "42" and t["mod"]["text"] == "a/b", t
    assert t["bad"]["error"]["name"] == "SyntaxError", t
    assert step(modern, "tsDefault")["text"] == "42"


def test_contexts_create_list_restart_remove(data):
    needs_code(data)
    ctx = step(data, "createContext")
    assert set(ctx) == {"id", "language", "cwd"} and ctx["language"] == "python" and ctx["cwd"] == "/tmp"
    s = step(data, "contextState")
    assert s["inCtx"]["text"] == "5" and s["cwd"]["text"] == "/tmp"
    assert s["outside"]["error"]["name"] == "NameError"  # the default context has no z
    listed = step(data, "listContexts")
    ids = [c["id"] for c in listed]
    assert ctx["id"] in ids and "python" in ids and "javascript" in ids, listed
    assert all(set(c) == {"id", "language", "cwd"} for c in listed)
    r = step(data, "restartContext")
    assert r["error"]["name"] == "NameError" and r["error"]["value"] == "name 'z' is not defined", r
    assert step(data, "restartDefault")["error"]["name"] == "NameError"
    j = step(data, "jsContext")
    assert j["ctx"]["language"] == "javascript" and j["e"]["text"] == "42"
    assert ctx["id"] not in step(data, "removeContext")["ids"]
    assert thrown(data, "runInRemovedContext")["name"] == "NotFoundError"
    assert thrown(data, "removeRemovedContext")["name"] == "NotFoundError"


def test_an_aborted_run_interrupts_the_kernel(data):
    needs_code(data)
    assert thrown(data, "abort")["name"] == "TimeoutError"
    a = step(data, "afterAbort")
    assert a["text"] == "2" and a["ms"] < 10_000, a


# --------------------------- charts and DataFrames through @e2b/code-interpreter

def code_script(stack, sdk, script, prefix):
    """A script of the code interpreter once against the stack (skipped without
    its image): its summary; its sandboxes are deleted afterwards."""
    if not nbtest.image_present(nbtest.PYTHON_IMAGE):
        pytest.skip(f"{nbtest.PYTHON_IMAGE} not built")
    summary = sdk_script(stack, sdk, script, prefix)
    yield summary
    for sid in summary["created"]:
        stack.api.delete(sid)


@pytest.fixture(scope="module")
def charts(stack, sdk):
    """charts.mjs once against the stack: E2B's chart and data results."""
    yield from code_script(stack, sdk, "charts.mjs", "e2bc-")


def chart_of(charts, name):
    """The one result of step name: its chart (asserted there, with the PNG)."""
    s = step(charts, name)
    assert s["error"] is None and len(s["results"]) == 1, s
    r = s["results"][0]
    assert r["pngMagic"] == "89504e470d0a1a0a" and r["chart"] is not None, r
    return r["chart"]


def test_chart_line_with_a_datetime_axis(charts):
    c = chart_of(charts, "line")
    assert (c["type"], c["title"]) == ("line", "Plot of sin(x) and cos(x)")
    assert (c["x_label"], c["y_label"], c["x_unit"], c["y_unit"]) == \
        ("Time (s)", "Amplitude (Hz)", "s", "Hz")
    assert (c["x_scale"], c["y_scale"]) == ("datetime", "linear")
    assert c["x_ticks"] and all(isinstance(t, str) and t.startswith("20") for t in c["x_ticks"])
    assert all(isinstance(t, (int, float)) for t in c["y_ticks"])
    assert all(isinstance(t, str) for t in c["x_tick_labels"] + c["y_tick_labels"])
    assert [e["label"] for e in c["elements"]] == ["sin(x)", "cos(x)"]
    first = c["elements"][0]["points"]
    assert len(first) == 100 and first[0] == ["2023-09-01", 0] and first[99][0] == "2023-12-09"
    assert all(isinstance(x, str) and isinstance(y, (int, float)) for x, y in first)


def test_chart_bar_pie_and_box(charts):
    c = chart_of(charts, "bar")
    assert (c["type"], c["title"], c["x_label"], c["y_label"]) == \
        ("bar", "Book Sales by Authors", "Authors", "Number of Books Sold")
    assert c["x_unit"] is None and c["y_unit"] is None
    assert [(e["label"], e["group"], e["value"]) for e in c["elements"]] == \
        [(f"Author {a}", "Books Sold", v) for a, v in zip("ABCD", (100, 200, 300, 400))]
    c = chart_of(charts, "pie")
    assert (c["type"], c["title"]) == ("pie", "Will I wake up early tomorrow?")
    assert c["elements"] == [{"label": "No", "angle": 324, "radius": 1},
                             {"label": "No, in blue", "angle": 36, "radius": 1}]
    c = chart_of(charts, "box")
    assert (c["type"], c["title"], c["x_label"], c["y_label"]) == \
        ("box_and_whisker", "Exam Scores Distribution", "Class", "Score")
    e = c["elements"]
    assert [b["label"] for b in e] == ["Class A", "Class B", "Class C"]
    assert [b["outliers"] for b in e] == [[], [76], []]
    assert [b["min"] for b in e] == [78, 84, 75]
    assert [b["first_quartile"] for b in e] == [85, 84.75, 79]
    assert [b["median"] for b in e] == [88, 88, 82]
    assert [b["third_quartile"] for b in e] == [90, 90.5, 86]
    assert [b["max"] for b in e] == [92, 95, 88]


def test_chart_scatter_and_superchart(charts):
    c = chart_of(charts, "scatter")
    assert (c["type"], c["title"], c["x_label"], c["y_label"]) == ("scatter", None, "A", "B")
    assert [(e["label"], len(e["points"])) for e in c["elements"]] == [("Dataset 1", 5), ("Dataset 2", 10)]
    assert all(isinstance(v, float) for e in c["elements"] for p in e["points"] for v in p)
    c = chart_of(charts, "superchart")
    assert (c["type"], c["title"]) == ("superchart", "Multiple Charts Example")
    line, scatter = c["elements"]
    assert (line["type"], line["title"], line["x_label"], line["y_label"]) == ("line", "Sine Wave", None, None)
    assert len(line["elements"]) == 1 and len(line["elements"][0]["points"]) == 100
    assert (scatter["type"], scatter["title"], scatter["x_label"], scatter["y_label"]) == \
        ("scatter", "Scatter Plot", "X", "Y")
    assert len(scatter["elements"][0]["points"]) == 5


def test_chart_scales_and_unknown(charts):
    c = chart_of(charts, "log")
    assert (c["type"], c["x_scale"], c["y_scale"], c["y_unit"], c["x_unit"]) == \
        ("line", "linear", "log", "log scale", None)
    assert c["elements"][0]["label"] == "y = e^x" and len(c["elements"][0]["points"]) == 100
    c = chart_of(charts, "categorical")
    assert (c["type"], c["x_scale"], c["y_scale"]) == ("line", "linear", "categorical")
    c = chart_of(charts, "unknown")
    assert c == {"type": "unknown", "title": "Two Concentric Circles", "elements": []}


def test_dataframe_result_has_data(charts):
    s = step(charts, "dataframe")
    main = [r for r in s["results"] if r["isMainResult"]]
    assert len(main) == 1 and "data" in main[0]["formats"] and "html" in main[0]["formats"], s
    assert main[0]["data"] == {"a": [1, 2, 3], "when": ["2024-01-01T00:00:00", "2024-01-02T00:00:00", None]}
    assert main[0]["chart"] is None


def test_savefig_then_show_gives_a_png(charts):
    s = step(charts, "savefigShow")
    assert s["stdout"] == ["True\n"], s
    assert chart_of(charts, "savefigShow")["elements"][0]["label"] == "saved"


def test_pil_images_shown_and_saved_give_a_png(charts):
    for name in ("pilShow", "pilSave"):
        s = step(charts, name)
        assert s["error"] is None and len(s["results"]) == 1, s
        assert s["results"][0]["pngMagic"] == "89504e470d0a1a0a" and s["results"][0]["chart"] is None, s


# ------------------------------ contexts and env vars through @e2b/code-interpreter

@pytest.fixture(scope="module")
def ctxrun(stack, sdk):
    """contexts.mjs once against the stack: createCodeContext, listCodeContexts, envs."""
    yield from code_script(stack, sdk, "contexts.mjs", "e2bx-")


def test_each_create_context_is_a_new_one_listed_last_with_its_options(ctxrun):
    s = step(ctxrun, "createNoOptions")
    assert s["ctx"]["id"].startswith("ctx-") and s["ctx"]["language"] == "python", s
    assert s["last"] == s["ctx"] and s["ctx"]["cwd"] == "/home/user", s
    s = step(ctxrun, "createWithOptions")
    assert (s["ctx"]["language"], s["ctx"]["cwd"], s["cwd"]) == ("python", "/tmp", "/tmp"), s
    assert s["last"] == s["ctx"], s
    s = step(ctxrun, "createJavascript")
    assert s["ctx"]["language"] == "javascript" and s["last"] == s["ctx"] and s["value"] == "2", s
    s = step(ctxrun, "createTwo")
    assert s["a"] != s["b"] and s["ids"][-2:] == [s["a"], s["b"]], s
    assert s["ids"][:2] == ["python", "javascript"], s  # the defaults first, as E2B lists them
    assert s["inB"] == "NameError", s  # each its own state


def test_a_context_where_the_user_may_not_go_is_refused_as_bad_input(ctxrun):
    # /root is root's, and the sandbox's user is not root: a 400 (the SDK says its status), not a 500
    e = thrown(ctxrun, "createInRoot")
    assert e["name"] == "SandboxError" and e["message"].startswith("400"), e


@pytest.mark.parametrize("language", ["python", "javascript", "bash"])
def test_a_runs_envs_override_the_sandboxs_for_that_run_only(ctxrun, language):
    want = {"sandbox": "supertest", "overwrite": "overwrite", "after": "supertest",
            "perRun": "bar", "perRunAfter": "default"}
    if language == "bash":
        want = {k: v + "\n" for k, v in want.items()}
    assert step(ctxrun, f"env_{language}") == want


# ------------------------------------------------- the data plane, raw HTTP

def access_token(stack, sid):
    """The envdAccessToken create answers for sid (api_e2b.c: HMAC-SHA256 under the key)."""
    return hmac.new(stack.api_key.encode(), b"nanobox e2b envdAccessToken v1:" + sid.encode(),
                    hashlib.sha256).hexdigest()


def dp(sid, port="49983", stack=None):
    """Data-plane headers for sid, with its access token when stack is given."""
    h = {"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": port}
    if stack is not None:
        h["X-Access-Token"] = access_token(stack, sid)
    return h


def test_upload_bad_multipart_is_400_and_writes_nothing(stack, api):
    sid = api.create()
    bad = [
        ({"Content-Type": "application/octet-stream"}, b"raw"),
        ({"Content-Type": "multipart/form-data"}, b"--x\r\n"),
        ({"Content-Type": "multipart/form-data; boundary=XyZ"}, b"no delimiter here"),
        ({"Content-Type": "multipart/form-data; boundary=XyZ"},
         b"--XyZ\r\nContent-Type: text/plain\r\n\r\nw\r\n--XyZ--\r\n"),
        ({"Content-Type": "multipart/form-data; boundary=XyZ"},
         b'--XyZ\r\nContent-Disposition: form-data; name="file"; filename="w.txt"\r\n\r\ncut short'),
        ({"Content-Type": "multipart/form-data; boundary=XyZ"},
         b'--XyZ\r\nContent-Disposition: form-data; name="file"; filename="../w.txt"\r\n\r\nw\r\n--XyZ--'),
        ({"Content-Type": "multipart/form-data; boundary=XyZ"},
         b'--XyZ\r\nContent-Disposition: form-data; name="other"\r\n\r\nw\r\n--XyZ--'),
    ]
    for headers, body in bad:
        r = e2b(stack, "POST", "/files", key=None, headers={**dp(sid, stack=stack), **headers}, data=body)
        e2b_error(r, 400)
    # nothing was written: the cut-short part left no file either
    r = api.request("GET", f"/sandbox/{sid}/files?path=/workspace")
    assert [e["name"] for e in r.json()["entries"]] == [], r.text[:300]


def test_upload_raw_with_query_path_and_user(stack, api):
    sid = api.create()
    body = (b'--B\r\nContent-Disposition: form-data; name="file"\r\n\r\n\x00\r\n--\r\n--B--\r\n')
    r = e2b(stack, "POST", "/files?path=q/raw.bin&username=user", key=None,
            headers={**dp(sid, stack=stack), "Content-Type": "multipart/form-data; boundary=B"}, data=body)
    assert r.status_code == 200 and r.json() == [{"name": "raw.bin", "type": "file",
                                                   "path": "/home/user/q/raw.bin"}], r.text[:300]
    r = e2b(stack, "GET", "/files?path=q/raw.bin", key=None, headers=dp(sid, stack=stack))
    assert r.status_code == 200 and r.content == b"\x00\r\n--"
    e2b_error(e2b(stack, "GET", "/files?path=q/raw.bin&username=mallory", key=None, headers=dp(sid, stack=stack)), 400)
    e2b_error(e2b(stack, "GET", "/files", key=None, headers=dp(sid, stack=stack)), 400)


def test_upload_octet_stream_gzip_and_metadata_headers(stack, api):
    """envd >= 0.5.7's application/octet-stream upload (one file at ?path=,
    plain or Content-Encoding: gzip) and >= 0.6.2's X-Metadata-* headers,
    as the SDK sends them; what is refused writes nothing."""
    import gzip
    sid = api.create()
    h = {**dp(sid, stack=stack), "Content-Type": "application/octet-stream"}
    r = e2b(stack, "POST", "/files?path=o/a.bin", key=None, data=b"\x00raw",
            headers={**h, "X-Metadata-Note": "hi there", "X-Metadata-Owner-Id": "7"})
    assert r.status_code == 200 and r.json() == [{
        "name": "a.bin", "type": "file", "path": "/home/user/o/a.bin",
        "metadata": {"note": "hi there", "owner-id": "7"}}], r.text[:300]
    data = os.urandom(1000) * 300
    r = e2b(stack, "POST", "/files?path=o/z.bin", key=None, data=gzip.compress(data),
            headers={**h, "Content-Encoding": "gzip"})
    assert r.status_code == 200, r.text[:300]
    r = e2b(stack, "GET", "/files?path=o/z.bin", key=None, headers=dp(sid, stack=stack))
    assert r.status_code == 200 and r.content == data
    for path, extra, body, says in (
            ("/files", {}, b"x", "?path="),
            ("/files?path=o/bad", {"Content-Encoding": "gzip"}, b"not gzip at all", "not gzip"),
            ("/files?path=o/bad", {"Content-Encoding": "br"}, b"x", "not supported"),
            ("/files?path=o/bad", {"X-Metadata-" + "k" * 129: "v"}, b"x", "X-Metadata-"),
            ("/files?path=o/bad", {"X-Metadata-K": "v" * 1025}, b"x", "X-Metadata-k"),
            ("/files?path=o/bad", {f"X-Metadata-K{i}": "v" for i in range(17)}, b"x", "16 entries")):
        r = e2b(stack, "POST", path, key=None, data=body, headers={**h, **extra})
        assert says in e2b_error(r, 400), (path, list(extra)[:1], r.text[:300])
    r = e2b(stack, "GET", "/files?path=o/bad", key=None, headers=dp(sid, stack=stack))
    assert r.status_code == 404, r.text[:300]


def test_data_plane_wrong_port_and_gone_sandbox(stack, api):
    sid = api.create()
    e2b_error(e2b(stack, "GET", "/files?path=x", key=None, headers=dp(sid, "49999", stack=stack)), 404)
    e2b_error(e2b(stack, "POST", "/execute", key=None, headers=dp(sid, "49983", stack=stack), json={"code": "1"}), 404)
    for other in (nbtest.random_uuid(), "not-an-id"):
        e2b_error(e2b(stack, "GET", "/files?path=x", key=None, headers=dp(other, stack=stack)), 502)
        e2b_error(e2b(stack, "GET", "/contexts", key=None, headers=dp(other, "49999", stack=stack)), 502)


def test_execute_raw_lines(stack, api):
    if not nbtest.image_present(nbtest.PYTHON_IMAGE):
        pytest.skip(f"{nbtest.PYTHON_IMAGE} not built")
    sid = api.create(image=nbtest.PYTHON_IMAGE)
    h = dp(sid, "49999", stack=stack)
    r = e2b(stack, "POST", "/execute", key=None, headers=h,
            json={"code": "print('hi')\nfrom IPython.display import display, Markdown\n"
                          "display(Markdown('**m**'))\n"
                          "display({'text/plain': 'p', 'application/x-custom': 'c'}, raw=True)\n{'k': 1}"})
    assert r.status_code == 200, r.text[:300]
    lines = [json.loads(line) for line in r.text.splitlines() if line]
    types = [x["type"] for x in lines]
    assert types[0] == "number_of_executions" and types[-1] == "end_of_execution", types
    assert {"type": "stdout", "text": "hi\n"} in lines
    results = [x for x in lines if x["type"] == "result"]
    assert results[-1]["is_main_result"] is True and results[-1]["text"] == "{'k': 1}"
    assert any(x.get("markdown") == "**m**" and x["is_main_result"] is False for x in results), results
    assert {"type": "result", "text": "p", "extra": {"application/x-custom": "c"},
            "is_main_result": False} in results, results
    for bad, status in (({"code": ""}, 400), ({"code": 1}, 400), ({"code": "1", "language": "r"}, 400),
                        ({"code": "1", "context_id": "ctx-nope"}, 404),
                        ({"code": "1", "context_id": "NOT VALID"}, 404)):
        e2b_error(e2b(stack, "POST", "/execute", key=None, headers=h, json=bad), status)
    e2b_error(e2b(stack, "DELETE", "/contexts/ctx-nope", key=None, headers=h), 404)
    e2b_error(e2b(stack, "POST", "/contexts", key=None, headers=h, json={"cwd": "relative"}), 400)
    # @e2b/code-interpreter 2.8 adds ?source=<E2B_USER_AGENT_SOURCE> to its calls: ignored
    r = e2b(stack, "POST", "/execute?source=ci", key=None, headers=h, json={"code": "6 * 7"})
    assert r.status_code == 200, r.text[:300]
    assert {"type": "result", "text": "42", "is_main_result": True} in \
        [json.loads(line) for line in r.text.splitlines() if line], r.text[:300]
    r = e2b(stack, "GET", "/contexts?source=ci", key=None, headers=h)
    assert r.status_code == 200 and "python" in [c["id"] for c in r.json()], r.text[:300]


def test_files_and_code_calls_need_the_sandboxs_access_token(stack, api):
    """The data plane carries no API key: the sandbox's token opens it, as
    X-Access-Token (envd, /execute) or E2B-Traffic-Access-Token (the code
    interpreter's other calls); no token, another sandbox's or a wrong one: 401."""
    sid, other = api.create(), api.create()
    for path, port in (("/files?path=x", "49983"), ("/contexts", "49999")):
        for token in (None, access_token(stack, other), "0" * 64):
            h = dp(sid, port)
            if token is not None:
                h["X-Access-Token"] = token
            e2b_error(e2b(stack, "GET", path, key=None, headers=h), 401)
    h = {**dp(sid, "49999"), "E2B-Traffic-Access-Token": access_token(stack, sid)}
    r = e2b(stack, "GET", "/contexts", key=None, headers=h)
    assert r.status_code == 200, r.text[:300]


# ------------------------------- filesystem.Filesystem and metrics through the SDK

@pytest.fixture(scope="module")
def fsrun(stack, sdk):
    """fs.mjs once against the stack (sbx.files over filesystem.Filesystem, getMetrics): its summary."""
    summary = sdk_script(stack, sdk, "fs.mjs", "e2bf-")
    yield summary
    for sid in summary["created"]:
        stack.api.delete(sid)


def test_fs_written_bytes_come_back_exact(fsrun):
    step(fsrun, "setup")
    assert step(fsrun, "readBack") == {"size": 300_000, "sha": fsrun["blobSha"]}


def test_fs_list_one_level_with_entry_info(fsrun):
    entries = step(fsrun, "list1")
    assert [e["name"] for e in entries] == ["a.txt", "b", "blob.bin", "link"], entries
    by = {e["name"]: e for e in entries}
    a = by["a.txt"]
    assert a["type"] == "file" and a["path"] == "/home/user/tree/a.txt" and a["size"] == 5, a
    assert a["mode"] == 0o644 and a["permissions"] == "-rw-r--r--", a
    assert a["owner"] and a["group"], a
    assert near(a["modifiedTime"] / 1000, fsrun["startedAt"], 30), a
    assert by["b"]["type"] == "dir" and by["b"]["permissions"] == "drwxr-xr-x" and by["b"]["mode"] == 0o755
    assert by["blob.bin"]["size"] == 300_000
    link = by["link"]
    assert link["type"] == "symlink" and link["symlinkTarget"] == "/home/user/tree/a.txt", link
    assert link["permissions"].startswith("L"), link


def test_fs_list_deeper_levels(fsrun):
    assert step(fsrun, "list2") == ["/home/user/tree/a.txt", "/home/user/tree/b", "/home/user/tree/b/c.txt",
                                    "/home/user/tree/b/d", "/home/user/tree/blob.bin", "/home/user/tree/link"]
    assert "/home/user/tree/b/d/e.txt" in step(fsrun, "list3")


def test_fs_list_errors(fsrun):
    assert thrown(fsrun, "listFile")["name"] == "InvalidArgumentError"
    assert thrown(fsrun, "listMissing")["name"] == "FileNotFoundError"
    assert thrown(fsrun, "listDepth0")["name"] == "InvalidArgumentError"


def test_fs_exists_and_get_info(fsrun):
    assert step(fsrun, "exists") == {"file": True, "dir": True, "missing": False}
    f = step(fsrun, "infoFile")
    assert {k: f[k] for k in ("name", "type", "path", "size", "mode", "permissions")} == {
        "name": "c.txt", "type": "file", "path": "/home/user/tree/b/c.txt", "size": 6, "mode": 0o644,
        "permissions": "-rw-r--r--"}, f
    d = step(fsrun, "infoDir")
    assert (d["name"], d["type"], d["path"]) == ("b", "dir", "/home/user/tree/b"), d
    link = step(fsrun, "infoLink")
    assert (link["type"], link["symlinkTarget"]) == ("symlink", "/home/user/tree/a.txt"), link
    e = thrown(fsrun, "infoMissing")
    assert e["name"] == "FileNotFoundError" and "zzz" in e["message"], e


def stat_ms(y):
    """`stat -c %y` ("2024-05-01 10:00:00.123456789 +0000") as unix milliseconds (the SDK's Date)."""
    day, clock, zone = y.split(" ")
    whole, frac = clock.split(".")
    t = datetime.strptime(f"{day} {whole} {zone}", "%Y-%m-%d %H:%M:%S %z")
    return int(t.timestamp()) * 1000 + int(frac[:3])


def test_fs_info_mtime_and_mode_as_envd_gives_them(fsrun):
    """modifiedTime below the second, equal to the sandbox's stat; mode the permission bits
    (a symlink's: its target's, 0 when it leads nowhere), permissions as Go prints the mode."""
    r = step(fsrun, "infoVsStat")
    st = {n: (y, a) for n, y, a in (line.split("|") for line in r["stat"].splitlines())}
    info = r["info"]
    for n in ("f", "d", "l", "dangling"):
        assert info[n]["modifiedTime"] == stat_ms(st[n][0]), (n, st[n], info[n])
    assert info["l"]["modifiedTime"] % 1000 == 123 and info["d"]["modifiedTime"] % 1000 == 500
    f, d, link, dangling = info["f"], info["d"], info["l"], info["dangling"]
    assert (f["type"], f["mode"], f["permissions"]) == ("file", 0o640, "-rw-r-----"), f
    assert (d["type"], d["mode"], d["permissions"]) == ("dir", 0o755, "drwxr-xr-x"), d
    assert (link["mode"], link["permissions"], link["symlinkTarget"]) == (0o640, "Lrwxrwxrwx", "/home/user/mt/f"), link
    assert (dangling["mode"], dangling["permissions"]) == (0, "Lrwxrwxrwx"), dangling
    assert dangling["symlinkTarget"] == "/home/user/mt/dangling", dangling
    assert thrown(fsrun, "infoBadPath")["name"] == "InvalidArgumentError"


def test_fs_symlink_target_as_envd_resolves_it(fsrun):
    """A symlink's symlinkTarget is envd's filepath.EvalSymlinks of it: absolute, every link
    followed, as the sandbox user resolves it (`readlink -f`); where that fails (dangling, a
    loop, a directory the user may not search) the link's own path, as envd gives it. /proc's
    magic links are not followed: they would name the agent's cwd, root and fds."""
    r = step(fsrun, "linkTargets")
    rf, info, listed = r["readlinkF"], r["info"], r["list"]
    own = {n: f"/home/user/lt/{n}" for n in info}
    want = {"rel": "/home/user/tree/a.txt", "chain": "/home/user/tree/a.txt", "abs": rf["abs"],
            "up": "/etc", "home": "/home/user", "dangling": own["dangling"], "loop1": own["loop1"],
            "shut": own["shut"], "magic": own["magic"], "magicroot": own["magicroot"],
            "magicfd": own["magicfd"]}
    assert {n: i["target"] for n, i in info.items()} == want, info
    assert all(i["type"] == "symlink" for i in info.values()), info
    for n in ("rel", "chain", "abs", "up", "home"):  # what the user resolves
        assert rf[n] == want[n], (n, rf)
    assert rf["abs"].startswith("/") and rf["abs"].endswith("passwd"), rf
    # the listing names the same targets (resolved from the open directory)
    assert {n: listed[n] for n in want} == want, listed


def test_fs_write_where_the_user_may_not_is_refused_and_says_why(fsrun):
    """files.write('/0/x'): E2B's envd, as root, would create /0 for the user; nanobox writes
    as the sandbox user only: 403 (the SDK's SandboxError), saying so, and nothing created."""
    for name in ("writeUnderRoot", "writeUnderEtc"):
        e = thrown(fsrun, name)
        assert e["name"] == "SandboxError" and e["message"].startswith("403"), e
        assert "as the sandbox user" in e["message"] and "E2B's envd writes as root" in e["message"], e
    assert step(fsrun, "writeRefusedLeftNothing") == {"zero": False, "etc": False}


def test_fs_make_dir_true_then_false(fsrun, stack):
    m = step(fsrun, "makeDir")
    assert (m["first"], m["again"], m["parent"]) == (True, False, False), m
    assert m["info"]["type"] == "dir" and m["info"]["path"] == "/home/user/made/x/y"
    assert thrown(fsrun, "makeDirOnFile")["name"] == "InvalidArgumentError"


def test_fs_rename(fsrun, stack):
    r = step(fsrun, "rename")
    assert r["moved"]["path"] == "/home/user/tree/c-moved.txt" and r["moved"]["name"] == "c-moved.txt"
    assert r["oldExists"] is False and r["text"] == "gamma!", r
    d = step(fsrun, "renameDir")
    assert (d["path"], d["type"]) == ("/home/user/x-moved", "dir"), d
    # the same tree through nanobox's native API (E2B's layout: the workspace is /home/user)
    got = stack.api.request("GET", f"/sandbox/{fsrun['sandbox']}/files?path=/home/user/x-moved").json()
    assert [e["name"] for e in got["entries"]] == ["y"], got
    assert thrown(fsrun, "renameMissing")["name"] == "FileNotFoundError"


def test_fs_remove_and_read_missing(fsrun):
    r = step(fsrun, "remove")
    assert (r["a"], r["b"]) == (False, False), r
    assert sorted(r["list"]) == ["blob.bin", "c-moved.txt", "link"], r
    e = thrown(fsrun, "readMissing")
    assert e["name"] == "FileNotFoundError", e


def test_fs_metadata_is_the_files_user_xattrs(fsrun):
    """files.write's metadata (envd >= 0.6.2): the X-Metadata-* headers
    become user.<key> xattrs, reported by write, getInfo and list, with
    those set in the sandbox; multipart and octet-stream, workspace and tmpfs."""
    md = {"owner-id": "42", "note": "a b c"}
    s = step(fsrun, "metadataWrite")
    assert s["written"] == md and s["plain"] is None, s
    assert s["info"] == {**md, "from-shell": "yes"} == s["list"]["a.txt"], s
    assert s["xattrs"] == {"user.owner-id": "42", "user.note": "a b c", "user.from-shell": "yes"}, s
    s = step(fsrun, "metadataOctetStream")
    assert s["stream"] == {"path": "/home/user/meta/stream.txt", "metadata": {"k": "v"}, "text": "streamed"}, s
    assert s["tmp"] == {"metadata": {"where": "tmp"}, "info": {"where": "tmp"}, "text": "on tmpfs"}, s
    assert s["gzip"] == {"metadata": {"z": "1"}, "ok": True}, s  # octet-stream, Content-Encoding: gzip


def test_fs_hostile_metadata_is_refused_and_writes_nothing(fsrun):
    # keys naming another xattr namespace never arrive (nginx drops header names with a
    # dot; the agent would refuse them: tests/init): only user.<key> is ever set
    s = step(fsrun, "metadataNamespacedKeys")
    assert s == {"metadata": {"ok": "1"}, "xattrs": {"user.ok": "1"}}, s
    for name in ("metadataLongKey", "metadataLongValue", "metadataTooMany"):
        assert thrown(fsrun, name)["name"] == "InvalidArgumentError", (name, thrown(fsrun, name))
    assert "X-Metadata-" in thrown(fsrun, "metadataLongValue")["message"]
    assert thrown(fsrun, "metadataUnderEtc")["name"] in ("SandboxError", "AuthenticationError",
                                                         "InvalidArgumentError"), thrown(fsrun, "metadataUnderEtc")
    assert step(fsrun, "metadataRefusedLeftNothing") == {"t": False, "etc": False}
    # a symlink out is replaced by the file, never followed: /etc/passwd untouched
    s = step(fsrun, "metadataSymlinkOut")
    assert s["type"] == "file" and s["metadata"] == {"k": "v"}, s
    assert s["out"][:3] == ["1", "mine", "root:"] and s["passwdXattrs"] == {}, s


def test_get_metrics_reads_the_cgroup(fsrun):
    m = step(fsrun, "metrics")
    # its history (test_metrics_history.py): a sample every 5 s, or one now before the first
    assert len(m) >= 1, m
    assert [x["timestamp"] for x in m] == sorted(x["timestamp"] for x in m), m
    for x in m:
        assert near(x["timestamp"], fsrun["startedAt"], 120), x
        assert x["cpuCount"] >= 1 and 0 <= x["cpuUsedPct"] <= 100, x
        assert 0 < x["memUsed"] <= x["memTotal"], x
        assert 0 <= x["diskUsed"] <= x["diskTotal"], x


def test_filesystem_raw_errors_are_connect_codes(stack, api):
    sid = api.create()
    h = {**dp(sid, stack=stack), "Content-Type": "application/json"}

    def call(method, body):
        return e2b(stack, "POST", f"/filesystem.Filesystem/{method}", key=None, headers=h, json=body)

    for method, body, status, code in (
            ("Stat", {"path": "/nope"}, 404, "not_found"),
            ("Stat", {"path": "a/../b"}, 400, "invalid_argument"),
            ("Stat", {}, 400, "invalid_argument"),
            ("ListDir", {"path": "/root"}, 403, "permission_denied"),
            ("MakeDir", {"path": "/workspace"}, 409, "already_exists"),
            ("MakeDir", {"path": "/etc/newdir"}, 403, "permission_denied"),
            ("Move", {"source": "/workspace/nope", "destination": "/workspace/x"}, 404, "not_found"),
            # /workspace is a mount point: never moved by copy (its files stay)
            ("Move", {"source": "/workspace", "destination": "/tmp/w"}, 400, "failed_precondition"),
            ("Move", {"source": "/workspace"}, 400, "invalid_argument"),
            ("ListDir", {"path": "/workspace", "depth": "x"}, 400, "invalid_argument")):
        r = call(method, body)
        assert (r.status_code, r.json()["code"]) == (status, code), (method, body, r.text[:300])
    r = call("Stat", {"path": "/workspace"})
    assert r.status_code == 200 and r.json()["entry"]["type"] == "FILE_TYPE_DIRECTORY", r.text[:300]
    assert r.json()["entry"]["size"].isdigit()
    r = call("Remove", {"path": "/workspace/never"})
    assert (r.status_code, r.json()) == (200, {})
    # the native listing goes as deep as asked, and shows owners and link targets
    api.request("PUT", f"/sandbox/{sid}/files?path=/workspace/d1/d2/f", data=b"x")
    got = api.request("GET", f"/sandbox/{sid}/files?path=/workspace&depth=3").json()
    names = [e["name"] for e in got["entries"]]
    assert {"d1", "d1/d2", "d1/d2/f"} <= set(names), names
    assert all(e["owner"] and e["group"] for e in got["entries"]), got
    assert api.request("GET", f"/sandbox/{sid}/files?path=/workspace&depth=0").status_code == 400
    api.delete(sid)
    r = call("Stat", {"path": "/workspace"})
    assert (r.status_code, r.json()["code"]) == (503, "unavailable"), r.text[:300]


# ------------------------------------------- files.watchDir and rename across mounts (SDK)

@pytest.fixture(scope="module")
def watchrun(stack, sdk):
    """watch.mjs once against the stack (files.watchDir over WatchDir, rename across mounts)."""
    summary = sdk_script(stack, sdk, "watch.mjs", "e2bw-")
    yield summary
    for sid in summary["created"]:
        stack.api.delete(sid)


def test_watch_dir_sees_commands_and_files_write(watchrun):
    s = step(watchrun, "watch")
    assert s["all"], s["events"]
    ev = [(e["type"], e["name"]) for e in s["events"]]
    for want in [("create", "by-command.txt"), ("write", "by-command.txt"), ("write", "by-sdk.txt"),
                 ("chmod", "by-sdk.txt"), ("rename", "by-command.txt"), ("create", "renamed.txt"),
                 ("remove", "renamed.txt")]:
        assert want in ev, ev
    # not recursive: nothing from sub/; no temporary name of an upload shows
    assert not any(name.startswith("sub/") or ".nanobox" in name for _, name in ev), ev
    # stop() ends it (the SDK aborts the stream: onExit is told): nothing after
    assert s["afterStop"] == 0 and s["exited"] is not None, s


def test_watch_dir_recursive(watchrun):
    s = step(watchrun, "watchRecursive")
    assert s["all"], s["events"]
    ev = [(e["type"], e["name"]) for e in s["events"]]
    assert ("create", "sub/new") in ev and ("create", "sub/up.txt") in ev, ev


def test_watch_dir_errors(watchrun):
    assert thrown(watchrun, "watchMissing")["name"] == "FileNotFoundError"
    assert thrown(watchrun, "watchFile")["name"] == "InvalidArgumentError"


def test_rename_across_mounts(watchrun):
    s = step(watchrun, "renameAcrossMounts")
    assert s == {"path": "/tmp/mv", "type": "dir", "out": ["abc", "750", "d/f", "1"]}


def test_watches_left_no_inotify_fd(watchrun):
    pid = nbtest.docker_inspect(f"nanobox-{watchrun['sandbox']}")["State"]["Pid"]

    def n_inotify():
        n = 0
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                n += os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:inotify"
            except OSError:
                pass
        return n
    nbtest.wait_until(lambda: n_inotify() == 0, 10, 0.1, what="the agent to drop its watches")


def test_watch_events_carry_the_entry_when_asked(watchrun):
    """includeEntry (envd >= 0.6.3): each event's EntryInfo as the path is
    then (with its metadata); a removed one has none."""
    s = step(watchrun, "watchIncludeEntry")
    assert s["all"], s["events"]
    by = {}
    for e in s["events"]:
        by.setdefault(e["type"], e)
    assert by["create"]["name"] == "entry.txt" and by["remove"]["entry"] is None, s
    written = [e["entry"] for e in s["events"] if e["type"] == "write" and e["entry"]]
    assert written and written[-1]["path"] == "/home/user/watched/entry.txt", s
    assert written[-1]["type"] == "file" and written[-1]["size"] == 5, s
    assert written[-1]["metadata"] == {"k": "v"}, s


def test_watch_on_proc_and_sys_is_harmless(watchrun):
    """allowNetworkMounts (envd >= 0.6.4) is taken; any directory the user
    may read is watched, /proc and /sys too: no events, nothing breaks."""
    s = step(watchrun, "watchProcAndSys")
    assert s["alive"] == "ok", s
    for p in ("/proc", "/proc/1", "/sys/fs/cgroup"):
        assert s[p].get("started") or s[p]["name"] in ("InvalidArgumentError", "FileNotFoundError",
                                                      "SandboxError"), (p, s[p])


def test_watch_dir_raw_stream(envd):
    """WatchDir's envelopes: start, filesystem {name, type}, keepalives, and the
    Connect-Timeout-Ms deadline as deadline_exceeded in the end-of-stream."""
    envd("process.Process/Start", {"process": {"cmd": "/bin/sh", "args": ["-c", "mkdir -p wr"]}}, stream=True)

    # the answer's headers go out with "start", once the agent watches the
    # directory: a file made before could go unseen on a loaded machine
    r = envd("filesystem.Filesystem/WatchDir", {"path": "wr"}, stream=True, early=True,
             headers={"Connect-Timeout-Ms": "2500", "Keepalive-Ping-Interval": "1"})
    envd("process.Process/Start", {"process": {"cmd": "/bin/sh", "args": ["-c", "touch wr/t"]}}, stream=True)
    msgs, end = connect_stream(r)
    assert msgs[0] == {"start": {}}
    assert {"filesystem": {"name": "t", "type": "EVENT_TYPE_CREATE"}} in msgs, msgs
    assert {"keepalive": {}} in msgs, msgs
    assert end == {"error": {"code": "deadline_exceeded", "message": ANY}}
    r = envd("filesystem.Filesystem/WatchDir", {"path": "no-such"}, stream=True)
    assert connect_stream(r) == ([], {"error": {"code": "not_found", "message": ANY}})


def test_polling_watchers_keep_events_between_calls(envd, stack):
    """CreateWatcher / GetWatcherEvents / RemoveWatcher (the Python SDK's
    watch_dir): the agent keeps the watch and its events by id."""
    def run(cmd):
        connect_stream(envd("process.Process/Start", {"process": {"cmd": "/bin/sh", "args": ["-c", cmd]}},
                            stream=True))
    run("mkdir -p pw/sub")
    r = envd("filesystem.Filesystem/CreateWatcher", {"path": "pw", "recursive": True})
    assert r.status_code == 200, r.text
    wid = r.json()["watcherId"]
    assert wid.isdigit()
    run("echo 1 > pw/a && echo 2 > pw/sub/b")
    events = []
    nbtest.wait_until(lambda: events.extend(envd("filesystem.Filesystem/GetWatcherEvents",
                                                 {"watcherId": wid}).json()["events"]) or
                      {"name": "sub/b", "type": "EVENT_TYPE_WRITE"} in events, 5, 0.1, what="sub/b's write")
    assert {"name": "a", "type": "EVENT_TYPE_CREATE"} in events, events
    assert envd("filesystem.Filesystem/GetWatcherEvents", {"watcherId": wid}).json() == {"events": []}
    pid = nbtest.docker_inspect(f"nanobox-{envd.sandbox['sandboxID']}")["State"]["Pid"]
    fds = lambda: sum(os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:inotify"  # noqa: E731
                      for fd in os.listdir(f"/proc/{pid}/fd"))
    assert fds() == 1
    r = envd("filesystem.Filesystem/RemoveWatcher", {"watcherId": wid})
    assert (r.status_code, r.json()) == (200, {})
    assert fds() == 0
    for proc in ("GetWatcherEvents", "RemoveWatcher"):
        r = envd(f"filesystem.Filesystem/{proc}", {"watcherId": wid})
        assert (r.status_code, r.json()["code"]) == (404, "not_found"), r.text
    r = envd("filesystem.Filesystem/CreateWatcher", {"path": "no-such"})
    assert (r.status_code, r.json()["code"]) == (404, "not_found")
    r = envd("filesystem.Filesystem/GetWatcherEvents", {})
    assert (r.status_code, r.json()["code"]) == (400, "invalid_argument")


def test_stat_modified_time_is_a_timestamp_to_the_nanosecond(envd):
    """modifiedTime as protobuf's JSON gives a Timestamp: as few of 0, 3, 6, 9 fraction digits as hold it."""
    connect_stream(envd("process.Process/Start", {"process": {"cmd": "/bin/sh", "args": ["-c", (
        "touch -d '2024-05-01 10:00:00.123456789' ns && touch -d '2024-05-01 10:00:00.5' ms"
        " && touch -d '2024-05-01 10:00:00.000250' us && touch -d '2024-05-01 10:00:00' s")]}}, stream=True))
    for name, want in (("ns", "2024-05-01T10:00:00.123456789Z"), ("ms", "2024-05-01T10:00:00.500Z"),
                       ("us", "2024-05-01T10:00:00.000250Z"), ("s", "2024-05-01T10:00:00Z")):
        r = envd("filesystem.Filesystem/Stat", {"path": name})
        assert r.status_code == 200 and r.json()["entry"]["modifiedTime"] == want, (name, r.text[:300])


# ------------------------------------------- E2B's user layout (docs/E2B.md, "Users")

@pytest.fixture(scope="module")
def userrun(stack, sdk):
    """user.mjs once against the main stack (the default config: E2B's
    layout for what E2B clients create, sandbox_user_name sandbox for the
    rest): its summary."""
    summary = sdk_script(stack, sdk, "user.mjs", "e2b-", code=True, args_more=("--keep",))
    yield summary
    for sid in summary["created"]:
        stack.api.delete(sid)


def test_commands_run_in_home_user(userrun):
    # pwd, $HOME, cd ~ and python's ~: E2B's /home/user
    assert step(userrun, "home")["stdout"] == "/home/user\n" * 4


def test_the_real_cwd_is_home_user_and_the_user_is_user(userrun):
    # what the kernel says (getcwd, pwd -P): /home/user itself, no link (docs/E2B.md, "Users"),
    # and E2B's user, with no config change
    assert step(userrun, "physicalCwd")["stdout"] == "/home/user\n/home/user\n"
    assert step(userrun, "whoami")["stdout"] == "user\nuser\n"
    assert step(userrun, "writeInfo") == {"path": "/home/user/owned.txt", "owner": "user", "group": "user"}


def test_relative_paths_are_in_home_user_for_files_and_commands(userrun, stack):
    w = step(userrun, "writeRelative")
    assert w["path"] == "/home/user/notes/a.txt"
    assert w["cat"] == "from files.write\nuser user 644\n"
    c = step(userrun, "commandFileOwner")
    assert c == {"path": "/home/user/made/b.txt", "owner": "user", "group": "user", "text": "by-command\n"}
    assert step(userrun, "relativeCwd")["stdout"] == "/home/user/made\nb.txt\n"
    assert step(userrun, "listHome") == ["made:/home/user/made", "notes:/home/user/notes"]
    # /home/user is the workspace: nanobox's own API sees the same files there
    sid = userrun["userSandbox"]
    assert stack.api.exec(sid, "cat made/b.txt; pwd")["stdout"] == "by-command\n/home/user\n"
    r = stack.api.request("GET", f"/sandbox/{sid}/files?path=/home/user/made/b.txt")
    assert r.status_code == 200 and r.content == b"by-command\n", r.text[:300]


def test_nanobox_api_keeps_its_own_layout(stack):
    """E2B's layout is for what E2B clients create: a sandbox of nanobox's
    own API still has /workspace, its user sandbox_user_name."""
    sid = stack.api.create()
    try:
        out = stack.api.exec(sid, "pwd; pwd -P; echo $HOME; whoami; touch f; stat -c %U f")["stdout"]
        assert out == "/workspace\n/workspace\n/workspace\nsandbox\nsandbox\n", out
    finally:
        stack.api.delete(sid)


def test_code_contexts_start_in_home_user(userrun):
    if "codeHome" not in userrun["steps"]:
        pytest.skip(f"{nbtest.PYTHON_IMAGE} not built")
    c = step(userrun, "codeHome")
    # a file written as in-home.txt is the kernel's in-home.txt, in the default context and a new one
    assert c["read"] == c["inCtx"] == "seen by the kernel", c
    assert c["ctxCwd"] == "/home/user"
    assert c["listed"] == ["javascript:/home/user", "new:/home/user", "python:/home/user"], c
    # every language's own getcwd (E2B's cwd.test.ts)
    assert step(userrun, "codeCwd") == {"python": "/home/user", "javascript": "/home/user",
                                        "typescript": "/home/user", "bash": "/home/user"}


def test_root_and_sudo_are_refused_clearly_and_privileges_stay_dropped(userrun):
    assert step(userrun, "asUser")["stdout"].strip() == "user"
    root = step(userrun, "asRoot")
    assert root["name"] == "SandboxError" and "has no root" in root["message"], root
    sudo = step(userrun, "sudo")
    assert sudo["name"] == "CommandExitError" and sudo["exitCode"] == 1, sudo
    assert sudo["stderr"].startswith("sudo: a nanobox sandbox has no root"), sudo
    assert sudo["stdout"] == ""
    assert step(userrun, "noNewPrivs")["stdout"] == "CapEff:\t0000000000000000\nNoNewPrivs:\t1\n"


def test_e2b_layout_survives_adoption(make_stack):
    """A sandbox of E2B's layout adopted from a lost state table keeps it:
    nanobox's calls on it still start in /home/user (its container's
    nanobox.home label), its files still there."""
    st = make_stack("e2badopt")
    r = e2b(st, "POST", "/sandboxes", json={"templateID": "base", "timeout": 600})
    assert r.status_code == 201, r.text[:300]
    sid = r.json()["sandboxID"]
    st.api.created.append(sid)
    assert st.api.exec(sid, "echo kept > k.txt; pwd -P; whoami")["stdout"] == "/home/user\nuser\n"
    assert st.stop_fcgi()
    os.unlink(st.state)
    st.start_fcgi()
    st.wait_healthy()
    assert st.api.exec(sid, "cat k.txt; pwd -P; whoami")["stdout"] == "kept\n/home/user\nuser\n"


def test_the_operator_may_keep_nanobox_layout_for_e2b(make_stack, e2b_sdk):
    """e2b_user_home = no: what E2B clients create is like any sandbox
    (/workspace, sandbox_user_name), /home/user a link to the workspace."""
    st = make_stack("e2blink", e2b_user_home="no")
    s = sdk_script(st, e2b_sdk, "user.mjs", "e2b-")
    assert step(s, "home")["stdout"] == "/home/user\n" * 4
    assert step(s, "physicalCwd")["stdout"] == "/workspace\n/workspace\n"
    assert step(s, "whoami")["stdout"] == "sandbox\nsandbox\n"
    assert step(s, "writeInfo")["owner"] == "sandbox"
    assert step(s, "writeRelative")["cat"] == "from files.write\nsandbox sandbox 644\n"
    assert step(s, "sameFilesOnTheNativePath")["stdout"] == "by-command\n"


@pytest.fixture(scope="module")
def rootrun(sdk):
    """root.mjs against a stack whose base template has a root (root_templates)."""
    st = _start("e2broot", {"root_templates": "nanobox"})
    try:
        s = sdk_script(st, sdk, "root.mjs", "e2b-")
        for sid in s["created"]:
            st.api.delete(sid)
        yield s
    finally:
        st.api.cleanup()
        _stop(st)


def test_root_symlink_targets_and_writes_stay_the_users(rootrun):
    """With a root in the sandbox, the agent (uid 0, the user's file rights) resolves a
    symlink's target as the user: not into root's 0700 directory, not through PID 1's magic
    links (the link's own path); files.write('/0/x') is refused (403), /0 not made."""
    r = step(rootrun, "rootLinkTargets")
    own = {n: f"/home/user/rl/{n}" for n in ("shut", "p1cwd", "p1root")}
    assert r["info"] == {**own, "abs": "/etc/passwd"}, r
    assert r["write"]["name"] == "SandboxError" and r["write"]["message"].startswith("403"), r
    assert r["zero"] is False, r


def test_root_and_sudo_run_as_a_root_without_capabilities_where_the_operator_allows(rootrun):
    assert step(rootrun, "asRoot")["stdout"] == "root\n0\n/root\n/root\n"
    caps = "Uid:\t0\t0\t0\t0\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nNoNewPrivs:\t1\n"
    assert step(rootrun, "rootCaps")["stdout"] == caps
    assert step(rootrun, "sudo")["stdout"] == "0\n" + caps
    uid, name = step(rootrun, "user")["stdout"].split()
    assert int(uid) > 0 and name == "user"  # E2B's layout, root template or not


def test_sudo_apt_get_installs_a_package_the_user_runs(rootrun):
    assert step(rootrun, "sudoInstall") == {"exitCode": 0, "run": "hello from a package\n"}
    assert step(rootrun, "sudoTee")["stdout"] == "hi\n"


def test_a_root_background_command_is_root_and_killed(rootrun):
    assert step(rootrun, "rootBackgroundKill") == {"owner": "root\n", "killed": True, "left": "gone\n"}


def test_a_root_terminal_outlives_its_handle(rootrun):
    assert step(rootrun, "rootPty") == {"uid0": True, "whoami": True, "killed": True}


# ------------------------------------------- E2B_DOMAIN: hosts <port>-<id>.<domain>

def test_domain_mode_reaches_the_data_plane_by_host_name(make_stack, e2b_sdk, certs):
    """The SDK with E2B_DOMAIN (no E2B_SANDBOX_URL) over https, verified
    against the test CA: 49983 and 49999 of <port>-<id>.<ports domain> are
    the facade's data plane, routed by nginx's ports server; any other port
    an app listens on is opened on its first request (ports_on_demand), so
    sbx.getHost(port) works as in E2B's cloud."""
    from test_tls import curl_https
    cert, key, ca = certs
    st = make_stack("e2bdomain", tls=(cert, key, ca), ports_on_demand="yes")
    code = nbtest.image_present(nbtest.PYTHON_IMAGE)
    s = sdk_script(st, e2b_sdk, "domain.mjs", "e2b-", code=code,
                   env_over={"E2B_SANDBOX_URL": None, "E2B_DOMAIN": nbtest.PORTS_DOMAIN,
                             "NODE_EXTRA_CA_CERTS": str(ca)},
                   args_more=["--port", str(st.port)])
    sid = step(s, "urls")["id"]
    assert step(s, "urls") == {"envd": f"https://49983-{sid}.{nbtest.PORTS_DOMAIN}",
                               "host": f"8000-{sid}.{nbtest.PORTS_DOMAIN}", "id": sid}
    assert step(s, "isRunning") == {"running": True}
    assert step(s, "run") == {"stdout": "hi from /home/user\n", "exitCode": 0}
    assert step(s, "files") == {"text": "over the domain", "list": ["/home/user/d/x.txt"]}
    if code:
        assert step(s, "runCode") == {"stdout": ["over the domain\n"], "text": "42", "error": None}
    assert step(s, "getHostFetch") == {"status": 200, "text": "on demand", "again": 200}
    assert step(s, "kill") == {"killed": True}
    assert step(s, "isRunningAfterKill") == {"running": False}

    # the host alone names the sandbox (curl sends no E2b-* header); other
    # ports of the same name are the sandbox's own, through the ports server
    sid = st.api.create()
    host = f"49983-{sid}.{nbtest.PORTS_DOMAIN}"
    rc, code_, body, err = curl_https(f"https://{host}:{st.port}/health", host, st.port, ca)
    assert rc == 0 and code_ in ("200", "204"), (rc, code_, body[:300], err)
    host = f"49999-{sid}.{nbtest.PORTS_DOMAIN}"
    rc, code_, body, err = curl_https(f"https://{host}:{st.port}/contexts", host, st.port, ca)
    assert (rc, code_, json.loads(body)["code"]) == (0, "401", 401), (body[:300], err)
    host = f"8000-{sid}.{nbtest.PORTS_DOMAIN}"
    rc, code_, body, err = curl_https(f"https://{host}:{st.port}/", host, st.port, ca)
    assert rc == 0 and code_ == "502" and "nothing listens on 127.0.0.1:8000" in body, (body[:300], err)


def test_the_workspace_itself_can_be_e2bs_home(make_stack, e2b_sdk):
    """workspace = /home/user: no link, the real cwd is /home/user, and the
    code interpreter's kernels start there."""
    st = make_stack("e2bhome", sandbox_user_name="user", workspace="/home/user")
    s = sdk_script(st, e2b_sdk, "user.mjs", "e2b-", code=True)
    assert step(s, "home")["stdout"] == "/home/user\n" * 4
    assert step(s, "physicalCwd")["stdout"] == "/home/user\n/home/user\n"
    assert step(s, "writeRelative") == {"path": "/home/user/notes/a.txt",
                                        "cat": "from files.write\nuser user 644\n"}
    assert step(s, "listHome") == ["made:/home/user/made", "notes:/home/user/notes"]
    assert step(s, "sudo")["exitCode"] == 1
    if "codeHome" in s["steps"]:
        c = step(s, "codeHome")
        assert c["read"] == c["inCtx"] == "seen by the kernel", c
        assert c["listed"] == ["javascript:/home/user", "new:/home/user", "python:/home/user"], c
