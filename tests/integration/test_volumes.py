"""
Persistent volumes (docs/API.md, "Volumes"): each API key's own, mounted
into its sandboxes at create, kept across sandbox deaths and service
restarts, bounded by the kernel (ext4 on a loop device), never another
key's. Real stack, real dockerd; each probe a hostile tenant would try.
"""
import json
import os
import re
import subprocess

import pytest

import nbtest
from conftest import module_stack
from nbtest import parse_json

pytestmark = pytest.mark.xdist_group(name="volumes")

CLI_BIN = nbtest.BUILD / "nanobox"
MiB = 1024 * 1024


class KeyApi(nbtest.Api):
    """An Api that sends its own key instead of the stack's api_key."""

    def __init__(self, stack, key, e2b=False):
        super().__init__(stack)
        self.key = key
        self.e2b = e2b

    def headers(self, auth=True, headers=None):
        h = {}
        if auth:
            h = {"X-API-Key": "e2b_" + self.key} if self.e2b else {"Authorization": f"Bearer {self.key}"}
        h.update(headers or {})
        return h


def add_key(st, name, *opts):
    e = dict(os.environ, NANOBOX_URL=st.url, NANOBOX_API_KEY=st.api_key)
    r = subprocess.run([str(CLI_BIN), "keys", "add", name, *opts, "--config", st.conf_path],
                       capture_output=True, text=True, timeout=60, env=e)
    assert r.returncode == 0, (r.stdout, r.stderr)
    return r.stdout.strip()


@pytest.fixture(scope="module")
def vstack():
    gen = module_stack("volumes", {"volume_size_max": "64m", "volume_size_default": "32m",
                                   "volume_max_count": 3, "volume_quota": "100m"})
    st = next(gen)
    yield st
    purge(st)
    next(gen, None)


def purge(st):
    """What a failed test left on stack st: volumes outlive their stack by design."""
    st.api.cleanup()
    subprocess.run(["docker", "rm", "-fv", *subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label=nanobox.instance={st.instance}"],
        capture_output=True, text=True).stdout.split()], capture_output=True)
    for name in docker_volumes(st):
        subprocess.run(["docker", "volume", "rm", "-f", name], capture_output=True)
    for line in leftovers(st):
        if " ext4 " in line:
            subprocess.run(["umount", "-l", line.split()[4]], capture_output=True)


@pytest.fixture(scope="module")
def keys(vstack):
    keys = {n: add_key(vstack, n) for n in ("alice", "bob")}
    keys["carol"] = add_key(vstack, "carol", "--max-volumes", "1", "--max-volume-bytes", "40m")
    return keys


@pytest.fixture
def tenants(vstack, keys):
    apis = {n: KeyApi(vstack, k) for n, k in keys.items()}
    yield apis
    for a in apis.values():
        a.cleanup()
        for v in volumes(a):
            a.request("DELETE", f"/volumes/{v['name']}")


def err(resp, status):
    """A native error of this status: {error, code}; its code."""
    assert resp.status_code == status, (status, resp.request.method, resp.request.url,
                                        resp.status_code, resp.text[:300])
    body = parse_json(resp)
    assert isinstance(body.get("error"), str) and body.get("code"), body
    return body["code"]


def volumes(a):
    r = a.request("GET", "/volumes")
    assert r.status_code == 200, r.text
    return parse_json(r)["volumes"]


def make_volume(a, name, size=None):
    body = {"name": name}
    if size is not None:
        body["size"] = size
    r = a.request("POST", "/volumes", json=body)
    assert r.status_code == 201, r.text
    return parse_json(r)


def docker_volumes(st):
    out = subprocess.run(["docker", "volume", "ls", "-q", "--filter",
                          f"label=nanobox.instance={st.instance}", "--filter", "label=nanobox.volume"],
                         capture_output=True, text=True, check=True).stdout
    return out.split()


def leftovers(st):
    """Mounts and loop devices of the stack's volume directory."""
    vdir = str(st.dir / "volumes")
    with open("/proc/self/mountinfo") as f:
        mounts = [line for line in f if vdir in line]
    loops = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    return mounts + [line for line in loops.splitlines() if vdir in line]


