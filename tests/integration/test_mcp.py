"""
nanobox's MCP server against the live service.

Three parts:
- the official MCP TypeScript SDK (@modelcontextprotocol/sdk, pinned in
  tests/mcp/package.json) runs tests/mcp/client.mjs against `nanobox mcp`
  over stdio, and against POST /mcp over Streamable HTTP: the issue's
  scenario, once per module and transport, one test per behaviour
  asserting on its JSON summary;
- raw HTTP requests to /mcp: sessions, status codes, auth, versions, and
  tool calls run through the router inside the worker;
- raw JSON-RPC lines fed to `nanobox mcp` through a pipe: parse errors,
  invalid requests, unknown methods, bad params, version negotiation,
  batches, and the server still serving after each.

npm installs the SDK into tests/mcp/node_modules when it is missing
(`npm ci`, from package-lock.json). Without node/npm the SDK tests skip.
"""

import base64
import json
import os
import queue
import re
import secrets
import subprocess
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests

import nbtest
from nbtest import UUID_RE, parse_json, random_uuid, wait_until

CLI_BIN = nbtest.BUILD / "nanobox"
MCP_DIR = nbtest.REPO / "tests" / "mcp"
CLIENT_JS = MCP_DIR / "client.mjs"
SDK_TIMEOUT = 300

TOOLS = {"sandbox_create", "sandbox_exec", "sandbox_write_file", "sandbox_read_file",
         "sandbox_list_files", "sandbox_open_port", "sandbox_list", "sandbox_destroy",
         "sandbox_pause", "sandbox_resume", "sandbox_snapshot", "sandbox_fork", "run_code", "sandbox_set_timeout",
         "sandbox_start_process", "sandbox_list_processes", "sandbox_read_process_output",
         "sandbox_write_process_stdin", "sandbox_kill_process", "sandbox_delete_file",
         "sandbox_make_dir", "sandbox_move_file", "sandbox_list_ports", "sandbox_close_port",
         "volume_create", "volume_list", "volume_delete"}
VERSIONS = ["2025-06-18", "2025-03-26", "2024-11-05"]
LATEST = VERSIONS[0]
MAX_MESSAGE = 4 * 1024 * 1024


@pytest.fixture(scope="module", autouse=True)
def _cli_built():
    if not CLI_BIN.exists():
        pytest.fail(f"{CLI_BIN} not found: build it (make nanobox) or point NANOBOX_BUILD at the build dir")


# ------------------------------------------------------------ the SDK side

@pytest.fixture(scope="module")
def mcp_sdk():
    """tests/mcp/node_modules with the SDK in it: installed when missing."""
    return nbtest.node_package(MCP_DIR, "@modelcontextprotocol/sdk", skip_without_node=True)


def run_client(node, stack, *args, env=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("NANOBOX_") and k != "XDG_CONFIG_HOME"}
    e.update(env or {})
    r = subprocess.run([node, str(CLIENT_JS), *args], cwd=MCP_DIR, env=e, capture_output=True,
                       text=True, timeout=SDK_TIMEOUT)
    assert r.returncode == 0, f"client.mjs {args} -> {r.returncode}\nstdout: {r.stdout[-3000:]}\nstderr: {r.stderr[-5000:]}"
    lines = [line for line in r.stdout.splitlines() if line.strip()]
    assert lines, f"client.mjs printed nothing\nstderr: {r.stderr[-5000:]}"
    summary = json.loads(lines[-1])
    summary["_stderr"] = r.stderr
    return summary


def _forget(stack, summary):
    for key in ("sandboxId", "codeSandboxId"):
        sid = summary.get(key) if summary else None
        if sid:
            requests.delete(f"{stack.url}/sandbox/{sid}", headers={"Authorization": f"Bearer {stack.api_key}"},
                            timeout=60)


def _code_args():
    """The session part of the scenario, when the code interpreter's image is there."""
    return ["--code-image", nbtest.PYTHON_IMAGE] if nbtest.image_present(nbtest.PYTHON_IMAGE) else []


@pytest.fixture(scope="module")
def stdio_run(stack, mcp_sdk, tmp_path_factory):
    """The scenario through `nanobox mcp` (SDK StdioClientTransport)."""
    home = tmp_path_factory.mktemp("mcp-home")
    summary = run_client(mcp_sdk, stack, "--transport", "stdio", "--bin", str(CLI_BIN), *_code_args(),
                         env={"NANOBOX_URL": stack.url, "NANOBOX_API_KEY": stack.api_key,
                              "HOME": str(home)})
    yield summary
    _forget(stack, summary)


@pytest.fixture(scope="module")
def http_run(stack, mcp_sdk):
    """The scenario through POST /mcp (SDK StreamableHTTPClientTransport)."""
    summary = run_client(mcp_sdk, stack, "--transport", "http", "--url", f"{stack.url}/mcp",
                         "--key", stack.api_key, *_code_args())
    yield summary
    _forget(stack, summary)


@pytest.fixture(params=["stdio", "http"])
def run(request, mcp_sdk):
    return request.getfixturevalue(f"{request.param}_run")


def xdist_group_of(item):
    """The tests on one transport's scenario (stdio_run, http_run) share an
    xdist group, so that it runs once (conftest.py)."""
    if "run" in item.fixturenames:
        return f"mcp-{item.callspec.params['run']}"
    used = [t for t in ("stdio", "http") if f"{t}_run" in item.fixturenames]
    return f"mcp-{used[0]}" if used else None


def step(summary, name):
    s = summary["steps"].get(name)
    assert s is not None, (f"step {name} did not run; steps: {json.dumps(summary['steps'])[:3000]}\n"
                           f"client stderr: {summary.get('_stderr', '')[-2000:]}")
    assert "thrown" not in s, f"step {name}: the SDK threw {s['thrown']}\n{summary.get('_stderr', '')[-3000:]}"
    return s


def ok_step(summary, name):
    s = step(summary, name)
    assert s["isError"] is False, f"step {name} is an error result: {s['text']}"
    return s


def files_step(summary, name):
    """A step that needs the files API (PUT/GET /sandbox/{id}/files)."""
    s = step(summary, name)
    if s["isError"] and "no_route" in s["text"]:
        pytest.fail(f"step {name}: the server does not serve the files API yet: {s['text']}")
    assert s["isError"] is False, f"step {name} is an error result: {s['text']}"
    return s


def test_sdk_negotiates_a_version_it_and_we_support(run):
    # the SDK asks for its newest version; we answer ours, which it accepts
    assert run["protocolVersion"] in VERSIONS
    assert run["serverInfo"]["name"] == "nanobox"
    assert run["capabilities"].get("tools") is not None
    assert "sandbox_create" in run["instructions"]
    assert run["ping"] is True


def test_sdk_lists_the_tools_with_schemas_and_descriptions(run):
    tools = {t["name"]: t for t in run["tools"]}
    assert set(tools) == TOOLS
    for t in tools.values():
        assert len(t["description"]) > 40, t
        schema = t["inputSchema"]
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        for name, prop in schema["properties"].items():
            assert prop.get("description"), (t["name"], name)
    exec_schema = tools["sandbox_exec"]["inputSchema"]
    assert set(exec_schema["required"]) == {"sandbox_id", "command"}
    assert exec_schema["properties"]["timeout"]["type"] == "number"
    run_schema = tools["run_code"]["inputSchema"]
    assert run_schema["properties"]["language"]["enum"] == ["python", "sh", "javascript", "typescript",
                                                            "bash"]
    assert run_schema["required"] == ["code"]
    assert {"sandbox_id", "context"} <= set(run_schema["properties"])
    assert tools["sandbox_destroy"]["annotations"]["destructiveHint"] is True
    assert tools["sandbox_list"]["annotations"]["readOnlyHint"] is True
    for t in tools.values():
        assert set(t["annotations"]) >= {"readOnlyHint", "destructiveHint", "idempotentHint"}, t
        if run["protocolVersion"] >= "2025-06-18":
            assert t["outputSchema"]["type"] == "object", t
    assert tools["sandbox_list_processes"]["annotations"]["readOnlyHint"] is True
    assert tools["sandbox_delete_file"]["annotations"]["destructiveHint"] is True
    assert tools["sandbox_make_dir"]["annotations"]["idempotentHint"] is True


