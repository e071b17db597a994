"""Create, inspect, list, extend and delete sandboxes; what Docker really got."""

import os
import time

import pytest

import nbtest
from nbtest import (DEFAULT_MEMORY, DEFAULT_NANO_CPUS, DEFAULT_PIDS, UUID_RE, assert_error,
                    docker_exists, docker_inspect, docker_ps, parse_json, wait_until)


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def test_healthz_answers_ok_without_auth(api):
    r = api.request("GET", "/healthz", auth=False)
    assert r.status_code == 200, r.text
    body = parse_json(r)
    assert body["status"] == "ok"
    if "docker" in body:
        assert body["docker"] is True


def test_create_with_no_body_applies_defaults(api, stack):
    before = time.time()
    r = api.request("POST", "/sandbox", timeout=120)
    assert r.status_code == 201, r.text
    info = parse_json(r)
    api.created.append(info["sandboxId"])
    assert UUID_RE.match(info["sandboxId"]), info
    assert info["status"] == "running"
    assert info["image"] == "nanobox:latest"
    assert info["ttl"] == 600
    assert info["memory"] == DEFAULT_MEMORY
    assert info["cpus"] == 0.5
    assert info["pids"] == DEFAULT_PIDS
    assert info["network"] == "none"
    assert info["metadata"] == {}
    assert is_int(info["created_at"]) and is_int(info["expires_at"]), info
    assert int(before) - 1 <= info["created_at"] <= time.time() + 1
    assert info["expires_at"] == info["created_at"] + 600
    assert docker_ps(stack.instance, sandbox=info["sandboxId"]) == [f"nanobox-{info['sandboxId']}"]


def test_create_with_empty_object_is_accepted(api):
    info = api.create_info()  # sends "{}"
    assert info["status"] == "running"
    assert info["ttl"] == 600


# What holds in every image nanobox ships, the python template included.
@pytest.mark.parametrize("image", nbtest.every_image())
def test_container_is_hardened(api, stack, image):
    info = api.create_info(image=image)
    sid = info["sandboxId"]
    c = docker_inspect(f"nanobox-{sid}")
    hc, cfg = c["HostConfig"], c["Config"]
    assert c["State"]["Running"] is True
    assert info["image"] == cfg["Image"] == image
    assert [x.upper() for x in hc["CapDrop"] or []] in (["ALL"], ["CAP_ALL"]), hc["CapDrop"]
    assert not hc.get("CapAdd"), hc.get("CapAdd")
    assert hc["Privileged"] is False
    assert any(o.startswith("no-new-privileges") and not o.endswith("false")
               for o in hc["SecurityOpt"] or []), hc["SecurityOpt"]
    assert hc["Memory"] == DEFAULT_MEMORY
    assert hc["MemorySwap"] == DEFAULT_MEMORY
    if hc.get("NanoCpus"):
        assert hc["NanoCpus"] == DEFAULT_NANO_CPUS
    else:
        assert hc["CpuQuota"] / hc["CpuPeriod"] == 0.5, (hc["CpuQuota"], hc["CpuPeriod"])
    assert hc["PidsLimit"] == DEFAULT_PIDS
    assert hc["ReadonlyRootfs"] is True
    tmpfs = dict(hc.get("Tmpfs") or {})
    for m in hc.get("Mounts") or []:
        if m.get("Type") == "tmpfs":
            size = (m.get("TmpfsOptions") or {}).get("SizeBytes")
            tmpfs[m["Target"]] = f"size={size}" if size else ""
    assert "/tmp" in tmpfs and "/workspace" in tmpfs, tmpfs
    assert "size=" in tmpfs["/tmp"] and "size=" in tmpfs["/workspace"], f"tmpfs not size-capped: {tmpfs}"
    assert hc["NetworkMode"] == "none"
    uid, gid = cfg["User"].split(":")  # the slot's own: sandbox_uid_base + slot
    assert int(uid) >= 200000 and gid == uid, cfg["User"]
    labels = cfg["Labels"]
    assert labels["nanobox.instance"] == stack.instance
    assert labels["nanobox.sandbox"] == sid
    assert labels["nanobox.expires"] == str(info["expires_at"])
    assert c["Name"] == f"/nanobox-{sid}"


@pytest.mark.parametrize("image", nbtest.every_image())
def test_sandbox_process_has_no_capabilities_and_no_new_privs(api, image):
    sid = api.create(image=image)
    out = api.exec(sid, "grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs):' /proc/self/status")["stdout"]
    fields = dict(line.split(":\t") for line in out.strip().splitlines())
    assert int(fields["CapEff"], 16) == 0, out
    assert int(fields["CapPrm"], 16) == 0, out
    assert int(fields["CapBnd"], 16) == 0, out
    assert fields["NoNewPrivs"].strip() == "1", out


def test_sandbox_has_no_network_but_loopback(api):
    sid = api.create()
    res = api.exec(sid, "ls /sys/class/net")
    assert res["exit_code"] == 0, res
    assert res["stdout"].split() == ["lo"], res


