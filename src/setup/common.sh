# shellcheck shell=bash disable=SC2034  # the NB_* variables are for the scripts that source this
#
# common.sh - shell functions shared by the setup scripts, .ci/run and
# tests/run.sh: install the Debian packages, build the tree, start a Docker
# engine, build the sandbox image.
#
# Source it from bash (it is `set -euo pipefail` friendly and changes no
# shell option; it adds sbin to PATH and defines the NB_* names below):
#     . src/setup/common.sh
#
# Every function is idempotent: it checks before it acts, so running a
# script twice costs seconds, not minutes.

# The repository this file belongs to (src/setup/common.sh -> ../..).
NB_REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

# dockerd, nginx and debootstrap live in sbin, which a non-login root shell
# (CI runners, sudo) may not have on its PATH.
case ":$PATH:" in
*:/usr/sbin:*) ;;
*) PATH=$PATH:/usr/local/sbin:/usr/sbin:/sbin ;;
esac

# What building, running and testing nanobox needs on Debian 12.
# gcc/libc6-dev/make/pkg-config are listed because --no-install-recommends
# does not pull them in and a minimal Debian image does not have them.
NB_PACKAGES=(
    # build
    autoconf automake libtool pkg-config make gcc libc6-dev
    libfcgi-dev libyajl-dev libcurl4-openssl-dev uuid-dev libcmocka-dev
    # template build contexts (tar)
    libarchive-dev
    # docs/openapi.yaml -> nanobox-openapi.json (GET /openapi.json)
    python3-yaml
    # the E2B facade's access tokens (HMAC-SHA256)
    libssl-dev
    # run
    docker.io nginx spawn-fcgi debootstrap iproute2 procps
    # bridge sandboxes: nanobox-fcgi writes its kernel rules with these
    iptables
    # root sandboxes: the file system that bounds a root's writes (mke2fs)
    e2fsprogs
    busybox-static curl ca-certificates
    # integration tests (pytest-xdist runs them in parallel; nodejs + npm:
    # the MCP SDK client of test_mcp.py)
    python3-pytest python3-pytest-xdist python3-requests valgrind nodejs npm
    # the fuzz harness of nanobox-init's request parser (libFuzzer)
    clang libclang-rt-14-dev
)

# Only the test suite needs these (tests/run.sh installs them; up.sh does
# not): the browser the web console's test drives (tests/www), and what
# tests/lint.sh checks the tree with; the validator of the answers'
# schemas in docs/openapi.yaml (tests/integration/test_openapi.py);
# systemd-analyze, which checks the installed units, and logrotate, which
# runs the installed logrotate file (test_install.py, test_service.py:
# neither starts a daemon); the openssl CLI, which makes test_tls.py's
# certificates; pytest-rerunfailures, with which tests/run.sh runs a failed
# test once more and lists it as rerun; etcd-server, whose etcd the cluster
# tests start as members of their own on loopback (tests/integration/nbetcd.py).
NB_TEST_PACKAGES=(chromium clang-format shellcheck python3-jsonschema systemd logrotate openssl vim
    python3-pytest-rerunfailures etcd-server)

# Only the benchmarks need these (socat is the forwarder we measure against).
NB_BENCH_PACKAGES=(wrk socat)

