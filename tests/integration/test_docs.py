"""
The shell examples of README.md and docs/*.md, run against a live stack, so
that a doc that runs cannot go stale.

What runs. Every fenced block whose info string is sh, bash, shell or
console is a test case named DOC:LINE (the line of its opening fence), and
it runs unless the line just before the fence is

    <!-- not-run: REASON -->

which makes it a skipped case with that reason (a config excerpt in a shell
fence, a command that installs or starts the system service, one that needs
an operator's nginx, a benchmark). Fences of other kinds (json, ini, nginx,
plain) are not commands and are not collected; a plain fence that holds a
"$ command" transcript is an error (test_untyped_fences_hold_no_transcript),
so that no example escapes by a missing info string.

How. The blocks of one doc run in order in one bash session, as a person
pasting them into a terminal would: a variable one block sets (ID=...) is
there for the next. Each doc gets a stack of its own (nanobox-fcgi + nginx
on the machine's dockerd, nbtest.Stack, its own instance label: every
container it made is removed when the doc is done) and a scratch directory
as the current directory. Under pytest-xdist the blocks of one doc are
best kept on one worker (`--dist loadgroup` or `loadfile`); if they are
spread anyway, a worker first replays the doc's earlier blocks in its own
session, so the result is the same, only slower.

Two kinds of block:
- A script (no line starts with "$ "): run as a whole. Every command in it
  must succeed (an ERR trap records each failing one), its output must hold
  no nanobox error ({"error": ..., "code": ...}), and when a ```json fence
  follows it directly, that fence is the answer the doc shows: the last
  JSON value the block prints must have the same keys, recursively, and the
  same values for the keys in SAMPLE_VALUES.
- A transcript ("$ command" lines, each followed by what it prints): each
  command runs on its own and must print what the doc shows, line for line,
  where these stand for any value of their kind: a UUID, "…" (with the hex
  just before it), a date and time, a duration (9m 58s), an IPv4 address
  with its port, "N ms", and a run of spaces. A command shown with no output
  must exit 0; the doc's `echo $?` lines check the other statuses.
Some blocks have more to check, or something to set up first: EXPECT, by a
piece of the block's text.

What a machine set up by `up.sh` has that a test stack has elsewhere, and
how the test fills it in:

- `http://127.0.0.1:8080`, `*.localhost:8080`: the stack's nginx (replaced,
  in commands and in shown output);
- `/etc/nanobox/nanobox.conf`: the stack's config file (replaced);
- `sudo`: a shim that just runs the command (the suite runs as root);
- `nanobox`: $NANOBOX_BUILD/nanobox, first on PATH; the CLI's own defaults
  (127.0.0.1:8080, the key in /etc/nanobox): NANOBOX_URL and NANOBOX_API_KEY
  set to the stack's;
- `build/`, `src/`, `tests/`, ...: links in the scratch dir (build ->
  $NANOBOX_BUILD, the rest -> the checkout); `app.py`, `script.sh`,
  `input.txt`: small files there (SCRATCH_FILES);
- `$KEY` used before the doc sets it: the stack's API key;
- `$ID` used by a block that does not set it first: a live sandbox, the
  session's $ID while it lives, else a new one;
- an id a transcript showed earlier (b9ccd917-..., or its prefix b9cc): the
  id that command really printed.
"""

import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests

import nbtest
from nbtest import REPO, Stack, wait_until

