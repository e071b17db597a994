"""Root in a sandbox does not share host uid 0's per-user kernel counters
(issue 22, item 5).

The kernel counts inotify instances and watches, POSIX message queue bytes
and processes per (user namespace, uid), and charges each count to every
ancestor namespace as (parent, the namespace's owner). A sandbox's root
used to run in the host's user namespace as uid 0: 300 inotify instances
held by it made inotify_init() fail for the host's own root. nanobox-init
now runs root commands in a user namespace of the sandbox's own, owned by
the sandbox user, with the identity map (src/init/root.c): kuid 0 stays 0
(files stay root's), and the counts go to (that namespace, 0) and (host,
the sandbox user).

Each test first checks that root is in a namespace of its own (so that a
regression fails there, before the host's root is starved), then holds a
counter exhausted as root in the sandbox while this process (the host's
root) takes one of its own through ctypes. Nothing is sent anywhere.
"""

import ctypes
import ctypes.util
import errno
import json
import os

import pytest

from nbtest import wait_until

pytestmark = pytest.mark.xdist_group(name="rootuserns")

libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


@pytest.fixture(scope="module")
def rstack():
    from conftest import module_stack
    yield from module_stack("rootuserns", {"root_templates": "nanobox"})


@pytest.fixture
def rapi(rstack):
    yield rstack.api
    rstack.api.cleanup()


HOST_USERNS = os.readlink("/proc/self/ns/user")


def root_in_own_userns(api, sid):
    """Root's commands (sudo and "user": "root") are uid 0 in a user namespace not the host's."""
    for res in (api.exec(sid, "sudo sh -c 'id -u; readlink /proc/self/ns/user'"),
                api.exec(sid, "id -u; readlink /proc/self/ns/user", user="root")):
        uid, ns = res["stdout"].split()
        assert uid == "0" and ns != HOST_USERNS, (res, HOST_USERNS)
    # the user's stay in the host's, as before
    assert api.exec(sid, "readlink /proc/self/ns/user")["stdout"].strip() == HOST_USERNS


def hold_as_root(api, sid, program):
    """Run program as root in the background; it writes /tmp/held (JSON) once it holds what it took."""
    api.exec(sid, "cat > /tmp/hold.py", stdin=program)
    r = api.exec_raw(sid, "python3 /tmp/hold.py", user="root", background=True)
    assert r.status_code == 201, r.text
    wait_until(lambda: api.exec(sid, "cat /tmp/held 2>/dev/null")["stdout"], timeout=120,
               what="the sandbox's root to hold the counter exhausted")
    return json.loads(api.exec(sid, "cat /tmp/held")["stdout"])


INOTIFY = r"""
import ctypes, errno, json, os, time
libc = ctypes.CDLL(None, use_errno=True)
fds = []
while len(fds) < 100000:
    fd = libc.inotify_init1(0)
    if fd < 0:
        err = errno.errorcode[ctypes.get_errno()]
        break
    fds.append(fd)
# watches: every instance watches the same files until the kernel says no
os.makedirs("/tmp/w", exist_ok=True)
for i in range(2000):
    open("/tmp/w/%d" % i, "w").close()
watches, werr = 0, None
for fd in fds:
    for i in range(2000):
        if libc.inotify_add_watch(fd, b"/tmp/w/%d" % i, 2) < 0:
            werr = errno.errorcode[ctypes.get_errno()]
            break
        watches += 1
    if werr:
        break
json.dump({"instances": len(fds), "err": err, "watches": watches, "werr": werr}, open("/tmp/held.tmp", "w"))
os.rename("/tmp/held.tmp", "/tmp/held")
time.sleep(600)
"""


def test_root_exhausting_inotify_leaves_the_hosts_root_its_own(rapi):
    sid = rapi.create()
    root_in_own_userns(rapi, sid)
    held = hold_as_root(rapi, sid, INOTIFY)
    # root in the sandbox met its limit: the sandbox's own (host, sandbox user) count
    assert held["err"] == "EMFILE" and held["instances"] > 0, held
    with open("/proc/sys/fs/inotify/max_user_watches") as f:
        max_watches = int(f.read())
    assert held["werr"] == "ENOSPC" or held["watches"] >= max_watches, held
    # the host's root still gets an instance and a watch
    fd = libc.inotify_init1(0)
    assert fd >= 0, os.strerror(ctypes.get_errno())
    try:
        wd = libc.inotify_add_watch(fd, b"/proc/self/ns", 2)
        assert wd >= 0, os.strerror(ctypes.get_errno())
    finally:
        os.close(fd)
    # and so does the sandbox's user, in another sandbox of the same stack
    other = rapi.create()
    res = rapi.exec(other, "python3 -c 'import ctypes; print(ctypes.CDLL(None).inotify_init1(0) >= 0)'")
    assert res["stdout"] == "True\n", res


