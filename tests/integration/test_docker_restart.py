"""A restart of dockerd under a live sandbox (what an upgrade of docker.io
does): with Docker's live-restore on, which src/setup/common.sh turns on
(nb_docker_live_restore, called by nb_start_dockerd), the sandbox rides
through the gap, and nanobox with it.

This stops the machine's real dockerd (SIGTERM to its pid) and starts it
again the way src/setup/common.sh does (nb_start_dockerd), so it is marked
serial: tests/run.sh runs it after the parallel pass, alone. dockerd is
started again whatever happens (finally), and the test ends only once it
answers. The gap lasts a few seconds.

Skipped where dockerd runs without live-restore: without it the restart
would stop every container, which is what this guards against (run
src/setup/up.sh, or nb_start_dockerd from src/setup/common.sh, once).
"""

import json
import os
import signal
import subprocess
import time

import pytest
import requests

import nbtest
from nbtest import assert_error, docker_inspect, in_thread, parse_json, pid_alive, random_uuid, wait_until

pytestmark = pytest.mark.serial

COMMON = nbtest.REPO / "src" / "setup" / "common.sh"
TICKS = 15  # the streamed command's seconds: longer than the gap


def common_sh(fn, timeout=120):
    """Run a function of src/setup/common.sh (as the setup scripts do)."""
    return subprocess.run(["bash", "-c", f'. "{COMMON}" && {fn}'], capture_output=True,
                          text=True, timeout=timeout)


def docker_answers():
    return nbtest.run(["docker", "version", "--format", "{{.Server.Version}}"], check=False,
                      timeout=10).returncode == 0


def live_restore_on():
    r = nbtest.run(["docker", "info", "--format", "{{.LiveRestoreEnabled}}"], check=False, timeout=30)
    return r.stdout.strip() == "true"


@pytest.fixture
def dockerd():
    """The pid of the dockerd serving the default socket. At the end dockerd
    is started again if it is not there, and waited for."""
    if not live_restore_on():
        pytest.skip("dockerd runs without live-restore: src/setup/up.sh (nb_start_dockerd) turns it on")
    r = common_sh("nb_dockerd_pid", timeout=30)
    if r.returncode != 0:
        pytest.skip("cannot tell which dockerd serves the engine (no /var/run/docker.pid, "
                    "several dockerd processes)")
    yield int(r.stdout.strip())
    if not docker_answers():
        r = common_sh("nb_start_dockerd")
        assert r.returncode == 0, f"dockerd did not start again:\n{r.stderr[-3000:]}"
    wait_until(docker_answers, 60, 0.5, what="dockerd to answer again")


def stream_exec(api, sid, cmd, events):
    """A streamed exec, read to its end: its NDJSON events go to events as
    they arrive."""
    r = requests.post(api.base + f"/sandbox/{sid}/exec", data=json.dumps({"command": cmd, "stream": True}),
                      headers=api.headers(headers={"Content-Type": "application/json"}),
                      stream=True, timeout=120)
    assert r.status_code == 200, r.text[:300]
    for line in r.iter_lines():
        if line:
            events.append(json.loads(line))
    return events


def log_since(st, offset):
    with open(st.log_path, "rb") as f:
        f.seek(offset)
        return f.read().decode("utf-8", "replace")


def fetch(url, host=None):
    try:
        r = requests.get(url, headers={"Host": host} if host else {}, timeout=5)
    except requests.RequestException as e:
        return f"<{e}>"
    return r.text if r.status_code == 200 else f"<{r.status_code}>"


def test_sandbox_file_port_process_and_stream_survive_a_restart_of_dockerd(api, stack, dockerd):
    sid = api.create(ttl=1800)
    token = f"kept across the restart {random_uuid()}\n"
    r = api.request("PUT", f"/sandbox/{sid}/files?path=/workspace/keep.txt", data=token,
                    headers={"Content-Type": "application/octet-stream"})
    assert r.status_code in (200, 201), r.text
    r = api.exec_raw(sid, "exec python3 -m http.server 8000 --bind 127.0.0.1 --directory /workspace",
                     background=True)
    assert r.status_code == 201, r.text
    server = parse_json(r)["pid"]
    port = api.open_port(sid, 8000)
    host_url = f"http://127.0.0.1:{port['hostport']}/keep.txt"
    nginx_host = stack.port_host(sid, 8000)
    wait_until(lambda: fetch(host_url) == token, 15, what="the server to answer through the host port")
    assert fetch(f"{stack.url}/keep.txt", nginx_host) == token
    init_pid = docker_inspect(f"nanobox-{sid}")["State"]["Pid"]

    # a streamed exec that runs across the whole gap
    events = []
    t, box = in_thread(lambda: stream_exec(
        api, sid, f"for i in $(seq 1 {TICKS}); do echo tick $i; sleep 1; done; echo done", events))
    wait_until(lambda: events, 10, what="the streamed command's first line")

    log_at = stack.log_size()
    gap_start = time.monotonic()
    try:
        os.kill(dockerd, signal.SIGTERM)
        wait_until(lambda: not pid_alive(dockerd) and not docker_answers(), 30, 0.1,
                   what=f"dockerd (pid {dockerd}) to stop")
        # Docker is away: what needs it answers 503, what does not works
        assert_error(api.request("POST", "/sandbox", json={}, timeout=60), 503, "docker_unavailable")
        assert_error(api.delete(sid), 503, "docker_unavailable")
        assert api.exec(sid, "cat /workspace/keep.txt")["stdout"] == token
        assert api.get(sid).status_code == 200
        assert fetch(host_url) == token
        wait_until(lambda: "reconciliation skipped" in log_since(stack, log_at), 10,
                   what="the reaper to notice Docker is away")
    finally:
        r = common_sh("nb_start_dockerd")
    gap = time.monotonic() - gap_start
    print(f"dockerd was away {gap:.1f} s")
    assert r.returncode == 0, f"dockerd did not start again:\n{r.stderr[-3000:]}"
    assert docker_answers()

    # the reaper reconciled with the Docker that came back, and kept the sandbox
    wait_until(lambda: "Docker answers again: reconciled" in log_since(stack, log_at), 15,
               what="a reconciliation after dockerd's return")
    assert sid in api.list_ids()
    state = docker_inspect(f"nanobox-{sid}")["State"]
    assert state["Running"] and state["Pid"] == init_pid, state
    r = api.request("GET", f"/sandbox/{sid}/files?path=/workspace/keep.txt")
    assert r.status_code == 200 and r.text == token, r.text[:300]
    assert fetch(host_url) == token
    assert fetch(f"{stack.url}/keep.txt", nginx_host) == token
    p = parse_json(api.request("GET", f"/sandbox/{sid}/processes/{server}"))
    assert p["pid"] == server and p["running"], p
    t.join(TICKS + 60)
    assert "error" not in box, box.get("error")
    out = "".join(e.get("data", "") for e in events if e["type"] == "stdout")
    assert out == "".join(f"tick {i}\n" for i in range(1, TICKS + 1)) + "done\n", out
    assert events[-1]["type"] == "exit" and events[-1]["exit_code"] == 0, events[-3:]
    # and Docker works for nanobox again
    other = api.create()
    assert api.exec(other, "echo back")["stdout"] == "back\n"
    assert api.delete(sid).status_code == 204
    assert gap < 60, f"dockerd was away {gap:.0f} s"