def test_sdk_sets_the_ttl(run, api):
    s = ok_step(run, "set_timeout")
    assert "900 seconds (15 minutes) from now" in s["text"], s["text"]
    if run["protocolVersion"] >= "2025-06-18":
        assert s["structured"]["ttl"] == 900


def test_sdk_background_process_start_stdin_output_kill(run):
    s = ok_step(run, "start")
    pid = re.search(r"Started process (\d+)", s["text"])
    assert pid, s["text"]
    assert re.search(rf"^pid {pid.group(1)}  running", ok_step(run, "list_processes")["text"], re.M)
    assert "Wrote 6 bytes to the stdin" in ok_step(run, "stdin")["text"]
    s = ok_step(run, "read_output")
    assert f"pid {pid.group(1)}  exited with 0" in s["text"], s["text"]
    assert "--- stdout ---\nready\nhello\n--- stderr ---\nbye\n" in s["text"], s["text"]
    ok_step(run, "kill")  # it had ended: the kill forgets it
    assert ok_step(run, "list_processes_after")["text"] == "No background processes."


def test_sdk_files_mkdir_move_delete(run):
    files_step(run, "mkdir")
    assert "to /workspace/data/sub/moved.py" in files_step(run, "move")["text"]
    assert re.search(r"^file\s.*\smoved\.py$", files_step(run, "list_moved")["text"], re.M)
    assert files_step(run, "delete")["text"] == "Deleted data."


def test_sdk_lists_and_closes_ports(run):
    s = ok_step(run, "list_ports")
    assert re.search(r"^port 8000  url: http://8000-", s["text"], re.M), s["text"]
    ok_step(run, "close_port")
    assert ok_step(run, "list_ports_after")["text"] == "No open ports."


def test_sdk_creates_a_sandbox(run, api):
    s = ok_step(run, "create")
    sid = run["sandboxId"]
    assert sid and UUID_RE.match(sid), s
    assert f"sandbox_id: {sid}" in s["text"]
    if run["protocolVersion"] >= "2025-06-18":
        assert s["structured"]["sandboxId"] == sid
        assert s["structured"]["metadata"] == {"test": "mcp"}


def test_sdk_exec_reports_exit_code_stdout_stderr_and_flags(run):
    s = ok_step(run, "exec_plain")
    assert s["text"] == ("exit_code: 0\ntimed_out: false\ntruncated: false\n"
                         "--- stdout ---\nout\n--- stderr ---\nerr\n"), s["text"]
    if run["protocolVersion"] >= "2025-06-18":
        st = s["structured"]
        assert st["exit_code"] == 0 and st["timed_out"] is False and st["truncated"] is False
        assert st["stdout"] == "out\n" and st["stderr"] == "err\n"
        assert "output" not in st


def test_sdk_exec_of_the_written_script_prints_its_output(run):
    files_step(run, "write")
    s = ok_step(run, "exec")
    assert s["text"].startswith("exit_code: 0\n"), s["text"]
    assert "--- stdout ---\nhello from mcp\n--- stderr ---\nto stderr\n" in s["text"], s["text"]


def test_sdk_exec_nonzero_exit_is_a_result_not_an_error(run):
    s = ok_step(run, "exec_fail")
    assert s["text"].startswith("exit_code: 3\ntimed_out: false\n"), s["text"]
    assert s["text"].endswith("--- stderr ---\noops\n"), s["text"]


def test_sdk_exec_timeout_is_flagged(run):
    s = ok_step(run, "exec_timeout")
    assert "timed_out: true" in s["text"], s["text"]
    assert "started" in s["text"]


def test_sdk_reads_the_file_the_script_wrote(run):
    s = files_step(run, "read")
    assert s["text"] == "hello from mcp\n"


def test_sdk_binary_file_round_trips_as_base64(run):
    files_step(run, "write_b64")
    s = files_step(run, "read_binary")
    assert "base64" in s["text"] and "5 bytes" in s["text"], s["text"]
    assert s["text"].rstrip().endswith(base64.b64encode(bytes([0, 1, 2, 255, 254])).decode())


def test_sdk_lists_the_workspace(run):
    s = files_step(run, "list_files")
    for name in ("hello.py", "out.txt", "blob.bin"):
        assert re.search(rf"^file\s.*\s{re.escape(name)}$", s["text"], re.M), s["text"]


def test_sdk_opens_a_port_whose_url_serves_the_sandbox(run, stack):
    ok_step(run, "serve")
    s = ok_step(run, "open_port")
    sid = run["sandboxId"]
    url = re.search(r"^url: (\S+)$", s["text"], re.M)
    assert url, s["text"]
    assert url.group(1) == f"http://8000-{sid}.{nbtest.PORTS_DOMAIN}:{stack.port}/"
    assert re.search(r"^tcp: \S+:\d+$", s["text"], re.M), s["text"]
    # the scenario destroyed the sandbox since: the URL's routing is what we can check
    # here; test_ports.py proves a live forwarder serves through it


def test_sdk_lists_the_sandbox_by_metadata(run):
    s = ok_step(run, "list")
    assert run["sandboxId"] in s["text"]


def test_sdk_bad_arguments_are_an_error_result_naming_the_problem(run):
    s = step(run, "bad_args")
    assert s["isError"] is True
    assert '"comand"' in s["text"] and "command" in s["text"], s["text"]


def test_sdk_destroys_the_sandbox(run, api):
    s = ok_step(run, "destroy")
    assert run["sandboxId"] in s["text"]
    assert api.get(run["sandboxId"]).status_code == 404


def test_sdk_api_error_is_an_error_result_with_the_api_message(run):
    s = step(run, "after_destroy")
    assert s["isError"] is True
    assert "not_found" in s["text"] and "HTTP 404" in s["text"], s["text"]


def test_sdk_run_code_runs_once(run):
    s = ok_step(run, "run_code")
    assert s["text"].startswith("exit_code: 0\n") and "--- stdout ---\n42\n" in s["text"], s["text"]


def code_step(summary, name):
    """A step of the session part (run_code with a sandbox_id)."""
    if "codeSandboxId" not in summary:
        pytest.skip(f"image {nbtest.PYTHON_IMAGE} missing: build it with src/setup/image.sh python")
    s = step(summary, name)
    if s["isError"] and "no_route" in s["text"]:
        pytest.fail(f"step {name}: the server does not serve POST /sandbox/ID/code yet: {s['text']}")
    return s


def test_sdk_run_code_in_a_sandbox_keeps_state(run):
    assert code_step(run, "code_create")["isError"] is False
    s = code_step(run, "code_set")
    assert s["isError"] is False and s["text"].startswith("status: ok\n"), s
    s = code_step(run, "code_get")
    assert s["isError"] is False, s
    assert "--- stdout ---\n42\n" in s["text"], s["text"]
    assert "context: python\n" in s["text"], s["text"]
    if run["protocolVersion"] >= "2025-06-18":
        assert s["structured"]["stdout"] == "42\n" and s["structured"]["error"] is None, s


