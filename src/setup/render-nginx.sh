#!/bin/bash
#
# render-nginx.sh - render nanobox's three nginx templates.
#
# Usage: render-nginx.sh [--ports-dir DIR] [--ports-domain DOMAIN]
#                        [--ports-listen LISTEN] [--www-dir DIR]
#                        [--tls-cert FILE --tls-key FILE [--tls-listen LISTEN]]
#                        [--rate RATE] [--rate-burst N]
#                        OUTDIR FCGI_SOCKET LISTEN PREFIX [PIDFILE]
#   OUTDIR       where to write nanobox.conf (the API snippet to include
#                inside a server {}), nanobox-http.conf (its request-rate
#                zone) and nanobox-ports.conf (the server {} of exposed
#                ports), both to include at http {} level, and nginx.conf
#                (a complete standalone config that includes all three by
#                absolute path), plus a copy of the installed fastcgi_params
#                for the standalone
#   FCGI_SOCKET  absolute path of nanobox-fcgi's unix socket (`listen`)
#   LISTEN       what the standalone server listens on: 127.0.0.1:8080,
#                8080, [::1]:8080, unix:/path
#   PREFIX       absolute dir for the standalone's logs, temp dirs and, by
#                default, pid file; created if missing
#   PIDFILE      pid file of the standalone (default PREFIX/nginx.pid)
#
# Exposed ports (http://<sandboxport>-<sandboxId>.<domain>/), as options or
# from the environment (an option wins):
#   --ports-dir DIR        NANOBOX_PORTS_DIR     where the forwarders' sockets
#                          are: the ports_dir key of nanobox.conf (default
#                          /run/nanobox/ports)
#   --ports-domain DOMAIN  NANOBOX_PORTS_DOMAIN  the domain under which ports
#                          are named (default sandbox.localhost)
#   --ports-listen LISTEN  NANOBOX_PORTS_LISTEN  the ports server's listen
#                          parameters, blank-separated, e.g. "443 ssl"
#                          (default: LISTEN, the standalone's address)
#
# The web console (docs/WEB.md), which the standalone serves at / and
# /console/, as an option or from the environment (an option wins):
#   --www-dir DIR          NANOBOX_WWW_DIR       the directory that holds
#                          index.html, app.js, style.css and vendor/, served as it
#                          is (`make install` puts a copy in
#                          $(pkgdatadir)/www); the standalone's workers
#                          must be able to read it. Default: a copy of this
#                          source tree's www/ in OUTDIR/www, world-readable:
#                          a checkout under a private home (0700 /root) is
#                          out of reach of nginx's www-data workers.
#
# TLS (docs/NGINX.md, "TLS"), as options or from the environment (an option
# wins): this certificate, set at http {} level for the standalone's
# server and the ports servers. Its names must cover the API's host and
# *.DOMAIN (a wildcard). Both or neither; absolute paths, readable here
# (nginx's master reads them as the user that renders).
#   --tls-cert FILE        NANOBOX_TLS_CERT      certificate chain (PEM)
#   --tls-key FILE         NANOBOX_TLS_KEY       its private key (PEM)
#   --tls-listen LISTEN    NANOBOX_TLS_LISTEN    an https address of its own,
#                          e.g. 443 or 0.0.0.0:443: every server (the API's,
#                          the ports') listens there with ssl besides its
#                          plain-http LISTEN (and ports listen), which keep
#                          working. Not given: LISTEN itself gets "ssl" (and
#                          so does the ports listen when it is not given),
#                          https only.
#
# The request rate of the API's locations (nginx's limit_req, docs/NGINX.md
# "Request rate"): one bucket per API key as sent, or per client address
# for a request without one; as options or from the environment (an option
# wins):
#   --rate RATE            NANOBOX_RATE          N r/s or N r/m, as "200r/s"
#                          (default 200r/s), or "off": no limit_req at all
#   --rate-burst N         NANOBOX_RATE_BURST    requests past the rate let
#                          through at once (default 1000)
#
# Then run the standalone as `nginx -c OUTDIR/nginx.conf -p PREFIX`.
# When run as root, the standalone's workers run as www-data (nginx's user
# on Debian, the one socket_group lets in); set NANOBOX_NGINX_USER to choose
# another. As any other user there is no `user` line: workers run as you.
# Finally checks the result with `nginx -t` when nginx is installed
# (NANOBOX_NGINX_TEST=0 skips that).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# The source tree (src/setup -> nginx/, www/), or where `make install` puts
# this script ($(pkgdatadir)/setup -> $(pkgdatadir)/nginx, .../www).
if [ -d "$here/../../nginx" ]; then
    top=$(cd "$here/../.." && pwd)
