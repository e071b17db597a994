#!/bin/bash
#
# image.sh - build the sandbox image nanobox:latest from Debian bookworm.
#
# No image registry is reachable from these machines, so the image is made
# locally: debootstrap a minbase bookworm (python3, curl, ca-certificates,
# procps), add the unprivileged user `sandbox` (uid/gid 1000, home
# /workspace), and `docker import` the tree. Takes about a minute.
#
# Usage: image.sh [--force]
#   Does nothing when nanobox:latest already exists, unless --force.
# Environment:
#   NANOBOX_MIRROR  Debian mirror (default http://deb.debian.org/debian)
#   NANOBOX_IMAGE   image name (default nanobox:latest)
#   TMPDIR          where the rootfs is built (default /var/tmp; debootstrap
#                   needs a filesystem without nodev/noexec)
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

image=${NANOBOX_IMAGE:-nanobox:latest}
mirror=${NANOBOX_MIRROR:-http://deb.debian.org/debian}
suite=bookworm
packages=python3,ca-certificates,curl,procps
force=0

for arg in "$@"; do
    case $arg in
    --force) force=1 ;;
    -h | --help)
        sed -n '3,17s/^# \{0,1\}//p' "$0"
        exit 0
        ;;
    *) nb_die "image.sh: unknown argument '$arg' (try --help)" ;;
    esac
done

image_exists() {
    docker image inspect "$image" >/dev/null 2>&1
}

if [ "$force" -eq 0 ] && image_exists; then
    nb_log "image: $image already exists (--force rebuilds it)"
    exit 0
fi
[ "$(id -u)" -eq 0 ] || nb_die "image: debootstrap needs root"
command -v debootstrap >/dev/null || nb_die "image: debootstrap not found: install debootstrap"
nb_docker_answers || nb_die "image: no Docker engine answers (start dockerd first)"

# Two setup runs at once (CI and up.sh) would debootstrap twice: the second
# waits, then finds the image built.
mkdir -p /run/lock
exec 9>/run/lock/nanobox-image.lock
flock 9
if [ "$force" -eq 0 ] && image_exists; then
    nb_log "image: $image was built meanwhile"
    exit 0
fi

workdir=$(mktemp -d "${TMPDIR:-/var/tmp}/nanobox-image.XXXXXX")
rootfs=$workdir/rootfs

# On every exit path: unmount whatever a failed debootstrap left mounted
# (proc, sys...) so that rm cannot descend into the host's /proc, then
# remove the tree without crossing filesystems.
cleanup() {
    local rc=$? mnt
    trap - EXIT
    awk -v p="$workdir/" 'index($2, p) == 1 { print $2 }' /proc/self/mounts |
        sort -r | while read -r mnt; do umount -l "$mnt" || true; done
    rm -rf --one-file-system "$workdir"
    if [ "$rc" -ne 0 ]; then
        nb_log "image: failed (exit $rc); removed $workdir"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

nb_log "image: debootstrap --variant=minbase $suite into $rootfs from $mirror"
started=$SECONDS
debootstrap --variant=minbase --include="$packages" "$suite" "$rootfs" "$mirror"
nb_log "image: debootstrap done in $((SECONDS - started))s"

# The image's user: uid/gid 1000, home = the workspace. Sandboxes run as a
# uid of their own per slot (sandbox_uid_base) under this user's name, from
# a passwd nanobox mounts; 1000 is used as is only with sandbox_uid_base = 0.
# Written by hand rather than with useradd so nothing runs inside the rootfs.
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

nb_log "image: cleaning apt caches"
rm -rf "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
    "$rootfs"/var/lib/apt/lists/*
mkdir -p "$rootfs/var/lib/apt/lists/partial"

nb_log "image: importing as $image ($(du -sh --one-file-system "$rootfs" | cut -f1))"
# Labels only under org.opencontainers.image.*: containers inherit image
# labels, and nanobox.* labels on containers mean "a sandbox" to the server.
tar -C "$rootfs" --numeric-owner -c . |
    docker import \
        -m "nanobox sandbox: debootstrap --variant=minbase $suite + $packages" \
        -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        -c 'LABEL org.opencontainers.image.title=nanobox-sandbox' \
        -c "LABEL org.opencontainers.image.base.name=debian:$suite" \
        -c "LABEL org.opencontainers.image.created=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
        - "$image" >/dev/null

nb_log "image: $image ready ($(docker image inspect -f '{{.Id}}' "$image"), $((SECONDS - started))s in all)"
