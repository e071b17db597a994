#!/bin/bash
#
# up.sh - start nanobox on this machine: the one command of the README.
#
# As root on Debian 12, from the repository:
#     src/setup/up.sh
# installs the packages, builds into build/, starts dockerd if no engine
# answers, builds the sandbox image if missing, writes
# /etc/nanobox/nanobox.conf with a fresh API key if there is none, starts
# nanobox-fcgi and a nginx of its own on 127.0.0.1:8080, waits for
# /healthz, and prints the URL, the key and a first request.
#
# Running it again is harmless: whatever is already up is left alone and
# the same information is printed. src/setup/down.sh stops it.
#
# Environment:
#   NANOBOX_BUILD         a build directory to run as it is (nothing is built;
#                         without systemd only): what the tests use
#   NANOBOX_PORT          port of the local nginx (default 8080, or the one
#                         the previous run used)
#   NANOBOX_PORTS_DOMAIN  domain of exposed sandbox ports, as in
#                         http://<sandboxport>-<sandboxId>.<domain>:<port>/
#                         (default: the one port_url of the config names,
#                         else sandbox.localhost, which needs no DNS locally)
#
# Where systemd runs as PID 1, the build is configured for the system's
# paths (--sysconfdir=/etc --localstatedir=/var, in build-system/), `make
# install`ed, and the daemons run as the units nanobox-fcgi.service and
# nanobox-nginx.service (docs/INSTALL.md); logs go to the journal; systemd
# restarts either if it dies (Restart=on-failure). Elsewhere (containers,
# CI) each daemon runs detached (setsid) under src/setup/supervise.sh, which
# starts it again within seconds when it dies (kill -9 of nanobox-fcgi's
# master: the sandboxes, ports and processes are adopted back); they are
# tracked by their pid files under /run/nanobox; nanobox-fcgi writes
# /var/log/nanobox/fcgi.log and reopens it on SIGHUP (logrotate).
# NANOBOX_NO_SYSTEMD=1 takes that second way on a systemd machine too.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

build_dir=$NB_REPO_ROOT/build
nginx_conf=$NB_NGINX_DIR/nginx.conf
nginx_prefix=$NB_LIB_DIR/nginx

[ "$(id -u)" -eq 0 ] || nb_die "up.sh must run as root (it installs packages and starts daemons)"

# systemd as PID 1 (sd_booted(3)'s test), and its systemctl at hand
use_systemd=0
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1 &&
    [ "${NANOBOX_NO_SYSTEMD:-}" != 1 ]; then
    use_systemd=1
    build_dir=$NB_REPO_ROOT/build-system
fi

# The port: the environment, else what the last run configured, else 8080.
if [ -n "${NANOBOX_PORT:-}" ]; then
    port=$NANOBOX_PORT
elif [ -f "$nginx_conf" ]; then
    port=$(sed -n 's/^ *listen 127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$nginx_conf" | head -n 1)
fi
port=${port:-8080}
case $port in '' | *[!0-9]*) nb_die "NANOBOX_PORT must be a port number, not '$port'" ;; esac
http_addr=127.0.0.1:$port
# The ports domain: the environment, else the one port_url names
# (http://{port}-{id}.DOMAIN:PORT/), else sandbox.localhost.
if [ -n "${NANOBOX_PORTS_DOMAIN:-}" ]; then
    ports_domain=$NANOBOX_PORTS_DOMAIN
else
    ports_domain=$(nb_conf_get "$NB_CONF" port_url "" |
        sed -n 's|^[a-z]*://{port}-{id}\.\([^:/]*\).*|\1|p')
fi
ports_domain=${ports_domain:-sandbox.localhost}

# 1. packages, build, Docker, image ------------------------------------------
nb_install_packages
if [ "$use_systemd" = 1 ]; then
    nb_build "$build_dir" --prefix=/usr/local --sysconfdir=/etc --localstatedir=/var
elif [ -n "${NANOBOX_BUILD:-}" ]; then
    build_dir=$(cd "$NANOBOX_BUILD" && pwd) || nb_die "NANOBOX_BUILD=$NANOBOX_BUILD is no directory"
    nb_log "build: running $build_dir as it is (NANOBOX_BUILD)"
else
    nb_build "$build_dir"
