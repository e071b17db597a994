"""
Directory watches (I) and moves across mounts (V on EXDEV).

A watch answers s (directories watched, watches open) and then one v per
change, named relative to the watched directory, until the host closes
or sends '.'; its inotify fd goes with the connection. A move between
two file systems (tmp_path and the tmpfs /dev/shm here, /workspace and
/tmp in a sandbox) copies then deletes.
"""
import os
import shutil
import stat
import subprocess
import struct
import time
import uuid
from pathlib import Path

import pytest

from agentclient import AgentError, field, fields_dict, u32
from inittest import wait_until

KIND = {"c": "create", "w": "write", "x": "remove", "m": "rename", "a": "chmod", "o": "overflow"}


def watch(agent, path, recursive=False, max_dirs=None):
    fields = [field("F", str(path))]
    if recursive:
        fields.append(field("r"))
    if max_dirs is not None:
        fields.append(field("M", u32(max_dirs)))
    c = agent.request("I", *fields)
    c.sock.settimeout(5)
    body = c.expect("s")
    dirs, open_ = struct.unpack(">II", body)
    return c, dirs, open_


def events_until(c, want, timeout=5.0):
    """(kind, name) events until want (a (kind, name)) has come."""
    got = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        t, body = c.recv()
        assert t == "v", (t, body)
        f = fields_dict(body)
        got.append((KIND[chr(f["K"][0])], f["F"].decode()))
        if got[-1] == want:
            return got
    raise AssertionError(f"{want} never came: {got}")


def inotify_fds(pid):
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:inotify":
                n += 1
        except OSError:
            pass
    return n


def test_watch_reports_each_kind_with_relative_names(agent, tmp_path):
    d = tmp_path / "w"
    d.mkdir()
    c, dirs, _ = watch(agent, d)
    assert dirs == 1
    (d / "a.txt").write_bytes(b"x")
    got = events_until(c, ("write", "a.txt"))
    assert got[0] == ("create", "a.txt")
    os.chmod(d / "a.txt", 0o600)
    events_until(c, ("chmod", "a.txt"))
    os.rename(d / "a.txt", d / "b.txt")
    got = events_until(c, ("create", "b.txt"))
    assert ("rename", "a.txt") in got
    (d / "b.txt").unlink()
    events_until(c, ("remove", "b.txt"))
    c.close()


def test_an_upload_shows_as_create_and_write_of_its_name(agent, tmp_path):
    c, _, _ = watch(agent, tmp_path)
    agent.write(str(tmp_path / "up.bin"), b"data")
    got = events_until(c, ("write", "up.bin"))
    assert ("create", "up.bin") in got
    assert not any(".nanobox-" in name for _, name in got)
    c.close()


def test_recursive_watch_follows_new_directories(agent, tmp_path):
    (tmp_path / "old" / "deep").mkdir(parents=True)
    c, dirs, _ = watch(agent, tmp_path, recursive=True)
    assert dirs == 3
    (tmp_path / "old" / "deep" / "f").write_bytes(b"1")
    events_until(c, ("create", "old/deep/f"))
    (tmp_path / "new").mkdir()
    events_until(c, ("create", "new"))
    time.sleep(0.1)
    (tmp_path / "new" / "g").write_bytes(b"2")
    events_until(c, ("create", "new/g"))
    c.close()


def test_a_directory_moved_in_is_watched_and_its_entries_announced(agent, tmp_path):
    (tmp_path / "w").mkdir()
    (tmp_path / "outside" / "inner").mkdir(parents=True)
    (tmp_path / "outside" / "inner" / "f").write_bytes(b"1")
    c, dirs, _ = watch(agent, tmp_path / "w", recursive=True)
    assert dirs == 1
    os.rename(tmp_path / "outside", tmp_path / "w" / "moved")
    got = events_until(c, ("create", "moved/inner/f"))
    assert got[0] == ("create", "moved") and ("create", "moved/inner") in got
    (tmp_path / "w" / "moved" / "inner" / "g").write_bytes(b"2")
    events_until(c, ("create", "moved/inner/g"))
    c.close()


def test_not_recursive_sees_only_its_own_entries(agent, tmp_path):
    (tmp_path / "sub").mkdir()
    c, dirs, _ = watch(agent, tmp_path)
    assert dirs == 1
    (tmp_path / "sub" / "hidden").write_bytes(b"1")
    (tmp_path / "top").write_bytes(b"1")
    got = events_until(c, ("create", "top"))
    assert all(not name.startswith("sub/") for _, name in got)
    c.close()


def test_directory_cap_and_errors(agent, tmp_path):
    for i in range(3):
        (tmp_path / f"d{i}").mkdir()
    with pytest.raises(AgentError) as e:
        watch(agent, tmp_path, recursive=True, max_dirs=2)
    assert e.value.errno == 28 and "more than 2 directories" in str(e.value)
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(AgentError) as e:
        watch(agent, tmp_path / "file")
    assert e.value.errno == 20
    with pytest.raises(AgentError) as e:
        watch(agent, tmp_path / "missing")
    assert e.value.errno == 2
    with pytest.raises(AgentError) as e:
        watch(agent, tmp_path, max_dirs=0)
    assert e.value.errno == 22
    assert inotify_fds(agent.pid) == 0


