"""The warm pool: sandboxes of the default configuration kept started, handed
out to plain creates with the same labels and limits as a cold create, and
never leaked across restarts."""

import datetime
import json
import os
import re
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from nbtest import IMAGE, docker_inspect, docker_ps, parse_json, reconciliations, wait_until


def pooled_ids(st):
    """Containers of the stack that no API call knows about: the warm ones."""
    listed = {s["sandboxId"] for s in st.api.list()}
    return {c for c in docker_ps(st.instance)} - {f"nanobox-{s}" for s in listed}


def running_names(st):
    return set(docker_ps(st.instance))


def warm(st):
    """Warm sandboxes ready in the table (/healthz), not just containers seen by Docker."""
    return st.api.request("GET", "/healthz").json()["warm"]


def settled(st, n):
    wait_until(lambda: warm(st) == n and len(running_names(st)) == n + len(st.api.list()),
               timeout=30, what=f"{n} warm sandboxes")


@pytest.fixture
def pool_stack(make_stack):
    st = make_stack("pool", warm_pool="2")
    settled(st, 2)
    return st


def limits(info):
    """The container's limits, with what is the slot's own (its uid, the
    directory of its passwd and group) and the sandbox's own (its id, on its
    /dev/pts volume's label) written the same for every slot."""
    hc = info["HostConfig"]
    keys = ("Memory", "MemorySwap", "NanoCpus", "PidsLimit", "CapDrop", "SecurityOpt",
            "ReadonlyRootfs", "NetworkMode", "Tmpfs", "Binds", "Mounts", "Ulimits")
    text = json.dumps({k: hc.get(k) for k in keys})
    text = text.replace(info["Config"]["Labels"]["nanobox.sandbox"], "ID")
    uid = info["Config"]["User"].split(":")[0]
    text = re.sub(r"/slots/[0-9]+/", "/slots/N/", text.replace(f"={uid}", "=UID"))
    return json.loads(text)


def test_warm_sandboxes_are_not_listed(pool_stack):
    assert pool_stack.api.list() == []
    assert len(running_names(pool_stack)) == 2


def test_plain_create_takes_a_warm_one_and_the_pool_refills(pool_stack):
    st = pool_stack
    before = running_names(st)
    info = st.api.create_info(ttl=120, metadata={"who": "pool-test"})
    sid = info["sandboxId"]
    assert f"nanobox-{sid}" in before  # it was already running
    got = parse_json(st.api.get(sid))
    assert got["metadata"] == {"who": "pool-test"}
    assert 115 <= got["expires_at"] - got["created_at"] <= 121
    assert st.api.exec(sid, "echo warm")["stdout"] == "warm\n"
    settled(st, 2)  # refilled: two warm again besides ours
    assert [s["sandboxId"] for s in st.api.list()] == [sid]


def test_warm_hand_out_has_the_labels_and_limits_of_a_cold_create(pool_stack):
    st = pool_stack
    warm = st.api.create()
    # asking for a narrower limit skips the pool: a cold create
    cold = st.api.create(pids=64)
    wi, ci = docker_inspect(f"nanobox-{warm}"), docker_inspect(f"nanobox-{cold}")
    assert set(wi["Config"]["Labels"]) == set(ci["Config"]["Labels"])
    assert wi["Config"]["Labels"]["nanobox.sandbox"] == warm
    assert wi["Config"]["Labels"]["nanobox.instance"] == st.instance
    lw, lc = limits(wi), limits(ci)
    assert lc.pop("PidsLimit") == 64 and lw.pop("PidsLimit") == 128
    assert lw == lc
    # each has its slot's own uid, warm or cold
    assert wi["Config"]["User"] != ci["Config"]["User"]


def test_destroying_a_warm_sandbox_removes_its_container(pool_stack):
    st = pool_stack
    sid = st.api.create()
    assert st.api.delete(sid).status_code == 204
    wait_until(lambda: f"nanobox-{sid}" not in running_names(st), timeout=10, what="removed")


def test_pool_survives_a_crash_without_leaking(pool_stack):
    st = pool_stack
    before = running_names(st)
    st.restart()  # SIGKILL of every nanobox process, then a fresh start on the same state
    # after reconciliation: the same two warm containers, no more, and they are handed out
    settled(st, 2)
    assert running_names(st) == before
    sid = st.api.create()
    assert f"nanobox-{sid}" in before


