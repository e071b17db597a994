"""What E2B's base template's users rely on is in both images
(src/setup/image.sh, NB_IMAGE_TOOLS in src/setup/common.sh): git (E2B's
SDK runs it for sbx.git.*), curl with ca-certificates, and less. Each
works for the sandbox user, in a sandbox without network.
"""

import pytest

from nbtest import IMAGE, PYTHON_IMAGE, needs_image
from test_e2b import e2b_latest, e2b_sdk, sdk, sdk_script, step  # noqa: F401


@pytest.fixture(params=[IMAGE, pytest.param(PYTHON_IMAGE, marks=needs_image(PYTHON_IMAGE))],
                ids=["base", "python"])
def sandbox(api, request):
    info = api.create_info(image=request.param, ttl=300)
    assert info["image"] == request.param, info
    return info["sandboxId"]


def sh(api, sid, cmd):
    res = api.exec(sid, cmd, timeout=60)
    assert res["exit_code"] == 0, res
    return res["stdout"]


def test_git_inits_and_commits_as_the_sandbox_user(api, sandbox):
    out = sh(api, sandbox, r"""
id -u; git --version
cd "$HOME" && git init -q -b main repo && cd repo
git config user.email sandbox@example.com && git config user.name 'Sandbox User'
echo hello > a.txt && git add a.txt && git commit -q -m first
git log --format='%an <%ae> %s' && git rev-parse --abbrev-ref HEAD && git status --porcelain
stat -c %u .git/HEAD
""").split("\n")
    uid = out[0]
    assert uid != "0", out  # not root: the sandbox's own uid
    assert out[1].startswith("git version 2."), out
    assert out[2:4] == ["Sandbox User <sandbox@example.com> first", "main"], out
    assert out[4] == uid, out  # the repository is the user's, and clean (no porcelain line)


def test_curl_less_and_the_ca_bundle_are_there(api, sandbox):
    out = sh(api, sandbox, "curl --version | head -1; less --version | head -1; "
                           "test -s /etc/ssl/certs/ca-certificates.crt && echo bundle; "
                           "echo paged | less -FX").split("\n")
    assert out[0].startswith("curl "), out
    assert out[1].startswith("less "), out
    assert out[2:4] == ["bundle", "paged"], out


def test_the_sdks_git_works_in_the_base_image(make_stack, sdk):
    # E2B's "base" template is the first of images: the base image under test
    st = make_stack("git", images=",".join(dict.fromkeys((IMAGE, "nanobox:latest", "nanobox-python:latest",
                                                           PYTHON_IMAGE))))
    summary = sdk_script(st, sdk, "git.mjs", "e2bg-")
    try:
        assert step(summary, "init") == {"exit": 0}
        assert step(summary, "user") == {"email": "sandbox@example.com"}
        assert step(summary, "commit") == {"exit": 0, "log": "Sandbox User <sandbox@example.com> first"}
        assert step(summary, "status") == {"branch": "main", "files": ["b.txt"]}
        assert step(summary, "branches") == {"branches": ["feature", "main"], "currentBranch": "feature"}
    finally:
        for sid in summary["created"]:
            st.api.delete(sid)
