"""E2B's pause without memory (docs/E2B.md): the official SDKs (pinned and
newest) pause a sandbox with pause({keepMemory: false}) and create one
whose timeout pauses it that way (lifecycle.onTimeout {action: 'pause',
keepMemory: false}); nanobox saves its files, removes its container, and
boots a new one from the files on connect. tests/e2b/pausecold.mjs."""

import subprocess

import pytest

from test_e2b import e2b, e2b_error, e2b_latest, e2b_sdk, sdk, sdk_script, step, thrown  # noqa: F401


@pytest.fixture(scope="module")
def pauserun(stack, sdk):  # noqa: F811
    summary = sdk_script(stack, sdk, "pausecold.mjs", "e2bpc-")
    yield summary
    for sid in summary["created"]:
        stack.api.delete(sid)


def leftovers(sid):
    ps = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=nanobox.sandbox={sid}"],
                        capture_output=True, text=True, check=True).stdout.split()
    im = subprocess.run(["docker", "images", "-q", "--filter", f"label=nanobox.paused={sid}"],
                        capture_output=True, text=True, check=True).stdout.split()
    return ps + im


def test_pause_without_memory_then_connect(pauserun):
    p = step(pauserun, "pauseWithoutMemory")
    assert p["state"] == "paused", p
    assert p["native"] == {"state": "paused", "memory_released": True}, p
    assert step(pauserun, "isRunningWhilePaused") == {"running": False}
    c = step(pauserun, "connectBootsFromFiles")
    assert c["state"] == "running" and c["native"]["memory_released"] is None, c
    assert c["stdout"] == "kept in the workspace\nkept in tmp\nyes", c


def test_lifecycle_pause_without_memory(pauserun):
    b = step(pauserun, "autoPauseWithoutMemory")
    assert b["state"] == "paused" and b["native"]["memory_released"] is True, b
    assert b["text"] == "b kept" and b["after"] == "running", b
    t = thrown(pauserun, "autoResumeWithoutMemory")
    assert "keepMemory" in t["message"], t


def test_nothing_left_after_kill(pauserun):
    step(pauserun, "kill")
    assert step(pauserun, "killedNative")["status"] == 404
    for sid in pauserun["created"]:
        assert leftovers(sid) == [], sid


def test_pause_without_memory_raw(stack, api):
    sid = api.create()
    api.exec(sid, "echo raw > /workspace/f")
    e2b_error(e2b(stack, "POST", f"/sandboxes/{sid}/pause", json={"memory": "no"}), 400)
    assert e2b(stack, "POST", f"/sandboxes/{sid}/pause", json={"memory": False}).status_code == 204
    got = api.get(sid).json()
    assert got["state"] == "paused" and got["memory_released"] is True, got
    e2b_error(e2b(stack, "POST", f"/sandboxes/{sid}/pause", json={"memory": False}), 409)
    # v2 connect with {"memory": false} (onResume: 'reboot') boots it from its files
    r = e2b(stack, "POST", f"/v2/sandboxes/{sid}/connect", json={"timeout": 60, "memory": False})
    assert r.status_code == 201, r.text[:300]
    assert api.exec(sid, "cat /workspace/f")["stdout"] == "raw\n"
    # and the older resume call, after a second pause
    assert e2b(stack, "POST", f"/sandboxes/{sid}/pause", json={"memory": False}).status_code == 204
    r = e2b(stack, "POST", f"/sandboxes/{sid}/resume", json={"timeout": 60})
    assert r.status_code == 201 and r.json()["sandboxID"] == sid, r.text[:300]
    assert api.get(sid).json()["state"] == "running"
    # a pause with memory still refuses the reboot, as before
    assert e2b(stack, "POST", f"/sandboxes/{sid}/pause", json={}).status_code == 204
    r = e2b(stack, "POST", f"/v2/sandboxes/{sid}/connect", json={"timeout": 60, "memory": False})
    assert r.status_code == 501, r.text[:300]


def test_create_with_auto_pause_memory_false_raw(stack, api):
    r = e2b(stack, "POST", "/sandboxes", json={"templateID": "base", "timeout": 120, "autoPause": True,
                                               "autoPauseMemory": False})
    assert r.status_code == 201, r.text[:300]
    sid = r.json()["sandboxID"]
    api.created.append(sid)
    got = api.get(sid).json()
    assert got["on_timeout"] == "pause" and got["pause_keep_memory"] is False, got
    r = e2b(stack, "POST", "/sandboxes", json={"templateID": "base", "autoPauseMemory": "x"})
    e2b_error(r, 400)