MQUEUE = r"""
import ctypes, errno, json, os, time
libc = ctypes.CDLL(None, use_errno=True)
class Attr(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_long), ("maxmsg", ctypes.c_long), ("msgsize", ctypes.c_long),
                ("curmsgs", ctypes.c_long), ("pad", ctypes.c_long * 4)]
libc.mq_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.POINTER(Attr)]
a = Attr(0, 10, 8192, 0)
n, err = 0, None
while n < 10000:
    if libc.mq_open(b"/nbq%d" % n, os.O_CREAT | os.O_RDWR, 0o600, ctypes.byref(a)) < 0:
        err = errno.errorcode[ctypes.get_errno()]
        break
    n += 1
json.dump({"queues": n, "err": err}, open("/tmp/held.tmp", "w"))
os.rename("/tmp/held.tmp", "/tmp/held")
time.sleep(600)
"""


class MqAttr(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_long), ("maxmsg", ctypes.c_long), ("msgsize", ctypes.c_long),
                ("curmsgs", ctypes.c_long), ("pad", ctypes.c_long * 4)]


def test_root_exhausting_mqueue_bytes_leaves_the_hosts_root_its_own(rapi):
    sid = rapi.create()
    root_in_own_userns(rapi, sid)
    held = hold_as_root(rapi, sid, MQUEUE)
    assert held["err"] == "EMFILE" and held["queues"] > 0, held
    libc.mq_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.POINTER(MqAttr)]
    name = b"/nanobox-test-%d" % os.getpid()
    a = MqAttr(0, 10, 8192, 0)
    fd = libc.mq_open(name, os.O_CREAT | os.O_RDWR, 0o600, ctypes.byref(a))
    err = ctypes.get_errno()
    libc.mq_unlink(name)
    assert fd >= 0, os.strerror(err)
    os.close(fd)


def test_root_cannot_make_namespaces_nor_keys(rapi):
    """The profile of a root sandbox lets the agent unshare and setns a user
    namespace; every process it starts is refused both again. Keys are
    counted per kuid whatever the namespace: seccomp refuses them."""
    sid = rapi.create()
    root_in_own_userns(rapi, sid)
    for user in ("root", None):
        for cmd in ("unshare -U true", "unshare -U -r true", "unshare -m true"):
            res = rapi.exec(sid, cmd, **({"user": user} if user else {}))
            assert res["exit_code"] != 0, (user, cmd, res)
        res = rapi.exec(sid, "python3 -", stdin=SYSCALLS, **({"user": user} if user else {}))
        assert json.loads(res["stdout"]) == {"unshare": "EPERM", "setns": "EPERM",
                                             "add_key": "EPERM", "keyctl": "EPERM"}, (user, res)


SYSCALLS = r"""
import ctypes, errno, json, os
libc = ctypes.CDLL(None, use_errno=True)
out = {}
def call(name, nr, *args):
    r = libc.syscall(nr, *args)
    out[name] = "ok" if r >= 0 else errno.errorcode[ctypes.get_errno()]
call("unshare", 272, 0x10000000)
fd = os.open("/proc/self/ns/user", os.O_RDONLY)
call("setns", 308, fd, 0x10000000)
call("add_key", 248, b"user", b"nb", b"x", 1, -4)
call("keyctl", 250, 0, -4, 0)
print(json.dumps(out))
"""


def test_root_still_binds_a_low_port_and_owns_its_files(rapi):
    sid = rapi.create()
    res = rapi.exec(sid, "python3 -c \"import socket; s = socket.socket(); s.bind(('127.0.0.1', 80)); "
                         "print('bound')\"", user="root")
    assert res["stdout"] == "bound\n", res
    res = rapi.exec(sid, "sudo sh -c 'touch /opt/r && stat -c %u:%g /opt/r && ls -ln /etc/passwd'")
    lines = res["stdout"].splitlines()
    assert lines[0] == "0:0" and " 0 0 " in lines[1], res
    # the user cannot write what root wrote; root's command is killed at its timeout
    assert rapi.exec(sid, "echo x > /opt/r")["exit_code"] != 0
    assert rapi.exec(sid, "sudo sleep 30", timeout=1)["timed_out"] is True
    # E2B's way: sudo -i / -s
    res = rapi.exec(sid, "echo 'id -u; exit 4' | sudo -s")
    assert (res["exit_code"], res["stdout"]) == (4, "0\n"), res
