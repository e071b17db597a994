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

_INTEGRATION = pathlib.Path(__file__).resolve().parents[1] / "integration"
sys.path.insert(0, str(_INTEGRATION))

_spec = importlib.util.spec_from_file_location("nb_integration_conftest", _INTEGRATION / "conftest.py")
_mod = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _mod
_spec.loader.exec_module(_mod)
globals().update({k: v for k, v in vars(_mod).items() if not k.startswith("__")})