fi
[ -x "$build_dir/nanobox-fcgi" ] || nb_die "the build did not produce $build_dir/nanobox-fcgi"
nb_start_dockerd
nb_build_image

# 2. configuration -------------------------------------------------------------
if [ -f "$NB_CONF" ]; then
    nb_log "config: keeping $NB_CONF"
else
    nb_log "config: writing $NB_CONF with a new API key"
    install -d -m 0755 "$(dirname "$NB_CONF")"
    key=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
    # 0600: the file holds the API key; nanobox-fcgi reads it as root.
    (
        umask 077
        cat >"$NB_CONF.tmp" <<EOF
# nanobox configuration, written by src/setup/up.sh on $(date -u +%Y-%m-%d).
# "key = value" lines; every key not set here keeps its built-in default
# (see docs/CONFIG.md). Restart after a change: src/setup/down.sh && src/setup/up.sh

# Clients send "Authorization: Bearer <api_key>" (or "X-API-Key: <api_key>").
api_key = $key

# The FastCGI socket nginx talks to; nginx's workers run as www-data.
listen = $NB_RUN_DIR/fcgi.sock
socket_group = www-data

# The sandbox table: survives restarts of nanobox-fcgi.
state_file = $NB_LIB_DIR/state

# Ephemeral ports (POST /sandbox/ID/ephemeralport): one nanobox-fwd per open
# port listens on a host port from port_range (on port_bind; 0.0.0.0 makes
# them reachable from the LAN, as the original NanoBox did) and on a unix
# socket in ports_dir, which nginx proxies http://<port>-<id>.<domain>/ to.
# port_url is the "url" answers show: keep it in step with the nginx port
# and NANOBOX_PORTS_DOMAIN. "host" in answers is public_host, by default
# this machine's primary IPv4 address.
ports_dir = $NB_RUN_DIR/ports
port_range = 20000-29999
port_bind = 0.0.0.0
#public_host = 192.0.2.10
port_url = http://{port}-{id}.$ports_domain:$port/
max_ports = 8
max_port_duration = 86400
EOF
    )
    mv -f "$NB_CONF.tmp" "$NB_CONF"
fi
api_key=$(nb_conf_get "$NB_CONF" api_key "")
fcgi_socket=$(nb_conf_get "$NB_CONF" listen "$NB_RUN_DIR/fcgi.sock")
# (the fallback is nanobox-fcgi's own default, for a config without the key)
ports_dir=$(nb_conf_get "$NB_CONF" ports_dir /run/nanobox/ports)

# 0755 all the way down: nginx's workers (www-data) reach the sockets (the
# API's, the forwarders' in ports_dir) and their temp dirs through these.
install -d -m 0755 "$NB_RUN_DIR" "$NB_LIB_DIR" "$NB_LOG_DIR" "$nginx_prefix" \
    "$(dirname "$fcgi_socket")" "$ports_dir"

# 3. the daemons under systemd ------------------------------------------------
if [ "$use_systemd" = 1 ]; then
    nginx_env=$(dirname "$NB_CONF")/nginx.env
    if [ ! -f "$nginx_env" ]; then
        nb_log "config: writing $nginx_env (settings of nanobox-nginx.service)"
        cat >"$nginx_env" <<EOF
# Settings of nanobox-nginx.service, written by src/setup/up.sh (the
# installed sample says more: docs/INSTALL.md). Apply: systemctl reload nanobox-nginx
NANOBOX_LISTEN=$http_addr
NANOBOX_PORTS_DOMAIN=$ports_domain
NANOBOX_PORTS_DIR=$ports_dir
EOF
    fi
    # keeps $NB_CONF and $nginx_env: they exist
    make -C "$build_dir" install >/dev/null
    systemctl daemon-reload
    if systemctl is-active --quiet nanobox-fcgi.service; then
        nb_log "nanobox-fcgi: already running (systemctl restart nanobox-fcgi runs the new build)"
    fi
    systemctl enable --now nanobox-fcgi.service ||
        nb_die "nanobox-fcgi.service did not start: journalctl -u nanobox-fcgi"
    if systemctl is-active --quiet nanobox-nginx.service; then
        systemctl reload nanobox-nginx.service # re-renders its config
    fi
    systemctl enable --now nanobox-nginx.service ||
        nb_die "nanobox-nginx.service did not start: journalctl -u nanobox-nginx"
    logs="journalctl -u nanobox-fcgi -u nanobox-nginx, $nginx_prefix/error.log"
    stop_cmd="systemctl stop nanobox-nginx nanobox-fcgi"
