#!/bin/bash
#
# down.sh - stop what src/setup/up.sh started: its nginx, then nanobox-fcgi.
#
# Usage: down.sh [--purge]
#
# Each daemon's supervisor (src/setup/supervise.sh) is sent SIGTERM, by the
# pid in its pid file under /run/nanobox; it passes the signal on and ends
# once its daemon has: nothing is left running. A daemon with no
# supervisor (started by an older up.sh, or whose supervisor was killed) is
# sent SIGTERM itself. Each is waited for (where up.sh started them as
# systemd units: systemctl stop).
# Sandboxes are kept: their containers keep running and the state table
# stays on disk, so the next up.sh picks them up (and the reaper expires
# them as usual). dockerd is left running.
#
#   --purge  also remove this instance's containers (label
#            nanobox.instance=<instance from the config, "default">)
#            with `docker rm -fv` (-v: the anonymous volume of each
#            sandbox's /dev/pts goes with it; such volumes left unused
#            by an earlier removal go too), then the bridge sandboxes'
#            kernel rules and Docker network (bridge_interface,
#            bridge_network). Without --purge they stay: kept sandboxes
#            keep their rules.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

purge=0
for arg in "$@"; do
    case $arg in
    --purge) purge=1 ;;
    -h | --help)
        sed -n '3,24s/^# \{0,1\}//p' "$0"
        exit 0
        ;;
    *) nb_die "down.sh: unknown argument '$arg' (try --help)" ;;
    esac
done

[ "$(id -u)" -eq 0 ] || nb_die "down.sh must run as root"

# term_wait PID TIMEOUT: SIGTERM to PID, then wait up to TIMEOUT seconds
# for it to be gone. Fails if it still runs.
term_wait() {
    local deadline=$((SECONDS + $2))
    kill -TERM "$1"
    while kill -0 "$1" 2>/dev/null; do
        [ "$SECONDS" -ge "$deadline" ] && return 1
        sleep 0.2
    done
    return 0
}

# stop NAME PIDFILE TIMEOUT [SUPERVISOR_PIDFILE]: SIGTERM the process in
# PIDFILE (first its supervisor, which passes it on), wait up to TIMEOUT
# seconds, say what happened. Fails if it is still running.
stop() {
    local name=$1 pidfile=$2 timeout=$3 suppid=${4:-} pid sup
    if [ -n "$suppid" ] && sup=$(nb_pidfile_alive "$suppid" supervise.sh); then
        pid=$(nb_pidfile_alive "$pidfile" "$name") || pid=
        nb_log "$name: sending SIGTERM to its supervisor (pid $sup)${pid:+, which passes it on to pid $pid}"
        term_wait "$sup" "$timeout" ||
            { nb_log "$name: its supervisor still runs after ${timeout}s (pid $sup); not killing it - see the log"; return 1; }
        rm -f "$suppid"
        if ! nb_pidfile_alive "$pidfile" "$name" >/dev/null; then
            rm -f "$pidfile"
            nb_log "$name: stopped${pid:+ (was pid $pid)}, and its supervisor (was pid $sup)"
            return 0
        fi
    fi
    if ! pid=$(nb_pidfile_alive "$pidfile" "$name"); then
        nb_log "$name: not running"
        rm -f "$pidfile" ${suppid:+"$suppid"}
        return 0
    fi
    nb_log "$name: sending SIGTERM to pid $pid"
    term_wait "$pid" "$timeout" ||
        { nb_log "$name: still running after ${timeout}s (pid $pid); not killing it - see its log"; return 1; }
    # Both remove their pid file on a clean exit; a crash may leave it.
    if [ -f "$pidfile" ] && [ "$(tr -dc 0-9 <"$pidfile")" = "$pid" ]; then
        rm -f "$pidfile"
    fi
    nb_log "$name: stopped (was pid $pid)"
}

rc=0
# nginx first, so that no new request reaches a pool that is going away.
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1 &&
    systemctl is-enabled --quiet nanobox-fcgi.service 2>/dev/null; then
    # what up.sh started under systemd (systemd waits for the pool's grace)
    nb_log "systemd: stopping nanobox-nginx.service and nanobox-fcgi.service"
    systemctl stop nanobox-nginx.service nanobox-fcgi.service || rc=1
else
    stop nginx "$NB_NGINX_PID" 15 "$NB_NGINX_SUPERVISE_PID" || rc=1
    # nanobox-fcgi lets in-flight requests finish for up to shutdown_timeout.
    grace=$(nb_conf_get "$NB_CONF" shutdown_timeout 30)
    case $grace in '' | *[!0-9]*) grace=30 ;; esac
    stop nanobox-fcgi "$NB_FCGI_PID" $((grace + 10)) "$NB_FCGI_SUPERVISE_PID" || rc=1
fi

if [ "$purge" -eq 1 ]; then
    instance=$(nb_conf_get "$NB_CONF" instance default)
    if ! nb_docker_answers; then
        nb_log "purge: no Docker engine answers; nothing removed"
        exit 1
    fi
    mapfile -t containers < <(docker ps -aq --filter "label=nanobox.instance=$instance")
    if [ "${#containers[@]}" -eq 0 ]; then
        nb_log "purge: no containers with label nanobox.instance=$instance"
    else
        nb_log "purge: removing ${#containers[@]} container(s) with label nanobox.instance=$instance"
        # a sandbox with a root has a file system of nanobox's mounted over
        # its writable layer (root_disk_max, src/fcgi/engine/rootdisk.h): stopped,
        # then unmounted, else Docker cannot remove the layer's directory
        nb_docker_each kill -- "${containers[@]}" 2>/dev/null || true
        docker wait "${containers[@]}" >/dev/null 2>&1 || true
        for c in "${containers[@]}"; do
            upper=$(docker inspect -f '{{.GraphDriver.Data.UpperDir}}' "$c" 2>/dev/null) || continue
            layer=${upper%/diff}
            if [ "$layer" != "$upper" ] && mountpoint -q "$layer"; then
                umount -l "$layer" || rc=1
            fi
        done
        nb_docker_each rm -fv -- "${containers[@]}" || rc=1
    fi
    # the /dev/pts volumes of containers removed without theirs (a wedged
    # dockerd, a `docker rm` without -v): a sandbox's own volumes only
    # (not `docker volume prune`: Docker 20.10 skips volumes with options)
    mapfile -t volumes < <(docker volume ls -q --filter dangling=true \
        --filter "label=nanobox.instance=$instance" --filter label=nanobox.sandbox)
    if [ "${#volumes[@]}" -gt 0 ]; then
        nb_log "purge: removing ${#volumes[@]} unused volume(s) of this instance's sandboxes"
        docker volume rm -- "${volumes[@]}" >/dev/null || rc=1
    fi
    if [ "$rc" -eq 0 ]; then
        iface=$(nb_conf_get "$NB_CONF" bridge_interface nanobox0)
        network=$(nb_conf_get "$NB_CONF" bridge_network nanobox)
        nb_log "purge: removing the rules of bridge $iface and Docker network $network"
        nb_net_purge "$iface" "$network" || rc=1
        # the builds' network (template_network = bridge): the same rules, a name derived
        nb_log "purge: removing the rules of bridge ${iface:0:14}b and Docker network $network-build"
        nb_net_purge "${iface:0:14}b" "$network-build" || rc=1
    fi
fi

exit "$rc"
