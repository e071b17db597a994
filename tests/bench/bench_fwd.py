#!/usr/bin/python3
"""bench_fwd.py - nanobox-fwd against socat and a direct connection, same run.

  (a) bulk throughput, client -> forwarder -> server, one stream and several
      in parallel, upload (client sends) and download (server sends);
  (b) connection set-up latency: connect + one byte there and back, median
      of many;
  (c) the forwarder's memory with 100 idle connections (socat's for
      contrast: it forks a process per connection).

With (a) it prints the CPU each path spends per GB moved (client + server +
relay, from getrusage and /proc/<pid>/stat, so other load on the machine
does not count): when every CPU is busy, throughput goes as the inverse of
that cost, so direct's cost over the forwarder's is the ratio to expect on a
saturated machine, whatever the tuning.

The paths, all on loopback (no traffic leaves the machine):

  direct      client -> server                                (host netns)
  socat       client -> socat TCP-LISTEN,fork -> TCP -> server (host netns)
  fwd         client -> nanobox-fwd -> server                  (host netns)
  fwd-netns   client -> nanobox-fwd -> server in its own netns (`unshare -n`),
              reached by setns: the real nanobox path
  socat-b1M   socat again with `-b 1048576`: a reference, not a target (a
              copying relay with 1 MiB reads; socat's default buffer is 8 KiB)

socat cannot enter a namespace (1.7.4 has no netns= option nor an accept-fd
address), so the like-for-like comparison is socat vs "fwd" with the server
in the host namespace; "fwd-netns" shows that the namespace costs nothing
(a loopback in a netns is the same device as the host's). The servers are
tests/fwd/netns_target.py (Python, 1 MiB recv_into/send buffers), as are the
clients, so the "direct" figure is what Python gets on this machine.

  sudo NANOBOX_BUILD=build tests/bench/bench_fwd.py [--gib 2] [--streams 4] [--latency-n 500]
"""
import argparse
import multiprocessing as mp
import os
import resource
import select
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
FWD_BIN = Path(os.environ.get("NANOBOX_BUILD", ROOT / "build")) / "nanobox-fwd"
TARGET = ROOT / "tests" / "fwd" / "netns_target.py"
sys.path.insert(0, str(ROOT / "tests" / "fwd"))
from netns_target import BULK_PORT, PING_PORT  # noqa: E402

HOST_OFFSET = 20000          # the host-netns server's ports: 27002, 27003
CHUNK = 1 << 20

_procs = []
_relay_pid = {}  # bulk port -> pid of the relay listening there


def start(cmd, **kw):
    p = subprocess.Popen(cmd, **kw)
    _procs.append(p)
    return p


def stop_all():
    for p in reversed(_procs):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def start_target(netns):
    cmd = [sys.executable, str(TARGET)]
    if netns:
        cmd = ["unshare", "-n"] + cmd
    else:
        cmd += ["--no-lo", "--offset", str(HOST_OFFSET)]
    p = start(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    if p.stdout.readline().strip() != "READY":
        raise SystemExit("target server did not start")
    return p


def start_fwd(target_pid, port):
    rfd, wfd = os.pipe()
    start([str(FWD_BIN), "--target-pid", str(target_pid), "--port", str(port),
           "--listen", "127.0.0.1:0", "--expires", str(int(time.time()) + 3600),
           "--ready-fd", str(wfd), "--log-level", "warn"],
          stdin=subprocess.DEVNULL, pass_fds=(wfd,), start_new_session=True)
    os.close(wfd)
    r, _, _ = select.select([rfd], [], [], 10)
    line = os.read(rfd, 200).decode() if r else ""
    os.close(rfd)
    if not line.startswith("OK "):
        raise SystemExit(f"nanobox-fwd did not start: {line!r}")
    _relay_pid[int(line.split()[1])] = _procs[-1].pid
    return int(line.split()[1])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_socat(upstream_port, *opts):
    port = free_port()
    _relay_pid[port] = start(["socat", *opts, f"TCP-LISTEN:{port},bind=127.0.0.1,fork,reuseaddr",
           f"TCP:127.0.0.1:{upstream_port}"], stdin=subprocess.DEVNULL).pid
    deadline = time.time() + 5
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return port
        except OSError:
            time.sleep(0.05)
    raise SystemExit("socat did not start")


# --- (a) throughput ----------------------------------------------------------

def upload(port, nbytes, out):
    buf = memoryview(bytes(CHUNK))
    s = socket.create_connection(("127.0.0.1", port))
    left = nbytes
    while left > 0:
        left -= s.send(buf[:min(left, CHUNK)])
    s.shutdown(socket.SHUT_WR)
    got = s.recv(64)
    s.close()
    out.put(int(got) if got.strip().isdigit() else -1)


def download(port, nbytes, out):
    buf = bytearray(CHUNK)
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(f"{nbytes}\n".encode())
    total = 0
    while True:
        n = s.recv_into(buf)
        if n == 0:
            break
        total += n
    s.close()
    out.put(total)


def cpu_s(pid):
    """CPU seconds of pid, its threads and its reaped children (socat's forks)."""
    with open(f"/proc/{pid}/stat") as fh:
        f = fh.read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in f[11:15]) / os.sysconf("SC_CLK_TCK")


