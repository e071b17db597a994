"""
Computer-use desktops (docs/E2B.md, "Desktops"): E2B's official desktop SDK
(npm @e2b/desktop, pinned in tests/e2b/package.json; with the newest e2b
of tests/e2b-latest too) runs tests/e2b/desktop.mjs unchanged against a
stack: its default template "desktop" is nanobox-desktop:latest, built
here by src/setup/image.sh desktop when missing (minutes, once: the image
stays). The script's summary says what the SDK saw (screen size,
screenshots, mouse, a terminal typed into, open, the stream's URL); the
stream URL is then loaded in headless chromium (tests/www/novnc.mjs),
where noVNC must connect through nanobox's port proxy.

Then what another tenant can reach: the VNC and noVNC ports are a
sandbox's ports like any other (port URLs take no key, the sandbox id is
the secret; docs/SECURITY.md), so another key cannot open or list them,
another sandbox cannot connect to them, and with ports_on_demand off
nothing is reachable until the owner opens it.
"""

import json
import os
import secrets
import shlex
import shutil
import socket
import subprocess
from urllib.parse import parse_qs, urlsplit

import pytest
import requests

import nbtest
from conftest import module_stack
from test_e2b import E2B_DIR, E2B_LATEST_DIR, Sdk
from test_keys import KeyApi, add_key
from test_ports import start_in_sandbox

DESKTOP_IMAGE = os.environ.get("NANOBOX_TEST_DESKTOP_IMAGE", "nanobox-desktop:latest")
WWW_TESTS = nbtest.REPO / "tests" / "www"
SCRIPT_TIMEOUT = 420
# a desktop with a browser: xfce4 and Xvfb take ~150 MiB, firefox-esr
# several hundred and many threads (pids counts them)
DESKTOP_CONF = {"memory": "2g", "cpus": "1", "pids": "1024", "ports_on_demand": "yes",
                "ports_on_demand_duration": "600", "desktop_image": DESKTOP_IMAGE}

pytestmark = pytest.mark.xdist_group("e2b-desktop")


@pytest.fixture(scope="module")
def desktop_image():
    """nanobox-desktop:latest, built (image.sh desktop, as root) when missing."""
    if not nbtest.image_present(DESKTOP_IMAGE):
        if os.geteuid() != 0:
            pytest.fail(f"{DESKTOP_IMAGE} is missing and building it needs root: src/setup/image.sh desktop")
        r = subprocess.run([str(nbtest.REPO / "src" / "setup" / "image.sh"), "desktop"], capture_output=True,
                           text=True, timeout=1800, env=dict(os.environ, NANOBOX_DESKTOP_IMAGE=DESKTOP_IMAGE))
        assert r.returncode == 0, f"image.sh desktop -> {r.returncode}\n{r.stderr[-4000:]}"
    return DESKTOP_IMAGE


@pytest.fixture(scope="module")
def dstack(desktop_image):
    yield from module_stack("e2bdesk", DESKTOP_CONF)


def run_desktop(st, sdk_dir, node, *more):
    """desktop.mjs --keep against st with the SDK of sdk_dir: its summary.
    E2B_DOMAIN names the stack's ports domain, so that getHost (and the
    stream's URL) are nanobox's port hosts."""
    tag = "desk-" + secrets.token_hex(4)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("E2B_", "NANOBOX_"))}
    env.update(E2B_API_URL=st.url, E2B_SANDBOX_URL=st.url, E2B_API_KEY=f"e2b_{st.api_key}",
               E2B_DOMAIN=nbtest.PORTS_DOMAIN)
    r = subprocess.run([node, str(sdk_dir / "desktop.mjs"), "--tag", tag, "--keep", *more], cwd=sdk_dir, env=env,
                       capture_output=True, text=True, timeout=SCRIPT_TIMEOUT)
    lines = [line for line in r.stdout.splitlines() if line.strip()]
    assert r.returncode == 0 and lines, (f"desktop.mjs -> {r.returncode}\nstdout: {r.stdout[-3000:]}\n"
                                         f"stderr: {r.stderr[-5000:]}")
    s = json.loads(lines[-1])
    print(f"desktop.mjs: create {s.get('createMs')} ms; steps (ms): {s.get('ms')}")
    return s


