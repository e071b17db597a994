"""A pause that releases the memory (docs/API.md, "Pause and resume",
{"keep_memory": false}): the sandbox's files (workspace, /tmp) are saved
as its pause image by the snapshot engine, its container is removed, and
its slot stays paused with "memory_released": true; a resume boots a new
container from the files under the same id. Processes do not survive (no
CRIU). The idle pause (idle_pause) pauses that way after idle seconds.

Checked from outside: Docker's containers and images (label
nanobox.paused), /metrics, and the sandbox's own view after a resume."""

import os
import subprocess
import time

import pytest

from nbtest import assert_error, docker_exists, parse_json, random_uuid, wait_until
from test_keys import tenants  # noqa: F401 - a fixture


def pause(api, sid, **body):
    return api.request("POST", f"/sandbox/{sid}/pause", json=body or None)


def resume(api, sid):
    return api.request("POST", f"/sandbox/{sid}/resume")


def ok(r):
    assert r.status_code == 200, f"{r.request.method} {r.request.url} -> {r.status_code} {r.text}"
    return parse_json(r)


def pause_images(sid):
    """The ids of the images Docker holds for sandbox sid's pause."""
    out = subprocess.run(["docker", "images", "-q", "--filter", f"label=nanobox.paused={sid}"],
                         capture_output=True, text=True, check=True).stdout
    return out.split()


def containers_of(sid):
    out = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=nanobox.sandbox={sid}"],
                         capture_output=True, text=True, check=True).stdout
    return out.split()


def metric(api, name, labels):
    text = api.request("GET", "/metrics").text
    for line in text.splitlines():
        if line.startswith(name + "{" + labels + "}"):
            return float(line.split()[-1])
    raise AssertionError(f"{name}{{{labels}}} not in /metrics")


def test_pause_without_memory_keeps_files_env_and_metadata(api):
    info = api.create_info(ttl=600, env={"GREETING": "hello"}, metadata={"who": "me"})
    sid = info["sandboxId"]
    assert info["pause_keep_memory"] is True and info["idle_pause"] == 0, info
    res = api.exec(sid, "mkdir -p /workspace/d && echo kept > /workspace/d/f && "
                        "echo tmp > /tmp/t && ln -s d/f /workspace/link && "
                        "setsid nohup sleep 1000 >/dev/null 2>&1 </dev/null & echo started")
    assert res["exit_code"] == 0, res
    got = ok(pause(api, sid, keep_memory=False))
    assert got["state"] == "paused" and got["memory_released"] is True, got
    left = got["ttl_remaining"]
    # no container, one pause image
    assert containers_of(sid) == []
    assert len(pause_images(sid)) == 1
    again = parse_json(api.get(sid))
    assert again["state"] == "paused" and again["memory_released"] is True, again
    assert again["metadata"] == {"who": "me"} and again["owner"] == info["owner"], again
    # a call that needs the processes: 409 paused (no auto_resume)
    assert_error(api.exec_raw(sid, "true"), 409, "paused")
    # pausing it again changes nothing, with or without memory
    assert ok(pause(api, sid))["memory_released"] is True
    assert ok(pause(api, sid, keep_memory=False))["memory_released"] is True
    # resume: a new container, the same id, its files back; the sleep is gone
    after = ok(resume(api, sid))
    assert after["state"] == "running" and after["sandboxId"] == sid, after
    assert left - 2 <= after["ttl_remaining"] <= left, after
    assert len(containers_of(sid)) == 1
    res = api.exec(sid, "cat /workspace/d/f /tmp/t; readlink /workspace/link; echo $GREETING; "
                        "stat -c %U /workspace/d/f; pgrep -x sleep || echo nosleep")
    out = res["stdout"].split("\n")
    assert out[:4] == ["kept", "tmp", "d/f", "hello"] and out[5:] == ["nosleep", ""], res
    assert out[4] not in ("root", "UNKNOWN"), res  # owned by the sandbox's own user
    # it runs as before: writes, a second pause and resume
    api.exec(sid, "echo second > /workspace/g")
    ok(pause(api, sid, keep_memory=False))
    assert len(pause_images(sid)) == 1  # the first one went with its container
    ok(resume(api, sid))
    assert api.exec(sid, "cat /workspace/g /workspace/d/f")["stdout"] == "second\nkept\n"
    # destroyed: nothing left, container or image
    assert api.delete(sid).status_code == 204
    assert containers_of(sid) == [] and pause_images(sid) == []