def test_create_narrows_limits(api):
    info = api.create_info(memory="128m", cpus=0.25, pids=64, ttl=120)
    assert info["memory"] == 128 * 1024 * 1024
    assert info["cpus"] == 0.25
    assert info["pids"] == 64
    assert info["ttl"] == 120
    assert info["expires_at"] == info["created_at"] + 120
    hc = docker_inspect(f"nanobox-{info['sandboxId']}")["HostConfig"]
    assert hc["Memory"] == hc["MemorySwap"] == 128 * 1024 * 1024
    if hc.get("NanoCpus"):
        assert hc["NanoCpus"] == 250_000_000
    assert hc["PidsLimit"] == 64


def test_create_accepts_memory_in_bytes(api):
    info = api.create_info(memory=64 * 1024 * 1024)
    assert info["memory"] == 64 * 1024 * 1024
    hc = docker_inspect(f"nanobox-{info['sandboxId']}")["HostConfig"]
    assert hc["Memory"] == 64 * 1024 * 1024


def test_create_env_is_visible_to_commands(api):
    sid = api.create(env={"FOO": "bar baz", "EMPTY": ""})
    res = api.exec(sid, 'printf "%s|%s|%s" "$FOO" "${EMPTY-unset}" "$(id -un)"')
    assert res["stdout"] == "bar baz||sandbox", res


def test_create_stores_metadata(api):
    info = api.create_info(metadata={"owner": "alice", "purpose": "ünïcode ✓"})
    assert info["metadata"] == {"owner": "alice", "purpose": "ünïcode ✓"}
    got = parse_json(api.get(info["sandboxId"]))
    assert got["metadata"] == {"owner": "alice", "purpose": "ünïcode ✓"}


def test_get_returns_info_with_ttl_remaining(api):
    info = api.create_info(ttl=300, metadata={"k": "v"})
    sid = info["sandboxId"]
    r = api.get(sid)
    assert r.status_code == 200, r.text
    got = parse_json(r)
    assert got["sandboxId"] == sid
    assert got["status"] == "running"
    for k in ("image", "created_at", "expires_at", "memory", "cpus", "pids", "network", "metadata"):
        assert got[k] == info[k], (k, got[k], info[k])
    assert is_int(got["ttl_remaining"])
    assert 290 <= got["ttl_remaining"] <= 300, got


def test_list_shows_created_sandboxes(api):
    a, b = api.create(), api.create()
    ids = api.list_ids()
    assert a in ids and b in ids
    entry = next(s for s in api.list() if s["sandboxId"] == a)
    assert entry["status"] == "running" and entry["image"] == "nanobox:latest"


def test_list_filters_by_metadata(api):
    tag = nbtest.random_uuid()[:8]
    a = api.create(metadata={"run": tag, "owner": "alice"})
    b = api.create(metadata={"run": tag, "owner": "bob"})
    c = api.create(metadata={"owner": "alice"})
    assert api.list_ids(f"?metadata.run={tag}") == sorted([a, b])
    assert api.list_ids(f"?metadata.run={tag}&metadata.owner=alice") == [a]
    assert api.list_ids(f"?metadata.run={tag}&metadata.owner=carol") == []
    assert c in api.list_ids("?metadata.owner=alice")
    assert api.list_ids(f"?metadata.nosuchkey={tag}") == []


def test_delete_removes_the_container(api, stack):
    sid = api.create()
    name = f"nanobox-{sid}"
    assert docker_exists(name)
    r = api.delete(sid)
    assert r.status_code == 204, r.text
    assert r.content == b""
    assert not docker_exists(name), "container still exists after DELETE answered 204"
    assert docker_ps(stack.instance, sandbox=sid) == []
    assert_error(api.get(sid), 404, "not_found")
    assert sid not in api.list_ids()


REMOVE_LOCK = "/run/lock/nanobox-docker-remove.lock"


