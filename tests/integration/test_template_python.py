"""The data-science template nanobox-python:latest (src/setup/image.sh python):
real sandboxes of the real image through the real stack.

Its packages work (numpy, pandas, scipy, matplotlib, a Jupyter kernel, node,
git, a C compiler); pip installs for the sandbox user, offline from a local
wheel, into the user's site or a venv under /workspace; with no network pip
fails with its own message. The hardening tests that hold in every image
are parametrized over it where they live (test_lifecycle.py,
tests/adversarial): not repeated here.

Every sandbox here has network "none": no packet leaves it.
"""

import base64
import hashlib
import io
import json
import urllib.parse
import zipfile

import pytest

from nbtest import PYTHON_IMAGE, needs_image, parse_json, png_size

pytestmark = needs_image(PYTHON_IMAGE)


@pytest.fixture
def sandbox(api):
    info = api.create_info(image=PYTHON_IMAGE, ttl=600)
    assert info["image"] == PYTHON_IMAGE and info["network"] == "none", info
    return info["sandboxId"]


def sh(api, sid, cmd, timeout=120, **kw):
    """Run a shell command; its result (asserted to exit 0)."""
    res = api.exec(sid, cmd, timeout=timeout, **kw)
    assert res["exit_code"] == 0, res
    return res


def py(api, sid, code, timeout=120):
    """Run a python program in the sandbox; its last line of stdout as JSON."""
    res = sh(api, sid, "python3 -", stdin=code, timeout=timeout)
    return json.loads(res["stdout"].strip().splitlines()[-1])


def files_url(sid, path):
    return f"/sandbox/{sid}/files?path={urllib.parse.quote(path)}"


def put_file(api, sid, path, data):
    r = api.request("PUT", files_url(sid, path), data=data,
                    headers={"Content-Type": "application/octet-stream"})
    assert r.status_code == 201, r.text
    return parse_json(r)


def get_file(api, sid, path):
    r = api.request("GET", files_url(sid, path))
    assert r.status_code == 200, r.text
    return r.content


def wheel(name, version, files, scripts=None, requires=()):
    """A pure-Python wheel made by hand (PEP 427): FILES {path: text} plus
    its dist-info; SCRIPTS {command: "module:function"} as console scripts,
    REQUIRES the names it depends on."""
    info = f"{name}-{version}.dist-info"
    contents = dict(files)
    contents[f"{info}/METADATA"] = (f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                    + "".join(f"Requires-Dist: {r}\n" for r in requires))
    contents[f"{info}/WHEEL"] = ("Wheel-Version: 1.0\nGenerator: nanobox-test\n"
                                 "Root-Is-Purelib: true\nTag: py3-none-any\n")
    if scripts:
        contents[f"{info}/entry_points.txt"] = "[console_scripts]\n" + "".join(
            f"{cmd} = {target}\n" for cmd, target in scripts.items())
    record = []
    for path, text in contents.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    record.append(f"{info}/RECORD,,")
    contents[f"{info}/RECORD"] = "\n".join(record) + "\n"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for path, text in contents.items():
            z.writestr(path, text)
    return buf.getvalue()


# What a user sees must be pip's own refusal, never one of these.
NOT_PIPS_OWN = ("Permission denied", "Errno 13", "externally-managed-environment",
                "Read-only file system", "Traceback")


# ------------------------------------------------------------- the packages

def test_python_image_is_allowed_by_default_and_is_what_runs(api, sandbox):
    res = sh(api, sandbox, "cat /etc/debian_version; id -un; echo $HOME; python3 --version")
    lines = res["stdout"].split("\n")
    assert lines[0].startswith("12."), res
    assert lines[1:3] == ["sandbox", "/workspace"], res
    assert lines[3].startswith("Python 3.11"), res