def test_a_released_sandbox_is_destroyed_with_its_image(api):
    sid = api.create(ttl=600)
    ok(pause(api, sid, keep_memory=False))
    assert len(pause_images(sid)) == 1
    assert api.delete(sid).status_code == 204
    assert containers_of(sid) == [] and pause_images(sid) == []
    assert not docker_exists(f"nanobox-{sid}")
    assert_error(api.get(sid), 404, "not_found")


def test_auto_resume_boots_a_released_sandbox_on_the_next_call(api):
    sid = api.create(ttl=600, auto_resume=True)
    api.exec(sid, "echo awake > /workspace/f")
    ok(pause(api, sid, keep_memory=False))
    assert containers_of(sid) == []
    assert api.exec(sid, "cat /workspace/f")["stdout"] == "awake\n"
    got = parse_json(api.get(sid))
    assert got["state"] == "running" and "memory_released" not in got, got


def test_metrics_show_paused_sandboxes_and_their_memory(api):
    kept0 = metric(api, "nanobox_paused_sandboxes", 'memory="kept"')
    rel0 = metric(api, "nanobox_paused_sandboxes", 'memory="released"')
    a = api.create(ttl=600)
    b = api.create(ttl=600)
    api.exec(a, "head -c 20000000 /dev/zero > /tmp/z")  # some memory: tmpfs pages
    ok(pause(api, a))
    ok(pause(api, b, keep_memory=False))
    assert metric(api, "nanobox_paused_sandboxes", 'memory="kept"') >= kept0 + 1
    assert metric(api, "nanobox_paused_sandboxes", 'memory="released"') >= rel0 + 1
    assert metric(api, "nanobox_paused_memory_bytes", 'memory="kept"') >= 20e6
    assert metric(api, "nanobox_paused_memory_bytes", 'memory="released"') == 0


def test_a_save_over_snapshot_max_leaves_it_running(make_stack):
    st = make_stack("pausecoldmax", snapshot_max="1m")
    api = st.api
    sid = api.create(ttl=600)
    api.exec(sid, "echo small > /workspace/s; head -c 3000000 /dev/urandom > /workspace/flood")
    r = pause(api, sid, keep_memory=False)
    body = assert_error(r, 413, "too_large")
    assert "snapshot_max" in body["error"], body
    got = parse_json(api.get(sid))
    assert got["state"] == "running", got
    assert api.exec(sid, "cat /workspace/s")["stdout"] == "small\n"  # thawed, working
    assert pause_images(sid) == []
    # without the flood it pauses
    api.exec(sid, "rm /workspace/flood")
    ok(pause(api, sid, keep_memory=False))
    assert api.delete(sid).status_code == 204
    assert containers_of(sid) == [] and pause_images(sid) == []


def test_another_keys_sandbox_cannot_be_paused_or_resumed(tenants):  # noqa: F811
    st, k = tenants
    sid = k["alice"].create(ttl=600)
    for body in ({"keep_memory": False}, {}):
        assert_error(k["bob"].request("POST", f"/sandbox/{sid}/pause", json=body), 404,
                     "not_found")
    assert parse_json(k["alice"].get(sid))["state"] == "running"
    ok(pause(k["alice"], sid, keep_memory=False))
    assert_error(k["bob"].request("POST", f"/sandbox/{sid}/resume"), 404, "not_found")
    assert_error(k["bob"].request("DELETE", f"/sandbox/{sid}"), 404, "not_found")
    got = parse_json(k["alice"].get(sid))
    assert got["state"] == "paused" and got["memory_released"] is True, got


def test_keep_memory_must_be_a_boolean(api):
    sid = api.create()
    for bad in ("no", 0, None, [False]):
        assert_error(pause(api, sid, keep_memory=bad), 400, "bad_field")
    assert parse_json(api.get(sid))["state"] == "running"
    for bad in (5, -1, "60", True):
        r = api.request("POST", "/sandbox", json={"idle_pause": bad})
        assert r.status_code in (400, 422), r.text


