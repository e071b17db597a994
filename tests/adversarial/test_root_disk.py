"""root_disk_max is a bound the kernel enforces (issue 22, item 4).

A sandbox with a root (root_templates) writes what root installs into its
image: the container's writable layer in Docker's storage. nanobox mounts a
file system of root_disk_max bytes and root_disk_inodes inodes over that
layer before the container starts (src/fcgi/engine/rootdisk.h), so `fallocate`,
`dd` and a flood of small files get ENOSPC at the bound at once, and the
sandbox lives on. It used to be measured every root_disk_check seconds:
`fallocate -l 20G` took 20 GB of the host's disk in 63 ms, and 200,000
small files were never counted.

These tests write only into the sandbox; nothing is sent anywhere.
"""

import os
import re

import pytest

import nbtest
from nbtest import docker_inspect, wait_until

pytestmark = pytest.mark.xdist_group(name="rootdisk")

LIMIT = 64 << 20
INODES = 2048


@pytest.fixture(scope="module")
def rstack():
    from conftest import module_stack
    yield from module_stack("rootdisk", {"root_templates": "nanobox", "root_disk_max": "64m",
                             "root_disk_inodes": str(INODES), "root_disk_check": "1"})


@pytest.fixture
def rapi(rstack):
    yield rstack.api
    rstack.api.cleanup()


def layer_dir(sid):
    """The directory of the container's writable layer (overlay2's upper's parent)."""
    return os.path.dirname(docker_inspect(f"nanobox-{sid}")["GraphDriver"]["Data"]["UpperDir"])


def mount_of(path):
    """The /proc/mounts line (source, fstype, options) mounted at path, or None."""
    with open("/proc/mounts") as f:
        for line in f:
            parts = line.split()
            if parts[1] == path:
                return parts[0], parts[2], parts[3]
    return None


def free_bytes():
    st = os.statvfs("/var/lib/docker")
    return st.f_bavail * st.f_frsize


def assert_alive(api, sid):
    assert api.get(sid).status_code == 200
    assert api.exec(sid, "echo alive > /workspace/a && cat /workspace/a")["stdout"] == "alive\n"


def test_the_layer_is_a_file_system_of_root_disk_max(rapi):
    sid = rapi.create()
    layer = layer_dir(sid)
    m = mount_of(layer)
    assert m is not None and m[1] == "ext4" and m[0].startswith("/dev/loop"), m
    # the loop device is of the bound's size
    dev = os.path.basename(m[0])
    with open(f"/sys/block/{dev}/size") as f:
        assert int(f.read()) * 512 == LIMIT
    # what the sandbox sees of its root: that file system, not the host's disk
    res = rapi.exec(sid, "df -B1 --output=size,itotal / | tail -1")
    size, itotal = (int(x) for x in res["stdout"].split())
    assert 0 < size <= LIMIT and 0 < itotal <= INODES, res
    # the layer Docker made is still there, on it
    assert {"diff", "link", "lower", "work"} <= set(os.listdir(layer)), os.listdir(layer)


def test_fallocate_past_the_bound_is_enospc_at_once(rapi):
    sid = rapi.create()
    before = free_bytes()
    res = rapi.exec(sid, "sudo fallocate -l 20G /bigfile; echo rc=$?")
    assert "No space left on device" in res["stderr"] and "rc=1" in res["stdout"], res
    # the old code's 20 GB never left the host; the other jobs on this
    # machine may write meanwhile, so the margin is wide but far below 20 GB
    assert before - free_bytes() < 4 << 30
    assert_alive(rapi, sid)
    # a fallocate under the bound works (once what the failed one kept is gone)
    res = rapi.exec(sid, "sudo rm -f /bigfile && sudo fallocate -l 16M /okfile && "
                         "sudo stat -c %s /okfile")
    assert res["stdout"] == f"{16 << 20}\n", res


def test_dd_stops_at_the_bound_and_the_sandbox_lives(rapi):
    sid = rapi.create()
    res = rapi.exec(sid, "sudo dd if=/dev/zero of=/opt/big bs=1M count=200 status=none; echo rc=$?; "
                         "sudo stat -c %s /opt/big", timeout=120)
    assert "No space left on device" in res["stderr"] and "rc=1" in res["stdout"], res
    written = int(res["stdout"].split()[-1])
    assert 0 < written <= LIMIT, res
    assert_alive(rapi, sid)
    # the space comes back when root removes the file
    res = rapi.exec(sid, "sudo rm /opt/big && sudo dd if=/dev/zero of=/opt/again bs=1M count=8 "
                         "status=none && echo ok")
    assert res["stdout"] == "ok\n", res
    # the reaper, which used to destroy it, has no cause to: the bound holds by itself
    text = rapi.request("GET", "/metrics").text
    assert not re.search(r'destroys_total\{cause="root_disk"\} [1-9]', text)
    assert_alive(rapi, sid)