def stream_on_stack(st, url):
    """The SDK's stream URL (https://6080-<id>.<ports domain>/vnc.html?...,
    as on E2B's cloud) on the test stack, whose ports server is plain http
    on its own port: the same host and query."""
    u = urlsplit(url)
    return f"http://{u.hostname}:{st.port}{u.path}?{u.query}"


def novnc(url, wait_ms=30000):
    node = nbtest.node_package(WWW_TESTS, "playwright-core")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.fail("the stream test needs chromium (tests/run.sh installs it: apt install chromium)")
    r = subprocess.run([node, str(WWW_TESTS / "novnc.mjs"), "--url", url, "--chromium", chromium,
                        "--wait", str(wait_ms)],
                       cwd=WWW_TESTS, capture_output=True, text=True, timeout=180)
    lines = [line for line in r.stdout.splitlines() if line.strip()]
    assert r.returncode == 0 and lines, f"novnc.mjs -> {r.returncode}\n{r.stderr[-4000:]}\n{r.stdout[-2000:]}"
    return json.loads(lines[-1])


@pytest.fixture(scope="module", params=["pinned", "latest"])
def desk(request, dstack):
    """desktop.mjs's summary, with either SDK pin; its sandbox is removed
    after the module's tests of that pin."""
    pkg = E2B_DIR if request.param == "pinned" else E2B_LATEST_DIR
    node = nbtest.node_package(pkg, "@e2b/desktop")
    sdk = Sdk(node, E2B_DIR)
    if request.param == "latest":
        d = request.getfixturevalue("tmp_path_factory").mktemp("desk-latest")
        for f in E2B_DIR.glob("*.mjs"):
            shutil.copy(f, d / f.name)
        (d / "node_modules").symlink_to(E2B_LATEST_DIR / "node_modules", target_is_directory=True)
        sdk = Sdk(node, d)
    s = run_desktop(dstack, sdk.dir, sdk.node)
    yield s
    for sid in s["created"]:
        dstack.api.delete(sid)


def step(s, name):
    v = s["steps"][name]
    assert "thrown" not in v, f"{name}: {v}"
    return v


def test_default_template_is_the_desktop_image(desk, dstack):
    assert step(desk, "create")["display"] == ":0"
    assert step(desk, "info") == {"templateId": "desktop"}
    (sid,) = desk["created"]
    assert dstack.api.get(sid).json()["image"] == DESKTOP_IMAGE


def test_screen_is_the_resolution_asked_for(desk):
    assert step(desk, "screenSize") == {"width": 800, "height": 600}


def test_screenshot_is_a_png_of_the_screen(desk):
    shot = step(desk, "screenshot")
    assert shot["png"] and (shot["width"], shot["height"]) == (800, 600), shot


def test_mouse_moves_clicks_and_drags(desk):
    m = step(desk, "mouse")
    assert m == {"moved": {"x": 123, "y": 234}, "clicked": {"x": 300, "y": 200},
                 "dragged": {"x": 200, "y": 150}}


def test_typing_into_a_terminal_reaches_it(desk):
    t = step(desk, "terminal")
    assert t["windows"] >= 1 and t["typed"].startswith("typed-"), t
    # xfce4-terminal puts the title the shell set after its own
    assert t["title"].endswith("title-" + t["typed"]), t
    assert t["focusedIsTerminal"], t
    shot = step(desk, "secondScreenshot")
    assert shot["png"] and shot["differs"], shot
    assert step(desk, "keys") == {}


def test_open_starts_the_browser(desk):
    assert step(desk, "open") == {"browserWindow": True}


def test_stream_url_is_the_sandboxs_port_host(desk):
    st = step(desk, "stream")
    (sid,) = desk["created"]
    u = urlsplit(st["url"])
    assert (u.scheme, u.hostname, u.path) == ("https", f"6080-{sid}.{nbtest.PORTS_DOMAIN}", "/vnc.html"), st
    assert parse_qs(u.query) == {"autoconnect": ["true"], "resize": ["scale"]}
    assert parse_qs(urlsplit(st["viewOnly"]).query)["view_only"] == ["true"]


def test_stream_opens_a_live_novnc_view_in_chromium(desk, dstack):
    st = step(desk, "stream")
    got = novnc(stream_on_stack(dstack, st["url"]))
    assert got["status"] == 200 and got["connected"], got
    assert got["canvas"] == {"width": 800, "height": 600}, got
    ro = novnc(stream_on_stack(dstack, st["viewOnly"]))
    assert ro["connected"] and ro["viewOnly"] is True, ro