def test_create_list_get_delete_leaves_nothing(vstack, tenants):
    a = tenants["alice"]
    v = make_volume(a, "data", "48m")
    assert v["name"] == "data" and v["size"] == 48 * MiB and re.fullmatch(r"[0-9a-f]{16}", v["volumeID"])
    assert [x["name"] for x in volumes(a)] == ["data"]
    for key in ("data", v["volumeID"]):
        r = a.request("GET", f"/volumes/{key}")
        assert r.status_code == 200 and parse_json(r)["volumeID"] == v["volumeID"], r.text
    # a Docker named volume of the local driver: whose it is, and never the sweep's label
    name = docker_volumes(vstack)[0]
    info = json.loads(subprocess.run(["docker", "volume", "inspect", name], capture_output=True,
                                     text=True, check=True).stdout)[0]
    labels = info["Labels"]
    assert labels["nanobox.owner"] == "alice" and labels["nanobox.volume"] == "data", labels
    assert "nanobox.sandbox" not in labels
    assert len(leftovers(vstack)) >= 1  # its file system is mounted
    err(a.request("POST", "/volumes", json={"name": "data"}), 409)
    r = a.request("DELETE", "/volumes/data")
    assert r.status_code == 204, r.text
    err(a.request("GET", "/volumes/data"), 404)
    err(a.request("DELETE", "/volumes/data"), 404)
    assert docker_volumes(vstack) == [] and leftovers(vstack) == []
    assert not any(p.name.endswith(".img") for p in (vstack.dir / "volumes").iterdir())


def test_bad_names_and_sizes_are_refused(tenants):
    a = tenants["alice"]
    for name in ("", "-x", ".x", "a/b", "a b", "x" * 64, "..", "ü"):
        err(a.request("POST", "/volumes", json={"name": name}), 400)
    err(a.request("POST", "/volumes", json={"name": "big", "size": "65m"}), 413)
    err(a.request("POST", "/volumes", json={"name": "tiny", "size": "1m"}), 413)
    err(a.request("POST", "/volumes", json={"size": "1m"}), 400)
    assert volumes(a) == []


def test_another_keys_volume_is_simply_not_found(vstack, tenants):
    a, b = tenants["alice"], tenants["bob"]
    v = make_volume(a, "secret")
    sid = a.create(volumes=[{"name": "secret", "path": "/data"}])
    a.exec(sid, "echo alice-only > /data/f")
    for key in ("secret", v["volumeID"]):
        err(b.request("GET", f"/volumes/{key}"), 404)
        err(b.request("DELETE", f"/volumes/{key}"), 404)
        r = b.request("POST", "/sandbox", json={"volumes": [{"name": key, "path": "/data"}]})
        err(r, 404)
    assert volumes(b) == []
    # bob's own "secret" is another volume altogether
    vb = make_volume(b, "secret")
    assert vb["volumeID"] != v["volumeID"]
    sb = b.create(volumes=[{"name": "secret", "path": "/data"}])
    r = b.exec(sb, "test ! -e /data/f && ls -A /data")
    assert r["exit_code"] == 0 and r["stdout"] == "", r
    err(b.request("GET", f"/sandbox/{sid}"), 404)


