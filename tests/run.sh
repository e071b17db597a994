#!/usr/bin/env bash
#
# tests/run.sh - the whole test suite: install what it needs, start Docker,
# build the sandbox image, build nanobox, run `make check` (the C unit
# tests, lint, the layer checker), the fuzzers, and the integration tests
# (real nginx + nanobox-fcgi + dockerd), the agent's and the forwarder's.
#
#   tests/run.sh                    # build/ , plain build, every test
#   tests/run.sh --sanitizers       # build-san/ , ./configure --enable-sanitizers
#   tests/run.sh -- -k exec -x      # anything after -- goes to pytest
#
# The plain build also runs tests/valgrind.sh (the pool under valgrind).
# The integration suite runs in parallel (pytest-xdist, NANOBOX_TEST_JOBS
# workers, 3 by default), then its tests marked `serial` one at a time;
# the sanitizer build runs an allow-list of it (SAN_TESTS below).
# Every phase prints "run.sh: phase NAME took N s", every pytest run its 25
# slowest tests. A pass that selects no test fails (pytest's status 5), and
# with CI=true so does a test that skipped for a reason not in
# tests/plugins/nb_skips.py's list.
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
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
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
    rerun=(--reruns "$reruns" --reruns-delay 1 -rfEsR)
fi

# Each run names its 25 slowest tests (--durations), so that the suite's
# time is seen where it goes, and loads tests/plugins/nb_skips.py: a skip
# it does not expect is listed, and fails the run when CI=true (a test that
# did not run because the machine lacks something is a lost test).
# pytest's status is returned as is: 5 is "no test selected", a failure
# unless the caller says otherwise (integration_tests does, for a -k of
# yours).
export PYTHONPATH=$ROOT/tests/plugins${PYTHONPATH:+:$PYTHONPATH}
pytest_run() {
    "$py" -m pytest -p no:cacheprovider -p nb_skips --durations=25 "${rerun[@]}" "$@"
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
# 4 workers on 2 cores: the suite waits on dockerd, sandboxes and sleeps
# more than it computes (with 3 the cores were still idle a fifth of the
# time), so the extra workers fill what the others leave idle
# (docs/PERFORMANCE.md, "Test suite time").
jobs=${NANOBOX_TEST_JOBS:-4}
if ! "$py" -c 'import xdist' 2>/dev/null; then
    log "pytest-xdist missing (apt install python3-pytest-xdist): the integration suite runs serially"
    jobs=0
fi

# The sanitizer pass runs an allow-list of the integration suite (the plain
# pass runs all of it): what reaches a family of C code paths of
# nanobox-fcgi, nanobox-fwd and the CLI (nanobox-init in the sandboxes is
# the static, unsanitized build: its ASan run is init-tooled below), each
# family once. A new test file runs in the plain pass only until it is
# added here. Tests marked `sdk` (the E2B and MCP SDKs in node: the same C
# paths as the raw-HTTP tests of their files) are left out.
SAN_TESTS=(
    # the sandbox engine and the native API
    test_lifecycle.py        # create/get/list/timeout/delete, labels, Docker's view
    test_exec.py             # exec: output caps, timeouts, exit codes, streaming
    test_agent.py            # the agent protocol: NDJSON streams, stdin, disconnects, processes
    test_pty.py              # terminals: input, resize, the stream's end, the PTY cap
    test_files.py            # the files routes and every path-escape attempt
    test_files_archive.py    # tar in and out (tarstream.c, libarchive)
    test_files_watch.py      # the watch stream
    test_ports.py            # ports: nanobox-fwd, nginx host routing, conflicts
    test_run.py              # POST /run
    test_pause.py            # pause, resume, auto-resume, the TTL while paused
    test_network.py          # bridge sandboxes' egress rules (network.c)
    test_root.py             # root and sudo per template (isolation.c)
    test_pool.py             # the warm pool
    test_expiry.py           # the reaper's expiry
    # one build, its follow stream, a failed build, bad input, the context cap
    test_templates.py::test_build_then_create_exec_and_delete
    test_templates.py::test_follow_streams_the_log_until_the_build_ends
    test_templates.py::test_failing_run_is_failed_with_the_log_tail
    test_templates.py::test_other_bad_input_changes_nothing
    test_templates.py::test_context_over_the_cap_is_413
    # a snapshot restored, one of a paused sandbox, bad input, the size cap
    test_snapshots.py::test_snapshot_restores_workspace_tmp_and_an_install_byte_exact
    test_snapshots.py::test_snapshot_of_a_paused_sandbox_leaves_it_paused
    test_snapshots.py::test_bad_input_is_refused_and_changes_nothing
    test_snapshots.py::test_workspace_over_snapshot_max_is_413
    # the code routes: every refusal, state, streaming, interrupts, contexts,
    # a dead kernel, the output cap (the charts are Python's work)
    "test_code.py::test_empty_or_missing_code_is_400"
    "test_code.py::test_wrong_types_and_unknown_fields_are_400"
    "test_code.py::test_routes_check_id_method_and_shape"
    "test_code.py::test_bad_context_creates_are_refused"
    "test_code.py::test_code_over_code_max_bytes_is_413"
    "test_code.py::test_an_image_without_a_kernel_answers_409_no_kernel"
    "test_code.py::test_print_in_a_loop_streams_before_the_cell_ends"
    "test_code.py::test_interrupt_stops_a_running_cell"
    "test_code.py::test_a_client_that_leaves_interrupts_its_cell"
    "test_code.py::test_contexts_crud_and_restart_clears_state"
    "test_code.py::test_a_dead_kernel_is_reported_and_the_next_call_restarts_it"
    "test_code.py::test_output_over_max_output_is_cut_and_said"
    # the HTTP layer: routing, auth and tenancy, limits, errors
    test_errors.py           # hostile and malformed input on every route
    test_auth.py             # auth on every route
    test_keys.py             # many keys: owners, quotas, reloads (tenant.c, keys.c)
    test_ratelimit.py        # request rates (ratelimit.c)
    test_metrics.py          # GET /metrics, a sandbox's metrics (cgroup reader)
    test_slow_clients.py     # downloads never read hold no worker
    # the fronts: E2B's raw HTTP and Connect RPC (api_e2b*.c, e2b_rpc.c,
    # multipart.c), MCP over HTTP and stdio (libnanobox_mcp, `nanobox mcp`)
    test_e2b.py
    test_e2b_signed.py       # signed file URLs: the hostile ones (e2b_sign.c)
    test_mcp.py
    # the CLI: every subcommand
    test_cli.py
    # the process model: workers killed, restarts and reconciliation, an
    # upgrade's adoption, the service's signals and log, dockerd restarted
    test_crash.py
    "test_upgrade.py::test_running_sandboxes_are_adopted_after_an_upgrade[missing]"
    test_upgrade.py::test_a_paused_sandbox_is_adopted_paused
    test_upgrade.py::test_reconciliation_reads_back_an_owner_missing_from_the_table
    test_service.py
    test_docker_restart.py   # (serial)
    # a node of a cluster: its member process and the etcd client (member.c, etcd.c)
    test_cluster.py
    test_cluster_volumes.py  # volumes reached from any node (volreg.c, api_volfwd.c)
    test_cluster_e2b_templates.py  # E2B's build flow relayed to its home (e2bflow.c)
    test_cluster_gc.py       # gone nodes' volume rows collected, snapshots in max_templates
    # fork (fork.c, snapshot.c's layer copy), pause that frees memory,
    # persistent volumes (volume.c), E2B's template, snapshot and pause
    # routes (api_e2b_tpl.c) and host routing over HTTPS; their SDK tests
    # stay in the plain pass (" and not sdk")
    test_fork.py
    test_pause_cold.py
    test_volumes.py
    test_e2b_templates.py
    test_e2b_snapshots.py
    test_e2b_pause.py
    test_e2b_tls.py
)
# Tests of the files above whose time goes to sleeps that are the test (a
# TTL, a supervisor's back-off), to fifty containers, or to Jupyter behind
# the CLI (its code command is also run against a fake server), not to C
# paths the rest of the list does not reach (node ids as pytest names them:
# relative to tests/integration, which holds the pytest.ini):
SAN_DESELECT=(
    test_agent.py::test_background_jobs_outlive_a_short_exec_timeout
    test_run.py::test_fifty_runs_including_killed_ones_leave_no_container
    test_crash.py::test_restart_honours_an_extended_ttl
    test_expiry.py::test_extend_keeps_sandbox_alive_past_original_ttl
    test_service.py::test_up_sh_supervises_a_killed_master_back_with_everything_kept
    test_cli.py::test_code_plot_prints_an_image_line_and_saves_the_png
    test_cli.py::test_code_exception_and_timeout_exit_statuses
    test_cli.py::test_contexts_create_run_restart_rm
)
# Left to the plain pass: test_concurrency (wall-clock bounds that an ASan
# build's slowness only blurs), test_docs and test_openapi (the routes
# above, through the docs' examples and the spec), test_www (the console in
# chromium), test_template_python (Python's packages in the image),
# test_install (a build of its own), test_nginx_snippet and test_tls
# (nginx's configuration), and the rest of test_templates, test_snapshots,
# test_code and test_upgrade (docker builds, Jupyter and matplotlib: the
# same C paths as the tests listed), and test_e2b_desktop (the desktop SDK
# and chromium, over port and exec paths the list already takes).
# NANOBOX_SAN_FULL=1 or any pytest argument runs the whole suite instead.

integration_tests() {
    local rc=0 par=() tests=(tests/integration) filter=() p=0 s=0
    if [ "$sanitizers" = 1 ] && [ "${#pytest_args[@]}" = 0 ] && [ -z "${NANOBOX_SAN_FULL:-}" ]; then
        tests=("${SAN_TESTS[@]/#/tests/integration/}" "${SAN_DESELECT[@]/#/--deselect=}")
        filter=(" and not sdk")
        log "sanitizer build: the allow-list SAN_TESTS, no SDK tests"
    fi
    # loadgroup: tests that share a fixture run (xdist_group) run on one worker
    [ "$jobs" -gt 1 ] && par=(-n "$jobs" --dist loadgroup)
    log "integration tests against $builddir/nanobox-fcgi (${jobs} workers, then the serial tests)"
    pytest_run -v "${par[@]}" -m "not serial${filter[*]}" "${tests[@]}" "${pytest_args[@]}" || p=$?
    pytest_run -v -m "serial${filter[*]}" "${tests[@]}" "${pytest_args[@]}" || s=$?
    # Both file sets hold serial tests (test_docker_restart), so each pass
    # must select some (pytest's 5: none): an empty one is a mistake (a
    # test id gone, a mark lost). With pytest arguments of yours (a -k, a
    # file) one pass may be empty, not both.
    if [ "${#pytest_args[@]}" -gt 0 ] && [ "$p$s" != 55 ]; then
        [ "$p" = 5 ] && p=0
        [ "$s" = 5 ] && s=0
    fi
    [ "$p" = 5 ] && log "the parallel pass selected no test"
    [ "$s" = 5 ] && log "the serial pass selected no test"
    [ "$p" = 0 ] && [ "$s" = 0 ] || rc=1
    [ "$rc" = 0 ] || log "integration tests FAILED"
    return "$rc"
}

# --- the gate before each commit (README.md): `make check` in the build
# dir runs the C unit tests, tests/lint.sh and the layer checker
# (tests/arch), each whatever the others say (Makefile.am, check-local).
# Its fuzz smoke is left out here: the fuzz phase below runs longer; the
# sanitizer pass leaves lint out too (the same tree, checked by the plain
# pass).
check_lint=yes
[ "$sanitizers" = 1 ] && check_lint=no
make_check() {
    log "make check in $builddir"
    if ! make -C "$builddir" -j"$(nproc)" check CHECK_FUZZ_SECONDS=0 CHECK_LINT="$check_lint"; then
        log "make check FAILED (lint, layers or unit tests: see above)"
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

# --- nanobox-init on its own (a plain process speaking its protocol); each
# test runs an agent of its own, so the run is shared by xdist workers: 4,
# since the tests mostly wait (timeouts, a child's exit) and 2 kept the two
# cores busy a third of the time (docs/PERFORMANCE.md, "Test suite time")
init_tests() {
    local par=()
    [ "$jobs" -gt 1 ] && par=(-n 4)
    log "agent tests against $builddir/nanobox-init"
    NANOBOX_INIT=$builddir/nanobox-init pytest_run -v "${par[@]}" tests/init ||
        { log "agent tests FAILED"; return 1; }
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
    # under valgrind one worker a core (CPU-bound); under ASan they wait, as above
    [ "$jobs" -gt 1 ] && par=(-n "$(nproc)")
    [ "$jobs" -gt 1 ] && [ "$sanitizers" = 1 ] && par=(-n 4)
    if ! make -C "$builddir" nanobox-init-dynamic >/dev/null ||
        ! env "${tool[@]}" NANOBOX_INIT="$builddir/nanobox-init-dynamic" \
            "$py" -m pytest -q -p no:cacheprovider -p nb_skips "${rerun[@]}" "${par[@]}" tests/init; then
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
    timed check make_check || status=1
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
    # The static agent takes no sanitizer flags (nanobox_init_CFLAGS): the
    # sanitizer tree's is the plain tree's, code and data byte for byte, so
    # its tests run in the plain pass only; init-tooled runs the ASan one.
    if [ "$sanitizers" = 0 ]; then
        timed init init_tests || status=1
    fi
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
