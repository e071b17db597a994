"""Two nodes of a cluster, each with its own dockerd (docs/CLUSTER.md):
the second dockerd has its own data root, exec root (and so its own
containerd), socket, config file and bridge, and writes no iptables
rules, so the two never see each other's containers. (Not --bridge=none:
a dockerd started so deletes the host's docker0, the first dockerd's.) One node dies whole, its nanobox-fcgi
killed and its dockerd stopped: the other's sandboxes work on, the dead
one's answer 503 node_unavailable, lists mark it down, creates go to the
live node; back, its sandboxes (kept by live-restore) are served again.
A node stopped while a template is built builds it, back, on its own
Docker from the recipe in etcd, and drops one removed while it was away."""
import os
import secrets
import shutil
import signal
import subprocess
import tempfile

import pytest
import requests

import nbetcd
import nbtest
from nbtest import docker_ps, wait_until
from test_cluster import PREFIX, listed, member_of, node_conf, sees, tag_of

pytestmark = pytest.mark.xdist_group("cluster")

DOCKERD = shutil.which("dockerd")


class Dockerd:
    """A dockerd of our own: started, stopped and started again by its pid."""

    def __init__(self):
        # short: the exec root holds containerd's socket (108 bytes at most)
        self.dir = tempfile.mkdtemp(prefix="nb-d2-")
        self.sock = os.path.join(self.dir, "docker.sock")
        # a bridge of its own, which it is given (-b) and never makes or deletes
        self.bridge = "nbd2-" + secrets.token_hex(3)
        self.host = f"unix://{self.sock}"
        self.proc = None

    def docker(self, *args, check=True, timeout=120, **kw):
        return subprocess.run(["docker", "-H", self.host, *args], capture_output=True,
                              text=True, check=check, timeout=timeout, **kw)

    def start(self):
        if not os.path.exists(f"/sys/class/net/{self.bridge}"):
            subprocess.run(["ip", "link", "add", self.bridge, "type", "bridge"], check=True)
            subprocess.run(["ip", "addr", "add", "198.18.213.1/24", "dev", self.bridge], check=True)
            subprocess.run(["ip", "link", "set", self.bridge, "up"], check=True)
        # its own (empty) config file: not the system dockerd's /etc/docker/daemon.json
        conf = os.path.join(self.dir, "daemon.json")
        with open(conf, "w") as f:
            f.write("{}\n")
        log = open(os.path.join(self.dir, "dockerd.log"), "ab")
        self.proc = subprocess.Popen(
            [DOCKERD, "--config-file", conf, "--data-root", os.path.join(self.dir, "data"),
             "--exec-root", os.path.join(self.dir, "x"), "-H", self.host,
             "--pidfile", os.path.join(self.dir, "docker.pid"), "--bridge", self.bridge,
             "--iptables=false", "--ip6tables=false", "--live-restore"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)
        log.close()
        try:
            wait_until(lambda: self.docker("info", check=False, timeout=10).returncode == 0,
                       timeout=60, what="the second dockerd to answer")
        except AssertionError:
            raise AssertionError(nbtest.tail(os.path.join(self.dir, "dockerd.log"), 20))

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # our own child, by its pid
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        self.proc = None

    def containers(self):
        return self.docker("ps", "-q").stdout.split()

    def close(self):
        try:
            if self.proc is None:
                self.start()
            ids = self.docker("ps", "-aq", check=False).stdout.split()
            for cid in ids:
                self.docker("rm", "-fv", cid, check=False)
        finally:
            self.stop()
            # dockerd leaves its data root mounted on itself: ours to unmount
            with open("/proc/self/mounts") as f:
                ours = [ln.split()[1] for ln in f if ln.split()[1].startswith(self.dir + "/")]
            for mnt in sorted(ours, key=len, reverse=True):
                subprocess.run(["umount", "-l", mnt], check=False)
            shutil.rmtree(self.dir, ignore_errors=True)
            subprocess.run(["ip", "link", "del", self.bridge], check=False)
            assert not os.path.exists(self.dir), f"{self.dir} left behind"


@pytest.fixture(scope="module")
def dockerd2():
    if DOCKERD is None:
        pytest.skip("needs dockerd")
    d = Dockerd()
    try:
        d.start()
        # its own copy of the sandbox image
        save = subprocess.Popen(["docker", "save", nbtest.IMAGE], stdout=subprocess.PIPE)
        load = subprocess.run(["docker", "-H", d.host, "load"], stdin=save.stdout,
                              capture_output=True, text=True, timeout=300)
        save.stdout.close()
        assert save.wait(300) == 0 and load.returncode == 0, load.stderr
        yield d
    finally:
        d.close()


@pytest.fixture(scope="module")
def etcd(request):
    return nbetcd.etcd_cluster(request)


def made_here(st, secret):
    """A sandbox made on st itself (sent as a node's: placement leaves it there)."""
    r = requests.post(st.url + "/sandbox", json={}, timeout=120, headers={
        "X-Nanobox-Cluster": secret, "X-Nanobox-Owner": "default"})
    assert r.status_code == 201, r.text
    return r.json()["sandboxId"]


def test_a_node_that_dies_whole_takes_only_its_own_sandboxes(etcd, make_stack, dockerd2):
    secret = secrets.token_hex(16)
    x = make_stack("node-x", **node_conf(etcd, "node-x", node_url="{url}", cluster_secret=secret))
    y = make_stack("node-y", **node_conf(etcd, "node-y", node_url="{url}", cluster_secret=secret,
                                         docker_socket=dockerd2.sock))
    wait_until(lambda: sees(x, "node-y") and sees(y, "node-x"), timeout=20,
               what="the nodes to see each other")
    sx, sy = made_here(x, secret), made_here(y, secret)
    assert sx.endswith(tag_of("node-x")) and sy.endswith(tag_of("node-y"))
    # each node's containers on its own dockerd, and only there
    assert docker_ps(y.instance) == []
    assert len(dockerd2.containers()) == 1
    assert len(docker_ps(x.instance, all=False)) >= 1
    # one view, and every route from either node
    for st in (x, y):
        rows = {s["sandboxId"]: s["node"] for s in listed(st.api)["sandboxes"]}
        assert rows.get(sx) == "node-x" and rows.get(sy) == "node-y", rows
    assert x.api.exec(sy, "echo from-x")["stdout"] == "from-x\n"
    assert y.api.exec(sx, "echo from-y")["stdout"] == "from-y\n"
    # node-y dies whole: its nanobox-fcgi killed, its dockerd stopped
    os.kill(member_of(y), signal.SIGKILL)
    y.crash()
    dockerd2.stop()
    assert x.api.exec(sx, "echo alive")["stdout"] == "alive\n"
    r = x.api.request("POST", f"/sandbox/{sy}/exec", json={"command": "true"})
    assert r.status_code == 503 and r.json()["code"] == "node_unavailable", r.text
    wait_until(lambda: {s["sandboxId"]: s["node_up"] for s in listed(x.api)["sandboxes"]}
               .get(sy) is False, timeout=20, what="node-y's sandbox listed as down")
    wait_until(lambda: not sees(x, "node-y"), timeout=20, what="node-x to see node-y gone")
    made = [x.api.create() for _ in range(3)]  # placement has only node-x now
    assert all(m.endswith(tag_of("node-x")) for m in made), made
    for m in made:
        assert x.api.delete(m).status_code == 204
    # back: its dockerd (live-restore kept the container), then its nanobox-fcgi
    dockerd2.start()
    y.start_fcgi()
    y.wait_healthy()
    wait_until(lambda: x.api.request("POST", f"/sandbox/{sy}/exec",
                                     json={"command": "true"}).status_code == 200,
               timeout=30, what="node-y's sandbox served again through node-x")
    assert x.api.exec(sy, "echo back")["stdout"] == "back\n"
    wait_until(lambda: {s["sandboxId"]: s["node_up"] for s in listed(x.api)["sandboxes"]}
               .get(sy) is True, timeout=20, what="node-y's sandbox listed as up")
    for sid in (sx, sy):
        assert x.api.delete(sid).status_code == 204
    assert dockerd2.containers() == []
    etcd.delete_prefix(f"{PREFIX}keys/")


def test_a_node_on_its_own_dockerd_builds_the_template_it_missed(etcd, make_stack, dockerd2):
    """A node on a dockerd of its own, stopped while a template was built:
    back, it builds the template from its recipe on its own Docker (the
    image was never there), and a sandbox of it runs there; removed while
    it is stopped again, the node drops it, image and all."""
    from test_cluster import record
    from test_templates import SMALL, b64, get, wait_done
    secret = secrets.token_hex(16)
    x = make_stack("node-lx", **node_conf(etcd, "node-lx", node_url="{url}",
                                          cluster_secret=secret))
    y = make_stack("node-ly", **node_conf(etcd, "node-ly", node_url="{url}",
                                          cluster_secret=secret, docker_socket=dockerd2.sock))
    wait_until(lambda: sees(x, "node-ly") and sees(y, "node-lx"), timeout=20,
               what="the nodes to see each other")
    y.stop_fcgi()
    wait_until(lambda: record(etcd, "node-ly") is None, timeout=10, what="node-ly gone")
    r = x.api.request("POST", "/templates", json={
        "name": "far", "dockerfile": SMALL, "files": {"hello.txt": b64("from far\n")}})
    assert r.status_code == 202, r.text
    assert wait_done(x.api, "far")["status"] == "ready"
    y.start_fcgi()
    y.wait_healthy()
    wait_until(lambda: get(y.api, "far").status_code == 200, timeout=40,
               what="node-ly to build far by itself")
    t = wait_done(y.api, "far")
    assert t["status"] == "ready", t
    assert dockerd2.docker("image", "inspect", t["image"], check=False).returncode == 0
    r = requests.post(y.url + "/sandbox", json={"template": "far"}, timeout=120, headers={
        "X-Nanobox-Cluster": secret, "X-Nanobox-Owner": "default"})
    assert r.status_code == 201, r.text
    sid = r.json()["sandboxId"]
    assert sid.endswith(tag_of("node-ly"))
    assert y.api.exec(sid, "cat /opt/hello.txt")["stdout"] == "from far\n"
    assert y.api.delete(sid).status_code == 204
    y.stop_fcgi()
    wait_until(lambda: record(etcd, "node-ly") is None, timeout=10, what="node-ly gone")
    assert x.api.request("DELETE", "/templates/far").status_code == 204
    y.start_fcgi()
    y.wait_healthy()
    wait_until(lambda: get(y.api, "far").status_code == 404, timeout=30,
               what="node-ly to drop far")
    assert dockerd2.docker("image", "inspect", t["image"], check=False).returncode != 0
    etcd.delete_prefix(f"{PREFIX}templates/")
    etcd.delete_prefix(f"{PREFIX}recipes/")
