"""Fork: POST /sandbox/{id}/fork copies a live sandbox's files (/workspace,
/tmp, and what a root wrote into its image), env and metadata into N new
sandboxes in one call; processes restart (no CRIU on this kernel). The
hostile-tenant probes: another key's sandbox is 404, a quota that cannot
hold N is 429 with nothing made, snapshot_max is honoured, and a fork that
fails midway leaves no container, template or scratch file behind.
"""

import os
import secrets

import nbtest
from nbtest import assert_error, parse_json
from test_keys import KeyApi, add_key


def fork(api, sid, timeout=300, **body):
    return api.request("POST", f"/sandbox/{sid}/fork", json=body, timeout=timeout)


def forked(api, sid, **body):
    r = fork(api, sid, **body)
    assert r.status_code == 201, r.text
    out = parse_json(r)
    api.created.extend(s["sandboxId"] for s in out["sandboxes"])
    return out


def scratch(st):
    work = os.path.join(os.path.dirname(st.state), "sandbox", "templates")  # sandbox_dir's
    return [n for n in os.listdir(work) if n.startswith("fork-")] if os.path.isdir(work) else []


def templates(api):
    return len(parse_json(api.request("GET", "/templates"))["templates"])


def test_fork_copies_files_env_and_metadata_into_n_sandboxes(api, stack):
    sid = api.create(env={"FOO": "bar baz", "PATH": "/usr/bin:/bin:/x"},
                     metadata={"who": "parent"})
    res = api.exec(sid, "mkdir -p /workspace/d && echo kept > /workspace/d/f && "
                        "ln -s d/f /workspace/l && chmod 0640 /workspace/d/f && "
                        "echo t > /tmp/t.txt && (sleep 1000 &) ; echo ok")
    assert res["exit_code"] == 0, res
    n0 = templates(api)
    out = forked(api, sid, count=2, ttl=120)
    assert out["parent"] == sid
    kids = [s["sandboxId"] for s in out["sandboxes"]]
    assert len(set(kids)) == 2 and sid not in kids
    for k, info in zip(kids, out["sandboxes"]):
        assert info["metadata"] == {"who": "parent"}
        assert info["status"] == "running"
        assert 100 <= info["ttl_remaining"] <= 120
        res = api.exec(k, "cat /workspace/l /tmp/t.txt; stat -c '%a' /workspace/d/f; "
                          "echo \"$FOO|$PATH\"; test \"$(stat -c %u /workspace/d/f)\" = \"$(id -u)\" "
                          "&& echo mine; pgrep -x sleep || echo no-procs")
        assert res["stdout"] == "kept\nt\n640\nbar baz|/usr/bin:/bin:/x\nmine\nno-procs\n", res
        assert parse_json(api.get(k))["metadata"] == {"who": "parent"}
    # the forks are apart: a write in one is in neither the other nor the parent
    api.exec(kids[0], "echo one > /workspace/only")
    assert api.exec(kids[1], "test -e /workspace/only; echo $?")["stdout"] == "1\n"
    assert api.exec(sid, "test -e /workspace/only; echo $?")["stdout"] == "1\n"
    # the parent runs on, processes and all; no template was made; no scratch left
    assert parse_json(api.get(sid))["status"] == "running"
    assert api.exec(sid, "pgrep -x sleep >/dev/null && echo alive")["stdout"] == "alive\n"
    assert templates(api) == n0
    assert scratch(stack) == []


def test_fork_of_a_paused_sandbox_leaves_it_paused(api):
    sid = api.create()
    api.exec(sid, "echo p > /workspace/p")
    assert api.request("POST", f"/sandbox/{sid}/pause").status_code == 200
    kid = forked(api, sid)["sandboxes"][0]["sandboxId"]
    assert parse_json(api.get(sid))["status"] == "paused"
    assert api.exec(kid, "cat /workspace/p")["stdout"] == "p\n"


def test_bad_input_and_unknown_or_killed_sandboxes(api):
    sid = api.create()
    assert_error(fork(api, "00000000-0000-4000-8000-000000000000"), 404, "not_found")
    assert fork(api, "not-an-id").status_code == 400
    for bad in ({"count": 0}, {"count": 11}, {"ttl": 0}):
        assert_error(fork(api, sid, **bad), 422, "out_of_range")
    assert_error(fork(api, sid, count="2"), 400, "bad_field")
    assert_error(fork(api, sid, other=1), 400, "bad_field")
    assert api.delete(sid).status_code == 204
    assert_error(fork(api, sid), 404, "not_found")


