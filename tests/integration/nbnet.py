"""
nbnet.py - the machinery of the network tests (tests/integration/test_network.py,
tests/adversarial/test_isolation_net.py): a stack whose bridge sandboxes sit on
a network of its own, probes run from inside sandboxes, and targets started on
this machine only.

Addresses, all made here and reached only through routes made here:
  - each stack's bridge network: 198.18.<n>.0/24 (RFC 2544's benchmark range,
    on no interface of this machine before the stack creates it);
  - NetTarget, a network namespace standing in for "the internet": it holds
    198.51.100.1 and .2 (TEST-NET-2) and 169.254.77.1 (a link-local target),
    behind a veth whose host end is 198.51.100.254, with a host route for
    169.254.77.0/24 through that veth. Before any probe it is checked that the
    kernel routes those addresses into the veth, so nothing can leave the host.
"""

import os
import random
import secrets
import shlex
import socket
import subprocess
import threading
import time

from nbtest import REPO, Stack, run, wait_until

INTERNET_A = "198.51.100.1"
INTERNET_B = "198.51.100.2"
LINK_LOCAL = "169.254.77.1"
TARGET_PORT = 7070
TARGET_PORT_2 = 7071


def sh(*cmd, check=True):
    return run(list(cmd), check=check, timeout=60)


def used_routes():
    return sh("ip", "-4", "route", "show", "table", "all").stdout


def bridge_conf(**extra):
    """Config lines for a stack with bridge sandboxes on a network of its own."""
    routes = used_routes()
    for _ in range(100):
        n = random.randrange(1, 255)
        subnet = f"198.18.{n}.0/24"
        if f"198.18.{n}." not in routes:
            break
    tag = secrets.token_hex(3)
    conf = {
        "allow_bridge": "yes",
        "bridge_network": f"nanobox-test-{tag}",
        "bridge_interface": f"nbt{tag}",
        "bridge_subnet": subnet,
        "max_sandboxes": "16",
    }
    conf.update({k: str(v) for k, v in extra.items()})
    return conf


GATEWAY = r"""
import socket, struct
for line in open("/proc/net/route").read().splitlines()[1:]:
    f = line.split()
    if f[1] == "00000000":
        print(socket.inet_ntoa(struct.pack("<L", int(f[2], 16))))
"""


def gateway(api, sid):
    """The host's address as a sandbox sees it: its default route's gateway."""
    out = api.exec(sid, shlex.join(["python3", "-c", GATEWAY]))
    gw = out["stdout"].strip()
    assert gw, f"sandbox {sid} has no default route: {out}"
    return gw


def purge_bridge(st):
    """What down.sh --purge does for the network: rules, chains, Docker network."""
    cmd = (f". {REPO}/src/setup/common.sh; nb_net_purge "
           f"{st.conf['bridge_interface']} {st.conf['bridge_network']}")
    return subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=120)


def start_bridge_stack(name="bridge", **extra):
    st = Stack(name, bridge_conf(**extra))
    try:
        st.start()
    except BaseException:
        st.stop()
        purge_bridge(st)
        raise
    return st


def stop_bridge_stack(st):
    try:
        if st.proc and st.proc.poll() is None:
            st.api.cleanup()
    finally:
        st.stop()
        purge_bridge(st)
        st.remove_tmp()


# ------------------------------------------------------------- kernel state

def iptables_S(chain, tool="iptables"):
    r = sh(tool, "-w", "10", "-S", chain, check=False)
    return r.stdout if r.returncode == 0 else None


def sandbox_chain(sid):
    return "NBX-" + sid.replace("-", "")[:24]


def nbs_listing(st):
    """The running stack's NBS chain as iptables -S lists it. The chain is
    there for as long as the stack is: a listing that fails says why rather
    than passing for a chain without jumps."""
    chain = f"NBS-{st.conf['bridge_interface']}"
    r = sh("iptables", "-w", "10", "-S", chain, check=False)
    assert r.returncode == 0, f"iptables -S {chain} failed: {r.stdout}{r.stderr}"
    return r.stdout


def sandbox_rules_present(st, sid):
    """Is there a chain, or a jump, for sandbox sid?"""
    chain = sandbox_chain(sid)
    return chain in nbs_listing(st) or iptables_S(chain) is not None


def sandbox_jumps(st):
    return [line for line in nbs_listing(st).splitlines() if " -g NBX-" in line]


# ---------------------------------------------------------------- probes

PROBE = r"""
import socket, sys
host, port = sys.argv[1], int(sys.argv[2])
s = socket.socket()
s.settimeout(float(sys.argv[3]))
try:
    s.connect((host, port))
    s.sendall(b"ping\n")
    print("OPEN", s.recv(100).decode().strip())
except Exception as e:
    print("BLOCKED", type(e).__name__, e)
"""