def test_numpy_pandas_scipy_compute(api, sandbox):
    got = py(api, sandbox, r"""
import json
import numpy as np, pandas as pd, scipy, scipy.linalg, scipy.stats, PIL, requests
a = np.array([[4.0, 1.0], [2.0, 3.0]])
df = pd.DataFrame({"k": ["a", "b", "a", "b"], "v": [1, 2, 3, 4]})
print(json.dumps({
    "det": float(np.linalg.det(a)),
    "eig": sorted(float(x.real) for x in scipy.linalg.eigvals(a)),
    "sums": {k: int(v) for k, v in df.groupby("k")["v"].sum().items()},
    "html": df.head(2).to_html()[:6],
    "norm": round(float(scipy.stats.norm.cdf(0)), 3),
    "versions": [np.__version__, pd.__version__, scipy.__version__, PIL.__version__,
                 requests.__version__],
}))
""")
    assert abs(got["det"] - 10.0) < 1e-9, got
    assert [round(x, 6) for x in got["eig"]] == [2.0, 5.0], got
    assert got["sums"] == {"a": 4, "b": 6}, got
    assert got["html"] == "<table", got
    assert got["norm"] == 0.5, got


def test_a_matplotlib_png_in_the_workspace_has_the_figures_size(api, sandbox):
    py(api, sandbox, r"""
import json
import matplotlib.pyplot as plt
fig, ax = plt.subplots(figsize=(4, 3), dpi=100)
ax.plot([0, 1, 2], [0, 1, 4])
ax.set_title("nanobox")
fig.savefig("/workspace/fig.png")
print(json.dumps(plt.get_backend()))
""")
    data = get_file(api, sandbox, "/workspace/fig.png")
    assert png_size(data) == (400, 300)


def test_a_jupyter_kernel_starts_and_keeps_state_and_draws_inline(api, sandbox):
    """What the code interpreter will stand on: jupyter_client starts
    ipykernel in the sandbox (ZeroMQ over its loopback, under its seccomp
    profile and limits), a variable survives between cells, and a plot
    comes back as an inline image/png."""
    got = py(api, sandbox, r"""
import json, time
from jupyter_client.manager import start_new_kernel

def sandbox_memory():  # what the sandbox's memory cgroup is charged, v2 or v1
    for path in ("/sys/fs/cgroup/memory.current", "/sys/fs/cgroup/memory/memory.usage_in_bytes"):
        try:
            return int(open(path).read())
        except OSError:
            pass
    return 0

t0 = time.monotonic()
km, kc = start_new_kernel(kernel_name="python3", startup_timeout=90)
ready = time.monotonic() - t0

def run(code):
    t = time.monotonic()
    msg_id = kc.execute(code)
    out = {"data": [], "stdout": ""}
    while True:
        m = kc.get_iopub_msg(timeout=60)
        if m["parent_header"].get("msg_id") != msg_id:
            continue
        kind, c = m["msg_type"], m["content"]
        if kind in ("execute_result", "display_data"):
            out["data"].append({k: (v if k == "text/plain" else len(v)) for k, v in c["data"].items()})
        elif kind == "stream":
            out["stdout"] += c["text"]
        elif kind == "error":
            out["error"] = c["ename"]
        elif kind == "status" and c["execution_state"] == "idle":
            break
    out["ms"] = (time.monotonic() - t) * 1000
    return out

a = run("x = 41")
b = run("x + 1")
c = run("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()")
d = run("1 + 1")
rss = 0
pid = getattr(km.provisioner, "pid", None) or km.provisioner.process.pid
for line in open(f"/proc/{pid}/status"):
    if line.startswith("VmRSS:"):
        rss = int(line.split()[1]) * 1024
cgroup = sandbox_memory()
kc.stop_channels()
km.shutdown_kernel(now=True)
print(json.dumps({"ready_s": ready, "cells": [a, b, c, d], "rss": rss, "cgroup": cgroup}))
""", timeout=120)
    a, b, c, d = got["cells"]
    assert "error" not in a and a["data"] == [], a
    assert b["data"] == [{"text/plain": "42"}], b
    assert "error" not in c, c
    assert any("image/png" in x for x in c["data"]), c
    assert d["data"] == [{"text/plain": "2"}], d
    # Not a bound, a record: the interpreter's next step reads these in -v.
    print(f"kernel ready in {got['ready_s']:.2f} s, warm cell {d['ms']:.1f} ms, "
          f"first plot {c['ms']:.0f} ms, kernel RSS {got['rss'] / 2**20:.0f} MiB, "
          f"sandbox memory {got['cgroup'] / 2**20:.0f} MiB")