def test_hostile_tenants_quota_and_midway_failure(make_stack):
    """Another key's sandbox is not found; a quota that cannot hold N is 429
    and nothing is made; a fork that fails midway (the machine has no slot
    for its last sandbox) destroys the ones it made and leaves nothing."""
    st = make_stack("forkq", max_sandboxes="3")
    alice = KeyApi(st, add_key(st, "alice", "--max-sandboxes", "2"))
    bob = KeyApi(st, add_key(st, "bob"))
    try:
        a = alice.create()
        alice.exec(a, "echo secret > /workspace/s")
        assert_error(fork(bob, a), 404, "not_found")
        assert_error(bob.request("POST", f"/sandbox/{a}/snapshot", json={}), 404, "not_found")
        before = set(nbtest.docker_ps(st.instance))
        assert_error(fork(alice, a, count=2), 429, "quota")
        assert set(nbtest.docker_ps(st.instance)) == before
        # bob: one sandbox and a fork of 3 where the machine holds 3 in all
        b = bob.create()
        n0 = templates(bob)
        before = set(nbtest.docker_ps(st.instance))
        r = fork(bob, b, count=3)
        assert r.status_code in (429, 503), r.text
        assert set(nbtest.docker_ps(st.instance)) == before
        assert bob.list_ids() == [b]
        assert templates(bob) == n0
        assert scratch(st) == []
        # once there is room, the fork works
        kid = forked(bob, b, count=1)["sandboxes"][0]["sandboxId"]
        assert bob.exec(kid, "cat /workspace/s 2>&1 || true")["stdout"].startswith("cat:")
    finally:
        alice.cleanup()
        bob.cleanup()


def test_fork_over_snapshot_max_is_413_and_leaves_nothing(make_stack):
    st = make_stack("forkcap", snapshot_max="1m")
    api = st.api
    sid = api.create()
    api.request("PUT", f"/sandbox/{sid}/files?path=/workspace/big.bin", data=os.urandom(1_200_000))
    before = set(nbtest.docker_ps(st.instance))
    assert_error(fork(api, sid), 413, "too_large")
    assert set(nbtest.docker_ps(st.instance)) == before
    assert scratch(st) == []
    assert parse_json(api.get(sid))["status"] == "running"


def test_fork_keeps_what_a_root_wrote_into_its_image(make_stack):
    st = make_stack("forkroot", root_templates="nanobox")
    api = st.api
    sid = api.create()
    res = api.exec(sid, "sudo sh -c 'set -e; rm /etc/debian_version; rm -r /usr/share/doc/bash; "
                        "mkdir /usr/share/doc/bash; echo new > /usr/share/doc/bash/only; "
                        "echo mine > /opt/fromroot; chmod 0640 /opt/fromroot; "
                        # files named as whiteouts of "." and "..": never a way out of
                        # the image (from the container's root, ".." is the host's)
                        "touch /.wh... /.wh.. /opt/.wh... /opt/.wh..' && "
                        "echo user-file > /workspace/u.txt")
    assert res["exit_code"] == 0, res
    kid = forked(api, sid)["sandboxes"][0]["sandboxId"]
    res = api.exec(kid, "test -e /etc/debian_version && echo present; ls -A /usr/share/doc/bash; "
                        "sudo stat -c '%U %a %s' /opt/fromroot; cat /workspace/u.txt; "
                        "ls -A /etc /usr/share/doc | grep -c '^\\.wh\\.'; ls /opt /bin | wc -l")
    assert res["stdout"].startswith("only\nroot 640 5\nuser-file\n0\n"), res
    assert int(res["stdout"].split()[-1]) > 10, res  # /opt and /bin there, nothing removed
    # the parent's container is whole (its overlay directories are the host's)
    assert api.exec(sid, "ls /bin | wc -l")["stdout"].strip() != "0"
    # the fork has the parent's root too (same image, same template)
    assert api.exec(kid, "sudo id -u")["stdout"] == "0\n"
    assert scratch(st) == []
    name = "f-" + secrets.token_hex(3)
    assert name not in {t["name"] for t in parse_json(api.request("GET", "/templates"))["templates"]}