DOCS = [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md"))
SHELL_INFO = {"sh", "bash", "shell", "console"}
NOT_RUN_RE = re.compile(r"^\s*<!--\s*not-run:\s*(.*?)\s*-->\s*$")
FENCE_RE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^`\s]*)(.*)$")
UNIT_TIMEOUT = 180          # seconds one block (or one transcript command) may take

# Keys of a shown JSON answer whose value must be the one the doc shows.
# Others (ids, times, counts, the stack's own capacity) vary from run to run.
SAMPLE_VALUES = {"status", "docker", "image", "network", "memory", "cpus", "pids", "exit_code",
                 "timed_out", "oom_killed", "truncated", "stdout", "stderr", "output",
                 "sandboxport", "duration", "background", "running", "type"}
# Objects whose keys are the user's own data, not the API's shape.
OPAQUE = {"metadata", "env"}

SCRATCH_FILES = {
    "app.py": 'print("hello from app.py")\n',
    "script.sh": "# counts the lines of its stdin\nwc -l\n",
    "input.txt": "one\ntwo\nthree\n",
}


# ------------------------------------------------------------ the Markdown

@dataclass
class Block:
    doc: str              # path relative to the checkout
    line: int             # 1-based line of the opening fence
    info: str
    text: str             # the block's lines, the fence's indentation removed
    skip: str = None      # the not-run reason
    sample: str = None    # the ```json fence that follows, if any
    end: int = field(default=0, repr=False)   # 0-based line of the closing fence

    @property
    def name(self):
        return f"{self.doc}:{self.line}"

    @property
    def runnable(self):
        return self.info in SHELL_INFO

    @property
    def transcript(self):
        return any(ln.startswith("$ ") for ln in self.text.splitlines())


def fences(path):
    """Every fenced block of a Markdown file, in order."""
    lines = Path(path).read_text().splitlines()
    rel = str(Path(path).relative_to(REPO))
    out, i = [], 0
    while i < len(lines):
        m = FENCE_RE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, mark = len(m.group(1)), m.group(2)
        start, body, i = i, [], i + 1
        while i < len(lines):
            close = re.match(r"^\s*(" + re.escape(mark[0]) + r"{" + str(len(mark)) + r",})\s*$", lines[i])
            if close:
                break
            ln = lines[i]
            body.append(ln[indent:] if ln[:indent].strip() == "" else ln.lstrip())
            i += 1
        prev = lines[start - 1] if start > 0 else ""
        nr = NOT_RUN_RE.match(prev)
        out.append(Block(rel, start + 1, m.group(3).lower(), "\n".join(body) + "\n",
                         skip=nr.group(1) if nr else None, end=i))
        i += 1
    # a ```json fence right after a runnable block is the answer it shows
    for a, b in zip(out, out[1:]):
        between = lines[a.end + 1:b.line - 1]
        if a.runnable and b.info == "json" and all(not s.strip() for s in between):
            a.sample = b.text
    return out


def all_blocks():
    return [b for d in DOCS for b in fences(d)]


def runnable_blocks():
    return [b for b in all_blocks() if b.runnable]


# ------------------------------------------------------- what is checked

def _setup_port_8000(run, sid):
    """NGINX.md's curls of an open port: a server on port 8000 of $ID, opened."""
    api = run.stack.api
    api.exec(sid, "mkdir -p /tmp/www && echo docs-port-ok > /tmp/www/index.html && cd /tmp/www && "
                  "setsid nohup python3 -m http.server 8000 --bind 127.0.0.1 "
                  ">/dev/null 2>&1 </dev/null &")
    probe = "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", 8000))'"
    wait_until(lambda: api.exec(sid, probe)["exit_code"] == 0, 20, 0.2,
               what="http.server on 8000 in the sandbox")
    if not any(p["sandboxport"] == 8000 for p in api.ports(sid)):
        api.open_port(sid, 8000)


def _gone(run, var):
    sid = run.var(var)
    r = run.stack.api.get(sid)
    assert r.status_code == 404, f"${var} ({sid}) should be destroyed by the block: GET -> {r.status_code}"


def _is_key(run):
    key = run.var("KEY")
    assert key == run.stack.api_key, f"$KEY is {key!r}, not the key in the config file"


def _rendered(run):
    for f in ("nanobox.conf", "nanobox-http.conf", "nanobox-ports.conf", "nginx.conf"):
        assert Path(run.var("OUT"), f).is_file(), f"$OUT/{f} was not written"


