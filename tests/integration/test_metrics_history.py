"""Each sandbox's usage history (docs/API.md, "Usage history"): the reaper
samples every running sandbox's cgroup and workspace every
metrics_interval seconds into a ring of metrics_history samples per slot;
GET /sandbox/{id}/metrics?start=&end= and E2B's GET
/sandboxes/{id}/metrics?start=&end= (getMetrics({start, end})) serve the
samples in a range. A slot's next sandbox never sees its previous one's.

The stack here samples every second and keeps 6 samples, and has one slot,
so that every sandbox after the first reuses it.
"""

import time
import urllib.parse

import pytest

from conftest import module_stack
from nbtest import assert_error, parse_json, random_uuid, wait_until
from test_e2b import e2b, e2b_error, e2b_latest, e2b_sdk, sdk, sdk_script, step, thrown  # noqa: F401
from test_keys import KeyApi, add_key

CAP = 6


def qs(query):
    return "?" + urllib.parse.urlencode(query) if query else ""


@pytest.fixture(scope="module")
def hstack():
    yield from module_stack("history", {"metrics_interval": "1", "metrics_history": str(CAP),
                                        "max_sandboxes": "1"})


@pytest.fixture
def hapi(hstack):
    a = KeyApi(hstack, hstack.api_key)
    yield a
    a.cleanup()


def history(api, sid, **query):
    r = api.request("GET", f"/sandbox/{sid}/metrics" + qs(query))
    assert r.status_code == 200, f"metrics of {sid} -> {r.status_code} {r.text[:300]}"
    return parse_json(r)["history"]


def samples_after(api, sid, n):
    return wait_until(lambda: (s := history(api, sid, start=0)["samples"]) and len(s) >= n and s,
                      timeout=30, what=f"{n} samples of {sid}")


def test_samples_are_kept_in_a_bounded_ring_oldest_first(hapi):
    sid = hapi.create()
    assert "history" not in parse_json(hapi.request("GET", f"/sandbox/{sid}/metrics"))  # only when asked
    hapi.exec(sid, "head -c 16777216 /dev/zero > /workspace/blob")
    first = samples_after(hapi, sid, CAP)[0]
    # it goes round: the oldest goes, never more than CAP are kept
    h = wait_until(lambda: (x := history(hapi, sid, start=0))["samples"][0]["at_ms"] > first["at_ms"] and x,
                   timeout=30, what="the ring to go round")
    assert h["interval"] == 1 and h["capacity"] == CAP and h["disk_size"] > 0, h
    s = h["samples"]
    assert len(s) == CAP, s
    ats = [x["at_ms"] for x in s]
    assert ats == sorted(ats) and len(set(ats)) == CAP, ats
    for a, b in zip(ats, ats[1:]):
        assert 900 <= b - a <= 5000, ats  # about a second apart (a loaded machine: more)
    last = s[-1]
    assert last["at"] == last["at_ms"] // 1000 and last["at"] <= time.time() + 1
    assert last["disk"] >= 16 << 20 and last["memory"] >= 16 << 20, last
    assert all(x["cpu_usec"] > 0 and x["cpu_percent"] >= 0 for x in s), s
    usecs = [x["cpu_usec"] for x in s]
    assert usecs == sorted(usecs), usecs


def test_a_range_selects_by_unix_seconds_bounds_included(hapi):
    sid = hapi.create()
    s = samples_after(hapi, sid, 4)
    a, b = s[1]["at"], s[2]["at"]
    got = history(hapi, sid, start=a, end=b)["samples"]
    assert [x["at"] for x in got] == [a, b], (got, s)
    assert [x["at"] for x in history(hapi, sid, end=a)["samples"]] == [x["at"] for x in s[:2]]
    assert len(history(hapi, sid, start=a)["samples"]) >= len(s) - 1
    assert history(hapi, sid, start=int(time.time()) + 3600)["samples"] == []


def test_cpu_percent_follows_a_busy_loop(hapi):
    sid = hapi.create()
    hapi.exec(sid, "timeout 20 sh -c 'while :; do :; done' >/dev/null 2>&1 & echo started")
    # half a CPU: a busy loop shows as tens of percent of one CPU, never much over 50
    busy = wait_until(lambda: [x for x in history(hapi, sid, start=0)["samples"] if x["cpu_percent"] > 20],
                      timeout=30, what="a busy sample")
    assert all(x["cpu_percent"] <= 80 for x in busy), busy


def test_bad_ranges_are_400_and_change_nothing(hapi):
    sid = hapi.create()
    samples_after(hapi, sid, 1)
    bad = [{"start": "-1"}, {"end": "-5"}, {"start": "x"}, {"start": "1.5"}, {"end": ""},
           {"start": "99999999999"}, {"end": "1" * 40}, {"start": "10", "end": "9"},
           {"start": "0x10"}, {"start": "+3"}, {"start": " 3"}]
    for q in bad:
        msg = assert_error(hapi.request("GET", f"/sandbox/{sid}/metrics" + qs(q)), 400, "bad_field")["error"]
        assert "start" in msg or "end" in msg, (q, msg)
        e2b_error(e2b(hapi.stack, "GET", f"/sandboxes/{sid}/metrics", params=q), 400)
    # a bad range is refused before the id is looked at; an unknown id with a good one is 404
    assert_error(hapi.request("GET", f"/sandbox/{random_uuid()}/metrics" + qs({"start": "1"})),
                 404, "not_found")
    # the sandbox and its history are as they were
    assert parse_json(hapi.get(sid))["state"] == "running"
    assert len(history(hapi, sid, start=0)["samples"]) >= 1


