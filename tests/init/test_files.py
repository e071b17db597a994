"""
File requests (R, T, U, D, N, V): contents byte-exact, listings with
lstat, parents created, symlinks never followed by a delete, FIFOs never
opened, and every bad path refused with EINVAL.
"""
import os
import stat
import time

import pytest

from agentclient import AgentError, field, u32
from inittest import wait_until


def test_write_then_read_5mib_byte_exact(agent, tmp_path):
    data = os.urandom(5 * 1024 * 1024 + 11)
    target = tmp_path / "big.bin"
    info = agent.write(str(target), data)
    assert info["kind"] == "f" and info["size"] == len(data)
    assert target.read_bytes() == data
    i, got = agent.read(str(target))
    assert i["size"] == len(data)
    assert got == data


def test_write_creates_parents_and_applies_the_mode(agent, tmp_path):
    target = tmp_path / "a" / "b" / "c.txt"
    info = agent.write(str(target), b"hello", mode=0o600)
    assert target.read_bytes() == b"hello"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert info["mode"] == 0o600
    assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o755
    agent.write(str(target), b"replaced")
    assert target.read_bytes() == b"replaced"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


def test_write_of_empty_file(agent, tmp_path):
    agent.write(str(tmp_path / "empty"), b"")
    assert (tmp_path / "empty").read_bytes() == b""


def test_upload_cut_short_leaves_nothing(agent, tmp_path):
    target = tmp_path / "partial.bin"
    c = agent.request("U", field("F", str(target)))
    c.send("d", b"x" * 1000)
    c.close()
    # the agent sees the hang-up in its own time, then removes what it wrote
    wait_until(lambda: sorted(os.listdir(tmp_path)) in ([], ["agent.log"]), 5,
               what="the cut-short upload's file to be removed")
    assert agent.ping()
    assert not target.exists()


def test_write_over_a_directory_is_eisdir(agent, tmp_path):
    with pytest.raises(AgentError) as e:
        agent.write(str(tmp_path), b"x")
    assert e.value.errno == 21