def clients_cpu_s():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)  # the joined client processes
    return ru.ru_utime + ru.ru_stime


def throughput(port, total, streams, direction, server_pid):
    """(MB/s, core-s per GB for the whole path, core-s per GB for its relay)
    for `total` bytes split over `streams` parallel connections."""
    relay = _relay_pid.get(port)
    c0, s0, r0 = clients_cpu_s(), cpu_s(server_pid), cpu_s(relay) if relay else 0.0
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    each = total // streams
    fn = upload if direction == "up" else download
    workers = [ctx.Process(target=fn, args=(port, each, q)) for _ in range(streams)]
    t0 = time.perf_counter()
    for w in workers:
        w.start()
    got = [q.get(timeout=600) for _ in workers]
    dt = time.perf_counter() - t0
    for w in workers:
        w.join()
    if any(g != each for g in got):
        raise SystemExit(f"short transfer through port {port}: {got} != {each}")
    gb = each * streams / 1e9
    time.sleep(0.1)  # socat reaps its per-connection child (and adds its CPU) just after
    r = (cpu_s(relay) - r0) / gb if relay else 0.0
    return (each * streams / dt / 1e6,
            (clients_cpu_s() - c0) / gb + (cpu_s(server_pid) - s0) / gb + r, r)


# --- (b) latency ---------------------------------------------------------------

