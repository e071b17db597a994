"""
The nanobox command-line client against the live service: every subcommand,
exit statuses (the command's own for exec and run), readable errors, --json,
and where the URL and key come from (flag > env > cli.conf).

The binary is $NANOBOX_BUILD/nanobox. Each run gets a clean environment: a
HOME of its own (so no real ~/.config/nanobox/cli.conf is read) and no
NANOBOX_* variables other than the ones a test sets.
"""

import functools
import hashlib
import io
import json
import os
import re
import secrets
import socket
import subprocess
import tarfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

import nbtest
from nbtest import UUID_RE, free_port, wait_until

CLI_BIN = nbtest.BUILD / "nanobox"


@pytest.fixture(scope="module", autouse=True)
def _cli_built():
    if not CLI_BIN.exists():
        pytest.fail(f"{CLI_BIN} not found: build it (make nanobox) or point NANOBOX_BUILD at the build dir")


class Cli:
    """Runs the nanobox binary against the test stack; ids it creates are
    handed to the api fixture, which deletes them when the test ends."""

    def __init__(self, stack, api, home):
        self.stack = stack
        self.api = api
        self.home = home

    def env(self, url=True, key=True, extra=None):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("NANOBOX_") and k != "XDG_CONFIG_HOME"}
        env["HOME"] = str(self.home)
        if url:
            env["NANOBOX_URL"] = self.stack.url
        if key:
            env["NANOBOX_API_KEY"] = self.stack.api_key
        env.update(extra or {})
        return env

    def run(self, *args, url=True, key=True, env=None, input=None, timeout=120):  # noqa: A002
        return subprocess.run([str(CLI_BIN), *map(str, args)], env=self.env(url, key, env),
                              input=input, capture_output=True, text=True, timeout=timeout)

    def ok(self, *args, **kw):
        r = self.run(*args, **kw)
        assert r.returncode == 0, f"nanobox {args} -> {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}"
        return r

    def create(self, *args):
        r = self.ok("create", *args)
        sid = r.stdout.strip()
        assert UUID_RE.match(sid), f"create printed {r.stdout!r}"
        self.api.created.append(sid)
        return sid

    def conf(self, text):
        d = self.home / ".config" / "nanobox"
        d.mkdir(parents=True, exist_ok=True)
        (d / "cli.conf").write_text(text)