def test_closing_frees_the_watch(agent, tmp_path):
    conns = [watch(agent, tmp_path, recursive=True)[0] for _ in range(5)]
    assert inotify_fds(agent.pid) == 5
    for c in conns:
        c.close()
    deadline = time.monotonic() + 3
    while inotify_fds(agent.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert inotify_fds(agent.pid) == 0
    c, _, open_ = watch(agent, tmp_path)
    assert open_ == 1
    c.send(".")
    c.expect(".")
    c.expect_eof()
    assert inotify_fds(agent.pid) == 0


def test_watch_ends_when_the_directory_goes(agent, tmp_path):
    d = tmp_path / "gone"
    d.mkdir()
    c, _, _ = watch(agent, d)
    d.rmdir()
    while True:
        t, _ = c.recv()
        if t == ".":
            break
        assert t == "v"
    c.expect_eof()
    assert inotify_fds(agent.pid) == 0


def test_watches_are_capped(agent, tmp_path):
    conns = [watch(agent, tmp_path)[0] for _ in range(32)]
    with pytest.raises(AgentError) as e:
        watch(agent, tmp_path)
    assert e.value.errno == 11
    for c in conns:
        c.close()


# ------------------------------------------------------------ move across mounts

@pytest.fixture
def other_mount():
    if not os.access("/dev/shm", os.W_OK) or os.stat("/dev/shm").st_dev == os.stat("/tmp").st_dev:
        pytest.skip("no second file system to move to")
    d = Path("/dev/shm") / f"nbtest-{uuid.uuid4().hex[:8]}"
    d.mkdir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_move_file_across_mounts(agent, tmp_path, other_mount):
    src = tmp_path / "f.bin"
    data = os.urandom(300000)
    src.write_bytes(data)
    os.chmod(src, 0o640)
    agent.move(str(src), str(other_mount / "g.bin"))
    assert not src.exists()
    assert (other_mount / "g.bin").read_bytes() == data
    assert stat.S_IMODE((other_mount / "g.bin").stat().st_mode) == 0o640
    assert sorted(os.listdir(other_mount)) == ["g.bin"]


def test_move_tree_across_mounts_keeps_modes_and_symlinks(agent, tmp_path, other_mount):
    src = tmp_path / "tree"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "x").write_bytes(b"xx")
    (src / "run.sh").write_bytes(b"#!/bin/sh\n")
    os.chmod(src / "run.sh", 0o755)
    os.chmod(src / "sub", 0o700)
    os.symlink("sub/x", src / "link")
    agent.move(str(src), str(other_mount / "tree"))
    dst = other_mount / "tree"
    assert not src.exists()
    assert (dst / "sub" / "x").read_bytes() == b"xx"
    assert stat.S_IMODE((dst / "run.sh").stat().st_mode) == 0o755
    assert stat.S_IMODE((dst / "sub").stat().st_mode) == 0o700
    assert os.readlink(dst / "link") == "sub/x"
    assert sorted(os.listdir(other_mount)) == ["tree"]


def test_move_across_mounts_onto_a_full_directory_changes_nothing(agent, tmp_path, other_mount):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a").write_bytes(b"a")
    (other_mount / "d").mkdir()
    (other_mount / "d" / "keep").write_bytes(b"k")
    with pytest.raises(AgentError) as e:
        agent.move(str(tmp_path / "d"), str(other_mount / "d"))
    assert e.value.errno in (39, 17)  # ENOTEMPTY (or EEXIST)
    assert (tmp_path / "d" / "a").read_bytes() == b"a"
    assert sorted(os.listdir(other_mount)) == ["d"]
    assert os.listdir(other_mount / "d") == ["keep"]


@pytest.fixture
def tmpfs_in(tmp_path):
    """tmp_path/tree/mnt, a tmpfs of its own (root only), holding keep.txt."""
    mnt = tmp_path / "tree" / "mnt"
    mnt.mkdir(parents=True)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "nbtest", str(mnt)]).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    (mnt / "keep.txt").write_bytes(b"keep")
    yield mnt
    subprocess.run(["umount", str(mnt)])


def test_a_mount_point_is_never_moved_by_copy(agent, tmpfs_in, other_mount):
    with pytest.raises(AgentError) as e:
        agent.move(str(tmpfs_in), str(other_mount / "m"))
    assert e.value.errno == 18  # EXDEV, as rename said: its contents are left alone
    assert (tmpfs_in / "keep.txt").read_bytes() == b"keep"
    assert os.listdir(other_mount) == []


def test_a_tree_holding_a_mount_is_not_moved(agent, tmpfs_in, other_mount):
    (tmpfs_in.parent / "mine.txt").write_bytes(b"m")
    with pytest.raises(AgentError) as e:
        agent.move(str(tmpfs_in.parent), str(other_mount / "t"))
    assert e.value.errno == 18
    assert (tmpfs_in / "keep.txt").read_bytes() == b"keep"
    assert (tmpfs_in.parent / "mine.txt").read_bytes() == b"m"
    assert os.listdir(other_mount) == []


