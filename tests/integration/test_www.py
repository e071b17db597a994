"""test_www.py - the web console (www/), served by the standalone nginx and
driven in Debian's chromium by tests/www/console.mjs (playwright-core, pinned
in tests/www/package.json, installed with npm ci when missing).

What a person does with it: types the key (a wrong one first), creates a
sandbox, runs a command and sees its output stream in, stops a long one,
lists files, enters a directory, uploads and downloads a file, opens a port
on an app running in the sandbox and visits it in the browser, closes the
port, sees an API error, destroys the sandbox. The checks here are on what
is then true on the host: the bytes in the sandbox, the page behind the
port, the container gone from `docker ps`, no forwarder left.

And the Code panel (console.mjs --part code), in a sandbox of the code
interpreter's image created from the form: `x = 41` then `print(x + 1)`
shows 42, a matplotlib plot shows as an image that decoded, `df.head()`
shows its table inside a sandboxed frame (never in the page itself), an
exception shows its traceback in red, Interrupt stops a sleeping cell and
the session lives on.
"""
import json
import shutil
import subprocess

import pytest
import requests

import nbtest

WWW_TESTS = nbtest.REPO / "tests" / "www"
DRIVER = WWW_TESTS / "console.mjs"


@pytest.fixture(scope="module")
def browser_env():
    node = nbtest.node_package(WWW_TESTS, "playwright-core")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.fail("the web console test needs chromium (tests/run.sh installs it: apt install chromium)")
    return node, chromium


def test_console_is_served_with_its_headers_and_the_api_is_unchanged(stack, api):
    r = requests.get(stack.url + "/", timeout=10)
    assert r.status_code == 200, r.text[:300]
    assert r.headers["content-type"].startswith("text/html"), r.headers
    csp = r.headers.get("content-security-policy", "")
    assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp, r.headers
    assert r.headers.get("x-content-type-options") == "nosniff", r.headers
    assert 'id="key"' in r.text and "app.js" in r.text
    # every asset the page names is served with its own type
    for asset, ctype in (("app.js", "javascript"), ("style.css", "text/css")):
        src = next(part.split('"')[0] for part in r.text.split('="')[1:]
                   if part.split('"')[0].endswith(asset))
        a = requests.get(requests.compat.urljoin(stack.url + "/", src), timeout=10)
        assert a.status_code == 200 and ctype in a.headers["content-type"], (src, a.status_code, a.headers)
    # the API around it answers as before
    assert api.request("GET", "/healthz").json()["status"] == "ok"
    nbtest.assert_error(requests.get(stack.url + "/nope", timeout=10), 404, "no_route")
    nbtest.assert_error(requests.get(stack.url + "/sandbox", timeout=10), 401, "unauthorized")


def test_a_person_uses_the_console_end_to_end(stack, api, browser_env):
    node, chromium = browser_env
    r = subprocess.run([node, str(DRIVER), "--url", stack.url, "--key", stack.api_key, "--chromium", chromium],
                       cwd=WWW_TESTS, capture_output=True, text=True, timeout=600)
    lines = [line for line in r.stdout.splitlines() if line.strip()]
    summary = json.loads(lines[-1]) if lines else {}
    sid = summary.get("sandboxId")
    try:
        assert r.returncode == 0, f"console.mjs -> {r.returncode}\n{r.stderr[-6000:]}\n{r.stdout[-2000:]}"
        assert summary["page_errors"] == [], summary["page_errors"]
        assert "unauthorized" in summary["wrong_key_error"] or "API key" in summary["wrong_key_error"], summary
        assert summary["created_ttl"] == 300, summary
        # streamed: "first" was on the page while the command slept 3 s, with no exit code yet
        assert summary["first_output_ms"] < 2500, summary
        assert summary["exit_code_while_running"] == "", summary
        assert summary["exit_code"] == "3", summary
        assert "first" in summary["output"] and "second" in summary["output"], summary
        assert "oops" in summary["stderr"], summary
        # Stop on the page ended the command in the sandbox
        assert summary["sleeps_left_after_stop"] == "0", summary
        assert summary["upload_roundtrip_sha256"] == summary["upload_sha256"], summary
        assert summary["download_name"] == "hello.txt" and summary["download"] == "hello", summary
        assert summary["path_after_enter"].rstrip("/") == "/workspace/sub", summary
        assert summary["port_url"].startswith(f"http://8000-{sid}.{nbtest.PORTS_DOMAIN}:"), summary
        assert summary["port_page_has_listing"], summary
        assert summary["ports_after_close"].get("ports") == [], summary
        assert "out_of_range" in summary["bad_port_error"], summary
        assert summary["status_after_destroy"] == 404, summary
        # what is left on the host: nothing
        assert nbtest.docker_ps(stack.instance, sandbox=sid) == []
        left = subprocess.run(["pgrep", "-f", f"nanobox-fwd.*{sid}"], capture_output=True, text=True).stdout
        assert left.strip() == "", f"forwarders left for {sid}: {left}"
    finally:
        if sid:
            api.request("DELETE", f"/sandbox/{sid}")


@nbtest.needs_image(nbtest.PYTHON_IMAGE)
def test_a_person_runs_code_cells_in_the_console(stack, api, browser_env):
    node, chromium = browser_env
    r = subprocess.run([node, str(DRIVER), "--url", stack.url, "--key", stack.api_key, "--chromium", chromium,
                        "--part", "code", "--python-image", nbtest.PYTHON_IMAGE],
                       cwd=WWW_TESTS, capture_output=True, text=True, timeout=600)
    lines = [line for line in r.stdout.splitlines() if line.strip()]
    summary = json.loads(lines[-1]) if lines else {}
    sid = summary.get("sandboxId")
    try:
        assert r.returncode == 0, f"console.mjs --part code -> {r.returncode}\n{r.stderr[-6000:]}\n{r.stdout[-2000:]}"
        assert summary["page_errors"] == [], summary["page_errors"]
        assert summary["image"] == nbtest.PYTHON_IMAGE, summary
        assert summary["cell_set"] == {"status": "ok", "out": ""}, summary
        assert summary["cell_get"] == {"status": "ok", "out": "42\n"}, summary
        # the plot: an <img> of a data: URL that the browser decoded
        assert summary["plot_image"]["src"] == "data:image/png;base64,", summary
        assert summary["plot_image"]["naturalWidth"] > 0 and summary["plot_image"]["naturalHeight"] > 0, summary
        # df.head(): a table inside <iframe sandbox="" srcdoc>, none in the console's DOM
        assert summary["df_iframe"] == {"sandbox": "", "srcdoc": True}, summary
        assert summary["df_rows"] == 3 and "z" in summary["df_text"], summary
        assert summary["tables_in_page"] == 0, summary
        assert summary["cell_error"]["status"] == "error", summary
        assert "before" in summary["cell_error"]["out"], summary
        assert "ZeroDivisionError" in summary["error_text"], summary
        assert summary["error_color"] != summary["stdout_color"], summary    # the traceback in red
        assert summary["cell_interrupted"]["status"] in ("interrupted", "error"), summary
        assert "tick" in summary["cell_interrupted"]["out"], summary
        assert summary["interrupt_ms"] < 15000, summary
        assert summary["after_interrupt"] == {"status": "ok", "out": "41\n"}, summary
    finally:
        if sid:
            api.request("DELETE", f"/sandbox/{sid}")