@pytest.fixture
def cli(stack, api, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    return Cli(stack, api, home)


def assert_readable_error(r, *needles):
    """Exit 1, a "nanobox: ..." line on stderr that holds each needle, and no
    JSON dumped anywhere."""
    assert r.returncode == 1, f"exit {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}"
    assert r.stderr.startswith("nanobox: "), r.stderr
    for n in needles:
        assert n in r.stderr, f"{n!r} not in {r.stderr!r}"
    assert "{" not in r.stderr and r.stdout == "", (r.stdout, r.stderr)


# ---------------------------------------------------------------- lifecycle

def test_create_prints_the_id_and_ls_lists_it(cli, api):
    sid = cli.create("--ttl", "600")
    ls = cli.ok("ls").stdout.splitlines()
    assert ls[0].split() == ["ID", "IMAGE", "EXPIRES", "IN", "MEMORY", "CPUS", "METADATA"]
    row = [line for line in ls if line.startswith(sid)]
    assert len(row) == 1, ls
    assert nbtest.IMAGE in row[0] and "256M" in row[0] and "0.5" in row[0]


def test_create_passes_limits_env_and_metadata(cli, api):
    tag = secrets.token_hex(4)
    sid = cli.create("--memory", "128m", "--cpus", "0.25", "--pids", "64", "--ttl", "300",
                     "--env", "GREETING=hello world", "--meta", f"owner={tag}", "--meta", "task=t-1",
                     "--network", "none")
    info = nbtest.parse_json(api.get(sid))
    assert info["memory"] == 128 * 1024 * 1024
    assert info["cpus"] == 0.25 and info["pids"] == 64 and info["network"] == "none"
    assert info["metadata"] == {"owner": tag, "task": "t-1"}
    assert info["ttl"] == 300
    assert api.exec(sid, "echo $GREETING")["stdout"] == "hello world\n"
    row = [line for line in cli.ok("ls").stdout.splitlines() if line.startswith(sid)][0]
    assert "128M" in row and "0.25" in row and f"owner={tag},task=t-1" in row


def test_ls_meta_filters(cli, api):
    tag = secrets.token_hex(4)
    mine = cli.create("--meta", f"owner={tag}", "--meta", "note=a b&c=d")
    other = cli.create("--meta", f"owner={tag}-other")
    out = cli.ok("ls", "--meta", f"owner={tag}").stdout
    assert mine in out and other not in out
    # values with spaces, & and = survive the query string
    out = cli.ok("ls", "--meta", f"owner={tag}", "--meta", "note=a b&c=d").stdout
    assert mine in out and other not in out
    out = cli.ok("ls", "--meta", "note=a b").stdout
    assert mine not in out


def test_info_shows_the_sandbox_and_accepts_an_id_prefix(cli, api):
    sid = cli.create("--meta", "owner=info-test")
    for arg in (sid, sid[:8], sid.upper(), sid[:8].upper()):
        out = cli.ok("info", arg).stdout
        fields = dict(re.split(r"\s{2,}", line, maxsplit=1) for line in out.splitlines())
        assert fields["id"] == sid
        assert fields["status"] == "running"
        assert fields["image"] == nbtest.IMAGE
        assert fields["memory"] == "256M" and fields["cpus"] == "0.5" and fields["pids"] == "128"
        assert fields["metadata"] == "owner=info-test"
        assert re.match(r"in \d+m \d+s \(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\)$", fields["expires"])


def test_unknown_id_prefix_is_a_readable_error(cli):
    r = cli.run("info", "0000000000")
    assert_readable_error(r, 'no live sandbox has an id starting with "0000000000"')


def test_ttl_sets_a_new_expiry(cli, api):
    sid = cli.create("--ttl", "600")
    before = nbtest.parse_json(api.get(sid))["expires_at"]
    out = cli.ok("ttl", sid, "3000").stdout
    assert out.startswith(f"{sid} expires in ")
    after = nbtest.parse_json(api.get(sid))["expires_at"]
    assert after - before >= 2390
    assert abs(after - (time.time() + 3000)) < 10


def test_pause_and_resume(cli, api):
    sid = cli.create("--ttl", "600", "--auto-resume")
    assert nbtest.parse_json(api.get(sid))["auto_resume"] is True
    out = cli.ok("pause", sid[:8]).stdout
    assert re.match(rf"{sid} paused \(\d+m \d+s of TTL left\)$", out.strip()), out
    info = cli.ok("info", sid).stdout
    assert re.search(r"^status +paused$", info, re.M), info
    assert re.search(r"^paused +until \d{4}-", info, re.M), info
    assert nbtest.docker_inspect(f"nanobox-{sid}")["State"]["Paused"] is True
    out = cli.ok("resume", sid).stdout
    assert out.startswith(f"{sid} running ("), out
    assert nbtest.docker_inspect(f"nanobox-{sid}")["State"]["Paused"] is False
    r = cli.run("pause", "00000000-0000-4000-8000-000000000000")
    assert_readable_error(r, "(not_found, HTTP 404)")
    r = cli.run("resume")
    assert r.returncode == 2 and "which sandbox?" in r.stderr, r.stderr


def test_pause_without_memory(cli, api):
    sid = cli.create("--ttl", "600")
    api.exec(sid, "echo kept > /workspace/f")
    out = cli.ok("pause", sid, "--no-memory").stdout
    assert out.startswith(f"{sid} paused ("), out
    assert nbtest.parse_json(api.get(sid))["memory_released"] is True
    assert not nbtest.docker_exists(f"nanobox-{sid}")
    assert cli.ok("resume", sid).stdout.startswith(f"{sid} running (")
    assert api.exec(sid, "cat /workspace/f")["stdout"] == "kept\n"
    r = cli.run("resume", sid, "--no-memory")
    assert r.returncode == 2, r.stderr  # resume takes no such option


def test_on_timeout_pause_is_sent_and_a_bad_word_is_a_usage_error(cli, api):
    sid = cli.create("--ttl", "600", "--on-timeout", "pause")
    assert nbtest.parse_json(api.get(sid))["on_timeout"] == "pause"
    assert nbtest.docker_inspect(f"nanobox-{sid}")["Config"]["Labels"]["nanobox.on_timeout"] == "pause"
    r = cli.run("create", "--on-timeout", "sleep")
    assert r.returncode == 2 and "--on-timeout must be destroy or pause" in r.stderr, r.stderr


def test_rm_destroys_and_info_then_says_not_found(cli, api, stack):
    sid = cli.create()
    assert cli.ok("rm", sid).stdout == f"{sid}\n"
    assert api.get(sid).status_code == 404
    assert not nbtest.docker_exists(stack.container(sid))
    r = cli.run("info", sid)
    assert_readable_error(r, f"no sandbox {sid}", "(not_found, HTTP 404)")


def test_rm_removes_what_it_can_and_exits_1_for_the_rest(cli, api):
    a, b = cli.create(), cli.create()
    gone = "00000000-0000-4000-8000-000000000000"
    r = cli.run("rm", a, gone, b)
    assert r.returncode == 1
    assert r.stdout.split() == [a, b]
    assert f"nanobox: {gone}: " in r.stderr and "(not_found, HTTP 404)" in r.stderr
    assert api.get(a).status_code == 404 and api.get(b).status_code == 404


# --------------------------------------------------------------------- exec

def test_exec_writes_stdout_and_stderr_separately(cli, api):
    sid = api.create()
    r = cli.run("exec", sid, "--", "echo out; echo err >&2; echo out2")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "out\nout2\n"
    assert r.stderr == "err\n"


@pytest.mark.parametrize("code", [0, 1, 7, 42, 255])
def test_exec_exits_with_the_commands_exit_code(cli, api, code):
    sid = api.create()
    r = cli.run("exec", sid, "--", f"exit {code}")
    assert r.returncode == code, r.stderr
    assert r.stdout == "" and r.stderr == ""


def test_exec_sh_joins_words_and_passes_env_and_cwd(cli, api):
    sid = api.create()
    # --sh: the words are one shell string, as ssh makes them
    r = cli.run("exec", sid, "--env", "A=1", "--env", "B=two words", "--cwd", "/tmp", "--sh",
                "echo", "$A", '"$B"', "$(pwd)")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "1 two words /tmp\n"
    # options after the command's first word belong to the command
    r = cli.run("exec", sid, "echo", "--timeout", "5")
    assert r.stdout == "--timeout 5\n"


def test_exec_timeout_exits_124_with_a_note(cli, api):
    sid = api.create()
    t0 = time.monotonic()
    r = cli.run("exec", sid, "--timeout", "1.5", "--", "echo start; sleep 30", timeout=60)
    assert r.returncode == 124
    assert r.stdout == "start\n"
    assert "nanobox: the command timed out after 1.5 s and was killed" in r.stderr
    assert time.monotonic() - t0 < 20


def test_exec_notes_truncated_output(cli, api):
    sid = api.create()
    r = cli.run("exec", sid, "--", f"head -c {nbtest.MAX_OUTPUT + 5000} /dev/zero | tr '\\0' x")
    assert r.returncode == 0
    assert len(r.stdout) == nbtest.MAX_OUTPUT
    assert "nanobox: output truncated" in r.stderr


def test_exec_passes_several_words_as_argv_and_one_word_to_the_shell(cli, api):
    sid = api.create()
    # README's line: the words reach python3 as they are, not re-split by sh;
    # with or without "--", as docker exec does
    for dashdash in (["--"], []):
        r = cli.run("exec", sid, *dashdash, "python3", "-c", "print(6*7)")
        assert (r.returncode, r.stdout, r.stderr) == (0, "42\n", "")
        r = cli.run("exec", sid, *dashdash, "printf", "%s|", "a b", "it's", "$HOME", "", "*", "é")
        assert (r.returncode, r.stdout) == (0, "a b|it's|$HOME||*|é|"), r.stderr
    # no shell: "A=1" is a program's name here, not an assignment
    r = cli.run("exec", sid, "--", "A=1", "true")
    assert r.returncode == 127 and "A=1" in r.stderr
    # one word is a shell string, with or without "--"
    assert cli.run("exec", sid, "--", "echo $HOME; echo  two").stdout == "/workspace\ntwo\n"
    assert cli.run("exec", sid, "echo $HOME | tr a-z A-Z").stdout == "/WORKSPACE\n"
    # --json: the same argv, the final answer
    r = cli.run("--json", "exec", sid, "--", "sh", "-c", "echo $0 $1; exit 4", "zero", "o n e")
    assert r.returncode == 4 and json.loads(r.stdout)["stdout"] == "zero o n e\n"
    # an empty program is a usage error, before anything is sent
    r = cli.run("exec", sid, "--", "", "x")
    assert r.returncode == 2 and "usage:" in r.stderr


def test_exec_json_prints_the_answer_and_keeps_the_exit_code(cli, api):
    sid = api.create()
    r = cli.run("--json", "exec", sid, "--", "echo hi; echo oops >&2; exit 3")
    assert r.returncode == 3
    body = json.loads(r.stdout)
    assert body["stdout"] == "hi\n" and body["stderr"] == "oops\n" and body["exit_code"] == 3
    assert r.stderr == ""


def test_exec_in_an_unknown_sandbox_is_a_readable_error(cli):
    r = cli.run("exec", "00000000-0000-4000-8000-000000000000", "--", "true")
    assert_readable_error(r, "(not_found, HTTP 404)")


# ---------------------------------------------------------------------- run

def test_run_prints_output_and_exits_with_the_programs_code(cli):
    code = "import sys\nprint(sum(range(1_000_000)))\nprint('warn', file=sys.stderr)\nsys.exit(3)\n"
    r = cli.run("run", "python", "-", input=code)
    assert r.returncode == 3, r.stderr
    assert r.stdout == "499999500000\n"
    assert r.stderr == "warn\n"


def test_run_reads_a_file_and_passes_stdin(cli, tmp_path):
    prog = tmp_path / "prog.sh"
    prog.write_text("read line; echo \"got $line\"\n")
    r = cli.run("run", "sh", prog, "--stdin", "-", input="hello\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "got hello\n"


def test_run_timeout_exits_124(cli):
    r = cli.run("run", "python", "-", "--timeout", "2", input="while True: pass\n", timeout=90)
    assert r.returncode == 124
    assert "timed out after 2 s" in r.stderr


def test_run_unknown_language_is_a_readable_error(cli):
    r = cli.run("run", "cobol", "-", input="DISPLAY 'HI'.\n")
    assert_readable_error(r, "(out_of_range, HTTP 422)")


# -------------------------------------------------------------------- ports

def test_port_open_ls_close(cli, api, stack):
    sid = api.create()
    api.exec(sid, "mkdir -p /tmp/www && echo cli-port-ok > /tmp/www/index.html && cd /tmp/www && "
                  "setsid nohup python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 </dev/null &")
    out = cli.ok("port", "open", sid, "8000", "--duration", "120").stdout
    fields = dict(line.split(None, 1) for line in out.splitlines())
    host, hostport = fields["host"].rsplit(":", 1)
    assert host == "127.0.0.1"
    assert fields["url"].startswith(f"http://8000-{sid}.")
    assert re.match(r"in (2m 0s|1m \d+s) \(", fields["expires"]), fields["expires"]

    def fetch():
        return requests.get(f"http://127.0.0.1:{hostport}/", timeout=5)
    r = wait_until(lambda: (lambda x: x if x.status_code == 200 else None)(fetch()), 20,
                   what="the sandbox's http.server through the host port")
    assert "cli-port-ok" in r.text

    ls = cli.ok("port", "ls", sid).stdout.splitlines()
    assert ls[0].split()[:2] == ["SANDBOXPORT", "HOST"]
    assert any(line.split()[:2] == ["8000", f"127.0.0.1:{hostport}"] for line in ls[1:]), ls
    listed = json.loads(cli.ok("--json", "port", "ls", sid).stdout)["ports"]
    assert [p["hostport"] for p in listed] == [int(hostport)]

    assert cli.ok("port", "close", sid, "8000").stdout == f"closed port 8000 of {sid}\n"
    assert len(cli.ok("port", "ls", sid).stdout.splitlines()) == 1     # the header only

    def closed():
        with socket.socket() as s:
            s.settimeout(1)
            return s.connect_ex(("127.0.0.1", int(hostport))) != 0
    wait_until(closed, 10, what="the host port to close")
    r = cli.run("port", "close", sid, "8000")
    assert_readable_error(r, "port 8000 of", "is not open", "(not_found, HTTP 404)")


def test_port_open_json_and_hostport(cli, api):
    sid = api.create(ttl=3600)      # longer than the port's default 600 s: not capped
    port = nbtest.free_port_in(*nbtest.HOST_PORTS)
    body = json.loads(cli.ok("--json", "port", "open", sid, "8001", "--hostport", port).stdout)
    assert body["sandboxport"] == 8001 and body["duration"] == 600 and body["hostport"] == port
    assert json.loads(cli.ok("--json", "port", "close", sid, "8001").stdout)["closed"] is True


# ------------------------------------------------------------- --json output

def test_json_outputs_parse_as_json(cli, api):
    created = json.loads(cli.ok("--json", "create", "--meta", "owner=json").stdout)
    sid = created["sandboxId"]
    api.created.append(sid)
    assert created["status"] == "running"
    assert sid in [s["sandboxId"] for s in json.loads(cli.ok("--json", "ls").stdout)["sandboxes"]]
    assert json.loads(cli.ok("--json", "info", sid).stdout)["metadata"] == {"owner": "json"}
    # --json also works after the command
    assert json.loads(cli.ok("info", sid, "--json").stdout)["sandboxId"] == sid
    assert json.loads(cli.ok("--json", "ttl", sid, "900").stdout)["ttl"] == 900
    assert json.loads(cli.ok("--json", "rm", sid).stdout) == {"removed": [sid], "failed": []}


def test_json_error_puts_the_error_body_on_stdout(cli):
    gone = "00000000-0000-4000-8000-000000000000"
    r = cli.run("--json", "info", gone)
    assert r.returncode == 1
    assert json.loads(r.stdout)["code"] == "not_found"
    assert r.stderr.startswith("nanobox: ")


# ------------------------------------------------------- errors, connection

def test_wrong_key_is_a_readable_401(cli):
    r = cli.run("--key", "wrong-key", "ls")
    assert_readable_error(r, "missing or wrong API key", "(unauthorized, HTTP 401)",
                          "the API key came from --key")


def test_unreachable_url_is_a_readable_error(cli):
    port = free_port()
    r = cli.run("--url", f"http://127.0.0.1:{port}", "ls")
    assert_readable_error(r, f"cannot reach nanobox at http://127.0.0.1:{port}",
                          "is it running? (src/setup/up.sh)")


def test_a_server_that_is_not_nanobox_is_a_readable_error(cli, fake_server):
    fake_server.reply(404, "text/html", b"<html><body>Not Found</body></html>")
    r = cli.run("--url", fake_server.url, "ls")
    assert_readable_error(r, "HTTP 404, not a nanobox error", "it came from --url")


# ------------------------------------------------------------------- usage

@pytest.mark.parametrize("args", [
    [],
    ["bogus"],
    ["--bogus", "ls"],
    ["--url"],
    ["create", "--bogus"],
    ["create", "--memory", "lots"],
    ["create", "--network", "host"],
    ["create", "--env", "NOEQUALS"],
    ["create", "extra"],
    ["ls", "--meta", "x"],
    ["info"],
    ["rm"],
    ["ttl", "x"],
    ["ttl", "x", "soon"],
    ["exec"],
    ["exec", "00000000-0000-4000-8000-000000000000"],
    ["exec", "x", "--timeout", "-1", "--", "true"],
    ["port"],
    ["port", "bogus"],
    ["port", "open", "x"],
    ["port", "open", "x", "99999"],
    ["run", "python"],
    ["cp", "a"],
    ["code"],
    ["code", "x"],
    ["code", "x", "-c", "1", "file.py"],
    ["code", "x", "-c", ""],
    ["code", "x", "-c", "1", "--timeout", "0"],
    ["contexts"],
    ["contexts", "x", "bogus"],
    ["contexts", "x", "rm"],
    ["contexts", "x", "ls", "--language", "python"],
    # an empty ID is never "GET /sandbox/" (the list)
    ["info", ""],
    ["ttl", "", "60"],
    ["exec", "", "true"],
    ["ps", ""],
    ["logs", "", "1"],
    ["kill", "", "1"],
    ["ls", ""],
    ["mkdir", "", "d"],
    ["mv", "", "a", "b"],
    ["port", "ls", ""],
    ["rm", ""],
    ["ps"],
    ["logs", "x"],
    ["logs", "x", "notapid"],
    ["mkdir", "x"],
    ["mv", "x", "a"],
    ["ls", "x", "a", "b"],
    ["ls", "x", "--meta", "a=b"],
    ["rm", "-r", "00000000-0000-4000-8000-000000000000"],
    ["rm", "00000000-0000-4000-8000-000000000000", "x:/tmp/f"],
    ["exec", "x", "--", "", "y"],
])
def test_bad_usage_exits_2_with_usage_on_stderr(cli, args):
    r = cli.run(*args, url=False, key=False)
    assert r.returncode == 2, (args, r.stdout, r.stderr)
    assert "usage:" in r.stderr and r.stdout == ""


@pytest.mark.parametrize("args", [["help"], ["--help"], ["help", "exec"], ["exec", "--help"],
                                  ["port", "--help"], ["create", "-h"], ["code", "--help"],
                                  ["contexts", "--help"], ["help", "cp"], ["ps", "--help"],
                                  ["logs", "-h"], ["kill", "--help"], ["mkdir", "--help"],
                                  ["mv", "--help"]])
def test_help_prints_usage_and_exits_0(cli, args):
    r = cli.run(*args, url=False, key=False)
    assert r.returncode == 0 and r.stdout.startswith("usage: nanobox") and r.stderr == ""


def test_help_tells_the_truth():
    """Every command is listed, nothing says "not served yet", cp knows -r."""
    run = functools.partial(subprocess.run, capture_output=True, text=True, timeout=30)
    out = run([str(CLI_BIN), "help"]).stdout
    for name in ("exec", "ps", "logs", "kill", "cp", "ls", "rm", "mkdir", "mv"):
        assert re.search(rf"(?m)^  {name} ", out), name
    cp = run([str(CLI_BIN), "help", "cp"]).stdout
    assert "-r" in cp and "directory" in cp
    for text in (out, cp, run([str(CLI_BIN), "help", "exec"]).stdout):
        assert "not served" not in text and "single file" not in text


def test_cp_puts_and_gets_a_binary_file_byte_exact(cli, api, tmp_path):
    sid = cli.create()
    blob = os.urandom(300_000)
    src, back = tmp_path / "src.bin", tmp_path / "back.bin"
    src.write_bytes(blob)
    cli.ok("cp", src, f"{sid}:/tmp/in.bin")  # /tmp is a tmpfs
    assert api.exec(sid, "wc -c < /tmp/in.bin")["stdout"].strip() == str(len(blob))
    cli.ok("cp", f"{sid}:/tmp/in.bin", back)
    assert back.read_bytes() == blob
    # relative paths are in the workspace; "-" is stdin/stdout
    subprocess.run([str(CLI_BIN), "cp", "-", f"{sid}:notes.txt"], input=b"hi\n", check=True,
                   env=cli.env())
    r = subprocess.run([str(CLI_BIN), "cp", f"{sid}:/workspace/notes.txt", "-"], capture_output=True,
                       env=cli.env(), check=True)
    assert r.stdout == b"hi\n"


def test_cp_errors_are_readable(cli, tmp_path):
    sid = cli.create()
    assert_readable_error(cli.run("cp", f"{sid}:/workspace/nope", tmp_path / "x"), "not_found")
    assert_readable_error(cli.run("cp", f"{sid}:/workspace", tmp_path / "x"), "directory")
    assert_readable_error(cli.run("cp", tmp_path / "missing", f"{sid}:/workspace/x"), "cannot read")


def test_cp_into_a_directory_keeps_the_files_name(cli, api, tmp_path):
    sid = cli.create()
    api.exec(sid, "echo back > /workspace/out.txt")
    # README's line: "cp ID:/workspace/out.txt ." lands in ./out.txt
    r = subprocess.run([str(CLI_BIN), "cp", f"{sid}:/workspace/out.txt", "."], cwd=tmp_path,
                       env=cli.env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out.txt").read_text() == "back\n"
    sub = tmp_path / "sub"
    sub.mkdir()
    cli.ok("cp", f"{sid}:out.txt", sub)
    assert (sub / "out.txt").read_text() == "back\n"
    # and in: a sandbox path ending in "/" is a directory to put it in
    (tmp_path / "app.py").write_text("print(1)\n")
    cli.ok("cp", tmp_path / "app.py", f"{sid}:/tmp/")
    assert api.exec(sid, "cat /tmp/app.py")["stdout"] == "print(1)\n"
    r = cli.run("cp", "-", f"{sid}:/tmp/", input="x")
    assert r.returncode == 2 and "name the file" in r.stderr, r.stderr
    # cp is served: help no longer says otherwise
    assert "not served" not in cli.run("help", url=False, key=False).stdout


def test_cp_into_a_sandbox_directory_named_without_a_slash(cli, api, tmp_path):
    sid = cli.create()
    (tmp_path / "app.py").write_text("print(2)\n")
    (tmp_path / "app.py").chmod(0o755)
    # the line: the files API says /workspace is a directory
    cli.ok("cp", tmp_path / "app.py", f"{sid}:/workspace")
    assert api.exec(sid, "cat /workspace/app.py; stat -c %a /workspace/app.py")["stdout"] == \
        "print(2)\n755\n"
    # a file that is there is replaced, a name that is not is the new file's
    (tmp_path / "app.py").write_text("print(3)\n")
    cli.ok("cp", tmp_path / "app.py", f"{sid}:/workspace/app.py")
    cli.ok("cp", tmp_path / "app.py", f"{sid}:new.py")
    assert api.exec(sid, "cat app.py new.py")["stdout"] == "print(3)\nprint(3)\n"
    # stdin into a directory has no name to take
    r = cli.run("cp", "-", f"{sid}:/workspace", input="x")
    assert_readable_error(r, "is a directory: name the file")


def test_cp_r_copies_directories_both_ways(cli, api, tmp_path):
    sid = cli.create()
    src = tmp_path / "tree"
    (src / "sub" / "deeper").mkdir(parents=True)
    (src / "empty").mkdir()
    (src / "a.txt").write_text("a\n")
    (src / "sub" / "b.txt").write_text("b\n")
    blob = os.urandom(50_000)
    (src / "sub" / "deeper" / "blob.bin").write_bytes(blob)
    # without -r a directory is refused, and nothing is written
    assert_readable_error(cli.run("cp", src, f"{sid}:/workspace/"), "is a directory", "cp -r")
    assert api.exec(sid, "ls /workspace")["stdout"] == ""
    # into an existing directory: under the source's name; else the copy is the destination
    cli.ok("cp", "-r", src, f"{sid}:/workspace")
    cli.ok("cp", "-r", src, f"{sid}:/tmp/copy")
    find = "cd {} && find . | sort && md5sum sub/deeper/blob.bin | cut -c1-32"
    want = ".\n./a.txt\n./empty\n./sub\n./sub/b.txt\n./sub/deeper\n./sub/deeper/blob.bin\n" + \
        hashlib.md5(blob).hexdigest() + "\n"
    assert api.exec(sid, find.format("/workspace/tree"))["stdout"] == want
    assert api.exec(sid, find.format("/tmp/copy"))["stdout"] == want
    # and back: a new local directory, then into an existing one
    cli.ok("cp", "-r", f"{sid}:/tmp/copy", tmp_path / "back")
    cli.ok("cp", "-R", f"{sid}:/workspace/tree", tmp_path / "back")
    for d in (tmp_path / "back", tmp_path / "back" / "tree"):
        assert (d / "a.txt").read_text() == "a\n" and (d / "sub" / "b.txt").read_text() == "b\n"
        assert (d / "sub" / "deeper" / "blob.bin").read_bytes() == blob
        assert (d / "empty").is_dir()
    # without -r, a sandbox directory is refused
    assert_readable_error(cli.run("cp", f"{sid}:/tmp/copy", tmp_path / "x"), "is a directory", "cp -r")
    assert not (tmp_path / "x").exists()


def requests_logged(stack, sid, start):
    """The API requests about sandbox sid the worker logged since byte start."""
    with open(stack.log_path, errors="replace") as f:
        f.seek(start)
        return [line.split("worker: ", 1)[1].split()[:2] for line in f
                if "worker: " in line and f"/sandbox/{sid}" in line and "AUTH" not in line]


def test_cp_r_is_one_tar_each_way_with_symlinks_and_modes(cli, api, stack, tmp_path):
    sid = cli.create()
    src = tmp_path / "linky"
    (src / "bin").mkdir(parents=True)
    (src / "real.txt").write_text("r\n")
    (src / "link").symlink_to("real.txt")
    (src / "bin" / "run").write_text("#!/bin/sh\necho ran\n")
    (src / "bin" / "run").chmod(0o750)
    (src / "secret").write_bytes(os.urandom(1000))
    (src / "secret").chmod(0o600)
    os.mkfifo(src / "fifo")
    start = os.path.getsize(stack.log_path)
    r = cli.run("cp", "-r", src, f"{sid}:/workspace/")
    # a FIFO is no file: said, left out, and the exit code says so; the rest went
    assert r.returncode == 1 and "skipped" in r.stderr and "fifo" in r.stderr, r
    # one tar: the probe of the destination, then one PUT of the archive
    reqs = requests_logged(stack, sid, start)
    assert [m for m, _ in reqs].count("PUT") == 1 and any("/files/archive" in p for _, p in reqs), reqs
    out = api.exec(sid, "cd /workspace/linky && readlink link && stat -c '%a %n' bin/run secret && ./bin/run")
    assert out["stdout"] == "real.txt\n750 bin/run\n600 secret\nran\n", out
    # and back, one GET of the archive
    start = os.path.getsize(stack.log_path)
    cli.ok("cp", "-r", f"{sid}:/workspace/linky", tmp_path / "out")
    reqs = requests_logged(stack, sid, start)
    assert [p.split("?")[0].rsplit("/", 2)[-2:] for _, p in reqs] == [["files", "archive"]], reqs
    out = tmp_path / "out"
    assert sorted(os.listdir(out)) == ["bin", "link", "real.txt", "secret"]
    assert os.readlink(out / "link") == "real.txt" and (out / "link").read_text() == "r\n"
    assert (out / "secret").read_bytes() == (src / "secret").read_bytes()
    assert (os.stat(out / "secret").st_mode & 0o777, os.stat(out / "bin" / "run").st_mode & 0o777) == (0o600, 0o750)
    # a single file with -r is copied as a file
    cli.ok("cp", "-r", f"{sid}:/workspace/linky/real.txt", tmp_path / "one.txt")
    assert (tmp_path / "one.txt").read_text() == "r\n"
    # "-": the tar itself, to stdout
    r = subprocess.run([str(CLI_BIN), "cp", "-r", f"{sid}:/workspace/linky", "-"], capture_output=True,
                       env=cli.env(), timeout=120)
    assert r.returncode == 0, r.stderr
    with tarfile.open(fileobj=io.BytesIO(r.stdout)) as t:
        assert "./bin/run" in t.getnames()


def test_ls_mkdir_mv_rm_files(cli, api):
    sid = cli.create()
    api.exec(sid, "echo hello > /workspace/notes.txt")
    assert cli.ok("mkdir", sid, "data/raw", "/tmp/scratch").stdout == ""
    assert api.exec(sid, "test -d /workspace/data/raw && test -d /tmp/scratch && echo ok")["stdout"] == "ok\n"
    # mv into a directory keeps the name, as mv(1)
    assert cli.ok("mv", sid, "notes.txt", "data/raw").stdout == ""
    assert cli.ok("mv", sid, "data/raw/notes.txt", "data/renamed.txt").stdout == ""
    out = cli.ok("ls", sid, "data").stdout.splitlines()
    assert out[0].split() == ["TYPE", "SIZE", "MODE", "MODIFIED", "NAME"]
    rows = [line.split() for line in out[1:]]
    assert [(r[0], r[-1]) for r in rows] == [("dir", "raw/"), ("file", "renamed.txt")]
    assert rows[1][1] == "6B"
    # the workspace by default; ID:PATH works too; --json is the API's listing
    assert "data/" in cli.ok("ls", sid).stdout
    assert "renamed.txt" in cli.ok("ls", f"{sid}:data").stdout
    listing = json.loads(cli.ok("--json", "ls", sid, "/workspace/data").stdout)
    assert listing["type"] == "dir" and {e["name"] for e in listing["entries"]} == {"raw", "renamed.txt"}
    assert_readable_error(cli.run("ls", sid, "data/renamed.txt"), "is a file")
    # rm takes ID:PATH: a non-empty directory needs -r
    assert_readable_error(cli.run("rm", f"{sid}:data"), "(conflict, HTTP 409)")
    assert json.loads(cli.ok("--json", "rm", f"{sid}:data/renamed.txt").stdout) == \
        {"sandboxId": sid, "path": "data/renamed.txt", "deleted": True}
    cli.ok("rm", "-r", f"{sid}:data", f"{sid[:8]}:/tmp/scratch")
    assert api.exec(sid, "ls -A /workspace /tmp")["stdout"] == "/tmp:\n\n/workspace:\n"
    assert api.get(sid).status_code == 200


def test_rm_of_a_sandbox_and_a_file_name_destroys_nothing(cli, api):
    sid = cli.create()
    api.exec(sid, "echo keep > /workspace/notes.txt")
    r = cli.run("rm", sid, "notes.txt")
    assert r.returncode == 2 and "nanobox rm ID:PATH" in r.stderr and r.stdout == ""
    assert api.get(sid).status_code == 200
    assert api.exec(sid, "cat notes.txt")["stdout"] == "keep\n"


def test_exec_d_ps_logs_kill(cli, api):
    sid = cli.create()
    pid = cli.ok("exec", sid, "-d", "for i in 1 2 3; do echo out $i; echo err $i >&2; sleep 0.5; done; "
                                    "exit 3").stdout.strip()
    other = cli.ok("exec", "-d", sid, "--", "sleep", "300").stdout.strip()
    assert pid.isdigit() and other.isdigit()
    ps = cli.ok("ps", sid).stdout.splitlines()
    assert ps[0].split() == ["PID", "STATUS", "STARTED", "OUTPUT", "COMMAND"]
    rows = {line.split()[0]: line for line in ps[1:]}
    assert "running" in rows[other] and rows[other].endswith("sleep 300")
    # -f: every line once, in order, and it returns when the process has exited
    t0 = time.monotonic()
    r = cli.ok("logs", sid, pid, "-f", timeout=60)
    assert r.stdout == "out 1\nout 2\nout 3\n" and r.stderr == "err 1\nerr 2\nerr 3\n"
    assert time.monotonic() - t0 < 20
    assert re.search(r"\bexited 3\b", [ln for ln in cli.ok("ps", sid).stdout.splitlines()
                                        if ln.startswith(pid + " ")][0])
    assert cli.ok("logs", sid, pid).stdout == "out 1\nout 2\nout 3\n"
    listed = json.loads(cli.ok("--json", "ps", sid).stdout)["processes"]
    assert {p["pid"]: p["command"] for p in listed}[int(other)] == ["sleep", "300"]
    # kill: TERM by default, as kill(1)
    assert cli.ok("kill", sid, other).stdout == ""

    def ended():
        procs = json.loads(cli.ok("--json", "ps", sid).stdout)["processes"]
        p = [p for p in procs if p["pid"] == int(other)][0]
        return not p["running"] and p["signal"] == 15
    wait_until(ended, 10, what="sleep 300 to end on SIGTERM")
    assert "sleep" not in api.exec(sid, "ps -eo comm")["stdout"]
    # signal names in any case, with or without SIG
    third = cli.ok("exec", sid, "-d", "--", "sleep", "300").stdout.strip()
    assert json.loads(cli.ok("--json", "kill", sid, third, "-s", "sigkill").stdout) == \
        {"pid": int(third), "signal": "KILL", "sent": True}
    assert_readable_error(cli.run("kill", sid, "99999"), "(no_process, HTTP 404)")
    assert_readable_error(cli.run("logs", sid, "99999"), "(no_process, HTTP 404)")


def test_exec_feeds_stdin_from_a_file(cli, tmp_path):
    sid = cli.create()
    f = tmp_path / "in.txt"
    f.write_text("one\ntwo\n")
    r = cli.ok("exec", "--stdin", f, sid, "--", "wc", "-l")
    assert r.stdout.strip() == "2"


def test_exec_streams_output_before_the_command_ends(cli):
    sid = cli.create()
    p = subprocess.Popen([str(CLI_BIN), "exec", sid, "--", "echo early; sleep 3; echo late"],
                         env=cli.env(), stdout=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    first = p.stdout.readline()
    took = time.monotonic() - t0
    rest = p.stdout.read()
    assert p.wait(timeout=30) == 0
    assert first == "early\n" and rest == "late\n"
    assert took < 2.5, took


# ------------------------------------------------------- url/key precedence

def test_flags_beat_env(cli, stack):
    dead = f"http://127.0.0.1:{free_port()}"
    env = {"NANOBOX_URL": dead, "NANOBOX_API_KEY": "wrong"}
    cli.ok("--url", stack.url, "--key", stack.api_key, "ls", url=False, key=False, env=env)
    # a wrong flag wins over a right env too
    r = cli.run("--key", "wrong", "ls")
    assert_readable_error(r, "(unauthorized, HTTP 401)", "came from --key")


def test_env_beats_cli_conf(cli, stack):
    cli.conf(f"url = http://127.0.0.1:{free_port()}\napi_key = wrong\n")
    cli.ok("ls")
    r = cli.run("ls", url=False)
    assert_readable_error(r, "cannot reach nanobox at")
    r = cli.run("ls", key=False)
    assert_readable_error(r, "(unauthorized, HTTP 401)", f"came from {cli.home}/.config/nanobox/cli.conf")


def test_cli_conf_is_used_without_flags_or_env(cli, stack, tmp_path):
    cli.conf(f"# written by test_cli\nurl = {stack.url}/\napi_key = {stack.api_key}\n")
    cli.ok("ls", url=False, key=False)
    # XDG_CONFIG_HOME moves it
    xdg = tmp_path / "xdg"
    (xdg / "nanobox").mkdir(parents=True)
    (xdg / "nanobox" / "cli.conf").write_text(f"url = {stack.url}\napi_key = {stack.api_key}\n")
    cli.conf("url = http://127.0.0.1:1\n")
    cli.ok("ls", url=False, key=False, env={"XDG_CONFIG_HOME": str(xdg)})


def test_a_bad_cli_conf_is_a_readable_error(cli):
    cli.conf("url = http://127.0.0.1:1\nurll = typo\n")
    r = cli.run("ls")
    assert_readable_error(r, "cli.conf:2: unknown key \"urll\"")


# ------------------------------------------- streamed exec (NDJSON), faked
#
# The service answers exec at the end today; a later issue streams it as
# NDJSON. A local fake server shows the CLI relays such events as they
# arrive: it holds the rest of the stream until the test has read the first
# line from the CLI's stdout.

class FakeServer:
    def __init__(self):
        self.status, self.ctype, self.body, self.stream = 200, "application/json", b"{}", None
        self.requests = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _serve(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                fake.requests.append((self.command, self.path, dict(self.headers), body))
                if fake.stream is not None:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/x-ndjson")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for chunk in fake.stream():
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                    return
                self.send_response(fake.status)
                self.send_header("Content-Type", fake.ctype)
                self.send_header("Content-Length", str(len(fake.body)))
                self.end_headers()
                self.wfile.write(fake.body)

            do_GET = do_POST = do_DELETE = _serve

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def reply(self, status, ctype, body):
        self.status, self.ctype, self.body = status, ctype, body

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def fake_server():
    f = FakeServer()
    yield f
    f.close()


def crafted_tar(entries):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for name, target in entries:
            ti = tarfile.TarInfo(name)
            if target is None:
                ti.size = 4
                t.addfile(ti, io.BytesIO(b"evil"))
            else:
                ti.type, ti.linkname = tarfile.SYMTYPE, target
                t.addfile(ti)
    return buf.getvalue()


@pytest.mark.parametrize("case", ["dotdot", "absolute", "through-symlink"])
def test_cp_r_writes_nothing_outside_from_a_hostile_tar(cli, fake_server, tmp_path, case):
    # the server (or the sandbox's tar behind it) is not trusted: libarchive's
    # secure extraction refuses what would land outside the destination
    outside = tmp_path / "outside"
    outside.mkdir()
    entries = {"dotdot": [("./ok.txt", None), ("../evil.txt", None)],
               "absolute": [("./ok.txt", None), (str(outside / "abs.txt"), None)],
               "through-symlink": [("./ok.txt", None), ("l", str(outside)), ("l/through.txt", None)]}[case]
    fake_server.reply(200, "application/x-tar", crafted_tar(entries))
    r = cli.run("--url", fake_server.url, "cp", "-r", f"{SID}:/workspace/t", tmp_path / "got")
    assert r.returncode == 1 and "refused" in r.stderr, (r.returncode, r.stderr)
    assert (tmp_path / "got" / "ok.txt").read_bytes() == b"evil"    # what came before, inside
    assert sorted(os.listdir(outside)) == [] and not (tmp_path / "evil.txt").exists()
    method, path, _, _ = fake_server.requests[-1]
    assert (method, path) == ("GET", f"/sandbox/{SID}/files/archive?path=%2Fworkspace%2Ft")


def test_exec_relays_a_streamed_ndjson_answer_as_it_arrives(cli, fake_server):
    sid = "11111111-2222-4333-8444-555555555555"
    first_seen = threading.Event()

    def stream():
        yield b'{"type":"stdout","data":"first\\n"}\n'
        assert first_seen.wait(20), "the CLI did not print the first event before the rest came"
        yield b'{"type":"stderr","data":"warn\\n"}\n{"type":"stdout",'   # a line split across chunks
        yield b'"data":"second\\n"}\n{"type":"exit","exit_code":5,"timed_out":false}\n'
    fake_server.stream = stream

    p = subprocess.Popen([str(CLI_BIN), "--url", fake_server.url, "--key", "k", "exec", sid, "--",
                          "whatever"], env=cli.env(url=False, key=False),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "first\n"
        first_seen.set()
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 5
    assert out == "second\n" and err == "warn\n"
    method, path, headers, body = fake_server.requests[0]
    assert (method, path) == ("POST", f"/sandbox/{sid}/exec")
    assert headers["Accept"] == "application/json"
    assert headers["Authorization"] == "Bearer k"
    assert json.loads(body) == {"command": "whatever", "stream": True}


def test_exec_stream_timed_out_exits_124(cli, fake_server):
    fake_server.stream = lambda: iter([b'{"type":"stdout","data":"x"}\n',
                                       b'{"type":"exit","exit_code":137,"timed_out":true}\n'])
    r = cli.run("--url", fake_server.url, "exec", "11111111-2222-4333-8444-555555555555",
                "--timeout", "2", "--", "sleep 9")
    assert r.returncode == 124 and r.stdout == "x"
    assert "timed out after 2 s" in r.stderr


def test_exec_stream_without_exit_event_is_an_error(cli, fake_server):
    fake_server.stream = lambda: iter([b'{"type":"stdout","data":"x"}\n'])
    r = cli.run("--url", fake_server.url, "exec", "11111111-2222-4333-8444-555555555555", "true")
    assert r.returncode == 1 and "stream ended early" in r.stderr


# ------------------------------------------------ code and contexts, faked
#
# The events of POST /sandbox/{id}/code (docs/API.md) from the fake server:
# what the CLI does with each, whatever the kernel behind them.

SID = "11111111-2222-4333-8444-555555555555"


def tiny_png(width=3, height=2):
    """A valid PNG of width x height black pixels."""
    import struct
    import zlib

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff))
    raw = b"".join(b"\x00" + b"\x00" * width * 3 for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def ndjson(*events):
    return b"".join(json.dumps(e).encode() + b"\n" for e in events)


END_OK = {"type": "end", "context": "python", "language": "python", "status": "ok", "execution_count": 1,
          "timed_out": False, "truncated": False, "kernel_restarted": False, "duration_ms": 5}


def test_code_streams_output_results_and_images_as_they_arrive(cli, fake_server, tmp_path):
    import base64
    png = tiny_png(640, 480)
    first_seen = threading.Event()

    def stream():
        yield ndjson({"type": "stdout", "text": "first\n"})
        assert first_seen.wait(20), "the CLI did not print the first event before the rest came"
        yield ndjson({"type": "stderr", "text": "warn\n"},
                     {"type": "result", "is_main_result": False,
                      "data": {"text/plain": "<Figure size 640x480 with 1 Axes>",
                               "image/png": base64.encodebytes(png).decode()}},
                     {"type": "result", "is_main_result": True, "data": {"text/plain": "42",
                                                                         "text/html": "<b>42</b>"}},
                     {"type": "execution_count", "execution_count": 1}, END_OK)
    fake_server.stream = stream
    out_dir = tmp_path / "imgs"
    p = subprocess.Popen([str(CLI_BIN), "--url", fake_server.url, "--key", "k", "code", SID, "-c", "x + 1",
                          "--context", "ctx-0123456789ab", "--timeout", "7.5", "--save-images", str(out_dir)],
                         env=cli.env(url=False, key=False), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout.readline() == "first\n"
        first_seen.set()
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    assert err == "warn\n"
    # the image line says what it is and where it went; the main result's text/plain follows
    size = f"{len(png)} bytes" if len(png) < 1024 else f"{len(png) / 1024:.1f} KiB"
    assert out == f"[image/png 640x480, {size}] saved as {out_dir}/image-1.png\n42\n", out
    assert (out_dir / "image-1.png").read_bytes() == png
    method, path, headers, body = fake_server.requests[0]
    assert (method, path) == ("POST", f"/sandbox/{SID}/code")
    assert json.loads(body) == {"code": "x + 1", "context": "ctx-0123456789ab", "timeout": 7.5, "stream": True}


def test_code_reads_a_file_or_stdin_and_prints_image_lines_without_saving(cli, fake_server, tmp_path):
    import base64
    fake_server.stream = lambda: iter([ndjson(
        {"type": "result", "is_main_result": False, "data": {"image/png": base64.b64encode(tiny_png()).decode()}},
        {"type": "result", "is_main_result": False, "data": {"text/html": "<table></table>"}}, END_OK)])
    f = tmp_path / "cell.py"
    f.write_text("print('from a file')\n")
    r = cli.run("--url", fake_server.url, "code", SID, f, "--language", "python")
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"[image/png 3x2, {len(tiny_png())} bytes]\n[text/html result: --json shows it]\n"
    assert json.loads(fake_server.requests[-1][3])["code"] == "print('from a file')\n"
    assert json.loads(fake_server.requests[-1][3])["language"] == "python"
    r = cli.run("--url", fake_server.url, "code", SID, "-", input="1 + 1\n")
    assert r.returncode == 0, r.stderr
    assert json.loads(fake_server.requests[-1][3])["code"] == "1 + 1\n"


def test_code_exception_prints_the_traceback_and_exits_1(cli, fake_server):
    fake_server.stream = lambda: iter([ndjson(
        {"type": "stdout", "text": "before\n"},
        {"type": "error", "name": "ZeroDivisionError", "value": "division by zero",
         "traceback": "Traceback (most recent call last):\n  1/0\nZeroDivisionError: division by zero"},
        {**END_OK, "status": "error"})])
    r = cli.run("--url", fake_server.url, "code", SID, "-c", "print('before'); 1/0")
    assert r.returncode == 1
    assert r.stdout == "before\n"
    assert r.stderr == "Traceback (most recent call last):\n  1/0\nZeroDivisionError: division by zero\n"


def test_code_timeout_exits_124_and_a_dead_kernel_is_noted(cli, fake_server):
    fake_server.stream = lambda: iter([ndjson(
        {"type": "stdout", "text": "started"},
        {**END_OK, "status": "timed_out", "timed_out": True, "kernel_restarted": True, "truncated": True})])
    r = cli.run("--url", fake_server.url, "code", SID, "--timeout", "2", "-c", "while True: pass")
    assert r.returncode == 124 and r.stdout == "started"
    assert "timed out after 2 s and was interrupted" in r.stderr
    assert "kernel had died" in r.stderr and "truncated" in r.stderr


def test_code_stream_errors_are_readable(cli, fake_server):
    fake_server.stream = lambda: iter([ndjson({"type": "stdout", "text": "x"})])
    r = cli.run("--url", fake_server.url, "code", SID, "-c", "x")
    assert r.returncode == 1 and "stream ended early" in r.stderr
    fake_server.stream = lambda: iter([ndjson({"type": "error", "error": "the sandbox went away",
                                               "code": "agent_gone"})])
    r = cli.run("--url", fake_server.url, "code", SID, "-c", "x")
    assert r.returncode == 1 and "nanobox: the sandbox went away (agent_gone)" in r.stderr


def test_code_json_prints_the_collected_answer(cli, fake_server):
    answer = {"context": "python", "language": "python", "stdout": "hi\n", "stderr": "",
              "results": [], "error": {"name": "E", "value": "v", "traceback": "tb"},
              "execution_count": 2, "status": "error", "timed_out": False, "truncated": False,
              "kernel_restarted": False, "duration_ms": 3}
    fake_server.reply(200, "application/json", json.dumps(answer).encode())
    r = cli.run("--url", fake_server.url, "--json", "code", SID, "-c", "raise E")
    assert r.returncode == 1, r.stderr
    assert json.loads(r.stdout) == answer and r.stderr == ""
    assert json.loads(fake_server.requests[-1][3]) == {"code": "raise E"}   # no stream asked
    # a server that answers collected when a stream was asked is understood too
    r = cli.run("--url", fake_server.url, "code", SID, "-c", "raise E")
    assert r.returncode == 1 and r.stdout == "hi\n" and r.stderr == "tb\n"


def test_contexts_commands_call_their_routes(cli, fake_server):
    info = {"id": "ctx-0123456789ab", "language": "javascript", "cwd": "/tmp", "state": "idle",
            "executions": 3, "created_at": 1764600000}
    fake_server.reply(200, "application/json", json.dumps({"contexts": [info]}).encode())
    r = cli.run("--url", fake_server.url, "contexts", SID)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["ID", "LANGUAGE", "STATE", "EXECUTIONS", "CWD", "CREATED"]
    assert lines[1].split()[:5] == ["ctx-0123456789ab", "javascript", "idle", "3", "/tmp"]
    assert fake_server.requests[-1][:2] == ("GET", f"/sandbox/{SID}/contexts")

    fake_server.reply(201, "application/json", json.dumps(info).encode())
    r = cli.run("--url", fake_server.url, "contexts", SID, "create", "--language", "javascript", "--cwd", "/tmp")
    assert r.returncode == 0 and r.stdout == "ctx-0123456789ab\n", r.stderr
    method, path, _, body = fake_server.requests[-1]
    assert (method, path) == ("POST", f"/sandbox/{SID}/contexts")
    assert json.loads(body) == {"language": "javascript", "cwd": "/tmp"}

    fake_server.reply(200, "application/json", json.dumps(info).encode())
    r = cli.run("--url", fake_server.url, "contexts", SID, "restart", "ctx-0123456789ab")
    assert r.returncode == 0 and "restarted context ctx-0123456789ab" in r.stdout, r.stderr
    assert fake_server.requests[-1][:2] == ("POST", f"/sandbox/{SID}/contexts/ctx-0123456789ab/restart")

    fake_server.reply(204, "application/json", b"")
    r = cli.run("--url", fake_server.url, "--json", "contexts", SID, "rm", "ctx-0123456789ab")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"sandboxId": SID, "context": "ctx-0123456789ab", "deleted": True}
    assert fake_server.requests[-1][:2] == ("DELETE", f"/sandbox/{SID}/contexts/ctx-0123456789ab")

    fake_server.reply(404, "application/json", b'{"error":"no context \'ctx-9\'","code":"unknown_context"}')
    assert_readable_error(cli.run("--url", fake_server.url, "contexts", SID, "rm", "ctx-9"), "unknown_context")


# -------------------------------------------------- code and contexts, live

def code_sandbox(cli):
    """A sandbox of the code interpreter's image, made by the CLI."""
    return cli.create("--image", nbtest.PYTHON_IMAGE, "--ttl", "600")


def code_ok(cli, *args, **kw):
    r = cli.run("code", *args, **kw)
    if r.returncode == 1 and "no_route" in r.stderr:
        pytest.fail(f"the server does not serve POST /sandbox/ID/code yet: {r.stderr}")
    return r


@nbtest.needs_image(nbtest.PYTHON_IMAGE)
def test_code_keeps_state_between_runs(cli):
    sid = code_sandbox(cli)
    r = code_ok(cli, sid, "-c", "x = 41")
    assert r.returncode == 0 and r.stdout == "" and r.stderr == "", r
    r = code_ok(cli, sid, "-c", "print(x + 1)")
    assert r.returncode == 0 and r.stdout == "42\n", r
    r = code_ok(cli, sid[:8], "-c", "x * 2")          # an id prefix works; the last value prints
    assert r.returncode == 0 and r.stdout == "82\n", r
    r = code_ok(cli, sid, "--json", "-c", "x")
    assert r.returncode == 0 and json.loads(r.stdout)["results"][0]["data"]["text/plain"] == "41", r


@nbtest.needs_image(nbtest.PYTHON_IMAGE)
def test_code_plot_prints_an_image_line_and_saves_the_png(cli, tmp_path):
    sid = code_sandbox(cli)
    r = code_ok(cli, sid, "--save-images", tmp_path, "-c",
                "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()")
    assert r.returncode == 0, r
    assert re.fullmatch(r"\[image/png \d+x\d+, [\d.]+ KiB\] saved as .*/image-1\.png\n", r.stdout), r.stdout
    assert (tmp_path / "image-1.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@nbtest.needs_image(nbtest.PYTHON_IMAGE)
def test_code_exception_and_timeout_exit_statuses(cli):
    sid = code_sandbox(cli)
    r = code_ok(cli, sid, "-c", "print('before')\n1 / 0")
    assert r.returncode == 1 and r.stdout == "before\n", r
    assert "ZeroDivisionError" in r.stderr and "1 / 0" in r.stderr, r.stderr
    r = code_ok(cli, sid, "--timeout", "1", "-c", "import time\nprint('sleeping', flush=True)\ntime.sleep(30)")
    assert r.returncode == 124 and r.stdout == "sleeping\n", r
    assert "timed out after 1 s" in r.stderr
    # the session lives on after the interrupt
    assert code_ok(cli, sid, "-c", "print('still here')").stdout == "still here\n"


@nbtest.needs_image(nbtest.PYTHON_IMAGE)
def test_contexts_create_run_restart_rm(cli):
    sid = code_sandbox(cli)
    r = cli.run("contexts", sid, "create", "--cwd", "/tmp")
    if r.returncode == 1 and "no_route" in r.stderr:
        pytest.fail(f"the server does not serve /sandbox/ID/contexts yet: {r.stderr}")
    assert r.returncode == 0, r
    ctx = r.stdout.strip()
    assert re.fullmatch(r"ctx-[0-9a-f]{12}", ctx), r.stdout
    assert code_ok(cli, sid, "--context", ctx, "-c", "import os\ny = 5\nprint(os.getcwd())").stdout == "/tmp\n"
    rows = [line.split() for line in cli.ok("contexts", sid).stdout.splitlines()[1:]]
    assert [ctx, "python"] in [row[:2] for row in rows], rows
    cli.ok("contexts", sid, "restart", ctx)
    r = code_ok(cli, sid, "--context", ctx, "-c", "y")
    assert r.returncode == 1 and "NameError" in r.stderr, r     # restarted: y is gone
    assert cli.ok("contexts", sid, "rm", ctx).stdout == f"deleted context {ctx} of {sid}\n"
    assert_readable_error(cli.run("contexts", sid, "rm", ctx), "unknown_context")
    assert_readable_error(code_ok(cli, sid, "--context", ctx, "-c", "1"), "unknown_context")


# ---------------------------------------------------------------- templates

def test_template_build_follow_ls_create_logs_rm(cli, tmp_path):
    name = "cli-" + secrets.token_hex(4)
    (tmp_path / "Dockerfile").write_text(
        f"FROM {nbtest.IMAGE}\nCOPY data/a.txt /opt/a.txt\nRUN echo built-step\n")
    (tmp_path / "a.txt").write_text("from the cli\n")
    r = cli.ok("template", "build", name, "-f", tmp_path / "Dockerfile",
               "--file", f"data/a.txt={tmp_path / 'a.txt'}", "--follow", timeout=300)
    assert "built-step" in r.stdout and "Step 3/" in r.stdout, r.stdout
    ls = cli.ok("template", "ls").stdout.splitlines()
    assert ls[0].split() == ["NAME", "STATUS", "KIND", "SIZE", "IMAGE"]
    row = next(line.split() for line in ls if line.startswith(name + " "))
    assert row[1:3] == ["ready", "build"]
    assert any(line.split()[:3] == ["nanobox", "ready", "image"] for line in ls[1:])
    sid = cli.create("--template", name)
    assert cli.ok("exec", sid, "cat /opt/a.txt").stdout == "from the cli\n"
    assert "built-step" in cli.ok("template", "logs", name).stdout
    r = cli.run("template", "rm", name)
    assert_readable_error(r, "in_use")
    assert cli.ok("template", "rm", name, "--force").stdout == f"{name}\n"
    assert_readable_error(cli.run("template", "logs", name), "not_found")


def test_template_build_that_fails_exits_1(cli, tmp_path):
    name = "cli-" + secrets.token_hex(4)
    (tmp_path / "Dockerfile").write_text(f"FROM {nbtest.IMAGE}\nRUN echo nope && exit 4\n")
    r = cli.run("template", "build", name, "-f", tmp_path / "Dockerfile", "--follow", timeout=300)
    assert r.returncode == 1 and "nope" in r.stdout and "non-zero code: 4" in r.stderr, r
    assert cli.run("template", "logs", name, "-f").returncode == 1
    r = cli.run("template", "build", "Bad", "-f", tmp_path / "Dockerfile")
    assert_readable_error(r, "bad_name")
    cli.ok("template", "rm", name)
def test_snapshot_makes_a_template_the_next_create_starts_from(cli):
    sid = cli.create()
    cli.ok("exec", sid, "echo kept > /workspace/k.txt")
    name = "cli-snap-" + secrets.token_hex(4)
    r = cli.ok("snapshot", sid, "--name", name, timeout=300)
    assert r.stdout.startswith(f"{name}\t(snapshot of {sid}, "), r.stdout
    row = next(line.split() for line in cli.ok("template", "ls").stdout.splitlines()
               if line.startswith(name + " "))
    assert row[1:3] == ["ready", "snapshot"]
    kid = cli.create("--template", name)
    assert cli.ok("exec", kid, "cat /workspace/k.txt").stdout == "kept\n"
    assert_readable_error(cli.run("snapshot", sid, "--name", name), "name_taken")
    assert_readable_error(cli.run("snapshot", sid, "--name", "Bad"), "bad_name")
    assert cli.run("snapshot").returncode == 2


# ------------------------------------------------------------------- shell

def _on_pty(argv, env, cols=100, rows=30):
    """Start argv on a new pseudo-terminal of cols x rows: (pid, master fd)."""
    import fcntl
    import pty
    import struct
    import termios
    pid, fd = pty.fork()
    if pid == 0:
        try:
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
            os.execve(argv[0], argv, env)
        finally:
            os._exit(127)
    return pid, fd


class _PtyReader:
    """What a program on a pseudo-terminal prints, read as it comes."""

    def __init__(self, fd):
        self.fd, self.out = fd, b""

    def expect(self, needle, timeout=20):
        import select
        needle = needle.encode() if isinstance(needle, str) else needle
        start = len(self.out)
        deadline = time.time() + timeout
        while needle not in self.out[start:]:
            left = deadline - time.time()
            assert left > 0, f"{needle!r} not seen; output: {self.out[-500:]!r}"
            if select.select([self.fd], [], [], left)[0]:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:
                    chunk = b""
                assert chunk, f"the terminal closed before {needle!r}: {self.out[-500:]!r}"
                self.out += chunk
        return self.out

    def drain(self, timeout=20):
        import select
        deadline = time.time() + timeout
        while time.time() < deadline and select.select([self.fd], [], [], 0.5)[0]:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            self.out += chunk


def _wait_status(pid, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    raise AssertionError("nanobox shell did not end")


def test_shell_is_an_interactive_terminal_with_the_shells_exit_status(cli, api):
    sid = cli.create()
    # nanobox, then stty: the local terminal is back in cooked mode after
    script = f"{CLI_BIN} shell {sid}; echo nanobox-exit=$?; stty -a"
    pid, fd = _on_pty(["/bin/sh", "-c", script], cli.env())
    try:
        r = _PtyReader(fd)
        r.expect("$ ")  # the sandbox's shell prompt: raw mode is on
        os.write(fd, b"echo $((6*7))\r")
        r.expect("42\r\n")
        os.write(fd, b"stty size\r")
        r.expect("30 100\r\n")
        os.write(fd, b"exit 3\r")
        r.expect("nanobox-exit=3")
        r.drain()
        stty = r.out.split(b"nanobox-exit=3", 1)[1].decode(errors="replace")
        assert " icanon" in stty and " echo" in stty, stty
        assert _wait_status(pid) == 0
    finally:
        os.close(fd)


def test_shell_follows_the_local_window_and_ctrl_c(cli, api):
    import fcntl
    import struct
    import termios
    sid = cli.create()
    pid, fd = _on_pty([str(CLI_BIN), "shell", sid, "--", "bash", "--norc", "-i"], cli.env(),
                      cols=80, rows=24)
    try:
        r = _PtyReader(fd)
        r.expect("$ ")
        os.write(fd, b"stty size\r")
        r.expect("24 80\r\n")
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 132, 0, 0))  # SIGWINCH
        deadline = time.time() + 10
        while True:
            os.write(fd, b"stty size\r")
            try:
                r.expect("50 132\r\n", timeout=1)
                break
            except AssertionError:
                assert time.time() < deadline, r.out[-300:]
        os.write(fd, b"sleep 100; echo not-interrupted\r")
        r.expect("sleep 100")
        time.sleep(0.5)
        os.write(fd, b"\x03")  # ^C: a byte for the sandbox's terminal, not our SIGINT
        os.write(fd, b"echo still-$((2+2))\r")
        r.expect("still-4\r\n")
        # the echo never ran: the words show only in echoed command lines (a line
        # typed ahead is echoed by the terminal, then again by bash's readline)
        assert re.search(rb"(?<!echo )not-interrupted", r.out) is None, r.out[-300:]
        os.write(fd, b"exit 7\r")
        assert _wait_status(pid) == 7
    finally:
        os.close(fd)


def test_shell_without_a_terminal_types_stdin_and_ends_with_it(cli, api):
    sid = cli.create()
    r = cli.run("shell", sid, "--", "sh", input="echo $((6*7))\nexit 4\n", timeout=60)
    assert r.returncode == 4, (r.stdout, r.stderr)
    # 42 on a line of its own, after the prompt when the shell printed one
    # after the terminal echoed what was typed ahead (text mode reads \r\n as \n)
    assert re.search(r"(?m)^(\$ )?42$", r.stdout), r.stdout
    # its end is ^D: a shell that reads to the end exits 0
    r = cli.run("shell", sid, "--", "sh", "-c", "cat; echo cat-done", input="abc\n", timeout=60)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "cat-done" in r.stdout


def test_shell_keeps_what_is_typed_ahead(cli, api):
    # script(1) gives nanobox a terminal and types the pipe's bytes into it at
    # once, before nanobox has even started: as with ssh and docker exec -it,
    # they reach the sandbox's login shell, which runs them and exits 3
    sid = cli.create()
    r = subprocess.run(f"printf 'echo $((6*7))\\nexit 3\\n' | script -qec '{CLI_BIN} shell {sid}' /dev/null",
                       shell=True, env=cli.env(), capture_output=True, timeout=60)
    out = r.stdout.decode(errors="replace")
    # 42 on a line of its own (bash ends bracketed paste before it: "\x1b[?2004l\r")
    assert re.search(r"(?m)(^|\r)42\r?$", out), (out, r.stderr)
    assert r.returncode == 3, (r.returncode, out, r.stderr)


def test_shell_refuses_what_cannot_run(cli, api):
    r = cli.run("shell")
    assert r.returncode == 2 and "give a sandbox ID" in r.stderr
    sid = cli.create()
    r = cli.run("shell", sid, "--", "")
    assert r.returncode == 2 and "empty" in r.stderr
    r = cli.run("shell", "00000000-0000-4000-8000-000000000000", input="")
    assert_readable_error(r, "not")