fi

# 3. nanobox-fcgi ------------------------------------------------------------
supervise=$NB_REPO_ROOT/src/setup/supervise.sh

# wait_fcgi SUPERVISOR: until the socket and a live pid file are there
# (30 s), while SUPERVISOR runs; sets fcgi_pid.
wait_fcgi() {
    local sup=$1 deadline=$((SECONDS + 30))
    until [ -S "$fcgi_socket" ] && fcgi_pid=$(nb_pidfile_alive "$NB_FCGI_PID" nanobox-fcgi); do
        if ! kill -0 "$sup" 2>/dev/null; then
            tail -n 20 "$NB_LOG_DIR/fcgi.log" >&2 || true
            nb_die "nanobox-fcgi exited at start; see $NB_LOG_DIR/fcgi.log"
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            tail -n 20 "$NB_LOG_DIR/fcgi.log" >&2 || true
            kill -TERM "$sup" 2>/dev/null || true
            nb_die "nanobox-fcgi did not create $fcgi_socket and $NB_FCGI_PID within 30 s"
        fi
        sleep 0.2
    done
}

if [ "$use_systemd" = 1 ]; then
    : # nanobox-fcgi.service, started above
elif fcgi_pid=$(nb_pidfile_alive "$NB_FCGI_PID" nanobox-fcgi); then
    nb_log "nanobox-fcgi: already running (pid $fcgi_pid)"
    nb_pidfile_alive "$NB_FCGI_SUPERVISE_PID" supervise.sh >/dev/null ||
        nb_log "nanobox-fcgi: not supervised (an older up.sh started it): down.sh, then up.sh, restarts it under supervise.sh"
elif sup=$(nb_pidfile_alive "$NB_FCGI_SUPERVISE_PID" supervise.sh); then
    # its supervisor is starting it again right now
    wait_fcgi "$sup"
    nb_log "nanobox-fcgi: already running (pid $fcgi_pid)"
else
    # the configuration is checked first: under a supervisor, a daemon that
    # cannot start would only be started again and again
    "$build_dir/nanobox-fcgi" -c "$NB_CONF" -t >/dev/null ||
        nb_die "nanobox-fcgi refuses $NB_CONF (see above); nothing started"
    # Not running, so a socket file left at our path is stale: without this,
    # the wait below would see it and go on before the new one is bound.
    if [ -S "$fcgi_socket" ]; then
        rm -f "$fcgi_socket"
    fi
    nb_log "nanobox-fcgi: starting (log: $NB_LOG_DIR/fcgi.log)"
    # -l: the file it reopens on SIGHUP (logrotate's postrotate); the
    # redirection catches what comes before it is opened (both append), and
    # what the supervisor says
    # shellcheck disable=SC2094
    setsid "$supervise" nanobox-fcgi "$NB_FCGI_SUPERVISE_PID" -- \
        "$build_dir/nanobox-fcgi" -c "$NB_CONF" -p "$NB_FCGI_PID" -l "$NB_LOG_DIR/fcgi.log" \
        </dev/null >>"$NB_LOG_DIR/fcgi.log" 2>&1 &
    wait_fcgi $!
    nb_log "nanobox-fcgi: listening on $fcgi_socket (pid $fcgi_pid)"
fi

# 4. nginx ---------------------------------------------------------------------
# A nginx of our own next to the system's: own config, pid file, prefix.

# wait_nginx SUPERVISOR: until nginx's pid file names a live nginx (10 s);
# sets nginx_pid. nginx writes it once its sockets are bound.
wait_nginx() {
    local sup=$1 deadline=$((SECONDS + 10))
    until nginx_pid=$(nb_pidfile_alive "$NB_NGINX_PID" nginx); do
        if ! kill -0 "$sup" 2>/dev/null || [ "$SECONDS" -ge "$deadline" ]; then
            kill -TERM "$sup" 2>/dev/null || true
            tail -n 5 "$nginx_prefix/error.log" >&2 || true
            nb_die "nginx did not start (is $http_addr taken?); see $nginx_prefix/error.log"
        fi
        sleep 0.2
    done
}