def test_read_directory_lists_entries_without_following_symlinks(agent, tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    (d / "file").write_bytes(b"12345")
    (d / "sub").mkdir()
    (d / "link").symlink_to(d / "sub")
    info, entries = agent.read(str(d))
    assert info["kind"] == "d"
    by_name = {e["name"]: e for e in entries}
    assert set(by_name) == {"file", "sub", "link"}
    assert by_name["file"]["kind"] == "f" and by_name["file"]["size"] == 5
    assert by_name["sub"]["kind"] == "d"
    assert by_name["link"]["kind"] == "l"


def test_read_large_directory(agent, tmp_path):
    d = tmp_path / "many"
    d.mkdir()
    for i in range(3000):
        (d / f"f{i:05d}-{'x' * 100}").write_bytes(b"")
    _, entries = agent.read(str(d))
    assert len(entries) == 3000


def test_stat_reports_kind_size_mode_mtime(agent, tmp_path):
    f = tmp_path / "f"
    f.write_bytes(b"abc")
    f.chmod(0o640)
    i = agent.stat(str(f))
    assert (i["kind"], i["size"], i["mode"]) == ("f", 3, 0o640)
    assert abs(i["mtime"] - f.stat().st_mtime) < 2
    assert agent.stat(str(tmp_path))["kind"] == "d"
    (tmp_path / "l").symlink_to(f)
    assert agent.stat(str(tmp_path / "l"))["kind"] == "l"


def test_stat_mtime_to_the_nanosecond_and_a_symlinks_target_mode(agent, tmp_path):
    f = tmp_path / "f"
    f.write_bytes(b"abc")
    os.utime(f, ns=(1_700_000_000_123_456_789, 1_700_000_000_123_456_789))
    i = agent.stat(str(f))
    assert (i["mtime"], i["mtime_nsec"]) == (1_700_000_000, 123_456_789)
    assert "target_mode" not in i  # only a symlink's
    f.chmod(0o604)
    (tmp_path / "l").symlink_to(f)
    link = agent.stat(str(tmp_path / "l"))
    assert link["kind"] == "l" and link["mode"] == 0o777
    assert link["target_mode"] == stat.S_IFREG | 0o604
    assert (link["mtime"], link["mtime_nsec"]) == divmod(os.lstat(tmp_path / "l").st_mtime_ns, 10**9)
    (tmp_path / "d").mkdir(mode=0o750)
    (tmp_path / "ld").symlink_to("d")  # relative: resolved from the link's directory
    assert agent.stat(str(tmp_path / "ld"))["target_mode"] == stat.S_IFDIR | 0o750
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    assert "target_mode" not in agent.stat(str(tmp_path / "dangling"))
    _, entries = agent.read(str(tmp_path))
    by = {e["name"]: e for e in entries}
    assert by["f"]["mtime_nsec"] == 123_456_789
    assert by["l"]["target_mode"] == stat.S_IFREG | 0o604 and "target_mode" not in by["dangling"]


def test_a_symlinks_real_path_every_link_followed_never_through_proc_magic(agent, tmp_path):
    """`a`: the absolute path a symlink leads to, every link followed (E2B's symlinkTarget);
    none when it does not resolve, or only through /proc's magic links (the agent's own
    cwd, root, fds: not the sandbox user's view)."""
    base = os.path.realpath(tmp_path)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_bytes(b"x")
    (tmp_path / "viadir").symlink_to("d")
    links = {"rel": "d/f", "chain": "rel", "parent": "viadir/f", "abs": f"{base}/d", "up": "../" * 40 + "etc",
             "dangling": "nowhere", "loop1": "loop2", "loop2": "loop1",
             "cwd": "/proc/self/cwd", "root": "/proc/self/root/etc", "fd": "/proc/self/fd/0"}
    for name, to in links.items():
        (tmp_path / name).symlink_to(to)
    want = {"rel": f"{base}/d/f", "chain": f"{base}/d/f", "parent": f"{base}/d/f", "abs": f"{base}/d",
            "up": os.path.realpath("/etc")}
    if "valgrind" in os.environ.get("NANOBOX_INIT_WRAPPER", ""):
        # valgrind does not know openat2 (ENOSYS to the agent): then no link
        # gets a real path, and nothing else is tried in its place
        want = {}
    got = {n: agent.stat(str(tmp_path / n)).get("real") for n in links}
    assert got == {n: want.get(n) for n in links}, got
    _, entries = agent.read(str(tmp_path))
    listed = {e["name"]: e.get("real") for e in entries if e["name"] in links}
    assert listed == got, listed
    assert "real" not in agent.stat(str(tmp_path / "d" / "f"))  # only a symlink's


def test_missing_path_is_enoent(agent, tmp_path):
    for call in (lambda: agent.read(str(tmp_path / "nope")), lambda: agent.stat(str(tmp_path / "nope")),
                 lambda: agent.delete(str(tmp_path / "nope"))):
        with pytest.raises(AgentError) as e:
            call()
        assert e.value.errno == 2


def test_mkdir_with_parents_and_existing_is_fine(agent, tmp_path):
    agent.mkdir(str(tmp_path / "x" / "y" / "z"))
    assert (tmp_path / "x" / "y" / "z").is_dir()
    agent.mkdir(str(tmp_path / "x" / "y" / "z"))
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(AgentError) as e:
        agent.mkdir(str(tmp_path / "file"))
    assert e.value.errno == 17
    with pytest.raises(AgentError) as e:
        agent.mkdir(str(tmp_path / "file" / "sub"))
    assert e.value.errno == 20


def test_move_renames(agent, tmp_path):
    (tmp_path / "a").write_bytes(b"data")
    agent.move(str(tmp_path / "a"), str(tmp_path / "b"))
    assert not (tmp_path / "a").exists()
    assert (tmp_path / "b").read_bytes() == b"data"
    with pytest.raises(AgentError) as e:
        agent.move(str(tmp_path / "b"), str(tmp_path / "missing" / "c"))
    assert e.value.errno == 2


def test_delete_file_and_empty_dir_and_refuse_nonempty(agent, tmp_path):
    (tmp_path / "f").write_bytes(b"")
    agent.delete(str(tmp_path / "f"))
    assert not (tmp_path / "f").exists()
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x").write_bytes(b"")
    with pytest.raises(AgentError) as e:
        agent.delete(str(tmp_path / "d"))
    assert e.value.errno == 39
    (tmp_path / "d" / "x").unlink()
    agent.delete(str(tmp_path / "d"))
    assert not (tmp_path / "d").exists()


def test_recursive_delete_does_not_follow_symlinks(agent, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_bytes(b"keep me")
    tree = tmp_path / "tree"
    (tree / "a" / "b").mkdir(parents=True)
    (tree / "a" / "b" / "f").write_bytes(b"x")
    (tree / "a" / "link-to-outside").symlink_to(outside)
    (tree / "file-link").symlink_to(outside / "precious")
    agent.delete(str(tree), recursive=True)
    assert not tree.exists()
    assert (outside / "precious").read_bytes() == b"keep me"


def test_delete_of_a_symlink_removes_only_the_link(agent, tmp_path):
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "f").write_bytes(b"x")
    (tmp_path / "l").symlink_to(tmp_path / "dir")
    agent.delete(str(tmp_path / "l"), recursive=True)
    assert not (tmp_path / "l").is_symlink()
    assert (tmp_path / "dir" / "f").exists()


def test_fifo_read_is_refused_without_blocking(agent, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    t0 = time.time()
    with pytest.raises(AgentError) as e:
        agent.read(str(fifo))
    assert e.value.errno == 22
    assert time.time() - t0 < 2
    with pytest.raises(AgentError) as e:
        agent.write(str(fifo), b"x")
    assert e.value.errno == 22
    assert agent.stat(str(fifo))["kind"] == "o"
    assert agent.ping()


def test_device_read_is_refused(agent):
    with pytest.raises(AgentError) as e:
        agent.read("/dev/zero")
    assert e.value.errno == 22


@pytest.mark.parametrize("path", ["..", "/a/../b", "/./x", "/x/..", "relative/p", "/a\0b", "",
                                  "/" + "a" * 4096])
@pytest.mark.parametrize("rtype", ["R", "T", "U", "D", "N", "V"])
def test_bad_paths_are_einval(agent, path, rtype):
    fields = [field("F", path)]
    if rtype == "V":
        fields.append(field("G", "/tmp/nbtest-never"))
    with agent.request(rtype, *fields) as c:
        t, body = c.recv()
        assert t == "!"
        assert int.from_bytes(body[:4], "big") == 22
        c.expect_eof()


def test_bad_destination_is_einval(agent, tmp_path):
    (tmp_path / "a").write_bytes(b"")
    with pytest.raises(AgentError) as e:
        agent.move(str(tmp_path / "a"), "/tmp/../etc/x")
    assert e.value.errno == 22
    assert (tmp_path / "a").exists()


def test_mode_beyond_07777_is_einval(agent, tmp_path):
    with agent.request("U", field("F", str(tmp_path / "m")), field("M", u32(0o10000))) as c:
        t, body = c.recv()
        assert t == "!" and int.from_bytes(body[:4], "big") == 22


# --- user metadata (x): the xattrs "user.<key>" ---------------------------

def test_write_with_metadata_sets_user_xattrs_and_every_info_reports_them(agent, tmp_path):
    d = tmp_path / "m"
    target = d / "f.txt"
    info = agent.write(str(target), b"hi", meta={"owner-id": "42", "note": "a b c"})
    assert info["meta"] == {"owner-id": "42", "note": "a b c"}
    assert os.getxattr(target, "user.owner-id") == b"42"
    assert agent.stat(str(target))["meta"] == {"owner-id": "42", "note": "a b c"}
    i, _ = agent.read(str(target))
    assert i["meta"]["note"] == "a b c"
    _, entries = agent.read(str(d))
    assert entries[0]["meta"] == {"owner-id": "42", "note": "a b c"}
    # set another way: reported when it keeps to the rules, left out when not
    os.setxattr(d, "user.dir-tag", b"x")
    os.setxattr(target, "user.binary", b"\x00\xff")
    assert agent.stat(str(d))["meta"] == {"dir-tag": "x"}
    assert "binary" not in agent.stat(str(target))["meta"]
    # a rewrite replaces the file, and its metadata with it
    assert "meta" not in agent.write(str(target), b"again")
    assert "meta" not in agent.stat(str(target))


@pytest.mark.parametrize("raw", [
    b"trusted.x\0v", b"security.selinux\0v", b"system.posix_acl_access\0v", b"user.x\0v",
    b"USER.x\0v", b"\0v", b"k", b"bad key\0v", b"k\0line\nbreak", b"k\0\x80",
    b"k" * 129 + b"\0v", b"k\0" + b"v" * 1025,
])
def test_bad_metadata_is_refused_before_anything_is_written(agent, tmp_path, raw):
    target = tmp_path / "refused.txt"
    with pytest.raises(AgentError) as e:
        agent.write(str(target), b"x", meta=[raw])
    assert e.value.errno == 22
    assert not target.exists()
    assert agent.ping()


def test_metadata_past_its_caps_is_refused(agent, tmp_path):
    target = tmp_path / "many.txt"
    with pytest.raises(AgentError) as e:  # 17 entries
        agent.write(str(target), b"x", meta={f"k{i}": "v" for i in range(17)})
    assert e.value.errno == 22
    with pytest.raises(AgentError) as e:  # 5 x (1 + 1000) bytes > 4096
        agent.write(str(target), b"x", meta={f"{i}": "v" * 1000 for i in range(5)})
    assert e.value.errno == 22
    assert not target.exists()
    info = agent.write(str(target), b"x", meta={f"k{i:02}": "v" for i in range(16)})
    assert len(info["meta"]) == 16


def test_metadata_write_through_a_symlink_replaces_the_link_not_its_target(agent, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"keep")
    link = tmp_path / "link"
    link.symlink_to(outside)
    info = agent.write(str(link), b"new", meta={"k": "v"})
    assert info["meta"] == {"k": "v"}
    assert not link.is_symlink() and link.read_bytes() == b"new"
    assert outside.read_bytes() == b"keep"
    assert os.listxattr(outside) == []
    # a symlink's own info has no metadata (the kernel keeps none on links)
    link2 = tmp_path / "link2"
    link2.symlink_to(link)
    assert "meta" not in agent.stat(str(link2))