# (doc, a piece of the block's text) -> what else to check:
#   json:  partial objects that the JSON values printed must match, in order
#   out:   regexes the output must hold
#   files: scratch files the block leaves, with their content
#   setup: run(session, $ID) before the block;  after: run(session) after it
EXPECT = {
    ("README.md", "echo hello > note"): dict(
        json=[{"exit_code": 0, "stdout": "42\n"}, {"exit_code": 0, "stdout": "hello\n"}],
        after=lambda run: _gone(run, "ID")),
    ("README.md", "import pandas as pd; x = 41"): dict(
        json=[{"status": "ok", "error": None},
              {"status": "ok", "stdout": "42\n", "error": None}],
        out=[r'"text/html":"<div>'], after=lambda run: _gone(run, "PY")),
    ("README.md", "build/nanobox create"): dict(
        out=[r"(?m)^42$", r"(?m)^url +http://8000-[0-9a-f-]{36}\.sandbox\.localhost:\d+/$"],
        files={"out.txt": "hello from app.py\n"},
        after=lambda run: _gone(run, "ID")),
    ("docs/CLI.md", "nanobox create --meta owner=alice"): dict(
        out=[r"(?m)^42$", r"(?m)^url +http://8000-"], after=lambda run: _gone(run, "ID")),
    ("docs/WEB.md", "awk"): dict(out=[r"^{key}\n$"]),
    ("docs/API.md", "NANOBOX=http"): dict(after=lambda run: _is_key(run)),
    ("docs/API.md", "-w '%{http_code}"): dict(out=[r"^204\n$"], after=lambda run: _gone(run, "ID")),
    ("docs/API.md", "for i in 1 2 3"): dict(json=[{"type": "stdout", "data": "1\n"},
                                                  {"type": "stdout", "data": "2\n"},
                                                  {"type": "stdout", "data": "3\n"},
                                                  {"type": "exit", "exit_code": 0}]),
    ("docs/API.md", '8000 --bind 127.0.0.1","background":true'): dict(
        json=[{"running": True, "command": ["/bin/sh", "-c",
                                            "python3 -u -m http.server 8000 --bind 127.0.0.1"]}]),
    ("docs/API.md", "--data-binary @app.py"): dict(
        json=[{"path": "/workspace/app.py", "type": "file", "size": len(SCRATCH_FILES["app.py"])},
              {"path": "/workspace/data"},
              {"path": "/workspace", "type": "dir"}],
        out=[r'"name":"app\.py","type":"file"', r'"name":"data","type":"dir"'],
        files={"app.py": SCRATCH_FILES["app.py"]}),
    ("docs/API.md", "ports/8000"): dict(out=[r"^$"]),
    ("docs/API.md", "2025-06-18"): dict(out=[r"(?mi)^HTTP/1\.1 200", r"(?mi)^mcp-session-id: \S+",
                                             r'"protocolVersion":"2025-06-18"']),
    ("docs/NGINX.md", "render-nginx.sh $OUT"): dict(
        after=lambda run: _rendered(run)),
    ("docs/NGINX.md", "8000-$ID.sandbox.localhost"): dict(
        setup=_setup_port_8000, out=[r"^docs-port-ok\ndocs-port-ok\n$"]),
}


def expectation(block):
    found = [v for (doc, piece), v in EXPECT.items() if doc == block.doc and piece in block.text]
    assert len(found) <= 1, f"{block.name}: more than one EXPECT entry matches"
    return found[0] if found else {}


# -------------------------------------------------------- a bash session