if [ "$use_systemd" = 1 ]; then
    : # nanobox-nginx.service, started above
else
    nginx_files=("$nginx_conf" "$NB_NGINX_DIR/nanobox.conf" "$NB_NGINX_DIR/nanobox-http.conf"
        "$NB_NGINX_DIR/nanobox-ports.conf")
    before=$({ cat "${nginx_files[@]}" 2>/dev/null || true; } | md5sum)
    "$NB_REPO_ROOT/src/setup/render-nginx.sh" --ports-dir "$ports_dir" --ports-domain "$ports_domain" \
        "$NB_NGINX_DIR" "$fcgi_socket" "$http_addr" "$nginx_prefix" "$NB_NGINX_PID"
    after=$(cat "${nginx_files[@]}" | md5sum)

    if ! nginx_pid=$(nb_pidfile_alive "$NB_NGINX_PID" nginx) &&
        sup=$(nb_pidfile_alive "$NB_NGINX_SUPERVISE_PID" supervise.sh); then
        wait_nginx "$sup" # its supervisor is starting it again right now
    fi
    if [ -n "$nginx_pid" ]; then
        if [ "$before" != "$after" ]; then
            nb_log "nginx: configuration changed, reloading (pid $nginx_pid)"
            kill -HUP "$nginx_pid"
            sleep 1
        else
            nb_log "nginx: already running (pid $nginx_pid)"
        fi
        nb_pidfile_alive "$NB_NGINX_SUPERVISE_PID" supervise.sh >/dev/null ||
            nb_log "nginx: not supervised (an older up.sh started it): down.sh, then up.sh, restarts it under supervise.sh"
    else
        nb_log "nginx: starting on $http_addr (logs: $nginx_prefix/)"
        if ! nginx -t -q -c "$nginx_conf" -p "$nginx_prefix/" </dev/null >>"$nginx_prefix/error.log" 2>&1; then
            tail -n 5 "$nginx_prefix/error.log" >&2 || true
            nb_die "nginx refuses $nginx_conf; see $nginx_prefix/error.log"
        fi
        # in the foreground (daemon off) under its supervisor; its stdio must
        # not keep our caller's pipes
        setsid "$supervise" --kill-group nginx "$NB_NGINX_SUPERVISE_PID" -- \
            nginx -c "$nginx_conf" -p "$nginx_prefix/" -g "daemon off;" \
            </dev/null >>"$nginx_prefix/error.log" 2>&1 &
        wait_nginx $!
    fi
fi
logs=${logs:-$NB_LOG_DIR/fcgi.log, $nginx_prefix/error.log}
stop_cmd=${stop_cmd:-$NB_REPO_ROOT/src/setup/down.sh}

# 5. ready? ----------------------------------------------------------------------
url=http://$http_addr
deadline=$((SECONDS + 30))
until curl -fsS -o /dev/null --max-time 5 "$url/healthz" 2>/dev/null; do
    if [ "$SECONDS" -ge "$deadline" ]; then
        curl -sS --max-time 5 "$url/healthz" >&2 || true
        [ "$use_systemd" = 1 ] || tail -n 20 "$NB_LOG_DIR/fcgi.log" >&2 || true
        nb_die "$url/healthz did not answer within 30 s; logs: $logs"
    fi
    sleep 0.5
done

cat <<EOF

nanobox is up at $url

  API key:   ${api_key:-(none: api_key is empty in $NB_CONF, auth is OFF)}
  console:   $url/ in a browser (paste the API key; docs/WEB.md)
  config:    $NB_CONF
  logs:      $logs
  nginx:     $NB_NGINX_DIR/nanobox.conf is the snippet to include in your own
             nginx server {}, $NB_NGINX_DIR/nanobox-http.conf its request-rate
             zone and $NB_NGINX_DIR/nanobox-ports.conf the server {} of
             exposed ports (both http {} level); this one runs from $nginx_conf
  stop:      $stop_cmd

Create a sandbox:

  curl -s -X POST -H "Authorization: Bearer $api_key" $url/sandbox

Expose port 8000 of it for 10 minutes (then open the "url" of the answer):

  curl -s -X POST -H "Authorization: Bearer $api_key" \\
       -d '{"sandboxport": 8000, "duration": 600}' $url/sandbox/SANDBOX_ID/ephemeralport

EOF
