"""Many clients at once: concurrent creates/deletes, a full table under load,
the worker pool growing for long execs and shrinking back."""

import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from nbtest import assert_error, docker_ps, parse_json, wait_until


def test_20_sandboxes_created_concurrently(api, stack):
    def create(_):
        return api.request("POST", "/sandbox", json={"metadata": {"batch": "c20"}}, timeout=120)

    with ThreadPoolExecutor(20) as ex:
        responses = list(ex.map(create, range(20)))
    bodies = []
    for r in responses:
        if r.status_code == 201:
            bodies.append(parse_json(r))
            api.created.append(bodies[-1]["sandboxId"])
    assert [r.status_code for r in responses] == [201] * 20, [(r.status_code, r.text[:100]) for r in responses]
    ids = {b["sandboxId"] for b in bodies}
    assert len(ids) == 20, "duplicate sandbox ids"
    assert set(api.list_ids("?metadata.batch=c20")) == ids
    names = {f"nanobox-{i}" for i in ids}
    assert names <= set(docker_ps(stack.instance, all=False)), "not all containers are running"

    with ThreadPoolExecutor(20) as ex:
        deleted = list(ex.map(lambda i: api.request("DELETE", f"/sandbox/{i}", timeout=120), ids))
    assert [r.status_code for r in deleted] == [204] * 20, [(r.status_code, r.text[:100]) for r in deleted]
    assert not names & set(docker_ps(stack.instance)), "containers left after DELETE"
    assert not ids & set(api.list_ids())


def test_full_table_under_concurrent_creates(make_stack):
    st = make_stack("race", max_sandboxes=5)
    api = st.api

    def create(_):
        return api.request("POST", "/sandbox", json={}, timeout=120)

    with ThreadPoolExecutor(12) as ex:
        responses = list(ex.map(create, range(12)))
    ok = [parse_json(r)["sandboxId"] for r in responses if r.status_code == 201]
    api.created.extend(ok)
    full = [r for r in responses if r.status_code != 201]
    assert len(ok) == 5, [(r.status_code, r.text[:100]) for r in responses]
    for r in full:
        assert_error(r, 503, "capacity")
    assert sorted(api.list_ids()) == sorted(ok)
    assert sorted(docker_ps(st.instance)) == sorted(f"nanobox-{i}" for i in ok)


def test_pool_grows_for_concurrent_long_execs(api):
    sids = [api.create(), api.create()]
    results, errors = [], []

    def one(i):
        try:
            results.append(api.exec(sids[i % 2], f"sleep 3; echo {i}", timeout=30))
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    t0 = time.monotonic()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    wall = time.monotonic() - t0
    assert not errors, errors
    assert sorted(int(r["stdout"]) for r in results) == list(range(8))
    # with only workers_min = 2 workers this takes 4 x 3 s; the pool may grow to 8
    assert wall < 9, f"8 concurrent 3 s execs took {wall:.1f} s: the pool did not grow"
    # and short requests are still served while the pool is busy
    assert api.request("GET", "/healthz", auth=False).status_code == 200


def test_pool_retires_idle_extra_workers(make_stack):
    st = make_stack("retire", worker_idle_timeout=2)
    api = st.api
    sid = api.create()
    n0 = len(wait_until(lambda: len(st.children()) >= 3 and st.children(), 10, what="idle pool"))
    peak = [n0]
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            peak[0] = max(peak[0], len(st.children()))
            time.sleep(0.05)

    w = threading.Thread(target=watch, daemon=True)
    w.start()
    threads = [threading.Thread(target=api.exec_raw, args=(sid, "sleep 2"), kwargs={"timeout": 10})
               for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    stop.set()
    w.join()
    assert peak[0] > n0, "the pool never grew"
    # idle extras go one per tick after worker_idle_timeout; workers_spare
    # idle ones may stay, so "back to at most what it was before the burst"
    wait_until(lambda: len(st.children()) <= n0, 30, 0.5,
               what=f"the pool to shrink back to <= {n0} children (peak {peak[0]})")
    assert api.exec(sid, "echo ok")["stdout"] == "ok\n"


def test_mixed_concurrent_operations_stay_consistent(api, stack):
    sids = [api.create() for _ in range(3)]
    errors = []

    def worker(k):
        try:
            for j in range(5):
                sid = sids[(k + j) % 3]
                assert api.exec(sid, f"echo {k}-{j} >> /workspace/log; echo ok")["stdout"] == "ok\n"
                assert api.request("GET", f"/sandbox/{sid}").status_code == 200
                assert api.request("GET", "/sandbox").status_code == 200
                r = api.request("POST", f"/sandbox/{sid}/timeout", json={"ttl": 600})
                assert r.status_code == 200, r.text
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    lines = sum(len(api.exec(s, "cat /workspace/log")["stdout"].split()) for s in sids)
    assert lines == 30


def test_concurrent_deletes_of_one_sandbox(api, stack):
    sid = api.create()
    with ThreadPoolExecutor(8) as ex:
        codes = sorted(r.status_code for r in ex.map(lambda _: api.delete(sid), range(8)))
    assert codes == [204] + [404] * 7, codes
    assert docker_ps(stack.instance, sandbox=sid) == []


def listen_backlog(sock):
    """The backlog of nanobox-fcgi's listening socket, as the kernel holds it
    (ss: a listening socket's Send-Q)."""
    out = subprocess.run(["ss", "-xlnH", "src", sock], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out, f"no listening socket {sock}"
    return int(out[3])


def test_requests_past_workers_max_wait_in_the_listen_backlog(make_stack):
    """More requests at once than workers: they queue in the socket's
    backlog (listen_backlog) and are all served; a backlog too small for
    the burst makes nginx answer 502 for the rest, so the key is what
    decides."""
    somaxconn = int(open("/proc/sys/net/core/somaxconn").read())
    results = {}
    for backlog in (None, 16):
        conf = {"workers_min": 1, "workers_max": 1, "workers_spare": 0}
        if backlog is not None:
            conf["listen_backlog"] = backlog
        st = make_stack(f"backlog-{backlog or 'default'}", **conf)
        assert listen_backlog(st.sock) == min(backlog or 4096, somaxconn)
        sid = st.api.create()
        with ThreadPoolExecutor(max_workers=48) as pool:
            codes = list(pool.map(lambda _: st.api.exec_raw(sid, "sleep 0.1").status_code,
                                  range(48)))
        results[backlog] = codes
        assert st.api.exec(sid, "echo ok")["stdout"] == "ok\n"  # and it serves on
        st.api.delete(sid)
    assert results[None] == [200] * 48, results[None]
    assert 502 in results[16] and 200 in results[16], results[16]
    assert set(results[16]) <= {200, 502}, results[16]
