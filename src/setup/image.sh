#!/bin/bash
#
# image.sh - build the sandbox images from Debian bookworm.
#
# No image registry is reachable from these machines, so the images are
# made locally, each the same way: debootstrap a minbase bookworm with the
# base packages (common.sh: NB_IMAGE_PACKAGES), apt-get install the image's
# own on top (NB_PYTHON_IMAGE_PACKAGES), add the unprivileged user
# `sandbox` (uid/gid 1000, home /workspace), and `docker import` the tree.
#   base    nanobox:latest: python3, curl, ca-certificates, procps, and
#           (apt-get, as NB_IMAGE_TOOLS) git, less (~1.5 min)
#   python  nanobox-python:latest: the data-science template: the base +
#           ipykernel, jupyter-client, numpy, pandas, matplotlib, scipy,
#           pillow, requests, pip, venv, nodejs, node-typescript,
#           build-essential (~2.5 min)
#   desktop nanobox-desktop:latest, on demand only (not in `all`): the
#           computer-use template E2B's @e2b/desktop SDK drives: the base
#           image (built first if missing) + Xvfb, xfce4, xdotool, scrot,
#           x11vnc, noVNC + websockify (at /opt/noVNC, where the SDK looks),
#           firefox-esr, fonts (NB_DESKTOP_IMAGE_PACKAGES)
#
# Usage: image.sh [--force] [base|python|desktop|all]...   (default: all)
#   Builds each image named unless it exists, built by this recipe (a
#   label holds the recipe's hash); --force rebuilds.
# Environment:
#   NANOBOX_MIRROR        Debian mirror (default http://deb.debian.org/debian)
#   NANOBOX_IMAGE         name of the base image (default nanobox:latest)
#   NANOBOX_PYTHON_IMAGE  name of the python image (default nanobox-python:latest)
#   NANOBOX_DESKTOP_IMAGE name of the desktop image (default nanobox-desktop:latest)
#   NANOBOX_PYTHON_EXTRA  more Debian packages for the python image,
#                         comma-separated (docs/CONFIG.md, "Sandbox images")
#   TMPDIR                where the rootfs is built (default /var/tmp;
#                         debootstrap needs a filesystem without nodev/noexec)
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

mirror=${NANOBOX_MIRROR:-http://deb.debian.org/debian}
suite=bookworm
force=0
targets=()

for arg in "$@"; do
    case $arg in
    --force) force=1 ;;
    base | python | desktop) targets+=("$arg") ;;
    all) targets+=(base python) ;;
    -h | --help)
        sed -n '3,32s/^# \{0,1\}//p' "$0"
        exit 0
        ;;
    *) nb_die "image.sh: unknown argument '$arg' (try --help)" ;;
    esac
done
[ "${#targets[@]}" -gt 0 ] || targets=(base python)

image_exists() {
    docker image inspect "$1" >/dev/null 2>&1
}

# The recipe of an image, as a short hash: this script (every step of the
# build) and the image's arguments (packages, title, env). An image is
# built when it is missing or carries another recipe's hash (or none), so
# a changed recipe reaches every machine that already has the image: CI
# builds from scratch anyway, up.sh and tests/run.sh find the old one.
recipe_hash() {
    { cat "${BASH_SOURCE[0]}"; printf '%s\n' "$@"; } | sha256sum | cut -c1-16
}
image_current() {
    local image=$1 recipe=$2
    [ "$(docker image inspect -f \
        '{{index .Config.Labels "org.opencontainers.image.revision"}}' "$image" 2>/dev/null)" = \
        "$recipe" ]
}

# Set by build_image for cleanup: the tree being built, if any.
workdir=
# The image build_image starts from (export_image); empty: debootstrap.
from_image=

# On every exit path: unmount whatever a failed debootstrap left mounted
# (proc, sys...) so that rm cannot descend into the host's /proc, then
# remove the tree without crossing filesystems.
remove_workdir() {
    local mnt
    [ -n "$workdir" ] || return 0
    awk -v p="$workdir/" 'index($2, p) == 1 { print $2 }' /proc/self/mounts |
        sort -r | while read -r mnt; do umount -l "$mnt" || true; done
    rm -rf --one-file-system "$workdir"
}
cleanup() {
    local rc=$?
    trap - EXIT
    if [ "$rc" -ne 0 ] && [ -n "$workdir" ]; then
        nb_log "image: failed (exit $rc); removing $workdir"
    fi
    remove_workdir
    exit "$rc"
}

