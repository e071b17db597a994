#!/usr/bin/env bash
#
# tests/run.sh - the whole test suite: install what it needs, start Docker,
# build the sandbox image, build nanobox, run the C unit tests (make check)
# and the integration tests (real nginx + nanobox-fcgi + dockerd).
#
#   tests/run.sh                    # build/ , plain build, every test
#   tests/run.sh --sanitizers       # build-san/ , ./configure --enable-sanitizers
#   tests/run.sh -- -k exec -x      # anything after -- goes to pytest
#
# The plain build also runs tests/valgrind.sh (the pool under valgrind).
# The integration suite runs in parallel (pytest-xdist, NANOBOX_TEST_JOBS
# workers, 3 by default), then its tests marked `serial` one at a time;
# the sanitizer build runs a chosen subset of it (SAN_SKIP below).
# Every phase prints "run.sh: phase NAME took N s".
#
# Run as root on Debian 12 (it installs packages and starts dockerd when
# needed). Exits non-zero if anything failed. NANOBOX_SKIP_UNIT=1 or
# NANOBOX_SKIP_INTEGRATION=1 skip a half.
# The phases are functions called through timed/in_background:
# shellcheck disable=SC2317
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

sanitizers=0
pytest_args=()
while [ "$#" -gt 0 ]; do
    case $1 in
    --sanitizers) sanitizers=1 ;;
    --) shift; pytest_args+=("$@"); break ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) pytest_args+=("$1") ;;
    esac
    shift
done

log() { printf 'run.sh: %s\n' "$*" >&2; }

# timed NAME CMD...: run CMD and say how long it took; CMD's status.
timed() {
    local name=$1 t0=$SECONDS rc=0
    shift
    "$@" || rc=$?
    log "phase $name took $((SECONDS - t0)) s$([ "$rc" = 0 ] || echo ", FAILED ($rc)")"
    return "$rc"
}

# A phase run beside others writes to a log of its own, shown when it is
# waited for, so that outputs do not interleave.
bgdir=$(mktemp -d "${TMPDIR:-/tmp}/nanobox-run-XXXXXX")
trap 'rm -rf "$bgdir"' EXIT
declare -A bg_pid=()
in_background() {
    local name=$1
    shift
    log "phase $name starts in the background"
    timed "$name" "$@" >"$bgdir/$name.log" 2>&1 &
    bg_pid[$name]=$!
}
wait_for() {
    local rc=0
    wait "${bg_pid[$1]}" || rc=$?
    log "---- output of phase $1 (run in the background)"
    cat "$bgdir/$1.log" >&2
    return "$rc"
}

case ":$PATH:" in
*:/usr/sbin:*) ;;
*) PATH=$PATH:/usr/local/sbin:/usr/sbin:/sbin ;;
esac

# --- machine set-up: the shared helpers when present, a fallback otherwise
if [ -f src/setup/common.sh ]; then
    # shellcheck source=../src/setup/common.sh
    . src/setup/common.sh
fi

setup_machine() {
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
        timeout 10 docker info >/dev/null 2>&1 || { log "dockerd did not start"; return 1; }
    fi

    if type nb_build_image >/dev/null 2>&1; then
        nb_build_image
    elif ! docker image inspect nanobox:latest >/dev/null 2>&1; then
        log "image nanobox:latest is missing and src/setup has no nb_build_image yet"
        return 1
    fi
}
# Not through timed: under `||` set -e would not stop these at a failure.
t0=$SECONDS
setup_machine
log "phase setup took $((SECONDS - t0)) s"

# --- build
# Warnings are errors here (--enable-werror): the tree builds clean with
# WARN_CFLAGS (configure.ac), and a test run is where a new one must stop.
if [ "$sanitizers" = 1 ]; then
    builddir=$ROOT/build-san
    configure_args=(--enable-sanitizers --enable-werror)
    # Leaks at exit of forked children are noise; any real error aborts.
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
else
    builddir=$ROOT/build
    configure_args=(--enable-werror)
fi
export NANOBOX_BUILD=$builddir

build() {
    if type nb_build >/dev/null 2>&1; then
        nb_build "$builddir" "${configure_args[@]}"
    else
        [ -x configure ] || autoreconf -fi
        mkdir -p "$builddir"
        (cd "$builddir" && { [ -f config.status ] || "$ROOT/configure" "${configure_args[@]}"; } &&
            make -j"$(nproc)")
    fi
}
t0=$SECONDS
build
log "phase build took $((SECONDS - t0)) s"

status=0
py=/usr/bin/python3
"$py" -c 'import pytest, requests' 2>/dev/null || py=python3

