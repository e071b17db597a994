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

And (--part manage) the list sorted newest first and narrowed by the
filter, pause and resume through their buttons; (--part templates) a
template built from the Templates page with its log streaming in, a
sandbox created from it, the template deleted; (--part snapshot) the
Snapshot button of an open sandbox: its name asked for, the template shown
under the card (layout checked at 375 and 1440 px), then on the Templates
page and chosen in the create form, the new sandbox holding the files;
(--part layout) the page at
375 px and 1440 px: screenshots taken, and their geometry checked (nothing
wider than the viewport, no sideways scroll, no overlapping buttons, every
Delete button on screen); (--part terminal) the Terminal card: xterm.js on
a PTY session, `echo $((6*7))` typed shows 42, vim draws and quits, the PTY
follows the window's size (stty size) at three widths, with the layout
checked and screenshots at 375 and 1440 px, the exit code shown, Hang up
kills what ran in it. And the vendored xterm.js files are served as
committed (www/vendor/SHA256SUMS).
"""
import hashlib
import json
import os
import re
import secrets
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


def run_part(stack, browser_env, part, *extra):
    """console.mjs --part PART: (returncode, stderr, stdout, summary)."""
    node, chromium = browser_env
    r = subprocess.run([node, str(DRIVER), "--url", stack.url, "--key", stack.api_key, "--chromium", chromium,
                        "--part", part, *extra],
                       cwd=WWW_TESTS, capture_output=True, text=True, timeout=600)
    lines = [line for line in r.stdout.splitlines() if line.strip()]
    summary = json.loads(lines[-1]) if lines else {}
    return r.returncode == 0, f"console.mjs --part {part} -> {r.returncode}\n{r.stderr[-6000:]}\n{r.stdout[-3000:]}", summary


def delete_all(api, summary):
    for sid in summary.get("sandboxIds", []):
        api.request("DELETE", f"/sandbox/{sid}")


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
    ok, out, summary = run_part(stack, browser_env, "console")
    sid = summary.get("sandboxId")
    try:
        assert ok, out
        assert summary["page_errors"] == [], summary["page_errors"]
        assert "unauthorized" in summary["wrong_key_error"] or "API key" in summary["wrong_key_error"], summary
        assert summary["created_ttl"] == 300, summary
        assert summary["created_metadata"] == {"owner": "www-console"}, summary
        # the create form is empty again after a create
        assert summary["form_after_create"] == {"ttl": "", "metadata": ""}, summary
        # streamed: "first" was on the page while the command slept 3 s, with no exit code yet
        assert summary["first_output_ms"] < 2500, summary
        assert summary["exit_code_while_running"] == "", summary
        assert summary["exit_code"] == "3", summary
        assert "first" in summary["output"] and "second" in summary["output"], summary
        assert "oops" in summary["stderr"], summary
        # a non-zero exit code stands out (marked, and drawn unlike a 0)
        assert summary["exit_look_failed"]["bad"] is True, summary
        assert summary["exit_code_ok"] == "0" and summary["exit_look_ok"]["bad"] is False, summary
        assert summary["exit_look_failed"]["background"] != summary["exit_look_ok"]["background"], summary
        # the file a command wrote was listed without a click on List
        assert "made-by-cmd.txt" not in summary["listed_before_cmd"], summary
        assert "files refreshed after a command" in summary["steps"], summary
        # Stop on the page ended the command in the sandbox
        assert summary["sleeps_left_after_stop"] == "0", summary
        assert summary["upload_roundtrip_sha256"] == summary["upload_sha256"], summary
        assert summary["download_name"] == "hello.txt" and summary["download"] == "hello", summary
        assert summary["path_after_enter"].rstrip("/") == "/workspace/sub", summary
        assert summary["port_url"].startswith(f"http://8000-{sid}.{nbtest.PORTS_DOMAIN}:"), summary
        assert summary["port_page_has_listing"], summary
        assert summary["ports_after_close"].get("ports") == [], summary
        assert "out_of_range" in summary["bad_port_error"], summary
        # Destroy asked first, naming the sandbox; "no" kept it
        assert sid in summary["destroy_dialog"] and "Destroy" in summary["destroy_dialog"], summary
        assert summary["status_after_no"] == 200 and summary["open_after_no"] == sid, summary
        assert summary["status_after_destroy"] == 404, summary
        # what is left on the host: nothing
        assert nbtest.docker_ps(stack.instance, sandbox=sid) == []
        left = subprocess.run(["pgrep", "-f", f"nanobox-fwd.*{sid}"], capture_output=True, text=True).stdout
        assert left.strip() == "", f"forwarders left for {sid}: {left}"
    finally:
        if sid:
            api.request("DELETE", f"/sandbox/{sid}")
        delete_all(api, summary)


@nbtest.needs_image(nbtest.PYTHON_IMAGE)
def test_a_person_runs_code_cells_in_the_console(stack, api, browser_env):
    ok, out, summary = run_part(stack, browser_env, "code", "--python-image", nbtest.PYTHON_IMAGE)
    sid = summary.get("sandboxId")
    try:
        assert ok, out
        assert summary["page_errors"] == [], summary["page_errors"]
        assert summary["image"] == nbtest.PYTHON_IMAGE, summary
        assert summary["cell_set"] == {"status": "ok", "out": ""}, summary
        assert summary["cell_get"] == {"status": "ok", "out": "42\n"}, summary
        # the plot: an <img> of a data: URL that the browser decoded
        assert summary["plot_image"]["src"] == "data:image/png;base64,", summary
        assert summary["plot_image"]["naturalWidth"] > 0 and summary["plot_image"]["naturalHeight"] > 0, summary
        # and what it plots, as text from the chart's data, folded under it
        chart = summary["plot_chart"]
        assert chart["open"] is False and chart["summary"] == "line chart \u00b7 1 element", chart
        assert chart["data"] == "Line 0 (3 points)\n1\t1\n2\t4\n3\t9", chart
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
        assert summary["ts_set"] == {"status": "ok", "out": ""}, summary
        assert summary["ts_get"] == {"status": "ok", "out": "42\n"}, summary
    finally:
        if sid:
            api.request("DELETE", f"/sandbox/{sid}")


def test_the_list_sorts_filters_and_pauses_and_resumes(stack, api, browser_env):
    ok, out, s = run_part(stack, browser_env, "manage")
    try:
        assert ok, out
        assert s["page_errors"] == [], s["page_errors"]
        older, newer = s["older"], s["newer"]
        assert s["order"] == [newer, older], s          # newest first
        # the filter: metadata key=value, an id (any case), a value both share, nothing
        assert s["filter_meta"]["ids"] == [older], s
        assert s["filter_id"]["ids"] == [newer], s
        assert s["filter_batch"]["ids"] == [newer, older] and s["filter_batch"]["count"].startswith("2 of "), s
        assert s["filter_none"]["ids"] == [] and s["filter_none_visible"], s
        assert "filter" in s["filter_none_text"], s
        assert s["filter_cleared"] >= 2, s
        # pause through the button: the API says paused, the page shows it, and it stands out
        assert s["resume_hidden_while_running"] is True, s
        assert s["paused_api_state"] == "paused", s
        assert s["paused_list_badge"] == "paused" and s["paused_detail_badge"] == "paused", s
        assert s["paused_badge_bg"] != s["running_badge_bg"], s
        assert s["paused_note_visible"] is True and s["pause_hidden_while_paused"] is True, s
        assert "409" in s["exec_while_paused_error"] and "paused" in s["exec_while_paused_error"], s
        # resume: running again, and a command runs
        assert s["resumed_api_state"] == "running" and s["paused_note_after_resume"] is False, s
        assert s["exec_after_resume"] == {"exit": "0", "output": "hi\n"}, s
        for sid in (older, newer):
            assert api.get(sid).status_code == 404
    finally:
        delete_all(api, s)


def test_a_template_is_built_from_the_console_and_a_sandbox_started_from_it(stack, api, browser_env, tmp_path):
    name = "www-" + secrets.token_hex(4)
    ok, out, s = run_part(stack, browser_env, "templates", "--template-name", name, "--base-image", nbtest.IMAGE,
                          "--shots", str(tmp_path))
    try:
        assert ok, out
        assert s["page_errors"] == [], s["page_errors"]
        assert s["hash"] == "#templates", s
        assert s["operator_template_has_delete"] is False, s
        # the log came in while the build ran, then its status: ready
        assert s["status_at_first_log"] == "", s
        assert any(x["len"] > 0 and x["status"] == "" for x in s["log_seen"]), s["log_seen"]
        assert "Step 1" in s["log_text"] and "echo hi > /etc/x" in s["log_text"], s["log_text"]
        assert s["log_end_status"] == "ready", s
        assert s["name_after_build"] == "", s
        assert s["api_template"]["status"] == "ready" and s["api_template"]["kind"] == "build", s
        assert "ready" in s["item_text"], s
        # at a phone's width, the built template's buttons (Delete too) are on screen
        m = s["layout_375"]
        assert m["scrollWidth"] <= 375 and m["outside"] == [] and m["overlaps"] == [], m
        assert any(d["what"].startswith("button.delete") for d in m["deletes"]), m
        assert all(0 <= d["left"] and d["right"] <= 375 for d in m["deletes"]), m
        assert nbtest.png_size((tmp_path / "templates-built-375.png").read_bytes())[0] == 375
        # a sandbox of it, from its button: its image, and the file the RUN wrote
        assert s["sandbox_image"] == s["api_template"]["image"], s
        assert s["cat_output"] == "hi\n", s
        assert s["destroy_dialog"], s
        # deleting asked first; "no" kept it, "yes" removed it
        assert name in s["delete_dialog"], s
        assert s["status_after_no"] == 200 and s["status_after_yes"] == 404, s
        assert not nbtest.image_present(s["api_template"]["image"])
    finally:
        delete_all(api, s)
        api.request("DELETE", f"/templates/{name}?force=1")


def test_volumes_are_listed_and_mounted_from_the_console(stack, api, browser_env):
    name = "www-" + secrets.token_hex(4)
    ok, out, s = run_part(stack, browser_env, "volumes", "--template-name", name)
    try:
        assert ok, out
        assert s["page_errors"] == [], s["page_errors"]
        assert name in s["volume_item"] and "16" in s["volume_item"], s
        df, ls = s["df"].splitlines()
        assert df.endswith(" /data") and int(df.split()[1]) <= 16 * 1024 and ls == "ok", s
        assert "name:/path" in s["bad_error"] and s["sandboxes_after_bad"] == 1, s
    finally:
        delete_all(api, s)
        api.request("DELETE", f"/volumes/{name}")


def test_a_sandbox_is_snapshotted_from_the_console_and_a_sandbox_started_from_it(stack, api, browser_env,
                                                                                tmp_path):
    name = "www-snap-" + secrets.token_hex(4)
    ok, out, s = run_part(stack, browser_env, "snapshot", "--template-name", name, "--shots", str(tmp_path))
    try:
        assert ok, out
        assert s["page_errors"] == [], s["page_errors"]
        assert s["result_hidden_before"] is True, s
        # the name is asked for; dismissing the question makes nothing
        assert s["prompt"]["type"] == "prompt" and "Name" in s["prompt"]["message"], s
        assert s["templates_after_cancel"] == s["templates_before"], s
        assert s["result_hidden_after_cancel"] is True, s
        # the template (the name trimmed), ready, of that sandbox, which runs on
        t = s["api_template"]
        assert t["name"] == name and t["kind"] == "snapshot" and t["status"] == "ready", t
        assert t["parent"] == s["source"], t
        assert s["source_state_after"] == "running", s
        assert name in s["result_text"] and "ready" in s["result_text"], s
        assert s["result_status"] == "ready", s
        assert s["in_create_list"] is True, s
        # the layout holds with it shown, at both widths
        for width in ("1440", "375"):
            m = s["layout"][width]
            where = f"at {width} px: {m}"
            assert m["scrollWidth"] <= int(width) and m["outside"] == [] and m["overlaps"] == [], where
            assert 0 <= m["result"]["left"] and m["result"]["right"] <= int(width), where
            assert m["result"]["button"] <= int(width), where
            assert nbtest.png_size((tmp_path / f"snapshot-{width}.png").read_bytes())[0] == int(width)
        # on the Templates page as a snapshot, deletable, without a build log
        assert "snapshot of " + s["source"][:8] in s["listed_text"], s
        assert s["listed_has_delete"] is True and s["listed_has_log"] is False, s
        # chosen at create: the new sandbox runs the snapshot's image and has the files
        assert s["child_image"] == t["image"], s
        assert s["result_hidden_on_child"] is True, s
        assert s["child_output"] == f"{s['tag']}\ntmp-{s['tag']}", s
        for sid in (s["source"], s["child"]):
            assert api.get(sid).status_code == 404
    finally:
        delete_all(api, s)
        api.request("DELETE", f"/templates/{name}?force=1")
    assert api.request("GET", f"/templates/{name}").status_code == 404
    assert not nbtest.image_present(t["image"])


def test_the_layout_holds_at_phone_and_desktop_widths(stack, api, browser_env, tmp_path):
    ok, out, s = run_part(stack, browser_env, "layout", "--shots", str(tmp_path))
    try:
        assert ok, out
        assert s["page_errors"] == [] and s["page_errors_layout"] == [], s
        for width in (1440, 375):
            for view in ("sandboxes", "templates"):
                m = s["layout"][str(width)][view]
                where = f"{view} at {width} px: {m}"
                assert m["viewport"] == width, where
                # nothing scrolls sideways, nothing sticks out, no button covers another
                assert m["scrollWidth"] <= width and m["bodyScrollWidth"] <= width, where
                assert m["outside"] == [], where
                assert m["overlaps"] == [], where
                # the full-page screenshot is as wide as the screen (it would be wider if anything overflowed)
                png = (tmp_path / f"{view}-{width}.png").read_bytes()
                assert nbtest.png_size(png)[0] == width, where
            # the Delete buttons of the files table, and the Destroy ones, are all on screen
            deletes = s["layout"][str(width)]["sandboxes"]["deletes"]
            assert any(d["what"].startswith("button.delete") for d in deletes), deletes
            assert any(d["what"] == "button#destroy.danger" for d in deletes), deletes
            for d in deletes:
                assert 0 <= d["left"] and d["right"] <= width and d["width"] > 20, (width, d)
    finally:
        delete_all(api, s)


# vim in the sandbox: the image's own, or the host's with the libraries it
# links (the images carry no editor; host and images are the same Debian)
def vim_in_sandbox(api, sid):
    if api.exec(sid, "command -v vim")["exit_code"] == 0:
        return "vim -u NONE /workspace/hello.txt"
    host_vim = shutil.which("vim.basic") or shutil.which("vim")
    if host_vim is None:
        return ""
    ldd = subprocess.run(["ldd", host_vim], capture_output=True, text=True, check=True).stdout
    libs = [line.split("=>")[1].split()[0] for line in ldd.splitlines()
            if "=>" in line and line.split("=>")[1].strip().startswith("/")]
    for path in [host_vim] + [lib for lib in libs if not re.search(r"/(libc|libm|ld-linux[^/]*)\.so", lib)]:
        with open(path, "rb") as f:
            name = "vim" if path == host_vim else os.path.basename(path)
            r = api.request("PUT", f"/sandbox/{sid}/files?path=/workspace/.vim/{name}", data=f.read(), timeout=60)
            assert r.status_code in (200, 201), (path, r.status_code, r.text)
    assert api.exec(sid, "chmod 755 /workspace/.vim/vim")["exit_code"] == 0
    return "LD_LIBRARY_PATH=/workspace/.vim /workspace/.vim/vim -u NONE /workspace/hello.txt"


def test_a_person_uses_a_terminal_in_the_console(stack, api, browser_env, tmp_path):
    sid = api.create(ttl=300, metadata={"owner": "www-terminal"})
    r = api.request("PUT", f"/sandbox/{sid}/files?path=/workspace/hello.txt", data=b"hello\n")
    assert r.status_code in (200, 201), r.text
    vim = vim_in_sandbox(api, sid)
    ok, out, s = run_part(stack, browser_env, "terminal", "--sandbox", sid, "--vim", vim or "", "--shots", str(tmp_path))
    assert ok, out
    assert s["page_errors"] == [], s["page_errors"]     # CSP refusals of xterm's styles would be here
    assert s["terminal_state_before"] == "", s
    assert s["pid"] > 0, s
    assert s["xterm_rows_styled"] > 0, s
    # typed keys reached the shell, the answer is on the screen
    assert "42" in s["echo_rows"] and any("echo $((6*7))" in r for r in s["echo_rows"]), s
    if vim:
        assert s["vim_tildes"] >= 5, s["vim_screen"]
        assert "hello.txt" in s["vim_last_row"], s["vim_screen"]
        assert s["vim_first_row"] == "hello", s["vim_screen"]
    else:
        pytest.fail("no vim in the image or on the host to try a full-screen program with (apt install vim)")
    # each window size: the page's cols x rows is what the PTY has (stty size)
    seen = set()
    for width in ("1440", "375", "900"):
        z = s["sizes"][width]
        assert z["stty"] == z["page"], (width, z)
        seen.add((z["page"]["cols"], z["page"]["rows"]))
    assert len(seen) == 3, s["sizes"]
    assert s["sizes"]["375"]["page"]["cols"] < s["sizes"]["1440"]["page"]["cols"], s["sizes"]
    assert s["sizes"]["900"]["page"]["rows"] < s["sizes"]["1440"]["page"]["rows"], s["sizes"]
    for width in (1440, 375):
        m = s["sizes"][str(width)]["layout"]
        assert m["viewport"] == width and m["scrollWidth"] <= width and m["bodyScrollWidth"] <= width, m
        assert m["outside"] == [] and m["overlaps"] == [], m
        assert s["sizes"][str(width)]["box"]["width"] <= width, s["sizes"]
        assert nbtest.png_size((tmp_path / f"terminal-{width}.png").read_bytes())[0] == width
    # the exit code of the shell, marked
    assert s["exit_code"] == "3" and s["exit_bad"] is True and s["open_enabled_after_exit"], s
    # keys typed while the terminal was still connecting reached its shell
    assert s["typed_ahead_state"] == "connecting", s
    # Hang up killed what ran on the terminal
    assert s["sleeps_before_hangup"] == "1" and s["state_after_hangup"] == "closed", s
    assert s["sleeps_after_hangup"] == "0", s


def test_xterm_is_served_from_the_console_as_vendored(stack):
    sums = (nbtest.REPO / "www" / "vendor" / "SHA256SUMS").read_text().split("\n")
    for line in filter(None, sums):
        digest, name = line.split()
        r = requests.get(f"{stack.url}/console/vendor/{name}", timeout=10)
        assert r.status_code == 200, (name, r.status_code)
        assert hashlib.sha256(r.content).hexdigest() == digest, name
        if name.endswith(".js"):
            assert "javascript" in r.headers["content-type"], r.headers
            # the page's own CSP goes with them
            assert "script-src 'self'" in r.headers.get("content-security-policy", ""), r.headers
    page = requests.get(stack.url + "/", timeout=10).text
    assert "/console/vendor/xterm/xterm.css" in page
