#!/usr/bin/python3
"""bench_templates.py - templates and snapshots through nanobox against Docker's own.

In one run:

  build     POST /templates of a small Dockerfile (FROM the base image, one
            RUN, one COPY) until GET says ready, against `docker build` of
            the same context (the CLI, its default builder), and once more
            with the limits nanobox's build carries (memory, CPU quota,
            network, forcerm). Each round's RUN line differs, so no side
            hits a cache. Target: ratio <= 1.1.
  warm      POST /sandbox {"template": WARM} with WARM in the service's
            warm_pool_template (the round waits for the pool to be full
            again before the next create). Target: p50 <= 15 ms.
  cold      POST /sandbox {"template": COLD} (a template no pool holds)
            against the raw Docker API's create + start of a container of
            the same hardened configuration (bench_core.raw_config) from
            the same image. Target: ratio <= 1.15.
  snapshot  POST /sandbox/{id}/snapshot of a sandbox with 100 MiB in
            /workspace, against `docker commit` of a container of the same
            configuration plus a tar of its tmpfs (docker exec tar, to a
            file). Also: a create from that snapshot (the 100 MiB restored)
            against a create from the base template.

Prints p50 (and p90 where there are enough samples), the ratios (nanobox /
peer, lower is better for nanobox) and whether each target is met. Needs a
running service (src/setup/up.sh, or a test stack) whose config has
warm_pool_template = <WARM>:N: NANOBOX_URL (default http://127.0.0.1:8080)
and NANOBOX_API_KEY (default: api_key from /etc/nanobox/nanobox.conf).
Templates it builds are deleted at the end (WARM is kept if it existed
before); its own images and containers carry the label nanobox.bench and
are removed at the end, failure or not.

  sudo tests/bench/bench_templates.py [-n 20] [--builds 3] [--warm bench-warm]
  tests/bench/bench_templates.py --stack --build-only --builds 10   # a test stack of its own
"""
import argparse
import base64
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

import requests

sys.dont_write_bytecode = True  # no __pycache__ in tests/bench from the import below
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_core import LABEL, conf_key, docker_api, docker_remove, ms, raw_config  # noqa: E402

BUILD_RATIO = 1.1
WARM_MS = 15.0
COLD_RATIO = 1.15
MiB = 1 << 20


def p(values, q):
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def line(name, ours, peer=None, peer_name=""):
    mo = statistics.median(ours)
    out = f"{name:<26} nanobox p50 {mo:8.1f} ms p90 {p(ours, 90):8.1f}"
    if peer:
        mp = statistics.median(peer)
        out += f"   {peer_name:<24} p50 {mp:8.1f} ms p90 {p(peer, 90):8.1f}   ratio {mo / mp:5.2f}x"
        print(out)
        return mo / mp
    print(out)
    return None


def remove_ctr(cid):
    """Force-remove; one already being removed (by another cleanup of nanobox.bench) is fine."""
    try:
        docker_remove(cid)
    except RuntimeError as e:
        if "already in progress" not in str(e) and "No such container" not in str(e):
            raise


def dockerfile(base, tag):
    return f"FROM {base}\nRUN echo {tag} > /etc/bench-marker\nCOPY hello.txt /opt/hello.txt\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=20, help="creates per measurement (default 20)")
    ap.add_argument("--builds", type=int, default=3, help="builds each way (default 3)")
    ap.add_argument("--snapshots", type=int, default=3, help="snapshots each way (default 3)")
    ap.add_argument("--image", default="nanobox:latest", help="the base image (FROM)")
    ap.add_argument("--warm", default="bench-warm",
                    help="a template name in the service's warm_pool_template (built if missing)")
    ap.add_argument("--build-only", action="store_true", help="the build part alone")
    ap.add_argument("--stack", action="store_true",
                    help="start a test stack of its own (nbtest.Stack, warm_pool_template = WARM:2)")
    args = ap.parse_args()
    stack = None
    if args.stack:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
        import nbtest
        stack = nbtest.Stack("bench-tpl", extra_conf={"warm_pool_template": f"{args.warm}:2",
                                                      "log_level": "info"}).start()
        url, key = stack.url, stack.api_key
    else:
        url = os.environ.get("NANOBOX_URL", "http://127.0.0.1:8080").rstrip("/")
        key = os.environ.get("NANOBOX_API_KEY") or conf_key()
    try:
        return bench(args, url, key)
    finally:
        if stack is not None:
            stack.stop()


