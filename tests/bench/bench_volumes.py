#!/usr/bin/python3
"""bench_volumes.py - what a persistent volume costs (docs/API.md, Volumes).

One test stack of the built tree, no warm pool (so both creates are cold).
Each round: a cold POST /sandbox without a volume, one with a volume
mounted at /data, and in the second `dd` of 128 MiB with conv=fsync into
the volume and into the workspace (a tmpfs), and a small-file copy (the
image's /usr/lib/python3*/ tree) into each. Also POST /volumes and DELETE
/volumes/{name} of a fresh 1 GiB volume. Prints p50 / p90 of each.

  NANOBOX_BUILD=$PWD/build flock /tmp/nanobox-bench.lock tests/bench/bench_volumes.py [-n 10]
"""
import argparse
import os
import statistics
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import nbtest  # noqa: E402

DD = "dd if=/dev/zero of={d}/dd bs=1M count=128 conv=fsync status=none && rm {d}/dd"
CP = "mkdir {d}/py && cp -r /usr/lib/python3* {d}/py/ && sync && rm -r {d}/py"


def p(values, q):
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=10, help="rounds (default 10)")
    args = ap.parse_args()
    times = {}

    def timed(what, fn):
        t0 = time.perf_counter()
        r = fn()
        times.setdefault(what, []).append((time.perf_counter() - t0) * 1e3)
        return r

    st = nbtest.Stack("bench-vol", extra_conf={"warm_pool": "0", "warm_pool_code": "0",
                                                "memory": "512m", "log_level": "info"}).start()
    try:
        api = nbtest.Api(st)
        r = api.request("POST", "/volumes", json={"name": "bench", "size": "1g"})
        assert r.status_code == 201, r.text
        for i in range(args.n):
            sid = timed("create, no volume", lambda: api.create())
            assert api.delete(sid).status_code == 204
            sid = timed("create, one volume", lambda: api.create(volumes=[{"name": "bench", "path": "/data"}]))
            for where, d in (("volume", "/data"), ("workspace", "/workspace")):
                for what, cmd in (("dd 128 MiB fsync", DD), ("cp -r python3 lib + sync", CP)):
                    res = timed(f"{what} in the {where}", lambda: api.exec(sid, cmd.format(d=d), timeout=120))
                    assert res["exit_code"] == 0, res
            assert api.delete(sid).status_code == 204
            r = timed("POST /volumes (1g)", lambda: api.request("POST", "/volumes", json={"name": f"v{i}"}))
            assert r.status_code == 201, r.text
            r = timed("DELETE /volumes", lambda: api.request("DELETE", f"/volumes/v{i}"))
            assert r.status_code == 204, r.text
    finally:
        api = nbtest.Api(st)
        api.cleanup()
        for sid in api.list_ids():
            api.delete(sid)
        for v in api.request("GET", "/volumes").json().get("volumes", []):
            api.request("DELETE", f"/volumes/{v['name']}")  # a volume outlives the stack otherwise
        st.stop()
        st.remove_tmp()
    for what, v in times.items():
        print(f"{what:<34} p50 {statistics.median(v):8.1f} ms  p90 {p(v, 90):8.1f} ms  (n={len(v)})")


if __name__ == "__main__":
    main()
