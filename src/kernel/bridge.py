"""nanobox code bridge: the stateful code interpreter inside a sandbox.

nanobox-init starts this program on the first code request of a sandbox
(agent request `K`, docs/AGENT-PROTOCOL.md) and hands it each such
connection from the host over a SOCK_SEQPACKET pair on NANOBOX_KERNEL_FD,
with SCM_RIGHTS, in a message of the byte K and what nanobox-init had
already read of the connection after the host's K (a host may send its
request without waiting for the hello: those bytes are its start). On a
connection the bridge says hello (`p` frame), reads one JSON request (`j`
frame), answers with JSON events (`j` frames), then `.` (or `!` errno +
message), and closes it.

It keeps the sandbox's contexts: a Python context is a real Jupyter kernel
(ipykernel, driven with jupyter_client over ipc sockets in a private
directory: no TCP port), a javascript context a node process running
jsrunner.js, a typescript context the same runner transpiling each cell
first, a bash context a bash process. One execution at a time per
context, in arrival order; contexts run in parallel. It runs as the
sandbox's own user and has no rights the sandbox's code does not have.
"""

import errno
import hmac
import json
import os
import re
import secrets
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

HELLO = b"nanobox-kernel 1"
MAX_BODY = 1 << 20  # NBA_MAX_BODY: the largest frame either side accepts
EVENT_ROOM = MAX_BODY - 4096  # one event must fit in a frame
FLUSH_BYTES = 64 << 10  # frames held back for one write (Conn.cork) go out past this
MAX_CONTEXTS = 16
PASS_MAX = 64 << 10  # NBA_KERNEL_PASS_MAX: most bytes passed with a connection
# Where contexts start by default: the directory nanobox-init started the
# bridge in, the container's working directory, which is nanobox.conf's
# workspace (/workspace unless the operator moved it, e.g. to /home/user).
WORKSPACE = os.getcwd()
LANGUAGES = ("python", "javascript", "typescript", "bash")
INTERRUPT_GRACE = 5.0  # seconds a context gets to stop after an interrupt
HERE = os.path.dirname(os.path.abspath(__file__))
# display.py's formatters (loaded into each python kernel): a figure's chart
# goes out as the result's own "chart"; a DataFrame's columns stay in data.
CHART_MIME = "application/vnd.nanobox.chart+json"
DATA_MIME = "application/vnd.nanobox.data+json"
DISPLAY_SETUP = """
def __nb_display():
    import importlib.util
    spec = importlib.util.spec_from_file_location("_nanobox_display", %r)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.install(get_ipython())
try:
    __nb_display()
finally:
    del __nb_display
""" % os.path.join(HERE, "display.py")
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


class Fail(Exception):
    """An error answered as an `!` frame: errno and message."""

    def __init__(self, err, msg):
        super().__init__(msg)
        self.err = err
        self.msg = msg


class Gone(Exception):
    """The host closed the connection."""


# ---------------------------------------------------------------- frames


class Conn:
    """The host's connection. Frames go out as they are sent, or, while
    corked, together at uncork (one write, one wake-up of the host for the
    events a poll of the kernel brought, and for the end and its `.`)."""

    def __init__(self, sock, ahead=b""):
        self.sock = sock
        self.ahead = ahead  # read from the connection by nanobox-init: the first bytes
        self.held = []
        self.held_bytes = 0
        self.corked = False

    def send(self, ftype, body=b""):
        self.held.append(struct.pack(">BI", ord(ftype), len(body)) + body)
        self.held_bytes += 5 + len(body)
        if not self.corked or self.held_bytes >= FLUSH_BYTES:
            self.flush()

    def flush(self):
        if not self.held:
            return
        data = b"".join(self.held)
        self.held, self.held_bytes = [], 0
        try:
            self.sock.sendall(data)
        except OSError as e:
            raise Gone() from e

    def cork(self):
        self.corked = True

    def uncork(self):
        self.corked = False
        self.flush()

    def event(self, obj):
        self.send("j", json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode())

    def error(self, err, msg):
        self.corked = False
        try:
            self.send("!", struct.pack(">I", err) + msg.encode()[:4096])
        except Gone:
            pass

    def recv_exact(self, n):
        buf, self.ahead = self.ahead[:n], self.ahead[n:]
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise Gone()
            buf += chunk
        return buf

    def recv_frame(self):
        ftype, n = struct.unpack(">BI", self.recv_exact(5))
        if n > MAX_BODY:
            raise Fail(errno.EPROTO, "frame too large")
        return chr(ftype), self.recv_exact(n)

    def gone(self):
        """Has the host closed its side (or sent anything, which it must not)?"""
        try:
            r, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(r)