class Session:
    """One bash reading commands from a pipe; each unit of text is sourced
    from a file (so its variables stay), with stdin from /dev/null and
    stderr joined to stdout, and ends with a marker that carries $?."""

    END = "\x1eNBEND"

    def __init__(self, workdir, env):
        self.dir = Path(workdir)
        self.units = self.dir.parent / "units"
        self.units.mkdir()
        self.errlog = self.units / "errors"
        self.n = 0
        self.last = 0
        self.proc = subprocess.Popen(["bash", "--noprofile", "--norc"], cwd=str(self.dir), env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        # ERR fires for every failing command of a unit (not for our own glue)
        self._send(
            "__nb_rc() { return \"$1\"; }\n"
            "__nb_err() { [[ ${BASH_SOURCE[1]-} == */unit-* ]] && "
            f"printf '%s\\t%s\\t%s\\n' \"$1\" \"$2\" \"$3\" >> {self.errlog}; return 0; }}\n"
            "trap '__nb_err $? $LINENO \"$BASH_COMMAND\"' ERR\n")

    def _send(self, text):
        self.proc.stdin.write(text.encode())
        self.proc.stdin.flush()

    def run(self, text, join=True, timeout=UNIT_TIMEOUT):
        """(stdout, stderr, exit status, [(status, line, command) of each
        failing command]); join: stderr goes to stdout, as on a terminal."""
        if self.proc.poll() is not None:
            raise AssertionError(f"the doc's bash session has ended ({self.proc.returncode})")
        self.n += 1
        unit = self.units / f"unit-{self.n}.sh"
        unit.write_text(text)
        self.errlog.write_text("")
        stderr = self.units / "stderr"
        stderr.write_text("")
        self._send(f"__nb_rc {self.last}; . {unit} </dev/null 2>{'&1' if join else stderr}; "
                   f"printf '\\n{self.END} %d\\n' $?\n")
        buf, fd = b"", self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        end = re.compile(rb"\n" + re.escape(self.END.encode()) + rb" (\d+)\n$")
        while True:
            m = end.search(buf)
            if m:
                break
            left = deadline - time.monotonic()
            if left <= 0:
                self.close()
                raise AssertionError(f"timed out after {timeout}s; output so far:\n"
                                     f"{buf.decode('utf-8', 'replace')[-4000:]}")
            r, _, _ = select.select([fd], [], [], min(left, 1.0))
            if r:
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise AssertionError("the doc's bash session exited; output:\n"
                                         + buf.decode("utf-8", "replace")[-4000:])
                buf += chunk
        self.last = int(m.group(1))
        errs = [tuple(ln.split("\t", 2)) for ln in self.errlog.read_text().splitlines() if ln]
        return (buf[:m.start()].decode("utf-8", "replace"), stderr.read_text(errors="replace"),
                self.last, errs)

    def close(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)   # bash and what it started, by its group
            except ProcessLookupError:
                pass
        self.proc.wait(timeout=10)
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass


# ---------------------------------------------------- one doc, one stack

class DocRun:
    """The blocks of one doc, run in order in one session on one stack."""

    def __init__(self, doc):
        self.doc = doc
        self.blocks = [b for b in runnable_blocks() if b.doc == doc and not b.skip]
        self.results = {}                 # block line -> (output, status, errors) or an exception
        self.ids = {}                     # an id a transcript showed -> the id really printed
        self.stack = Stack("docs")
        self.tmp = Path(tempfile.mkdtemp(prefix="nanobox-docs-"))
        self.session = None
        try:
            self.stack.start()
            self._scratch()
            self.session = Session(self.work, self._env())
        except BaseException:
            self.close()
            raise

    def _scratch(self):
        self.work = self.tmp / "work"
        self.work.mkdir()
        for entry in REPO.iterdir():
            if entry.name not in ("build", ".git"):
                (self.work / entry.name).symlink_to(entry)
        (self.work / "build").symlink_to(nbtest.BUILD)
        for name, text in SCRATCH_FILES.items():
            (self.work / name).write_text(text)
        (self.tmp / "home").mkdir()
        (self.tmp / "tmp").mkdir()
        self.bin = self.tmp / "bin"
        self.bin.mkdir()
        (self.bin / "nanobox").symlink_to(nbtest.BUILD / "nanobox")
        sudo = self.bin / "sudo"
        sudo.write_text("#!/bin/sh\n# test_docs.py: the suite runs as root; sudo only runs the command\n"
                        "exec env -- \"$@\"\n")
        sudo.chmod(0o755)

    def _env(self):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("NANOBOX_") and k not in ("XDG_CONFIG_HOME", "KEY", "ID")}
        env.update(PATH=f"{self.bin}:{os.environ.get('PATH', '/usr/bin:/bin')}",
                   HOME=str(self.tmp / "home"), TMPDIR=str(self.tmp / "tmp"), LC_ALL="C.UTF-8",
                   TERM="dumb",
                   NANOBOX_URL=self.stack.url, NANOBOX_API_KEY=self.stack.api_key)
        if "NANOBOX_BUILD" in os.environ:
            env["NANOBOX_BUILD"] = os.environ["NANOBOX_BUILD"]
        return env

    # -- what the doc says, as it is on this stack
    def localize(self, text):
        port = self.stack.port
        text = text.replace("127.0.0.1:8080", f"127.0.0.1:{port}")
        text = text.replace("localhost:8080", f"localhost:{port}")
        return text.replace("/etc/nanobox/nanobox.conf", self.stack.conf_path)

    def map_ids(self, text):
        for shown, real in self.ids.items():
            def sub(m, shown=shown, real=real):
                tok = m.group(0)
                return real[:len(tok)] if shown.startswith(tok) else tok
            text = re.sub(r"(?<![0-9a-f-])[0-9a-f][0-9a-f-]{3,35}(?![0-9a-f-])", sub, text)
        return text

    def var(self, name):
        out, _, _, _ = self.session.run(f'printf %s "${{{name}-}}"\n')
        return out

    def fill_in(self, text):
        """$KEY and $ID as the table at the top says."""
        plain = re.sub(r"(?m)^\$ ", "", text)
        for name in ("KEY", "ID"):
            use = re.search(r"\$\{?" + name + r"\b", plain)
            if not use:
                continue
            sets = re.search(r"(?m)^\s*(?:export\s+)?" + name + "=", plain)
            if sets and sets.start() < use.start():
                continue
            have = self.var(name)
            if name == "KEY" and not have:
                self.session.run(f"KEY={self.stack.api_key}\n")
            elif name == "ID" and (not have or self.stack.api.get(have).status_code != 200):
                self.session.run(f"ID={self.stack.api.create()}\n")

    # -- running
    def result(self, block):
        """Run the doc's blocks up to this one (once each), return its result."""
        for b in self.blocks:
            if b.line not in self.results:
                try:
                    self.results[b.line] = self.run_block(b)
                except Exception as e:  # noqa: BLE001 - reported by the block's own test
                    self.results[b.line] = e
            if b.line == block.line:
                break
        r = self.results[block.line]
        if isinstance(r, Exception):
            raise r
        return r

    def run_block(self, block):
        exp = expectation(block)
        text = self.localize(block.text)
        self.fill_in(text)
        if exp.get("setup"):
            exp["setup"](self, self.var("ID"))
        if block.transcript:
            problems = self.run_transcript(text)
            out = None
        else:
            out, err, status, errs = self.session.run(text, join=False)
            problems = [f"line {ln} of the block exited {rc}: {cmd}" for rc, ln, cmd in errs]
            if status != 0 and not errs:
                problems.append(f"the block exited {status}")
            problems += check_output(out, exp, self, block.sample)
            if problems and err:
                problems.append(f"its stderr:\n{err}")
        for name, want in exp.get("files", {}).items():
            p = self.work / name
            got = p.read_text() if p.exists() else None
            if got != want:
                problems.append(f"the block should leave {name} holding {want!r}; it holds {got!r}")
        if exp.get("after") and not problems:
            try:
                exp["after"](self)
            except AssertionError as e:
                problems.append(f"after the block: {e}")
        return out, problems

    def run_transcript(self, text):
        problems = []
        for cmd, shown in transcript_steps(text):
            cmd = self.map_ids(cmd)
            out, _, status, _ = self.session.run(cmd + "\n")
            if not shown:
                if status != 0:
                    problems.append(f"$ {cmd}\nexited {status}, printed:\n{out}")
                continue
            got = out.split("\n")
            if got and got[-1] == "":
                got.pop()
            ok = len(got) == len(shown)
            for want, line in zip(shown, got):
                rx, doc_ids = shown_line_re(self.localize(want))
                m = rx.fullmatch(line.rstrip())
                if not m:
                    ok = False
                    continue
                for g, doc_id in doc_ids.items():
                    if doc_id not in self.ids and m.group(g) != doc_id:
                        self.ids[doc_id] = m.group(g)
            if not ok:
                problems.append(f"$ {cmd}\nthe doc shows:\n" + "\n".join(shown) +
                                f"\nit printed (exit {status}):\n{out}")
        return problems

    def close(self):
        if self.session:
            self.session.close()
            self.session = None
        try:
            for s in self.stack.api.list() if self.stack.proc else []:
                self.stack.api.delete(s["sandboxId"])
        except (requests.RequestException, AssertionError):
            pass
        self.stack.stop()                 # and force-removes what carries its label
        reports = self.stack.sanitizer_reports()
        if not reports:
            self.stack.remove_tmp()
        shutil.rmtree(self.tmp, ignore_errors=True)
        return reports