# The image's user: uid/gid 1000, home = the workspace. Sandboxes run as a
# uid of their own per slot (sandbox_uid_base) under this user's name, from
# a passwd nanobox mounts; 1000 is used as is only with sandbox_uid_base = 0.
# Written by hand rather than with useradd so nothing runs inside the rootfs.
add_user() {
    local rootfs=$1 days
    nb_log "image: adding user sandbox (1000:1000, home /workspace)"
    if grep -q '^sandbox:' "$rootfs/etc/passwd" ||
        awk -F: '$3 == 1000 { found = 1 } END { exit !found }' "$rootfs/etc/passwd"; then
        nb_die "image: the rootfs already has a user sandbox or uid 1000"
    fi
    days=$(($(date +%s) / 86400))
    printf 'sandbox:x:1000:1000:nanobox sandbox:/workspace:/bin/sh\n' >>"$rootfs/etc/passwd"
    printf 'sandbox:x:1000:\n' >>"$rootfs/etc/group"
    printf 'sandbox:!:%s:0:99999:7:::\n' "$days" >>"$rootfs/etc/shadow"
    if [ -f "$rootfs/etc/gshadow" ]; then
        printf 'sandbox:!::\n' >>"$rootfs/etc/gshadow"
    fi
    install -d -o 1000 -g 1000 -m 0755 "$rootfs/workspace"
}

# A login shell without a fork: Debian's /etc/profile runs `id -u` (twice
# when interactive) to choose PATH, and every login shell pays that
# process: E2B's SDK runs each command as `bash -l -c CMD`, where it was
# a third of the time of `commands.run('true')`. bash knows its EUID (read
# only there); sh (dash) has none and still asks id. Same PATH and PS1.
# shellcheck disable=SC2016  # the $(...) are /etc/profile's text, not ours
profile_no_fork() {
    local rootfs=$1
    grep -q '"$(id -u)"' "$rootfs/etc/profile" || return 0
    nb_log "image: /etc/profile: \${EUID:-\$(id -u)} (no fork in a bash login shell)"
    sed -i 's/"$(id -u)"/"${EUID:-$(id -u)}"/g' "$rootfs/etc/profile"
}

# apt as a root without capabilities: a sandbox whose template the operator
# gave a root (root_templates) runs `sudo apt-get install` as uid 0 with no
# CAP_SETUID/CAP_SETGID, so apt cannot switch to its _apt user to download
# ("setgroups 65534 failed - setgroups (1: Operation not permitted)").
# It downloads as root instead; the sandbox is the boundary.
apt_as_root() {
    local rootfs=$1
    nb_log "image: apt downloads as root (no _apt switch: a sandbox's root has no capabilities)"
    printf '// nanobox: see src/setup/image.sh, apt_as_root\nAPT::Sandbox::User "root";\n' \
        >"$rootfs/etc/apt/apt.conf.d/99nanobox-sandbox"
}

# The python template's own settings, on top of the base's.
#
# pip: Debian marks its python "externally managed" (PEP 668), so a plain
# `pip install` stops with externally-managed-environment, an error that
# tells a sandbox user to do what they cannot (apt). The danger PEP 668
# guards against, pip overwriting files apt owns, cannot happen here: the
# root filesystem is read-only in a sandbox, so pip finds the system
# site-packages unwritable and installs into the user's site
# (~/.local = /workspace/.local, "Defaulting to user installation") or
# into a venv the user made. So pip.conf lets it (break-system-packages),
# and no `user = true`: that would break `pip install` inside a venv.
# No cache: ~/.cache would hold a second copy of every wheel in the
# workspace, a tmpfs charged to the sandbox's memory. No version check: it
# would ask PyPI, which most sandboxes cannot reach.
setup_python() {
    local rootfs=$1
    nb_log "image: python template settings (/etc/pip.conf)"
    cat >"$rootfs/etc/pip.conf" <<'EOF'
# nanobox-python: see src/setup/image.sh, setup_python, for why.
[global]
break-system-packages = true
no-cache-dir = true
disable-pip-version-check = true
EOF
}

