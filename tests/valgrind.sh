#!/usr/bin/env bash
#
# tests/valgrind.sh - run nanobox-fcgi (master, workers, reaper) under
# valgrind behind a real nginx, drive every route including error paths and
# a timed-out exec, stop it, and fail if valgrind reported anything: invalid
# reads/writes, uninitialised values, or definitely lost memory.
#
#   tests/valgrind.sh [BUILDDIR]      (default build/, a non-sanitizer build)
#
# Needs root, dockerd and the nanobox:latest image (tests/run.sh sets those up).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=../src/setup/common.sh
. "$ROOT/src/setup/common.sh"
build=${1:-$ROOT/build}
work=$(mktemp -d /tmp/nanobox-valgrind-XXXXXX)
chmod 755 "$work" # nginx workers (www-data) must reach the socket
# below the port bands of the integration suite (22000-26799, nbtest.py),
# which may run beside this
port=$((20000 + RANDOM % 2000))
instance=valgrind-$(basename "$work")
fcgi_pid='' nginx_pid=''

cleanup() {
    if [ -n "$nginx_pid" ]; then kill "$nginx_pid" 2>/dev/null || true; fi
    if [ -n "$fcgi_pid" ]; then kill "$fcgi_pid" 2>/dev/null || true; fi
    # shellcheck disable=SC2046  # ids, one word each
    nb_docker_each rm -fv -- $(docker ps -aq --filter "label=nanobox.instance=$instance") 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
[ -n "${NANOBOX_VALGRIND_KEEP:-}" ] && trap - EXIT

command -v valgrind >/dev/null || { echo "valgrind.sh: valgrind is not installed" >&2; exit 1; }
cat >"$work/nb.conf" <<CONF
instance = $instance
listen = $work/fcgi.sock
socket_group =
socket_mode = 0666
state_file = $work/state
api_key = k
workers_min = 2
workers_max = 4
CONF
"$ROOT/src/setup/render-nginx.sh" "$work/ng" "$work/fcgi.sock" "127.0.0.1:$port" "$work/ng" >/dev/null

setsid valgrind -q --trace-children=yes --suppressions="$ROOT/tests/valgrind.supp" --leak-check=full --errors-for-leak-kinds=definite \
    --log-file="$work/vg.%p.log" "$build/nanobox-fcgi" -c "$work/nb.conf" -p "$work/fcgi.pid" \
    >"$work/fcgi.log" 2>&1 &
# a loaded machine (CI beside other builds) can take over 20 s to start a
# master under valgrind: wait up to 2 minutes for its socket and pid file
for _ in $(seq 600); do [ -S "$work/fcgi.sock" ] && [ -s "$work/fcgi.pid" ] && break; sleep 0.2; done
if [ ! -s "$work/fcgi.pid" ]; then
    echo "valgrind.sh: nanobox-fcgi under valgrind did not start in 2 minutes" >&2
    cat "$work/fcgi.log" >&2
    exit 1
fi
fcgi_pid=$(cat "$work/fcgi.pid")
nginx -c "$work/ng/nginx.conf" -p "$work/ng"
nginx_pid=$(cat "$work/ng/nginx.pid")

u=http://127.0.0.1:$port
h='X-API-Key: k'
# workers start slowly under valgrind: wait until one answers
for _ in $(seq 150); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$u/healthz")" = 200 ] && break
    sleep 0.2
done
req() { curl -s -o /dev/null -w '%{http_code} ' "$@"; }
req "$u/healthz"
req -X POST "$u/sandbox"                       # 401
id=$(curl -s -X POST -H "$h" "$u/sandbox" -d '{"ttl":60,"metadata":{"a":"b"},"env":{"X":"1"}}' |
    /usr/bin/python3 -c 'import sys,json;print(json.load(sys.stdin)["sandboxId"])')
req -H "$h" "$u/sandbox/$id/exec" -d '{"command":"printf \"\\377x\"; echo e >&2; yes | head -c 2000000","timeout":5}'
req -H "$h" "$u/sandbox/$id/exec" -d '{"command":"sleep 5 & sleep 10","timeout":1}'
req -H "$h" "$u/sandbox/$id/exec" -d '{"argv":["printf","%s|","a b","x y"]}'
req -H "$h" "$u/sandbox/$id/exec" -d '{"argv":["echo",1]}'
req -H "$h" "$u/sandbox/$id/exec" -d '{"argv":["true"],"command":"true"}'
req -H "$h" "$u/sandbox?metadata.a=b"
req -H "$h" "$u/sandbox/$id"
req -H "$h" "$u/sandbox" -d '{"ttl":"x"}'
req -H "$h" "$u/sandbox" -d "$(printf '[%.0s' $(seq 100))"
req -H "$h" "$u/sandbox" -d '{"memory":"1t","cpus":9}'
req -H "$h" "$u/sandbox/not-a-uuid"
req -H "$h" "$u/sandbox/$id/timeout" -d '{"ttl":30}'
# MCP over HTTP: a session, tool calls run through the router in capture mode, errors
sid=$(curl -s -D - -o /dev/null -H "$h" "$u/mcp" -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}' |
    tr -d '\r' | sed -n 's/^[Mm]cp-[Ss]ession-[Ii]d: //p')
m() { req -H "$h" -H "Mcp-Session-Id: $sid" -H 'MCP-Protocol-Version: 2025-06-18' "$u/mcp" -d "$1"; }
m '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sandbox_exec","arguments":{"sandbox_id":"'"$id"'","command":"echo hi; exit 3"}}}'
m '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"sandbox_write_file","arguments":{"sandbox_id":"'"$id"'","path":"f","content":"x"}}}'
m '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"sandbox_list","arguments":{}}}'
m '{"jsonrpc":"2.0","method":"notifications/initialized"}'   # 202
m '{oops'                                                    # 400
req -X DELETE -H "$h" -H "Mcp-Session-Id: $sid" "$u/mcp"    # 204
m '{"jsonrpc":"2.0","id":5,"method":"ping"}'                 # 404
req -X GET -H "$h" "$u/mcp"                                  # 405
req -X DELETE -H "$h" "$u/sandbox/$id"
req -X DELETE -H "$h" "$u/sandbox/$id"         # 404
echo

kill "$nginx_pid"; nginx_pid=
kill "$fcgi_pid"
for _ in $(seq 150); do kill -0 "$fcgi_pid" 2>/dev/null || break; sleep 0.2; done
fcgi_pid=

if find "$work" -name 'vg.*.log' -size +0 | grep -q .; then
    cat "$work"/vg.*.log
    echo "valgrind.sh: valgrind reported errors (above)" >&2
    exit 1
fi
echo "valgrind.sh: master, workers and reaper ran clean under valgrind ($(find "$work" -name 'vg.*.log' | wc -l) processes)"
