"""
A small client for the nanobox-init protocol (docs/AGENT-PROTOCOL.md),
written from the spec for the tests: frames, fields, and one helper per
request. Independent of the C codec on purpose, so that it checks it.
"""
import socket
import struct
import threading

HDR = 5
MAX_BODY = 1 << 20
CHUNK = 64 << 10


def frame(ftype, body=b""):
    if isinstance(ftype, str):
        ftype = ord(ftype)
    return bytes([ftype]) + struct.pack(">I", len(body)) + body


def field(tag, value=b""):
    if isinstance(tag, str):
        tag = ord(tag)
    if isinstance(value, str):
        value = value.encode()
    return bytes([tag]) + struct.pack(">I", len(value)) + value


def u32(v):
    return struct.pack(">I", v)


def u64(v):
    return struct.pack(">Q", v)


def winsize(cols, rows):
    """The body of a 'w' frame, the value of a 'Y' field: cols:u16 rows:u16."""
    return struct.pack(">HH", cols, rows)


def parse_fields(body):
    """[(tag_char, value_bytes)]; raises ValueError on a truncated field."""
    out, i = [], 0
    while i < len(body):
        if len(body) - i < HDR:
            raise ValueError("truncated field header")
        tag = chr(body[i])
        (n,) = struct.unpack(">I", body[i + 1:i + 5])
        if n > len(body) - i - HDR:
            raise ValueError("field runs past the body")
        out.append((tag, body[i + 5:i + 5 + n]))
        i += HDR + n
    return out


def fields_dict(body):
    """Single fields by tag; repeated ones ('A') as lists."""
    d = {}
    for tag, v in parse_fields(body):
        if tag == "A":
            d.setdefault("A", []).append(v)
        else:
            d[tag] = v
    return d


def info(body):
    """An 'f' or 'n' body as a dict with python values."""
    d = fields_dict(body)
    out = {"kind": d["K"].decode(), "size": struct.unpack(">Q", d["Z"])[0],
           "mode": struct.unpack(">I", d["M"])[0], "mtime": struct.unpack(">Q", d["Y"])[0]}
    if "y" in d:
        out["mtime_nsec"] = struct.unpack(">I", d["y"])[0]
    if "m" in d:
        out["target_mode"] = struct.unpack(">I", d["m"])[0]
    if "a" in d:
        out["real"] = d["a"].decode(errors="surrogateescape")
    if "F" in d:
        out["name"] = d["F"].decode(errors="surrogateescape")
    meta = [v.split(b"\0", 1) for tag, v in parse_fields(body) if tag == "x"]
    if meta:
        out["meta"] = {k.decode(): v.decode() for k, v in meta}
    return out


def proc(body):
    d = fields_dict(body)
    return {"pid": struct.unpack(">I", d["P"])[0], "argv": [a.decode() for a in d.get("A", [])],
            "state": d["K"].decode(), "code": struct.unpack(">i", d["X"])[0],
            "signal": struct.unpack(">I", d["N"])[0], "out": struct.unpack(">Q", d["O"])[0],
            "err": struct.unpack(">Q", d["o"])[0], "started": struct.unpack(">Q", d["Y"])[0],
            "pty": "t" in d}


class AgentError(Exception):
    def __init__(self, errno_, message):
        super().__init__(f"errno {errno_}: {message}")
        self.errno = errno_
        self.message = message


class Conn:
    """One connection = one request."""

    def __init__(self, name, timeout=20):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect("\0" + name)
        self.buf = b""

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()

    def send(self, ftype, body=b""):
        self.sock.sendall(frame(ftype, body))

    def send_raw(self, data):
        self.sock.sendall(data)

    def _fill(self):
        try:
            chunk = self.sock.recv(1 << 20)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            return False
        self.buf += chunk
        return True

    def recv(self):
        """(type_char, body), or None at end of stream."""
        while True:
            if len(self.buf) >= HDR:
                (n,) = struct.unpack(">I", self.buf[1:5])
                assert n <= MAX_BODY, f"agent sent a {n}-byte frame"
                if len(self.buf) >= HDR + n:
                    t, body = chr(self.buf[0]), self.buf[HDR:HDR + n]
                    self.buf = self.buf[HDR + n:]
                    return t, body
            if not self._fill():
                assert self.buf == b"", f"stream ended inside a frame: {self.buf[:20]!r}"
                return None

    def expect(self, want):
        f = self.recv()
        assert f is not None, f"connection closed, wanted {want!r}"
        t, body = f
        if t == "!" and want != "!":
            raise AgentError(struct.unpack(">I", body[:4])[0], body[4:].decode(errors="replace"))
        assert t == want, f"got frame {t!r} {body[:80]!r}, wanted {want!r}"
        return body

    def expect_eof(self):
        f = self.recv()
        assert f is None, f"expected end of stream, got {f[0]!r} {f[1][:80]!r}"


def error_of(frames):
    for t, body in frames:
        if t == "!":
            return struct.unpack(">I", body[:4])[0], body[4:].decode(errors="replace")
    return None