FLOOD = r"""
import errno, os
os.makedirs("/opt/many", exist_ok=True)
n = 0
try:
    while n < 200000:
        open("/opt/many/%d" % n, "w").close()
        n += 1
    print("all", n)
except OSError as e:
    print(errno.errorcode[e.errno], n)
"""


def test_an_inode_flood_stops_at_root_disk_inodes(rapi):
    sid = rapi.create()
    res = rapi.exec(sid, "sudo python3 -", stdin=FLOOD, timeout=120)
    code, n = res["stdout"].split()
    assert code == "ENOSPC" and 0 < int(n) < INODES, res
    assert_alive(rapi, sid)
    # the user's workspace is not the image: it still takes files
    res = rapi.exec(sid, "touch /workspace/x1 /workspace/x2 && echo ok")
    assert res["stdout"] == "ok\n", res


def test_destroy_leaves_no_mount_and_no_container(rapi, rstack):
    sid = rapi.create()
    assert rapi.exec(sid, "sudo dd if=/dev/zero of=/opt/f bs=1M count=4 status=none && echo ok")[
        "stdout"] == "ok\n"
    layer = layer_dir(sid)
    dev = os.path.basename(mount_of(layer)[0])
    assert rapi.delete(sid).status_code == 204
    assert mount_of(layer) is None
    assert not os.path.exists(layer)
    assert not nbtest.docker_ps(rstack.instance, sandbox=sid)
    # the loop device let its file go (autoclear)
    wait_until(lambda: not os.path.exists(f"/sys/block/{dev}/loop/backing_file"), timeout=10,
               what=f"{dev} unbound")


def test_the_bound_survives_a_restart_and_its_destroy_unmounts(rapi, rstack):
    sid = rapi.create()
    layer = layer_dir(sid)
    rstack.restart()
    res = rapi.exec(sid, "sudo fallocate -l 20G /bigfile; echo rc=$?")
    assert "No space left on device" in res["stderr"], res
    assert mount_of(layer) is not None
    assert rapi.delete(sid).status_code == 204
    assert mount_of(layer) is None and not nbtest.docker_ps(rstack.instance, sandbox=sid)


def test_a_sandbox_without_root_has_no_mount(rapi):
    nbtest.needs_image(nbtest.PYTHON_IMAGE)
    sid = rapi.create(image=nbtest.PYTHON_IMAGE)
    assert mount_of(layer_dir(sid)) is None


def test_a_container_killed_from_the_host_goes_with_its_mount(rapi, rstack):
    """The reaper's removal of a sandbox whose container died unmounts too."""
    sid = rapi.create()
    layer = layer_dir(sid)
    nbtest.run(["docker", "kill", f"nanobox-{sid}"])
    wait_until(lambda: not nbtest.docker_ps(rstack.instance, sandbox=sid), timeout=90,
               what="the dead sandbox's container removed by reconciliation")
    assert mount_of(layer) is None and not os.path.exists(layer)


def test_a_warm_root_sandbox_is_bounded_before_its_hand_out(make_stack):
    st = make_stack("rootdisk-warm", root_templates="nanobox", root_disk_max="64m", warm_pool="1")
    api = st.api

    def pooled():
        out = nbtest.run(["docker", "ps", "-q", "--filter", f"label=nanobox.instance={st.instance}",
                          "--filter", "label=nanobox.pooled=1"]).stdout.split()
        return out[0] if out else None

    wait_until(lambda: pooled() and mount_of(os.path.dirname(
        docker_inspect(pooled())["GraphDriver"]["Data"]["UpperDir"])) is not None,
        timeout=60, what="a warm root sandbox with its bound")
    sid = api.create()
    res = api.exec(sid, "sudo fallocate -l 20G /bigfile; echo rc=$?")
    assert "No space left on device" in res["stderr"], res
    assert mount_of(layer_dir(sid)) is not None


def test_a_paused_root_sandbox_is_destroyed_with_its_mount(rapi, rstack):
    sid = rapi.create()
    layer = layer_dir(sid)
    assert rapi.request("POST", f"/sandbox/{sid}/pause").status_code == 200
    assert rapi.delete(sid).status_code == 204
    assert mount_of(layer) is None and not nbtest.docker_ps(rstack.instance, sandbox=sid)


def test_a_root_sandbox_adopted_from_a_lost_table_keeps_its_bound(rapi, rstack):
    """A new master with no table adopts the running sandbox from Docker's
    labels (adopt.c); the mount is the kernel's and stays; its destroy
    unmounts it."""
    sid = rapi.create()
    layer = layer_dir(sid)
    assert rstack.stop_fcgi()
    os.unlink(rstack.state)
    rstack.start_fcgi()
    rstack.wait_healthy()
    assert rapi.get(sid).status_code == 200
    res = rapi.exec(sid, "sudo fallocate -l 20G /bigfile; echo rc=$?")
    assert "No space left on device" in res["stderr"], res
    assert rapi.delete(sid).status_code == 204
    assert mount_of(layer) is None and not nbtest.docker_ps(rstack.instance, sandbox=sid)
