"""The E2B front is a module (docs/E2B.md, "Building without it"): compiled
in, its paths answer in E2B's shape; built with ./configure --disable-e2b,
they are no route of the native API's (404 no_route) and the native API
works alone. Either way the build's own route table (`nanobox-fcgi -R`)
says which it is, so this file runs in both builds (tests/no_e2b.sh)."""

import subprocess

import nbtest
from nbtest import assert_error


def e2b_built():
    """Whether the build has the E2B front: its rows carry the flag e2b."""
    r = subprocess.run([str(nbtest.FCGI_BIN), "-R"], capture_output=True, text=True, timeout=30,
                       check=True)
    return any("e2b" in line.split("\t")[2].split(",") for line in r.stdout.splitlines())


def test_e2b_paths_follow_the_build(api):
    missing = api.request("GET", "/sandboxes/" + nbtest.random_uuid())
    data = api.request("GET", "/health", headers={"E2b-Sandbox-Id": nbtest.random_uuid(),
                                                  "E2b-Sandbox-Port": "49983"})
    if e2b_built():
        # E2B's Error schema, {"code": status, "message"}, and its data plane
        assert missing.status_code == 404, missing.text
        assert missing.json()["code"] == 404, missing.text
        assert data.status_code != 404 or data.json().get("code") != "no_route", data.text
    else:
        assert_error(missing, 404, "no_route")
        assert_error(api.request("GET", "/v2/sandboxes"), 404, "no_route")
        # the headers of E2B's data plane name nothing: the path is the native API's
        assert data.status_code == 404, data.text
    # the native API answers as ever
    assert api.request("GET", "/healthz").status_code == 200
    assert_error(api.request("GET", "/sandbox/" + nbtest.random_uuid()), 404, "not_found")


def test_e2b_warm_pools_follow_the_build(make_stack):
    """E2B's layout has warm pools of its own (floor 0, listed from the
    start); a build without the E2B front makes no E2B creates, so it lists
    none."""
    st = make_stack("fronts-pools", warm_pool="1")
    layouts = {p["layout"] for p in st.api.request("GET", "/healthz").json()["pools"]}
    assert "nanobox" in layouts, layouts
    assert ("e2b" in layouts) == e2b_built(), layouts