# A failed test runs once more (pytest-rerunfailures) before it counts:
# the suite drives real dockerd, nginx and sandboxes on a two-core machine
# that also runs valgrind and the fuzzer, and a race we have not found yet
# should not sink a whole run. It still fails when it fails twice, and every
# second run is listed (pytest's "rerun test summary info", and "N rerun"
# in its last line) so that a flaky test is seen and fixed, not hidden.
# NANOBOX_TEST_RERUNS=0 turns it off.
rerun=()
reruns=${NANOBOX_TEST_RERUNS:-1}
if [ "$reruns" -gt 0 ] && "$py" -c 'import pytest_rerunfailures' 2>/dev/null; then
    rerun=(--reruns "$reruns" --reruns-delay 1 -rfER)
fi

# pytest's status 5 is "no test selected": a pass with nothing in it (no
# serial test among the files, a -k that selects none there) is no failure.
# Each run names its 25 slowest tests (--durations), so that the suite's
# time is seen where it goes.
pytest_run() {
    local rc=0
    "$py" -m pytest -p no:cacheprovider --durations=25 "${rerun[@]}" "$@" || rc=$?
    [ "$rc" = 5 ] && rc=0
    return "$rc"
}

# --- the integration suite in parallel
#
# pytest-xdist runs it in NANOBOX_TEST_JOBS worker processes. Each worker
# has a stack of its own (the session fixture), its own instance label and
# temp dirs, and its own band of TCP ports (nbtest.py, "port bands"), so a
# test sees only what it made. A test that needs the machine to itself
# (a wall-clock bound that other workers' load would break) is marked
# @pytest.mark.serial and runs after the parallel pass, alone.
#
# 3 workers on 2 cores: the suite waits on dockerd, sandboxes and sleeps
# more than it computes, so a third worker fills the cores the other two
# leave idle; 4 was no faster here (docs/PERFORMANCE.md, "Test suite time").
jobs=${NANOBOX_TEST_JOBS:-3}
if ! "$py" -c 'import xdist' 2>/dev/null; then
    log "pytest-xdist missing (apt install python3-pytest-xdist): the integration suite runs serially"
    jobs=0
fi

# The sanitizer pass runs a subset of the integration suite (the plain pass
# runs it all): every file but the few in SAN_SKIP, so that ASan/UBSan see
# every family of C code paths under real traffic, and a new test file is
# in it unless put here:
#   test_lifecycle   create/get/list/timeout/delete, labels, Docker's view
#   test_exec        exec: output caps, timeouts, exit codes
#   test_agent       the agent: NDJSON streaming, stdin, disconnects,
#                    background processes (the processes routes)
#   test_files       the files routes and every path-escape attempt
#   test_ports       ports: nanobox-fwd, nginx host routing, conflicts
#   test_run         POST /run
#   test_mcp         MCP over HTTP (router's internal requests) and stdio
#                    (the CLI's `nanobox mcp`, also sanitized)
#   test_errors      hostile and malformed input on every route
#   test_auth        auth on every route
#   test_crash       workers killed mid-request, restart + reconciliation
#   test_expiry      the reaper
#   test_pool        the warm pool
# Left to the plain pass: test_cli (the CLI's own options and output),
# test_concurrency (wall-clock bounds that an ASan build's slowness only
# blurs), test_nginx_snippet (nginx configuration), test_www (the console,
# JavaScript in chromium, the same routes as above), test_template_python
# (the python template's packages: the routes it uses are those of
# test_exec and test_files, and the time goes to Python in the sandbox),
# test_install (a build of its own, not the sanitized one), test_tls
# (nginx's TLS: the routes it drives are test_lifecycle's and test_ports').
# NANOBOX_SAN_FULL=1 or any pytest argument runs the whole suite instead.
SAN_SKIP=(test_cli.py test_concurrency.py test_nginx_snippet.py test_www.py test_template_python.py
    test_install.py test_tls.py)

integration_tests() {
    local rc=0 skip=() par=()
    if [ "$sanitizers" = 1 ] && [ "${#pytest_args[@]}" = 0 ] && [ -z "${NANOBOX_SAN_FULL:-}" ]; then
        skip=("${SAN_SKIP[@]/#/--ignore=tests/integration/}")
        log "sanitizer build: all but ${SAN_SKIP[*]}"
    fi
    # loadgroup: tests that share a machine-wide fixture (xdist_group) run on one worker
    [ "$jobs" -gt 1 ] && par=(-n "$jobs" --dist loadgroup)
    log "integration tests against $builddir/nanobox-fcgi (${jobs} workers, then the serial tests)"
    pytest_run -v "${par[@]}" -m "not serial" "${skip[@]}" tests/integration "${pytest_args[@]}" || rc=1
    pytest_run -v -m serial "${skip[@]}" tests/integration "${pytest_args[@]}" || rc=1
    [ "$rc" = 0 ] || log "integration tests FAILED"
    return "$rc"
}

# --- the habits made mechanical: layout (.clang-format), shellcheck, and
# the fcgi layering rules on the objects just built (tests/arch)
lint() {
    tests/lint.sh || { log "lint FAILED (tests/lint.sh says what)"; return 1; }
    "$py" tests/arch/check_layers.py "$builddir" || { log "layering check FAILED"; return 1; }
}

