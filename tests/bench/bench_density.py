#!/usr/bin/python3
"""bench_density.py - many idle sandboxes on one machine, and what they cost.

  1. at 0: exec p50 of `true` on one probe sandbox (keep-alive client),
     GET /sandbox, the service's and Docker's CPU over an idle interval,
     the host's MemAvailable and what the leak check compares against
     (iptables rules, dangling Docker volumes, processes of sandbox uids);
  2. the ramp: --clients clients create idle sandboxes (--memory each,
     network none) until -n are live, printing progress every 100;
  3. at N: the same exec p50 (the peer: the same probe at 0, same run, as a
     ratio; the issue's target <= 1.2x), GET /sandbox (its time and size),
     idle CPU of nanobox-fcgi (master, reaper, workers) and of dockerd +
     containerd over the same interval, host memory per idle sandbox
     (MemAvailable before - after, / N; target <= 5 MiB) and where it goes:
     the containerd shims' and the sandboxes' own processes' PSS, dockerd's
     and containerd's RSS growth, and the kernel's (slab, page tables,
     kernel stacks) from /proc/meminfo;
  4. every sandbox deleted by the same clients, then the leak check:
     no container of the stack's left (docker ps), no slot in use
     (/healthz), iptables rules, volumes and sandbox-uid processes back to
     what they were at 0.

Needs root (PSS of other users' processes, iptables-save). Starts a test
stack of its own (nbtest.Stack: the build in NANOBOX_BUILD, its own nginx,
state and instance label; max_sandboxes = N + 8, no warm pool so that every
container counted is a user's sandbox). Sends traffic only to loopback.

  sudo NANOBOX_BUILD=$PWD/build tests/bench/bench_density.py [-n 1000] [--clients 16] [--memory 64m]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import requests

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from bench_core import docker_api, ms  # noqa: E402

EXEC_TARGET = 1.2      # exec p50 at N / at 0
MEM_TARGET_MIB = 5.0   # host memory per idle sandbox
TICK = os.sysconf("SC_CLK_TCK")


def meminfo():
    out = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, v = line.split(":", 1)
            out[k] = int(v.split()[0]) * 1024
    return out


def procs():
    """{pid: (comm, ppid, uid)} of every process."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read()
            with open(f"/proc/{d}/status") as f:
                uid = int(re.search(r"^Uid:\s+(\d+)", f.read(), re.M).group(1))
        except (OSError, AttributeError):
            continue
        comm = st[st.index("(") + 1:st.rindex(")")]
        ppid = int(st[st.rindex(")") + 2:].split()[1])
        out[int(d)] = (comm, ppid, uid)
    return out


def descendants(root, table):
    kids, todo = {root}, [root]
    while todo:
        p = todo.pop()
        for pid, (_, ppid, _) in table.items():
            if ppid == p and pid not in kids:
                kids.add(pid)
                todo.append(pid)
    return kids


def cpu_ticks(pids):
    n = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                st = f.read()
            fields = st[st.rindex(")") + 2:].split()
            n += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return n


def smaps(pid, key):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            m = re.search(rf"^{key}:\s+(\d+) kB", f.read(), re.M)
        return int(m.group(1)) * 1024 if m else 0
    except OSError:
        return 0


def sh(cmd):
    return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout


def pctl(values, q):
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


class Service:
    def __init__(self, stack):
        self.stack = stack
        self.url = stack.url
        self.h = {"Authorization": f"Bearer {stack.api_key}"}
        self.local = threading.local()

    def session(self):
        s = getattr(self.local, "s", None)
        if s is None:
            s = self.local.s = requests.Session()
            s.headers.update(self.h)
        return s

    def create(self, memory):
        r = self.session().post(self.url + "/sandbox", json={"memory": memory, "ttl": 3600}, timeout=300)
        if r.status_code != 201:
            raise RuntimeError(f"create: {r.status_code} {r.text[:300]}")
        return r.json()["sandboxId"]

    def delete(self, sid):
        r = self.session().delete(f"{self.url}/sandbox/{sid}", timeout=300)
        if r.status_code not in (200, 204, 404):
            raise RuntimeError(f"delete {sid}: {r.status_code} {r.text[:200]}")

    def exec_p50(self, sid, n):
        s = self.session()
        took = []
        for _ in range(n):
            t0 = time.perf_counter()
            r = s.post(f"{self.url}/sandbox/{sid}/exec", json={"command": "true"}, timeout=60)
            took.append(ms(t0))
            if r.status_code != 200 or r.json().get("exit_code") != 0:
                raise RuntimeError(f"exec: {r.status_code} {r.text[:200]}")
        return statistics.median(took), pctl(took, 90)

    def list_time(self, n):
        s = self.session()
        took, size, count = [], 0, 0
        for _ in range(n):
            t0 = time.perf_counter()
            r = s.get(self.url + "/sandbox", timeout=120)
            took.append(ms(t0))
            size, count = len(r.content), len(r.json()["sandboxes"])
        return statistics.median(took), size, count

    def healthz(self):
        return self.session().get(self.url + "/healthz", timeout=30).json()