# The sandbox images src/setup/image.sh builds from Debian bookworm (Debian's
# own packages only: no registry, no pip download at build time).
#
# nanobox:latest, the base: a debootstrap --variant=minbase with these.
NB_IMAGE_PACKAGES=(python3 ca-certificates curl procps)
# ...and these on top, in both images (apt-get install --no-install-recommends,
# so without their docs and manual pages): what users of E2B's base template
# rely on; E2B's SDK runs git for sbx.git.*. git brings perl.
NB_IMAGE_TOOLS=(git less)
# nanobox-python:latest, the data-science template: the base, plus these
# (apt-get install --no-install-recommends in the tree): Jupyter's kernel
# and its client (the code interpreter's bridge), the usual data stack,
# pip and venv for the user's own packages, node (git: the base's). Build tools:
# build-essential and python3-dev, what `pip install` of a C extension
# from source needs. A leaner subset would save nothing: scipy depends on
# pythran, which brings g++ (and Boost), and git brings perl, so
# build-essential adds only dpkg-dev, patch, bzip2 and xz-utils (5 MB).
# npm is left out: Debian's pulls in some 300 node-* packages, and a
# sandbox without network could not reach its registry anyway.
# node-typescript: the compiler the code interpreter's typescript contexts
# transpile each cell with (src/kernel/jsrunner.js; 67 MB, node only).
NB_PYTHON_IMAGE_PACKAGES=(
    python3-ipykernel python3-jupyter-client
    python3-numpy python3-pandas python3-matplotlib python3-scipy
    python3-pil python3-requests
    python3-pip python3-venv
    nodejs node-typescript
    build-essential python3-dev
)
# nanobox-desktop:latest, the computer-use template (image.sh desktop, on
# demand), on top of the base image: what E2B's @e2b/desktop SDK runs by
# name (Xvfb and xdpyinfo, startxfce4 and its session bus, xdotool,
# scrot, xrandr, x11vnc, noVNC's novnc_proxy and websockify, netstat,
# xdg-open, gtk-launch), a terminal, a browser and fonts. xfce4 as E2B's
# own template has it: the SDK starts `startxfce4`, so a lighter window
# manager would need a shim of that name.
NB_DESKTOP_IMAGE_PACKAGES=(
    xvfb xauth x11-utils x11-xserver-utils
    xfce4 xfce4-terminal dbus-x11 adwaita-icon-theme
    xdotool scrot x11vnc novnc websockify net-tools
    xdg-utils libgtk-3-bin firefox-esr
    fonts-dejavu-core fonts-liberation2
)

# Where up.sh puts a running nanobox (down.sh reads the same). Overridable
# from the environment only so that the scripts can be tried in a temp dir.
NB_CONF=${NB_CONF:-/etc/nanobox/nanobox.conf}   # the server's config
NB_NGINX_DIR=${NB_NGINX_DIR:-/etc/nanobox/nginx} # rendered nginx.conf + snippet nanobox.conf
NB_RUN_DIR=${NB_RUN_DIR:-/run/nanobox}           # sockets and pid files
NB_LIB_DIR=${NB_LIB_DIR:-/var/lib/nanobox}       # state table; nginx prefix under nginx/
NB_LOG_DIR=${NB_LOG_DIR:-/var/log/nanobox}
NB_FCGI_PID=$NB_RUN_DIR/fcgi.pid
NB_NGINX_PID=$NB_RUN_DIR/nginx.pid
# Where systemd is not PID 1, each daemon runs under src/setup/supervise.sh,
# which restarts it when it dies; these are the supervisors' pid files.
NB_FCGI_SUPERVISE_PID=$NB_RUN_DIR/fcgi.supervise.pid
NB_NGINX_SUPERVISE_PID=$NB_RUN_DIR/nginx.supervise.pid

nb_log() {
    printf 'nanobox: %s\n' "$*" >&2
}

nb_die() {
    printf 'nanobox: error: %s\n' "$*" >&2
    exit 1
}

# Print the packages among "$@" that dpkg does not have installed.
nb_missing_packages() {
    local pkg status
    for pkg in "$@"; do
        status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null) || status=
        [ "$status" = installed ] || printf '%s\n' "$pkg"
    done
}

# apt-get install whatever of "$@" is missing; no apt-get at all if nothing is.
nb_apt_install() {
    local missing
    mapfile -t missing < <(nb_missing_packages "$@")
    if [ "${#missing[@]}" -eq 0 ]; then
        nb_log "packages: all ${#} already installed"
        return 0
    fi
    [ "$(id -u)" -eq 0 ] || nb_die "installing ${missing[*]} needs root"
    nb_log "packages: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${missing[@]}"
}

nb_install_packages() {
    local pkg wanted=()
    for pkg in "${NB_PACKAGES[@]}"; do
        # An engine, an nginx or a node from elsewhere (docker-ce, nginx.org's
        # or NodeSource's packages) is used as it is: Debian's would replace it.
        case $pkg in
        docker.io) command -v dockerd >/dev/null 2>&1 && continue ;;
        nginx) command -v nginx >/dev/null 2>&1 && continue ;;
        # NodeSource's nodejs bundles npm; Debian's npm would replace it
        nodejs) command -v node >/dev/null 2>&1 && continue ;;
        npm) command -v npm >/dev/null 2>&1 && continue ;;
        esac
        wanted+=("$pkg")
    done
    nb_apt_install "${wanted[@]}"
}

nb_install_test_packages() {
    nb_apt_install "${NB_TEST_PACKAGES[@]}"
    nb_install_promtool
}

