"""
nb_skips: a pytest plugin that makes a skipped test visible, and in CI a
failure, unless the skip is one this file expects.

A test that skips because something it needs is missing on the machine
(a CLI, an image, a kernel feature) did not run: on a CI machine that
should have everything, that is a lost test, not a pass. tests/run.sh and
`make check-adversarial` load this plugin (`-p nb_skips`, with
tests/plugins on PYTHONPATH). At the end of a run it lists every skip that
is not in EXPECTED below, with its reason; with CI=true in the environment
such a skip fails the run (pytest's status 1), elsewhere it is only listed.
Add a skip to EXPECTED only when it is right on every CI machine, and say
why.
"""
import fnmatch
import os
import re

import pytest

# (test id glob, reason regex, why the skip is expected everywhere).
# The glob is matched against the end of pytest's node id, whose start
# depends on the rootdir (tests/integration has a pytest.ini of its own)
# and whose tail may carry xdist's "@group".
EXPECTED = [
    ("*test_docs.py::test_doc_block[[]*", r"not-run: ",
     "a documentation block that is not meant to run says why in a <!-- not-run: ... --> line"),
    ("*tests/init/test_kernel.py::test_no_python3_is_enoexec", r"without a wrapper",
     "under valgrind (NANOBOX_INIT_WRAPPER) the test's tmpfs over /usr/bin, which hides python3, "
     "would hide valgrind too; the plain pass (tests/init, no wrapper) runs it"),
]


def _expected(nodeid, reason):
    for glob, pattern, _why in EXPECTED:
        if (fnmatch.fnmatchcase(nodeid, glob) or fnmatch.fnmatchcase(nodeid, glob + "@*")) \
                and re.search(pattern, reason):
            return True
    return False


def _reason(report):
    lr = report.longrepr
    if isinstance(lr, tuple) and len(lr) == 3:
        reason = lr[2]
    else:
        reason = str(lr)
    return reason[len("Skipped: "):] if reason.startswith("Skipped: ") else reason


class SkipCheck:
    def __init__(self, config):
        self.config = config
        self.unexpected = []
        self.expected = 0

    def pytest_runtest_logreport(self, report):
        if not report.skipped or hasattr(report, "wasxfail"):
            return
        reason = _reason(report)
        if _expected(report.nodeid, reason):
            self.expected += 1
        else:
            self.unexpected.append((report.nodeid, reason))

    def pytest_terminal_summary(self, terminalreporter):
        if not self.unexpected:
            return
        ci = os.environ.get("CI") == "true"
        terminalreporter.section("unexpected skips (tests/plugins/nb_skips.py)",
                                 red=ci, yellow=not ci)
        for nodeid, reason in self.unexpected:
            terminalreporter.line(f"SKIPPED {nodeid}: {reason}")
        terminalreporter.line(
            f"{len(self.unexpected)} test(s) did not run: "
            + ("CI=true, so the run fails" if ci else "with CI=true the run would fail")
            + "; install what they need, or list the skip in nb_skips.EXPECTED with the reason")

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus):
        if self.unexpected and os.environ.get("CI") == "true" and exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_configure(config):
    # xdist's workers send their reports to the controller, which counts
    # them: the check runs there only.
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(SkipCheck(config), "nb_skips_check")