def containers(instance):
    flt = json.dumps({"label": [f"nanobox.instance={instance}"]})
    return docker_api("GET", f"/containers/json?all=1&filters={requests.utils.quote(flt)}")


def snapshot(stack, args, ids=()):
    """What the leak check compares, and the memory and CPU readings: the
    iptables rules that name one of ids (a bridge sandbox's chain NBX-<id>),
    the host's dangling volumes, the processes of the stack's sandbox uids."""
    table = procs()
    lo = int(stack.conf.get("sandbox_uid_base", "200000"))
    hi = lo + args.n + 8
    chains = {"NBX-" + i.replace("-", "")[:24] for i in ids}
    # a sandbox's volumes (its /dev/pts) are anonymous: no label names the
    # stack, so what is counted is every volume no container uses
    flt = requests.utils.quote(json.dumps({"dangling": ["true"]}))
    with open("/proc/loadavg") as f:
        tasks = int(f.read().split()[3].split("/")[1])  # every thread of the host
    return {
        "mem": meminfo(),
        "tasks": tasks,
        "docker_rss": sum(smaps(p, "Rss") for p, (c, _, _) in table.items() if c in ("dockerd", "containerd")),
        "rules": sum(1 for ln in sh("iptables-save").splitlines()
                     if ln.startswith("-A") and any(c in ln for c in chains)),
        "volumes": len(docker_api("GET", f"/volumes?filters={flt}")["Volumes"] or []),
        "uid_procs": sum(1 for (_, _, uid) in table.values() if lo <= uid < hi),
        "table": table,
    }


def idle_cpu(stack, seconds):
    """CPU seconds per minute of nanobox-fcgi (all its processes) and of dockerd + containerd."""
    table = procs()
    ours = descendants(stack.proc.pid, table)
    docker = {p for p, (c, _, _) in table.items() if c in ("dockerd", "containerd")}
    a0, d0 = cpu_ticks(ours), cpu_ticks(docker)
    time.sleep(seconds)
    a1, d1 = cpu_ticks(ours), cpu_ticks(docker)
    per_min = 60.0 / seconds / TICK
    return (a1 - a0) * per_min, (d1 - d0) * per_min


def where(before, after, n):
    """Where the memory of n idle sandboxes goes, in MiB per sandbox."""
    t = after["table"]
    shims = [p for p, (c, _, _) in t.items() if c.startswith("containerd-shim")]
    inside = set()
    for p in shims:
        inside |= descendants(p, t) - {p}
    mib = 1024.0 * 1024.0 * n

    def kern(m):
        return m["Slab"] + m["PageTables"] + m["KernelStack"]

    return {
        "containerd shims (PSS)": sum(smaps(p, "Pss") for p in shims) / mib,
        "sandboxes' processes (PSS)": sum(smaps(p, "Pss") for p in inside) / mib,
        "dockerd + containerd (RSS growth)": (after["docker_rss"] - before["docker_rss"]) / mib,
        "kernel: slab, page tables, stacks": (kern(after["mem"]) - kern(before["mem"])) / mib,
        "tmpfs and page cache (Shmem)": (after["mem"]["Shmem"] - before["mem"]["Shmem"]) / mib,
    }


def ramp(svc, args, made):
    lock = threading.Lock()
    t0 = time.monotonic()
    errors = []

    def client():
        while True:
            with lock:
                if len(made) + client.inflight >= args.n or errors:
                    return
                client.inflight += 1
            try:
                sid = svc.create(args.memory)
            except Exception as e:  # a create that fails ends the ramp: say why
                with lock:
                    client.inflight -= 1
                    errors.append(str(e))
                return
            with lock:
                client.inflight -= 1
                made.append(sid)
                if len(made) % 100 == 0:
                    print(f"  {len(made):5d} sandboxes  {time.monotonic() - t0:6.1f} s  "
                          f"MemAvailable {meminfo()['MemAvailable'] / 2**30:6.2f} GiB", flush=True)
    client.inflight = 0
    with ThreadPoolExecutor(max_workers=args.clients) as ex:
        for f in [ex.submit(client) for _ in range(args.clients)]:
            f.result()
    return time.monotonic() - t0, errors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=1000, help="idle sandboxes to hold (default 1000)")
    ap.add_argument("--clients", type=int, default=16, help="concurrent clients (default 16)")
    ap.add_argument("--memory", default="64m", help="each sandbox's memory limit (default 64m)")
    ap.add_argument("--execs", type=int, default=200, help="execs per exec p50 (default 200)")
    ap.add_argument("--idle", type=int, default=30, help="seconds of each idle CPU reading (default 30)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench_density.py needs root (PSS of every process, iptables-save)", file=sys.stderr)
        return 2
    import nbtest
    stack = nbtest.Stack("bench-density", extra_conf={
        "warm_pool": "0", "warm_pool_max": "0", "warm_pool_code": "0", "warm_pool_e2b_max": "0",
        "max_sandboxes": str(args.n + 8), "workers_max": str(max(16, 2 * args.clients)),
        "log_level": "info"}).start()
    svc = Service(stack)
    made = []
    try:
        return bench(stack, svc, args, made)
    finally:
        try:
            with ThreadPoolExecutor(max_workers=args.clients) as ex:
                list(ex.map(lambda sid: svc.delete(sid), list(made)))
        finally:
            stack.stop()  # removes whatever the deletes left, by the stack's label