# The desktop template's own settings (E2B's @e2b/desktop SDK runs
# `cd /opt/noVNC/utils && ./novnc_proxy --vnc localhost:5900 --listen 6080
# --web /opt/noVNC`, Xvfb, startxfce4, xdotool, scrot, xrandr, xdg-open and
# gtk-launch by name; it starts them itself, the image only holds them):
# - /opt/noVNC: Debian's noVNC (its novnc_proxy finds the system
#   websockify), with index.html as E2B's fork has it;
# - the terminal and the browser E2B's image sets: xfce4-terminal as
#   x-terminal-emulator (apt's alternative already), firefox-esr as
#   x-www-browser and the handler of http(s) links xdg-open uses;
# - no screen saver, locker or power manager is installed (no
#   recommends), so the screen never blanks under an agent;
# - a machine id for dbus-launch (startxfce4's session bus): one for every
#   sandbox of the image, as in any image built once.
setup_desktop() {
    local rootfs=$1
    nb_log "image: desktop template settings (/opt/noVNC, browser, machine id)"
    mkdir -p "$rootfs/opt"
    ln -sfn /usr/share/novnc "$rootfs/opt/noVNC"
    [ -e "$rootfs/usr/share/novnc/index.html" ] ||
        ln -s vnc.html "$rootfs/usr/share/novnc/index.html"
    [ -x "$rootfs/usr/share/novnc/utils/novnc_proxy" ] ||
        nb_die "image: the novnc package has no utils/novnc_proxy"
    chroot "$rootfs" update-alternatives --set x-www-browser /usr/bin/firefox-esr >/dev/null
    mkdir -p "$rootfs/etc/xdg"
    cat >"$rootfs/etc/xdg/mimeapps.list" <<'EOF'
[Default Applications]
x-scheme-handler/http=firefox-esr.desktop
x-scheme-handler/https=firefox-esr.desktop
text/html=firefox-esr.desktop
EOF
    if [ ! -s "$rootfs/etc/machine-id" ]; then
        chroot "$rootfs" dbus-uuidgen >"$rootfs/etc/machine-id"
    fi
    # what the SDK's create runs, for a desktop driven without it (nanobox's
    # API, the console): nothing starts a display with the sandbox, since
    # the SDK starts its own at the resolution it was asked for
    cat >"$rootfs/usr/local/bin/nanobox-desktop-start" <<'EOF'
#!/bin/sh
# nanobox-desktop-start [WIDTHxHEIGHT] [DISPLAY]: Xvfb and an xfce4 session
# as E2B's desktop SDK starts them (src/setup/image.sh, setup_desktop);
# returns once the window manager runs. Default 1024x768 on :0.
size=${1:-1024x768}
display=${2:-:0}
export DISPLAY="$display"
if ! xdpyinfo >/dev/null 2>&1; then
    setsid nohup Xvfb "$display" -ac -screen 0 "${size}x24" -retro -dpi 96 \
        -nolisten tcp -nolisten unix >/tmp/xvfb.log 2>&1 </dev/null &
    i=0
    until xdpyinfo >/dev/null 2>&1; do
        i=$((i + 1))
        [ "$i" -lt 100 ] || { echo "Xvfb did not start: /tmp/xvfb.log" >&2; exit 1; }
        sleep 0.1
    done
fi
if ! pgrep -x xfce4-session >/dev/null; then
    setsid nohup startxfce4 >/tmp/xfce4.log 2>&1 </dev/null &
fi
i=0
until pgrep -x xfwm4 >/dev/null && pgrep -x xfdesktop >/dev/null; do
    i=$((i + 1))
    [ "$i" -lt 300 ] || { echo "xfce4 did not start: /tmp/xfce4.log" >&2; exit 1; }
    sleep 0.1
done
EOF
    chmod 0755 "$rootfs/usr/local/bin/nanobox-desktop-start"
}

