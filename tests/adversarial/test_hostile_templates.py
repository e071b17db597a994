"""
Hostile template builds (docs/SECURITY.md, "Template builds"): a tenant's
Dockerfile that reaches for another tenant's images, for the host's own
network, or for the host's disk.

  - key A names key B's snapshot by its Docker image (the attack of issue
    22: COPY --from=nanobox-tpl-<instance>:<B's name>), by its real hidden
    image, by B's template name, through ONBUILD, a parser directive, an
    ARG, RUN --mount: 403 before Docker sees the Dockerfile, and A learns
    nothing of B's names (no 409, no 404-vs-403 difference, not listed),
    while B builds FROM and COPY --from its own snapshot by name;
  - a listener on host loopback and on the builds' network gateway (and
    Docker's default bridge, where the old builds ran): a RUN step cannot
    connect to any of them, and ADD http://127.0.0.1:PORT is refused; the
    listeners saw no connection;
  - template_disk_max: `fallocate -l 8G`, `fallocate --keep-size` and a
    flood of small files each stop the build promptly with the cap named
    in its error, and leave no container and no image behind.
"""

import base64
import json
import os
import random
import re
import secrets
import shutil
import socket
import subprocess
import threading

import pytest

import nbnet
import nbtest
from nbtest import assert_error, parse_json, wait_until

BASE = nbtest.IMAGE
CLI_BIN = nbtest.BUILD / "nanobox"


class KeyApi(nbtest.Api):
    """An Api that sends its own key instead of the stack's api_key."""

    def __init__(self, stack, key):
        super().__init__(stack)
        self.key = key

    def headers(self, auth=True, headers=None):
        h = {"Authorization": f"Bearer {self.key}"} if auth else {}
        h.update(headers or {})
        return h


def add_key(st, name):
    e = dict(os.environ, NANOBOX_URL=st.url, NANOBOX_API_KEY=st.api_key)
    r = subprocess.run([str(CLI_BIN), "keys", "add", name, "--config", st.conf_path],
                       capture_output=True, text=True, timeout=60, env=e)
    assert r.returncode == 0, (r.stdout, r.stderr)
    return r.stdout.strip()


def name():
    return "h-" + secrets.token_hex(4)


def submit(api, nm, dockerfile, files=None):
    body = {"name": nm, "dockerfile": dockerfile}
    if files:
        body["files"] = files
    return api.request("POST", "/templates", json=body)


def wait_done(api, nm, timeout=180):
    def done():
        r = api.request("GET", f"/templates/{nm}")
        assert r.status_code == 200, r.text
        t = parse_json(r)
        return t if t["status"] != "building" else None
    return wait_until(done, timeout=timeout, interval=0.3, what=f"template {nm} to finish")


def log_text(api, nm):
    r = api.request("GET", f"/templates/{nm}/logs")
    assert r.status_code == 200, r.text
    return "".join(json.loads(x).get("stream", "") for x in r.text.splitlines() if x.strip())


def images_of(instance):
    out = nbtest.run(["docker", "images", "-aq", "--no-trunc", "--filter",
                      f"label=nanobox.instance={instance}"], check=False).stdout.split()
    return set(out)


# ------------------------------------------------ 1. another tenant's images

@pytest.fixture
def two_keys(make_stack):
    st = make_stack("hostile-tpl")
    a = KeyApi(st, add_key(st, "alice"))
    b = KeyApi(st, add_key(st, "bob"))
    yield st, a, b
    a.cleanup()
    b.cleanup()