def test_node_git_and_a_c_compiler_work(api, sandbox):
    res = sh(api, sandbox, r"""
node -e 'console.log([1, 2, 3].map(x => x * 2).join(","))'
git --version
cd /workspace && git init -q repo && cd repo && echo hi > a && git add a \
  && git -c user.name=t -c user.email=t@t commit -qm one && git log --format=%s
printf '#include <stdio.h>\nint main(void){puts("from c");return 0;}\n' > /workspace/m.c
gcc -O2 -o /workspace/m /workspace/m.c && /workspace/m
printf '#include <iostream>\nint main(){std::cout<<"from c++"<<std::endl;}\n' > /workspace/m.cc
g++ -o /workspace/mm /workspace/m.cc && /workspace/mm
""")
    lines = res["stdout"].split("\n")
    assert lines[0] == "2,4,6", res
    assert lines[1].startswith("git version"), res
    assert lines[2:5] == ["one", "from c", "from c++"], res


# ------------------------------------------------------------------ pip

def test_pip_installs_a_local_wheel_offline_for_the_sandbox_user(api, sandbox):
    whl = wheel("nbtiny", "1.0",
                {"nbtiny/__init__.py": "def answer():\n    return 42\n\n"
                                       "def main():\n    print('nbtiny says', answer())\n"},
                scripts={"nbtiny": "nbtiny:main"})
    put_file(api, sandbox, "/workspace/wheels/nbtiny-1.0-py3-none-any.whl", whl)
    res = api.exec(sandbox, "pip install /workspace/wheels/nbtiny-1.0-py3-none-any.whl 2>&1",
                   timeout=120)
    assert res["exit_code"] == 0, res
    assert "Successfully installed nbtiny-1.0" in res["stdout"], res
    assert not any(s in res["stdout"] for s in NOT_PIPS_OWN), res
    # the user's site under HOME (= the workspace), its script on PATH
    res = sh(api, sandbox, "python3 -c 'import nbtiny; print(nbtiny.__file__, nbtiny.answer())'; "
                           "command -v nbtiny; nbtiny")
    lines = res["stdout"].split("\n")
    assert lines[0].startswith("/workspace/.local/lib/python3") and lines[0].endswith(" 42"), res
    assert lines[1] == "/workspace/.local/bin/nbtiny", res
    assert lines[2] == "nbtiny says 42", res


def test_pip_in_a_code_cell_installs_what_the_same_kernel_then_imports(api):
    """%pip in a run_code cell, offline from a local wheel: the package
    imports in that very kernel, no restart (the user site is on its path
    from the start)."""
    sid = api.create(image=PYTHON_IMAGE, ttl=600)
    put_file(api, sid, "/workspace/wheels/nbcell-1.0-py3-none-any.whl",
             wheel("nbcell", "1.0", {"nbcell.py": "ANSWER = 'from the wheel'\n"}))
    r = api.request("POST", f"/sandbox/{sid}/code", timeout=180,
                    json={"code": "%pip install /workspace/wheels/nbcell-1.0-py3-none-any.whl"})
    assert r.status_code == 200, r.text
    body = parse_json(r)
    assert body["status"] == "ok", body
    assert "Successfully installed nbcell-1.0" in body["stdout"], body
    assert not any(x in body["stdout"] + body["stderr"] for x in NOT_PIPS_OWN), body
    r = api.request("POST", f"/sandbox/{sid}/code", json={"code": "import nbcell; nbcell.ANSWER"})
    body = parse_json(r)
    assert body["error"] is None, body
    assert body["results"][0]["data"]["text/plain"] == "'from the wheel'"
    api.delete(sid)