def test_lowering_the_pool_size_drains_it(make_stack):
    st = make_stack("pooldrain", warm_pool="2")
    settled(st, 2)
    st.stop_fcgi()  # sandboxes (warm ones too) outlive the service
    st.conf["warm_pool"] = "0"
    st.write_conf()
    st.start_fcgi()
    st.wait_healthy()
    wait_until(lambda: len(running_names(st)) == 0, timeout=90, what="pool drained")
    assert warm(st) == 0


# ------------------------------------------------ adaptive pools (warmsize.c)

def pools(st):
    """/healthz's pools by layout: {"nanobox": {...}, "e2b": {...}} of the default image."""
    return {p["layout"]: p for p in st.api.request("GET", "/healthz").json()["pools"]
            if p["image"] == IMAGE and "template" not in p}


def burst(st, n, create):
    """n creates at once, each in its own thread: their ids, in any order."""
    with ThreadPoolExecutor(max_workers=n) as ex:
        return list(ex.map(lambda _: create(), range(n)))


def docker_created(name):
    """When Docker created the container (unix seconds)."""
    text = docker_inspect(name)["Created"]  # 2026-12-06T08:14:46.123456789Z
    m = re.match(r"(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?Z$", text)
    base = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc)
    return base.timestamp() + float("0." + (m.group(2) or "0"))


BURST = 8


def test_a_burst_that_misses_grows_the_pool_and_the_next_is_served_warm(make_stack):
    st = make_stack("poolburst", warm_pool="1", warm_pool_max=str(BURST), warm_pool_idle="600")
    settled(st, 1)
    assert pools(st)["nanobox"]["target"] == 1
    # each miss adds one to the target, up to the ceiling; a loaded machine may
    # let a refill serve a late create of the burst (a hit): a second burst then
    # teaches the rest
    for _ in range(3):
        before = pools(st)["nanobox"]
        burst(st, BURST, st.api.create)
        p = pools(st)["nanobox"]
        assert p["hits"] + p["misses"] - before["hits"] - before["misses"] == BURST
        assert p["misses"] > before["misses"]
        want = min(BURST, before["target"] + p["misses"] - before["misses"])
        wait_until(lambda: pools(st)["nanobox"]["target"] >= want, timeout=10,
                   what=f"the target to grow to {want}")
        if want == BURST:
            break
    assert pools(st)["nanobox"]["target"] == BURST
    text = st.api.request("GET", "/metrics").text
    assert re.search(rf'^nanobox_warm_pool_kind_target\{{image="{re.escape(IMAGE)}",layout="nanobox",'
                     rf'template=""\}} {BURST}$', text, re.M), text
    wait_until(lambda: pools(st)["nanobox"]["ready"] == BURST, timeout=120, what="the pool to fill")
    before = pools(st)["nanobox"]
    t0 = time.time()
    ids = burst(st, BURST, st.api.create)
    after = pools(st)["nanobox"]
    assert after["hits"] - before["hits"] == BURST
    assert after["misses"] == before["misses"]
    # every one of them was started before the burst
    for sid in ids:
        assert docker_created(f"nanobox-{sid}") < t0


def reaper_pid(st):
    """The master's child named nanobox-reaper (src/fcgi/process/reaper.c)."""
    def comm(pid):
        try:
            with open(f"/proc/{pid}/comm") as f:
                return f.read().strip()
        except OSError:
            return ""
    named = [p for p in st.children() if comm(p) == "nanobox-reaper"]
    return named[0] if len(named) == 1 else None