# promtool (tests/integration/test_metrics.py checks GET /metrics with
# `promtool check metrics`) comes only in Debian's `prometheus` package,
# whose install would also add a user and start a Prometheus server. Only
# the one static binary is taken out of the package instead, to
# /usr/local/bin.
nb_install_promtool() {
    local dir
    command -v promtool >/dev/null 2>&1 && return 0
    [ "$(id -u)" -eq 0 ] || nb_die "installing promtool needs root"
    dir=$(mktemp -d) || return 1
    nb_log "packages: taking promtool out of Debian's prometheus package"
    if (cd "$dir" && apt-get download -q prometheus) &&
        dpkg-deb --fsys-tarfile "$dir"/prometheus_*.deb |
        tar -xO ./usr/bin/promtool >"$dir/promtool" &&
        install -m 0755 "$dir/promtool" /usr/local/bin/promtool; then
        rm -rf "$dir"
        return 0
    fi
    rm -rf "$dir"
    nb_log "packages: promtool could not be installed (its test will skip)"
}

nb_install_bench_packages() {
    nb_apt_install "${NB_BENCH_PACKAGES[@]}"
}

# nb_conf_get FILE KEY DEFAULT: the value of the last "KEY = value" line of
# a nanobox config file, or DEFAULT.
nb_conf_get() {
    local value=
    if [ -r "$1" ]; then
        value=$(sed -n "s/^[[:space:]]*$2[[:space:]]*=[[:space:]]*//p" "$1" |
            tail -n 1 | sed 's/[[:space:]]*$//')
    fi
    printf '%s\n' "${value:-$3}"
}

# nb_pidfile_alive PIDFILE NAME: print the pid in PIDFILE and succeed if that
# process is alive and its command line mentions NAME (a recycled pid that
# now belongs to something else does not count).
nb_pidfile_alive() {
    local pid
    [ -r "$1" ] || return 1
    pid=$(tr -dc 0-9 <"$1")
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$2" || return 1
    printf '%s\n' "$pid"
}

# nb_build [BUILDDIR] [CONFIGURE_ARGS...]
# Out-of-tree build (default BUILDDIR: build/ in the repository). Runs
# autoreconf when there is no configure script, configure when BUILDDIR was
# never configured or was configured with other arguments, then make.
nb_build() {
    local builddir=${1:-$NB_REPO_ROOT/build}
    [ "$#" -gt 0 ] && shift
    local stamp want

    if [ ! -x "$NB_REPO_ROOT/configure" ]; then
        nb_log "build: autoreconf -fi in $NB_REPO_ROOT"
        (cd "$NB_REPO_ROOT" && autoreconf -fi)
    fi

    mkdir -p "$builddir"
    builddir=$(cd "$builddir" && pwd)
    # The arguments, quoted, as they were last given to configure here.
    stamp=$builddir/.nanobox-configure-args
    want=$(printf '%q ' "$@")
    if [ ! -f "$builddir/config.status" ] || [ ! -f "$stamp" ] ||
        [ "$(cat "$stamp")" != "$want" ]; then
        nb_log "build: configuring $builddir${*:+ with $*}"
        rm -f "$stamp"
        (cd "$builddir" && "$NB_REPO_ROOT/configure" "$@")
        # make does not notice changed flags: objects built with the old
        # ones (say, without --enable-sanitizers) would be linked as is.
        make -C "$builddir" clean >/dev/null
        printf '%s' "$want" >"$stamp"
    fi

    nb_log "build: make in $builddir"
    make -C "$builddir" -j"${NB_JOBS:-2}"
}

# Docker 20.10.24 (Debian 12) deadlocks when containers of one network exit
# at once (src/common/docker.c, remove_lock), and `docker kill` or `docker
# rm` of several works on them in parallel: one container at a time, under
# the host-wide lock nanobox-fcgi's own removals take.
NB_DOCKER_REMOVE_LOCK=/run/lock/nanobox-docker-remove.lock

# nb_docker_each VERB [OPTION...] -- ID...: `docker VERB OPTION... ID` for each ID in turn
nb_docker_each() {
    local verb=$1 opts=() rc=0 id
    shift
    while [ "$#" -gt 0 ] && [ "$1" != -- ]; do
        opts+=("$1")
        shift
    done
    shift
    for id in "$@"; do
        flock "$NB_DOCKER_REMOVE_LOCK" docker "$verb" "${opts[@]}" "$id" >/dev/null || rc=1
    done
    return "$rc"
}