def test_a_build_cannot_read_another_keys_snapshot(two_keys):
    st, alice, bob = two_keys
    secret = "bob-secret-" + secrets.token_hex(8)
    sid = bob.create()
    assert bob.exec(sid, f"echo {secret} > /workspace/secret.txt")["exit_code"] == 0
    snap = name()
    r = bob.request("POST", f"/sandbox/{sid}/snapshot", json={"name": snap}, timeout=180)
    assert r.status_code in (200, 201), r.text
    t = parse_json(r)
    assert t["status"] == "ready", t
    hidden = t["image"]
    before = images_of(st.instance)

    # the attack of issue 22: B's snapshot by its old, guessable image name
    old_name = f"nanobox-tpl-{st.instance}:{snap}"
    df = f"FROM {BASE}\nCOPY --from={old_name} /.nanobox/snapshot.tar /stolen.tar\n"
    assert_error(submit(alice, name(), df), 403, "from_forbidden")
    # the image's name is not the template's any more
    assert snap not in hidden and old_name != hidden
    # and the real image behind, B's name, ...
    for ref in (old_name, hidden, snap, "nanobox-tpl-default:" + snap):
        df = f"FROM {BASE}\nCOPY --from={ref} /.nanobox/snapshot.tar /stolen.tar\n"
        assert_error(submit(alice, name(), df), 403, "from_forbidden")
        assert_error(submit(alice, name(), f"FROM {ref}\n"), 403, "from_forbidden")
    # every other way of naming an image
    for df in (
        f"FROM {BASE}\nCOPY --fr\\\nom={hidden} /.nanobox/snapshot.tar /s\n",
        f"FROM {BASE}\nCOPY --\"from\"={hidden} /.nanobox/snapshot.tar /s\n",
        f"FROM {BASE}\nARG X={hidden}\nCOPY --from=$X /.nanobox/snapshot.tar /s\n",
        f"FROM {BASE}\nCOPY --from=${{X:-{hidden}}} /.nanobox/snapshot.tar /s\n",
        f"ARG X={hidden}\nFROM $X\n",
        f"FROM {BASE}\nADD --from={hidden} /.nanobox/snapshot.tar /s\n",
    ):
        assert_error(submit(alice, name(), df), 403, "from_forbidden")
    for df in (
        f"FROM {BASE}\nONBUILD COPY --from={hidden} /.nanobox/snapshot.tar /s\n",
        f"# syntax=docker/dockerfile:1\nFROM {BASE}\n",
        f"FROM {BASE}\nRUN --mount=type=bind,from={hidden},target=/m cat /m/.nanobox/snapshot.tar\n",
    ):
        assert_error(submit(alice, name(), df), 403, "dockerfile_forbidden")
    assert images_of(st.instance) == before, "a refused build left an image"

    # alice learns nothing of bob's names: not listed, 404 as for no name, hers to take
    listed = [x["name"] for x in parse_json(alice.request("GET", "/templates"))["templates"]]
    assert snap not in listed
    assert_error(alice.request("GET", f"/templates/{snap}"), 404, "not_found")
    assert_error(alice.request("GET", f"/templates/{snap}/logs"), 404, "not_found")
    assert_error(alice.request("DELETE", f"/templates/{snap}"), 404, "not_found")
    assert_error(alice.request("POST", "/sandbox", json={"template": snap}), 404, "not_found")
    assert_error(alice.request("POST", "/sandbox", json={"image": hidden}), 403, "forbidden")
    r = submit(alice, snap, f"FROM {BASE}\nRUN echo alice > /etc/whose\n")
    assert r.status_code == 202, r.text  # not 409: her "snap" is another template
    assert wait_done(alice, snap)["status"] == "ready"
    mine = parse_json(alice.request("GET", f"/templates/{snap}"))
    assert mine["owner"] == "alice" and mine["image"] != hidden
    asid = alice.create(template=snap)
    assert alice.exec(asid, "cat /etc/whose")["stdout"] == "alice\n"
    # and bob's is still bob's
    assert parse_json(bob.request("GET", f"/templates/{snap}"))["image"] == hidden

    # bob builds from his own snapshot by name: nanobox writes its hidden image
    own = name()
    df = (f"FROM {snap}\nCOPY --from={snap} /.nanobox/snapshot.tar /copied.tar\n"
          f"RUN tar -xOf /copied.tar workspace/secret.txt > /etc/again\n")
    r = submit(bob, own, df)
    assert r.status_code == 202, r.text
    t = wait_done(bob, own)
    assert t["status"] == "ready", t
    bsid = bob.create(template=own)
    assert bob.exec(bsid, "cat /etc/again")["stdout"] == secret + "\n"
    # the Dockerfile Docker got names images only by their hidden names
    assert f"FROM {hidden}" in log_text(bob, own)


# ------------------------------------------------------ 2. the host's network

def free_subnet():
    routes = nbtest.run(["ip", "-4", "route", "show", "table", "all"]).stdout
    for _ in range(200):
        n = random.randrange(1, 255)
        if f"198.19.{n}." not in routes:
            return f"198.19.{n}.0/24", f"198.19.{n}.1"
    pytest.skip("no free 198.19.x.0/24 for the builds' network")