def test_a_restarted_reaper_keeps_what_the_pool_learned(make_stack):
    """The sizing is the reaper's; the target it published is shared. A
    reaper killed and respawned by the master goes on from that target
    instead of draining the pool back to its floor."""
    st = make_stack("poolreaper", warm_pool="1", warm_pool_max="4", warm_pool_idle="600")
    settled(st, 1)
    burst(st, 4, st.api.create)
    wait_until(lambda: pools(st)["nanobox"]["target"] == 4, timeout=10, what="the target to grow to 4")
    wait_until(lambda: pools(st)["nanobox"]["ready"] == 4, timeout=120, what="the pool to fill")
    old = reaper_pid(st)
    assert old, st.children()
    before = reconciliations(st.api)
    os.kill(old, signal.SIGKILL)
    wait_until(lambda: reaper_pid(st) not in (None, old), timeout=15, what="a new reaper")
    # the new one's first pass reconciles, then sizes the pools every subtick
    wait_until(lambda: reconciliations(st.api) > before, timeout=15, what="the new reaper's first pass")
    time.sleep(2)   # a reaper at the floor would have published 1 and begun draining
    p = pools(st)["nanobox"]
    assert p["target"] == 4, p
    assert p["ready"] == 4, p


def test_an_idle_pool_shrinks_back_to_its_floor(make_stack):
    st = make_stack("poolidle", warm_pool="1", warm_pool_max="4", warm_pool_idle="2")
    settled(st, 1)
    ids = burst(st, 4, st.api.create)
    assert pools(st)["nanobox"]["misses"] >= 3
    seen = set()

    def back_to_one():
        seen.update(pooled_ids(st))
        return pools(st)["nanobox"]["target"] == 1 and len(pooled_ids(st)) == 1
    wait_until(back_to_one, timeout=90, what="the pool back at its floor")
    # it grew (more warm containers than its floor of 1 were made), then Docker lost them again
    assert len(seen) >= 2, seen
    assert len(running_names(st)) == 1 + len(ids)
    assert pools(st)["nanobox"]["ready"] == 1


def e2b_create(st):
    r = requests.post(st.url + "/sandboxes", headers={"X-API-KEY": f"e2b_{st.api_key}"},
                      json={"templateID": "base", "timeout": 120}, timeout=120)
    assert r.status_code == 201, (r.status_code, r.text[:300])
    sid = r.json()["sandboxID"]
    st.api.created.append(sid)
    return sid


def test_an_e2b_create_is_served_warm_once_its_pool_learned(make_stack):
    st = make_stack("poole2b", warm_pool="1", warm_pool_e2b_max="2", warm_pool_idle="600")
    settled(st, 1)
    assert pools(st)["e2b"]["target"] == 0  # floor 0: nothing until E2B creates come
    cold = e2b_create(st)
    assert pools(st)["e2b"]["misses"] == 1
    # the plain warm one was not taken: it has nanobox's layout
    assert pools(st)["nanobox"]["ready"] == 1
    wait_until(lambda: pools(st)["e2b"]["ready"] == 1, timeout=60, what="an E2B warm sandbox")
    t0 = time.time()
    sid = e2b_create(st)
    assert pools(st)["e2b"]["hits"] == 1
    assert docker_created(f"nanobox-{sid}") < t0
    # the layout a cold E2B create makes: its label, mounts, user and home
    wi, ci = docker_inspect(f"nanobox-{sid}"), docker_inspect(f"nanobox-{cold}")
    assert wi["Config"]["Labels"]["nanobox.home"] == "e2b"
    assert set(wi["Config"]["Labels"]) == set(ci["Config"]["Labels"])
    assert limits(wi) == limits(ci)
    assert wi["Config"]["WorkingDir"] == ci["Config"]["WorkingDir"]
    assert wi["Config"]["Env"] == ci["Config"]["Env"]
    out = st.api.exec(sid, "whoami; echo $HOME; pwd")["stdout"]
    assert out == st.api.exec(cold, "whoami; echo $HOME; pwd")["stdout"]


def test_a_tiny_memory_budget_caps_the_pools(make_stack):
    # one sandbox's memory: the floor of 3 is held to 1, and a burst does not pass it
    st = make_stack("poolmem", warm_pool="3", warm_pool_max="6", warm_pool_memory="256m")
    settled(st, 1)
    burst(st, 3, st.api.create)
    wait_until(lambda: pools(st)["nanobox"]["misses"] >= 2, timeout=10, what="misses")
    most = 0
    for _ in range(30):
        most = max(most, len(pooled_ids(st)), warm(st))
        time.sleep(0.2)
    assert most <= 1
    assert pools(st)["nanobox"]["target"] == 1
