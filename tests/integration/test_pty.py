"""
Terminal sessions through the whole stack: POST exec with "pty" streams a
start event (the pid), the terminal's output and the exit; other requests
type into it and resize it; the stream's end hangs it up. Bad input gets a
clear error and changes nothing.
"""
import json
import re
import socket
import statistics
import threading
import time

import pytest
import requests

from nbtest import assert_error, parse_json, wait_until


@pytest.fixture(scope="module")
def sid(stack):
    s = stack.api.create(ttl=1800)
    yield s
    stack.api.delete(s)


class Session:
    """One PTY session: its stream read in a thread, its routes as methods."""

    def __init__(self, api, sid, argv=("bash", "--noprofile", "--norc", "-i"), cols=80, rows=24,
                 **extra):
        self.api, self.sid = api, sid
        body = {"argv": list(argv), "pty": {"cols": cols, "rows": rows}, **extra}
        self.resp = requests.post(f"{api.base}/sandbox/{sid}/exec", data=json.dumps(body),
                                  headers={**api.headers(), "Content-Type": "application/json"},
                                  stream=True, timeout=60)
        self.events, self.text = [], ""
        self.cond = threading.Condition()
        self.ended = False
        self.status = self.resp.status_code
        if self.status != 200:
            self.body = self.resp.json()
            return
        assert self.resp.headers["Content-Type"].startswith("application/x-ndjson")
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        first = self.wait_event(lambda e: True)
        assert first["type"] == "start", first
        self.pid = first["pid"]
        assert isinstance(self.pid, int) and self.pid > 1

    def _read(self):
        try:
            for line in self.resp.iter_lines():
                if not line:
                    continue
                ev = json.loads(line)
                with self.cond:
                    self.events.append(ev)
                    if ev["type"] == "stdout":
                        self.text += ev["data"]
                    self.cond.notify_all()
        except (requests.exceptions.RequestException, AttributeError, ValueError):
            pass
        with self.cond:
            self.ended = True
            self.cond.notify_all()

    def wait_event(self, pred, timeout=15):
        with self.cond:
            ok = self.cond.wait_for(lambda: any(pred(e) for e in self.events) or self.ended,
                                    timeout)
            hits = [e for e in self.events if pred(e)]
            assert ok and hits, f"no such event; events: {self.events[-5:]}"
            return hits[0]

    def wait_text(self, needle, timeout=15, start=0):
        with self.cond:
            ok = self.cond.wait_for(lambda: needle in self.text[start:] or self.ended, timeout)
            assert ok and needle in self.text[start:], \
                f"{needle!r} not seen; output: {self.text[-400:]!r}"
            return self.text

    def type(self, data, **kw):
        return self.api.request("POST", f"/sandbox/{self.sid}/pty/{self.pid}/input",
                                json={"data": data, **kw})

    def resize(self, cols, rows):
        return self.api.request("POST", f"/sandbox/{self.sid}/pty/{self.pid}/resize",
                                json={"cols": cols, "rows": rows})

    def exit_event(self, timeout=15):
        return self.wait_event(lambda e: e["type"] == "exit", timeout)

    def close(self):
        # The reader thread waits in a read of the stream and holds the
        # response's buffer while it does: close() alone would wait for the
        # next line, a keepalive 20 s away on a quiet terminal. Shutting the
        # socket down ends that read at once; nanobox sees the client go,
        # as it did at the close.
        sock = getattr(getattr(self.resp.raw, "_connection", None), "sock", None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.resp.close()


def procs_in(api, sid):
    """The command lines of every process in the sandbox but PID 1 and the probe."""
    out = api.exec(sid, "for p in /proc/[0-9]*; do [ ${p#/proc/} = 1 ] || [ ${p#/proc/} = $$ ] "
                        "|| tr '\\0' ' ' < $p/cmdline 2>/dev/null && echo; done")["stdout"]
    return [line for line in out.splitlines() if line.strip() and "/proc/[0-9]" not in line]


def test_bash_on_a_pty_computes_and_echoes(api, sid):
    s = Session(api, sid)
    try:
        r = s.type("echo $((6*7))\r")
        assert r.status_code == 200, r.text
        assert parse_json(r) == {"written": len("echo $((6*7))\r")}
        s.wait_text("42\r\n")  # (bash sets bracketed paste around it: no \r\n before)
        r = s.type("tty; test -t 0 && echo is-a-tty; echo $TERM\r")
        s.wait_text("is-a-tty\r\nxterm-256color\r\n")
        assert "/dev/pts/" in s.text
        s.type("exit 5\r")
        ev = s.exit_event()
        assert ev["exit_code"] == 5 and ev["timed_out"] is False
    finally:
        s.close()
    # every line is an event of the stream's types, the exit last
    assert {e["type"] for e in s.events} <= {"start", "stdout", "keepalive", "exit"}
    assert s.events[-1]["type"] == "exit"


LOGIN_SHELL = ["/bin/sh", "-c", "if command -v bash >/dev/null; then exec bash -l; fi; exec sh -l"]


def test_input_typed_before_the_shell_is_ready_is_kept(api, sid):
    # typed the moment the pid is known, while the login shell still starts
    # (as nanobox shell and the console do): it waits in the terminal's input
    # queue, and the shell runs it
    s = Session(api, sid, argv=LOGIN_SHELL)
    try:
        r = s.type("echo $((6*7))\nexit 3\n")
        assert r.status_code == 200, r.text
        ev = s.exit_event()
        assert ev["exit_code"] == 3, (ev, s.text)
        assert re.search(r"(?m)(^|\r)42\r$", s.text), s.text
    finally:
        s.close()


def test_window_size_and_resize_seen_by_stty(api, sid):
    s = Session(api, sid, cols=100, rows=30)
    try:
        s.type("stty size\r")
        s.wait_text("30 100\r\n")
        r = s.resize(132, 43)
        assert r.status_code == 204, r.text
        mark = len(s.text)
        s.type("stty size\r")
        s.wait_text("43 132\r\n", start=mark)
    finally:
        s.close()


def test_input_as_base64_and_ctrl_c_interrupts(api, sid):
    s = Session(api, sid)
    try:
        s.type("sleep 100; echo not-interrupted\r")
        s.wait_text("sleep 100")
        wait_until(lambda: any(p.startswith("sleep 100") for p in procs_in(api, sid)),
                   what="sleep running")
        r = s.type("Aw==", encoding="base64")  # ^C
        assert r.status_code == 200 and parse_json(r)["written"] == 1
        mark = len(s.text)
        s.type("echo after-$((1+1))\r")
        s.wait_text("after-2\r\n", start=mark)
        # the echo never ran: the words show only in echoed command lines (a line
        # typed ahead is echoed by the terminal, then again by bash's readline)
        assert re.search(r"(?<!echo )not-interrupted", s.text) is None, s.text[-300:]
    finally:
        s.close()


def test_keystroke_echo_is_fast(api, sid):
    s = Session(api, sid, argv=["cat"])
    try:
        times = []
        for i in range(15):
            ch = "abcdefghijklmno"[i]
            mark = len(s.text)
            t0 = time.monotonic()
            s.type(ch)
            s.wait_text(ch, start=mark)
            times.append(time.monotonic() - t0)
        med = statistics.median(times)
        print(f"keystroke echo through the stack: median {med * 1000:.1f} ms, "
              f"max {max(times) * 1000:.1f} ms")
        assert med < 0.05, f"median echo {med * 1000:.1f} ms"
    finally:
        s.close()


def test_closing_the_stream_leaves_no_process(api, sid):
    s = Session(api, sid)
    s.type("sleep 4242 & nohup sleep 4243 >/dev/null 2>&1 & echo started\r")
    s.wait_text("started\r\n")
    wait_until(lambda: sum("sleep 424" in p for p in procs_in(api, sid)) == 2,
               what="both sleeps running")
    s.close()
    wait_until(lambda: procs_in(api, sid) == [], timeout=10,
               what="every process of the terminal gone")
    # the pid is no session any more
    r = api.request("POST", f"/sandbox/{sid}/pty/{s.pid}/input", json={"data": "x"})
    assert_error(r, 404, "no_process")


def test_the_shell_exiting_ends_the_stream(api, sid):
    s = Session(api, sid, argv=["sh", "-c", "echo bye; exit 3"])
    try:
        ev = s.exit_event()
        assert ev["exit_code"] == 3
        assert "bye\r\n" in s.text
        s.thread.join(10)
        assert s.ended
    finally:
        s.close()


@pytest.mark.parametrize("pty", [{"cols": 0, "rows": 24}, {"cols": 80, "rows": 0},
                                 {"cols": 1001, "rows": 24}, {"cols": 80, "rows": 1001},
                                 {"cols": -1, "rows": 24}])
def test_a_bad_window_is_422_and_starts_nothing(api, sid, pty):
    before = procs_in(api, sid)
    r = api.request("POST", f"/sandbox/{sid}/exec",
                    json={"argv": ["touch", "/tmp/should-not-exist"], "pty": pty})
    assert_error(r, 422, "out_of_range")
    assert "1 to 1000" in parse_json(r)["error"]
    assert api.exec(sid, "test -e /tmp/should-not-exist")["exit_code"] == 1
    assert procs_in(api, sid) == before


@pytest.mark.parametrize("pty,extra", [
    ({"cols": 80}, {}),
    ({"cols": "80", "rows": 24}, {}),
    ({"cols": 80.5, "rows": 24}, {}),
    ({"cols": 80, "rows": 24, "colour": True}, {}),
    ({"cols": 80, "rows": 24}, {"background": True, "stdin": "x"}),
    ({"cols": 80, "rows": 24}, {"background": True, "stream": True}),
    ({"cols": 80, "rows": 24}, {"stream": False}),
])
def test_a_malformed_pty_request_is_400(api, sid, pty, extra):
    r = api.request("POST", f"/sandbox/{sid}/exec",
                    json={"argv": ["touch", "/tmp/should-not-exist"], "pty": pty, **extra})
    assert_error(r, 400, "bad_field")
    assert api.exec(sid, "test -e /tmp/should-not-exist")["exit_code"] == 1


def test_resize_with_a_bad_window_is_422_and_keeps_the_old_one(api, sid):
    s = Session(api, sid, cols=90, rows=20)
    try:
        for body, status in (({"cols": 0, "rows": 10}, 422), ({"cols": 10, "rows": 1001}, 422),
                             ({"cols": 10}, 400), ({"cols": 10, "rows": 10, "x": 1}, 400),
                             (None, 400)):
            r = api.request("POST", f"/sandbox/{sid}/pty/{s.pid}/resize", json=body)
            assert r.status_code == status, (body, r.status_code, r.text)
        s.type("stty size\r")
        s.wait_text("20 90\r\n")
        r = s.type("!!!", encoding="base64")
        assert_error(r, 400, "bad_field")
    finally:
        s.close()


def test_unknown_pid_is_404_and_other_pids_are_not_terminals(api, sid):
    for path, body in (("input", {"data": "x"}), ("resize", {"cols": 80, "rows": 24})):
        assert_error(api.request("POST", f"/sandbox/{sid}/pty/4000000/{path}", json=body),
                     404, "no_process")
        # PID 1 (the agent) and a background process are no PTY sessions
        assert_error(api.request("POST", f"/sandbox/{sid}/pty/1/{path}", json=body),
                     404, "no_process")
    bg = api.request("POST", f"/sandbox/{sid}/exec",
                     json={"command": "sleep 30", "background": True})
    pid = parse_json(bg)["pid"]
    assert_error(api.request("POST", f"/sandbox/{sid}/pty/{pid}/input", json={"data": "x"}),
                 404, "no_process")
    api.request("DELETE", f"/sandbox/{sid}/processes/{pid}?signal=KILL")
    # the routes around: a bad pid 400, other ops 404, GET 405
    assert_error(api.request("POST", f"/sandbox/{sid}/pty/0/input", json={"data": "x"}),
                 400, "bad_pid")
    assert_error(api.request("POST", f"/sandbox/{sid}/pty/12/signal", json={}), 404, "no_route")
    assert_error(api.request("GET", f"/sandbox/{sid}/pty/12/input"), 405, "method_not_allowed")
    assert_error(api.request("POST", f"/sandbox/{sid}/pty/12", json={}), 404, "no_route")


def test_a_background_pty_runs_without_a_client(api, sid):
    r = api.request("POST", f"/sandbox/{sid}/exec",
                    json={"argv": ["bash", "--noprofile", "--norc", "-i"],
                          "pty": {"cols": 80, "rows": 24}, "background": True})
    assert r.status_code == 201, r.text
    pid = parse_json(r)["pid"]

    def output():
        return parse_json(api.request("GET", f"/sandbox/{sid}/processes/{pid}"))

    try:
        r = api.request("POST", f"/sandbox/{sid}/pty/{pid}/input",
                        json={"data": "stty size; echo $((6*7))\r"})
        assert parse_json(r) == {"written": 25}
        p = wait_until(lambda: (lambda o: o if "\r\n42\r\n" in o["stdout"] else None)(output()))
        assert "24 80\r\n" in p["stdout"] and p["stderr"] == ""
        assert (p["running"], p["pty"]) == (True, True)
        # the listing says it is a terminal; a command on pipes says nothing
        procs = parse_json(api.request("GET", f"/sandbox/{sid}/processes"))["processes"]
        assert next(q for q in procs if q["pid"] == pid)["pty"] is True
        r = api.request("POST", f"/sandbox/{sid}/pty/{pid}/resize", json={"cols": 100, "rows": 30})
        assert r.status_code == 204
        api.request("POST", f"/sandbox/{sid}/pty/{pid}/input", json={"data": "stty size\r"})
        wait_until(lambda: "30 100\r\n" in output()["stdout"])
    finally:
        api.request("DELETE", f"/sandbox/{sid}/processes/{pid}?signal=KILL")
    p = wait_until(lambda: (lambda o: o if not o["running"] else None)(output()))
    assert (p["signal"], p["pty"]) == (9, True)
    assert_error(api.request("POST", f"/sandbox/{sid}/pty/{pid}/input", json={"data": "x"}),
                 404, "no_process")


def test_the_sandboxs_pty_cap_is_429(make_stack):
    st = make_stack("ptycap", sandbox_ptys=2)
    sid = st.api.create()
    sessions = []
    try:
        # the second PTY of the two: nanobox-init's own test holds none
        sessions.append(Session(st.api, sid, argv=["sleep", "60"]))
        sessions.append(Session(st.api, sid, argv=["sleep", "60"]))
        s = Session(st.api, sid, argv=["sleep", "60"])
        assert s.status == 429, s.status
        assert s.body["code"] == "busy"
        assert "sandbox_ptys" in s.body["error"]
        sessions[0].close()

        def third_starts():
            t = Session(st.api, sid, argv=["stty", "size"])
            if t.status == 429:
                return False
            sessions.append(t)
            return True
        wait_until(third_starts, timeout=10, what="a PTY free again")
        sessions[-1].wait_text("24 80\r\n")
    finally:
        for s in sessions:
            s.close()