def transcript_steps(text):
    """[(command, [lines it is shown to print])] of a "$ " transcript."""
    steps = []
    lines = text.rstrip("\n").split("\n")
    i = 0
    while i < len(lines):
        ln = lines[i]
        assert ln.startswith("$ "), f"transcript line {i + 1} is neither a command nor its output: {ln!r}"
        cmd = ln[2:]
        while cmd.endswith("\\") and i + 1 < len(lines):
            i += 1
            cmd += "\n" + lines[i]
        i += 1
        shown = []
        while i < len(lines) and not lines[i].startswith("$ "):
            shown.append(lines[i].rstrip())
            i += 1
        while shown and shown[-1] == "":
            shown.pop()
        steps.append((cmd, shown))
    return steps


_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_SHOWN = re.compile(
    r"(?P<elided>[0-9a-f-]*…)"
    rf"|(?P<uuid>{_UUID}(?![0-9a-f]))"
    r"|(?P<when>\b\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\b)"
    r"|(?P<dur>\b\d+[dhms](?: \d+[dhms])*\b)"
    r"|(?P<ip>\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b)"
    r"|(?P<ms>\b\d+ ms\b)"
    r"|(?P<spaces> +)")


def shown_line_re(line):
    """A line of shown output as a regex (see the module's docstring), and
    {group: the UUID the doc shows there}."""
    parts, ids, pos = [], {}, 0
    for m in _SHOWN.finditer(line):
        parts.append(re.escape(line[pos:m.start()]))
        kind = m.lastgroup
        if kind == "uuid":
            g = f"id{len(ids)}"
            ids[g] = m.group(0)
            parts.append(f"(?P<{g}>{_UUID})")
        else:
            parts.append({"elided": r".*", "when": r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d",
                          "dur": r"\d+[dhms](?: \d+[dhms])*", "ip": r"\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?",
                          "ms": r"\d+ ms", "spaces": r" +"}[kind])
        pos = m.end()
    parts.append(re.escape(line[pos:]))
    return re.compile("".join(parts)), ids


