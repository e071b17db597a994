#!/usr/bin/python3
"""bench_desktop.py - computer-use desktops (nanobox-desktop, E2B's desktop SDK).

Runs tests/e2b/bench_desktop.mjs (node, the pinned @e2b/desktop of
tests/e2b/package.json) against a stack of its own (the integration
tests' nbtest.Stack, from NANOBOX_BUILD, default ./build; memory 2g, cpus
1, pids 1024, no warm pool: every create is cold) and prints:

  create to first screenshot   Sandbox.create() + screenshot(), p50/p90,
                               beside create alone and the container alone
                               (the base SDK's create of the same template)
  screenshot round trip        screenshot() vs the same `scrot --pointer`
                               run by POST /sandbox/{id}/exec, and exec +
                               GET of the PNG (what screenshot() does)
  memory per idle desktop      memory.current 10 s after the first shot

Needs the image (src/setup/image.sh desktop). Measured runs go under the
bench lock:

  flock /tmp/nanobox-bench.lock tests/bench/bench_desktop.py [-n 5] [--shots 30]
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
sys.path.insert(0, str(REPO / "tests" / "integration"))

E2B_DIR = REPO / "tests" / "e2b"


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=5, help="desktops created (default 5)")
    ap.add_argument("--shots", type=int, default=30, help="screenshot rounds (default 30)")
    args = ap.parse_args()

    import nbtest
    if not nbtest.image_present("nanobox-desktop:latest"):
        sys.exit("nanobox-desktop:latest is missing: src/setup/image.sh desktop")
    node = nbtest.node_package(E2B_DIR, "@e2b/desktop")
    stack = nbtest.Stack("bench-desktop", extra_conf={
        "log_level": "info", "memory": "2g", "cpus": "1", "pids": "1024", "workers_min": 4}).start()
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("E2B_", "NANOBOX_"))}
        r = subprocess.run([node, str(E2B_DIR / "bench_desktop.mjs"), "--url", stack.url, "--key", stack.api_key,
                            "-n", str(args.n), "--shots", str(args.shots)],
                           cwd=E2B_DIR, env=env, capture_output=True, text=True, timeout=3600)
        if r.returncode != 0:
            sys.exit(f"bench_desktop.mjs -> {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
        res = json.loads(r.stdout.strip().splitlines()[-1])
    finally:
        stack.stop()

    def row(label, xs, unit="ms", scale=1.0):
        print(f"{label:<46} p50 {statistics.median(xs) / scale:8.1f} {unit}  p90 {pct(xs, 90) / scale:8.1f} {unit}"
              f"  (n={len(xs)})")

    row("create + first screenshot (cold)", res["first"])
    row("  Sandbox.create() alone (Xvfb + xfce4 up)", res["create"])
    row("  the container alone (e2b Sandbox.create)", res["container"])
    row("screenshot() (E2B SDK)", res["e2b_shot"])
    row("  scrot by POST /exec", res["exec_scrot"])
    row("  scrot by POST /exec + GET /files", res["exec_scrot_get"])
    print(f"{'  ratio screenshot() / exec scrot':<46} {statistics.median(res['e2b_shot']) / statistics.median(res['exec_scrot']):8.2f}x")
    row("memory per idle desktop", res["memory"], "MiB", 1024 * 1024)
    print(json.dumps({k: [round(x, 1) for x in v] for k, v in res.items()}))


if __name__ == "__main__":
    main()