def test_on_timeout_pause_without_memory(api):
    sid = api.create(ttl=2, on_timeout="pause", pause_keep_memory=False)
    api.exec(sid, "echo kept > /workspace/f")
    wait_until(lambda: parse_json(api.get(sid)).get("memory_released") is True, timeout=20,
               what="the sandbox paused without memory at its TTL")
    # the slot forgets the container first, then it goes
    wait_until(lambda: containers_of(sid) == [], timeout=15, what="its container removed")
    got = ok(resume(api, sid))
    assert got["ttl_remaining"] >= 590, got  # default_ttl: its own was spent
    assert api.exec(sid, "cat /workspace/f")["stdout"] == "kept\n"


def test_idle_sandboxes_are_paused_without_memory(make_stack):
    st = make_stack("idlepause", idle_pause=3)
    api = st.api
    never = api.create(ttl=600, idle_pause=0)
    idle = api.create_info(ttl=600)
    assert idle["idle_pause"] == 3, idle
    api.exec(idle["sandboxId"], "echo mine > /workspace/f")  # before its 3 s pass
    busy = api.create(ttl=600)
    # calls naming busy keep it awake while idle's 3 s pass and the reaper
    # pauses it (a docker commit: seconds on a loaded machine); the list
    # names no sandbox, so reading it keeps none awake
    def state_of(sid):
        rows = parse_json(api.request("GET", "/sandbox"))["sandboxes"]
        return next(r["state"] for r in rows if r["sandboxId"] == sid)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 90:
        assert api.get(busy).status_code == 200
        if state_of(idle["sandboxId"]) == "paused" and time.monotonic() - t0 > 6:
            break
        time.sleep(0.5)
    got = parse_json(api.get(idle["sandboxId"]))
    assert got["state"] == "paused" and got["memory_released"] is True, got
    assert parse_json(api.get(busy))["state"] == "running"
    assert parse_json(api.get(never))["state"] == "running"
    assert_error(api.exec_raw(idle["sandboxId"], "true"), 409, "paused")
    ok(resume(api, idle["sandboxId"]))
    assert api.exec(idle["sandboxId"], "cat /workspace/f")["stdout"] == "mine\n"


def test_a_released_sandbox_survives_a_restart_and_max_pause(make_stack):
    st = make_stack("pausecoldrestart", max_pause=8)
    api = st.api
    sid = api.create(ttl=600)
    api.exec(sid, "echo kept > /workspace/f")
    ok(pause(api, sid, keep_memory=False))
    st.restart()
    time.sleep(1.5)  # the start-up reconciliation: no container, and it is kept
    got = parse_json(api.get(sid))
    assert got["state"] == "paused" and got["memory_released"] is True, got
    ok(resume(api, sid))
    assert api.exec(sid, "cat /workspace/f")["stdout"] == "kept\n"
    # max_pause still applies: destroyed, image and all
    ok(pause(api, sid, keep_memory=False))
    wait_until(lambda: api.get(sid).status_code == 404, timeout=30,
               what="the released sandbox destroyed at its pause TTL")
    wait_until(lambda: pause_images(sid) == [], timeout=15, what="its pause image removed")
    assert containers_of(sid) == []


@pytest.mark.parametrize("keep", [True, False])
def test_a_snapshot_of_a_released_sandbox_is_409(api, keep):
    sid = api.create(ttl=600)
    ok(pause(api, sid, keep_memory=keep))
    r = api.request("POST", f"/sandbox/{sid}/snapshot", json={})
    if keep:
        assert r.status_code == 201, r.text
        api.request("DELETE", f"/templates/{parse_json(r)['name']}")
    else:
        assert_error(r, 409, "paused")


def test_reconciliation_removes_pause_images_no_sandbox_uses(make_stack):
    """A pause image whose sandbox is gone (its table lost, or removed while
    nanobox was down) is removed by the next reconciliation; one in use stays."""
    st = make_stack("pausesweep")
    api = st.api
    sid = api.create(ttl=600)
    ok(pause(api, sid, keep_memory=False))
    ghost = random_uuid()
    subprocess.run(["docker", "build", "-q", "-t", f"nanobox-pause-{st.instance}:{ghost}",
                    "--label", f"nanobox.instance={st.instance}", "--label", "nanobox.kind=pause",
                    "--label", f"nanobox.paused={ghost}", "-"],
                   input="FROM nanobox:latest\n", text=True, check=True, capture_output=True)
    try:
        assert len(pause_images(ghost)) == 1
        st.restart()  # the start-up reconciliation
        wait_until(lambda: pause_images(ghost) == [], timeout=20, what="the orphan image removed")
        assert len(pause_images(sid)) == 1  # its sandbox's stays
        ok(resume(api, sid))
    finally:
        subprocess.run(["docker", "rmi", "-f", f"nanobox-pause-{st.instance}:{ghost}"],
                       capture_output=True)