class Listener:
    """TCP listeners on (addr, port): they count every connection accepted."""

    def __init__(self):
        self.socks, self.seen = [], []
        self.stop = False

    def add(self, addr, port):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((addr, port))
        s.listen(16)
        s.settimeout(0.2)
        self.socks.append(s)
        threading.Thread(target=self._serve, args=(s,), daemon=True).start()

    def _serve(self, s):
        while not self.stop:
            try:
                c, peer = s.accept()
            except (socket.timeout, OSError):
                continue
            self.seen.append(peer)
            try:
                c.sendall(b"HTTP/1.0 200 OK\r\n\r\nHOST-SECRET\n")
            finally:
                c.close()

    def close(self):
        self.stop = True
        for s in self.socks:
            s.close()


PROBE = r"""
import socket, sys
for host in sys.argv[2:]:
    try:
        s = socket.create_connection((host, int(sys.argv[1])), timeout=3)
        print("PROBE", host, "CONNECTED", s.recv(100))
    except OSError as e:
        print("PROBE", host, "FAILED", e)
"""


@pytest.fixture
def net_stack(make_stack):
    """A stack whose networks (the sandboxes', and so the builds') are its own."""
    subnet, gw = free_subnet()
    conf = nbnet.bridge_conf(template_subnet=subnet)
    st = make_stack("hostile-tpl-net", **conf)
    yield st, gw
    st.api.cleanup()
    cmd = (f". {nbtest.REPO}/src/setup/common.sh; "
           f"nb_net_purge {conf['bridge_interface'][:14]}b {conf['bridge_network']}-build; "
           f"nb_net_purge {conf['bridge_interface']} {conf['bridge_network']}")
    subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=120)


def test_a_build_cannot_reach_the_host(net_stack):
    st, gw = net_stack
    api = st.api
    # a first build makes the builds' network (and so its gateway on the host)
    first = name()
    assert submit(api, first, f"FROM {BASE}\nRUN true\n").status_code == 202
    assert wait_done(api, first)["status"] == "ready"
    addrs = nbtest.run(["ip", "-4", "-o", "addr"]).stdout
    assert f" {gw}/" in addrs, "the builds' network has no gateway on the host"
    port = nbtest.SCRATCH_PORTS[0] + 7
    lis = Listener()
    targets = ["127.0.0.1", gw]
    m = re.search(r"inet (172\.17\.0\.1)/", addrs)  # Docker's default bridge, the old builds'
    if m:
        targets.append(m.group(1))
    try:
        for t in targets:
            lis.add(t, port)
        # a RUN step reaches none of them
        nm = name()
        files = {"probe.py": base64.b64encode(PROBE.encode()).decode()}
        df = (f"FROM {BASE}\nCOPY probe.py /probe.py\n"
              f"RUN python3 /probe.py {port} {' '.join(targets)}\n")
        assert submit(api, nm, df, files).status_code == 202
        t = wait_done(api, nm)
        assert t["status"] == "ready", t
        out = log_text(api, nm)
        probes = [x for x in out.splitlines() if x.startswith("PROBE ")]
        assert len(probes) == len(targets), out
        assert all(" FAILED " in x for x in probes), probes
    finally:
        lis.close()
    assert lis.seen == [], f"the host's listener saw {lis.seen}"


def test_add_of_a_url_is_refused_and_never_fetched(make_stack):
    """ADD <url> was fetched by dockerd from the host's own namespace: any
    listener on the host's loopback was readable from a Dockerfile."""
    st = make_stack("hostile-tpl-add")
    api = st.api
    port = nbtest.SCRATCH_PORTS[0] + 8
    lis = Listener()
    try:
        lis.add("127.0.0.1", port)
        for src in (f"http://127.0.0.1:{port}/secret", f"https://127.0.0.1:{port}/x",
                    "git@127.0.0.1:x", f"http\\://127.0.0.1:{port}/s"):
            r = submit(api, name(), f"FROM {BASE}\nADD {src} /s\n")
            if r.status_code == 202:  # the old code: the build fetched it
                wait_done(api, r.json()["name"])
            assert_error(r, 403, "url_forbidden")
        assert_error(submit(api, name(), f"FROM {BASE}\nADD [\"http://127.0.0.1:{port}/s\", "
                                         f"\"/s\"]\n"), 403, "url_forbidden")
        assert_error(submit(api, name(), f"FROM {BASE}\nARG U=http://127.0.0.1:{port}/s\n"
                                         f"ADD $U /s\n"), 403, "url_forbidden")
        # a local file is still fine
        files = {"a.txt": base64.b64encode(b"local\n").decode()}
        nm = name()
        assert submit(api, nm, f"FROM {BASE}\nADD a.txt /a.txt\n", files).status_code == 202
        assert wait_done(api, nm)["status"] == "ready"
    finally:
        lis.close()
    assert lis.seen == [], f"the host's listener saw {lis.seen}"


