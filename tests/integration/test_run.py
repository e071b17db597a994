"""POST /run: one fresh sandbox per call, destroyed on every path."""

import concurrent.futures
import os
import tempfile

import pytest

from nbtest import assert_error, docker_ps, wait_until


def run(api, **body):
    return api.request("POST", "/run", json=body, timeout=120)


@pytest.fixture
def no_new_containers(stack):
    """Other tests' sandboxes may be alive: a run must only add none."""
    before = set(docker_ps(stack.instance))
    yield
    # a run answers first and removes its container just after
    wait_until(lambda: set(docker_ps(stack.instance)) <= before, timeout=30,
               what="the runs' containers to be removed")


def test_run_python_prints_the_sum(api):
    r = run(api, language="python", code="print(sum(range(1_000_000)))")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["stdout"] == "499999500000\n"
    assert body["exit_code"] == 0 and body["timed_out"] is False
    assert set(body) >= {"stdout", "stderr", "exit_code", "timed_out", "duration_ms"}


def test_run_sh_reports_exit_code_and_stderr(api):
    body = run(api, language="sh", code="echo out; echo err >&2; exit 5").json()
    assert (body["stdout"], body["stderr"], body["exit_code"]) == ("out\n", "err\n", 5)


def test_run_delivers_stdin(api):
    body = run(api, language="python", code="import sys; print(sys.stdin.read()[::-1])",
               stdin="abc\n").json()
    assert body.get("stdout") == "\ncba\n", body


def test_run_code_is_one_argv_entry_not_a_shell_string(api):
    # were the code spliced into a shell line, the quotes would end it and
    # `echo pwned` would run; as python's argument it is a syntax error
    body = run(api, language="python", code="'; echo pwned; '\nx = (").json()
    assert "pwned" not in body["stdout"]
    assert body["exit_code"] != 0 and "SyntaxError" in body["stderr"]


def test_run_rm_rf_root_leaves_the_host_untouched(api, no_new_containers):
    with tempfile.NamedTemporaryFile(dir="/tmp", prefix="nanobox-canary-") as canary:
        body = run(api, language="python",
                   code="import os; print(os.system('rm -rf --no-preserve-root / 2>/dev/null'))").json()
        assert body["timed_out"] is False
        assert os.path.exists(canary.name)
    assert api.request("GET", "/healthz").status_code == 200


def test_run_infinite_loop_is_killed_at_its_timeout(api, no_new_containers):
    body = run(api, language="python", code="while True: pass", timeout=2).json()
    assert body["timed_out"] is True
    assert body["exit_code"] != 0
    assert 1900 <= body["duration_ms"] < 10000


def test_fifty_runs_including_killed_ones_leave_no_container(api, no_new_containers):
    def one(i):
        if i % 5 == 0:
            return run(api, language="sh", code="sleep 30", timeout=1).json()["timed_out"]
        return run(api, language="python", code=f"print({i})").json()["stdout"] == f"{i}\n"

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(one, range(50)))
    assert all(results)
    assert api.request("GET", "/sandbox?metadata.nanobox.run=1").json()["sandboxes"] == []


@pytest.mark.parametrize("body,status,code", [
    ({"code": "print(1)"}, 400, "bad_field"),
    ({"language": "python"}, 400, "bad_field"),
    ({"language": "ruby", "code": "1"}, 422, "out_of_range"),
    ({"language": "python", "code": 5}, 400, "bad_field"),
    ({"language": "python", "code": "1", "timeout": 0}, 422, "out_of_range"),
    ({"language": "python", "code": "1", "timeout": 100000}, 422, "out_of_range"),
    ({"language": "python", "code": "1", "image": "x"}, 400, "bad_field"),
    ({"language": "python", "code": "#" * 20000}, 422, "out_of_range"),
])
def test_run_bad_input_is_refused_and_creates_nothing(api, no_new_containers, body, status, code):
    assert_error(run(api, **body), status, code)


def test_run_needs_the_api_key(api, no_new_containers):
    r = api.request("POST", "/run", json={"language": "sh", "code": "true"}, auth=False)
    assert_error(r, 401, "unauthorized")
