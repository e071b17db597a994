"""Templates: images built from a Dockerfile through the API (POST
/templates), their status, build log, sandboxes created from them, their
removal, every refused input, and a restart of nanobox-fcgi during a build.

Every build here is FROM nanobox:latest and a step or two, so a build
takes a few seconds. Images a stack built carry its instance label and go
when the stack stops (Stack.stop), whatever the test's outcome.
"""

import base64
import json
import secrets
import time

import pytest
import requests

import nbtest
from nbtest import assert_error, docker_inspect, docker_exists, parse_json, wait_until

BASE = nbtest.IMAGE
SMALL = f"FROM {BASE}\nRUN echo hi > /etc/tpl-marker\nCOPY hello.txt /opt/hello.txt\n"


def name():
    return "t-" + secrets.token_hex(4)


def b64(data):
    return base64.b64encode(data if isinstance(data, bytes) else data.encode()).decode()


def submit(api, nm, dockerfile, files=None, **extra):
    body = {"name": nm, "dockerfile": dockerfile, **extra}
    if files is not None:
        body["files"] = files
    return api.request("POST", "/templates", json=body)


def get(api, nm):
    return api.request("GET", f"/templates/{nm}")


def wait_done(api, nm, timeout=180):
    """The template once it is no longer building."""
    def done():
        r = get(api, nm)
        assert r.status_code == 200, r.text
        t = parse_json(r)
        return t if t["status"] != "building" else None
    return wait_until(done, timeout=timeout, interval=0.3, what=f"template {nm} to finish")


def build_ready(api, nm, dockerfile=SMALL, files=None):
    if files is None and "hello.txt" in dockerfile:
        files = {"hello.txt": b64("hello from the template\n")}
    r = submit(api, nm, dockerfile, files)
    assert r.status_code == 202, r.text
    t = wait_done(api, nm)
    assert t["status"] == "ready", t
    return t


def logs(api, nm, follow=False, timeout=120):
    r = api.request("GET", f"/templates/{nm}/logs" + ("?follow=1" if follow else ""),
                    timeout=timeout)
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"].startswith("application/x-ndjson")
    return [json.loads(line) for line in r.text.splitlines() if line.strip()]


def template_images(instance):
    out = nbtest.run(["docker", "images", "-aq", "--filter", f"label=nanobox.instance={instance}"],
                     check=False).stdout.split()
    return set(out)


# ------------------------------------------------------------- the life of one

def test_build_then_create_exec_and_delete(api, stack):
    nm = name()
    r = submit(api, nm, SMALL, {"hello.txt": b64("hello from the template\n")})
    assert r.status_code == 202, r.text
    t = parse_json(r)
    assert t["name"] == nm and t["status"] == "building" and t["kind"] == "build"
    # the image's name says nothing of the template's: a keyed hash of owner and name
    assert nm not in t["image"] and len(t["image"].rsplit(":", 1)[1]) == 32
    assert t["digest"] is None

    t = wait_done(api, nm)
    assert t["status"] == "ready", t
    assert t["size"] > 0 and t["digest"].startswith("sha256:") and t["error"] is None
    assert abs(t["created_at"] - time.time()) < 600
    labels = docker_inspect(t["image"])["Config"]["Labels"]
    assert labels["nanobox.template"] == nm and labels["nanobox.status"] == "ready"
    assert labels["nanobox.instance"] == stack.instance

    # the listing: the operator's images first (always ready), then this one
    listed = parse_json(api.request("GET", "/templates"))["templates"]
    by = {x["name"]: x for x in listed}
    assert by["nanobox"]["kind"] == "image" and by["nanobox"]["status"] == "ready"
    assert by["nanobox"]["image"] == BASE
    assert by[nm]["status"] == "ready" and by[nm]["digest"] == t["digest"]

    lines = logs(api, nm)
    assert any("Step" in x.get("stream", "") for x in lines), lines
    assert lines[-1] == {"status": "ready"}
    # nanobox's labels are one build step after the Dockerfile's (Docker makes one of each
    # label passed to /build): FROM, RUN, COPY, LABEL
    steps = [x["stream"] for x in lines if x.get("stream", "").startswith("Step ")]
    assert len(steps) == 4 and steps[-1].startswith("Step 4/4 : LABEL nanobox.instance="), steps

    info = api.create_info(template=nm)
    assert info["image"] == t["image"]
    sid = info["sandboxId"]
    assert api.exec(sid, "cat /etc/tpl-marker")["stdout"] == "hi\n"
    assert api.exec(sid, "cat /opt/hello.txt")["stdout"] == "hello from the template\n"
    # the image allow-list holds the ready template too
    sid2 = api.create(image=t["image"])
    assert api.exec(sid2, "cat /etc/tpl-marker")["stdout"] == "hi\n"

    # in use: refused, then removed once its sandboxes are gone
    assert_error(api.request("DELETE", f"/templates/{nm}"), 409, "in_use")
    assert api.delete(sid).status_code == 204
    assert api.delete(sid2).status_code == 204
    assert api.request("DELETE", f"/templates/{nm}").status_code == 204
    assert_error(get(api, nm), 404, "not_found")
    assert not docker_exists(t["image"])
    assert_error(api.request("POST", "/sandbox", json={"template": nm}), 404, "not_found")