def test_pip_installs_from_an_index_with_its_dependencies(api, sandbox):
    """What `pip install NAME` does with network, without any: the index
    is served by the sandbox itself on its own loopback (a directory
    listing per project is a PEP 503 simple index)."""
    put_file(api, sandbox, "/workspace/pkgs/simple/nbtiny/nbtiny-1.0-py3-none-any.whl",
             wheel("nbtiny", "1.0", {"nbtiny/__init__.py": "ANSWER = 42\n"}))
    put_file(api, sandbox, "/workspace/pkgs/simple/nbapp/nbapp-2.0-py3-none-any.whl",
             wheel("nbapp", "2.0", {"nbapp.py": "import nbtiny\nANSWER = nbtiny.ANSWER\n"},
                   requires=["nbtiny>=1.0"]))
    res = api.exec(sandbox, r"""
exec 2>&1
cd /workspace/pkgs && python3 -m http.server -b 127.0.0.1 8765 >/dev/null 2>&1 &
srv=$!
for i in $(seq 50); do curl -sf -o /dev/null http://127.0.0.1:8765/simple/ && break; sleep 0.1; done
pip install --index-url http://127.0.0.1:8765/simple/ nbapp
rc=$?
kill $srv
python3 -c 'import nbapp; print("answer", nbapp.ANSWER)'
exit $rc
""", timeout=120)
    assert res["exit_code"] == 0, res
    out = res["stdout"]
    assert "Successfully installed nbapp-2.0 nbtiny-1.0" in out, res
    assert out.rstrip().endswith("answer 42"), res
    assert not any(s in out for s in NOT_PIPS_OWN), res


def test_pip_builds_a_wheel_and_installs_it_in_a_venv_offline(api, sandbox):
    put_file(api, sandbox, "/workspace/src/nbsrc/pyproject.toml",
             b'[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
             b'[project]\nname = "nbsrc"\nversion = "0.1"\n')
    put_file(api, sandbox, "/workspace/src/nbsrc/nbsrc.py", b"X = 'built here'\n")
    res = api.exec(sandbox, r"""
exec 2>&1
set -e
cd /workspace
python3 -m pip wheel -q --no-build-isolation --no-deps -w dist src/nbsrc
python3 -m venv --system-site-packages venv
venv/bin/pip install -q dist/nbsrc-0.1-py3-none-any.whl
venv/bin/python -c 'import nbsrc, numpy; print(nbsrc.__file__, nbsrc.X, numpy.__name__)'
""", timeout=120)
    assert res["exit_code"] == 0, res
    assert not any(s in res["stdout"] for s in NOT_PIPS_OWN), res
    last = res["stdout"].strip().split("\n")[-1]
    assert last.startswith("/workspace/venv/lib/python3") and last.endswith(" built here numpy"), res


def test_pip_install_from_the_index_without_network_fails_with_pips_own_message(api, sandbox):
    res = api.exec(sandbox, "pip install nanobox-test-no-such-package 2>&1", timeout=120)
    assert res["exit_code"] != 0, res
    out = res["stdout"]
    assert "No matching distribution found for nanobox-test-no-such-package" in out, res
    assert not any(s in out for s in NOT_PIPS_OWN), res


def test_pip_cannot_touch_the_system_packages(api, sandbox):
    """Why break-system-packages is safe here: apt's site-packages are on the
    read-only root, whatever pip is told."""
    res = api.exec(sandbox, "touch /usr/lib/python3/dist-packages/x 2>&1; "
                            "mkdir -p /usr/local/lib/python3.11/dist-packages/x 2>&1")
    assert res["exit_code"] != 0 and res["stdout"].count("Read-only file system") == 2, res
    sh(api, sandbox, "test ! -e /usr/lib/python3/dist-packages/x")
