"""
Root in a sandbox: the operator's choice (root_templates), per template.

A sandbox of a template named there starts as uid 0 with a writable image;
its agent runs every command as the slot's uid as ever, and as a root with
no capabilities and no-new-privileges when one asks: `sudo` (the agent's own
binary under that name, in every sandbox) or exec's `"user": "root"`. Other
sandboxes have no root: sudo and "root" say so. docs/SECURITY.md, "Root".
"""
import os
import re
import secrets
import time

import pytest

import nbtest
from conftest import module_stack
from nbtest import IMAGE, PYTHON_IMAGE, assert_error, docker_inspect, needs_image, parse_json

# one stack for the module, on one worker
pytestmark = pytest.mark.xdist_group(name="root")

USER = nbtest.BASE_CONF.get("sandbox_user_name", "sandbox")

CAPS = "grep -E '^(Uid|Gid|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' /proc/self/status"


def status_fields(out):
    return {k: v.strip() for k, v in (line.split(":", 1) for line in out.strip().splitlines())}


def no_caps(fields):
    return all(int(fields[k], 16) == 0 for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"))


@pytest.fixture(scope="module")
def rstack():
    """A stack whose default image (nanobox) has a root; nanobox-python has none."""
    yield from module_stack("root", {"root_templates": "nanobox"})


@pytest.fixture
def rapi(rstack):
    yield rstack.api
    rstack.api.cleanup()


def test_the_container_of_a_root_template(rapi):
    sid = rapi.create()
    c = docker_inspect(f"nanobox-{sid}")
    hc = c["HostConfig"]
    assert c["Config"]["User"] == "0:0"
    # SETFCAP: the agent's at its start only, to map uid 0 into root's user namespace
    assert sorted(hc["CapAdd"]) == ["KILL", "SETFCAP", "SETGID", "SETPCAP", "SETUID"], hc["CapAdd"]
    assert hc["CapDrop"] == ["ALL"]
    assert "no-new-privileges" in hc["SecurityOpt"]
    assert hc["ReadonlyRootfs"] is False
    assert c["Config"]["Labels"]["nanobox.root"] == "1"
    # the agent: uid 0 with only the four, and its commands as the slot's uid
    pid1 = status_fields(rapi.exec(sid, "grep -E '^(Uid|CapEff|NoNewPrivs):' /proc/1/status")["stdout"])
    # real, effective, saved 0; the file system uid is the user's (its file work)
    uid = rapi.exec(sid, "id -u")["stdout"].strip()
    assert pid1["Uid"].split() == ["0", "0", "0", uid], pid1
    assert int(pid1["CapEff"], 16) == (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8), pid1  # KILL SETGID SETUID SETPCAP
    assert pid1["NoNewPrivs"] == "1"


def test_commands_run_as_the_user_and_without_capabilities(rapi):
    sid = rapi.create()
    f = status_fields(rapi.exec(sid, CAPS)["stdout"])
    uid = f["Uid"].split()[0]
    assert int(uid) > 0 and f["Uid"].split() == [uid] * 4, f
    assert no_caps(f) and f["NoNewPrivs"] == "1", f
    assert rapi.exec(sid, "whoami")["stdout"] == f"{USER}\n"


def test_sudo_and_user_root_run_as_a_root_without_capabilities(rapi):
    sid = rapi.create()
    for res in (rapi.exec(sid, f"sudo sh -c \"{CAPS}\""), rapi.exec(sid, CAPS, user="root")):
        assert res["exit_code"] == 0, res
        f = status_fields(res["stdout"])
        assert f["Uid"].split() == ["0"] * 4 and f["Gid"].split() == ["0"] * 4, f
        assert no_caps(f) and f["NoNewPrivs"] == "1", f
    res = rapi.exec(sid, "echo $HOME; whoami; pwd", user="root")
    assert res["stdout"] == "/root\nroot\n/workspace\n", res
    res = rapi.exec(sid, "sudo sh -c 'echo $HOME $USER $SUDO_USER; exit 7'")
    assert (res["exit_code"], res["stdout"]) == (7, f"/root root {USER}\n"), res
    # the user's own name works too, as the user
    assert rapi.exec(sid, "id -u", user=USER)["stdout"] == rapi.exec(sid, "id -u")["stdout"]


# a package of one script, built in the sandbox (no network: apt installs the file)
BUILD_DEB = r"""
set -e
mkdir -p /tmp/pkg/DEBIAN /tmp/pkg/usr/bin
printf 'Package: nbhello\nVersion: 1.0\nArchitecture: all\nMaintainer: nanobox tests <t@localhost>\nDescription: hello\n' > /tmp/pkg/DEBIAN/control
printf '#!/bin/sh\necho hello from a package\n' > /tmp/pkg/usr/bin/nbhello
chmod 0755 /tmp/pkg/usr/bin/nbhello
dpkg-deb --root-owner-group --build /tmp/pkg /tmp/nbhello.deb >/dev/null
"""
PACKAGE_RUNS = "nbhello; stat -c '%U %a' /usr/bin/nbhello; dpkg-query -W -f '${Status}' nbhello"


def install_package(api, sid):
    assert api.exec(sid, BUILD_DEB)["exit_code"] == 0
    res = api.exec(sid, "cd /tmp && sudo apt-get install -y ./nbhello.deb", timeout=120)
    assert res["exit_code"] == 0, res


def test_root_installs_a_package_the_user_then_runs(rapi):
    sid = rapi.create()
    install_package(rapi, sid)
    res = rapi.exec(sid, PACKAGE_RUNS)
    assert res["stdout"] == "hello from a package\nroot 755\ninstall ok installed", res
    # the user still cannot write what root owns
    res = rapi.exec(sid, "echo x > /usr/bin/nbhello")
    assert res["exit_code"] != 0 and "Permission denied" in res["stderr"], res


def test_root_has_no_capability_the_kernel_guards(rapi):
    sid = rapi.create()
    rapi.exec(sid, "echo mine > /workspace/mine.txt")
    for cmd in ("sudo chown 0 /workspace/mine.txt",       # CAP_CHOWN
                "sudo sh -c 'echo x > /workspace/mine.txt'",  # CAP_DAC_OVERRIDE
                "sudo mount -t tmpfs none /mnt"):           # CAP_SYS_ADMIN
        res = rapi.exec(sid, cmd)
        assert res["exit_code"] != 0, (cmd, res)
    # PID 1 (the agent, uid 0 too) takes no signal from inside
    rapi.exec(sid, "sudo kill -9 1")
    assert rapi.exec(sid, "cat /workspace/mine.txt")["stdout"] == "mine\n"
    assert rapi.get(sid).status_code == 200


def test_a_root_command_is_killed_at_its_timeout_with_its_tree(rapi):
    sid = rapi.create()
    res = rapi.exec(sid, "sudo sh -c 'sleep 300 & sleep 301'", timeout=1)
    assert res["timed_out"] is True, res
    left = rapi.exec(sid, "ps -eo user,args | grep -c '[s]leep 30' || true")["stdout"].strip()
    assert left == "0", rapi.exec(sid, "ps -eo pid,user,args")["stdout"]


def test_files_written_through_the_api_belong_to_the_user(rapi):
    sid = rapi.create()
    r = rapi.request("PUT", f"/sandbox/{sid}/files?path=/workspace/api.txt", data=b"via api")
    assert r.status_code in (200, 201), r.text
    assert rapi.exec(sid, "stat -c %U /workspace/api.txt")["stdout"] == f"{USER}\n"


def test_a_template_without_root_refuses_it_clearly(rapi):
    needs_image(PYTHON_IMAGE)
    sid = rapi.create(image=PYTHON_IMAGE)
    c = docker_inspect(f"nanobox-{sid}")
    assert c["Config"]["User"] != "0:0" and c["HostConfig"]["ReadonlyRootfs"] is True
    res = rapi.exec(sid, "sudo id -u")
    assert res["exit_code"] == 1 and res["stdout"] == "", res
    assert res["stderr"].startswith("sudo: a nanobox sandbox has no root"), res
    r = rapi.exec_raw(sid, "id -u", user="root")
    assert "has no root" in assert_error(r, 403, "forbidden")["error"]


def test_bad_user_is_400_and_runs_nothing(rapi):
    sid = rapi.create(image=IMAGE)
    for user in ("bob", 0, None, ["root"]):
        r = rapi.exec_raw(sid, "touch /tmp/ran", user=user)
        assert r.status_code == 400, (user, r.status_code, r.text)
    assert rapi.exec(sid, "ls /tmp/ran 2>/dev/null || echo none")["stdout"] == "none\n"


# ---- root_disk_max: what a root writes into the image is capped ----------


def test_a_root_that_writes_past_root_disk_max_gets_enospc_and_keeps_its_sandbox(make_stack):
    """The image's writable layer is a file system of root_disk_max bytes
    (src/fcgi/engine/rootdisk.h): a write past it fails with ENOSPC at once, the
    sandbox lives on, and one under the cap and one with no root are
    untouched. tests/adversarial/test_root_disk.py tries fallocate and
    inode floods."""
    st = make_stack("rootdisk", root_templates="nanobox", root_disk_max="20m", root_disk_check="1")
    api = st.api
    big, small = api.create(), api.create()
    plain = api.create(image=PYTHON_IMAGE) if nbtest.image_present(PYTHON_IMAGE) else None
    res = api.exec(small, "sudo dd if=/dev/zero of=/opt/small bs=1M count=5 status=none")
    assert res["exit_code"] == 0, res
    res = api.exec(big, "sudo dd if=/dev/zero of=/opt/big bs=1M count=50 status=none; echo rc=$?")
    assert "No space left on device" in res["stderr"] and "rc=1" in res["stdout"], res
    assert int(api.exec(big, "wc -c < /opt/big")["stdout"]) < 20 << 20
    assert api.exec(big, "echo fine")["stdout"] == "fine\n"
    assert api.exec(small, "cat /opt/small | wc -c")["stdout"].strip() == str(5 << 20)
    for sid in (big, small) + ((plain,) if plain else ()):
        assert api.get(sid).status_code == 200
    text = api.request("GET", "/metrics").text
    assert not re.search(r'nanobox_sandbox_destroys_total\{cause="root_disk"\} [1-9]', text)


def test_root_disk_max_zero_is_no_cap(make_stack):
    st = make_stack("rootnocap", root_templates="nanobox", root_disk_max="0", root_disk_check="1")
    sid = st.api.create()
    res = st.api.exec(sid, "sudo dd if=/dev/zero of=/opt/f bs=1M count=30 status=none && sync")
    assert res["exit_code"] == 0, res
    time.sleep(3)
    assert st.api.get(sid).status_code == 200


# ------------------------------------------- snapshots keep what a root wrote into the image

def snapshot(api, sid, nm):
    return api.request("POST", f"/sandbox/{sid}/snapshot", json={"name": nm}, timeout=300)


def test_a_snapshot_keeps_what_root_installed_changed_and_removed(rapi):
    """A root's writes land in the image (its container's writable layer),
    not in the tmpfs mounts a snapshot reads: the snapshot takes that layer
    too, deletions included, so a sandbox started from it has the package
    apt installed and not the files root removed."""
    sid = rapi.create()
    install_package(rapi, sid)
    res = rapi.exec(sid, "sudo sh -c 'set -e; rm /etc/debian_version; rm -r /usr/share/doc/bash; "
                         "mkdir /usr/share/doc/bash; echo new > /usr/share/doc/bash/only; "
                         "echo mine > /opt/fromroot; chmod 0640 /opt/fromroot' && "
                         "echo user-file > /workspace/u.txt")
    assert res["exit_code"] == 0, res
    nm = "rootsnap-" + secrets.token_hex(3)
    r = snapshot(rapi, sid, nm)
    assert r.status_code == 201, r.text
    assert parse_json(r)["status"] == "ready"
    # the sandbox it came from runs on, as it was
    assert rapi.exec(sid, "sudo cat /opt/fromroot; cat /workspace/u.txt")["stdout"] == "mine\nuser-file\n"

    child = rapi.create(template=nm)
    res = rapi.exec(child, PACKAGE_RUNS)
    assert res["stdout"] == "hello from a package\nroot 755\ninstall ok installed", res
    res = rapi.exec(child, "test -e /etc/debian_version && echo present; ls -A /usr/share/doc/bash; "
                           "stat -c '%U %a %s' /opt/fromroot; cat /workspace/u.txt; "
                           "ls -A / /etc /usr/share/doc | grep -c '^\\.wh\\.'")
    assert res["stdout"] == "only\nroot 640 5\nuser-file\n0\n", res
    # the snapshot's name is not in root_templates: its sandboxes have no root
    res = rapi.exec(child, "sudo true")
    assert res["exit_code"] == 1 and "has no root" in res["stderr"], res
    assert docker_inspect(f"nanobox-{child}")["HostConfig"]["ReadonlyRootfs"] is True


def test_a_root_snapshot_over_snapshot_max_is_413_and_leaves_nothing(make_stack):
    st = make_stack("rootsnapmax", root_templates="nanobox", snapshot_max="2m")
    api = st.api
    sid = api.create()
    assert api.exec(sid, "sudo dd if=/dev/urandom of=/opt/big bs=1M count=3 status=none")["exit_code"] == 0
    before = len(parse_json(api.request("GET", "/templates"))["templates"])
    nm = "toobig-" + secrets.token_hex(3)
    r = snapshot(api, sid, nm)
    assert_error(r, 413, "too_large")
    assert "what its root wrote into the image" in parse_json(r)["error"], r.text
    assert len(parse_json(api.request("GET", "/templates"))["templates"]) == before
    assert_error(api.request("GET", f"/templates/{nm}"), 404, "not_found")
    work = os.path.join(os.path.dirname(st.state), "sandbox", "templates")  # sandbox_dir's
    assert not [n for n in os.listdir(work) if nm in n], os.listdir(work)
    assert nbtest.run(["docker", "ps", "-aq", "--filter", f"name={nm}"]).stdout.strip() == ""
    # the sandbox runs on, thawed
    assert api.exec(sid, "wc -c < /opt/big")["stdout"].strip() == str(3 << 20)
