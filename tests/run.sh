#!/usr/bin/env bash
#
# tests/run.sh - the whole test suite: install what it needs, start Docker,
# build the sandbox image, build nanobox, run the C unit tests (make check)
# and the integration tests (real nginx + nanobox-fcgi + dockerd).
#
#   tests/run.sh                    # build/ , plain build
#   tests/run.sh --sanitizers       # build-san/ , ./configure --enable-sanitizers
#   tests/run.sh -- -k exec -x      # anything after -- goes to pytest
#
# The plain build also runs tests/valgrind.sh (the pool under valgrind).
#
# Run as root on Debian 12 (it installs packages and starts dockerd when
# needed). Exits non-zero if anything failed. NANOBOX_SKIP_UNIT=1 or
# NANOBOX_SKIP_INTEGRATION=1 skip a half.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

sanitizers=0
pytest_args=()
while [ "$#" -gt 0 ]; do
    case $1 in
    --sanitizers) sanitizers=1 ;;
    --) shift; pytest_args+=("$@"); break ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) pytest_args+=("$1") ;;
    esac
    shift
done

log() { printf 'run.sh: %s\n' "$*" >&2; }

case ":$PATH:" in
*:/usr/sbin:*) ;;
*) PATH=$PATH:/usr/local/sbin:/usr/sbin:/sbin ;;
esac

# --- machine set-up: the shared helpers when present, a fallback otherwise
if [ -f src/setup/common.sh ]; then
    # shellcheck source=../src/setup/common.sh
    . src/setup/common.sh
fi

if type nb_install_packages >/dev/null 2>&1; then
    nb_install_packages
    nb_install_test_packages
else
    log "nb_install_packages not available: assuming the packages are installed"
fi

if type nb_start_dockerd >/dev/null 2>&1; then
    nb_start_dockerd
elif ! timeout 10 docker info >/dev/null 2>&1; then
    log "no Docker engine answers: starting dockerd"
    setsid nohup dockerd >/var/log/dockerd.log 2>&1 </dev/null &
    for _ in $(seq 60); do
        timeout 5 docker info >/dev/null 2>&1 && break
        sleep 1
    done
    timeout 10 docker info >/dev/null 2>&1 || { log "dockerd did not start"; exit 1; }
fi

if type nb_build_image >/dev/null 2>&1; then
    nb_build_image
elif ! docker image inspect nanobox:latest >/dev/null 2>&1; then
    log "image nanobox:latest is missing and src/setup has no nb_build_image yet"
    exit 1
fi

# --- build
if [ "$sanitizers" = 1 ]; then
    builddir=$ROOT/build-san
    configure_args=(--enable-sanitizers)
    # Leaks at exit of forked children are noise; any real error aborts.
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
else
    builddir=$ROOT/build
    configure_args=()
fi

if type nb_build >/dev/null 2>&1; then
    nb_build "$builddir" "${configure_args[@]}"
else
    [ -x configure ] || autoreconf -fi
    mkdir -p "$builddir"
    (cd "$builddir" && { [ -f config.status ] || "$ROOT/configure" "${configure_args[@]}"; } &&
        make -j"$(nproc)")
fi

status=0
py=/usr/bin/python3
"$py" -c 'import pytest, requests' 2>/dev/null || py=python3

# --- C unit tests
if [ -z "${NANOBOX_SKIP_UNIT:-}" ]; then
    log "make check in $builddir"
    if ! make -C "$builddir" -j"$(nproc)" check; then
        status=1
        log "unit tests FAILED"
        find "$builddir/tests" -name '*.log' -newer "$builddir/Makefile" -print0 2>/dev/null |
            xargs -0 -r grep -l -E 'FAIL|ERROR|not ok' 2>/dev/null |
            while read -r f; do echo "---- $f"; tail -n 40 "$f"; done
    fi
fi

# --- integration tests
if [ -z "${NANOBOX_SKIP_INTEGRATION:-}" ]; then
    log "integration tests against $builddir/nanobox-fcgi"
    if ! NANOBOX_BUILD=$builddir "$py" -m pytest -v -p no:cacheprovider tests/integration "${pytest_args[@]}"; then
        status=1
        log "integration tests FAILED"
    fi
fi

# --- nanobox-fwd on its own (network namespaces made with unshare, no Docker)
if [ -z "${NANOBOX_SKIP_INTEGRATION:-}" ]; then
    log "forwarder tests against $builddir/nanobox-fwd"
    if ! NANOBOX_BUILD=$builddir "$py" -m pytest -v -p no:cacheprovider tests/fwd; then
        status=1
        log "forwarder tests FAILED"
    fi
fi

# --- nanobox-init on its own (a plain process speaking its protocol), then
# a bounded libFuzzer run over every harness in tests/fuzz, the time split
# between them (plain build only: the fuzzer has its own ASan/UBSan build)
if [ -z "${NANOBOX_SKIP_INTEGRATION:-}" ]; then
    log "agent tests against $builddir/nanobox-init"
    if ! NANOBOX_INIT=$builddir/nanobox-init "$py" -m pytest -v -p no:cacheprovider tests/init; then
        status=1
        log "agent tests FAILED"
    fi
fi

# --- the agent's tests again under a checking tool: nanobox-init is static
# for the sandboxes, so a dynamic build of the same sources takes its place
# (nanobox-init-dynamic, built on demand): run under valgrind in the plain
# build, built with ASan/UBSan in the sanitizer one. A report makes the
# agent exit non-zero (valgrind: 99), which fails the test. The forwarder's
# tests run under valgrind too (in the sanitizer build it already is one).
if [ -z "${NANOBOX_SKIP_INTEGRATION:-}" ]; then
    vg="valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite"
    if [ "$sanitizers" = 0 ]; then
        tool=(NANOBOX_INIT_WRAPPER="$vg")
        log "agent and forwarder tests under valgrind"
    else
        tool=(NANOBOX_INIT_SANITIZED=1)
        log "agent tests against an ASan/UBSan build ($builddir/nanobox-init-dynamic)"
    fi
    if ! make -C "$builddir" nanobox-init-dynamic >/dev/null ||
        ! env "${tool[@]}" NANOBOX_INIT="$builddir/nanobox-init-dynamic" \
            "$py" -m pytest -q -p no:cacheprovider tests/init; then
        status=1
        log "agent tests on nanobox-init-dynamic FAILED"
    fi
    if [ "$sanitizers" = 0 ] &&
        ! NANOBOX_BUILD=$builddir NANOBOX_FWD_WRAPPER="$vg" "$py" -m pytest -q -p no:cacheprovider tests/fwd; then
        status=1
        log "forwarder tests under valgrind FAILED"
    fi
fi

if [ -z "${NANOBOX_SKIP_UNIT:-}" ] && [ "$sanitizers" = 0 ]; then
    if ! tests/fuzz/run.sh "${NANOBOX_FUZZ_SECONDS:-60}"; then
        status=1
        log "fuzzing FAILED (the crashing input is kept: see above)"
    fi
fi

# --- the worker pool under valgrind (the sanitizer build cannot run under it)
if [ -z "${NANOBOX_SKIP_INTEGRATION:-}" ] && [ "$sanitizers" = 0 ]; then
    if ! tests/valgrind.sh "$builddir"; then
        status=1
        log "valgrind run FAILED"
    fi
fi

[ "$status" = 0 ] && log "all tests passed"
exit "$status"