def probe(api, sid, host, port, timeout=3):
    """Connect from inside sandbox sid; "OPEN <answer>" or "BLOCKED <why>"."""
    out = api.exec(sid, shlex.join(["python3", "-c", PROBE, host, str(port), str(timeout)]), timeout=timeout + 10)
    assert out["exit_code"] == 0, out
    return out["stdout"].strip()


def is_open(result):
    return result.startswith("OPEN")


LISTENER = r"""
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1])))
s.listen(16)
while True:
    c, _ = s.accept()
    try:
        c.recv(100)
        c.sendall(sys.argv[2].encode() + b"\n")
    finally:
        c.close()
"""


def sandbox_listener(api, sid, port, answer):
    """A background listener on 0.0.0.0:port inside sandbox sid."""
    r = api.request("POST", f"/sandbox/{sid}/exec",
                    json={"command": shlex.join(["python3", "-c", LISTENER, str(port), answer]),
                          "background": True})
    assert r.status_code == 201, r.text
    wait_until(lambda: is_open(probe(api, sid, "127.0.0.1", port, 1)), timeout=15,
               what=f"listener on {port} in {sid}")


def sandbox_addr(api, sid):
    out = api.exec(sid, "python3 -c 'import socket; print(socket.gethostbyname(socket.gethostname()))'")
    return out["stdout"].strip()


class HostListener:
    """A TCP listener of the test process on 0.0.0.0 (every address of the host)."""

    def __init__(self, answer="host"):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("0.0.0.0", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.answer = answer
        self.accepted = 0
        self.stopped = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stopped:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            try:
                c.settimeout(2)
                c.recv(100)
                c.sendall(self.answer.encode() + b"\n")
            except OSError:
                pass
            finally:
                c.close()

    def close(self):
        self.stopped = True
        self.sock.close()


TARGET = r"""
import socket, sys, threading
def serve(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port))
    s.listen(64)
    while True:
        c, (peer, _) = s.accept()
        try:
            c.settimeout(2)
            c.recv(100)
            local = c.getsockname()[0]
            c.sendall(f"{local}:{port}\n".encode())
        except OSError:
            pass
        finally:
            c.close()
for p in sys.argv[1:]:
    threading.Thread(target=serve, args=(int(p),), daemon=True).start()
print("READY", flush=True)
threading.Event().wait()
"""


class NetTarget:
    """A network namespace of our own standing in for the internet (see the top)."""

    def __init__(self):
        tag = secrets.token_hex(3)
        self.ns = f"nbt-{tag}"
        self.veth = f"nbtv{tag}"
        self.peer = f"nbtp{tag}"
        self.proc = None

    def start(self):
        sh("ip", "netns", "add", self.ns)
        sh("ip", "link", "add", self.veth, "type", "veth", "peer", "name", self.peer)
        sh("ip", "link", "set", self.peer, "netns", self.ns)
        sh("ip", "addr", "add", "198.51.100.254/24", "dev", self.veth)
        sh("ip", "link", "set", self.veth, "up")
        sh("ip", "route", "add", "169.254.77.0/24", "dev", self.veth)
        for a in (f"{INTERNET_A}/24", f"{INTERNET_B}/24", f"{LINK_LOCAL}/24"):
            sh("ip", "-n", self.ns, "addr", "add", a, "dev", self.peer)
        sh("ip", "-n", self.ns, "link", "set", "lo", "up")
        sh("ip", "-n", self.ns, "link", "set", self.peer, "up")
        sh("ip", "-n", self.ns, "route", "add", "default", "via", "198.51.100.254")
        self.proc = subprocess.Popen(["ip", "netns", "exec", self.ns, "python3", "-c", TARGET,
                                      str(TARGET_PORT), str(TARGET_PORT_2)],
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "READY"
        self.check_routes()

    def check_routes(self):
        """Every target address is routed into our veth: nothing can leave the machine."""
        for addr in (INTERNET_A, INTERNET_B, LINK_LOCAL):
            out = sh("ip", "-4", "route", "get", addr).stdout
            assert f"dev {self.veth} " in out, f"{addr} is not routed into {self.veth}: {out}"

    def reachable_from_host(self, addr, port):
        with socket.create_connection((addr, port), timeout=3) as s:
            s.sendall(b"ping\n")
            return s.recv(100).decode().strip()

    def stop(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=10)
            self.proc = None
        sh("ip", "route", "del", "169.254.77.0/24", "dev", self.veth, check=False)
        sh("ip", "link", "del", self.veth, check=False)
        sh("ip", "netns", "del", self.ns, check=False)