def test_removals_wait_for_the_hosts_removal_lock(api, stack):
    """Container removals take turns host-wide: Docker 20.10.24 deadlocks
    when two containers of one network leave it at once (docker.c,
    remove_lock). While another process holds the lock, a DELETE waits and
    the container stays; once it is let go, the DELETE answers 204 and the
    container is gone."""
    import fcntl
    import threading
    sid = api.create()
    name = f"nanobox-{sid}"
    answer = {}
    with open(REMOVE_LOCK, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            t = threading.Thread(target=lambda: answer.update(r=api.delete(sid)))
            t.start()
            t.join(0.5)
            assert "r" not in answer, "DELETE answered while another process held the removal lock"
            assert docker_exists(name), "the container was removed without the lock"
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
    t.join(60)
    assert answer["r"].status_code == 204, answer["r"].text
    assert not docker_exists(name)


def test_delete_twice_is_404(api):
    sid = api.create()
    assert api.delete(sid).status_code == 204
    assert_error(api.delete(sid), 404, "not_found")


def test_exec_on_deleted_sandbox_is_404(api):
    sid = api.create()
    assert api.delete(sid).status_code == 204
    assert_error(api.exec_raw(sid, "true"), 404, "not_found")


def test_extend_sets_expires_at_from_now(api):
    info = api.create_info(ttl=60)
    sid = info["sandboxId"]
    r = api.request("POST", f"/sandbox/{sid}/timeout", json={"ttl": 1800})
    now = time.time()
    assert r.status_code == 200, r.text
    body = parse_json(r)
    assert body["sandboxId"] == sid
    assert is_int(body["expires_at"])
    assert abs(body["expires_at"] - (now + 1800)) <= 2, (body, now)
    got = parse_json(api.get(sid))
    assert got["expires_at"] == body["expires_at"]
    assert 1795 <= got["ttl_remaining"] <= 1800


def test_extend_can_shorten(api):
    sid = api.create(ttl=600)
    r = api.request("POST", f"/sandbox/{sid}/timeout", json={"ttl": 100})
    assert r.status_code == 200, r.text
    assert abs(parse_json(r)["expires_at"] - (time.time() + 100)) <= 2


def test_full_table_answers_503_and_frees_on_delete(make_stack):
    st = make_stack("small", max_sandboxes=2)
    api = st.api
    a = api.create()
    api.create()
    r = api.request("POST", "/sandbox", json={}, timeout=120)
    assert_error(r, 503, "capacity")
    assert len(docker_ps(st.instance)) == 2, docker_ps(st.instance)
    assert len(api.list()) == 2
    assert api.delete(a).status_code == 204
    c = api.create()
    assert sorted(api.list_ids()) == sorted(set(api.created) - {a})
    assert c in api.list_ids()


def test_docker_unreachable_is_503_and_service_stays_up(make_stack):
    st = make_stack("nodocker", docker_socket="/nonexistent.sock")
    api = st.api
    for _ in range(3):
        r = api.request("POST", "/sandbox", json={}, timeout=60)
        assert_error(r, 503, "docker_unavailable")
    h = api.request("GET", "/healthz", auth=False)
    assert h.status_code == 200, h.text
    assert parse_json(h).get("docker") is False, h.text
    r = api.request("GET", "/sandbox")
    assert r.status_code in (200, 503), r.text
    if r.status_code == 200:
        assert parse_json(r)["sandboxes"] == []
    else:
        assert_error(r, 503, "docker_unavailable")
    assert_error(api.request("GET", f"/sandbox/{nbtest.random_uuid()}"), (404, 503),
                 ("not_found", "docker_unavailable"))
    assert api.request("GET", "/healthz", auth=False).status_code == 200
    assert docker_ps(st.instance) == []
    assert st.proc.poll() is None
    wait_until(lambda: len(st.children()) >= 2, 5, what="workers still alive")


def test_list_filter_values_are_url_decoded(api):
    tag = nbtest.random_uuid()[:8]
    a = api.create(metadata={"run": tag, "who": "a b&c=d/é"})
    api.create(metadata={"run": tag, "who": "other"})
    from urllib.parse import quote
    assert api.list_ids(f"?metadata.run={tag}&metadata.who={quote('a b&c=d/é', safe='')}") == [a]


def test_sandbox_removed_behind_the_service_answers_cleanly(api, stack):
    """A container removed with `docker rm -f` behind nanobox's back: exec
    answers a JSON error (no crash), DELETE frees the slot."""
    sid = api.create()
    nbtest.run(["docker", "rm", "-fv", f"nanobox-{sid}"])
    r = api.exec_raw(sid, "echo hi")
    assert r.status_code != 200, r.text
    assert_error(r, (404, 409, 410, 502, 503), ("not_found", "docker_error", "conflict", "gone", "not_running",
                                                "docker_unavailable"))
    r = api.delete(sid)
    assert r.status_code in (204, 404), r.text
    assert_error(api.get(sid), 404, "not_found")
    assert sid not in api.list_ids()


def test_stopped_container_exec_answers_cleanly(api):
    sid = api.create()
    nbtest.run(["docker", "kill", f"nanobox-{sid}"])
    r = api.exec_raw(sid, "echo hi")
    assert r.status_code != 200 or parse_json(r)["exit_code"] != 0, r.text
    if r.status_code != 200:
        assert_error(r, (404, 409, 410, 502, 503), ("not_found", "docker_error", "conflict", "gone", "not_running",
                                                    "docker_unavailable"))
    assert api.delete(sid).status_code in (204, 404)
    # a 404: the events follower took the dead container first, and its
    # removal may still be under way when the answer comes
    wait_until(lambda: not docker_exists(f"nanobox-{sid}"), 10, what="the killed container to go")


def test_runs_under_spawn_fcgi_with_the_socket_on_fd_0(make_stack):
    st = make_stack("spawnfcgi", spawn_fcgi=True)
    # the master is nanobox-fcgi itself (spawn-fcgi -n execs in place) and
    # serves on the socket it inherited
    with open(f"/proc/{st.master_pid}/comm") as f:
        assert f.read().strip() == "nanobox-fcgi"
    assert os.readlink(f"/proc/{st.master_pid}/fd/0").startswith("socket:")
    sid = st.api.create()
    out = st.api.exec(sid, "echo spawned")
    assert out["exit_code"] == 0 and out["output"] == "spawned\n"
    r = st.api.request("DELETE", f"/sandbox/{sid}")
    assert r.status_code == 204
