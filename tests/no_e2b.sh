#!/usr/bin/env bash
#
# tests/no_e2b.sh - the build without the E2B front (./configure
# --disable-e2b; docs/E2B.md, "Building without it"): it builds clean with
# -Werror, passes the layer check, and serves the native API. A few native
# integration test files run against it, and test_fronts.py checks that
# E2B's paths are the native 404 there. .ci/run runs it once, after
# tests/run.sh has readied the machine (packages, dockerd, images).
#
#   tests/no_e2b.sh                 # build-noe2b/, then the tests
#   tests/no_e2b.sh -- -k exec      # anything after -- goes to pytest
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=src/setup/common.sh
. src/setup/common.sh

[ "${1:-}" = -- ] && shift
builddir=$ROOT/build-noe2b
nb_build "$builddir" --enable-werror --disable-e2b
if "$builddir/nanobox-fcgi" -R | cut -f3 | grep -qw e2b; then
    echo "no_e2b.sh: $builddir/nanobox-fcgi still has E2B routes" >&2
    exit 1
fi
python3 tests/arch/check_layers.py "$builddir"

py=/usr/bin/python3
"$py" -c 'import pytest, requests' 2>/dev/null || py=python3
par=() rerun=()
"$py" -c 'import xdist' 2>/dev/null && par=(-n "${NANOBOX_TEST_JOBS:-4}" --dist loadgroup)
# a failed test runs once more before it counts, as in tests/run.sh
[ "${NANOBOX_TEST_RERUNS:-1}" -gt 0 ] && "$py" -c 'import pytest_rerunfailures' 2>/dev/null &&
    rerun=(--reruns "${NANOBOX_TEST_RERUNS:-1}" --reruns-delay 1 -rfEsR)
files=(test_fronts.py test_lifecycle.py test_exec.py test_errors.py)
files=("${files[@]/#/tests/integration/}")
export NANOBOX_BUILD=$builddir
rc=0
"$py" -m pytest -p no:cacheprovider -q "${rerun[@]}" "${par[@]}" -m "not serial" "${files[@]}" "$@" || rc=$?
# then the serial ones alone; none among the files (status 5) is no failure
"$py" -m pytest -p no:cacheprovider -q "${rerun[@]}" -m serial "${files[@]}" "$@" || { [ $? = 5 ] || rc=1; }
exit "$rc"