def test_stream_with_require_auth_needs_its_key(dstack):
    """stream.start({requireAuth: true}): x11vnc takes a password, which
    the SDK's getUrl({authKey}) puts in the URL: with it noVNC connects,
    without it noVNC is left asking for one."""
    s = run_desktop(dstack, E2B_DIR, nbtest.node_package(E2B_DIR, "@e2b/desktop"), "--auth")
    try:
        st = step(s, "streamAuth")
        assert st["keyLength"] > 0 and "password=" in st["url"] and "password" not in st["urlWithoutKey"], st
        with_key = novnc(stream_on_stack(dstack, st["url"]))
        assert with_key["connected"], with_key
        without = novnc(stream_on_stack(dstack, st["urlWithoutKey"]), wait_ms=8000)
        assert not without["connected"] and "Credentials are required" in without["statusText"], without
    finally:
        for sid in s["created"]:
            dstack.api.delete(sid)


# ---------------------------------------------------------------- tenants

def vnc_banner(host, port, timeout=3):
    """The first bytes a TCP server at host:port sends ('' if it closes;
    the exception's name if it cannot be reached)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.settimeout(timeout)
            return s.recv(12).decode(errors="replace")
    except OSError as e:
        return type(e).__name__


def test_another_key_cannot_reach_or_open_the_desktops_ports(desk, dstack):
    """Another tenant's key: the sandbox is not there for it (404), so
    neither its ports list nor an opening of 5900 or 6080."""
    (sid,) = desk["created"]
    other = KeyApi(dstack, add_key(dstack, "desk-other-" + secrets.token_hex(3)))
    assert other.get(sid).status_code == 404
    assert other.request("GET", f"/sandbox/{sid}/ports").status_code == 404
    for port in (5900, 6080):
        r = other.open_port_raw(sid, port, 60)
        assert r.status_code == 404, (port, r.status_code, r.text)
    # E2B's data plane (the SDK's screenshot read, the VNC password file)
    # takes the sandbox's access token: the other key is not one
    for token in (other.key, f"e2b_{other.key}"):
        r = requests.get(f"{dstack.url}/files", params={"path": "/home/user/.vnc/passwd"}, timeout=10,
                         headers={"E2b-Sandbox-Id": sid, "X-Access-Token": token})
        assert r.status_code in (401, 403), (r.status_code, r.text)


def test_vnc_is_not_on_the_host_or_another_sandbox(desk, dstack):
    """x11vnc listens on 5900 inside the sandbox's own network namespace:
    the host's 5900/6080 are not it, nor is a second sandbox's localhost,
    and a sandbox without network has no address another one can reach."""
    (sid,) = desk["created"]
    api = dstack.api
    assert "RFB" in api.exec(sid, "python3 -c \"import socket; s=socket.create_connection(('127.0.0.1', 5900)); "
                                  "print(s.recv(12).decode())\"")["stdout"]
    for port in (5900, 6080):
        assert not vnc_banner("127.0.0.1", port).startswith("RFB")
    other = api.create(image="nanobox:latest", ttl=300)
    r = api.exec(other, "python3 -c \"import socket\nfor p in (5900, 6080):\n try:\n"
                        "  socket.create_connection(('127.0.0.1', p), timeout=2); print(p, 'open')\n"
                        " except OSError as e: print(p, type(e).__name__)\"")
    assert r["stdout"].split("\n")[:2] == ["5900 ConnectionRefusedError", "6080 ConnectionRefusedError"], r
    api.delete(other)


def test_without_ports_on_demand_the_stream_needs_the_owner_to_open_it(make_stack, desktop_image):
    """ports_on_demand off (nanobox's default): noVNC listening on 6080 is
    the "not open" page until the owner opens 6080 with nanobox's ports
    API (another key cannot); then the page and its websocket answer."""
    st = make_stack("e2bdesk-closed", **dict(DESKTOP_CONF, ports_on_demand="no"))
    r = requests.post(f"{st.url}/sandboxes", json={"templateID": "desktop", "timeout": 300},
                      headers={"X-API-Key": f"e2b_{st.api_key}"}, timeout=60)
    assert r.status_code == 201, (r.status_code, r.text)
    sid = r.json()["sandboxID"]
    st.api.created.append(sid)
    st.api.exec(sid, "printf '%s\\n' 'Xvfb :0 -screen 0 640x480x24 -nolisten tcp & sleep 1' "
                     "'x11vnc -display :0 -forever -shared -rfbport 5900 -nopw -bg -o /tmp/x11vnc.log' "
                     "'cd /opt/noVNC/utils && ./novnc_proxy --vnc localhost:5900 --listen 6080 --web /opt/noVNC' "
                     "> /tmp/desk.sh")
    start_in_sandbox(st.api, sid, "sh /tmp/desk.sh", 6080, "novnc")
    host = f"6080-{sid}.{nbtest.PORTS_DOMAIN}"
    r = requests.get(f"{st.url}/vnc.html", headers={"Host": host}, timeout=10)
    assert r.status_code == 502, (r.status_code, r.text[:300])
    other = KeyApi(st, add_key(st, "desk-closed-other"))
    assert other.open_port_raw(sid, 6080, 60).status_code == 404
    st.api.open_port(sid, 6080, 120)
    r = requests.get(f"{st.url}/vnc.html", headers={"Host": host}, timeout=10)
    assert r.status_code == 200 and "noVNC" in r.text, (r.status_code, r.text[:300])
    got = novnc(f"http://{host}:{st.port}/vnc.html?autoconnect=true")
    assert got["connected"] and got["canvas"] == {"width": 640, "height": 480}, got


def test_desktop_template_without_its_image_is_e2bs_not_found(make_stack):
    """desktop_image not built (or none configured): the SDK's create
    gets E2B's unknown-template 404, which says how to build it."""
    for image, says in (("nanobox-desktop:absent-" + secrets.token_hex(3), "image.sh desktop"),
                        ("", "template 'desktop' not found")):
        st = make_stack("e2bdesk-none", desktop_image=image)
        r = requests.post(f"{st.url}/sandboxes", json={"templateID": "desktop"},
                          headers={"X-API-Key": f"e2b_{st.api_key}"}, timeout=60)
        assert r.status_code == 404, (r.status_code, r.text)
        body = r.json()
        assert body["code"] == 404 and says in body["message"], body


# ------------------------------------------------------------ the console

def test_console_shows_the_screen_live_and_drives_it(dstack):
    """The web console's Screen card (www/app.js) on a desktop sandbox:
    screenshots shown live, a click view-only changes nothing, then
    interactive: the click is the pointer there and keys typed on the
    picture reach the terminal under it."""
    st = dstack
    r = requests.post(f"{st.url}/sandboxes", json={"templateID": "desktop", "timeout": 300},
                      headers={"X-API-Key": f"e2b_{st.api_key}"}, timeout=60)
    assert r.status_code == 201, (r.status_code, r.text)
    sid = r.json()["sandboxID"]
    st.api.created.append(sid)
    up = st.api.exec(sid, "setsid nohup Xvfb :0 -screen 0 640x480x24 -nolisten tcp >/tmp/xvfb.log 2>&1 </dev/null & "
                          "for i in $(seq 50); do DISPLAY=:0 xdpyinfo >/dev/null 2>&1 && break; sleep 0.1; done; "
                          "DISPLAY=:0 setsid nohup xfce4-terminal --disable-server --geometry=80x24+0+0 "
                          "-x sh -c 'cat > /tmp/keys.txt' >/tmp/term.log 2>&1 </dev/null & "
                          "for i in $(seq 300); do DISPLAY=:0 xdotool search --class xfce4-terminal >/dev/null && exit 0; "
                          "sleep 0.1; done; cat /tmp/xvfb.log /tmp/term.log; ps -eo pid,stat,etime,args; exit 1",
                     timeout=60)
    assert up["exit_code"] == 0, up
    node = nbtest.node_package(WWW_TESTS, "playwright-core")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.fail("the console test needs chromium (tests/run.sh installs it: apt install chromium)")
    r = subprocess.run([node, str(WWW_TESTS / "console.mjs"), "--url", st.url, "--key", st.api_key,
                        "--chromium", chromium, "--part", "screen", "--sandbox", sid],
                       cwd=WWW_TESTS, capture_output=True, text=True, timeout=300)
    lines = [line for line in r.stdout.splitlines() if line.strip()]
    assert r.returncode == 0 and lines, f"console.mjs -> {r.returncode}\n{r.stderr[-4000:]}\n{r.stdout[-2000:]}"
    s = json.loads(lines[-1])
    assert s["screen_state"] == "live" and s["screen_size"] == {"width": 640, "height": 480}, s
    assert s["view_only_pointer_unchanged"], s
    want = s["pointer"]["want"]
    got = [int(v.split(":")[1]) for v in s["pointer"]["got"].split()[:2]]
    assert abs(got[0] - want[0]) <= 1 and abs(got[1] - want[1]) <= 1, s["pointer"]
    assert s["typed"] == "hi there\n", s
    assert s["shots_later"] == s["shots_after_stop"], s
    st.api.delete(sid)


BANNER_PY = """
import socket, sys
try:
    s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3)
    s.settimeout(3)
    print("RFB" if s.recv(12).startswith(b"RFB") else "other")
except socket.timeout:
    print("timeout")
except OSError as e:
    print(type(e).__name__, e.errno)
"""


def sandbox_banner(api, sid, host, port):
    """What a TCP connection from inside sid to host:port first reads: RFB
    (a VNC server), other, timeout or the error's name and errno."""
    out = api.exec(sid, shlex.join(["python3", "-c", BANNER_PY, host, str(port)]), timeout=15)
    return out["stdout"].strip()


def test_bridge_desktops_vnc_is_not_reachable_from_another_sandbox(desktop_image):
    """A desktop with the internet (E2B's default: a bridge sandbox where
    the operator allows one) and x11vnc on all its addresses, as the SDK
    starts it: another bridge sandbox cannot connect to its 5900 or 6080
    (the bridge network drops traffic between sandboxes)."""
    import nbnet
    st = nbnet.start_bridge_stack("e2bdesk-bridge", **{k: v for k, v in DESKTOP_CONF.items()
                                                       if not k.startswith("ports_on_demand")})
    try:
        api = st.api
        r = requests.post(f"{st.url}/sandboxes", json={"templateID": "desktop", "timeout": 300},
                          headers={"X-API-Key": f"e2b_{st.api_key}"}, timeout=60)
        assert r.status_code == 201, (r.status_code, r.text)
        sid = r.json()["sandboxID"]
        api.created.append(sid)
        assert api.get(sid).json()["network"] == "bridge"
        api.exec(sid, "printf '%s\\n' 'Xvfb :0 -screen 0 640x480x24 -nolisten tcp & sleep 1' "
                      "'x11vnc -display :0 -forever -shared -rfbport 5900 -nopw -bg -o /tmp/x11vnc.log' "
                      "'cd /opt/noVNC/utils && ./novnc_proxy --vnc localhost:5900 --listen 6080 --web /opt/noVNC' "
                      "> /tmp/desk.sh")
        start_in_sandbox(api, sid, "sh /tmp/desk.sh", 6080, "novnc")
        ip = api.exec(sid, "python3 -c \"import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
                           "s.connect(('192.0.2.1', 9)); print(s.getsockname()[0])\"")["stdout"].strip()
        # x11vnc answers on that address, not only on loopback
        assert sandbox_banner(api, sid, ip, 5900).startswith("RFB"), ip
        other = api.create(network="bridge", ttl=300)
        for port in (5900, 6080):
            got = sandbox_banner(api, other, ip, port)
            print(f"another bridge sandbox to the desktop's {ip}:{port}: {got}")
            # dropped, refused or unreachable: never a connection
            assert got.split()[0] in ("timeout", "ConnectionRefusedError", "OSError"), (port, got)
    finally:
        nbnet.stop_bridge_stack(st)


def test_a_desktop_started_without_the_sdk(dstack):
    """nanobox-desktop-start in the image: what the SDK's create starts
    (Xvfb at a size, xfce4), for nanobox's own API and the console; a
    second run finds it running."""
    st = dstack
    r = requests.post(f"{st.url}/sandboxes", json={"templateID": "desktop", "timeout": 300},
                      headers={"X-API-Key": f"e2b_{st.api_key}"}, timeout=60)
    assert r.status_code == 201, (r.status_code, r.text)
    sid = r.json()["sandboxID"]
    st.api.created.append(sid)
    for _ in range(2):
        up = st.api.exec(sid, "nanobox-desktop-start 640x480", timeout=60)
        assert up["exit_code"] == 0, up
    got = st.api.exec(sid, "DISPLAY=:0 xdpyinfo | grep dimensions; pgrep -c -x xfwm4; pgrep -c -x Xvfb")
    lines = got["stdout"].split("\n")
    assert "640x480 pixels" in lines[0] and lines[1:3] == ["1", "1"], got
    st.api.delete(sid)