# Does a Docker engine answer within SECONDS (default 10)? Bounded: a
# wedged daemon must not hang us.
nb_docker_answers() {
    timeout "${1:-10}" docker info >/dev/null 2>&1
}

# The pid of the dockerd of the default socket: the one its default pid file
# (NB_DOCKERD_PIDFILE, /var/run/docker.pid) names, else the only dockerd
# running. Fails when there is none, or several and no pid file says which.
nb_dockerd_pid() {
    local pid
    local -a pids
    pid=$(nb_pidfile_alive "${NB_DOCKERD_PIDFILE:-/var/run/docker.pid}" dockerd) &&
        { printf '%s\n' "$pid"; return 0; }
    mapfile -t pids < <(pgrep -x dockerd || true)
    [ "${#pids[@]}" -eq 1 ] || return 1
    printf '%s\n' "${pids[0]}"
}

# Docker's live-restore keeps containers running while dockerd is away (an
# upgrade of docker.io restarts it). Without it every sandbox's container
# stops with dockerd, and reconciliation then destroys them all.
# nb_docker_live_restore merges "live-restore": true into dockerd's config
# file (NB_DOCKERD_CONFIG, default /etc/docker/daemon.json), keeping every
# other key, and creates the file if there is none. A file that is not a
# JSON object, or that sets live-restore itself (false is the operator's
# choice), is left as it is, with a warning. A dockerd that already runs
# without it is reloaded: live-restore is one of the options dockerd
# re-reads on SIGHUP, so no container is touched. Set
# NANOBOX_DOCKER_LIVE_RESTORE=no to leave Docker's configuration alone.
nb_docker_live_restore() {
    local conf=${NB_DOCKERD_CONFIG:-/etc/docker/daemon.json} result live pid
    case ${NANOBOX_DOCKER_LIVE_RESTORE:-yes} in
    no | 0 | off | false)
        nb_log "docker: live-restore not configured (NANOBOX_DOCKER_LIVE_RESTORE=$NANOBOX_DOCKER_LIVE_RESTORE)"
        return 0
        ;;
    esac
    pid=$(nb_dockerd_pid) || pid=
    # dockerd refuses to start with an option both as a flag and in the file
    if [ -n "$pid" ] && tr '\0' '\n' <"/proc/$pid/cmdline" | grep -q '^--live-restore'; then
        nb_log "docker: dockerd (pid $pid) runs with --live-restore: $conf left alone"
        return 0
    fi
    command -v python3 >/dev/null 2>&1 ||
        { nb_log "docker: warning: no python3 to edit $conf: live-restore not configured"; return 0; }
    result=$(python3 - "$conf" <<'EOF'
import json, os, sys, tempfile
path = os.path.realpath(sys.argv[1])
try:
    with open(path) as f:
        text = f.read()
except FileNotFoundError:
    text = None
conf = {}
if text is not None and text.strip():
    try:
        conf = json.loads(text)
    except ValueError as e:
        sys.exit(print(f"invalid: not JSON ({e})"))
    if not isinstance(conf, dict):
        sys.exit(print("invalid: not a JSON object"))
if "live-restore" in conf:
    sys.exit(print("on" if conf["live-restore"] is True else "operator: " + json.dumps(conf["live-restore"])))
conf["live-restore"] = True
os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
fd, tmp = tempfile.mkstemp(prefix=".daemon.json.", dir=os.path.dirname(path))
with os.fdopen(fd, "w") as f:
    json.dump(conf, f, indent=2)
    f.write("\n")
os.chmod(tmp, os.stat(path).st_mode & 0o7777 if text is not None else 0o644)
os.replace(tmp, path)
print("created" if text is None else "merged")
EOF
    ) || result="invalid: python3 failed"
    case $result in
    created | merged) nb_log "docker: live-restore turned on in $conf ($result)" ;;
    on) ;;
    operator:*)
        nb_log "docker: warning: $conf sets live-restore to ${result#operator: }: kept; a restart of dockerd will stop every sandbox"
        return 0
        ;;
    *)
        nb_log "docker: warning: $conf left alone, ${result#invalid: }: live-restore not configured"
        return 0
        ;;
    esac
    nb_docker_answers 5 || return 0 # not running: it reads the file at start
    live=$(timeout 10 docker info --format '{{.LiveRestoreEnabled}}' 2>/dev/null) || live=
    [ "$live" = false ] || return 0
    nb_log "docker: the running dockerd has live-restore off; reloading its configuration (no restart)"
    if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet docker 2>/dev/null; then
        systemctl reload docker || true
    elif [ -n "$pid" ]; then
        kill -HUP "$pid"
    else
        nb_log "docker: warning: which dockerd serves the engine is unclear: reload it yourself (kill -HUP PID)"
        return 0
    fi
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        live=$(timeout 10 docker info --format '{{.LiveRestoreEnabled}}' 2>/dev/null) || live=
        [ "$live" = true ] && { nb_log "docker: live-restore is on"; return 0; }
        sleep 1
    done
    nb_log "docker: warning: dockerd still reports live-restore off after the reload: see its log"
}