def test_sdk_run_code_in_a_sandbox_returns_the_last_value(run):
    s = code_step(run, "code_value")
    assert s["isError"] is False and "--- result ---\n82\n" in s["text"], s


def test_sdk_run_code_plot_is_an_image_item(run):
    s = code_step(run, "code_plot")
    assert s["isError"] is False, s
    assert "image" in s["types"], s
    img = s["images"][0]
    assert img["mimeType"] == "image/png" and img["png"] and img["bytes"] > 1000, s["images"]
    # what the plot shows, as data the model can read: the figure's chart
    assert "--- chart ---\n" in s["text"], s["text"]
    chart = json.loads(s["text"].split("--- chart ---\n")[1].split("\n")[0])
    assert chart["type"] == "line" and chart["elements"][0]["points"] == [[1, 1], [2, 4], [3, 9]], chart
    if run["protocolVersion"] >= "2025-06-18":
        # the bytes travel once: as the image item, not again in structuredContent
        data = s["structured"]["results"][0]["data"]
        assert "image/png" not in data and "text/plain" in data, data
        assert s["structured"]["results"][0]["chart"] == chart


def test_sdk_run_code_exception_is_an_error_result_with_its_traceback(run):
    s = code_step(run, "code_raise")
    assert s["isError"] is True, s
    assert "--- stdout ---\nbefore\n" in s["text"], s["text"]
    assert "--- error ---\nZeroDivisionError: division by zero\n" in s["text"], s["text"]
    assert "1 / 0" in s["text"], s["text"]   # the traceback shows the line
    ok_step(run, "code_destroy")


def test_sdk_unknown_tool_is_a_json_rpc_error(run):
    s = run["steps"]["unknown_tool"]
    assert "thrown" in s and s["code"] == -32602, s


def test_http_transport_hands_out_a_session_id(http_run):
    assert http_run.get("sessionId"), http_run


def _transport_args(stack, transport, home):
    if transport == "stdio":
        return (["--transport", "stdio", "--bin", str(CLI_BIN)],
                {"NANOBOX_URL": stack.url, "NANOBOX_API_KEY": stack.api_key, "HOME": str(home)})
    return ["--transport", "http", "--url", f"{stack.url}/mcp", "--key", stack.api_key], {}


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_sdk_long_call_lives_on_progress_and_a_cancelled_one_is_killed(stack, mcp_sdk, transport,
                                                                        tmp_path):
    # The case is a call longer than the SDK's 60 s default request
    # timeout: over stdio a 65 s command under that default (~70 s, beside
    # the rest under xdist); over HTTP the same rule sooner, a 12 s command
    # under a 7 s request timeout. Side by side in one sandbox (client.mjs
    # long()): the command (timeout 120) with resetTimeoutOnProgress, and
    # `sleep 301` cancelled through the SDK's AbortSignal once its first
    # progress came.
    args, env = _transport_args(stack, transport, tmp_path)
    timeout_ms = 60000 if transport == "stdio" else 7000
    more = [] if transport == "stdio" else ["--request-timeout", str(timeout_ms)]
    summary = run_client(mcp_sdk, stack, *args, "--scenario", "long", *more, env=env)
    try:
        sid = summary["sandboxId"]
        assert sid, summary
        s = ok_step(summary, "long")
        assert s["text"].startswith("exit_code: 0\ntimed_out: false\n"), s["text"]
        assert "--- stdout ---\nbegin\nend\n" in s["text"], s["text"]
        assert s["ms"] > timeout_ms, s  # past the request timeout: progress kept it waiting
        prog = summary["progress"]["long"]
        assert len(prog) >= timeout_ms // 6000, prog  # one every 5 s
        assert all(b["progress"] > a["progress"] for a, b in zip(prog, prog[1:])), prog
        assert prog[0]["total"] == 120 and "sandbox_exec" in prog[0]["message"], prog[0]
        if summary["protocolVersion"] >= "2025-06-18":
            assert s["structured"]["stdout"] == "begin\nend\n" and s["structured"]["exit_code"] == 0

        c = summary["steps"]["cancel"]
        assert "thrown" in c and summary["progress"]["cancel"], (c, summary["progress"])
        # killed, as seen from the host: the long call ran on after the cancel
        assert not any("sleep 301" in line for line in nbtest.docker_top(f"nanobox-{sid}"))
        assert any("sleep" not in line for line in nbtest.docker_top(f"nanobox-{sid}"))  # still alive
    finally:
        _forget(stack, summary)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_sdk_long_run_code_lives_on_progress_a_cancelled_cell_is_interrupted_files_report_bytes(
        stack, mcp_sdk, transport, tmp_path):
    # client.mjs longCode(), in a sandbox of the code interpreter's image:
    # a 12 s cell under a 7 s request timeout (resetTimeoutOnProgress), a
    # `while True` cell cancelled on its first progress, then `x + 1` in the
    # same context; a file written and read back with progress. Over HTTP
    # the file is smaller: its base64 travels in the POST, under max_body.
    if not nbtest.image_present(nbtest.PYTHON_IMAGE):
        pytest.skip(f"{nbtest.PYTHON_IMAGE} is not built")
    size = 2 * 1024 * 1024 if transport == "stdio" else 40000
    args, env = _transport_args(stack, transport, tmp_path)
    summary = run_client(mcp_sdk, stack, *args, "--scenario", "long-code", "--code-image",
                         nbtest.PYTHON_IMAGE, "--file-bytes", str(size), env=env)
    try:
        assert summary["sandboxId"], summary
        prog = summary["progress"]
        cell = ok_step(summary, "cell")
        assert "slept 41" in cell["text"], cell["text"]
        assert cell["ms"] > 11000, cell  # past the 7 s request timeout: progress kept it waiting
        assert len(prog["cell"]) >= 2, prog["cell"]  # at 5 s and 10 s
        assert all(b["progress"] > a["progress"] for a, b in zip(prog["cell"], prog["cell"][1:]))
        assert prog["cell"][0]["total"] == 60, prog["cell"][0]
        assert prog["cell"][0]["message"].startswith("run_code: running for 5 s"), prog["cell"][0]

        spin = summary["steps"]["spin"]
        assert "thrown" in spin and prog["spin"], (spin, prog["spin"])
        after = ok_step(summary, "after")  # the context was interrupted, not stuck
        assert "--- result ---\n42" in after["text"], after["text"]  # and kept x
        assert after["ms"] < 10000, after
        # the loop is not running on: the kernel is idle
        top = nbtest.docker_top(f"nanobox-{summary['sandboxId']}")
        assert top, top

        ok_step(summary, "write")
        ok_step(summary, "read")
        assert summary["readBack"] is True
        if transport == "stdio":  # over HTTP the bytes move inside the server: no byte counts
            # (the SDK may drop the last one, which can come in one read with the reply);
            # a read's total is not known (the answer is streamed, no Content-Length)
            for p, moved in ((prog["write"], "sent"), (prog["read"], "received")):
                assert p and all(0 < x["progress"] <= size for x in p), p
                assert all(b["progress"] > a["progress"] for a, b in zip(p, p[1:])), p
                assert p[0]["message"].endswith(f" {moved}"), p
            assert prog["write"][0]["total"] == size, prog["write"]
            assert prog["write"][0]["message"].endswith(" of 2 MiB sent"), prog["write"]
    finally:
        _forget(stack, summary)


# ------------------------------------------------- raw Streamable HTTP (POST /mcp)

HTTP_ACCEPT = "application/json, text/event-stream"