def test_force_delete_leaves_running_sandboxes_alone(api):
    nm = name()
    t = build_ready(api, nm)
    sid = api.create(template=nm)
    r = api.request("DELETE", f"/templates/{nm}?force=1")
    assert r.status_code == 204, r.text
    assert_error(get(api, nm), 404, "not_found")
    assert api.exec(sid, "cat /etc/tpl-marker")["stdout"] == "hi\n"
    assert not docker_exists(t["image"])


def test_follow_streams_the_log_until_the_build_ends(api):
    nm = name()
    # The name in the RUN line makes it a step no earlier build cached
    # (a cached step prints no output and takes no time), and the output
    # is looked for on lines of its own, not in the "Step 2/2 : RUN ..."
    # line that names both words.
    df = f"FROM {BASE}\nRUN echo first-line-{nm} && sleep 2 && echo second-line-{nm}\n"
    assert submit(api, nm, df).status_code == 202
    t0 = time.monotonic()
    lines = logs(api, nm, follow=True)
    out = [x.get("stream", "").strip() for x in lines]
    assert f"first-line-{nm}" in out and f"second-line-{nm}" in out, lines
    assert lines[-1] == {"status": "ready"}
    assert time.monotonic() - t0 >= 1.5, "follow answered before the build ended"
    assert get(api, nm).json()["status"] == "ready"


def test_failing_run_is_failed_with_the_log_tail(api):
    nm = name()
    df = f"FROM {BASE}\nRUN echo boom-output && exit 3\n"
    assert submit(api, nm, df).status_code == 202
    t = wait_done(api, nm)
    assert t["status"] == "failed"
    assert "non-zero code: 3" in t["error"], t
    assert "boom-output" in t["log_tail"], t
    assert t["digest"] is None and t["size"] == 0
    lines = logs(api, nm)
    assert lines[-1]["status"] == "failed" and lines[-1]["error"] == t["error"]
    assert_error(api.request("POST", "/sandbox", json={"template": nm}), 409, "not_ready")
    assert_error(submit(api, nm, SMALL), 409, "name_taken")
    assert api.request("DELETE", f"/templates/{nm}").status_code == 204
    assert_error(get(api, nm), 404, "not_found")


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("bad", ["", "A", "-x", ".x", "x" * 64, "a/b", "a b", "é"])
def test_bad_name_is_400(api, bad):
    assert_error(submit(api, bad, SMALL), 400, "bad_name")


@pytest.mark.parametrize("df", [
    "FROM debian:bookworm\nRUN true\n",
    f"FROM {BASE} AS one\nRUN true\nFROM alpine\nCOPY --from=one /etc/hostname /x\n",
    f"ARG BASE={BASE}\nFROM $BASE\n",
    f"ARG B=nanobox\nFROM ${{B}}:latest\n",
    "FROM \\\n  debian\n",
    "# escape=`\nFROM `\n  debian\n",
    "from ubuntu\n",
    "FROM --platform=linux/amd64 debian\n",
], ids=["other", "second-stage", "arg", "arg-braces", "continued", "escape", "lowercase",
        "platform"])
def test_disallowed_from_is_403(api, stack, df):
    before = template_images(stack.instance)
    assert_error(submit(api, name(), df), 403, "from_forbidden")
    assert template_images(stack.instance) == before


