#!/bin/bash
#
# render-front.sh - render a front's nginx config (docs/CLUSTER.md, "The
# front").
#
# Usage: render-front.sh [--tls-cert FILE --tls-key FILE [--tls-listen LISTEN]]
#                        OUTDIR LISTEN PREFIX [PIDFILE]
#   OUTDIR   where to write nanobox-front.conf (a complete nginx.conf); it
#            includes OUTDIR/nodes.conf, which nanobox-front writes and
#            keeps in step with etcd
#   LISTEN   what the front listens on: 80, 0.0.0.0:8080, ...
#   PREFIX   absolute dir for its logs, temp dirs and, by default, pid file
#   PIDFILE  its pid file (default PREFIX/nginx.pid)
#
# TLS, as options or from the environment (an option wins), as
# render-nginx.sh has it: the front terminates TLS with the operator's
# certificate (its names: the API's host and *.<ports domain>, a wildcard)
# and sends plain http to the nodes, Host unchanged.
#   --tls-cert FILE      NANOBOX_TLS_CERT    certificate chain (PEM)
#   --tls-key FILE       NANOBOX_TLS_KEY     its private key (PEM)
#   --tls-listen LISTEN  NANOBOX_TLS_LISTEN  an https address beside LISTEN
#                        (which keeps plain http); not given: LISTEN itself
#                        speaks https only
#
# Then nanobox-front (its map is there within a second, an empty one if
# etcd does not answer yet), and nginx beside it:
#   nanobox-front -c /etc/nanobox/nanobox.conf --out OUTDIR/nodes.conf \
#       --nginx-pid PIDFILE &
#   nginx -c OUTDIR/nanobox-front.conf -p PREFIX
set -euo pipefail

die() {
    printf 'render-front.sh: %s\n' "$*" >&2
    exit 2
}
tls_cert=${NANOBOX_TLS_CERT:-} tls_key=${NANOBOX_TLS_KEY:-} tls_listen=${NANOBOX_TLS_LISTEN:-}
while [ $# -gt 0 ]; do
    case $1 in
    --tls-cert | --tls-key | --tls-listen)
        [ $# -ge 2 ] || die "$1 needs a value"
        case $1 in
        --tls-cert) tls_cert=$2 ;;
        --tls-key) tls_key=$2 ;;
        --tls-listen) tls_listen=$2 ;;
        esac
        shift 2
        ;;
    --) shift; break ;;
    -*) die "unknown option '$1'" ;;
    *) break ;;
    esac
done
if [ $# -lt 3 ] || [ $# -gt 4 ]; then
    sed -n '3,/^set /{/^#/p}' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
# the source tree (src/setup -> nginx/), or where `make install` puts this
# script ($(pkgdatadir)/setup -> $(pkgdatadir)/nginx), as render-nginx.sh
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ -d "$here/../../nginx" ]; then
    template=$here/../../nginx/nanobox-front.conf.in
else
    template=$here/../nginx/nanobox-front.conf.in
fi
outdir=$1 listen=$2 prefix=$3 pidfile=${4:-$3/nginx.pid}
case "$prefix" in /*) ;; *) echo "render-front.sh: PREFIX must be absolute" >&2; exit 2 ;; esac
mkdir -p "$outdir" "$prefix"
outdir=$(cd "$outdir" && pwd)
tls_lines="# no TLS (render-front.sh --tls-cert/--tls-key)"
tls_listen_line="# no https address of its own (render-front.sh --tls-listen)"
if [ -n "$tls_cert$tls_key" ]; then
    if [ -z "$tls_cert" ] || [ -z "$tls_key" ]; then
        die "--tls-cert and --tls-key go together (NANOBOX_TLS_CERT, NANOBOX_TLS_KEY)"
    fi
    for f in "$tls_cert" "$tls_key"; do
        case $f in /*) ;; *) die "TLS files are absolute paths, not '$f'" ;; esac
        case $f in *[!A-Za-z0-9_./:@%+=,-]*) die "TLS file '$f' has characters nginx would misread" ;; esac
        if [ ! -f "$f" ] || [ ! -r "$f" ]; then
            die "TLS file $f: no such file, or not readable by $(id -un)"
        fi
    done
    tls_lines="ssl_certificate $tls_cert;
    ssl_certificate_key $tls_key;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_cache shared:nanobox_front_tls:10m;
    ssl_session_timeout 1h;"
    if [ -n "$tls_listen" ]; then
        case $tls_listen in '' | *[!A-Za-z0-9_.:\[\]-]*) die "TLS listen '$tls_listen' is not an address" ;; esac
        tls_listen_line="listen $tls_listen ssl default_server;"
    else
        listen="$listen ssl"
    fi
elif [ -n "$tls_listen" ]; then
    die "--tls-listen needs --tls-cert and --tls-key"
fi
text=$(cat "$template")
text=${text//@CONF@/"$outdir/nanobox-front.conf"}
text=${text//@NODES@/"$outdir/nodes.conf"}
text=${text//@LISTEN@/"$listen"}
text=${text//@PREFIX@/"$prefix"}
text=${text//@PID@/"$pidfile"}
text=${text//@TLS@/"$tls_lines"}
text=${text//@TLS_LISTEN_LINE@/"$tls_listen_line"}
printf '%s\n' "$text" > "$outdir/nanobox-front.conf"
echo "$outdir/nanobox-front.conf"