def mcp_http(stack, msg=None, *, raw=None, sid=None, version=None, key="default", method="POST",
             headers=None):
    """One request to /mcp; msg is JSON-encoded unless raw bytes are given."""
    h = {"Accept": HTTP_ACCEPT, "Content-Type": "application/json"}
    if key == "default":
        key = stack.api_key
    if key is not None:
        h["Authorization"] = f"Bearer {key}"
    if sid is not None:
        h["Mcp-Session-Id"] = sid
    if version is not None:
        h["MCP-Protocol-Version"] = version
    h.update(headers or {})
    data = raw if raw is not None else (json.dumps(msg) if msg is not None else None)
    return requests.request(method, f"{stack.url}/mcp", headers=h, data=data, timeout=120)


def http_initialize(stack, version=LATEST):
    r = mcp_http(stack, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                         "params": {"protocolVersion": version, "capabilities": {},
                                    "clientInfo": {"name": "pytest", "version": "0"}}})
    assert r.status_code == 200, r.text
    return r


def http_call(stack, sid, name, arguments, id_=7):
    r = mcp_http(stack, {"jsonrpc": "2.0", "id": id_, "method": "tools/call",
                         "params": {"name": name, "arguments": arguments}}, sid=sid, version=LATEST)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["id"] == id_ and "result" in body, body
    return body["result"]


def assert_http_rpc_error(r, status, code):
    assert r.status_code == status, (r.status_code, r.text)
    assert r.headers["Content-Type"].startswith("application/json"), r.headers
    body = r.json()
    assert body["jsonrpc"] == "2.0" and body["id"] is None and body["error"]["code"] == code, body
    assert body["error"]["message"], body
    return body


def test_http_initialize_answers_json_with_a_session_id_header(stack):
    r = http_initialize(stack)
    assert r.headers["Content-Type"].startswith("application/json")
    assert UUID_RE.fullmatch(r.headers["Mcp-Session-Id"]), r.headers
    body = r.json()
    assert body["id"] == 1 and body["result"]["protocolVersion"] == LATEST, body
    assert body["result"]["serverInfo"]["name"] == "nanobox"


def test_http_each_initialize_gets_a_new_session(stack):
    assert http_initialize(stack).headers["Mcp-Session-Id"] != \
        http_initialize(stack).headers["Mcp-Session-Id"]


def test_http_request_with_the_session_id_is_served(stack):
    sid = http_initialize(stack).headers["Mcp-Session-Id"]
    r = mcp_http(stack, {"jsonrpc": "2.0", "id": "p", "method": "ping"}, sid=sid, version=LATEST)
    assert r.status_code == 200, r.text
    assert r.json() == {"jsonrpc": "2.0", "id": "p", "result": {}}
    assert "Mcp-Session-Id" not in r.headers


def concurrent_pings(stack, sid, n=12):
    """n pings at once, so that several workers serve them: their statuses."""
    results = []

    def ping(i):
        results.append(mcp_http(stack, {"jsonrpc": "2.0", "id": i, "method": "ping"}, sid=sid).status_code)

    threads = [threading.Thread(target=ping, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_http_session_is_known_to_every_worker(stack):
    """Sessions live in a file all workers share."""
    sid = http_initialize(stack).headers["Mcp-Session-Id"]
    assert concurrent_pings(stack, sid) == [200] * 12


def test_http_sessions_live_next_to_the_state_file(stack):
    sid = http_initialize(stack).headers["Mcp-Session-Id"]
    store = Path(f"{stack.state}.mcp")
    assert store.exists() and (store.stat().st_mode & 0o777) == 0o600
    store.unlink()   # forgotten: its clients initialize again, and new sessions work everywhere
    try:
        assert_http_rpc_error(mcp_http(stack, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, sid=sid),
                              404, -32001)
        sid = http_initialize(stack).headers["Mcp-Session-Id"]
        assert concurrent_pings(stack, sid) == [200] * 12
    finally:
        assert store.exists()


def test_http_unknown_session_id_is_404(stack):
    r = mcp_http(stack, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, sid=random_uuid())
    body = assert_http_rpc_error(r, 404, -32001)
    assert "initialize" in body["error"]["message"]


def test_http_delete_ends_the_session(stack):
    sid = http_initialize(stack).headers["Mcp-Session-Id"]
    r = mcp_http(stack, method="DELETE", sid=sid)
    assert r.status_code == 204, r.text
    assert_http_rpc_error(mcp_http(stack, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, sid=sid),
                          404, -32001)
    r = mcp_http(stack, method="DELETE", sid=sid)
    assert r.status_code == 404 and r.json()["code"] == "not_found", r.text


def test_http_delete_without_a_session_id_is_400(stack):
    r = mcp_http(stack, method="DELETE")
    assert r.status_code == 400 and "Mcp-Session-Id" in r.json()["error"], r.text


def test_http_requests_without_a_session_id_are_served_statelessly(stack):
    http_initialize(stack)
    r = mcp_http(stack, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, version=LATEST)
    assert r.status_code == 200, r.text
    assert {t["name"] for t in r.json()["result"]["tools"]} == TOOLS


@pytest.mark.parametrize("msg", [
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
    {"jsonrpc": "2.0", "id": 5, "result": {}},
], ids=["initialized", "cancelled", "response"])
def test_http_notification_or_response_is_202_without_body(stack, msg):
    sid = http_initialize(stack).headers["Mcp-Session-Id"]
    r = mcp_http(stack, msg, sid=sid, version=LATEST)
    assert r.status_code == 202, r.text
    assert r.content == b""


@pytest.mark.parametrize("raw", [b"{not json", b'{"jsonrpc": "2.0", "id": 1,', b"\xff\xfe"],
                         ids=["garbage", "truncated", "bytes"])
def test_http_malformed_json_is_400_parse_error(stack, raw):
    assert_http_rpc_error(mcp_http(stack, raw=raw), 400, -32700)


def test_http_empty_body_is_400_parse_error(stack):
    assert_http_rpc_error(mcp_http(stack, raw=b""), 400, -32700)


def test_http_body_over_max_body_is_413(stack):
    big = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "x" * 70000}}
    body = assert_http_rpc_error(mcp_http(stack, big), 413, -32700)
    assert "max_body" in body["error"]["message"], body


def test_http_invalid_request_is_a_json_rpc_error_with_200(stack):
    r = mcp_http(stack, {"jsonrpc": "1.0", "id": 9, "method": "ping"})
    assert r.status_code == 200, r.text
    assert r.json()["error"]["code"] == -32600 and r.json()["id"] == 9


def test_http_progress_token_turns_the_answer_into_an_sse_stream(stack, api):
    sid = api.create()
    msg = {"jsonrpc": "2.0", "id": 11, "method": "tools/call",
           "params": {"name": "sandbox_exec", "_meta": {"progressToken": 5},
                      "arguments": {"sandbox_id": sid, "command": "sleep 6; echo done", "timeout": 30}}}
    r = mcp_http(stack, msg, version=LATEST)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/event-stream"), r.headers
    events = [json.loads(block.split("data: ", 1)[1]) for block in r.text.split("\n\n") if block.strip()]
    assert all(b.startswith("event: message\ndata: ") for b in r.text.split("\n\n") if b.strip()), r.text
    assert events[0] == {"jsonrpc": "2.0", "method": "notifications/progress",
                         "params": {"progressToken": 5, "progress": 5, "total": 30,
                                    "message": "sandbox_exec: running for 5 s (killed at 30 s)"}}, events
    assert events[-1]["id"] == 11 and events[-1]["result"]["structuredContent"]["stdout"] == "done\n", events
    # a quick call with a token, or a client that takes JSON only, gets plain JSON
    msg["params"]["arguments"]["command"] = "echo quick"
    r = mcp_http(stack, msg, version=LATEST)
    assert r.headers["Content-Type"].startswith("application/json") and r.json()["id"] == 11, r.text
    msg["params"]["arguments"]["command"] = "sleep 6; echo json"
    r = mcp_http(stack, msg, version=LATEST, headers={"Accept": "application/json"})
    assert r.headers["Content-Type"].startswith("application/json"), r.headers
    assert r.json()["result"]["structuredContent"]["stdout"] == "json\n", r.text


