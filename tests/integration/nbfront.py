"""A front of a nanobox cluster for tests and benchmarks (docs/CLUSTER.md,
"The front"): nanobox-front keeping the map from etcd, and an nginx of
src/setup/render-front.sh's config, on a port of this process's band."""
import hashlib
import os
import subprocess

import requests

from nbtest import BUILD, NGINX, REPO, free_port, wait_until


def node_tag(name):
    """The tag of node name's sandbox ids (cluster.c's nb_node_tag)."""
    return hashlib.sha256(f"nanobox-node:{name}".encode()).hexdigest()[:12]


class Front:
    """A front of the cluster: nanobox-front keeping the map, and its nginx.
    Every process is ours, stopped by pid."""

    def __init__(self, endpoints, prefix, tmpdir):
        self.dir = tmpdir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.conf_dir = os.path.join(tmpdir, "conf")
        self.prefix = os.path.join(tmpdir, "prefix")
        os.makedirs(self.prefix, exist_ok=True)
        os.chmod(self.prefix, 0o1777)
        self.nodes_conf = os.path.join(self.conf_dir, "nodes.conf")
        self.pidfile = os.path.join(self.prefix, "nginx.pid")
        self.procs = []
        r = subprocess.run(["bash", str(REPO / "src/setup/render-front.sh"), self.conf_dir,
                            f"127.0.0.1:{self.port}", self.prefix], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        self.log = open(os.path.join(tmpdir, "front.log"), "ab")
        self.procs.append(subprocess.Popen(
            [str(BUILD / "nanobox-front"), "--etcd", endpoints, "--prefix", prefix,
             "--out", self.nodes_conf, "--nginx-pid", self.pidfile],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True))
        wait_until(lambda: os.path.exists(self.nodes_conf), timeout=10,
                   what="nanobox-front's first map")
        self.procs.append(subprocess.Popen(
            [NGINX, "-c", os.path.join(self.conf_dir, "nanobox-front.conf"), "-p",
             self.prefix + "/", "-g", "daemon off;"],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True))
        wait_until(lambda: os.path.exists(self.pidfile), timeout=10, what="the front's nginx")

    def request(self, method, path, key=None, headers=None, **kw):
        h = dict(headers or {})
        if key:
            h["Authorization"] = f"Bearer {key}"
        return requests.request(method, self.url + path, headers=h, timeout=60, **kw)

    def routes(self, *names, timeout=30):
        """The map names these nodes and nginx serves it: an id of each
        node's tag is sent to that node (which answers it: 401 without a
        key), not answered by the front as of a node it does not know (503
        node_unavailable). The file alone is not enough: nginx reloads it a
        moment later, and a map of the nodes that joined first (the second
        before the first, on a loaded machine) may still be the one served."""
        def ok():
            try:
                text = open(self.nodes_conf).read()
            except OSError:
                return False
            if not all(f"upstream nb_node_{n} " in text for n in names):
                return False
            for n in names:
                r = requests.get(f"{self.url}/sandbox/00000000-0000-8000-8000-{node_tag(n)}",
                                 timeout=10)
                if r.status_code == 503:
                    return False
            return True
        wait_until(ok, timeout=timeout, what=f"the front to route {names}")

    def close(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=10)
        self.log.close()
