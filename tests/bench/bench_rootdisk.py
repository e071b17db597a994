#!/usr/bin/python3
"""bench_rootdisk.py - what the kernel-enforced bound of a root sandbox costs.

A sandbox with a root (root_templates) has its writable layer on an ext4 of
root_disk_max bytes on a loop device (src/fcgi/engine/rootdisk.h). Three test
stacks of the built tree, no warm pool, take turns each round:

  bounded   root_templates = nanobox, root_disk_max = 2g (the default)
  unbounded root_templates = nanobox, root_disk_max = 0 (the layer on the host's disk)
  no root   root_templates empty (the create path without any of it)

and measure a cold POST /sandbox, and in the two root ones the write path:
`dd` of 256 MiB into /opt with conv=fsync, and a copy of /usr/share (some
thousands of small files) into /opt, as root. Prints p50 / p90 of each.

  NANOBOX_BUILD=$PWD/build tests/bench/bench_rootdisk.py [-n 10]
"""
import argparse
import os
import statistics
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import nbtest  # noqa: E402

DD = "sudo dd if=/dev/zero of=/opt/dd bs=1M count=256 conv=fsync status=none && sudo rm /opt/dd"
CP = "sudo cp -a /usr/share /opt/share && sync && sudo rm -r /opt/share"


def p(values, q):
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=10, help="rounds (default 10)")
    args = ap.parse_args()
    confs = {
        "bounded": {"root_templates": "nanobox", "root_disk_max": "2g"},
        "unbounded": {"root_templates": "nanobox", "root_disk_max": "0"},
        "no root": {"root_templates": ""},
    }
    stacks, times = {}, {}
    try:
        for name, conf in confs.items():
            stacks[name] = nbtest.Stack("bench-rd-" + name.replace(" ", ""),
                                        extra_conf=dict(conf, log_level="info")).start()
        for _ in range(args.n):
            for name, st in stacks.items():
                api = nbtest.Api(st)
                t0 = time.perf_counter()
                sid = api.create()
                times.setdefault((name, "create"), []).append((time.perf_counter() - t0) * 1e3)
                if name != "no root":
                    for what, cmd in (("dd 256 MiB fsync", DD), ("cp -a /usr/share", CP)):
                        t0 = time.perf_counter()
                        res = api.exec(sid, cmd, timeout=120)
                        assert res["exit_code"] == 0, res
                        times.setdefault((name, what), []).append((time.perf_counter() - t0) * 1e3)
                t0 = time.perf_counter()
                assert api.delete(sid).status_code == 204
                times.setdefault((name, "delete"), []).append((time.perf_counter() - t0) * 1e3)
    finally:
        for st in stacks.values():
            st.stop()
    for (name, what), v in sorted(times.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        print(f"{what:<18} {name:<10} p50 {statistics.median(v):8.1f} ms  p90 {p(v, 90):8.1f} ms  (n={len(v)})")


if __name__ == "__main__":
    main()