def test_bad_mount_paths_are_400_and_make_nothing(vstack, tenants):
    a = tenants["alice"]
    make_volume(a, "p")
    before = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=nanobox.instance={vstack.instance}"],
                            capture_output=True, text=True).stdout.split()
    bad = ["data", "/", "/proc", "/proc/x", "/dev/shm", "/sys/fs", "/etc", "/etc/x", "/.nanobox/init",
           "/data/../etc", "/data/./x", "//data", "/data/", "/usr/local/bin", "/tmp", "/workspace",
           "/home", "/run/x", "/a:b", "/a,b", "/x\n"]
    for path in bad:
        r = a.request("POST", "/sandbox", json={"volumes": [{"name": "p", "path": path}]})
        assert err(r, 400) == "bad_path", path
    for vols in ([{"name": "p", "path": "/a"}, {"name": "p", "path": "/a/b"}],
                 [{"name": "p"}], [{"name": "p", "path": "/a", "x": 1}], {"name": "p"},
                 [{"name": "p", "path": f"/v{i}"} for i in range(9)]):
        r = a.request("POST", "/sandbox", json={"volumes": vols})
        assert r.status_code in (400, 422), (vols, r.status_code, r.text)
    after = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=nanobox.instance={vstack.instance}"],
                           capture_output=True, text=True).stdout.split()
    assert sorted(before) == sorted(after)
    assert a.list() == []


def test_shared_by_the_owners_sandboxes_and_kept_after_destroy(tenants):
    a = tenants["alice"]
    make_volume(a, "shared")
    s1 = a.create(volumes=[{"name": "shared", "path": "/data"}])
    s2 = a.create(volumes=[{"name": "shared", "path": "/workspace/data"}])
    u1 = a.exec(s1, "id -u")["stdout"].strip()
    u2 = a.exec(s2, "id -u")["stdout"].strip()
    assert u1 != u2  # each sandbox its own uid
    a.exec(s1, "mkdir -p /data/d && echo one > /data/d/f && umask 077 && echo x > /data/g")
    r = a.exec(s2, "cat /data/d/f 2>&1; cat /workspace/data/d/f && echo two >> /workspace/data/d/f "
                   "&& cat /workspace/data/g && touch /workspace/data/d/new && rm /workspace/data/g")
    assert r["exit_code"] == 0 and r["stdout"].endswith("one\nx\n"), r
    assert a.exec(s1, "cat /data/d/f; ls /data/d")["stdout"] == "one\ntwo\nf\nnew\n"
    # its sandboxes gone, the files stay
    assert a.delete(s1).status_code == 204 and a.delete(s2).status_code == 204
    s3 = a.create(volumes=[{"name": "shared", "path": "/mnt/v"}])
    assert a.exec(s3, "cat /mnt/v/d/f")["stdout"] == "one\ntwo\n"


def test_a_flood_is_enospc_and_the_sandbox_lives(tenants):
    a = tenants["alice"]
    make_volume(a, "small", "16m")
    sid = a.create(volumes=[{"name": "small", "path": "/data"}])
    r = a.exec(sid, "dd if=/dev/zero of=/data/big bs=1M count=64 2>&1; echo rc=$?", timeout=60)
    assert "No space left on device" in r["stdout"] and "rc=1" in r["stdout"], r
    size = int(a.exec(sid, "stat -c %s /data/big")["stdout"])
    assert size <= 16 * MiB
    r = a.exec(sid, "df -k /data | tail -1")
    assert int(r["stdout"].split()[1]) <= 16 * 1024, r
    assert a.exec(sid, "rm /data/big && echo ok > /data/after && cat /data/after")["stdout"] == "ok\n"


def test_delete_while_mounted_is_409(tenants):
    a = tenants["alice"]
    make_volume(a, "busy")
    sid = a.create(volumes=[{"name": "busy", "path": "/data"}])
    err(a.request("DELETE", "/volumes/busy"), 409)
    assert a.exec(sid, "echo still > /data/x && cat /data/x")["stdout"] == "still\n"
    assert a.delete(sid).status_code == 204
    assert a.request("DELETE", "/volumes/busy").status_code == 204


