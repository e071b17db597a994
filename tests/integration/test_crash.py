"""Crashes and restarts: SIGKILLed workers, a SIGKILLed service restarted on
its state file, start-up reconciliation, graceful SIGTERM.

Each test runs its own stack (make_stack) so that the main one stays intact.
"""

import os
import signal
import subprocess
import time

import pytest
import requests

from nbtest import (in_thread, IMAGE, assert_error, docker_exists, docker_ps, docker_rm, parse_json,
                    pid_alive, random_uuid, run, tail, tcp_refused, wait_reconciled, wait_until)


def consistent(st):
    """Every container of the instance is a listed sandbox and vice versa."""
    containers = set(docker_ps(st.instance))
    listed = {f"nanobox-{i}" for i in st.api.list_ids()}
    return containers == listed and (containers, listed)


def idle_children(st, at_least=3):
    """Children of the master at rest (workers_min = 2, plus the reaper)."""
    return wait_until(lambda: len(st.children()) >= at_least and st.children(), 10,
                      what=f"at least {at_least} children of the master")


@pytest.fixture
def orphan_cleanup():
    names = []
    yield names
    for n in names:
        run(["docker", "rm", "-fv", n], check=False)


def run_orphan(instance, sid=None, names=None):
    sid = sid or random_uuid()
    name = f"nanobox-{sid}"
    if names is not None:
        names.append(name)
    run(["docker", "run", "-d", "--network", "none", "--name", name,
         "--label", f"nanobox.sandbox={sid}", "--label", f"nanobox.instance={instance}",
         "--label", f"nanobox.expires={int(time.time()) + 3000}",
         IMAGE, "sleep", "1000"])
    return name


# ------------------------------------------------------------ worker deaths

def test_worker_killed_mid_exec_is_replaced_and_nothing_leaks(make_stack):
    st = make_stack("kill-worker")
    api = st.api
    sid = api.create()
    n0 = len(idle_children(st))
    t, box = in_thread(lambda: api.exec_raw(sid, "echo begin; sleep 5; echo end", timeout=30))
    victim = wait_until(st.busy_workers, 5, 0.02, what="a worker busy with the exec")[0]
    time.sleep(0.3)
    os.kill(victim, signal.SIGKILL)
    t.join(40)
    assert not t.is_alive(), "the request whose worker was killed never got an answer"
    if "result" in box:
        assert box["result"].status_code >= 500 or box["result"].status_code == 200, box["result"].text
    # the service keeps answering
    for _ in range(5):
        assert api.request("GET", "/sandbox").status_code == 200
    assert api.exec(sid, "echo after")["stdout"] == "after\n"
    sid2 = api.create()
    assert api.exec(sid2, "echo new")["stdout"] == "new\n"
    assert api.delete(sid2).status_code == 204
    # the master replaced the worker
    assert st.proc.poll() is None, "the master died"
    wait_until(lambda: victim not in st.children() and len(st.children()) >= n0, 10,
               what=f"the master to replace worker {victim} ({n0} children before)")
    # no container leaked
    wait_until(lambda: consistent(st), 10, what="containers == listed sandboxes")
    assert api.list_ids() == [sid]


def test_worker_killed_mid_create_leaks_no_container_or_slot(make_stack):
    capacity = 4
    st = make_stack("kill-create", max_sandboxes=capacity)
    api = st.api
    idle_children(st)
    for delay in (0.0, 0.08, 0.2, 0.4):
        t, box = in_thread(lambda: api.request("POST", "/sandbox", json={}, timeout=60))
        try:
            victim = wait_until(st.busy_workers, 5, 0.005, what="a worker busy with the create")[0]
        except AssertionError:
            t.join(60)   # the create was too fast to catch: fine, next delay
            continue
        time.sleep(delay)
        try:
            os.kill(victim, signal.SIGKILL)
        except ProcessLookupError:
            pass
        t.join(60)
        assert not t.is_alive()
        if "result" in box and box["result"].status_code == 201:
            api.created.append(parse_json(box["result"])["sandboxId"])
    # every container created by a killed worker is either adopted (listed) or
    # removed; and no slot stays reserved forever
    wait_until(lambda: consistent(st), 30, 0.5,
               what="containers == listed sandboxes after workers died mid-create")

    def fill():
        while len(api.list_ids()) < capacity:
            r = api.request("POST", "/sandbox", json={}, timeout=60)
            if r.status_code != 201:
                return False
            api.created.append(parse_json(r)["sandboxId"])
        return True
    wait_until(fill, 30, 1, what=f"{capacity} sandboxes to fit in the table again (leaked slots?)")
    assert_error(api.request("POST", "/sandbox", json={}), 503, "capacity")
    assert consistent(st)