def test_fork_and_snapshot_of_a_root_resumed_after_a_pause_without_memory(make_stack):
    """A root sandbox paused without its memory runs, once resumed, from its
    pause image: what root wrote before the pause is that image's, not its
    new container's layer. A fork and a snapshot keep both, with what was
    changed or removed since the resume as it is now."""
    st = make_stack("forkcold", root_templates="nanobox")
    api = st.api
    sid = api.create(ttl=600)
    res = api.exec(sid, "sudo sh -c 'set -e; echo before > /etc/x; rm /etc/debian_version; "
                        "echo v1 > /etc/m; echo z > /etc/z; mkdir /opt/d; echo 1 > /opt/d/f; "
                        "mkdir /opt/k; echo k > /opt/k/kept' && echo ws > /workspace/w")
    assert res["exit_code"] == 0, res
    for path in ("pause", "resume"):
        body = {"keep_memory": False} if path == "pause" else None
        r = api.request("POST", f"/sandbox/{sid}/{path}", json=body)
        assert r.status_code == 200, r.text
    res = api.exec(sid, "sudo sh -c 'set -e; echo after > /opt/y; echo v2 > /etc/m; rm /etc/z; "
                        "rm -r /opt/d; mkdir /opt/d; echo 2 > /opt/d/g; echo k2 > /opt/k/new'")
    assert res["exit_code"] == 0, res
    want = "before\nafter\nv2\nz-gone\ndeb-gone\ng\nk2\nk\nws\n"
    check = ("cat /etc/x /opt/y /etc/m; test -e /etc/z || echo z-gone; "
             "test -e /etc/debian_version || echo deb-gone; ls /opt/d; cat /opt/k/new /opt/k/kept; "
             "cat /workspace/w")
    assert api.exec(sid, check)["stdout"] == want  # the parent itself
    kid = forked(api, sid)["sandboxes"][0]["sandboxId"]
    res = api.exec(kid, check)
    assert res["stdout"] == want, res
    r = api.request("POST", f"/sandbox/{sid}/snapshot", json={"name": "coldroot"}, timeout=300)
    assert r.status_code == 201, r.text
    new = api.create(template="coldroot")
    res = api.exec(new, check)
    assert res["stdout"] == want, res
    # and a second pause without memory builds on the template's image again, all of it kept
    for path in ("pause", "resume"):
        body = {"keep_memory": False} if path == "pause" else None
        assert api.request("POST", f"/sandbox/{sid}/{path}", json=body).status_code == 200
    assert api.exec(sid, check)["stdout"] == want
    kid = forked(api, sid)["sandboxes"][0]["sandboxId"]
    assert api.exec(kid, check)["stdout"] == want
    assert scratch(st) == []
    for s in (new, kid):
        api.delete(s)
    assert api.request("DELETE", "/templates/coldroot").status_code == 204


def test_cli_fork_and_the_mcp_tool(api, stack, tmp_path):
    from test_cli import Cli
    from test_mcp import http_call, http_initialize
    sid = api.create(metadata={"m": "1"})
    api.exec(sid, "echo via-tools > /workspace/x")
    cli = Cli(stack, api, tmp_path)
    r = cli.ok("fork", sid, "--count", "2", "--ttl", "60")
    kids = r.stdout.split()
    api.created.extend(kids)
    assert len(kids) == 2 and all(nbtest.UUID_RE.match(k) for k in kids), r.stdout
    assert api.exec(kids[1], "cat /workspace/x")["stdout"] == "via-tools\n"
    r = cli.run("fork", sid, "--count", "0")
    assert r.returncode == 2, r.stderr
    session = http_initialize(stack).headers["Mcp-Session-Id"]
    res = http_call(stack, session, "sandbox_fork", {"sandbox_id": sid, "count": 1})
    assert not res.get("isError"), res
    kid = res["structuredContent"]["sandboxes"][0]["sandboxId"]
    api.created.append(kid)
    assert kid in res["content"][0]["text"] and "not copied" in res["content"][0]["text"]
    assert api.exec(kid, "cat /workspace/x")["stdout"] == "via-tools\n"
    res = http_call(stack, session, "sandbox_fork", {"sandbox_id": kids[0], "count": 99})
    assert res.get("isError") and "fork_max" in res["content"][0]["text"], res
