"""
Fixtures of the nanobox integration suite.

- stack (session): nanobox-fcgi + nginx on a temp dir, instance test-<hex>;
  port forwarders' sockets go to its ports_dir, host ports come from
  nbtest.PORTS_CONF's range on 127.0.0.1.
- api (function): a client of that stack; sandboxes it creates are deleted
  when the test ends.
- certs (session): a test CA and a server certificate it signed for
  localhost, 127.0.0.1 and *.<ports domain> (for make_stack(tls=...)).
- make_stack (function): a factory for extra stacks with extra config lines
  (a tiny table, a dead Docker socket, a stack a test may crash at will);
  each is stopped and label-cleaned when the test ends.

Teardown always stops the processes the fixtures started (by pid), force-
removes every container labelled with the stack's instance and kills any
port forwarder left with a socket in its ports_dir, whatever the outcome;
tests that care about leaks assert before that (test_ports.py does).

Parallel runs (pytest-xdist, `tests/run.sh` uses -n 3): every worker
process has its own session stack, so a test using these fixtures is
parallel-safe as written as long as what it counts is its own: containers
by its stack's instance label (docker_ps(stack.instance)), forwarders by its
stack's ports_dir (stack.fwd_pids()), processes by the pids its stack
started, TCP ports from nbtest's port bands (free_port(), HOST_PORTS,
SCRATCH_PORTS). A test that needs the machine to itself (a wall-clock
bound that other workers' load would break) says so with
@pytest.mark.serial: run.sh runs those after the parallel pass, alone.

A run of only NO_STACK_FILES (the etcd harness's own tests) skips the
checks for a build, nginx and Docker: those tests start none of them.

Environment: NANOBOX_BUILD (dir with nanobox-fcgi; default <repo>/build),
NANOBOX_TEST_IMAGE (default nanobox:latest), NANOBOX_TEST_KEEP=1 keeps the
temp dirs (config, logs, state file) for a post-mortem.
"""

import fnmatch
import os
import shutil

import pytest

import nbtest
from nbtest import Api, Stack

_STACKS = []


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "serial: needs the machine to itself (a wall-clock bound that parallel tests' "
        "load would break); tests/run.sh runs these after the parallel pass, one at a time")
    config.addinivalue_line(
        "markers", "sdk: drives nanobox through an SDK in node (E2B's, MCP's), set from the "
        "fixtures it uses (SDK_FIXTURES); the sanitizer pass of tests/run.sh leaves these out")


# ------------------------------------------------ parallel runs: who goes where
#
# A module-scoped fixture runs once on every xdist worker that runs one of
# its tests: an E2B SDK script (data.mjs: 70-90 s a pin), the MCP SDK's
# scenario, test_install's configure and build would run up to three times.
# A test module that has such fixtures defines xdist_group_of(item): the
# name of the group its test shares with every other test of the same
# fixture run (and param), or None. With `--dist loadgroup` (tests/run.sh)
# a group runs on one worker, so each such fixture runs once in all.
#
# The queue is then ordered longest first, so that the long units start at
# once and the short tests fill in around them, instead of a long one
# starting last and running alone. SLOW_FIRST is matched (fnmatch) against
# "FILE::TEST@GROUP"; what matches no pattern keeps its place after them.
# Figures: docs/PERFORMANCE.md, "Test suite time".
# Tests whose time goes to an SDK in node get the mark `sdk`: the fixtures
# that run one (E2B's scripts through `sdk`, MCP's client through mcp_sdk).
# The C paths they drive are those of the raw-HTTP tests beside them, which
# the sanitizer pass runs (tests/run.sh, SAN_TESTS).
SDK_FIXTURES = {"sdk", "e2b_sdk", "e2b_latest", "mcp_sdk"}