def test_http_duplicate_keys_are_refused_and_change_nothing(stack, api):
    sid = api.create()
    raw = ('{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"sandbox_destroy",'
           f'"arguments":{{"sandbox_id":"{random_uuid()}","sandbox_id":"{sid}"}}}}}}').encode()
    r = mcp_http(stack, raw=raw)
    assert r.status_code == 200, r.text
    assert r.json()["error"]["code"] == -32600 and r.json()["id"] == 3, r.text
    assert 'field "sandbox_id" given twice' in r.json()["error"]["message"]
    assert api.get(sid).status_code == 200  # neither id was destroyed


@pytest.mark.parametrize("key", [None, "wrong-key"], ids=["missing", "wrong"])
def test_http_without_the_api_key_is_401(stack, key):
    r = mcp_http(stack, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, key=key)
    assert r.status_code == 401, r.text
    assert r.json()["code"] == "unauthorized"
    assert "Mcp-Session-Id" not in r.headers


def test_http_get_is_405(stack):
    r = mcp_http(stack, method="GET", headers={"Accept": "text/event-stream"})
    assert r.status_code == 405, r.text
    assert r.json()["code"] == "method_not_allowed"
    assert r.headers["Allow"] == "POST, DELETE"


def test_http_unsupported_protocol_version_header_is_400(stack):
    r = mcp_http(stack, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, version="1999-01-01")
    body = assert_http_rpc_error(r, 400, -32600)
    assert "1999-01-01" in body["error"]["message"] and LATEST in body["error"]["message"]


def test_http_session_remembers_the_negotiated_version(stack):
    """tools/list under 2024-11-05 has no annotations; under 2025-06-18 titles."""
    sid = http_initialize(stack, "2024-11-05").headers["Mcp-Session-Id"]
    r = mcp_http(stack, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, sid=sid)
    assert r.status_code == 200, r.text
    assert all("annotations" not in t for t in r.json()["result"]["tools"])
    sid = http_initialize(stack, LATEST).headers["Mcp-Session-Id"]
    r = mcp_http(stack, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, sid=sid)
    assert all("title" in t and "annotations" in t for t in r.json()["result"]["tools"])


def test_http_version_header_without_session_decides_the_version(stack):
    msg = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    r = mcp_http(stack, msg)   # no header: 2025-03-26, as the spec says
    assert all("title" not in t and "annotations" in t for t in r.json()["result"]["tools"])
    r = mcp_http(stack, msg, version=LATEST)
    assert all("title" in t for t in r.json()["result"]["tools"])


def test_http_accept_and_content_type_are_not_required(stack):
    r = requests.post(f"{stack.url}/mcp", headers={"Authorization": f"Bearer {stack.api_key}"},
                      data=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}), timeout=30)
    assert r.status_code == 200 and r.json()["result"] == {}, r.text


def test_http_batch_under_2025_03_26_gets_one_array(stack):
    r = mcp_http(stack, [{"jsonrpc": "2.0", "id": 1, "method": "ping"},
                         {"jsonrpc": "2.0", "method": "notifications/initialized"},
                         {"jsonrpc": "2.0", "id": 2, "method": "ping"}], version="2025-03-26")
    assert r.status_code == 200, r.text
    assert [m["id"] for m in r.json()] == [1, 2]


def test_http_scenario_create_exec_write_read_destroy(stack, api):
    """Tool calls run through the router internally: the same answers as the API's."""
    sid = http_initialize(stack).headers["Mcp-Session-Id"]
    r = http_call(stack, sid, "sandbox_create", {"metadata": {"test": "mcp-http"}})
    assert r["isError"] is False, r
    box = r["structuredContent"]["sandboxId"]
    api.created.append(box)
    assert api.get(box).status_code == 200
    r = http_call(stack, sid, "sandbox_exec", {"sandbox_id": box, "command": "echo out; echo err >&2; exit 4",
                                               "timeout": 20})
    assert r["content"][0]["text"] == ("exit_code: 4\ntimed_out: false\ntruncated: false\n"
                                       "--- stdout ---\nout\n--- stderr ---\nerr\n"), r
    assert r["structuredContent"]["exit_code"] == 4
    data = bytes(range(256)) * 4
    r = http_call(stack, sid, "sandbox_write_file", {"sandbox_id": box, "path": "bin.dat",
                                                     "content": base64.b64encode(data).decode(),
                                                     "encoding": "base64"})
    assert r["isError"] is False, r
    r = http_call(stack, sid, "sandbox_exec", {"sandbox_id": box, "command": "sha256sum /workspace/bin.dat"})
    assert r["structuredContent"]["stdout"].split()[0] == __import__("hashlib").sha256(data).hexdigest(), r
    r = http_call(stack, sid, "sandbox_read_file", {"sandbox_id": box, "path": "/workspace/bin.dat"})
    assert r["isError"] is False and base64.b64encode(data).decode() in r["content"][0]["text"], r
    r = http_call(stack, sid, "sandbox_destroy", {"sandbox_id": box})
    assert r["isError"] is False, r
    assert api.get(box).status_code == 404
    r = http_call(stack, sid, "sandbox_exec", {"sandbox_id": box, "command": "true"})
    assert r["isError"] is True and "not_found" in r["content"][0]["text"] and "HTTP 404" in r["content"][0]["text"], r


def test_http_pause_and_resume(stack, api):
    """sandbox_pause freezes it (exec is then an error result), sandbox_resume thaws it."""
    sid = http_initialize(stack).headers["Mcp-Session-Id"]
    box = api.create()
    r = http_call(stack, sid, "sandbox_pause", {"sandbox_id": box})
    assert r["isError"] is False and r["structuredContent"]["state"] == "paused", r
    assert r["content"][0]["text"].startswith(f"Sandbox {box} is paused; ttl_remaining: "), r
    r = http_call(stack, sid, "sandbox_exec", {"sandbox_id": box, "command": "true"})
    assert r["isError"] is True and "(code paused, HTTP 409)" in r["content"][0]["text"], r
    r = http_call(stack, sid, "sandbox_resume", {"sandbox_id": box})
    assert r["isError"] is False and r["structuredContent"]["state"] == "running", r
    r = http_call(stack, sid, "sandbox_exec", {"sandbox_id": box, "command": "echo on"})
    assert r["structuredContent"]["stdout"] == "on\n", r


def test_http_pause_without_memory(stack, api):
    """sandbox_pause with keep_memory false: its files saved, its container gone; resume boots it."""
    sid = http_initialize(stack).headers["Mcp-Session-Id"]
    box = api.create()
    api.exec(box, "echo kept > /workspace/f")
    r = http_call(stack, sid, "sandbox_pause", {"sandbox_id": box, "keep_memory": False})
    assert r["isError"] is False and r["structuredContent"]["memory_released"] is True, r
    assert not nbtest.docker_exists(f"nanobox-{box}")
    r = http_call(stack, sid, "sandbox_resume", {"sandbox_id": box})
    assert r["isError"] is False and r["structuredContent"]["state"] == "running", r
    assert api.exec(box, "cat /workspace/f")["stdout"] == "kept\n"