def test_all_children_killed_are_respawned_and_reaper_still_expires(make_stack):
    st = make_stack("kill-children")
    api = st.api
    kids = idle_children(st)
    for pid in kids:
        os.kill(pid, signal.SIGKILL)
    wait_until(lambda: len(set(st.children()) - set(kids)) >= len(kids), 15,
               what=f"{len(kids)} new children of the master")
    assert st.proc.poll() is None
    sid = api.create(ttl=5)  # room for a create that is slow on a busy machine
    assert api.exec(sid, "echo ok")["stdout"] == "ok\n"
    wait_until(lambda: api.get(sid).status_code == 404 and not docker_exists(f"nanobox-{sid}"),
               20, 0.25, what="the respawned reaper to expire a ttl=5 sandbox")


# -------------------------------------------------------- crash + restart

def test_restart_after_sigkill_keeps_sandboxes_usable(make_stack):
    st = make_stack("restart")
    api = st.api
    info = api.create_info(metadata={"keep": "me"})
    sid = info["sandboxId"]
    api.exec(sid, "echo kept > /workspace/state")
    st.restart()
    assert sid in api.list_ids()
    got = parse_json(api.get(sid))
    assert got["expires_at"] == info["expires_at"]
    assert got["metadata"] == {"keep": "me"}
    assert api.exec(sid, "cat /workspace/state")["stdout"] == "kept\n"
    sid2 = api.create()
    assert sorted(api.list_ids()) == sorted([sid, sid2])
    assert api.delete(sid).status_code == 204
    assert not docker_exists(f"nanobox-{sid}")
    assert consistent(st)


def test_restart_removes_orphan_container(make_stack, orphan_cleanup):
    st = make_stack("orphan")
    api = st.api
    sid = api.create()
    st.crash()
    orphan = run_orphan(st.instance, names=orphan_cleanup)
    st.start_fcgi()
    st.wait_healthy()
    wait_until(lambda: not docker_exists(orphan), 30, 0.5, what=f"orphan {orphan} to be removed")
    assert api.list_ids() == [sid]
    assert api.exec(sid, "echo ok")["stdout"] == "ok\n"


def test_restart_leaves_other_instances_containers_alone(make_stack, orphan_cleanup):
    st = make_stack("other-instance")
    st.api.create()
    foreign = run_orphan("test-someone-else", names=orphan_cleanup)
    unlabelled = f"nanobox-unlabelled-{random_uuid()[:8]}"
    orphan_cleanup.append(unlabelled)
    run(["docker", "run", "-d", "--network", "none", "--name", unlabelled, IMAGE, "sleep", "1000"])
    st.restart()
    wait_reconciled(st.api)
    assert docker_exists(foreign), "reconciliation removed another instance's container"
    assert docker_exists(unlabelled), "reconciliation removed an unlabelled container"


def _volumes(*filters):
    args = ["docker", "volume", "ls", "-q"]
    for f in filters:
        args += ["--filter", f]
    return set(run(args, check=False).stdout.split())


def test_reconciliation_sweeps_the_volumes_sandboxes_left(make_stack):
    """A sandbox's /dev/pts is an anonymous volume, labelled with its
    instance and sandbox, removed with its container. One left behind (a
    `docker rm` without -v, a wedged dockerd) is swept by reconciliation;
    a live sandbox's, another instance's and an unlabelled one stay."""
    st = make_stack("volumes")
    api = st.api
    live = api.create()
    gone = api.create()
    live_vols = _volumes(f"label=nanobox.sandbox={live}")
    gone_vols = _volumes(f"label=nanobox.sandbox={gone}")
    assert len(live_vols) == 1 and len(gone_vols) == 1, (live_vols, gone_vols)
    assert live_vols <= _volumes(f"label=nanobox.instance={st.instance}")
    made = []
    try:
        for labels in ([f"nanobox.instance={st.instance}", "nanobox.sandbox=x"],
                       ["nanobox.instance=test-someone-else", "nanobox.sandbox=x"],
                       [f"nanobox.instance={st.instance}"], []):
            args = ["docker", "volume", "create"]
            for lab in labels:
                args += ["--label", lab]
            made.append(run(args).stdout.strip())
        ours, foreign, not_a_sandboxes, unlabelled = made
        st.crash()
        docker_rm(f"nanobox-{gone}", volumes=False)
        st.start_fcgi()
        st.wait_healthy()
        wait_reconciled(api)
        left = _volumes()
        assert not (gone_vols | {ours}) & left, "unused volumes of this instance's sandboxes stayed"
        assert live_vols <= left, "a live sandbox's /dev/pts volume was removed"
        assert {foreign, not_a_sandboxes, unlabelled} <= left, "a volume not ours was removed"
        assert api.exec(live, "echo ok")["stdout"] == "ok\n"
    finally:
        run(["docker", "volume", "rm", "-f", *made], check=False)