SLOW_FIRST = [
    "test_install.py::*",                   # a configure and a build of its own
    "test_e2b.py::*@e2b-data-*",            # data.mjs: files, Jupyter kernels, contexts
    "test_mcp.py::test_sdk_long_call*",     # a call past the SDK's 60 s request timeout
    "test_e2b.py::*@e2b-charts-*",          # charts.mjs: matplotlib in the kernel
    "test_mcp.py::*@mcp-*",                 # the SDK's scenario, once per transport
    "test_mcp.py::test_sdk_*",
    "test_e2b.py::*@e2b-*",                 # the other SDK scripts
    "test_template_python.py::*",           # pip builds and Jupyter in the python image
    "test_upgrade.py::*",
    "test_e2b_desktop.py::*",               # xfce4 desktops, the SDK, chromium (and the image when missing)
    "test_www.py::*",                       # chromium
    "test_openapi.py::*",
]


@pytest.hookimpl(hookwrapper=True)
def pytest_collection_modifyitems(config, items):
    # the groups before xdist reads them (its own hook), the order after
    # pytest's (which groups a module's tests by their fixtures' params)
    # (by id(): an item hashes by its node id, which xdist's hook changes)
    xdist = config.pluginmanager.hasplugin("xdist")
    groups = {}
    for item in items:
        group_of = getattr(getattr(item, "module", None), "xdist_group_of", None)
        groups[id(item)] = group_of(item) if group_of else None
        if groups[id(item)] and xdist:
            item.add_marker(pytest.mark.xdist_group(groups[id(item)]))
        if SDK_FIXTURES & set(item.fixturenames):
            item.add_marker(pytest.mark.sdk)
    yield
    rank = {}
    for item in items:
        key = f"{item.path.name}::{item.name}@{groups.get(id(item)) or ''}"
        rank[id(item)] = next((i for i, pat in enumerate(SLOW_FIRST) if fnmatch.fnmatchcase(key, pat)),
                              len(SLOW_FIRST))
    # a module's tests stay together (its module fixtures are made once),
    # the modules and the tests in each by their rank; sort() is stable
    module_rank = {}
    for item in items:
        module_rank[item.path] = min(module_rank.get(item.path, rank[id(item)]), rank[id(item)])
    items.sort(key=lambda item: (module_rank[item.path], rank[id(item)]))


# Test files that start no nanobox stack (nbetcd's harness tests): a run of
# only these needs no build, nginx or Docker engine.
NO_STACK_FILES = {"test_etcd_harness.py"}


def _needs_stack(config):
    names = {os.path.basename(str(arg).split("::")[0].rstrip("/")) for arg in config.args}
    return not names or not names <= NO_STACK_FILES


def pytest_sessionstart(session):
    if not _needs_stack(session.config):
        return
    problems = []
    if not nbtest.FCGI_BIN.exists():
        problems.append(f"{nbtest.FCGI_BIN} not found: build first (tests/run.sh does), "
                        f"or point NANOBOX_BUILD at the build dir")
    if nbtest.NGINX is None:
        problems.append("nginx not installed")
    if shutil.which("docker") is None:
        problems.append("docker CLI not installed")
    elif nbtest.run(["docker", "info"], check=False, timeout=30).returncode != 0:
        problems.append("no Docker engine answers (start dockerd)")
    elif not nbtest.image_present():
        problems.append(f"image {nbtest.IMAGE} missing (src/setup/image.sh builds it)")
    if problems:
        pytest.exit("integration suite cannot run: " + "; ".join(problems), returncode=3)


def _start(name, extra_conf=None, spawn_fcgi=False, **opts):
    st = Stack(name, extra_conf, spawn_fcgi=spawn_fcgi, **opts)
    _STACKS.append(st)
    try:
        st.start()
    except BaseException:
        _stop(st)
        raise
    return st


def module_stack(name, extra_conf):
    """A stack of its own for a module-scoped fixture: `yield from
    module_stack(...)`. Its sandboxes are cleaned up and a sanitizer
    report in its log fails the module."""
    st = _start(name, extra_conf)
    yield st
    st.api.cleanup()
    reports = _stop(st)
    if reports:
        pytest.fail("sanitizer reports:\n" + "\n".join(reports[:20]))


def _stop(st):
    try:
        st.stop()
    finally:
        if st in _STACKS:
            _STACKS.remove(st)
        reports = st.sanitizer_reports()
        if not reports:
            st.remove_tmp()
    return reports