class Agent:
    """Requests, by abstract socket name."""

    def __init__(self, name):
        self.name = name

    def conn(self, timeout=20):
        return Conn(self.name, timeout)

    def request(self, rtype, *fields):
        c = self.conn()
        c.send(rtype, b"".join(fields))
        return c

    def ping(self):
        with self.request("P") as c:
            body = c.expect("p")
            c.expect_eof()
            return body.decode()

    def exec_start(self, argv, env=(), cwd=None, timeout_ms=None, maxout=None, background=False,
                   pty=None, root=False):
        """pty=(cols, rows): run on a PTY of that window; root: R (root mode)."""
        fl = [field("A", a) for a in argv] + [field("E", e) for e in env]
        if root:
            fl.append(field("R"))
        if pty is not None:
            fl.append(field("Y", winsize(*pty)))
        if cwd is not None:
            fl.append(field("C", cwd))
        if timeout_ms is not None:
            fl.append(field("T", u32(timeout_ms)))
        if maxout is not None:
            fl.append(field("M", u32(maxout)))
        if background:
            fl.append(field("B"))
        c = self.request("X", *fl)
        pid = struct.unpack(">I", c.expect("s"))[0]
        return c, pid

    @staticmethod
    def exec_collect(c):
        """Reads to the exit frame: (stdout, stderr, code, signal, flags, frames)."""
        out, err, frames = [], [], []
        while True:
            f = c.recv()
            assert f is not None, "connection closed before the exit frame"
            t, body = f
            frames.append(f)
            if t == "o":
                out.append(body)
            elif t == "r":
                err.append(body)
            elif t == "x":
                code, sig, flags = struct.unpack(">iBB", body)
                c.expect_eof()
                return b"".join(out), b"".join(err), code, sig, flags, frames
            elif t == "!":
                raise AgentError(struct.unpack(">I", body[:4])[0], body[4:].decode())
            else:
                raise AssertionError(f"unexpected frame {t!r}")

    def exec(self, argv, stdin=None, **kw):
        c, pid = self.exec_start(argv, **kw)
        with c:
            sender = None
            if stdin is not None:
                # A host must read output while it writes stdin: the agent
                # stops reading stdin while its output to us is full.
                def feed():
                    for i in range(0, len(stdin), CHUNK):
                        c.send("i", stdin[i:i + CHUNK])
                    c.send("e")
                sender = threading.Thread(target=feed, daemon=True)
                sender.start()
            result = self.exec_collect(c)
            if sender is not None:
                sender.join(timeout=10)
            return result

    def simple(self, rtype, *fields):
        """A request answered by '.' (or an error)."""
        with self.request(rtype, *fields) as c:
            c.expect(".")
            c.expect_eof()

    def stat(self, path):
        with self.request("T", field("F", path)) as c:
            i = info(c.expect("f"))
            c.expect(".")
            return i

    def read(self, path):
        """(info, bytes) for a file, (info, [entries]) for a directory."""
        with self.request("R", field("F", path)) as c:
            i = info(c.expect("f"))
            data, entries = [], []
            while True:
                t, body = c.recv()
                if t == ".":
                    break
                if t == "d":
                    data.append(body)
                elif t == "n":
                    entries.append(info(body))
                elif t == "!":
                    raise AgentError(struct.unpack(">I", body[:4])[0], body[4:].decode())
            c.expect_eof()
            return (i, entries) if i["kind"] == "d" else (i, b"".join(data))

    def write(self, path, data, mode=None, meta=None):
        """meta: {key: value} (x fields), or raw "key\\0value" bytes in a list."""
        fl = [field("F", path)] + ([field("M", u32(mode))] if mode is not None else [])
        if isinstance(meta, dict):
            meta = [k.encode() + b"\0" + v.encode() for k, v in meta.items()]
        fl += [field("x", m) for m in meta or []]
        with self.request("U", *fl) as c:
            for i in range(0, len(data), CHUNK):
                c.send("d", data[i:i + CHUNK])
            c.send(".")
            i = info(c.expect("f"))
            c.expect(".")
            c.expect_eof()
            return i

    def delete(self, path, recursive=False):
        self.simple("D", field("F", path), *([field("r")] if recursive else []))

    def mkdir(self, path):
        self.simple("N", field("F", path))

    def move(self, src, dst):
        self.simple("V", field("F", src), field("G", dst))

    def plist(self):
        with self.request("L") as c:
            out = []
            while True:
                t, body = c.recv()
                if t == ".":
                    c.expect_eof()
                    return out
                assert t == "l", t
                out.append(proc(body))

    def pquery(self, pid, off_out=None, off_err=None, wait=False):
        """wait: W, the answer waits for output past the offsets or the end."""
        fl = [field("P", u32(pid))]
        if off_out is not None:
            fl.append(field("O", u64(off_out)))
        if off_err is not None:
            fl.append(field("o", u64(off_err)))
        if wait:
            fl.append(field("W"))
        with self.request("Q", *fl) as c:
            p = proc(c.expect("l"))
            out, err = [], []
            while True:
                t, body = c.recv()
                if t == ".":
                    c.expect_eof()
                    return p, b"".join(out), b"".join(err)
                assert t in "or", t
                (out if t == "o" else err).append(body)

    def pstdin(self, pid, data=b"", close=False):
        self.simple("W", field("P", u32(pid)), *([field("D", data)] if data else []),
                    *([field("Z")] if close else []))

    def pty(self, pid, data=None, size=None):
        """Y: input for a PTY session, and/or its new window (cols, rows)."""
        self.simple("Y", field("P", u32(pid)), *([field("D", data)] if data is not None else []),
                    *([field("Y", winsize(*size))] if size is not None else []))

    def psignal(self, pid, sig):
        self.simple("S", field("P", u32(pid)), field("N", u32(sig)))