def test_restart_frees_slot_whose_container_vanished(make_stack):
    st = make_stack("vanished", max_sandboxes=1)
    api = st.api
    sid = api.create()
    # reconciliation only judges slots that became RUNNING before the second
    # it lists containers in (state_since has a 1 s resolution)
    time.sleep(1.1)
    st.crash()
    run(["docker", "rm", "-fv", f"nanobox-{sid}"])
    st.start_fcgi()
    st.wait_healthy()
    wait_until(lambda: api.get(sid).status_code == 404, 15, 0.25, what="the vanished sandbox to be 404")
    assert sid not in api.list_ids()
    api.create()    # the only slot is free again


def test_restart_removes_sandbox_that_expired_while_down(make_stack):
    st = make_stack("expired-down")
    api = st.api
    info = api.create_info(ttl=3)
    keep = api.create(ttl=600)
    st.crash()
    time.sleep(max(0, info["expires_at"] + 1.5 - time.time()))
    st.start_fcgi()
    st.wait_healthy()
    wait_until(lambda: api.get(info["sandboxId"]).status_code == 404
               and not docker_exists(f"nanobox-{info['sandboxId']}"), 15, 0.25,
               what="the sandbox that expired while the service was down to be removed")
    assert api.list_ids() == [keep]


def test_restart_honours_an_extended_ttl(make_stack):
    """The nanobox.expires label is written at create; an extension lives in
    the table. Reconciliation must not destroy an extended sandbox."""
    st = make_stack("extended")
    api = st.api
    info = api.create_info(ttl=8)  # the extension must land first, even under load
    sid = info["sandboxId"]
    r = api.request("POST", f"/sandbox/{sid}/timeout", json={"ttl": 120})
    assert r.status_code == 200, r.text
    st.crash()
    time.sleep(max(0, info["expires_at"] + 1.5 - time.time()))
    st.start_fcgi()
    st.wait_healthy()
    wait_reconciled(api)
    assert api.get(sid).status_code == 200, "an extended sandbox was removed at restart"
    assert docker_exists(f"nanobox-{sid}")
    assert api.exec(sid, "echo ok")["stdout"] == "ok\n"


def test_sigterm_finishes_inflight_request_and_keeps_sandboxes(make_stack):
    st = make_stack("sigterm")
    api = st.api
    sid = api.create()
    t, box = in_thread(lambda: api.exec_raw(sid, "sleep 2; echo finished", timeout=30))
    wait_until(st.busy_workers, 5, 0.02, what="a worker busy with the exec")
    time.sleep(0.3)
    kids = st.children()
    os.kill(st.master_pid, signal.SIGTERM)
    t.join(30)
    assert not t.is_alive()
    assert "result" in box, box.get("error")
    r = box["result"]
    assert r.status_code == 200, f"in-flight exec cut by SIGTERM: {r.status_code} {r.text[:200]}"
    assert parse_json(r)["stdout"] == "finished\n"
    try:
        st.proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail("nanobox-fcgi did not exit within 20 s of SIGTERM")
    assert st.proc.returncode == 0, f"exit status {st.proc.returncode} after SIGTERM"
    wait_until(lambda: not any(pid_alive(p) for p in kids), 10, what="children to exit")
    assert docker_exists(f"nanobox-{sid}"), "SIGTERM destroyed a sandbox"
    st.start_fcgi()
    st.wait_healthy()
    assert api.list_ids() == [sid]
    assert api.exec(sid, "echo back")["stdout"] == "back\n"