def test_a_roots_writes_into_its_image_survive_two_pauses(make_stack):
    """A sandbox with a root (root_templates): what root wrote into the image
    comes back after a pause without memory, and after a second one that
    wrote more (the second save builds on the first pause's image)."""
    st = make_stack("pausecoldroot", root_templates="nanobox")
    api = st.api
    sid = api.create(ttl=600)
    assert api.exec(sid, "sudo sh -c 'echo one > /opt/one && rm /etc/debian_version'")["exit_code"] == 0
    api.exec(sid, "echo ws > /workspace/w")
    ok(pause(api, sid, keep_memory=False))
    ok(resume(api, sid))
    res = api.exec(sid, "cat /opt/one /workspace/w; test -e /etc/debian_version || echo gone")
    assert res["stdout"] == "one\nws\ngone\n", res
    assert api.exec(sid, "sudo sh -c 'echo two > /opt/two'")["exit_code"] == 0
    ok(pause(api, sid, keep_memory=False))
    ok(resume(api, sid))
    res = api.exec(sid, "cat /opt/one /opt/two /workspace/w; test -e /etc/debian_version || echo gone")
    assert res["stdout"] == "one\ntwo\nws\ngone\n", res
    assert api.delete(sid).status_code == 204
    assert containers_of(sid) == [] and pause_images(sid) == []


def test_concurrent_calls_boot_one_container(api):
    """Calls that auto-resume a released sandbox at once: one boots it, the
    others wait for that resume (no second container); a destroy meanwhile
    leaves nothing."""
    from concurrent.futures import ThreadPoolExecutor
    sid = api.create(ttl=600, auto_resume=True)
    api.exec(sid, "echo once > /workspace/f")
    ok(pause(api, sid, keep_memory=False))
    with ThreadPoolExecutor(4) as ex:
        outs = list(ex.map(lambda _: api.exec(sid, "cat /workspace/f")["stdout"], range(4)))
    assert outs == ["once\n"] * 4, outs
    assert len(containers_of(sid)) == 1
    # a pause and a destroy at once: whichever wins, nothing is left
    with ThreadPoolExecutor(2) as ex:
        p = ex.submit(pause, api, sid, keep_memory=False)
        time.sleep(0.05)
        d = ex.submit(api.delete, sid)
        assert p.result().status_code in (200, 404) and d.result().status_code in (204, 404)
    wait_until(lambda: api.get(sid).status_code == 404, timeout=20, what="the sandbox gone")
    wait_until(lambda: containers_of(sid) == [] and pause_images(sid) == [], timeout=20,
               what="its container and image gone")


def test_a_released_sandbox_is_adopted_by_a_fresh_table(make_stack):
    """A state table of another layout (an upgrade) or lost: a sandbox paused
    without its memory has no container to adopt from; its pause image
    carries its labels and its lease its TTLs, so it is adopted paused."""
    st = make_stack("pausecoldadopt")
    api = st.api
    sid = api.create(ttl=800, metadata={"k": "v"}, auto_resume=True)
    api.exec(sid, "echo adopted > /workspace/f")
    before = ok(pause(api, sid, keep_memory=False))
    assert st.stop_fcgi()
    os.unlink(st.state)  # lost: a fresh table, adoption pending
    st.start_fcgi()
    st.wait_healthy()
    wait_until(lambda: api.get(sid).status_code == 200, timeout=20, what="the sandbox adopted")
    after = parse_json(api.get(sid))
    assert after["state"] == "paused" and after["memory_released"] is True, after
    for k in ("ttl_remaining", "pause_expires_at", "metadata", "owner", "auto_resume", "memory"):
        assert after[k] == before[k], (k, before, after)
    assert len(pause_images(sid)) == 1  # kept, not swept
    assert api.exec(sid, "cat /workspace/f")["stdout"] == "adopted\n"  # auto_resume boots it
    assert api.delete(sid).status_code == 204
    assert containers_of(sid) == [] and pause_images(sid) == []