class Output:
    """Counts what an execution sends against its cap; drops the rest."""

    def __init__(self, conn, cap):
        self.conn = conn
        self.cap = cap
        self.sent = 0
        self.truncated = False

    def take(self, n):
        if self.sent + n > self.cap:
            self.truncated = True
            self.sent = self.cap
            return False
        self.sent += n
        return True

    def stream(self, name, text):
        if not text:
            return
        room = self.cap - self.sent
        if len(text.encode()) > room:
            text = text.encode()[:room].decode(errors="ignore")
            self.truncated = True
        if not text:
            self.truncated = True
            return
        self.sent += len(text.encode())
        self.conn.event({"type": name, "text": text})

    def result(self, data, main):
        ev = {"type": "result", "is_main_result": main, "data": data}
        chart = data.pop(CHART_MIME, None) if isinstance(data, dict) else None
        if isinstance(chart, dict) and chart:
            ev["chart"] = chart
        for n, cut in enumerate(self.cuts(ev)):
            body = json.dumps(cut, ensure_ascii=False, separators=(",", ":"))
            if len(body) <= EVENT_ROOM and self.sent + len(body) <= self.cap:
                self.truncated |= n > 0
                self.take(len(body))
                self.conn.send("j", body.encode())
                return
        self.truncated = True

    @staticmethod
    def cuts(ev):
        """ev, then smaller forms of it for when it does not fit: without the
        chart and a table's data (the picture says it), without the pictures
        (the chart says it), its text alone."""

        def cut(keep_chart, keep):
            out = {k: v for k, v in ev.items() if k != "chart" and k != "data"}
            out["data"] = {k: v for k, v in data.items() if keep(k)}
            if keep_chart and "chart" in ev:
                out["chart"] = ev["chart"]
            return out

        yield ev
        data = ev["data"] if isinstance(ev.get("data"), dict) else {}
        structured = "chart" in ev or DATA_MIME in data
        big = [k for k in data if k.startswith("image/") or k == "application/pdf"]
        if structured:
            yield cut(False, lambda k: k != DATA_MIME)
            if big:
                yield cut(True, lambda k: k not in big)
        if set(data) - {"text/plain"}:
            yield cut(False, lambda k: k == "text/plain")

    def error(self, name, value, traceback):
        ev = {"type": "error", "name": name, "value": value, "traceback": traceback}
        body = json.dumps(ev, ensure_ascii=False, separators=(",", ":"))
        if len(body) > EVENT_ROOM:
            ev["traceback"] = traceback[-(EVENT_ROOM // 2) :]
            ev["value"] = value[: EVENT_ROOM // 4]
            self.truncated = True
        self.conn.event(ev)  # an error is always told, over the cap too


# ---------------------------------------------------------------- contexts


class Context:
    """One interpreter. Subclasses: PythonContext, ProcessContext."""

    language = None

    def __init__(self, cid, cwd, env):
        self.id = cid
        self.cwd = cwd
        self.env = dict(env or {})
        self.created_at = int(time.time())
        self.executions = 0
        self.busy = False
        self.died = False  # the last kernel died: the next run starts one and says so
        self.deleted = False
        self.cond = threading.Condition()
        self.next_ticket = 0
        self.serving = 0

    # FIFO turn-taking: executions of one context run in arrival order.
    def acquire(self):
        with self.cond:
            ticket = self.next_ticket
            self.next_ticket += 1
            while self.serving != ticket:
                self.cond.wait()

    def release(self):
        with self.cond:
            self.serving += 1
            self.cond.notify_all()

    def info(self):
        state = "busy" if self.busy else ("dead" if self.died or not self.alive() else "idle")
        return {
            "id": self.id,
            "language": self.language,
            "cwd": self.cwd,
            "state": state,
            "executions": self.executions,
            "created_at": self.created_at,
        }

    def kernel_env(self):
        env = dict(os.environ)
        env.pop("NANOBOX_KERNEL_FD", None)
        env.update(self.env)
        return env

    def run(self, code, timeout, env, out, conn):
        """Run code, sending events through out; returns (status, count)."""
        raise NotImplementedError

    # start / stop / alive / interrupt are the subclass's


def strip_ansi(s):
    return ANSI.sub("", s)


class PythonContext(Context):
    language = "python"

    def __init__(self, cid, cwd, env):
        super().__init__(cid, cwd, env)
        self.km = None
        self.session = self.shell = self.iopub = None
        self.rundir = None

    def start(self):
        try:
            import jupyter_client  # noqa: F401  (the image's python3-jupyter-client)
            import ipykernel  # noqa: F401
        except ImportError as e:
            raise Fail(
                errno.ENOEXEC,
                "this sandbox's image has no Jupyter kernel for python (%s); "
                "create the sandbox from the nanobox-python template" % e.name,
            ) from e
        from jupyter_client import KernelManager

        import site

        # pip's --user target on sys.path from the start, so a package that
        # `%pip install` puts there imports in this kernel without a restart
        try:
            os.makedirs(site.getusersitepackages(), exist_ok=True)
        except OSError:
            pass
        self.rundir = tempfile.mkdtemp(prefix="nanobox-kernel-", dir="/tmp")
        env = self.kernel_env()
        env.setdefault("MPLCONFIGDIR", os.path.join(self.rundir, "mpl"))
        env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
        env["JUPYTER_RUNTIME_DIR"] = self.rundir
        km = KernelManager(
            kernel_name="python3",
            transport="ipc",
            ip=os.path.join(self.rundir, "k"),
            connection_file=os.path.join(self.rundir, "kernel.json"),
        )
        km.start_kernel(cwd=self.cwd, env=env, extra_arguments=["--HistoryManager.enabled=False"])
        self.km = km
        try:
            self.connect()
        except BaseException:
            self.stop()
            raise
        # charts and table data as results (display.py); a kernel without
        # IPython's formatters just goes without
        self.quiet(DISPLAY_SETUP)

    def connect(self):
        """Our own shell and iopub sockets on a plain zmq context.

        jupyter_client's own clients are asyncio-based; the run loop polls
        the kernel's sockets together with the host's connection, so it
        speaks through jupyter_client's Session (framing, signing) on
        sockets it owns. Ready once a kernel_info request is answered and
        iopub delivers (the subscription is live).
        """
        import zmq

        km = self.km
        zctx = zmq.Context.instance()
        self.session = km.session
        self.shell = zctx.socket(zmq.DEALER)
        self.shell.linger = 0
        self.shell.connect(km._make_url("shell"))  # noqa: SLF001 - its own URL helper
        self.iopub = zctx.socket(zmq.SUB)
        self.iopub.linger = 0
        self.iopub.setsockopt(zmq.SUBSCRIBE, b"")
        self.iopub.connect(km._make_url("iopub"))  # noqa: SLF001
        poller = zmq.Poller()
        poller.register(self.shell, zmq.POLLIN)
        poller.register(self.iopub, zmq.POLLIN)
        deadline = time.monotonic() + 60
        replied = heard = False
        while not (replied and heard):
            if time.monotonic() > deadline or not self.alive():
                raise Fail(errno.EIO, "the python kernel did not start")
            # until iopub has heard too: its subscription may miss the first replies
            self.session.send(self.shell, "kernel_info_request", {})
            for sock, _ in poller.poll(200):
                while self.recv(sock) is not None:
                    if sock is self.shell:
                        replied = True
                    else:
                        heard = True

    def recv(self, sock):
        """The next message waiting on sock as (msg_type, parent msg_id,
        content), or None.

        jupyter_client's Session.recv less what the bridge never reads: it
        parses both headers' dates with dateutil, about a third of the
        bridge's CPU time for a short cell, spent against the sandbox's CPU
        limit. The signature and the replay check are Session's own.
        """
        import zmq

        session = self.session
        try:
            parts = sock.recv_multipart(zmq.NOBLOCK)
        except zmq.Again:
            return None
        _, parts = session.feed_identities(parts)
        if len(parts) < 5:
            raise ValueError("malformed message from the kernel")
        if session.auth is not None:
            signature = parts[0]
            if not signature or signature in session.digest_history:
                raise ValueError("unsigned or replayed message from the kernel")
            session._add_digest(signature)  # noqa: SLF001 - Session's own replay record
            if not hmac.compare_digest(signature, session.sign(parts[1:5])):
                raise ValueError("invalid signature from the kernel")
        header, parent = session.unpack(parts[1]), session.unpack(parts[2])
        return header.get("msg_type"), parent.get("msg_id"), session.unpack(parts[4])

    def execute(self, code, silent=False):
        msg = self.session.msg(
            "execute_request",
            {
                "code": code,
                "silent": silent,
                "store_history": not silent,
                "user_expressions": {},
                "allow_stdin": False,
                # each request is its own turn (acquire): an error must not
                # make the kernel abort the next one that arrives right after
                # its reply (ipykernel's _abort_queues window)
                "stop_on_error": False,
            },
        )
        self.session.send(self.shell, msg)
        return msg["header"]["msg_id"]

    def process(self):
        """The kernel's Popen (jupyter_client's local provisioner), or None."""
        return getattr(getattr(self.km, "provisioner", None), "process", None)

    def alive(self):
        # the process itself: KernelManager.is_alive runs a new asyncio event
        # loop for each call (a self-pipe, an epoll: ~0.4 ms of CPU per cell)
        proc = self.process()
        return proc is not None and proc.poll() is None

    def stop(self):
        for sock in (self.shell, self.iopub):
            if sock is not None:
                sock.close()
        self.shell = self.iopub = None
        if self.km is not None:
            try:
                self.km.shutdown_kernel(now=True)
            except Exception:  # noqa: BLE001 - a dead kernel is what we want
                pass
        self.km = None
        if self.rundir:
            subprocess.run(["rm", "-rf", self.rundir], check=False)
            self.rundir = None

    def kill(self):
        """SIGKILL the kernel, touching nothing its run loop uses (any thread may call this)."""
        proc = self.process()
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                try:
                    proc.kill()
                except OSError:
                    pass

    def interrupt(self):
        if self.km is not None:
            try:
                self.km.interrupt_kernel()
            except Exception:  # noqa: BLE001
                pass

    def quiet(self, code):
        """Run code silently (no history, no output), waiting for its reply."""
        import zmq

        mid = self.execute(code, silent=True)
        poller = zmq.Poller()
        poller.register(self.shell, zmq.POLLIN)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if poller.poll(200):
                msg = self.recv(self.shell)
                if msg and msg[1] == mid:
                    return
            elif not self.alive():
                return

    def run(self, code, timeout, env, out, conn):
        import zmq

        iopub, shell = self.iopub, self.shell
        if env:
            self.quiet(
                "import os as __nb_os; __nb_env_saved = {k: __nb_os.environ.get(k) for k in %r}; "
                "__nb_os.environ.update(%r)" % (list(env), env)
            )
        mid = self.execute(code)
        poller = zmq.Poller()
        poller.register(iopub, zmq.POLLIN)
        poller.register(shell, zmq.POLLIN)
        poller.register(conn.sock.fileno(), zmq.POLLIN)
        deadline = time.monotonic() + timeout if timeout else None
        interrupted_at = None
        status, count = "ok", None
        idle = replied = False
        reason = None  # timed_out | interrupted (client gone)
        while not (idle and replied):
            wait = 250
            now = time.monotonic()
            if deadline is not None and interrupted_at is None:
                if now >= deadline:
                    reason = "timed_out"
                    interrupted_at = now
                    self.interrupt()
                else:
                    wait = min(wait, max(1, int((deadline - now) * 1000) + 1))
            if interrupted_at is not None and now - interrupted_at > INTERRUPT_GRACE:
                # it ignores SIGINT (stuck in C code): only a new kernel helps
                self.stop()
                self.died = True
                out.error("KernelDied", "the kernel did not stop at the interrupt and was restarted", "")
                return "timed_out" if reason == "timed_out" else "kernel_died", count
            events = dict(poller.poll(wait))
            if conn.sock.fileno() in events and interrupted_at is None:
                reason = "interrupted"
                interrupted_at = time.monotonic()
                poller.unregister(conn.sock.fileno())
                out.conn = Dropped()
                self.interrupt()
            conn.cork()  # what this poll brought goes out in one write
            if iopub in events:
                while True:
                    msg = self.recv(iopub)
                    if msg is None:
                        break
                    t, parent, c = msg
                    if parent != mid:
                        continue
                    if t == "stream":
                        out.stream("stdout" if c.get("name") == "stdout" else "stderr", c.get("text", ""))
                    elif t == "execute_result":
                        out.result(c.get("data", {}), True)
                    elif t in ("display_data", "update_display_data"):
                        out.result(c.get("data", {}), False)
                    elif t == "error":
                        out.error(
                            c.get("ename", ""),
                            c.get("evalue", ""),
                            strip_ansi("\n".join(c.get("traceback", []))),
                        )
                    elif t == "execute_input":
                        count = c.get("execution_count")
                        out.conn.event({"type": "execution_count", "execution_count": count})
                    elif t == "status" and c.get("execution_state") == "idle":
                        idle = True
            if shell in events:
                while True:
                    msg = self.recv(shell)
                    if msg is None:
                        break
                    if msg[1] == mid:
                        replied = True
                        st = msg[2].get("status", "ok")
                        status = "error" if st in ("error", "aborted") else "ok"
                        count = msg[2].get("execution_count", count)
            conn.uncork()
            if not events and not self.alive():
                self.stop()
                self.died = True
                out.error("KernelDied", "the kernel died while running this code (it exited or ran out of memory)", "")
                return "kernel_died", count
        if env and self.alive():
            self.quiet(
                "for __nb_k, __nb_v in __nb_env_saved.items():\n"
                "    __nb_os.environ.pop(__nb_k, None) if __nb_v is None else __nb_os.environ.__setitem__(__nb_k, __nb_v)\n"
                "del __nb_env_saved"
            )
        return (reason or status), count


class Dropped:
    """Where events go once the host is gone."""

    def event(self, obj):
        pass

    def send(self, ftype, body=b""):
        pass


class ProcessContext(Context):
    """A long-lived interpreter process (node, bash) driven over pipes.

    The code of a cell goes in on stdin as one JSON line (node) or a
    `source` of a file (bash); the process says the cell is done on a pipe
    of its own (fd $NANOBOX_CTL_FD).
    The cell's stdout and stderr are its own fds 1 and 2 (pipes we read),
    so whatever the code prints, the control channel stays clean.
    """

    def __init__(self, cid, cwd, env):
        super().__init__(cid, cwd, env)
        self.proc = None
        self.ctl = None  # our end of fd 3
        self.rundir = None
        self.cells = 0

    def argv(self):
        raise NotImplementedError

    def start(self):
        if not os.path.isdir(self.cwd):
            raise Fail(errno.ENOENT, "no directory %s" % self.cwd)
        self.rundir = tempfile.mkdtemp(prefix="nanobox-%s-" % self.language, dir="/tmp")
        r, w = os.pipe()
        env = self.kernel_env()
        env["NANOBOX_CTL_FD"] = str(w)
        try:
            self.proc = subprocess.Popen(
                self.argv(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self.cwd,
                env=env,
                pass_fds=(w,),
                start_new_session=True,
            )
        except FileNotFoundError as e:
            os.close(r)
            os.close(w)
            raise Fail(
                errno.ENOEXEC,
                "this sandbox's image has no %s (%s); create the sandbox from the nanobox-python template"
                % (self.language, e.filename),
            ) from e
        os.close(w)
        self.ctl = os.fdopen(r, "rb", buffering=0)
        for f in (self.proc.stdout, self.proc.stderr):
            os.set_blocking(f.fileno(), False)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            self.proc.wait()
            for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr, self.ctl):
                try:
                    f.close()
                except OSError:
                    pass
        self.proc = self.ctl = None
        if self.rundir:
            subprocess.run(["rm", "-rf", self.rundir], check=False)
            self.rundir = None

    def kill(self):
        """SIGKILL the interpreter's group, touching nothing its run loop uses."""
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass

    def interrupt(self):
        if self.alive():
            try:
                os.killpg(self.proc.pid, signal.SIGINT)
            except OSError:
                pass

    def submit(self, code, env):
        raise NotImplementedError

    def finish(self, line, out):
        """Handle the done line; returns (status, count)."""
        raise NotImplementedError

    def run(self, code, timeout, env, out, conn):
        try:
            self.submit(code, env)
        except OSError:
            self.stop()
            self.died = True
            out.error("KernelDied", "the %s process has exited" % self.language, "")
            return "kernel_died", None
        self.cells += 1
        fds = {self.proc.stdout.fileno(): "stdout", self.proc.stderr.fileno(): "stderr"}
        ctl = self.ctl.fileno()
        deadline = time.monotonic() + timeout if timeout else None
        interrupted_at = None
        reason = None
        pending = b""
        watch = [ctl, conn.sock.fileno()] + list(fds)
        while True:
            now = time.monotonic()
            wait = 0.25
            if deadline is not None and interrupted_at is None:
                if now >= deadline:
                    reason, interrupted_at = "timed_out", now
                    self.interrupt()
                else:
                    wait = min(wait, deadline - now)
            if interrupted_at is not None and now - interrupted_at > INTERRUPT_GRACE:
                self.stop()
                self.died = True
                out.error("KernelDied", "the %s process did not stop at the interrupt and was restarted" % self.language, "")
                return reason or "kernel_died", None
            r, _, _ = select.select(watch, [], [], max(wait, 0))
            if conn.sock.fileno() in r:
                watch.remove(conn.sock.fileno())
                if interrupted_at is None:
                    reason, interrupted_at = "interrupted", time.monotonic()
                    out.conn = Dropped()
                    self.interrupt()
            for fd in r:
                if fd in fds:
                    self.pump(fd, fds[fd], out)
            if ctl in r:
                chunk = os.read(ctl, 65536)
                if not chunk:
                    self.drain(fds, out)
                    self.stop()
                    self.died = True
                    out.error("KernelDied", "the %s process has exited" % self.language, "")
                    return "kernel_died", None
                pending += chunk
                if b"\n" in pending:
                    line, _, pending = pending.partition(b"\n")
                    self.drain(fds, out)
                    status, count = self.finish(line, out)
                    return (reason or status), count

    def pump(self, fd, name, out):
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return
        if data:
            out.stream(name, data.decode(errors="replace"))

    def drain(self, fds, out):
        for fd, name in fds.items():
            while True:
                try:
                    data = os.read(fd, 65536)
                except (BlockingIOError, OSError):
                    break
                if not data:
                    break
                out.stream(name, data.decode(errors="replace"))


class JavascriptContext(ProcessContext):
    language = "javascript"

    def argv(self):
        return ["node", os.path.join(HERE, "jsrunner.js")]

    def submit(self, code, env):
        line = json.dumps({"code": code, "env": env or {}}) + "\n"
        self.proc.stdin.write(line.encode())
        self.proc.stdin.flush()

    def finish(self, line, out):
        try:
            done = json.loads(line)
        except ValueError:
            return "error", None
        for r in done.get("results", []):
            out.result(r, True)
        err = done.get("error")
        if err:
            out.error(err.get("name", "Error"), err.get("value", ""), err.get("traceback", ""))
            return "error", self.cells
        return "ok", self.cells


class TypescriptContext(JavascriptContext):
    """jsrunner.js with each cell transpiled (types erased) before it runs."""

    language = "typescript"

    def kernel_env(self):
        env = super().kernel_env()
        env["NANOBOX_JS_LANG"] = "typescript"
        return env


class BashContext(ProcessContext):
    language = "bash"

    def argv(self):
        return ["bash", "--noprofile", "--norc"]

    def start(self):
        super().start()
        # An interrupt stops the cell's commands, and the cell: `return`
        # leaves the sourced file, the shell and its state stay.
        self.proc.stdin.write(b"trap 'return 130 2>/dev/null' INT\n")
        self.proc.stdin.flush()

    def submit(self, code, env):
        # the syntax is checked first: an unclosed quote would swallow the done line
        chk = subprocess.run(["bash", "-n"], input=code.encode(), capture_output=True, check=False)
        cell = os.path.join(self.rundir, "cell.sh")
        with open(cell, "w", encoding="utf-8") as f:
            if chk.returncode != 0:
                f.write("printf '%%s' %s >&2; (exit 2)\n" % shquote(chk.stderr.decode(errors="replace")))
            else:
                for k, v in (env or {}).items():
                    f.write("export %s=%s\n" % (k, shquote(v)))
                f.write(code)
                f.write("\n")
        # this run's env over the context's own, which comes back after it
        save = restore = ""
        for i, k in enumerate(env or {}):
            save += '__nb_had%d=${%s+x}; __nb_old%d="${%s-}"; ' % (i, k, i, k)
            restore += 'if [ -n "$__nb_had%d" ]; then export %s="$__nb_old%d"; else unset %s; fi; ' % (i, k, i, k)
            restore += "unset __nb_had%d __nb_old%d; " % (i, i)
        script = '%ssource %s </dev/null; __nb_rc=$?; %sprintf "%%d\\n" $__nb_rc >&"$NANOBOX_CTL_FD"\n' % (
            save,
            shquote(cell),
            restore,
        )
        self.proc.stdin.write(script.encode())
        self.proc.stdin.flush()

    def finish(self, line, out):
        try:
            rc = int(line)
        except ValueError:
            rc = 1
        if rc != 0:
            out.error("ExitCode", str(rc), "the cell's last command exited with status %d" % rc)
            return "error", self.cells
        return "ok", self.cells


def shquote(s):
    return "'" + s.replace("'", "'\\''") + "'"


KINDS = {
    "python": PythonContext,
    "javascript": JavascriptContext,
    "typescript": TypescriptContext,
    "bash": BashContext,
}


class Bridge:
    def __init__(self):
        self.lock = threading.Lock()
        self.contexts = {}

    def get(self, cid):
        with self.lock:
            ctx = self.contexts.get(cid)
        if ctx is None:
            raise Fail(errno.ENOENT, "no context '%s'" % cid)
        return ctx

    def default(self, language):
        """The language's default context (its id is the language), made on first use."""
        with self.lock:
            ctx = self.contexts.get(language)
            if ctx is None:
                if len(self.contexts) >= MAX_CONTEXTS:
                    raise Fail(errno.EAGAIN, "too many contexts (max %d): delete one" % MAX_CONTEXTS)
                ctx = KINDS[language](language, WORKSPACE, None)
                ctx.died = None  # never started: starting it is not a restart
                self.contexts[language] = ctx
        return ctx

    def create(self, language, cwd, env):
        if language not in KINDS:
            raise Fail(errno.EINVAL, "unsupported language '%s'" % language)
        cwd = cwd or WORKSPACE
        if not os.path.isdir(cwd):
            raise Fail(errno.ENOENT, "no directory %s" % cwd)
        if not os.access(cwd, os.X_OK):
            raise Fail(errno.ENOENT, "the sandbox's user may not enter %s" % cwd)
        with self.lock:
            if len(self.contexts) >= MAX_CONTEXTS:
                raise Fail(errno.EAGAIN, "too many contexts (max %d): delete one" % MAX_CONTEXTS)
            cid = "ctx-" + secrets.token_hex(6)
            ctx = KINDS[language](cid, cwd, env)
            self.contexts[cid] = ctx
        ctx.acquire()
        try:
            ctx.start()
        except BaseException:
            with self.lock:
                self.contexts.pop(cid, None)
            raise
        finally:
            ctx.release()
        return ctx

    def ensure(self, ctx):
        """Start ctx's interpreter if it is not running; True if this replaced a dead one."""
        if ctx.alive():
            return False
        restarted = ctx.died is not None
        ctx.stop()
        ctx.start()
        ctx.died = False
        return restarted

    def delete(self, cid):
        ctx = self.get(cid)
        with self.lock:
            self.contexts.pop(cid, None)
        ctx.deleted = True  # executions still queued answer ENOENT
        ctx.kill()  # a running one ends (its loop sees the interpreter gone)
        ctx.acquire()
        try:
            ctx.stop()
        finally:
            ctx.release()

    def restart(self, cid):
        ctx = self.get(cid)
        ctx.kill()  # a running execution ends as kernel_died; the queue moves on
        ctx.acquire()
        try:
            ctx.stop()
            ctx.start()
            ctx.died = False
        finally:
            ctx.release()
        return ctx

    # ---------------------------------------------------------- one connection

    def serve(self, sock, ahead=b""):
        conn = Conn(sock, ahead)
        try:
            conn.send("p", HELLO)
            sock.settimeout(30)
            ftype, body = conn.recv_frame()
            sock.settimeout(None)
            if ftype != "j":
                raise Fail(errno.EPROTO, "expected a j frame")
            try:
                req = json.loads(body)
            except ValueError as e:
                raise Fail(errno.EINVAL, "the request is not JSON") from e
            if not isinstance(req, dict):
                raise Fail(errno.EINVAL, "the request is not a JSON object")
            self.dispatch(conn, req)
            conn.send(".")
            conn.uncork()
        except Fail as f:
            conn.error(f.err, f.msg)
        except (Gone, socket.timeout):
            pass
        except Exception as e:  # noqa: BLE001 - tell the host rather than die
            conn.error(errno.EIO, "code bridge: %s: %s" % (type(e).__name__, e))
        finally:
            try:
                sock.close()
            except OSError:
                pass

    def dispatch(self, conn, req):
        op = req.get("op")
        if op == "run":
            self.run(conn, req)
        elif op == "interrupt":
            self.get(str(req.get("context") or "python")).interrupt()
        elif op == "contexts":
            with self.lock:
                ctxs = list(self.contexts.values())
            for ctx in ctxs:
                conn.event(ctx.info())
        elif op == "create":
            conn.event(self.create(req.get("language") or "python", req.get("cwd"), req.get("env")).info())
        elif op == "restart":
            conn.event(self.restart(str(req.get("context"))).info())
        elif op == "delete":
            self.delete(str(req.get("context")))
        elif op == "warm":
            ctx = self.default("python")
            ctx.acquire()
            try:
                self.ensure(ctx)
            finally:
                ctx.release()
        else:
            raise Fail(errno.EINVAL, "unknown op %r" % op)

    def run(self, conn, req):
        code = req.get("code")
        if not isinstance(code, str) or not code:
            raise Fail(errno.EINVAL, "code must be a non-empty string")
        language = req.get("language")
        cid = req.get("context")
        if cid:
            ctx = self.get(str(cid))
            if language and language != ctx.language:
                raise Fail(errno.EINVAL, "context %s is %s, not %s" % (ctx.id, ctx.language, language))
        else:
            language = language or "python"
            if language not in KINDS:
                raise Fail(errno.EINVAL, "unsupported language '%s'" % language)
            ctx = self.default(language)
        timeout = max(0, int(req.get("timeout_ms") or 0)) / 1000.0
        env = req.get("env") or None
        if env is not None and not (
            isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
        ):
            raise Fail(errno.EINVAL, "env must map names to strings")
        cap = int(req.get("max_output") or 16 << 20)
        t0 = time.monotonic()
        ctx.acquire()
        try:
            if ctx.deleted:
                raise Fail(errno.ENOENT, "no context '%s'" % ctx.id)
            if conn.gone():
                return  # the host gave up while this waited its turn
            restarted = self.ensure(ctx)
            ctx.busy = True
            out = Output(conn, cap)
            status, count = ctx.run(code, timeout, env, out, conn)
            ctx.executions += 1
        finally:
            ctx.busy = False
            ctx.release()
        conn.cork()  # the end and serve's `.` in one write
        out.conn.event(
            {
                "type": "end",
                "context": ctx.id,
                "language": ctx.language,
                "status": status,
                "execution_count": count,
                "timed_out": status == "timed_out",
                "truncated": out.truncated,
                "kernel_restarted": restarted,
                "duration_ms": int((time.monotonic() - t0) * 1000),
            }
        )


def main():
    fd = int(os.environ.get("NANOBOX_KERNEL_FD", "3"))
    ctl = socket.socket(fileno=fd)
    os.environ.pop("NANOBOX_KERNEL_FD", None)
    # interrupts are for the contexts (a handler, not SIG_IGN: their
    # interpreters must not inherit an ignored SIGINT)
    signal.signal(signal.SIGINT, lambda *_: None)
    bridge = Bridge()
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(ctl, 1 + PASS_MAX, 8)
        except InterruptedError:
            continue
        except OSError:
            break
        if not fds:
            break  # nanobox-init is gone
        for i, f in enumerate(fds):
            sock = socket.socket(fileno=f)
            sock.setblocking(True)
            # one connection a message: its bytes read ahead follow the K
            ahead = msg[1:] if i == 0 else b""
            threading.Thread(target=bridge.serve, args=(sock, ahead), daemon=True).start()
    with bridge.lock:
        ctxs = list(bridge.contexts.values())
    for ctx in ctxs:
        ctx.stop()


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