def bench(stack, svc, args, made):
    probe = svc.create(args.memory)
    made.append(probe)
    svc.exec_p50(probe, 20)  # warm the connection and the agent
    base = snapshot(stack, args)
    e0 = svc.exec_p50(probe, args.execs)
    l0 = svc.list_time(10)
    cpu0 = idle_cpu(stack, args.idle)
    print(f"at 1: exec p50 {e0[0]:.2f} ms (p90 {e0[1]:.2f}), GET /sandbox {l0[0]:.1f} ms, "
          f"idle CPU nanobox-fcgi {cpu0[0]:.2f} s/min, dockerd+containerd {cpu0[1]:.2f} s/min", flush=True)

    print(f"ramp to {args.n} sandboxes of {args.memory} with {args.clients} clients", flush=True)
    took, errors = ramp(svc, args, made)
    n = len(made)
    print(f"  {n} sandboxes in {took:.1f} s ({n / took:.1f}/s)" +
          (f"; the ramp stopped: {errors[0]}" if errors else ""), flush=True)
    time.sleep(10)  # the last starts settle (shims, agents' first pages)
    full = snapshot(stack, args)
    e1 = svc.exec_p50(probe, args.execs)
    l1 = svc.list_time(10)
    cpu1 = idle_cpu(stack, args.idle)
    ctrs = len(containers(stack.instance))
    per = (base["mem"]["MemAvailable"] - full["mem"]["MemAvailable"]) / (n - 1) / 2**20
    print(f"at {n}: exec p50 {e1[0]:.2f} ms (p90 {e1[1]:.2f}), GET /sandbox {l1[0]:.1f} ms "
          f"({l1[2]} sandboxes, {l1[1] / 1024:.0f} KiB), containers {ctrs}")
    print(f"  idle CPU: nanobox-fcgi {cpu1[0]:.2f} s/min (at 1: {cpu0[0]:.2f}), "
          f"dockerd+containerd {cpu1[1]:.2f} s/min (at 1: {cpu0[1]:.2f})")
    print(f"  host memory per idle sandbox: {per:.2f} MiB (MemAvailable "
          f"{base['mem']['MemAvailable'] / 2**30:.2f} -> {full['mem']['MemAvailable'] / 2**30:.2f} GiB)")
    for k, v in where(base, full, n - 1).items():
        print(f"    {k:<36} {v:6.2f} MiB")
    print(f"  host tasks (threads) per idle sandbox: {(full['tasks'] - base['tasks']) / (n - 1):.1f} "
          f"({base['tasks']} -> {full['tasks']}; kernel.pid_max {open('/proc/sys/kernel/pid_max').read().strip()})")
    ids = list(made)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=args.clients) as ex:
        list(ex.map(svc.delete, [sid for sid in made if sid != probe]))
    gone_s = ms(t0) / 1000
    made[:] = [probe]
    e2 = svc.exec_p50(probe, args.execs)  # at 1 again: what the machine's load did meanwhile
    svc.delete(probe)
    made.clear()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (containers(stack.instance) or svc.healthz().get("sandboxes")):
        time.sleep(0.5)
    after = snapshot(stack, args, ids)
    left = {
        "containers": len(containers(stack.instance)),
        "slots in use": svc.healthz().get("sandboxes"),
        "iptables rules": after["rules"],
        "volumes": after["volumes"] - base["volumes"],
        "sandbox-uid processes": after["uid_procs"],  # the probe's are gone too
    }
    print(f"deleted {n} in {gone_s:.1f} s; left behind: " +
          ", ".join(f"{k} {v}" for k, v in left.items()))
    print(f"exec p50 at 1 again, after the deletes: {e2[0]:.2f} ms (p90 {e2[1]:.2f})")
    ratio = e1[0] / statistics.mean([e0[0], e2[0]])
    print(f"exec p50 at {n} / at 1 (the mean of before and after): {ratio:.2f}x (target <= "
          f"{EXEC_TARGET}x: {'met' if ratio <= EXEC_TARGET else 'NOT met'})")
    print(f"memory per idle sandbox {per:.2f} MiB (target <= {MEM_TARGET_MIB} MiB: "
          f"{'met' if per <= MEM_TARGET_MIB else 'NOT met'})")
    leaked = any(v for v in left.values())
    print("leak check: " + ("LEAKED" if leaked else "clean"))
    met = ratio <= EXEC_TARGET and per <= MEM_TARGET_MIB and not errors
    return 1 if leaked or errors else (0 if met else 1)


if __name__ == "__main__":
    sys.exit(main())