def test_e2b_answers_the_history_as_sandbox_metrics(hapi):
    st = hapi.stack
    sid = hapi.create()
    s = samples_after(hapi, sid, 3)

    def get(**q):
        r = e2b(st, "GET", f"/sandboxes/{sid}/metrics", params=q)
        assert r.status_code == 200, (r.status_code, r.text[:300])
        return r.json()

    m = get()  # no range: all of it, oldest first
    assert len(m) >= 3 and [x["timestampUnix"] for x in m] == sorted(x["timestampUnix"] for x in m), m
    for x in m:
        assert set(x) == {"timestamp", "timestampUnix", "cpuCount", "cpuUsedPct", "memUsed", "memTotal",
                          "diskUsed", "diskTotal"}, x
        assert time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(x["timestampUnix"])) == x["timestamp"]
        assert x["cpuCount"] == 1 and 0 <= x["cpuUsedPct"] <= 100, x
        assert 0 < x["memUsed"] <= x["memTotal"] and 0 <= x["diskUsed"] <= x["diskTotal"], x
    a = s[1]["at"]
    assert [x["timestampUnix"] for x in get(start=a, end=a)] == [a]
    assert get(start=int(time.time()) + 600) == []


def test_e2b_first_call_gets_a_live_sample_before_the_first_one_is_taken(make_stack):
    # a history off (0 samples kept): E2B's getMetrics still gets one sample, now
    st = make_stack("history-off", metrics_history="0")
    sid = st.api.create()
    try:
        r = e2b(st, "GET", f"/sandboxes/{sid}/metrics")
        assert r.status_code == 200, r.text
        m = r.json()
        assert len(m) == 1 and abs(m[0]["timestampUnix"] - time.time()) < 30, m
        assert e2b(st, "GET", f"/sandboxes/{sid}/metrics", params={"end": "1"}).json() == []
        h = parse_json(st.api.request("GET", f"/sandbox/{sid}/metrics" + qs({"start": 0})))["history"]
        assert h["capacity"] == 0 and h["samples"] == [], h
    finally:
        st.api.delete(sid)


def test_a_reused_slot_shows_none_of_the_previous_tenants_samples(hstack):
    # two keys; one slot: bob's sandbox takes the slot alice's had
    keys = {n: add_key(hstack, n) for n in (f"al{random_uuid()[:6]}", f"bo{random_uuid()[:6]}")}
    alice, bob = (KeyApi(hstack, k) for k in keys.values())
    try:
        a = alice.create()
        alice.exec(a, "head -c 33554432 /dev/zero > /workspace/marker")  # 32 MiB: easy to tell
        old = wait_until(lambda: [x for x in history(alice, a, start=0)["samples"] if x["disk"] >= 32 << 20],
                         timeout=30, what="alice's 32 MiB to show in her history")
        assert alice.request("DELETE", f"/sandbox/{a}").status_code in (200, 204)
        alice.created.remove(a)
        born = time.time()
        b = bob.create()
        # at once (before its first sample) and after a few: nothing of alice's
        for _ in range(2):
            for h in (history(bob, b, start=0)["samples"],
                      e2b(hstack, "GET", f"/sandboxes/{b}/metrics", key=f"e2b_{bob.key}").json()):
                for x in h:
                    t = x.get("at", x.get("timestampUnix"))
                    assert t >= int(born) - 1, (x, old[-1])
                    assert x.get("disk", x.get("diskUsed")) < 32 << 20, (x, old[-1])
            samples_after(bob, b, 3)
        # alice cannot read bob's history: his id is unknown to her key
        assert_error(alice.request("GET", f"/sandbox/{b}/metrics" + qs({"start": 0})), 404, "not_found")
    finally:
        alice.cleanup()
        bob.cleanup()


def test_the_sdk_reads_ranges_of_the_history(hstack, sdk):
    summary = sdk_script(hstack, sdk, "metrics.mjs", "e2bm-")
    try:
        all_ = step(summary, "all")
        assert len(all_) >= 4, all_
        ts = [x["timestamp"] for x in all_]
        assert ts == sorted(ts) and all(t % 1000 == 0 for t in ts), ts
        assert all_[-1]["diskUsed"] >= 8 << 20 and 0 <= all_[-1]["cpuUsedPct"] <= 100, all_[-1]
        want = [x["timestamp"] for x in all_[1:3]]
        assert [x["timestamp"] for x in step(summary, "range")] == want
        assert [x["timestamp"] for x in step(summary, "rangeStatic")] == want
        assert step(summary, "future") == []
        assert thrown(summary, "backwards")["message"], summary["steps"]["backwards"]
    finally:
        for sid in summary["created"]:
            hstack.api.delete(sid)