@pytest.fixture(scope="session")
def stack():
    st = _start("main")
    yield st
    reports = _stop(st)
    if reports:
        pytest.fail("sanitizer reports in the main stack's log:\n" + "\n".join(reports[:20]))


@pytest.fixture
def api(stack):
    a = Api(stack)
    yield a
    a.cleanup()


@pytest.fixture
def make_stack():
    started = []

    def factory(name="extra", spawn_fcgi=False, tls=None, log_file=False, render_args=(),
                **extra_conf):
        st = _start(name, extra_conf, spawn_fcgi=spawn_fcgi, tls=tls, log_file=log_file,
                    render_args=render_args)
        started.append(st)
        return st

    yield factory
    problems = []
    for st in started:
        if st.proc and st.proc.poll() is None:
            st.api.cleanup()
        reports = _stop(st)
        if reports:
            problems.append(f"stack {st.name} ({st.dir}): " + "\n".join(reports[:20]))
    if problems:
        pytest.fail("sanitizer reports:\n" + "\n".join(problems))


@pytest.fixture(scope="session")
def certs(tmp_path_factory):
    """(certificate, key, CA file): a CA, and a server certificate it signed
    for localhost, 127.0.0.1 and *.PORTS_DOMAIN (made with the openssl CLI)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("needs the openssl CLI")
    d = tmp_path_factory.mktemp("tls")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    nbtest.run([openssl, "req", "-x509", *ec, "-keyout", str(d / "ca.key"), "-out", str(d / "ca.pem"),
                "-days", "2", "-subj", "/CN=nanobox test CA",
                "-addext", "basicConstraints=critical,CA:TRUE",
                "-addext", "keyUsage=critical,keyCertSign,cRLSign"])
    nbtest.run([openssl, "req", *ec, "-keyout", str(d / "key.pem"), "-out", str(d / "req.csr"),
                "-subj", "/CN=nanobox test server"])
    (d / "ext.cnf").write_text(
        f"subjectAltName=DNS:localhost,IP:127.0.0.1,DNS:*.{nbtest.PORTS_DOMAIN}\n"
        "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
    nbtest.run([openssl, "x509", "-req", "-in", str(d / "req.csr"), "-CA", str(d / "ca.pem"),
                "-CAkey", str(d / "ca.key"), "-CAcreateserial", "-days", "2",
                "-extfile", str(d / "ext.cnf"), "-out", str(d / "cert.pem")])
    return d / "cert.pem", d / "key.pem", d / "ca.pem"


@pytest.fixture(autouse=True)
def _watch_main_stack(request):
    """Fail a test during which a worker of the main stack died (nothing a
    client sends may crash one) or a sanitizer reported something."""
    if "stack" not in request.fixturenames:
        yield
        return
    st = request.getfixturevalue("stack")
    before = set(st.children())
    log_at = st.log_size()
    yield
    if st.proc is None or st.proc.poll() is not None:
        pytest.fail(f"the main nanobox-fcgi master died during the test\n{nbtest.tail(st.log_path)}")
    gone = before - set(st.children())
    reports = st.sanitizer_reports(log_at)
    msgs = []
    if gone:
        msgs.append(f"worker(s)/reaper {sorted(gone)} of the main stack died during this test")
    if reports:
        msgs.append("sanitizer reports:\n" + "\n".join(reports[:20]))
    # The next test, whichever it is, starts on a stack whose containers are
    # its listed sandboxes (see Stack.settle).
    st.settle()
    if msgs:
        pytest.fail("\n".join(msgs) + f"\n--- log tail ---\n{nbtest.tail(st.log_path, 40)}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        for st in list(_STACKS):
            rep.sections.append((f"nanobox-fcgi log, stack {st.name} ({st.log_path}), tail",
                                 nbtest.tail(st.log_path, 60)))
            rep.sections.append((f"nginx error log, stack {st.name}, tail",
                                 nbtest.tail(st.nginx_log, 20)))