def bench(args, url, key):
    s = requests.Session()
    s.headers["Authorization"] = f"Bearer {key}"
    run_tag = secrets.token_hex(3)
    made_tpl, made_img, made_ctr, made_sbx = [], [], [], []
    ok = True

    def build_tpl(name, tag):
        body = {"name": name, "dockerfile": dockerfile(args.image, tag),
                "files": {"hello.txt": base64.b64encode(b"hello\n").decode()}}
        t0 = time.perf_counter()
        r = s.post(url + "/templates", json=body)
        assert r.status_code == 202, r.text
        made_tpl.append(name)
        while True:
            st = s.get(f"{url}/templates/{name}").json()["status"]
            if st != "building":
                break
            time.sleep(0.02)
        took = ms(t0)
        assert st == "ready", s.get(f"{url}/templates/{name}").text
        return took

    def create(body):
        t0 = time.perf_counter()
        r = s.post(url + "/sandbox", json=body)
        took = ms(t0)
        assert r.status_code == 201, r.text
        sid = r.json()["sandboxId"]
        made_sbx.append(sid)
        return sid, took

    def delete(sid):
        s.delete(f"{url}/sandbox/{sid}")
        made_sbx.remove(sid)

    def warm_count():
        return s.get(url + "/healthz").json().get("warm", 0)

    try:
        # ---- build
        ours, peer, equal = [], [], []
        with tempfile.TemporaryDirectory() as ctx:
            with open(os.path.join(ctx, "hello.txt"), "w") as f:
                f.write("hello\n")
            # the same limits nanobox's POST /build carries (template_memory, template_cpus,
            # template_network, forcerm): not the cost, but measured alike
            limits = ["--memory", "1g", "--memory-swap", "1g", "--cpu-period", "100000",
                      "--cpu-quota", "100000", "--network", "bridge", "--force-rm"]

            def docker_build(tag_arg, extra):
                with open(os.path.join(ctx, "Dockerfile"), "w") as f:
                    f.write(dockerfile(args.image, tag_arg))
                tag = f"nbbench-build:{tag_arg}"
                t0 = time.perf_counter()
                # Docker 20.10 behind the CLI (no buildx here): the legacy builder, as POST /build
                r = subprocess.run(["docker", "build", "-q", "--label", f"{LABEL}=1", "-t", tag, *extra, ctx],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                   env=dict(os.environ, DOCKER_BUILDKIT="0"))
                took = ms(t0)
                made_img.append(tag)
                if r.returncode != 0:
                    raise RuntimeError(f"docker build: {r.stderr.strip()}")
                return took

            sides = [lambda i: ours.append(build_tpl(f"bench-b{run_tag}-{i}", f"nb-{run_tag}-{i}")),
                     lambda i: peer.append(docker_build(f"dk-{run_tag}-{i}", [])),
                     lambda i: equal.append(docker_build(f"eq-{run_tag}-{i}", limits))]
            for i in range(args.builds):
                for k in range(3):  # each side first in turn: none gains from what ran before it
                    sides[(i + k) % 3](i)
        line("template build", ours, equal, "docker build, same limits")
        ratio = line("template build", ours, peer, "docker build")
        ok &= ratio <= BUILD_RATIO
        print(f"  target ratio <= {BUILD_RATIO}: {'met' if ratio <= BUILD_RATIO else 'NOT met'}")

        if args.build_only:
            return 0 if ok else 1
        # ---- create from a template: warm
        if s.get(f"{url}/templates/{args.warm}").status_code == 404:
            build_tpl(args.warm, f"warm-{run_tag}")
        else:
            print(f"  (template {args.warm} exists: kept)")
        deadline = time.monotonic() + 120
        while warm_count() == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        full = warm_count()
        if full == 0:
            print(f"warm: no warm pool of template {args.warm}; "
                  f"set warm_pool_template = {args.warm}:2 in the service's config")
            ok = False
        else:
            ours = []
            for _ in range(args.n):
                deadline = time.monotonic() + 60
                while warm_count() < full and time.monotonic() < deadline:
                    time.sleep(0.05)
                sid, took = create({"template": args.warm})
                ours.append(took)
                delete(sid)
            line(f"create, warm ({full} pooled)", ours)
            met = statistics.median(ours) <= WARM_MS
            ok &= met
            print(f"  target p50 <= {WARM_MS} ms: {'met' if met else 'NOT met'}")

        # ---- create from a template: cold, against raw create + start of its image
        cold = made_tpl[0]
        cold_image = s.get(f"{url}/templates/{cold}").json()["image"]
        ours, peer = [], []
        for _ in range(args.n):
            sid, took = create({"template": cold})
            ours.append(took)
            delete(sid)
            t0 = time.perf_counter()
            cid = docker_api("POST", f"/containers/create?name=nbbench-{uuid.uuid4()}",
                             raw_config(cold_image))["Id"]
            made_ctr.append(cid)
            docker_api("POST", f"/containers/{cid}/start")
            peer.append(ms(t0))
            remove_ctr(cid)
            made_ctr.remove(cid)
        ratio = line("create, no pool", ours, peer, "raw create+start")
        ok &= ratio <= COLD_RATIO
        print(f"  target ratio <= {COLD_RATIO}: {'met' if ratio <= COLD_RATIO else 'NOT met'}")

        # ---- snapshot of 100 MiB of workspace
        fill = "head -c 104857600 /dev/urandom > /workspace/big.bin && echo x > /tmp/small"
        ours, peer, restore, base_create = [], [], [], []
        for i in range(args.snapshots):
            sid, _ = create({})
            r = s.post(f"{url}/sandbox/{sid}/exec", json={"command": fill, "timeout": 120})
            assert r.status_code == 200 and r.json()["exit_code"] == 0, r.text
            name = f"bench-s{run_tag}-{i}"
            t0 = time.perf_counter()
            r = s.post(f"{url}/sandbox/{sid}/snapshot", json={"name": name}, timeout=600)
            ours.append(ms(t0))
            assert r.status_code == 201, r.text
            made_tpl.append(name)
            delete(sid)
            kid, took = create({"template": name})
            restore.append(took)
            r = s.post(f"{url}/sandbox/{kid}/exec", json={"command": "stat -c %s /workspace/big.bin"})
            assert r.json()["stdout"] == "104857600\n", r.text
            delete(kid)
            kid, took = create({"template": cold})
            base_create.append(took)
            delete(kid)

            cid = docker_api("POST", f"/containers/create?name=nbbench-{uuid.uuid4()}",
                             raw_config(args.image))["Id"]
            made_ctr.append(cid)
            docker_api("POST", f"/containers/{cid}/start")
            subprocess.run(["docker", "exec", cid, "sh", "-c", fill], check=True)
            tag = f"nbbench-commit:{run_tag}-{i}"
            with tempfile.NamedTemporaryFile(dir="/var/tmp", suffix=".tar") as out:
                t0 = time.perf_counter()
                subprocess.run(["docker", "commit", cid, tag], check=True, stdout=subprocess.DEVNULL)
                made_img.append(tag)
                subprocess.run(["docker", "exec", cid, "tar", "-C", "/", "-cf", "-", "workspace", "tmp"],
                               check=True, stdout=out)
                peer.append(ms(t0))
            remove_ctr(cid)
            made_ctr.remove(cid)
        line("snapshot, 100 MiB", ours, peer, "docker commit + tar")
        line("create from it (restore)", restore, base_create, "create from base tpl")
    finally:
        for sid in made_sbx:
            s.delete(f"{url}/sandbox/{sid}")
        for name in made_tpl:
            s.delete(f"{url}/templates/{name}?force=1")
        for cid in made_ctr:
            subprocess.run(["docker", "rm", "-f", "-v", cid], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        for img in made_img:
            subprocess.run(["docker", "rmi", "-f", img], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