def latency(port, n):
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        s = socket.create_connection(("127.0.0.1", port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.sendall(b"x")
        if s.recv(1) != b"x":
            raise SystemExit(f"bad ping through port {port}")
        samples.append(time.perf_counter() - t0)
        s.close()
    samples.sort()
    return statistics.median(samples) * 1e6, samples[int(len(samples) * 0.99) - 1] * 1e6


# --- (c) memory ----------------------------------------------------------------

def status_kib(pid, key, name="status"):
    try:
        with open(f"/proc/{pid}/{name}") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except FileNotFoundError:
        pass
    return 0


def children(pid):
    kids = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/children") as fh:
            kids += [int(k) for k in fh.read().split()]
    return kids


def idle_memory(port, pid, n=100):
    conns = []
    try:
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"x")
            assert s.recv(1) == b"x"
            conns.append(s)
        pids = [pid] + children(pid)
        rss = sum(status_kib(p, "VmRSS") for p in pids)
        anon = sum(status_kib(p, "RssAnon") for p in pids)
        pss = sum(status_kib(p, "Pss", "smaps_rollup") for p in pids)
        return rss, anon, pss, len(pids)
    finally:
        for s in conns:
            s.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gib", type=float, default=2.0, help="GiB per throughput run")
    ap.add_argument("--streams", type=int, default=4, help="parallel streams of the multi-stream run")
    ap.add_argument("--runs", type=int, default=3, help="throughput runs per path (median kept)")
    ap.add_argument("--latency-n", type=int, default=500, help="connections per latency run")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root (unshare -n, setns)")
    if not FWD_BIN.exists():
        raise SystemExit(f"{FWD_BIN} not found: set NANOBOX_BUILD")

    try:
        ns_target = start_target(netns=True)
        host_target = start_target(netns=False)
        hb, hp = BULK_PORT + HOST_OFFSET, PING_PORT + HOST_OFFSET
        paths = {  # name -> (bulk port, ping port)
            "direct": (hb, hp),
            "socat": (start_socat(hb), start_socat(hp)),
            "fwd": (start_fwd(host_target.pid, hb), start_fwd(host_target.pid, hp)),
            "fwd-netns": (start_fwd(ns_target.pid, BULK_PORT), start_fwd(ns_target.pid, PING_PORT)),
            "socat-b1M": (start_socat(hb, "-b", "1048576"), None),
        }
        server = {name: host_target.pid for name in paths}
        server["fwd-netns"] = ns_target.pid
        total = int(args.gib * (1 << 30))
        print(f"nanobox-fwd benchmark: {FWD_BIN}")
        print(f"{os.cpu_count()} CPUs, kernel {os.uname().release}, load average "
              f"{os.getloadavg()[0]:.2f} at start; {args.gib:g} GiB per run, "
              f"median of {args.runs} runs taken in turn across the paths")

        print("\n(a) bulk throughput, MB/s (higher is better)")
        cases = [("1 stream up", 1, "up"), ("1 stream down", 1, "down"),
                 (f"{args.streams} streams up", args.streams, "up")]
        print(f"  {'':16}" + "".join(f"{name:>11}" for name in paths) +
              f"{'fwd/socat':>11}{'fwd/direct':>11}")
        ratios = []
        costs = []
        for label, streams, direction in cases:
            runs = {name: [] for name in paths}
            for _ in range(args.runs):  # in turn, so a noisy moment hits every path
                for name, (bulk, _) in paths.items():
                    runs[name].append(throughput(bulk, total, streams, direction, server[name]))
            mbs = {name: statistics.median(r[0] for r in v) for name, v in runs.items()}
            costs.append((label, {name: (statistics.median(r[1] for r in v),
                                         statistics.median(r[2] for r in v))
                                  for name, v in runs.items()}))
            r_socat = mbs["fwd-netns"] / mbs["socat"]
            r_direct = mbs["fwd-netns"] / mbs["direct"]
            ratios.append((r_socat, r_direct))
            print(f"  {label:16}" + "".join(f"{mbs[n]:11.0f}" for n in paths) +
                  f"{r_socat:10.2f}x{r_direct:10.2f}x")
        worst_socat = min(r[0] for r in ratios)
        worst_direct = min(r[1] for r in ratios)
        print(f"  ratios are fwd-netns over socat (default options, as the original NanoBox ran"
              f" it) and over direct;\n  worst case {worst_socat:.2f}x socat (target >= 2.5x: "
              f"{'met' if worst_socat >= 2.5 else 'MISSED'}), {worst_direct:.2f}x direct "
              f"(target >= 0.7x: {'met' if worst_direct >= 0.7 else 'MISSED'}).")
        print("  socat-b1M (socat with a 1 MiB buffer) is a reference only: a copying relay with"
              " large reads.")

        print("\n(a') CPU per GB moved, core-seconds: whole path (client + server + relay),"
              " the relay's share in brackets")
        print(f"  {'':16}" + "".join(f"{name:>15}" for name in paths) + f"{'direct/fwd':>12}")
        for label, cost in costs:
            cells = [f"{cost[n][0]:.2f}" + (f" ({cost[n][1]:.2f})" if n != "direct" else "")
                     for n in paths]
            print(f"  {label:16}" + "".join(f"{c:>15}" for c in cells) +
                  f"{cost['direct'][0] / cost['fwd-netns'][0]:11.2f}x")
        print("  direct/fwd: fwd-netns's throughput ratio to direct when every CPU is busy"
              " (throughput ~ CPUs / cost);")
        print("  with a CPU to spare for the relay the measured ratio can be higher.")

        print(f"\n(b) connect + first byte back, µs, {args.latency_n} connections "
              "(lower is better)")
        lat = {}
        for name, (_, ping) in paths.items():
            if ping is None:
                continue
            latency(ping, 20)  # warm up
            lat[name] = latency(ping, args.latency_n)
            print(f"  {name:10} median {lat[name][0]:8.0f}   p99 {lat[name][1]:8.0f}")
        print(f"  fwd-netns median: {lat['socat'][0] / lat['fwd-netns'][0]:.1f}x lower than socat's,"
              f" {lat['fwd-netns'][0] - lat['direct'][0]:+.0f} µs over direct")

        print("\n(c) memory with 100 idle connections (target for nanobox-fwd: VmRSS < 2 MiB)")
        fwd_pid = [p for p in _procs if p.args[0] == str(FWD_BIN)][-1].pid  # fwd-netns, ping
        socat_pid = [p for p in _procs if p.args[0] == "socat"][1].pid     # socat, ping
        for name, pid, port in (("fwd-netns", fwd_pid, paths["fwd-netns"][1]),
                                ("socat", socat_pid, paths["socat"][1])):
            rss, anon, pss, nproc = idle_memory(port, pid)
            print(f"  {name:10} VmRSS {rss:7d} KiB  RssAnon {anon:7d} KiB  Pss {pss:7d} KiB"
                  f"  ({nproc} process{'es' if nproc > 1 else ''})")
        print("  (VmRSS counts shared libc pages in full; RssAnon is the process's own memory)")
    finally:
        stop_all()


if __name__ == "__main__":
    main()
