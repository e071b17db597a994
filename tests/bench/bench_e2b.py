#!/usr/bin/python3
"""bench_e2b.py - the E2B facade through the official SDK against nanobox's own API, same run.

Runs tests/e2b/bench.mjs (node, the pinned SDKs of tests/e2b/package.json,
installed there by npm when missing), which times, interleaved in a random
order each round, in one node process (the native side with fetch over
keep-alive, the SDK's own transport being undici, so both sides pay the
same client):

  create  Sandbox.create()            vs POST /sandbox {}          (from a full warm pool);
          also POST /sandboxes with the SDK's body sent with fetch
  run     commands.run('true')        vs POST /sandbox/{id}/exec   {"command": "true"}, and
                                      {"argv": ["/bin/bash", "-l", "-c", "true"]}, what the SDK runs;
          also its process.Process/Start request sent with fetch
  code    runCode('1+1')              vs POST /sandbox/{id}/code   {"code": "1+1"}
  files   files.write + files.read    vs PUT + GET /sandbox/{id}/files, 1 MiB

and prints p50/p90 of each side, the facade's overhead ratio (E2B p50 /
native p50; target <= 1.3x) and the E2B targets (create <= 20 ms, run <= 8
ms, code <= 15 ms, files <= 20 ms).

Against a running service (src/setup/up.sh): NANOBOX_URL (default
http://127.0.0.1:8080) and NANOBOX_API_KEY (default: api_key from
/etc/nanobox/nanobox.conf); its warm_pool must be at least --warm. With
--stack it starts a stack of its own instead (the integration tests'
nbtest.Stack, from NANOBOX_BUILD, default ./build), with warm_pool =
--warm and log_level info, and stops it after. Sends traffic only to
loopback and dockerd.

  tests/bench/bench_e2b.py [-n 30] [--stack] [--warm 1] [--no-code]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "tests" / "integration"))
from bench_core import conf_key  # noqa: E402  (one set of helpers)

E2B_DIR = REPO / "tests" / "e2b"
TARGETS = {"create": 20.0, "run": 8.0, "code": 15.0, "files": 20.0}
LABELS = {"create": "Sandbox.create() (warm pool)", "run": "commands.run('true')",
          "code": "runCode('1+1')", "files": "files.write + files.read, 1 MiB"}
RATIO_TARGET = 1.3


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def run_bench(url, key, n, warm, code):
    import nbtest  # the integration tests' helpers: node and the pinned SDKs
    node = nbtest.node_package(E2B_DIR, "@e2b/code-interpreter")
    nbtest.node_package(E2B_DIR, "e2b")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("E2B_", "NANOBOX_"))}
    cmd = [node, str(E2B_DIR / "bench.mjs"), "--url", url, "--key", key, "-n", str(n), "--warm", str(warm)]
    if code:
        cmd.append("--code")
    r = subprocess.run(cmd, cwd=E2B_DIR, env=env, capture_output=True, text=True, timeout=3600)
    if r.returncode != 0:
        sys.exit(f"bench.mjs -> {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=30, help="rounds per operation (default 30)")
    ap.add_argument("--stack", action="store_true", help="start a stack of its own (nbtest.Stack)")
    ap.add_argument("--warm", type=int, default=1, help="warm_pool to wait for before each create")
    ap.add_argument("--no-code", action="store_true", help="skip runCode (no nanobox-python image)")
    args = ap.parse_args()

    stack = None
    if args.stack:
        import nbtest
        stack = nbtest.Stack("bench-e2b", extra_conf={"warm_pool": args.warm, "log_level": "info",
                                                      "workers_min": 4}).start()
        url, key = stack.url, stack.api_key
    else:
        url = os.environ.get("NANOBOX_URL", "http://127.0.0.1:8080").rstrip("/")
        key = os.environ.get("NANOBOX_API_KEY") or conf_key()
    try:
        res = run_bench(url, key, args.n, args.warm, not args.no_code)
    finally:
        if stack is not None:
            stack.stop()

    print(f"{'operation':<34} {'E2B SDK p50/p90':>18} {'native p50/p90':>18} {'overhead':>9}  target")
    for op in ("create", "run", "code", "files"):
        if op not in res:
            continue
        e, nat = res[op]["e2b"], res[op]["native"]
        me, mn = statistics.median(e), statistics.median(nat)
        ratio = me / mn
        ok = "met" if me <= TARGETS[op] else "MISSED"
        rok = "met" if ratio <= RATIO_TARGET else "MISSED"
        print(f"{LABELS[op]:<34} {me:8.1f} /{pct(e, 90):6.1f} ms {mn:8.1f} /{pct(nat, 90):6.1f} ms "
              f"{ratio:8.2f}x  p50 <= {TARGETS[op]:.0f} ms {ok}; ratio <= {RATIO_TARGET}x {rok}")
        # the same command on both sides: the SDK's argv where it is not native's own
        same = statistics.median(res[op]["native_bash"]) if "native_bash" in res[op] else mn
        if "native_bash" in res[op]:
            b = res[op]["native_bash"]
            print(f"{'  native, the SDK argv (bash -l)':<34} {'':>18} {same:8.1f} /{pct(b, 90):6.1f} ms "
                  f"{me / same:8.2f}x  (the SDK's overhead and the facade's: same command both sides)")
        if "e2b_fetch" in res[op]:
            b = res[op]["e2b_fetch"]
            mb = statistics.median(b)
            print(f"{'  E2B request sent with fetch':<34} {mb:8.1f} /{pct(b, 90):6.1f} ms {'':>18} "
                  f"{mb / same:8.2f}x  (the facade's own overhead, without the SDK's work)")
    print(json.dumps({op: {side: [round(x, 2) for x in v] for side, v in sides.items()}
                      for op, sides in res.items()}))


if __name__ == "__main__":
    main()