# ------------------------------------------------------------ polling watchers (J, G, O)

def create_watcher(agent, path, recursive=False):
    fields = [field("F", str(path))] + ([field("r")] if recursive else [])
    with agent.request("J", *fields) as c:
        dirs, open_, wid = struct.unpack(">III", c.expect("s"))
        c.expect(".")
        c.expect_eof()
    return wid, dirs, open_


def poll(agent, wid):
    got = []
    with agent.request("G", field("P", u32(wid))) as c:
        while True:
            t, body = c.recv()
            if t == ".":
                break
            if t == "!":
                raise AgentError(struct.unpack(">I", body[:4])[0], body[4:].decode())
            f = fields_dict(body)
            got.append((KIND[chr(f["K"][0])], f["F"].decode()))
    return got


def remove_watcher(agent, wid):
    with agent.request("O", field("P", u32(wid))) as c:
        f = c.recv()
        if f[0] == "!":
            raise AgentError(struct.unpack(">I", f[1][:4])[0], f[1][4:].decode())
        assert f[0] == "."


def test_polling_watcher_keeps_events_between_requests(agent, tmp_path):
    (tmp_path / "sub").mkdir()
    wid, dirs, open_ = create_watcher(agent, tmp_path, recursive=True)
    assert wid > 0 and dirs == 2 and open_ == 1
    assert inotify_fds(agent.pid) == 1  # it outlives its request's connection
    (tmp_path / "a").write_bytes(b"1")
    (tmp_path / "sub" / "b").write_bytes(b"2")
    # the agent reads the events in its own time: what the polls took, until the last came
    got = []
    wait_until(lambda: got.extend(poll(agent, wid)) or ("write", "sub/b") in got, 5,
               what="the watcher to keep the events of both writes")
    assert ("create", "a") in got and ("write", "a") in got and ("create", "sub/b") in got, got
    assert poll(agent, wid) == []  # taken
    (tmp_path / "a").unlink()
    assert wait_until(lambda: poll(agent, wid), 5, what="the removal's event") == [("remove", "a")]
    remove_watcher(agent, wid)
    assert inotify_fds(agent.pid) == 0
    for req in (poll, remove_watcher):
        with pytest.raises(AgentError) as e:
            req(agent, wid)
        assert e.value.errno == 3  # ESRCH


def test_polling_watcher_caps_what_it_keeps(agent, tmp_path):
    wid, _, _ = create_watcher(agent, tmp_path)
    for i in range(700):  # create + write each: past the 1024 kept
        (tmp_path / f"f{i}").write_bytes(b"x")
    time.sleep(0.2)
    got = poll(agent, wid)
    while True:
        more = poll(agent, wid)
        if not more:
            break
        got += more
    assert ("overflow", "") in got
    assert len(got) <= 1025
    remove_watcher(agent, wid)


def test_polling_watchers_count_against_the_cap_and_errors(agent, tmp_path):
    wids = [create_watcher(agent, tmp_path)[0] for _ in range(32)]
    with pytest.raises(AgentError) as e:
        create_watcher(agent, tmp_path)
    assert e.value.errno == 11
    for w in wids:
        remove_watcher(agent, w)
    assert inotify_fds(agent.pid) == 0
    with pytest.raises(AgentError) as e:
        create_watcher(agent, tmp_path / "missing")
    assert e.value.errno == 2
    with pytest.raises(AgentError) as e:
        poll(agent, 0)
    assert e.value.errno == 22


def test_an_idle_polling_watcher_expires_and_frees_its_fd(spawn_agent, tmp_path):
    a = spawn_agent(extra=("--watcher-idle-ms", "700"))
    kept, _, _ = create_watcher(a, tmp_path)
    idle, _, _ = create_watcher(a, tmp_path)
    assert inotify_fds(a.pid) == 2
    (tmp_path / "x").write_bytes(b"1")
    for _ in range(5):  # polled every 0.3 s: it lives on past 0.7 s
        time.sleep(0.3)
        poll(a, kept)
    assert inotify_fds(a.pid) == 1  # the idle one is gone, with its inotify fd
    for req in (poll, remove_watcher):
        with pytest.raises(AgentError) as e:
            req(a, idle)
        assert e.value.errno == 3  # ESRCH, as for an id never given
    remove_watcher(a, kept)
    assert inotify_fds(a.pid) == 0
    wids = [create_watcher(a, tmp_path)[0] for _ in range(32)]  # all 32 slots are free again
    time.sleep(1.0)
    assert inotify_fds(a.pid) == 0  # expired with no request coming in
    wid, _, open_ = create_watcher(a, tmp_path)
    assert open_ == 1 and wid not in wids


def test_watcher_idle_option_is_checked(spawn_agent, tmp_path):
    for bad in ("0", "-5", "x", "86400001"):
        a = spawn_agent(extra=("--watcher-idle-ms", bad), check_ready=False)
        assert a.proc.wait(5) == 2
