"""The warm pool: sandboxes of the default configuration kept started, handed
out to plain creates with the same labels and limits as a cold create, and
never leaked across restarts."""

import json
import re

import pytest

from nbtest import docker_inspect, docker_ps, parse_json, wait_until


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
    directory of its passwd and group) written the same for every slot."""
    hc = info["HostConfig"]
    keys = ("Memory", "MemorySwap", "NanoCpus", "PidsLimit", "CapDrop", "SecurityOpt",
            "ReadonlyRootfs", "NetworkMode", "Tmpfs", "Binds", "Mounts", "Ulimits")
    text = json.dumps({k: hc.get(k) for k in keys})
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