else
    top=$(cd "$here/.." && pwd)
fi
templates=$top/nginx

die() {
    printf 'render-nginx.sh: %s\n' "$*" >&2
    exit 2
}

usage="usage: render-nginx.sh [--ports-dir DIR] [--ports-domain DOMAIN] [--ports-listen LISTEN] [--www-dir DIR] [--tls-cert FILE --tls-key FILE [--tls-listen LISTEN]] [--rate RATE] [--rate-burst N] OUTDIR FCGI_SOCKET LISTEN PREFIX [PIDFILE]"

ports_dir=${NANOBOX_PORTS_DIR:-/run/nanobox/ports}
ports_domain=${NANOBOX_PORTS_DOMAIN:-sandbox.localhost}
ports_listen=${NANOBOX_PORTS_LISTEN:-}
www_dir=${NANOBOX_WWW_DIR:-}
tls_cert=${NANOBOX_TLS_CERT:-}
tls_key=${NANOBOX_TLS_KEY:-}
tls_listen=${NANOBOX_TLS_LISTEN:-}
rate=${NANOBOX_RATE:-200r/s}
rate_burst=${NANOBOX_RATE_BURST:-1000}
while [ "$#" -gt 0 ]; do
    case $1 in
    --ports-dir | --ports-domain | --ports-listen | --www-dir | --tls-cert | --tls-key | --tls-listen | --rate | --rate-burst)
        [ "$#" -ge 2 ] || die "$1 needs a value; $usage"
        case $1 in
        --ports-dir) ports_dir=$2 ;;
        --ports-domain) ports_domain=$2 ;;
        --ports-listen) ports_listen=$2 ;;
        --www-dir) www_dir=$2 ;;
        --tls-cert) tls_cert=$2 ;;
        --tls-key) tls_key=$2 ;;
        --tls-listen) tls_listen=$2 ;;
        --rate) rate=$2 ;;
        --rate-burst) rate_burst=$2 ;;
        esac
        shift 2
        ;;
    --ports-dir=* | --ports-domain=* | --ports-listen=* | --www-dir=* | --tls-cert=* | --tls-key=* | --tls-listen=* | --rate=* | --rate-burst=*)
        case $1 in
        --ports-dir=*) ports_dir=${1#*=} ;;
        --ports-domain=*) ports_domain=${1#*=} ;;
        --ports-listen=*) ports_listen=${1#*=} ;;
        --www-dir=*) www_dir=${1#*=} ;;
        --tls-cert=*) tls_cert=${1#*=} ;;
        --tls-key=*) tls_key=${1#*=} ;;
        --tls-listen=*) tls_listen=${1#*=} ;;
        --rate=*) rate=${1#*=} ;;
        --rate-burst=*) rate_burst=${1#*=} ;;
        esac
        shift
        ;;
    --) shift; break ;;
    -*) die "unknown option '$1'; $usage" ;;
    *) break ;;
    esac
done

if [ "$#" -lt 4 ] || [ "$#" -gt 5 ]; then
    die "$usage"
fi

outdir=$1 socket=$2 listen=$3 prefix=$4 pidfile=${5:-$4/nginx.pid}