def test_quota_is_429(tenants):
    a = tenants["alice"]
    make_volume(a, "q1", "48m")
    make_volume(a, "q2", "48m")
    err(a.request("POST", "/volumes", json={"name": "q3", "size": "16m"}), 429)  # 100m
    assert a.request("DELETE", "/volumes/q2").status_code == 204
    make_volume(a, "q2", "16m")
    make_volume(a, "q3", "16m")
    err(a.request("POST", "/volumes", json={"name": "q4", "size": "16m"}), 429)  # 3 volumes
    assert volumes(tenants["bob"]) == []
    make_volume(tenants["bob"], "q1")  # bob's quota is his own
    # a key's own quotas (keys file: max_volumes, max_volume_bytes) replace the config's
    c = tenants["carol"]
    r = c.request("POST", "/volumes", json={"name": "c1", "size": "48m"})
    assert err(r, 429) == "quota" and "max_volume_bytes" in r.json()["error"], r.text
    make_volume(c, "c1", "32m")
    r = c.request("POST", "/volumes", json={"name": "c2", "size": "16m"})
    assert err(r, 429) == "quota" and "max_volumes=1" in r.json()["error"], r.text


def test_survives_a_service_restart(vstack, tenants):
    a = tenants["alice"]
    make_volume(a, "keep")
    sid = a.create(volumes=[{"name": "keep", "path": "/data"}])
    a.exec(sid, "echo kept > /data/k")
    assert a.delete(sid).status_code == 204
    vstack.restart()
    assert [v["name"] for v in volumes(a)] == ["keep"]
    sid = a.create(volumes=[{"name": "keep", "path": "/data"}])
    assert a.exec(sid, "cat /data/k")["stdout"] == "kept\n"


def test_a_lost_table_adopts_a_released_sandbox_with_its_volumes(vstack, tenants):
    """A state table lost (or of another layout): a sandbox paused without
    its memory is adopted from its pause image's labels, which name its
    volumes, so its resume mounts them again and they stay in use."""
    a = tenants["alice"]
    make_volume(a, "adopted")
    sid = a.create(ttl=600, volumes=[{"name": "adopted", "path": "/data"}])
    a.exec(sid, "echo kept > /data/k")
    assert a.request("POST", f"/sandbox/{sid}/pause", json={"keep_memory": False}).status_code == 200
    assert vstack.stop_fcgi()
    os.unlink(vstack.state)
    vstack.start_fcgi()
    vstack.wait_healthy()
    nbtest.wait_until(lambda: a.get(sid).status_code == 200, timeout=20, what="the sandbox adopted")
    assert parse_json(a.get(sid))["memory_released"] is True
    assert err(a.request("DELETE", "/volumes/adopted"), 409) == "in_use"
    assert a.request("POST", f"/sandbox/{sid}/resume").status_code == 200
    assert a.exec(sid, "cat /data/k")["stdout"] == "kept\n"
    assert a.delete(sid).status_code == 204
    assert a.request("DELETE", "/volumes/adopted").status_code == 204


def test_remounted_when_its_file_system_was_unmounted(vstack, tenants):
    """As after a reboot: the next create that mounts it mounts it again."""
    a = tenants["alice"]
    v = make_volume(a, "boot")
    sid = a.create(volumes=[{"name": "boot", "path": "/data"}])
    a.exec(sid, "echo b > /data/b")
    assert a.delete(sid).status_code == 204
    d = vstack.dir / "volumes" / v["volumeID"]
    # Docker lets go of its bind (_data) once the container is gone
    nbtest.wait_until(lambda: not any(f"vol-{v['volumeID']}/_data" in line
                                      for line in open("/proc/self/mountinfo")),
                      timeout=10, what="Docker's bind of the volume to go")
    subprocess.run(["umount", str(d)], check=True)
    assert not os.path.ismount(d)
    sid = a.create(volumes=[{"name": "boot", "path": "/data"}])
    r = a.exec(sid, "cat /data/b")
    assert r["stdout"] == "b\n", r
    assert os.path.ismount(d)


