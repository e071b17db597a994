#!/bin/bash
#
# supervise.sh - keep one daemon running in the foreground, as systemd's
# Restart=on-failure does, where systemd is not PID 1 (containers, CI).
#
# Usage: supervise.sh [--kill-group] NAME PIDFILE -- COMMAND [ARGS...]
#
# Writes its own pid to PIDFILE, runs COMMAND as its child (COMMAND must
# stay in the foreground: nginx with -g 'daemon off;'), and when COMMAND
# dies of a signal or exits non-zero, starts it again: after 1 s, or up to
# 30 s while it keeps dying within 10 s of its start. A clean exit (0) of
# COMMAND ends the supervisor too, as it does a systemd unit. SIGTERM or
# SIGINT to the supervisor is passed on to COMMAND; the supervisor waits
# for it to end, removes PIDFILE and exits (src/setup/down.sh does this).
# SIGHUP is passed on (nginx re-reads its configuration, nanobox-fcgi
# reopens its log). What it does goes to stderr, one line each, prefixed
# "nanobox-supervise[PID] NAME:".
#
# --kill-group: COMMAND runs in a session (and process group) of its own,
# and whatever is left of that group when COMMAND dies is SIGKILLed before
# it starts again, as systemd's KillMode=mixed does: nginx's workers outlive
# a SIGKILLed master and would keep its port, so a new master could not
# bind it. Not for nanobox-fcgi: its workers follow their master by
# themselves (finishing the request in hand) and its port forwarders, in
# sessions of their own, must outlive it to be adopted back.
#
# Why not runit's runsv: Debian's runit package, even without runit-init,
# creates system users, enables a default-syslog service and hooks into
# every LSB init script (/lib/lsb/init-functions.d/40-runit); nanobox needs
# none of that for two processes (docs/RELIABILITY.md).
set -uo pipefail

group=0
if [ "${1:-}" = --kill-group ]; then
    group=1
    shift
fi
if [ "$#" -lt 4 ] || [ "$3" != -- ]; then
    echo "usage: supervise.sh [--kill-group] NAME PIDFILE -- COMMAND [ARGS...]" >&2
    exit 2
fi
name=$1 pidfile=$2
shift 3

say() {
    printf '%s nanobox-supervise[%d] %s: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$$" "$name" "$*" >&2
}

child=0 stopping=0
# shellcheck disable=SC2317  # called by the traps below
forward() {
    local sig=$1
    [ "$sig" = HUP ] || stopping=1
    [ "$child" -gt 0 ] && kill -"$sig" "$child" 2>/dev/null
}
trap 'forward TERM' TERM
trap 'forward INT' INT
trap 'forward HUP' HUP

echo "$$" >"$pidfile.tmp" && mv -f "$pidfile.tmp" "$pidfile"
delay=1
while [ "$stopping" = 0 ]; do
    started=$SECONDS
    if [ "$group" = 1 ]; then
        # not a group leader (no job control here), so setsid execs in place
        setsid "$@" &
    else
        "$@" &
    fi
    child=$!
    say "started $1 (pid $child)"
    # wait returns early (> 128) when a trapped signal arrives: wait again
    # until the child itself has ended; then its own status
    while kill -0 "$child" 2>/dev/null; do
        wait "$child"
    done
    wait "$child"
    status=$?
    if [ "$group" = 1 ] && kill -KILL -- "-$child" 2>/dev/null; then
        say "killed what was left of $1's process group $child"
    fi
    child=0
    if [ "$stopping" = 1 ]; then
        say "stopped (status $status)"
        break
    fi
    if [ "$status" = 0 ]; then
        say "$1 exited cleanly: not restarting it"
        break
    fi
    if [ "$status" -gt 128 ]; then
        what="killed by signal $((status - 128))"
    else
        what="exited with status $status"
    fi
    # a daemon that keeps dying at start is not restarted in a tight loop
    if [ $((SECONDS - started)) -ge 10 ]; then
        delay=1
    fi
    say "$1 $what; starting it again in ${delay} s"
    sleep "$delay" &
    wait $! || true
    [ "$stopping" = 1 ] && break
    delay=$((delay * 2 > 30 ? 30 : delay * 2))
done
rm -f "$pidfile"
exit 0