def test_other_bad_input_changes_nothing(api, stack):
    before = template_images(stack.instance)
    listed = parse_json(api.request("GET", "/templates"))["templates"]
    nm = name()
    assert_error(submit(api, nm, "RUN true\n# FROM nanobox\n"), 400, "bad_dockerfile")
    # ends inside a continued line: the labels' LABEL line would be part of its RUN
    r = submit(api, nm, f"FROM {BASE}\nRUN true \\\n\n")
    assert_error(r, 400, "bad_dockerfile")
    assert "continued line" in r.json()["error"], r.text
    assert_error(submit(api, nm, SMALL, {"../x": b64("x")}), 400, "bad_path")
    assert_error(submit(api, nm, SMALL, {"/etc/x": b64("x")}), 400, "bad_path")
    assert_error(submit(api, nm, SMALL, {"Dockerfile": b64("x")}), 400, "bad_path")
    assert_error(submit(api, nm, SMALL, {"a.txt": "%%% not base64"}), 400, "bad_field")
    assert_error(submit(api, nm, SMALL, {"a.txt": 3}), 400, "bad_field")
    many = {f"f{i}.txt": b64("x") for i in range(1025)}
    r = submit(api, nm, SMALL, {"hello.txt": b64("hi\n"), **many})
    assert_error(r, 400, "bad_field")
    assert "at most 1024 entries" in r.json()["error"], r.text
    assert_error(api.request("POST", "/templates", json={"name": nm}), 400, "bad_field")
    assert_error(submit(api, nm, SMALL, memory="100g"), 422, "out_of_range")
    assert_error(submit(api, nm, SMALL, cpus=1000), 422, "out_of_range")
    assert_error(submit(api, "nanobox", SMALL), 409, "name_taken")
    assert_error(api.request("POST", "/sandbox", json={"template": "no-such"}), 404, "not_found")
    assert_error(api.request("POST", "/sandbox", json={"template": "nanobox", "image": BASE}),
                 400, "bad_field")
    assert_error(api.request("DELETE", "/templates/nanobox"), 403, "forbidden")
    assert_error(api.request("DELETE", "/templates/no-such"), 404, "not_found")
    assert_error(api.request("GET", "/templates/no-such/logs"), 404, "not_found")
    assert_error(api.request("PUT", "/templates/x"), 405, "method_not_allowed")
    assert parse_json(api.request("GET", "/templates"))["templates"] == listed
    assert template_images(stack.instance) == before


def test_create_from_an_operator_image_template(api):
    sid = api.create(template="nanobox")
    assert api.get(sid).json()["image"] == BASE


def test_stage_names_are_allowed_as_from(api):
    nm = name()
    df = (f"FROM {BASE} AS build\nRUN echo staged > /tmp/out\n"
          f"FROM build\nRUN cp /tmp/out /etc/staged\n")
    build_ready(api, nm, df)
    sid = api.create(template=nm)
    assert api.exec(sid, "cat /etc/staged")["stdout"] == "staged\n"


def test_a_context_of_as_many_files_as_e2b_takes_builds(api):
    """1024 files, E2B's limit of one build's context: a cluster sends an
    E2B build on to the other nodes as this request, so it takes as many."""
    nm = name()
    files = {f"d/f{i}.txt": b64(f"{i}\n") for i in range(1023)}
    files["hello.txt"] = b64("hi\n")
    build_ready(api, nm, SMALL + "COPY d /opt/d\n", files)
    sid = api.create(template=nm)
    out = api.exec(sid, "ls /opt/d | wc -l; cat /opt/d/f1022.txt")["stdout"]
    assert out == "1023\n1022\n", out


def test_name_taken_while_building_and_delete_refused(api):
    nm = name()
    assert submit(api, nm, f"FROM {BASE}\nRUN sleep 3\n").status_code == 202
    assert_error(submit(api, nm, SMALL), 409, "name_taken")
    assert_error(api.request("DELETE", f"/templates/{nm}"), 409, "building")
    assert wait_done(api, nm)["status"] == "ready"


# ------------------------------------------------------- the operator's knobs

def test_context_over_the_cap_is_413(make_stack):
    st = make_stack("tpl-cap", template_context_max="8k")
    api = st.api
    before = template_images(st.instance)
    assert_error(submit(api, name(), SMALL, {"hello.txt": b64(b"x" * 16384)}), 413, "too_large")
    assert_error(submit(api, name(), SMALL + "#" * 16384 + "\n"), 413, "too_large")
    assert template_images(st.instance) == before


