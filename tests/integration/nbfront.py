"""A front of a nanobox cluster for tests and benchmarks (docs/CLUSTER.md,
"The front"): nanobox-front keeping the map from etcd, and an nginx of
src/setup/render-front.sh's config, on a port of this process's band."""
import os
import subprocess

import requests

from nbtest import BUILD, NGINX, REPO, free_port, wait_until


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

    def routes(self, *names):
        """The map names these nodes (and nginx has had time to reload)."""
        def ok():
            try:
                text = open(self.nodes_conf).read()
            except OSError:
                return False
            return all(f"upstream nb_node_{n} " in text for n in names)
        wait_until(ok, timeout=15, what=f"the front's map to hold {names}")

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