# ------------------------------------------------------------ 3. the disk cap

def dangling_with(marker):
    """Dangling images a build whose steps say marker left."""
    ids = nbtest.run(["docker", "images", "-aq", "--no-trunc", "--filter", "dangling=true"],
                     check=False).stdout.split()
    left = []
    for i in ids:
        r = nbtest.run(["docker", "history", "--no-trunc", "--format", "{{.CreatedBy}}", i],
                       check=False)
        if marker in r.stdout:
            left.append(i)
    return left


def containers_with(marker):
    r = nbtest.run(["docker", "ps", "-a", "--no-trunc", "--format", "{{.ID}} {{.Command}}"],
                   check=False)
    return [x for x in r.stdout.splitlines() if marker in x]


@pytest.mark.parametrize("step", [
    "fallocate -l 8G /big",
    "touch /big && fallocate --keep-size -l 300M /big && sleep 120",
    "i=0; while :; do head -c 16384 /dev/zero > /f$i; i=$((i+1)); done",
], ids=["one-8g-file", "keep-size-blocks", "many-small-files"])
def test_a_build_stops_at_template_disk_max(make_stack, step, tmp_path):
    free = shutil.disk_usage("/var/lib/docker" if os.path.isdir("/var/lib/docker") else "/").free
    if free < 2 * 1024 ** 3:
        pytest.skip("under 2 GiB free: not even a capped probe")
    st = make_stack("hostile-tpl-disk", template_disk_max="32m")
    api = st.api
    marker = "nbcap" + secrets.token_hex(4)
    # host files the step's layer points at: the cap's cleanup (run as root on the host,
    # emptying what the step wrote) must not follow a link out of the layer
    canary = tmp_path / "canary"
    canary.write_text("host data\n")
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "f").write_text("host data\n")
    links = f"ln -s {canary} /canary-link && ln -s {tmp_path / 'dir'} /canary-dir"
    nm = name()
    assert submit(api, nm, f"FROM {BASE}\nRUN echo {marker} && {links} && {step}\n"
                  ).status_code == 202
    # stopped by the cap, not by the step's own end (sleep 120, an endless loop)
    t = wait_done(api, nm, timeout=100)
    assert t["status"] == "failed", t
    assert "template_disk_max" in t["error"], t
    wait_until(lambda: not containers_with(marker), timeout=60,
               what="the build's containers to go")
    wait_until(lambda: not dangling_with(marker), timeout=60, what="the build's images to go")
    assert canary.read_text() == "host data\n"
    assert (tmp_path / "dir" / "f").read_text() == "host data\n"


def test_another_keys_name_in_root_templates_gives_no_root(make_stack):
    """root_templates names a built template as OWNER/NAME, or NAME of the
    admin key's: a user key that builds a template of that name gets its
    own template, whose sandboxes have no root."""
    st = make_stack("hostile-tpl-root", root_templates="rooty, alice/hers")
    alice = KeyApi(st, add_key(st, "alice"))
    bob = KeyApi(st, add_key(st, "bob"))
    try:
        df = f"FROM {BASE}\nRUN true\n"
        for api, nm in ((st.api, "rooty"), (alice, "rooty"), (alice, "hers"), (bob, "hers")):
            assert submit(api, nm, df).status_code == 202
            assert wait_done(api, nm)["status"] == "ready"
        for api, nm, root in ((st.api, "rooty", True), (alice, "rooty", False),
                              (alice, "hers", True), (bob, "hers", False)):
            sid = api.create(template=nm)
            res = api.exec(sid, "sudo id -u")
            if root:
                assert res["stdout"] == "0\n", (nm, res)
            else:
                assert res["exit_code"] != 0 and "has no root" in res["stderr"], (nm, res)
    finally:
        alice.cleanup()
        bob.cleanup()