def test_template_from_and_network_none(make_stack):
    st = make_stack("tpl-knobs", template_from="nanobox-python:latest nanobox",
                    template_network="none", template_builds_max="1")
    api = st.api
    nm = name()
    # RUN steps see no network interface but loopback
    build_ready(api, nm, f"FROM {BASE}\nRUN ! grep -q eth0 /proc/net/dev\n")
    assert_error(submit(api, name(), "FROM debian\n"), 403, "from_forbidden")


def test_builds_beyond_the_max_wait_their_turn(make_stack):
    st = make_stack("tpl-queue", template_builds_max="1")
    api = st.api
    a, b = name(), name()
    assert submit(api, a, f"FROM {BASE}\nRUN sleep 3\n").status_code == 202
    assert submit(api, b, f"FROM {BASE}\nRUN echo b\n").status_code == 202
    wait_until(lambda: logs(api, a), timeout=30, what="the first build to start")
    assert logs(api, b) == [], "the second build started beside the first"
    assert get(api, b).json()["status"] == "building"
    assert wait_done(api, a)["status"] == "ready"
    assert wait_done(api, b)["status"] == "ready"


def test_restart_during_a_build_marks_it_failed(make_stack):
    st = make_stack("tpl-restart")
    api = st.api
    ready, cut = name(), name()
    t = build_ready(api, ready)
    assert submit(api, cut, f"FROM {BASE}\nRUN echo started && sleep 60\n").status_code == 202
    wait_until(lambda: any("started" in x.get("stream", "") for x in logs(api, cut)),
               timeout=60, what="the long build to run its step")
    st.restart()
    c = wait_done(api, cut, timeout=30)
    assert c["status"] == "failed" and "restart" in c["error"], c
    assert logs(api, cut)[-1]["status"] == "failed"
    # what was ready stays ready and usable
    assert get(api, ready).json()["digest"] == t["digest"]
    sid = api.create(template=ready)
    assert api.exec(sid, "cat /etc/tpl-marker")["stdout"] == "hi\n"
    # the name can be built again once the failed one is removed
    assert api.request("DELETE", f"/templates/{cut}").status_code == 204
    build_ready(api, cut)


def test_build_over_template_timeout_is_failed(make_stack):
    st = make_stack("tpl-timeout", template_timeout="3")
    api = st.api
    nm = name()
    assert submit(api, nm, f"FROM {BASE}\nRUN sleep 30\n").status_code == 202
    t = wait_done(api, nm, timeout=60)
    assert t["status"] == "failed" and "template_timeout (3 s)" in t["error"], t
    assert logs(api, nm)[-1]["status"] == "failed"


def test_builds_off_is_403_and_operator_images_still_templates(make_stack):
    st = make_stack("tpl-off", template_builds_max="0")
    api = st.api
    assert_error(submit(api, name(), SMALL), 403, "forbidden")
    listed = parse_json(api.request("GET", "/templates"))["templates"]
    assert [t["name"] for t in listed] == ["nanobox", "nanobox-python"]
    sid = api.create(template="nanobox")
    assert api.exec(sid, "echo ok")["stdout"] == "ok\n"


def test_templates_of_the_old_naming_move_to_hidden_names_on_start(make_stack, tmp_path):
    """A template made before names were the owner's (its image tag was its
    name) is moved, at the next start, to its owner's hidden image name: it
    stays usable by name, and the guessable name is gone."""
    st = make_stack("tpl-old")
    api = st.api
    nm = name()
    old = f"nanobox-tpl-{st.instance}:{nm}"
    labels = {"nanobox.instance": st.instance, "nanobox.template": nm, "nanobox.kind": "build",
              "nanobox.status": "ready", "nanobox.created_at": str(int(time.time())),
              "nanobox.owner": "default"}
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(f"FROM {BASE}\nRUN echo old > /etc/old-marker\n" +
                                    "".join(f'LABEL {k}="{v}"\n' for k, v in labels.items()))
    nbtest.run(["docker", "build", "-q", "-t", old, str(ctx)], timeout=180)
    st.restart()
    t = wait_until(lambda: (lambda r: r.json() if r.status_code == 200 else None)(get(api, nm)),
                   timeout=60, what="the old template to be found by name")
    assert t["status"] == "ready" and t["image"] != old and nm not in t["image"], t
    assert not docker_exists(old)
    sid = api.create(template=nm)
    assert api.exec(sid, "cat /etc/old-marker")["stdout"] == "old\n"