# apt_install ROOTFS PACKAGE...: apt-get install --no-install-recommends in
# the tree debootstrap made (its sources.list names the mirror). apt, not
# debootstrap's --include, for anything past the base: debootstrap's own
# resolver leaves some dependencies out (with the python template's list,
# python3-zmq failed to configure). Postinsts need /proc; no service may
# start in a build tree (policy-rc.d). Like Debian's slim images, the
# packages' documentation, manual pages and translations are not
# unpacked (a sandbox has no man; 45 MB of the python template):
# the dpkg.cfg.d file stays, so what an operator's derived image installs
# is trimmed the same way.
apt_install() {
    local rootfs=$1
    shift
    local -a chrooted=(chroot "$rootfs" /usr/bin/env -i
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
        DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8)
    nb_log "image: apt-get install $*"
    cat >"$rootfs/etc/dpkg/dpkg.cfg.d/nanobox-slim" <<'EOF'
# nanobox (src/setup/image.sh): no docs, manual pages or translations
path-exclude=/usr/share/doc/*
path-include=/usr/share/doc/*/copyright
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/share/locale/*
path-include=/usr/share/locale/locale.alias
EOF
    mount -t proc proc "$rootfs/proc"
    printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d"
    chmod 0755 "$rootfs/usr/sbin/policy-rc.d"
    "${chrooted[@]}" apt-get update -q
    "${chrooted[@]}" apt-get install -y -q --no-install-recommends "$@"
    rm -f "$rootfs/usr/sbin/policy-rc.d"
    umount "$rootfs/proc"
}

# build_image NAME TITLE EXTRA SETUP [ENV...]: debootstrap the base
# packages, apt-get install EXTRA (blank- or comma-separated; may be
# empty), add the user, run SETUP (a function, or `:`) on the tree and
# import it as NAME with ENV lines (NAME=value) in its config.
build_image() {
    local image=$1 title=$2 extra=${3//,/ } setup=$4 started rootfs e recipe
    local base
    base=$(join_commas "${NB_IMAGE_PACKAGES[@]}")
    shift 4
    local -a env_opts=()
    for e in "$@"; do env_opts+=(-c "ENV $e"); done

    # a derived image's recipe holds its base's id: a rebuilt base rebuilds it
    recipe=$(recipe_hash "$image" "$title" "$base" "$extra" "$setup" "$@" \
        ${from_image:+"$(docker image inspect -f '{{.Id}}' "$from_image")"})
    if [ "$force" -eq 0 ] && image_current "$image" "$recipe"; then
        nb_log "image: $image already exists (--force rebuilds it)"
        return 0
    fi
    if image_exists "$image"; then
        nb_log "image: $image was built from another recipe than this image.sh's: rebuilding"
    fi
    # Two setup runs at once (CI and up.sh) would debootstrap twice: the
    # second waits, then finds the image built.
    flock 9
    if [ "$force" -eq 0 ] && image_current "$image" "$recipe"; then
        nb_log "image: $image was built meanwhile"
        flock -u 9
        return 0
    fi

    workdir=$(mktemp -d "${TMPDIR:-/var/tmp}/nanobox-image.XXXXXX")
    rootfs=$workdir/rootfs
    started=$SECONDS
    if [ -n "$from_image" ]; then
        export_image "$from_image" "$rootfs"
    else
        nb_log "image: $image: debootstrap --variant=minbase $suite into $rootfs from $mirror"
        debootstrap --variant=minbase --include="$base" "$suite" "$rootfs" "$mirror"
        nb_log "image: debootstrap done in $((SECONDS - started))s"
    fi
    if [ -n "${extra// /}" ]; then
        # shellcheck disable=SC2086  # a list of package names
        apt_install "$rootfs" $extra
        nb_log "image: apt-get done in $((SECONDS - started))s"
    fi

    if [ -z "$from_image" ]; then # a derived image has its base's
        add_user "$rootfs"
        profile_no_fork "$rootfs"
        apt_as_root "$rootfs"
    fi
    "$setup" "$rootfs"

    nb_log "image: cleaning apt caches"
    rm -rf "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
        "$rootfs"/var/lib/apt/lists/*
    mkdir -p "$rootfs/var/lib/apt/lists/partial"

    nb_log "image: importing as $image ($(du -sh --one-file-system "$rootfs" | cut -f1))"
    # Labels only under org.opencontainers.image.*: containers inherit image
    # labels, and nanobox.* labels on containers mean "a sandbox" to the server.
    tar -C "$rootfs" --numeric-owner -c . |
        docker import \
            -m "nanobox sandbox: ${from_image:-debootstrap --variant=minbase $suite + $base}${extra:+ + $extra}" \
            "${env_opts[@]}" \
            -c "LABEL org.opencontainers.image.title=$title" \
            -c "LABEL org.opencontainers.image.base.name=debian:$suite" \
            -c "LABEL org.opencontainers.image.created=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
            -c "LABEL org.opencontainers.image.revision=$recipe" \
            - "$image" >/dev/null
    remove_workdir
    workdir=
    flock -u 9
    nb_log "image: $image ready ($(docker image inspect -f '{{.Id}} {{.Size}}' "$image") bytes, $((SECONDS - started))s in all)"
}

# export_image IMAGE ROOTFS: the tree of IMAGE (a derived image starts
# from it rather than from debootstrap): a container created, never
# started, exported and removed. Its label is not nanobox.*: that means
# "a sandbox" to nanobox-fcgi's reconciliation.
export_image() {
    local from=$1 rootfs=$2 cid
    nb_log "image: starting from $from's tree"
    cid=$(docker create --label org.opencontainers.image.ref.name=nanobox-image-build \
        --entrypoint /bin/true "$from")
    mkdir -p "$rootfs"
    if ! docker export "$cid" | tar -C "$rootfs" --numeric-owner -x; then
        docker rm -f "$cid" >/dev/null || true
        nb_die "image: exporting $from failed"
    fi
    docker rm -f "$cid" >/dev/null
    # Docker's own file in every container's tree: not the image's. The
    # names Docker mounts over come out empty: apt needs the host's
    # resolver, as debootstrap copies it
    rm -f "$rootfs/.dockerenv"
    cp /etc/resolv.conf "$rootfs/etc/resolv.conf"
}

join_commas() {
    local IFS=,
    printf '%s\n' "$*"
}

[ "$(id -u)" -eq 0 ] || nb_die "image: debootstrap needs root"
command -v debootstrap >/dev/null || nb_die "image: debootstrap not found: install debootstrap"
nb_docker_answers || nb_die "image: no Docker engine answers (start dockerd first)"
mkdir -p /run/lock
exec 9>/run/lock/nanobox-image.lock
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
for target in "${targets[@]}"; do
    case $target in
    base)
        build_image "${NANOBOX_IMAGE:-nanobox:latest}" nanobox-sandbox "${NB_IMAGE_TOOLS[*]}" : \
            "PATH=$path"
        ;;
    desktop)
        # derived from the base image, built first only when missing: one
        # of another recipe stays (the desktop's recipe holds its id)
        if ! image_exists "${NANOBOX_IMAGE:-nanobox:latest}"; then
            build_image "${NANOBOX_IMAGE:-nanobox:latest}" nanobox-sandbox \
                "${NB_IMAGE_TOOLS[*]}" : "PATH=$path"
        fi
        from_image=${NANOBOX_IMAGE:-nanobox:latest}
        build_image "${NANOBOX_DESKTOP_IMAGE:-nanobox-desktop:latest}" nanobox-desktop \
            "${NB_DESKTOP_IMAGE_PACKAGES[*]}" setup_desktop "PATH=$path"
        from_image=
        ;;
    python)
        # PATH: where `pip install` (a user install) puts scripts.
        build_image "${NANOBOX_PYTHON_IMAGE:-nanobox-python:latest}" nanobox-python \
            "${NB_IMAGE_TOOLS[*]} ${NB_PYTHON_IMAGE_PACKAGES[*]} ${NANOBOX_PYTHON_EXTRA:-}" \
            setup_python \
            "PATH=/workspace/.local/bin:$path"
        ;;
    esac
done