def test_e2b_keys_see_the_same_volumes_in_e2bs_shape(vstack, tenants, keys):
    a = tenants["alice"]
    e = KeyApi(vstack, keys["alice"], e2b=True)
    r = e.request("POST", "/volumes", json={"name": "ev"})
    assert r.status_code == 201, r.text
    v = parse_json(r)
    assert set(v) == {"volumeID", "name"} and v["name"] == "ev"
    r = e.request("GET", "/volumes")
    assert r.status_code == 200 and parse_json(r) == [v], r.text
    assert [x["volumeID"] for x in volumes(a)] == [v["volumeID"]]
    r = e.request("GET", f"/volumes/{v['volumeID']}")
    assert r.status_code == 200 and parse_json(r) == v
    r = e.request("GET", "/volumes/nope")
    assert r.status_code == 404 and parse_json(r)["code"] == 404, r.text  # E2B's error shape
    eb = KeyApi(vstack, keys["bob"], e2b=True)
    assert eb.request("GET", f"/volumes/{v['volumeID']}").status_code == 404
    assert eb.request("DELETE", f"/volumes/{v['volumeID']}").status_code == 404
    r = e.request("POST", "/sandboxes", json={"templateID": "base", "timeout": 60,
                                              "volumeMounts": [{"name": "ev", "path": "/mnt/ev"}]})
    assert r.status_code == 201, r.text
    sid = parse_json(r)["sandboxID"]
    a.created.append(sid)
    assert a.exec(sid, "echo e > /mnt/ev/e && cat /mnt/ev/e")["stdout"] == "e\n"
    r = e.request("DELETE", f"/volumes/{v['volumeID']}")
    assert r.status_code == 409 and parse_json(r)["code"] == 409, r.text
    r = eb.request("POST", "/sandboxes", json={"templateID": "base",
                                               "volumeMounts": [{"name": "ev", "path": "/mnt/ev"}]})
    assert r.status_code == 404 and parse_json(r)["code"] == 404, r.text
    assert a.delete(sid).status_code == 204
    assert e.request("DELETE", f"/volumes/{v['volumeID']}").status_code == 204


def cli(st, key, *args, check=True):
    e = dict(os.environ, NANOBOX_URL=st.url, NANOBOX_API_KEY=key)
    r = subprocess.run([str(CLI_BIN), *args], capture_output=True, text=True, timeout=120, env=e)
    if check:
        assert r.returncode == 0, (args, r.returncode, r.stdout, r.stderr)
    return r


def test_the_cli(vstack, tenants, keys):
    a = tenants["alice"]
    assert cli(vstack, keys["alice"], "volume", "create", "cv", "--size", "16m").stdout == "cv\n"
    out = cli(vstack, keys["alice"], "volume", "ls").stdout
    assert re.search(r"^cv\s+[0-9a-f]{16}\s+16", out, re.M), out
    assert cli(vstack, keys["bob"], "volume", "ls").stdout.count("\n") <= 1  # headers only
    sid = cli(vstack, keys["alice"], "create", "--volume", "cv:/data").stdout.strip()
    a.created.append(sid)
    assert a.exec(sid, "echo c > /data/c && cat /data/c")["stdout"] == "c\n"
    r = cli(vstack, keys["alice"], "volume", "rm", "cv", check=False)
    assert r.returncode == 1 and "mounted" in r.stderr, r
    r = cli(vstack, keys["alice"], "create", "--volume", "cv", check=False)
    assert r.returncode == 2, r
    assert a.delete(sid).status_code == 204
    assert cli(vstack, keys["alice"], "volume", "rm", "cv").stdout == "cv\n"