unit_tests() {
    log "make check in $builddir"
    if ! make -C "$builddir" -j"$(nproc)" check; then
        log "unit tests FAILED"
        find "$builddir/tests" -name '*.log' -newer "$builddir/Makefile" -print0 2>/dev/null |
            xargs -0 -r grep -l -E 'FAIL|ERROR|not ok' 2>/dev/null |
            while read -r f; do echo "---- $f"; tail -n 40 "$f"; done
        return 1
    fi
}

# --- nanobox-fwd on its own (network namespaces made with unshare, no Docker)
fwd_tests() {
    log "forwarder tests against $builddir/nanobox-fwd"
    pytest_run -v tests/fwd || { log "forwarder tests FAILED"; return 1; }
}

# --- nanobox-init on its own (a plain process speaking its protocol)
init_tests() {
    log "agent tests against $builddir/nanobox-init"
    NANOBOX_INIT=$builddir/nanobox-init pytest_run -v tests/init || { log "agent tests FAILED"; return 1; }
}

# --- the agent's tests again under a checking tool: nanobox-init is static
# for the sandboxes, so a dynamic build of the same sources takes its place
# (nanobox-init-dynamic, built on demand): run under valgrind in the plain
# build, built with ASan/UBSan in the sanitizer one. A report makes the
# agent exit non-zero (valgrind: 99), which fails the test. Each test runs
# an agent of its own (its own socket name and temp dir), so two xdist
# workers share the run: under valgrind it is CPU-bound, one per core.
vg="valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite"
init_tooled_tests() {
    local tool par=()
    if [ "$sanitizers" = 0 ]; then
        tool=(NANOBOX_INIT_WRAPPER="$vg")
        log "agent tests under valgrind ($builddir/nanobox-init-dynamic)"
    else
        tool=(NANOBOX_INIT_SANITIZED=1)
        log "agent tests against an ASan/UBSan build ($builddir/nanobox-init-dynamic)"
    fi
    [ "$jobs" -gt 1 ] && par=(-n "$(nproc)")
    if ! make -C "$builddir" nanobox-init-dynamic >/dev/null ||
        ! env "${tool[@]}" NANOBOX_INIT="$builddir/nanobox-init-dynamic" \
            "$py" -m pytest -q -p no:cacheprovider "${rerun[@]}" "${par[@]}" tests/init; then
        log "agent tests on nanobox-init-dynamic FAILED"
        return 1
    fi
}

# --- the forwarder's tests under valgrind (in the sanitizer build the
# forwarder already is one)
fwd_valgrind_tests() {
    log "forwarder tests under valgrind"
    NANOBOX_FWD_WRAPPER="$vg" pytest_run -q tests/fwd || { log "forwarder tests under valgrind FAILED"; return 1; }
}

# --- a bounded libFuzzer run over every harness in tests/fuzz, the time
# split between them (plain build only: the fuzzer has its own ASan/UBSan
# build)
fuzz() {
    tests/fuzz/run.sh "${NANOBOX_FUZZ_SECONDS:-60}" ||
        { log "fuzzing FAILED (the crashing input is kept: see above)"; return 1; }
}

# --- the worker pool under valgrind (the sanitizer build cannot run under it)
pool_valgrind() {
    tests/valgrind.sh "$builddir" || { log "valgrind run FAILED"; return 1; }
}

# --- the order
#
# Two cores (the plain pass took 11.5 min one phase after the other, the
# parallel one about half: docs/PERFORMANCE.md, "Test suite time"). The
# integration suite mostly waits (dockerd, sandboxes, sleeps), so the
# fuzzer's fixed-length run (60 s of wall clock whatever the load) goes
# beside it; the tests under valgrind are CPU work and come after, two at a
# time; the forwarder's own tests, which measure throughput, run alone.
unit=0 integration=0
[ -z "${NANOBOX_SKIP_UNIT:-}" ] && unit=1
[ -z "${NANOBOX_SKIP_INTEGRATION:-}" ] && integration=1

if [ "$unit" = 1 ]; then
    timed lint lint || status=1
    timed unit unit_tests || status=1
    [ "$sanitizers" = 0 ] && in_background fuzz fuzz
fi
if [ "$integration" = 1 ]; then
    timed integration integration_tests || status=1
fi
if [ -n "${bg_pid[fuzz]:-}" ]; then
    wait_for fuzz || status=1
fi
if [ "$integration" = 1 ]; then
    timed fwd fwd_tests || status=1
    timed init init_tests || status=1
    timed init-tooled init_tooled_tests || status=1
    if [ "$sanitizers" = 0 ]; then
        # the pool under valgrind (10 s) beside the forwarder under valgrind
        in_background pool-valgrind pool_valgrind
        timed fwd-valgrind fwd_valgrind_tests || status=1
        wait_for pool-valgrind || status=1
    fi
fi

[ "$status" = 0 ] && log "all tests passed"
exit "$status"
