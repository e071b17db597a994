#!/usr/bin/python3
"""netns_target.py - the "sandbox" the forwarder tests reach into.

Run as `unshare -n /usr/bin/python3 netns_target.py`: it is then alone in a
fresh network namespace (like a `network: none` sandbox), brings its
loopback up and serves, all on 127.0.0.1 or 0.0.0.0 of that namespace:

  HTTP_PORT   python's http.server on 127.0.0.1 (an app bound to localhost)
  ECHO_PORT   echo, on 0.0.0.0: every byte back as it arrives, EOF after EOF
  DIGEST_PORT read to EOF, then answer "<sha256 hex> <length>\\n" and close
              (a server that only replies after the client half-closed)
  BULK_PORT   first line "<n>\\n": send n bytes of zeros; otherwise count what
              arrives until EOF and answer "<length>\\n" (the benchmark's sink)
  PING_PORT   answer each byte it reads with one byte (connect latency)

Nothing listens on REFUSED_PORT. Prints READY on stdout once listening.
`--offset N` adds N to every port and `--no-lo` leaves the loopback alone
(the benchmark also runs it in the host's namespace, for socat).
"""
import ctypes
import hashlib
import http.server
import os
import shutil
import signal
import socket
import socketserver
import subprocess
import sys
import threading

PR_SET_PDEATHSIG = 1
HTTP_PORT, ECHO_PORT, DIGEST_PORT, BULK_PORT, PING_PORT, REFUSED_PORT = 8000, 7000, 7001, 7002, 7003, 7999


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True
    request_queue_size = 512


class Echo(socketserver.BaseRequestHandler):
    def handle(self):
        buf = bytearray(1 << 16)
        while True:
            n = self.request.recv_into(buf)
            if n == 0:
                self.request.shutdown(socket.SHUT_WR)
                return
            self.request.sendall(memoryview(buf)[:n])


class Digest(socketserver.BaseRequestHandler):
    def handle(self):
        h, total = hashlib.sha256(), 0
        while True:
            data = self.request.recv(1 << 16)
            if not data:
                break
            h.update(data)
            total += len(data)
        self.request.sendall(f"{h.hexdigest()} {total}\n".encode())


class Bulk(socketserver.BaseRequestHandler):
    def handle(self):
        s = self.request
        buf = bytearray(1 << 20)
        first = s.recv(64)
        if first.endswith(b"\n") and first[:-1].isdigit():
            left = int(first[:-1])
            zeros = memoryview(bytes(1 << 20))
            while left > 0:
                n = s.send(zeros[:min(left, len(zeros))])
                left -= n
            s.shutdown(socket.SHUT_WR)
            while s.recv(4096):
                pass
            return
        total = len(first)
        while True:
            n = s.recv_into(buf)
            if n == 0:
                break
            total += n
        s.sendall(f"{total}\n".encode())


class Ping(socketserver.BaseRequestHandler):
    def handle(self):
        s = self.request
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            b = s.recv(1)
            if not b:
                return
            s.sendall(b)


class QuietHTTP(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def main():
    args = sys.argv[1:]
    offset = int(args[args.index("--offset") + 1]) if "--offset" in args else 0
    if "--no-lo" not in args:
        ip = shutil.which("ip", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin:/usr/bin:/bin")
        subprocess.run([ip, "link", "set", "lo", "up"], check=True)
    servers = [
        (("127.0.0.1", HTTP_PORT + offset), QuietHTTP, http.server.ThreadingHTTPServer),
        (("0.0.0.0", ECHO_PORT + offset), Echo, Server),
        (("127.0.0.1", DIGEST_PORT + offset), Digest, Server),
        (("127.0.0.1", BULK_PORT + offset), Bulk, Server),
        (("127.0.0.1", PING_PORT + offset), Ping, Server),
    ]
    for addr, handler, cls in servers:
        srv = cls(addr, handler)
        srv.daemon_threads = True
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    # live until killed, or until whoever started us dies
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    print("READY", flush=True)
    while True:
        signal.pause()


if __name__ == "__main__":
    main()
