"""PID 1 holds: nothing in a sandbox can end its nanobox-init with a signal.

A sandbox's root (root_templates) is uid 0 like its PID 1, and an ordinary
sandbox's code shares its PID 1's uid: both may signal it. nanobox-init
ignores SIGTERM, SIGINT and SIGHUP unless they come from outside the
sandbox's pid namespace (kill(2) with si_pid 0: docker stop); the kernel
drops every other signal, SIGKILL and SIGSTOP included, sent from inside
to a namespace's init. Each test tries it and asserts what an operator
sees: the same container still running with the same PID 1, the sandbox
answering exec; and docker stop and DELETE still ending it.
docs/SECURITY.md, "The agent's trust boundary".
"""
import time

import pytest

from conftest import module_stack
from nbtest import docker_exists, docker_inspect, run, wait_until

# one stack for the module, on one worker
pytestmark = pytest.mark.xdist_group(name="pid1")

SIGNALS = ("TERM", "INT", "HUP", "QUIT", "USR1", "USR2", "STOP", "KILL")

# Signals that do not come from kill(2): rt_sigqueueinfo with si_pid forged
# to 0 (SI_QUEUE), and F_SETSIG on a pipe whose owner is PID 1 (POLL_IN).
FORGE = r"""
import ctypes, fcntl, os, signal, struct
libc = ctypes.CDLL(None, use_errno=True)
info = struct.pack("iiii", signal.SIGTERM, 0, -1, 0) + struct.pack("II", 0, 0) + bytes(104)
print("sigqueue", libc.syscall(129, 1, signal.SIGTERM, ctypes.c_char_p(info)), ctypes.get_errno())
r, w = os.pipe()
fcntl.fcntl(r, fcntl.F_SETOWN, 1)
fcntl.fcntl(r, 10, signal.SIGTERM)  # F_SETSIG
fcntl.fcntl(r, fcntl.F_SETFL, fcntl.fcntl(r, fcntl.F_GETFL) | os.O_ASYNC)
os.write(w, b"x")
print("setsig done")
"""


@pytest.fixture(scope="module")
def rstack():
    """The default image (nanobox) has a root here."""
    yield from module_stack("pid1", {"root_templates": "nanobox"})


@pytest.fixture
def rapi(rstack):
    yield rstack.api
    rstack.api.cleanup()


def cname(sid):
    return f"nanobox-{sid}"


def host_pid1(sid):
    """The container's PID 1 as the host sees it, or 0 once it stopped."""
    st = docker_inspect(cname(sid))["State"]
    return st["Pid"] if st["Running"] else 0


def assert_pid1_held(api, sid, before):
    assert host_pid1(sid) == before, "the container's PID 1 is not the one it was"
    assert api.exec(sid, "echo alive")["stdout"] == "alive\n"
    assert api.get(sid).status_code == 200


def assert_delete_removes(api, sid):
    assert api.delete(sid).status_code == 204
    wait_until(lambda: not docker_exists(cname(sid)), timeout=30, what="the container gone")
    assert cname(sid) not in run(["docker", "ps", "-a", "--format", "{{.Names}}"]).stdout


def test_root_cannot_end_pid1_with_any_signal(rapi):
    sid = rapi.create()
    before = host_pid1(sid)
    assert before > 0
    for sig in SIGNALS:
        res = rapi.exec(sid, f"kill -{sig} 1; echo sent=$?", user="root")
        # the kernel lets uid 0 signal uid 0; PID 1 ignores it
        assert res["stdout"] == "sent=0\n", (sig, res)
        assert_pid1_held(rapi, sid, before)
    res = rapi.exec(sid, "python3 -c \"$F\"", env={"F": FORGE}, user="root")
    assert res["stdout"] == "sigqueue 0 0\nsetsig done\n", res
    assert_pid1_held(rapi, sid, before)
    # and nanobox's own destroy still ends it at once
    assert_delete_removes(rapi, sid)


def test_the_user_of_a_root_sandbox_may_not_signal_pid1(rapi):
    sid = rapi.create()
    before = host_pid1(sid)
    res = rapi.exec(sid, "kill -TERM 1")
    assert res["exit_code"] != 0 and "not permitted" in res["stderr"], res
    assert_pid1_held(rapi, sid, before)


def test_the_user_cannot_end_the_pid1_whose_uid_it_shares(api):
    # no root here: PID 1 runs as the sandbox's uid, so kill(2) is allowed
    sid = api.create()
    before = host_pid1(sid)
    for sig in SIGNALS:
        res = api.exec(sid, f"kill -{sig} 1; echo sent=$?")
        assert res["stdout"] == "sent=0\n", (sig, res)
    res = api.exec(sid, "python3 -c \"$F\"", env={"F": FORGE})
    assert res["stdout"] == "sigqueue 0 0\nsetsig done\n", res
    assert_pid1_held(api, sid, before)
    assert_delete_removes(api, sid)


def test_docker_stop_still_ends_it_cleanly(rapi):
    # SIGTERM from outside the namespace: PID 1 passes it on and exits by
    # itself (status 0), not killed by docker stop's SIGKILL after its wait.
    # nanobox removes a container Docker reports dead at once (its events
    # follower), so the status is read from Docker's own "die" event.
    sid = rapi.create()
    rapi.exec(sid, "sleep 600 >/dev/null 2>&1 &")
    since = str(int(time.time()) - 1)
    run(["docker", "stop", "-t", "30", cname(sid)], timeout=60)
    codes = run(["docker", "events", "--since", since, "--until", str(int(time.time()) + 1),
                 "--filter", f"container={cname(sid)}", "--filter", "event=die",
                 "--format", '{{index .Actor.Attributes "exitCode"}}'], timeout=30).stdout.split()
    assert codes == ["0"], codes
