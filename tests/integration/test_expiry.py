"""TTL expiry by the reaper, and extending/shortening a TTL."""

import time

from nbtest import assert_error, docker_exists, parse_json, wait_until


def _gone(api, sid):
    r = api.get(sid)
    return r.status_code == 404 and not docker_exists(f"nanobox-{sid}")


def test_sandbox_expires_after_its_ttl(api, stack):
    info = api.create_info(ttl=3)
    sid = info["sandboxId"]
    assert info["expires_at"] == info["created_at"] + 3
    # (on a loaded machine the create itself may eat most of the 3 s)
    if time.time() < info["expires_at"] - 0.5:
        r = api.get(sid)
        assert r.status_code == 200 or time.time() >= info["expires_at"], "gone too early"
    wait_until(lambda: _gone(api, sid), timeout=15, interval=0.25,
               what="the ttl=3 sandbox to be gone from GET and docker ps -a")
    gone_at = time.time()
    assert gone_at - info["expires_at"] < 8, f"removed {gone_at - info['expires_at']:.1f}s after expiry"
    assert_error(api.get(sid), 404, "not_found")
    assert sid not in api.list_ids()
    assert_error(api.exec_raw(sid, "true"), 404, "not_found")


def test_sandbox_is_not_removed_before_its_ttl(api):
    info = api.create_info(ttl=6)
    sid = info["sandboxId"]
    while time.time() < info["expires_at"] - 1.5:
        assert api.get(sid).status_code == 200
        assert docker_exists(f"nanobox-{sid}")
        time.sleep(0.5)
    assert api.exec(sid, "echo still")["stdout"] == "still\n"


def test_extend_keeps_sandbox_alive_past_original_ttl(api):
    # 8 s: the extension must land before the first expiry even on a loaded
    # machine running the sanitizer build
    info = api.create_info(ttl=8)
    sid = info["sandboxId"]
    extended_at = time.time()
    r = api.request("POST", f"/sandbox/{sid}/timeout", json={"ttl": 30})
    assert r.status_code == 200, r.text
    time.sleep(max(0, info["expires_at"] + 3 - time.time()))
    assert api.get(sid).status_code == 200
    assert docker_exists(f"nanobox-{sid}")
    assert api.exec(sid, "echo alive")["stdout"] == "alive\n"
    expected = 30 - (time.time() - extended_at)
    assert abs(parse_json(api.get(sid))["ttl_remaining"] - expected) <= 2


def test_shortened_ttl_expires_early(api):
    sid = api.create(ttl=600)
    r = api.request("POST", f"/sandbox/{sid}/timeout", json={"ttl": 2})
    assert r.status_code == 200, r.text
    wait_until(lambda: _gone(api, sid), timeout=15, interval=0.25,
               what="the shortened sandbox to be gone")


def test_expired_sandbox_frees_its_slot(make_stack):
    st = make_stack("expiry-small", max_sandboxes=1)
    sid = st.api.create(ttl=2)
    assert_error(st.api.request("POST", "/sandbox", json={}), 503, "capacity")
    wait_until(lambda: _gone(st.api, sid), timeout=15, interval=0.25, what="expiry")
    st.api.create()


def test_expiry_while_a_command_runs(api):
    sid = api.create(ttl=3)
    t0 = time.monotonic()
    r = api.exec_raw(sid, "sleep 20", timeout=30)
    # the reaper removed the container under the running command: the exec
    # ends well before the command would have (whatever the status)
    assert time.monotonic() - t0 < 15, f"exec outlived its sandbox: {r.status_code} {r.text[:200]}"
    if "application/json" in r.headers.get("Content-Type", ""):
        parse_json(r)
    wait_until(lambda: _gone(api, sid), timeout=15, interval=0.25, what="expiry")
