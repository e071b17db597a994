"""A dockerd of a test's own (test_cluster_docker.py, bench_cluster.py):
its own data root, exec root (and so its own containerd), socket, config
file and bridge, and no iptables rules, so it never sees the machine's
dockerd's containers nor touches its rules. (Not --bridge=none: a dockerd
started so deletes the host's docker0, the first dockerd's.)"""
import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import tempfile

import pytest

import nbtest
from nbtest import wait_until

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


@contextlib.contextmanager
def second_dockerd():
    """Started, with its own copy of the sandbox image; closed after."""
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
