"""Per-user kernel limits, ptys, open files, io_uring and mount paths: one
sandbox cannot use up what another sandbox or a host user needs, and sees
no path of the host's checkout (issue 12, item 1).

The kernel counts inotify instances, POSIX message queue bytes, processes
and pipe buffers per uid: sandboxes that share a uid (and a host user of
that uid) share those limits. Each sandbox has a uid of its own, taken
from `sandbox_uid_base` by slot, and this file checks it from the host
(/proc/<pid>/status of the container's PID 1). ptys and open files are
counted per devpts instance and per process: each sandbox has a devpts
of its own with a `max`, and RLIMIT_NOFILE.

Each test holds the resource exhausted in one sandbox (a background
process that keeps what it took) while a second sandbox, and the host as
uid 1000 (the uid every sandbox used to have), take one of their own.
Nothing here sends a packet anywhere.
"""

import json
import os
import pwd
import subprocess
import sys
import time

import pytest

import nbtest
from nbtest import BUILD, REPO, docker_inspect, wait_until

# The host user every sandbox used to run as; a real login on many hosts.
HOST_UID = 1000

# What a sandbox may open at most (the defaults of sandbox_nofile and
# sandbox_ptys, which the test stack does not change).
NOFILE_MAX = 4096
PTYS_MAX = 8


def py(api, sid, code, **kw):
    """Run a python program in the sandbox; its stdout parsed as JSON."""
    res = api.exec(sid, "python3 -", stdin=code, **kw)
    assert res["exit_code"] == 0, res
    return json.loads(res["stdout"])


def host_pid1(sid):
    return docker_inspect(f"nanobox-{sid}")["State"]["Pid"]


def host_ids(pid):
    """(real uid, real gid) of a host process, from /proc/<pid>/status."""
    uid = gid = None
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Uid:"):
                uid = int(line.split()[1])
            elif line.startswith("Gid:"):
                gid = int(line.split()[1])
    return uid, gid


# The hogs: each takes as much of one resource as it can, writes how much
# and why it stopped to /tmp/hog.json, then holds on to it until killed.
HOG_COMMON = r"""
import ctypes, errno, json, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
kept, count, err = [], 0, 0
def done():
    with open("/tmp/hog.tmp", "w") as f:
        json.dump({"count": count, "errno": err}, f)
    os.rename("/tmp/hog.tmp", "/tmp/hog.json")
    while True:
        time.sleep(60)
"""

HOGS = {
    "inotify": r"""
while count < 100000:
    fd = libc.inotify_init1(0)
    if fd < 0:
        err = ctypes.get_errno(); break
    kept.append(fd); count += 1
done()
""",
    "inotify_watch": r"""
paths = []
for root, dirs, files in os.walk("/usr"):
    paths += [os.path.join(root, f).encode() for f in files]
for _ in range(100):  # instances: the image's files, watched again by each
    fd = libc.inotify_init1(0)
    if fd < 0:
        err = ctypes.get_errno(); break
    for p in paths:
        if libc.inotify_add_watch(fd, p, 0x2) < 0:  # IN_MODIFY
            err = ctypes.get_errno(); break
        count += 1
    if err or count >= 1000000:
        break
done()
""",
    "mqueue": r"""
rt = ctypes.CDLL("librt.so.1", use_errno=True)
rt.mq_open.restype = ctypes.c_int
while count < 10000:
    fd = rt.mq_open(("/hog%d" % count).encode(), os.O_CREAT | os.O_RDWR, 0o600, None)
    if fd < 0:
        err = ctypes.get_errno(); break
    count += 1
done()
""",
    "pty": r"""
import resource
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
while count < 5000:
    try:
        kept.append(os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY))
    except OSError as e:
        err = e.errno; break
    count += 1
done()
""",
    "nofile": r"""
import resource
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
while count < 200000:
    try:
        kept.append(os.open("/dev/null", os.O_RDONLY))
    except OSError as e:
        err = e.errno; break
    count += 1
for fd in kept[-4:]:  # room to write the result
    os.close(fd)
done()
""",
}

# One of the resource, taken by a second sandbox or by the host: 0 or errno.
TAKE_ONE = {
    "inotify": r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(0)
print(0 if fd >= 0 else ctypes.get_errno())
""",
    "inotify_watch": r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(0)
ok = fd >= 0 and libc.inotify_add_watch(fd, b"/", 0x2) >= 0
print(0 if ok else ctypes.get_errno())
""",
    "mqueue": r"""
import ctypes, os
rt = ctypes.CDLL("librt.so.1", use_errno=True)
name = ("/nb-one-%d" % os.getpid()).encode()
fd = rt.mq_open(name, os.O_CREAT | os.O_RDWR, 0o600, None)
e = ctypes.get_errno()
if fd >= 0:
    rt.mq_unlink(name)
print(0 if fd >= 0 else e)
""",
    "pty": r"""
import os
try:
    os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY); print(0)
except OSError as e:
    print(e.errno)
""",
    "nofile": r"""
import os
try:
    for _ in range(64):
        os.open("/dev/null", os.O_RDONLY)
    print(0)
except OSError as e:
    print(e.errno)
""",
}


def take_one_in_sandbox(api, sid, kind):
    res = api.exec(sid, "python3 -", stdin=TAKE_ONE[kind])
    assert res["exit_code"] == 0, res
    return int(res["stdout"])