def test_http_run_code_runs_once(stack):
    r = mcp_http(stack, {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                         "params": {"name": "run_code", "arguments": {"language": "python",
                                                                      "code": "print(6*7)"}}},
                 version=LATEST)
    assert r.status_code == 200, r.text
    res = r.json()["result"]
    assert res["isError"] is False and res["structuredContent"]["stdout"] == "42\n", res


def test_http_run_code_typescript_in_a_sandbox_keeps_its_state(stack, api):
    """run_code's typescript: the sandbox's own typescript session, its
    types erased, what a cell declares there for the next one."""
    if not nbtest.image_present(nbtest.PYTHON_IMAGE):
        pytest.skip(f"{nbtest.PYTHON_IMAGE} not built")
    sid = http_initialize(stack).headers["Mcp-Session-Id"]
    box = api.create(image=nbtest.PYTHON_IMAGE)
    r = http_call(stack, sid, "run_code", {
        "sandbox_id": box, "language": "typescript", "timeout": 60,
        "code": "const n: number = 6\ninterface P { x: number }\nconst p: P = { x: 7 }"})
    assert r["isError"] is False, r
    r = http_call(stack, sid, "run_code", {"sandbox_id": box, "language": "typescript",
                                           "code": "console.log(n * p.x)"})
    assert r["isError"] is False and r["structuredContent"]["stdout"] == "42\n", r
    # a type error is not checked (types are erased), a syntax error is an error
    r = http_call(stack, sid, "run_code", {"sandbox_id": box, "language": "typescript",
                                           "code": "const q: = 1"})
    assert r["isError"] is True, r


def test_http_run_code_a_big_chart_reads_as_its_brief(stack, api):
    """A chart of many points is told as its brief (points counted); in full in structuredContent."""
    if not nbtest.image_present(nbtest.PYTHON_IMAGE):
        pytest.skip(f"{nbtest.PYTHON_IMAGE} not built")
    sid = http_initialize(stack).headers["Mcp-Session-Id"]
    box = api.create(image=nbtest.PYTHON_IMAGE)
    r = http_call(stack, sid, "run_code", {
        "sandbox_id": box, "timeout": 60,
        "code": "import matplotlib.pyplot as plt\nplt.figure(figsize=(3, 2), dpi=40)\n"
                "plt.plot(range(500), range(500), label='ramp')\nplt.title('Ramp')\nplt.show()"})
    assert r["isError"] is False, r
    text = "".join(c["text"] for c in r["content"] if c["type"] == "text")
    head = "--- chart (points counted; in full in the structured result) ---\n"
    assert head in text, text
    brief = json.loads(text.split(head)[1].split("\n")[0])
    assert brief["type"] == "line" and brief["title"] == "Ramp"
    assert brief["elements"] == [{"label": "ramp", "n_points": 500}], brief
    full = r["structuredContent"]["results"][0]["chart"]
    assert len(full["elements"][0]["points"]) == 500 and full["elements"][0]["points"][499] == [499, 499]


# ------------------------------------------------------- raw JSON-RPC lines