# Start dockerd in the background unless an engine already answers, and wait
# up to 60 s for it, with live-restore on (nb_docker_live_restore). There is
# no systemd on these machines.
nb_start_dockerd() {
    local log=${NB_DOCKERD_LOG:-/var/log/dockerd.log} pid
    local deadline=$((SECONDS + 60))
    nb_docker_live_restore
    if nb_docker_answers; then
        nb_log "docker: engine already answering"
        return 0
    fi
    command -v dockerd >/dev/null || nb_die "dockerd not found: install docker.io"
    nb_log "docker: starting dockerd (log: $log)"
    # setsid + nohup + no inherited descriptors: dockerd must outlive this
    # script and must not keep a CI runner's pipes open. Append: an earlier
    # engine's log may explain why this one is needed.
    setsid nohup dockerd >>"$log" 2>&1 </dev/null &
    pid=$!
    while [ "$SECONDS" -lt "$deadline" ]; do
        if nb_docker_answers 5; then
            nb_log "docker: engine answering (dockerd pid $pid)"
            return 0
        fi
        if ! kill -0 "$pid" 2>/dev/null; then
            tail -n 20 "$log" >&2 || true
            nb_die "dockerd exited at start; see $log"
        fi
        sleep 1
    done
    tail -n 20 "$log" >&2 || true
    nb_die "dockerd did not answer within 60 s; see $log"
}

# Build the sandbox images nanobox:latest and nanobox-python:latest, each
# unless it exists (pass --force to rebuild them; `base` or `python` to
# build only one: see image.sh --help).
# shellcheck disable=SC2120  # arguments are optional (--force, base, python)
nb_build_image() {
    "$NB_REPO_ROOT/src/setup/image.sh" "$@"
}

# nb_net_purge IFACE NETWORK: remove what nanobox-fcgi installed for bridge
# sandboxes on bridge IFACE (src/fcgi/engine/network.h): the jumps from
# DOCKER-USER and INPUT (and ip6tables' INPUT/FORWARD), the chains NBF-,
# NBI-, NBS-IFACE, every sandbox chain NBX-* NBS jumps to, and the Docker
# network NETWORK. Only for when no bridge sandbox is left: a running one
# would lose its rules, not its network. Each step is skipped when there
# is nothing to remove.
nb_net_purge() {
    local ifc=$1 net=$2 chain
    local -a sandboxes
    mapfile -t sandboxes < <(iptables -w 10 -S "NBS-$ifc" 2>/dev/null |
        sed -n 's/.* -g \(NBX-[0-9a-f]*\).*/\1/p')
    while iptables -w 10 -D DOCKER-USER -i "$ifc" -j "NBF-$ifc" 2>/dev/null; do :; done
    while iptables -w 10 -D INPUT -i "$ifc" -j "NBI-$ifc" 2>/dev/null; do :; done
    for chain in "NBF-$ifc" "NBI-$ifc" "NBS-$ifc" "${sandboxes[@]}"; do
        iptables -w 10 -F "$chain" 2>/dev/null || true
    done
    for chain in "NBF-$ifc" "NBI-$ifc" "NBS-$ifc" "${sandboxes[@]}"; do
        iptables -w 10 -X "$chain" 2>/dev/null || true
    done
    if command -v ip6tables >/dev/null 2>&1; then
        while ip6tables -w 10 -D INPUT -i "$ifc" -j "NB6-$ifc" 2>/dev/null; do :; done
        while ip6tables -w 10 -D FORWARD -i "$ifc" -j "NB6-$ifc" 2>/dev/null; do :; done
        ip6tables -w 10 -F "NB6-$ifc" 2>/dev/null || true
        ip6tables -w 10 -X "NB6-$ifc" 2>/dev/null || true
    fi
    if docker network inspect "$net" >/dev/null 2>&1; then
        docker network rm "$net" >/dev/null
    fi
}