def take_one_on_host(kind):
    """The same, as the host user HOST_UID (root for ptys: any host user)."""
    kw = {} if kind == "pty" else {"user": HOST_UID, "group": HOST_UID, "extra_groups": []}
    r = subprocess.run([sys.executable, "-c", TAKE_ONE[kind]], capture_output=True, text=True,
                       timeout=30, cwd="/", **kw)
    assert r.returncode == 0, r.stderr
    return int(r.stdout)


@pytest.fixture
def pair(api, request):
    """Two sandboxes of the same stack: a hog and its neighbour (of the image
    a test gives as the fixture's param, else the base)."""
    image = getattr(request, "param", nbtest.IMAGE)
    return api.create(ttl=600, image=image), api.create(ttl=600, image=image)


@pytest.mark.parametrize("kind", ["inotify", "inotify_watch", "mqueue", "pty", "nofile"])
def test_one_sandbox_exhausting_a_resource_leaves_others_theirs(api, pair, kind):
    hog, other = pair
    r = api.exec_raw(hog, "python3 -c \"$HOG\"", background=True,
                     env={"HOG": HOG_COMMON + HOGS[kind]})
    assert r.status_code == 201, r.text

    def result():
        res = api.exec(hog, "cat /tmp/hog.json 2>/dev/null")
        return json.loads(res["stdout"]) if res["exit_code"] == 0 else None
    took = wait_until(result, timeout=60, what=f"the {kind} hog to give up")
    assert took["count"] > 0, took

    if kind == "pty":
        assert took["count"] <= PTYS_MAX, f"one sandbox opened {took} ptys"
    if kind == "nofile":
        assert took["count"] <= NOFILE_MAX, f"one process of a sandbox opened {took} files"
    assert take_one_in_sandbox(api, other, kind) == 0, f"the neighbour got no {kind}"
    assert take_one_on_host(kind) == 0, f"the host (uid {HOST_UID}) got no {kind}"


@pytest.mark.parametrize("pair", nbtest.every_image(), indirect=True)
def test_each_sandbox_has_its_own_uid_outside_the_hosts_passwd(api, pair):
    a, b = pair
    ida, idb = host_ids(host_pid1(a)), host_ids(host_pid1(b))
    assert ida[0] != idb[0] and ida[1] != idb[1], (ida, idb)
    for uid, gid in (ida, idb):
        assert uid >= 65536 and gid >= 65536, (uid, gid)
        with pytest.raises(KeyError):
            pwd.getpwuid(uid)
    # inside, the same uid, with the image user's name and home, owning
    # the workspace; /tmp is writable and the image's files readable
    got = py(api, a, r"""
import json, os, subprocess
def sh(c): return subprocess.run(c, shell=True, capture_output=True, text=True).stdout.strip()
open("/tmp/x", "w").write("x")
print(json.dumps({"uid": os.getuid(), "gid": os.getgid(), "name": sh("id -un"),
                  "whoami": sh("whoami"), "group": sh("id -gn"), "home": os.environ.get("HOME"),
                  "ws": os.stat("/workspace").st_uid, "etc": len(open("/etc/os-release").read())}))
""")
    assert (got["uid"], got["gid"]) == ida, got
    assert got["name"] == got["whoami"] == got["group"] == "sandbox", got
    assert got["home"] == "/workspace" and got["ws"] == ida[0] and got["etc"] > 0, got


def test_io_uring_and_native_aio_are_refused_and_sync_still_succeeds(api):
    sid = api.create(ttl=600)
    got = py(api, sid, r"""
import ctypes, json
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
params = ctypes.create_string_buffer(120)
r1 = libc.syscall(425, 8, params)          # io_uring_setup
e1 = ctypes.get_errno()
ctx = ctypes.c_ulong(0)
r2 = libc.syscall(206, 1, ctypes.byref(ctx))  # io_setup
e2 = ctypes.get_errno()
print(json.dumps({"io_uring_setup": [r1, e1], "io_setup": [r2, e2]}))
""")
    for call, (rc, err) in got.items():
        assert rc == -1 and err in (1, 38), f"{call} answered {rc} (errno {err}) in a sandbox"
    # sync is a no-op in the profile, but programs that call it still succeed
    res = api.exec(sid, "sync && echo synced")
    assert res["stdout"] == "synced\n", res


def test_mountinfo_shows_no_checkout_path(api):
    sid = api.create(ttl=600)
    res = api.exec(sid, "cat /proc/self/mountinfo")
    assert res["exit_code"] == 0, res
    text = res["stdout"]
    assert "/.nanobox/init" in text, text
    for path in {str(REPO), str(BUILD.resolve()), os.path.realpath(REPO)}:
        assert path not in text, f"{path} shows in a sandbox's mountinfo:\n{text}"
    # a sandbox without network gets nanobox's hosts, hostname and
    # resolv.conf, not Docker's copies of the host's
    assert "/var/lib/docker/containers/" not in text, text
    res = api.exec(sid, "cat /etc/hostname; hostname; grep -c nameserver /etc/resolv.conf; "
                        "grep -c localhost /etc/hosts")
    assert res["stdout"].split() == [sid[:8], sid[:8], "0", "2"], res