class McpProc:
    """`nanobox mcp` on pipes: send lines, read reply lines with a timeout."""

    def __init__(self, url, key, home):
        env = {k: v for k, v in os.environ.items() if not k.startswith("NANOBOX_") and k != "XDG_CONFIG_HOME"}
        env.update({"NANOBOX_URL": url, "NANOBOX_API_KEY": key, "HOME": str(home)})
        self.p = subprocess.Popen([str(CLI_BIN), "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=env)
        self.lines = queue.Queue()
        self.stderr = b""
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()
        self.next_id = 100

    def _read(self):
        for line in self.p.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _read_err(self):
        self.stderr = self.p.stderr.read()

    def send_raw(self, data: bytes):
        self.p.stdin.write(data)
        self.p.stdin.flush()

    def send(self, msg):
        self.send_raw(json.dumps(msg).encode() + b"\n")

    def recv(self, timeout=60):
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no reply within {timeout}s; stderr: {self.stderr[-2000:]!r}") from None
        assert line is not None, f"nanobox mcp closed stdout (exit {self.p.poll()}); stderr: {self.stderr[-2000:]!r}"
        assert line.endswith(b"\n")
        return json.loads(line)

    def no_reply(self, timeout=0.5):
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            return
        raise AssertionError(f"unexpected reply: {line!r}")

    def request(self, method, params=None, **kw):
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        r = self.recv(**kw)
        assert r["jsonrpc"] == "2.0" and r["id"] == self.next_id, r
        return r

    def initialize(self, version=LATEST):
        r = self.request("initialize", {"protocolVersion": version, "capabilities": {},
                                        "clientInfo": {"name": "pytest", "version": "0"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return r

    def call(self, name, arguments, **kw):
        r = self.request("tools/call", {"name": name, "arguments": arguments}, **kw)
        assert "result" in r, r
        return r["result"]

    def assert_serving(self):
        assert self.request("ping") ["result"] == {}

    def close(self):
        if self.p.poll() is None:
            self.p.stdin.close()
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        return self.p.returncode


@pytest.fixture
def mcp(stack, tmp_path):
    m = McpProc(stack.url, stack.api_key, tmp_path)
    yield m
    m.close()


@pytest.fixture
def mcp_dead(tmp_path):
    """`nanobox mcp` pointed at a port nothing listens on."""
    m = McpProc(f"http://127.0.0.1:{nbtest.free_port()}", "k", tmp_path)
    yield m
    m.close()


def assert_error(reply, code, id_=None, needle=None):
    assert "result" not in reply, reply
    assert reply["error"]["code"] == code, reply
    assert reply["id"] == id_, reply
    assert isinstance(reply["error"]["message"], str) and reply["error"]["message"]
    if needle:
        assert needle in reply["error"]["message"], reply


@pytest.mark.parametrize("version", VERSIONS)
def test_initialize_answers_the_clients_version_when_supported(mcp_dead, version):
    r = mcp_dead.initialize(version)["result"]
    assert r["protocolVersion"] == version
    assert r["capabilities"] == {"tools": {"listChanged": False}}
    assert r["serverInfo"]["name"] == "nanobox" and r["serverInfo"]["version"]


@pytest.mark.parametrize("version", ["2099-01-01", "1.0", ""])
def test_initialize_answers_the_latest_version_for_an_unsupported_one(mcp_dead, version):
    assert mcp_dead.initialize(version)["result"]["protocolVersion"] == LATEST


def test_initialize_without_protocol_version_is_invalid_params(mcp_dead):
    r = mcp_dead.request("initialize", {"capabilities": {}})
    assert_error(r, -32602, mcp_dead.next_id, "protocolVersion")
    mcp_dead.assert_serving()


def test_malformed_json_gets_parse_error_and_the_server_keeps_serving(mcp_dead):
    mcp_dead.initialize()
    for bad in (b"{not json\n", b'{"jsonrpc":"2.0","id":1,"method":"ping"\n', b"\xff\xfe\n",
                b'{"a":' + b"[" * 100 + b"]" * 100 + b"}\n"):
        mcp_dead.send_raw(bad)
        assert_error(mcp_dead.recv(), -32700)
        mcp_dead.assert_serving()


def test_over_long_line_gets_parse_error_and_the_server_keeps_serving(mcp_dead):
    mcp_dead.initialize()
    mcp_dead.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"' + b"a" * (MAX_MESSAGE + 10)
                      + b'"}}\n')
    assert_error(mcp_dead.recv(), -32700, None, "longer than")
    mcp_dead.assert_serving()


def test_blank_lines_and_crlf_are_accepted(mcp_dead):
    mcp_dead.send_raw(b"\n\r\n" + json.dumps({"jsonrpc": "2.0", "id": 5, "method": "ping"}).encode() + b"\r\n")
    assert mcp_dead.recv() == {"jsonrpc": "2.0", "id": 5, "result": {}}


@pytest.mark.parametrize("msg", [
    [1], "x", 3, None,
    {"id": 1, "method": "ping"},
    {"jsonrpc": "1.0", "id": 1, "method": "ping"},
    {"jsonrpc": "2.0", "id": 1},
    {"jsonrpc": "2.0", "id": 1, "method": 7},
    {"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"},
    {"jsonrpc": "2.0", "id": 1.5, "method": "ping"},
], ids=["array-of-number", "string", "number", "null", "no-jsonrpc", "jsonrpc-1.0", "no-method",
        "method-not-string", "id-object", "id-fraction"])
def test_invalid_requests_get_invalid_request(mcp_dead, msg):
    mcp_dead.initialize()
    mcp_dead.send(msg)
    r = mcp_dead.recv()
    if isinstance(msg, list):
        # one bad element of a batch, or the batch refused: -32600 either way
        r = r[0] if isinstance(r, list) else r
    assert r["error"]["code"] == -32600, r
    mcp_dead.assert_serving()


def test_ids_come_back_as_sent(mcp_dead):
    for id_ in ("abc", 0, -5, 2**53, "with \"quotes\" and ünïcode"):
        mcp_dead.send({"jsonrpc": "2.0", "id": id_, "method": "ping"})
        assert mcp_dead.recv() == {"jsonrpc": "2.0", "id": id_, "result": {}}


def test_unknown_method_gets_method_not_found(mcp_dead):
    mcp_dead.initialize()
    for method in ("resources/list", "nope", "tools/lis"):
        r = mcp_dead.request(method, {})
        assert_error(r, -32601, mcp_dead.next_id, method)
    mcp_dead.assert_serving()


def test_notifications_get_no_reply(mcp_dead):
    mcp_dead.initialize()
    mcp_dead.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
    mcp_dead.send({"jsonrpc": "2.0", "method": "some/unknown/notification"})
    mcp_dead.send({"jsonrpc": "2.0", "id": 9, "result": {}})   # a response: nothing to answer
    mcp_dead.no_reply()
    mcp_dead.assert_serving()


def test_params_that_are_not_an_object_get_invalid_params(mcp_dead):
    mcp_dead.initialize()
    mcp_dead.send({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": [1, 2]})
    assert_error(mcp_dead.recv(), -32602, 3)


@pytest.mark.parametrize("params,needle", [
    ({}, "name"),
    ({"name": 5}, "name"),
    ({"name": "no_such_tool", "arguments": {}}, "no_such_tool"),
    ({"name": "sandbox_list", "arguments": [1]}, "arguments"),
])
def test_tools_call_with_bad_params_gets_invalid_params(mcp_dead, params, needle):
    mcp_dead.initialize()
    assert_error(mcp_dead.request("tools/call", params), -32602, mcp_dead.next_id, needle)
    mcp_dead.assert_serving()


@pytest.mark.parametrize("tool,args,needle", [
    ("sandbox_exec", {"sandbox_id": "x"}, '"command"'),
    ("sandbox_exec", {"sandbox_id": "x", "command": 5}, '"command" must be a string'),
    ("sandbox_exec", {"sandbox_id": "x", "command": "true", "stdin": "y"}, 'unknown field "stdin"'),
    ("run_code", {"language": "ruby", "code": "1"}, "python"),
    ("run_code", {"language": "bash", "code": "ls"}, "sandbox_id"),
    ("run_code", {"code": "1", "context": "python"}, "sandbox_id"),
    ("run_code", {"sandbox_id": "x", "code": "1", "stdin": "y"}, "stdin"),
    ("sandbox_write_file", {"sandbox_id": "x", "path": "a", "content": "!!", "encoding": "base64"}, "base64"),
    ("sandbox_open_port", {"sandbox_id": "x", "port": "80"}, '"port" must be an integer'),
])
def test_tools_call_with_bad_arguments_is_an_error_result(mcp_dead, tool, args, needle):
    mcp_dead.initialize()
    r = mcp_dead.call(tool, args)
    assert r["isError"] is True
    assert needle in r["content"][0]["text"], r
    mcp_dead.assert_serving()


def test_unreachable_server_is_an_error_result_not_a_crash(mcp_dead):
    mcp_dead.initialize()
    r = mcp_dead.call("sandbox_list", {})
    assert r["isError"] is True and "no answer from the nanobox server" in r["content"][0]["text"], r
    mcp_dead.assert_serving()


def test_api_error_comes_back_with_the_api_message_and_code(mcp):
    mcp.initialize()
    sid = random_uuid()
    r = mcp.call("sandbox_exec", {"sandbox_id": sid, "command": "true"})
    assert r["isError"] is True
    text = r["content"][0]["text"]
    assert "not_found" in text and "HTTP 404" in text and sid in text, text
    r = mcp.call("sandbox_create", {"ttl": 10**9})
    assert r["isError"] is True and "out_of_range" in r["content"][0]["text"], r
    mcp.assert_serving()


def test_create_passes_on_timeout_and_refuses_a_word_it_does_not_know(mcp, api):
    mcp.initialize()
    r = mcp.call("sandbox_create", {"on_timeout": "pause", "ttl": 300})
    assert r["isError"] is False, r
    sid = r["structuredContent"]["sandboxId"]
    api.created.append(sid)
    assert parse_json(api.get(sid))["on_timeout"] == "pause"
    before = len(parse_json(api.request("GET", "/sandbox"))["sandboxes"])
    r = mcp.call("sandbox_create", {"on_timeout": "hibernate"})
    assert r["isError"] is True and "on_timeout" in r["content"][0]["text"], r
    assert len(parse_json(api.request("GET", "/sandbox"))["sandboxes"]) == before
    mcp.assert_serving()


def test_wrong_api_key_is_an_error_result(stack, tmp_path):
    m = McpProc(stack.url, "wrong-key", tmp_path)
    try:
        m.initialize()
        r = m.call("sandbox_list", {})
        assert r["isError"] is True and "unauthorized" in r["content"][0]["text"], r
    finally:
        m.close()


def test_structured_content_only_from_2025_06_18(mcp, api):
    sid = api.create(ttl=300)
    mcp.initialize("2025-03-26")
    r = mcp.call("sandbox_exec", {"sandbox_id": sid, "command": "echo hi"})
    assert "structuredContent" not in r and r["content"][0]["text"].startswith("exit_code: 0\n"), r
    mcp.initialize("2025-06-18")
    r = mcp.call("sandbox_exec", {"sandbox_id": sid, "command": "echo hi"})
    assert r["structuredContent"]["stdout"] == "hi\n", r


def test_batches_refused_in_2025_06_18_served_before(mcp_dead):
    batch = [{"jsonrpc": "2.0", "id": 1, "method": "ping"},
             {"jsonrpc": "2.0", "method": "notifications/initialized"},
             {"jsonrpc": "2.0", "id": 2, "method": "nope"}]
    mcp_dead.initialize("2025-06-18")
    mcp_dead.send(batch)
    assert_error(mcp_dead.recv(), -32600, None, "batch")
    mcp_dead.initialize("2025-03-26")
    mcp_dead.send(batch)
    r = mcp_dead.recv()
    assert isinstance(r, list) and len(r) == 2, r
    assert r[0] == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert r[1]["id"] == 2 and r[1]["error"]["code"] == -32601
    mcp_dead.send([])
    assert_error(mcp_dead.recv(), -32600)


def test_tools_list_before_initialize_works(mcp_dead):
    r = mcp_dead.request("tools/list")
    assert {t["name"] for t in r["result"]["tools"]} == TOOLS


def test_end_of_stdin_ends_the_server_cleanly(mcp_dead):
    mcp_dead.initialize()
    mcp_dead.send_raw(json.dumps({"jsonrpc": "2.0", "id": 77, "method": "ping"}).encode())  # no newline
    mcp_dead.p.stdin.close()
    assert mcp_dead.recv()["id"] == 77
    assert mcp_dead.p.wait(timeout=10) == 0


def test_stdio_scenario_by_hand_create_write_exec_read_destroy(mcp, api):
    """The scenario without the SDK, so a failure here points at the server."""
    mcp.initialize()
    r = mcp.call("sandbox_create", {"metadata": {"test": "mcp-raw"}})
    assert r["isError"] is False, r
    sid = r["structuredContent"]["sandboxId"]
    api.created.append(sid)
    r = mcp.call("sandbox_exec", {"sandbox_id": sid, "command": "echo out; echo err >&2; exit 4",
                                  "timeout": 20})
    assert r["content"][0]["text"] == ("exit_code: 4\ntimed_out: false\ntruncated: false\n"
                                       "--- stdout ---\nout\n--- stderr ---\nerr\n"), r
    r = mcp.call("sandbox_open_port", {"sandbox_id": sid, "port": 8123})
    assert r["isError"] is False, r
    url = r["structuredContent"]["url"]
    assert urlsplit(url).hostname == f"8123-{sid}.{nbtest.PORTS_DOMAIN}"
    assert f"url: {url}\n" in r["content"][0]["text"]
    r = mcp.call("sandbox_destroy", {"sandbox_id": sid})
    assert r["isError"] is False, r
    assert api.get(sid).status_code == 404


def test_duplicate_keys_get_invalid_request_and_the_server_keeps_serving(mcp_dead):
    mcp_dead.send_raw(b'{"jsonrpc":"2.0","id":5,"method":"ping","method":"tools/list"}\n')
    assert_error(mcp_dead.recv(), -32600, 5, 'field "method" given twice')
    mcp_dead.assert_serving()


def test_stdio_calls_run_concurrently_and_answer_out_of_order(mcp, api):
    """A quick call is not stuck behind a long one sent before it."""
    mcp.initialize()
    r = mcp.call("sandbox_create", {"metadata": {"test": "mcp-concurrent"}})
    sid = r["structuredContent"]["sandboxId"]
    api.created.append(sid)
    slow = {"jsonrpc": "2.0", "id": "slow", "method": "tools/call",
            "params": {"name": "sandbox_exec", "arguments": {"sandbox_id": sid, "command": "sleep 3; echo slow"}}}
    fast = {"jsonrpc": "2.0", "id": "fast", "method": "tools/call",
            "params": {"name": "sandbox_exec", "arguments": {"sandbox_id": sid, "command": "echo fast"}}}
    t0 = time.monotonic()
    mcp.send(slow)
    mcp.send(fast)
    first = mcp.recv(timeout=30)
    first_at = time.monotonic() - t0
    second = mcp.recv(timeout=30)
    assert first["id"] == "fast" and "--- stdout ---\nfast\n" in first["result"]["content"][0]["text"], first
    assert first_at < 2.5, first_at
    assert second["id"] == "slow" and "--- stdout ---\nslow\n" in second["result"]["content"][0]["text"], second
    mcp.assert_serving()


def test_stdio_progress_token_gets_progress_lines_then_the_reply(mcp, api):
    """Over a pipe: notifications/progress lines while the call runs, the reply last."""
    mcp.initialize()
    r = mcp.call("sandbox_create", {})
    sid = r["structuredContent"]["sandboxId"]
    api.created.append(sid)
    mcp.send({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
              "params": {"name": "sandbox_exec", "_meta": {"progressToken": "tok"},
                         "arguments": {"sandbox_id": sid, "command": "sleep 6; echo done", "timeout": 20}}})
    note = mcp.recv(timeout=30)
    assert note["method"] == "notifications/progress" and "id" not in note, note
    assert note["params"]["progressToken"] == "tok" and note["params"]["progress"] == 5, note
    assert note["params"]["total"] == 20, note
    reply = mcp.recv(timeout=30)
    assert reply["id"] == 9, reply
    assert reply["result"]["content"][0]["text"] == ("exit_code: 0\ntimed_out: false\ntruncated: false\n"
                                                     "--- stdout ---\ndone\n--- stderr ---\n"), reply
    # the watched command's entry is gone from the processes list
    assert api.request("GET", f"/sandbox/{sid}/processes").json()["processes"] == []


def test_stdio_cancelled_plain_call_kills_its_command_and_gets_no_reply(mcp, api):
    """Without a progressToken too: the call's connection is dropped, which kills the command."""
    mcp.initialize()
    sid = mcp.call("sandbox_create", {})["structuredContent"]["sandboxId"]
    api.created.append(sid)
    mcp.send({"jsonrpc": "2.0", "id": "long", "method": "tools/call",
              "params": {"name": "sandbox_exec", "arguments": {"sandbox_id": sid, "command": "sleep 302",
                                                               "timeout": 100}}})
    running = lambda: any("sleep 302" in line for line in nbtest.docker_top(f"nanobox-{sid}"))  # noqa: E731
    nbtest.wait_until(running, timeout=20, what="the command to start")
    mcp.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
              "params": {"requestId": "long", "reason": "test"}})
    nbtest.wait_until(lambda: not running(), timeout=10, what="the command to be killed")
    assert mcp.request("ping")["id"] != "long"  # the next line is the ping's reply, not the call's
    mcp.no_reply(timeout=1.5)


def test_help_and_usage(tmp_path):
    r = subprocess.run([str(CLI_BIN), "mcp", "--help"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0 and "Model Context Protocol" in r.stdout
    r = subprocess.run([str(CLI_BIN), "mcp", "extra"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "no arguments" in r.stderr


def test_package_lock_pins_the_sdk():
    pkg = json.loads((MCP_DIR / "package.json").read_text())
    lock = json.loads((MCP_DIR / "package-lock.json").read_text())
    pinned = pkg["dependencies"]["@modelcontextprotocol/sdk"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", pinned), pinned
    assert lock["packages"]["node_modules/@modelcontextprotocol/sdk"]["version"] == pinned
    assert "tests/mcp/node_modules" in (nbtest.REPO / ".gitignore").read_text()


def test_http_sandbox_create_from_a_template(stack, api):
    """sandbox_create's template: a built one, and the errors of one that is not there."""
    name = "mcp-" + secrets.token_hex(4)
    r = api.request("POST", "/templates", json={
        "name": name, "dockerfile": f"FROM {nbtest.IMAGE}\nRUN echo from-template > /etc/mcp-marker\n"})
    assert r.status_code == 202, r.text
    wait_until(lambda: api.request("GET", f"/templates/{name}").json()["status"] == "ready",
               timeout=180, what="the template to be ready")
    sid = http_initialize(stack).headers["Mcp-Session-Id"]
    r = http_call(stack, sid, "sandbox_create", {"template": name})
    assert r["isError"] is False, r
    box = r["structuredContent"]["sandboxId"]
    api.created.append(box)
    r = http_call(stack, sid, "sandbox_exec", {"sandbox_id": box, "command": "cat /etc/mcp-marker"})
    assert r["structuredContent"]["stdout"] == "from-template\n", r
    r = http_call(stack, sid, "sandbox_create", {"template": "no-such-template"})
    assert r["isError"] is True and "not_found" in r["content"][0]["text"], r
