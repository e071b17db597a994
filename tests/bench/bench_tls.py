#!/usr/bin/python3
"""bench_tls.py - what TLS costs a round trip through the same stack.

One stack whose nginx serves plain http and, with a throwaway CA's
certificate (openssl, made here), https beside it (render-nginx.sh
--tls-cert/--tls-key --tls-listen). One sandbox. Each round, in a random
order, the same request over:
  - http, one kept-alive connection;
  - https, one kept-alive connection (the handshake paid once);
  - https, a new connection each time (a handshake per request; TLS 1.3,
    P-256).
The requests: POST /sandbox/{id}/exec of `true` (the exec round trip) and
GET /healthz (nginx + FastCGI alone). A pause between rounds keeps the
sandbox's CPU quota from throttling the execs (docs/PERFORMANCE.md, "Exec
of `true` through nginx").

Prints p50/p90 of each and the ratios https / http. Starts its own stack
(nbtest.Stack from NANOBOX_BUILD, default ./build) and stops it at the end.

  sudo flock /tmp/nanobox-bench.lock tests/bench/bench_tls.py [-n 200]
"""
import argparse
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

sys.dont_write_bytecode = True
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "integration"))
import nbtest  # noqa: E402


def make_certs(d):
    """(cert, key, ca) for localhost and 127.0.0.1, signed by a CA made here."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run = lambda *a: subprocess.run(["openssl", *a], check=True, capture_output=True)  # noqa: E731
    run("req", "-x509", *ec, "-keyout", f"{d}/ca.key", "-out", f"{d}/ca.pem", "-days", "1",
        "-subj", "/CN=bench CA", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    run("req", *ec, "-keyout", f"{d}/key.pem", "-out", f"{d}/req.csr", "-subj", "/CN=bench")
    Path(d, "ext.cnf").write_text(f"subjectAltName=DNS:localhost,IP:127.0.0.1,DNS:*.{nbtest.PORTS_DOMAIN}\n"
                                  "extendedKeyUsage=serverAuth\n")
    run("x509", "-req", "-in", f"{d}/req.csr", "-CA", f"{d}/ca.pem", "-CAkey", f"{d}/ca.key",
        "-CAcreateserial", "-days", "1", "-extfile", f"{d}/ext.cnf", "-out", f"{d}/cert.pem")
    return f"{d}/cert.pem", f"{d}/key.pem", f"{d}/ca.pem"


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=200, help="rounds")
    ap.add_argument("--pause", type=float, default=0.03, help="seconds between rounds")
    args = ap.parse_args()
    if not shutil.which("openssl"):
        sys.exit("needs the openssl CLI")
    tmp = tempfile.mkdtemp(prefix="nanobox-bench-tls-")
    cert, key, ca = make_certs(tmp)
    tls_port = nbtest.free_port()
    stack = nbtest.Stack("bench-tls", render_args=["--tls-cert", cert, "--tls-key", key,
                                                   "--tls-listen", f"127.0.0.1:{tls_port}"]).start()
    https_url = f"https://localhost:{tls_port}"
    auth = {"Authorization": f"Bearer {stack.api_key}"}
    sid = None
    try:
        sid = stack.api.create()
        keep_http = requests.Session()
        keep_https = requests.Session()

        # verify per request: a REQUESTS_CA_BUNDLE in the environment would
        # win over a session's own
        def fresh_https(method, url, **kw):
            with requests.Session() as s:   # a new connection: a handshake each time
                return s.request(method, url, verify=ca, **kw)

        paths = {
            "http keepalive": (lambda m, p, **kw: keep_http.request(m, stack.url + p, **kw)),
            "https keepalive": (lambda m, p, **kw: keep_https.request(m, https_url + p, verify=ca, **kw)),
            "https new conn": (lambda m, p, **kw: fresh_https(m, https_url + p, **kw)),
        }
        reqs = {
            "exec true": ("POST", f"/sandbox/{sid}/exec", {"json": {"command": "true"}}),
            "healthz": ("GET", "/healthz", {}),
        }
        times = {(r, p): [] for r in reqs for p in paths}
        for name, (m, path, kw) in reqs.items():   # warm up each connection
            for call in paths.values():
                call(m, path, headers=auth, timeout=60, **kw).raise_for_status()
        for _ in range(args.n):
            order = [(r, p) for r in reqs for p in paths]
            random.shuffle(order)
            for r, p in order:
                m, path, kw = reqs[r]
                t0 = time.perf_counter()
                resp = paths[p](m, path, headers=auth, timeout=60, **kw)
                dt = (time.perf_counter() - t0) * 1000
                resp.raise_for_status()
                times[(r, p)].append(dt)
                time.sleep(args.pause)
        print(f"{args.n} rounds, {time.strftime('%Y-%m-%d %H:%M:%S')} UTC, load "
              f"{open('/proc/loadavg').read().split()[0]}")
        for r in reqs:
            base = statistics.median(times[(r, "http keepalive")])
            for p in paths:
                xs = times[(r, p)]
                med = statistics.median(xs)
                print(f"  {r:10s} {p:16s} p50 {med:6.2f} ms  p90 {pct(xs, 90):6.2f} ms  "
                      f"vs http keepalive {med / base:.2f}x")
    finally:
        if sid is not None:
            stack.api.delete(sid)
        stack.stop()
        stack.remove_tmp()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