def test_the_mcp_tools(tenants):
    a, b = tenants["alice"], tenants["bob"]

    def session(api):
        r = api.request("POST", "/mcp", headers={"Accept": "application/json, text/event-stream"},
                        json={"jsonrpc": "2.0", "id": 1, "method": "initialize",
                              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                         "clientInfo": {"name": "t", "version": "1"}}})
        assert r.status_code == 200, r.text[:300]
        return r.headers["Mcp-Session-Id"]

    def call(api, sess, name, args):
        r = api.request("POST", "/mcp", headers={"Accept": "application/json, text/event-stream",
                                                 "Mcp-Session-Id": sess},
                        json={"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                              "params": {"name": name, "arguments": args}})
        assert r.status_code == 200, r.text[:300]
        return r.json()["result"]

    sa, sb = session(a), session(b)
    res = call(a, sa, "volume_create", {"name": "mv", "size": "16m"})
    assert not res.get("isError") and res["structuredContent"]["name"] == "mv", res
    res = call(a, sa, "volume_list", {})
    assert [v["name"] for v in res["structuredContent"]["volumes"]] == ["mv"], res
    assert call(b, sb, "volume_list", {})["structuredContent"]["volumes"] == []
    res = call(a, sa, "sandbox_create", {"volumes": [{"name": "mv", "path": "/data"}]})
    assert not res.get("isError"), res
    sid = res["structuredContent"]["sandboxId"]
    a.created.append(sid)
    assert a.exec(sid, "touch /data/x && ls /data")["stdout"] == "x\n"
    res = call(b, sb, "sandbox_create", {"volumes": [{"name": "mv", "path": "/data"}]})
    assert res.get("isError"), res
    assert call(b, sb, "volume_delete", {"name": "mv"}).get("isError")
    res = call(a, sa, "volume_delete", {"name": "mv"})
    assert res.get("isError") and "mounted" in json.dumps(res), res
    assert a.delete(sid).status_code == 204
    res = call(a, sa, "volume_delete", {"name": "mv"})
    assert not res.get("isError") and res["structuredContent"]["deleted"] is True, res


@pytest.mark.parametrize("pin", ["e2b", "e2b-latest"])
def test_the_e2b_sdk(vstack, pin, tmp_path):
    """tests/e2b/volumes.mjs with the pinned and the newest SDK (test_e2b.py's way)."""
    import secrets
    import shutil
    pkg = nbtest.REPO / "tests" / pin
    node = nbtest.node_package(pkg, "e2b")
    d = nbtest.REPO / "tests" / "e2b"
    if pin != "e2b":  # ESM resolves "e2b" next to the script: a copy beside that node_modules
        for f in ("volumes.mjs", "steps.mjs"):
            shutil.copy(d / f, tmp_path / f)
        (tmp_path / "node_modules").symlink_to(pkg / "node_modules", target_is_directory=True)
        d = tmp_path
    env = {k: v for k, v in os.environ.items() if not k.startswith(("E2B_", "NANOBOX_"))}
    env.update(E2B_API_URL=vstack.url, E2B_SANDBOX_URL=vstack.url, E2B_API_KEY=f"e2b_{vstack.api_key}")
    r = subprocess.run([node, str(d / "volumes.mjs"), "--tag", secrets.token_hex(4)], cwd=d, env=env,
                       capture_output=True, text=True, timeout=300)
    lines = [line for line in r.stdout.splitlines() if line.strip()]
    assert r.returncode == 0 and lines, (r.stdout[-3000:], r.stderr[-3000:])
    summary = json.loads(lines[-1])
    for sid in summary["created"]:
        vstack.api.delete(sid)
    s = summary["steps"]
    assert s["create"] == {"name": s["create"]["name"], "idLength": 16}, s
    assert s["list"] == [True] and s["getInfo"]["same"] is True and s["connect"]["name"] == s["create"]["name"], s
    assert s["getInfoUnknown"]["name"] == "VolumeNotFoundError", s
    assert s["destroyUnknown"] == {"destroyed": False}, s
    assert s["createTwice"]["name"] == "VolumeError" and "exists" in s["createTwice"]["message"], s
    assert s["writeThrough"]["w"] == "kept\n", s
    assert s["writeThrough"]["busy"]["name"] == "VolumeError" and "mounted" in s["writeThrough"]["busy"]["message"], s
    assert s["readBack"] == {"r": "kept\n"}, s
    # the SDK's class for a 400 and a 404 of create: its message has E2B's {code, message}
    assert s["badPath"]["message"].startswith("400: ") and "/proc" in s["badPath"]["message"], s
    assert "404" in s["unknownVolume"]["message"] and "no-such-volume" in s["unknownVolume"]["message"], s
    assert "thrown" not in s["destroy"] and s["destroy"] == {"destroyed": True}, s
    assert s["gone"] == 0, s
    # the content API goes to https://api.<E2B_DOMAIN> (or E2B_VOLUME_API_URL): nothing answers there
    assert "thrown" not in s["contentApi"] and s["contentApi"].get("name"), s


def test_a_pause_without_memory_releases_a_sandbox_with_volumes(tenants):
    """Its container goes (its memory with it), the volume stays its: a
    delete of the volume is 409 while it is paused, and the resume mounts
    the same volume at the same path, with what others wrote meanwhile."""
    a = tenants["alice"]
    make_volume(a, "pz")
    sid = a.create(volumes=[{"name": "pz", "path": "/data"}])
    a.exec(sid, "echo before > /data/p && echo ws > /workspace/w")
    r = a.request("POST", f"/sandbox/{sid}/pause", json={"keep_memory": False})
    assert r.status_code == 200, r.text
    body = parse_json(r)
    assert body["state"] == "paused" and body["memory_released"] is True, body
    assert subprocess.run(["docker", "inspect", f"nanobox-{sid}"], capture_output=True).returncode != 0
    assert err(a.request("DELETE", "/volumes/pz"), 409) == "in_use"
    other = a.create(volumes=[{"name": "pz", "path": "/mnt/pz"}])
    a.exec(other, "echo meanwhile > /mnt/pz/m")
    assert a.delete(other).status_code == 204
    assert err(a.request("DELETE", "/volumes/pz"), 409) == "in_use"  # still the paused one's
    assert a.request("POST", f"/sandbox/{sid}/resume").status_code == 200
    r = a.exec(sid, "cat /data/p /data/m /workspace/w && echo again > /data/a")
    assert r["stdout"] == "before\nmeanwhile\nws\n", r
    # twice: the resumed container's label names the volumes again
    assert a.request("POST", f"/sandbox/{sid}/pause", json={"keep_memory": False}).status_code == 200
    assert a.request("POST", f"/sandbox/{sid}/resume").status_code == 200
    assert a.exec(sid, "cat /data/a")["stdout"] == "again\n"
    assert a.delete(sid).status_code == 204
    assert a.request("DELETE", "/volumes/pz").status_code == 204


def test_a_fork_mounts_the_parents_volumes(tenants):
    """A volume is shared storage: each fork mounts the parent's volumes at
    the same paths (the same volume, not a copy), and holds them in use."""
    a = tenants["alice"]
    make_volume(a, "fv")
    make_volume(a, "fw", "16m")
    sid = a.create(volumes=[{"name": "fv", "path": "/data"}, {"name": "fw", "path": "/workspace/w2"}])
    a.exec(sid, "echo shared > /data/s && echo own > /workspace/own && echo in-w2 > /workspace/w2/x")
    r = a.request("POST", f"/sandbox/{sid}/fork", json={"count": 2}, timeout=300)
    assert r.status_code == 201, r.text
    kids = [k["sandboxId"] for k in parse_json(r)["sandboxes"]]
    a.created.extend(kids)
    for k in kids:
        res = a.exec(k, "cat /data/s /workspace/own /workspace/w2/x")
        assert res["stdout"] == "shared\nown\nin-w2\n", res
        mounts = json.loads(subprocess.run(["docker", "inspect", "-f", "{{json .Mounts}}", f"nanobox-{k}"],
                                           capture_output=True, text=True, check=True).stdout)
        named = sorted((m["Destination"], m.get("Name", "").split("-vol-")[-1])
                       for m in mounts if m["Type"] == "volume" and "-vol-" in m.get("Name", ""))
        assert [d for d, _ in named] == ["/data", "/workspace/w2"], mounts
    a.exec(kids[0], "echo from-fork > /data/f")
    assert a.exec(sid, "cat /data/f")["stdout"] == "from-fork\n"
    assert a.exec(kids[1], "cat /data/f")["stdout"] == "from-fork\n"
    # the parent gone, its forks still hold the volume
    assert a.delete(sid).status_code == 204
    assert err(a.request("DELETE", "/volumes/fv"), 409) == "in_use"
    for k in kids:
        assert a.delete(k).status_code == 204
    assert a.request("DELETE", "/volumes/fv").status_code == 204