def test_requests_during_restart_get_an_answer(make_stack):
    st = make_stack("flap")
    api = st.api
    st.crash()
    r = requests.get(st.url + "/healthz", timeout=10)
    assert r.status_code in (502, 503, 504)    # nginx: upstream down
    st.start_fcgi()
    st.wait_healthy()
    assert api.request("GET", "/sandbox").status_code == 200


# ------------------------------------------- container deaths (Docker's events)

@pytest.mark.parametrize("how", ["init-killed", "docker-kill"])
def test_a_dead_container_is_seen_at_once(make_stack, how):
    """A sandbox whose container died (its PID 1 SIGKILLed from the host,
    or `docker kill`) answers 404 within a second or so, not at the next
    reconciliation (every 30 s): the events follower saw Docker's `die`
    and destroyed it by the reaper's own path. Its port is closed and its
    forwarder gone, its container removed, its slot free (a create at
    max_sandboxes goes through), and the other sandbox untouched."""
    st = make_stack(f"events-{how}", max_sandboxes=2)
    api = st.api
    keep = api.create()
    sid = api.create()
    assert api.exec(sid, "echo up > /workspace/f; cat /workspace/f")["stdout"] == "up\n"
    hostport = api.open_port(sid, 8000)["hostport"]
    assert wait_until(lambda: not tcp_refused(hostport), 5, what="the forwarder to listen")
    fwds = st.fwd_pids()
    assert fwds, "no forwarder for the open port"
    assert_error(api.request("POST", "/sandbox", json={}), 503, "capacity")
    name = f"nanobox-{sid}"
    # the reconciliation that follows start-up (its first and third passes)
    # must be behind us, so that only the events can be what sees the death
    wait_reconciled(api)
    if how == "init-killed":
        init = int(run(["docker", "inspect", "-f", "{{.State.Pid}}", name]).stdout.strip())
        assert init > 0
        os.kill(init, signal.SIGKILL)
    else:
        run(["docker", "kill", name])
    t0 = time.monotonic()
    # bounded generously (3 s): the old behaviour waited for the next
    # reconciliation, up to 30 s
    wait_until(lambda: api.get(sid).status_code == 404, 3, 0.05,
               what=f"GET /sandbox/{sid} to answer 404 after its container died")
    seen = time.monotonic() - t0
    assert_error(api.get(sid), 404, "not_found")
    assert_error(api.exec_raw(sid, "true"), 404, "not_found")
    assert sid not in api.list_ids()
    wait_until(lambda: not docker_exists(name), 5, 0.1, what=f"container {name} to be removed")
    wait_until(lambda: tcp_refused(hostport), 5, 0.1, what=f"port {hostport} to close")
    wait_until(lambda: not any(pid_alive(p) for p in fwds), 5, 0.1,
               what=f"forwarders {fwds} to end")
    # the slot is free: a create at max_sandboxes works
    new = api.create()
    assert api.exec(new, "echo new")["stdout"] == "new\n"
    assert api.exec(keep, "echo kept")["stdout"] == "kept\n"
    with open(st.log_path, errors="replace") as f:
        log = f.read()
    assert f"sandbox {sid}: its container died (Docker event)" in log, tail(st.log_path)
    print(f"{how}: 404 after {seen:.2f} s")


def test_an_oom_of_one_process_keeps_the_sandbox(make_stack):
    """Docker's `oom` event also comes when the kernel kills one process of
    a container whose PID 1 lives on: that sandbox is kept (the follower
    asks Docker whether the container still runs)."""
    st = make_stack("events-oom")
    api = st.api
    sid = api.create()
    # every byte written: the kernel's OOM killer ends it (SIGKILL, 137), and
    # Docker reports an `oom` of the container
    r = api.exec_raw(sid, "python3 -c \"s = ' ' * (1 << 30)\"; echo rc=$?", timeout=60)
    assert r.status_code == 200, r.text
    assert "rc=137" in parse_json(r)["stdout"], parse_json(r)
    wait_until(lambda: "Docker event oom of container" in open(st.log_path, errors="replace").read(),
               5, 0.1, what="the events follower to log the oom (log_level debug)")
    time.sleep(0.5)  # what it did about it is done
    assert api.get(sid).status_code == 200
    assert api.exec(sid, "echo alive")["stdout"] == "alive\n"