# ------------------------------------------------------------ the output

def json_values(text):
    """Every JSON object or array in text, in order (answers printed by curl
    -s run together on one line; NDJSON; JSON among other text)."""
    dec, out, i = json.JSONDecoder(), [], 0
    while i < len(text):
        if text[i] in "{[":
            try:
                v, end = dec.raw_decode(text, i)
            except ValueError:
                i += 1
                continue
            out.append(v)
            i = end
        else:
            i += 1
    return out


def shape_problems(shown, got, where="answer"):
    """How got differs from the answer the doc shows (keys; SAMPLE_VALUES)."""
    if isinstance(shown, dict):
        if not isinstance(got, dict):
            return [f"{where}: the doc shows an object, got {got!r}"]
        probs = []
        if set(shown) != set(got):
            probs.append(f"{where}: the doc shows keys {sorted(shown)}, the answer has {sorted(got)}")
        for k in set(shown) & set(got):
            if k in OPAQUE:
                continue
            if k in SAMPLE_VALUES and not isinstance(shown[k], (dict, list)) and shown[k] != got[k]:
                probs.append(f"{where}.{k}: the doc shows {shown[k]!r}, the answer has {got[k]!r}")
            else:
                probs += shape_problems(shown[k], got[k], f"{where}.{k}")
        return probs
    if isinstance(shown, list):
        if not isinstance(got, list):
            return [f"{where}: the doc shows a list, got {got!r}"]
        return shape_problems(shown[0], got[0], f"{where}[0]") if shown and got else []
    kinds = lambda v: "null" if v is None else "bool" if isinstance(v, bool) else \
        "number" if isinstance(v, (int, float)) else type(v).__name__  # noqa: E731
    if shown is not None and got is not None and kinds(shown) != kinds(got):
        return [f"{where}: the doc shows a {kinds(shown)} ({shown!r}), the answer has {got!r}"]
    return []


def partial_match(want, got):
    if isinstance(want, dict):
        return isinstance(got, dict) and all(k in got and partial_match(v, got[k]) for k, v in want.items())
    return want == got


