#!/bin/bash
#
# render-front.sh - render a front's nginx config (docs/CLUSTER.md, "The
# front").
#
# Usage: render-front.sh OUTDIR LISTEN PREFIX [PIDFILE]
#   OUTDIR   where to write nanobox-front.conf (a complete nginx.conf); it
#            includes OUTDIR/nodes.conf, which nanobox-front writes and
#            keeps in step with etcd
#   LISTEN   what the front listens on: 80, 0.0.0.0:8080, ...
#   PREFIX   absolute dir for its logs, temp dirs and, by default, pid file
#   PIDFILE  its pid file (default PREFIX/nginx.pid)
#
# Then nanobox-front (its map is there within a second, an empty one if
# etcd does not answer yet), and nginx beside it:
#   nanobox-front -c /etc/nanobox/nanobox.conf --out OUTDIR/nodes.conf \
#       --nginx-pid PIDFILE &
#   nginx -c OUTDIR/nanobox-front.conf -p PREFIX
set -euo pipefail

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
text=$(cat "$template")
text=${text//@CONF@/"$outdir/nanobox-front.conf"}
text=${text//@NODES@/"$outdir/nodes.conf"}
text=${text//@LISTEN@/"$listen"}
text=${text//@PREFIX@/"$prefix"}
text=${text//@PID@/"$pidfile"}
printf '%s\n' "$text" > "$outdir/nanobox-front.conf"
echo "$outdir/nanobox-front.conf"
