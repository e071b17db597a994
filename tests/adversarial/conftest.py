"""
Fixtures of the adversarial suite: the integration suite's own (stack, api,
make_stack, the leak-checking teardown), re-exported.

tests/integration is put on sys.path so that `import nbtest` works here too.
Its conftest.py is loaded under another module name: both files are named
conftest.py and pytest imports this one as `conftest`, so a plain
`from conftest import *` would import this file from itself.
"""

import importlib.util
import pathlib
import sys

import pytest

_INTEGRATION = pathlib.Path(__file__).resolve().parents[1] / "integration"
sys.path.insert(0, str(_INTEGRATION))

_spec = importlib.util.spec_from_file_location("nb_integration_conftest", _INTEGRATION / "conftest.py")
_mod = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _mod
_spec.loader.exec_module(_mod)
globals().update({k: v for k, v in vars(_mod).items() if not k.startswith("__")})


# ------------------------------------------------------- what runs alone
#
# `make check-adversarial` runs this suite in pytest-xdist workers, then the
# tests marked serial one at a time (Makefile.am). Serial here:
# - every test with the `bystander` fixture (test_hostile_code.py's
#   resource tests): it times a neighbour's exec while hostile code loads
#   the machine (fork, memory and CPU bombs, gigabytes of output, full
#   disks, /var/lib/docker's free space): another worker's load would
#   spoil the measurement, and the bomb would spoil the other worker's;
# - the tests below, for the reason given.
SERIAL_FIXTURES = {"bystander"}
SERIAL_TESTS = {
    # 16 clients for NANOBOX_LOAD_SECONDS: latency percentiles, no 5xx
    "test_faults.py::test_mixed_load_has_no_unexpected_5xx_and_leaks_nothing",
    # a 2 s bound on a request's latency while clients trickle
    "test_hostile_requests.py::test_trickling_clients_do_not_hold_workers",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        name = f"{item.path.name}::{item.originalname}"
        if name in SERIAL_TESTS or SERIAL_FIXTURES & set(item.fixturenames):
            item.add_marker(pytest.mark.serial)