def check_output(out, exp, run, sample):
    problems = []
    values = json_values(out)
    if not exp.get("errors_ok"):
        for v in values:
            if isinstance(v, dict) and isinstance(v.get("error"), str) and isinstance(v.get("code"), str):
                problems.append(f"a nanobox error in the output: {json.dumps(v)}")
    if sample is not None:
        try:
            shown = json.loads(sample)
        except ValueError as e:
            problems.append(f"the ```json answer after the block is not JSON: {e}")
        else:
            objs = [v for v in values if isinstance(v, dict)]
            problems += shape_problems(shown, objs[-1]) if objs else ["the block printed no JSON answer"]
    want = list(exp.get("json", []))
    for v in values:
        if want and partial_match(want[0], v):
            want.pop(0)
    if want:
        problems.append(f"no JSON value printed matches {want[0]} (in order)")
    for rx in exp.get("out", []):
        rx = rx.replace("{key}", re.escape(run.stack.api_key))
        if not re.search(rx, out):
            problems.append(f"the output does not match {rx!r}")
    return problems


# ------------------------------------------------------------ the fixtures

class Runs:
    def __init__(self):
        self.runs = {}
        self.reports = []

    def get(self, doc):
        if doc not in self.runs:
            self.runs[doc] = DocRun(doc)
        return self.runs[doc]

    def done(self, doc):
        run = self.runs.pop(doc, None)
        if run:
            self.reports += run.close()


@pytest.fixture(scope="module")
def doc_runs():
    runs = Runs()
    yield runs
    for doc in list(runs.runs):
        runs.done(doc)
    if runs.reports:
        pytest.fail("sanitizer reports in a docs stack's log:\n" + "\n".join(runs.reports[:20]))


def _params():
    out = []
    for b in runnable_blocks():
        marks = [pytest.mark.skip(reason=f"{b.name} not-run: {b.skip}")] if b.skip else []
        if "xdist.plugin" in sys.modules:           # one doc's blocks on one worker (loadgroup)
            marks.append(pytest.mark.xdist_group(name=f"docs-{b.doc}"))
        out.append(pytest.param(b, id=b.name, marks=marks))
    return out


@pytest.mark.parametrize("block", _params())
def test_doc_block(block, doc_runs):
    run = doc_runs.get(block.doc)
    try:
        out, problems = run.result(block)
    finally:
        if block.line == run.blocks[-1].line:        # the doc is done: its stack goes
            doc_runs.done(block.doc)
    if problems:
        pytest.fail(f"{block.name} ({'transcript' if block.transcript else 'script'}):\n"
                    + block.text + "\n--- problems ---\n" + "\n\n".join(problems)
                    + (f"\n--- output ---\n{out}" if out is not None else ""), pytrace=False)


# ------------------------------------------------- the conventions hold

def test_not_run_markers_sit_on_a_shell_fence():
    """A marker whose block moved away would silently mark nothing."""
    bad = []
    for d in DOCS:
        lines = d.read_text().splitlines()
        for i, ln in enumerate(lines):
            if NOT_RUN_RE.match(ln):
                m = FENCE_RE.match(lines[i + 1]) if i + 1 < len(lines) else None
                if not m or m.group(3).lower() not in SHELL_INFO:
                    bad.append(f"{d.relative_to(REPO)}:{i + 1}")
                elif not NOT_RUN_RE.match(ln).group(1):
                    bad.append(f"{d.relative_to(REPO)}:{i + 1} (no reason)")
    assert not bad, "not-run markers not right before a sh/bash/console fence: " + ", ".join(bad)


def test_untyped_fences_hold_no_transcript():
    """A "$ command" transcript in a fence with no info string would never run."""
    bad = [b.name for b in all_blocks() if not b.info and
           any(ln.startswith("$ ") for ln in b.text.splitlines())]
    assert not bad, "give these fences an info string (sh) so that they run: " + ", ".join(bad)


def test_every_expectation_names_one_block():
    runnable = runnable_blocks()
    for (doc, piece) in EXPECT:
        hits = [b.name for b in runnable if b.doc == doc and piece in b.text]
        assert len(hits) == 1, f"EXPECT[{doc!r}, {piece!r}] matches {hits or 'no block'}"
        assert not [b for b in runnable if b.name == hits[0] and b.skip], f"{hits[0]} is not-run"