# Whatever lands in the config must be one nginx word: no blanks, quotes,
# ';', '{', '}', '$' or '#' that would end or inject a directive.
check_word() {
    case $2 in
    '' | *[!A-Za-z0-9_./:@%+=,\[\]-]*) die "$1 '$2' has characters nginx would misread" ;;
    esac
}
check_abs() {
    check_word "$1" "$2"
    case $2 in /*) ;; *) die "$1 must be an absolute path, not '$2'" ;; esac
}

# check_tls_file WHAT FILE PEMTYPE: an absolute path nginx can read, that
# holds a PEM block of that type (a clear error now rather than nginx's at
# its start).
check_tls_file() {
    check_abs "$1" "$2"
    [ -f "$2" ] || die "$1 $2: no such file"
    [ -r "$2" ] || die "$1 $2: not readable by $(id -un), the user nginx's master reads it as"
    grep -q -- "-----BEGIN .*$3-----" "$2" || die "$1 $2: no PEM '$3' block in it"
}

mkdir -p "$outdir" "$prefix" "$(dirname "$pidfile")"
outdir=$(cd "$outdir" && pwd)
prefix=$(cd "$prefix" && pwd)
check_abs OUTDIR "$outdir"
check_abs FCGI_SOCKET "$socket"
check_word LISTEN "$listen"
check_abs PREFIX "$prefix"
check_abs PIDFILE "$pidfile"
check_abs 'ports dir' "${ports_dir%/}"
ports_dir=${ports_dir%/}
# The console's directory: made absolute (a relative one is taken from the
# current directory), no trailing slash (the template adds its own). None
# given: the source tree's, copied next to the rendered config.
if [ -z "$www_dir" ]; then
    src_www=$top/www
    www_dir=$outdir/www
    install -d -m 0755 "$www_dir"
    # with its subdirectories (vendor/: xterm.js), each file world-readable
    (cd "$src_www" && find . -mindepth 1 -type d) | while IFS= read -r d; do
        install -d -m 0755 "$www_dir/$d"
    done
    (cd "$src_www" && find . -type f) | while IFS= read -r f; do
        install -m 0644 "$src_www/$f" "$www_dir/$f"
    done
fi
case $www_dir in /*) ;; *) www_dir=$PWD/$www_dir ;; esac
if [ -d "$www_dir" ]; then
    www_dir=$(cd "$www_dir" && pwd)
    case $www_dir in / | //) die "refusing to serve / as the www dir" ;; esac
    [ -f "$www_dir/index.html" ] ||
        printf 'render-nginx.sh: warning: no index.html in %s: the console will answer 404\n' "$www_dir" >&2
else
    while [ "${www_dir%/}" != "$www_dir" ]; do www_dir=${www_dir%/}; done
    printf 'render-nginx.sh: warning: %s is not a directory: the console will answer 404\n' "$www_dir" >&2
fi
check_abs 'www dir' "$www_dir"
tls_lines="# no TLS (render-nginx.sh --tls-cert/--tls-key: docs/NGINX.md)"
tls_listen_line="# no https address of its own (render-nginx.sh --tls-listen)"
ports_tls_listen_line=$tls_listen_line
if [ -n "$tls_cert$tls_key" ]; then
    if [ -z "$tls_cert" ] || [ -z "$tls_key" ]; then
        die "--tls-cert and --tls-key go together (NANOBOX_TLS_CERT, NANOBOX_TLS_KEY)"
    fi
    check_tls_file 'TLS certificate (--tls-cert, NANOBOX_TLS_CERT)' "$tls_cert" CERTIFICATE
    check_tls_file 'TLS key (--tls-key, NANOBOX_TLS_KEY)' "$tls_key" 'PRIVATE KEY'
    tls_lines="ssl_certificate $tls_cert;
    ssl_certificate_key $tls_key;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_cache shared:nanobox_tls:10m;
    ssl_session_timeout 1h;"
    if [ -n "$tls_listen" ]; then
        # an https address beside the plain one: both keep answering
        check_word 'TLS listen (--tls-listen, NANOBOX_TLS_LISTEN)' "$tls_listen"
        [ "$tls_listen" != "$listen" ] || die "--tls-listen $tls_listen is LISTEN itself: leave it out for https only there"
        tls_listen_line="listen $tls_listen ssl default_server;"
        ports_tls_listen_line="listen $tls_listen ssl;"
    else
        ports_listen=${ports_listen:-$listen ssl}
        listen="$listen ssl"
    fi
elif [ -n "$tls_listen" ]; then
    die "--tls-listen needs --tls-cert and --tls-key (NANOBOX_TLS_CERT, NANOBOX_TLS_KEY)"
fi
ports_listen=${ports_listen:-$listen}
# The listen parameters: blank-separated words ("443 ssl", "[::]:80").
read -r -a ports_listen_words <<<"$ports_listen"
[ "${#ports_listen_words[@]}" -gt 0 ] || die "the ports listen parameters are empty"
for w in "${ports_listen_words[@]}"; do
    check_word 'ports listen parameter' "$w"
done
ports_listen=${ports_listen_words[*]}
# A DNS name, lower-case (nginx lower-cases the Host it matches), labels of
# letters, digits and inner hyphens; its dots are escaped for the regex.
ports_domain=${ports_domain,,}
ports_domain=${ports_domain%.}
label='[a-z0-9]([a-z0-9-]*[a-z0-9])?'
if ! [[ $ports_domain =~ ^$label(\.$label)*$ ]] || [ "${#ports_domain}" -gt 253 ]; then
    die "ports domain '$ports_domain' is not a DNS name like sandbox.example.org"
fi
ports_domain_re=${ports_domain//./\\.}
# A certificate that does not name *.DOMAIN works for the API only: say so
# (openssl's -checkhost, when the CLI is here), without refusing it.
if [ -n "$tls_cert" ] && command -v openssl >/dev/null &&
    openssl x509 -noout -in "$tls_cert" -checkhost "49983-00000000-0000-0000-0000-000000000000.$ports_domain" 2>/dev/null |
    grep -q 'does NOT match'; then
    printf 'render-nginx.sh: warning: %s does not name *.%s: clients that verify it will refuse the port hosts (<port>-<id>.%s)\n' \
        "$tls_cert" "$ports_domain" "$ports_domain" >&2
fi

# The request rate: limit_req in each keyed location of the snippet, its
# zone in nanobox-http.conf; "off" leaves both out.
if [ "$rate" = off ]; then
    limit_req="# no request rate limit (render-nginx.sh --rate off)"
    ports_limit_req=$limit_req
    rate_zone="# no request rate limit (render-nginx.sh --rate off): nothing to define"
else
    [[ $rate =~ ^[1-9][0-9]{0,5}r/[sm]$ ]] || die "rate '$rate' is not N r/s or N r/m, like 50r/s (or off)"
    [[ $rate_burst =~ ^(0|[1-9][0-9]{0,6})$ ]] || die "rate burst '$rate_burst' is not a number of requests"
    limit_req="limit_req zone=nanobox_rate burst=$rate_burst nodelay; limit_req_status 429; limit_req_log_level warn;"
    # the ports server's on-demand check: auth_request passes only 401 and
    # 403, so over the rate it is a 403 without a reason (a 503 page)
    ports_limit_req="limit_req zone=nanobox_rate burst=$rate_burst nodelay; limit_req_status 403; limit_req_log_level warn;"
    # nginx's variables, literally
    # shellcheck disable=SC2016
    rate_zone='map "$http_x_api_key$http_authorization$http_x_access_token" $nanobox_rate_key {
    ""      "addr:$binary_remote_addr";
    default "key:$http_x_api_key$http_authorization$http_x_access_token";
}
limit_req_zone $nanobox_rate_key zone=nanobox_rate:10m rate='"$rate;"
fi

user_line=
if [ "$(id -u)" -eq 0 ]; then
    nginx_user=${NANOBOX_NGINX_USER:-www-data}
    check_word NANOBOX_NGINX_USER "$nginx_user"
    # With its primary group: nginx would look for a group named like the
    # user, and Debian's nobody has none.
    nginx_group=$(id -gn "$nginx_user" 2>/dev/null) ||
        die "NANOBOX_NGINX_USER: no such user '$nginx_user'"
    user_line="user $nginx_user $nginx_group;"
fi

# render TEMPLATE OUTPUT: replace every @TOKEN@, then move into place so
# that a running nginx never reads a half-written file.
render() {
    local text
    text=$(<"$1")
    # Quoted replacements: bash 5.2 would otherwise expand '&'.
    text=${text//@FCGI_SOCKET@/"$socket"}
    text=${text//@LISTEN@/"$listen"}
    text=${text//@PREFIX@/"$prefix"}
    text=${text//@PID@/"$pidfile"}
    text=${text//@SNIPPET@/"$outdir/nanobox.conf"}
    text=${text//@CONF@/"$outdir/nginx.conf"}
    text=${text//@USER_LINE@/"$user_line"}
    text=${text//@PORTS_SNIPPET@/"$outdir/nanobox-ports.conf"}
    text=${text//@PORTS_LISTEN@/"$ports_listen"}
    text=${text//@PORTS_DIR@/"$ports_dir"}
    text=${text//@PORTS_DOMAIN_RE@/"$ports_domain_re"}
    text=${text//@PORTS_DOMAIN@/"$ports_domain"}
    text=${text//@NGINX_DIR@/"$outdir"}
    text=${text//@WWW@/"$www_dir"}
    text=${text//@TLS@/"$tls_lines"}
    text=${text//@TLS_LISTEN_LINE@/"$tls_listen_line"}
    text=${text//@PORTS_TLS_LISTEN_LINE@/"$ports_tls_listen_line"}
    text=${text//@HTTP_SNIPPET@/"$outdir/nanobox-http.conf"}
    text=${text//@LIMIT_REQ@/"$limit_req"}
    text=${text//@PORTS_LIMIT_REQ@/"$ports_limit_req"}
    text=${text//@RATE_ZONE@/"$rate_zone"}
    text=${text//@RATE_BURST@/"$rate_burst"}
    text=${text//@RATE@/"$rate"}
    if grep -q '@[A-Z_][A-Z_]*@' <<<"$text"; then
        die "$1: unknown tokens left: $(grep -o '@[A-Z_][A-Z_]*@' <<<"$text" | sort -u | tr '\n' ' ')"
    fi
    printf '%s\n' "$text" >"$2.tmp.$$"
    mv -f "$2.tmp.$$" "$2"
}

render "$templates/nanobox.conf.in" "$outdir/nanobox.conf"
render "$templates/nanobox-http.conf.in" "$outdir/nanobox-http.conf"
render "$templates/nanobox-ports.conf.in" "$outdir/nanobox-ports.conf"
render "$templates/nanobox-standalone.conf.in" "$outdir/nginx.conf"

# nginx is in /usr/sbin, which a non-root PATH often lacks.
nginx=$(PATH=$PATH:/usr/sbin:/sbin command -v nginx || true)

# The snippet says `include fastcgi_params;`, which nginx resolves next to
# the main config: the host's own file when the snippet is included there,
# OUTDIR/fastcgi_params for the standalone. Copy the installed one.
confdir=/etc/nginx
if [ -n "$nginx" ]; then
    confpath=$("$nginx" -V 2>&1 | tr ' ' '\n' | sed -n 's/^--conf-path=//p')
    [ -z "$confpath" ] || confdir=$(dirname "$confpath")
fi
if [ -f "$confdir/fastcgi_params" ]; then
    cp "$confdir/fastcgi_params" "$outdir/fastcgi_params.tmp.$$"
    mv -f "$outdir/fastcgi_params.tmp.$$" "$outdir/fastcgi_params"
elif [ ! -f "$outdir/fastcgi_params" ]; then
    die "no $confdir/fastcgi_params to copy next to $outdir/nginx.conf (is nginx installed?)"
fi
if [ "${NANOBOX_NGINX_TEST:-1}" != 0 ] && [ -n "$nginx" ]; then
    "$nginx" -q -t -c "$outdir/nginx.conf" -p "$prefix/" ||
        die "nginx -t rejected $outdir/nginx.conf"
fi
