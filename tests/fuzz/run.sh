#!/usr/bin/env bash
#
# tests/fuzz/run.sh - build every libFuzzer harness in tests/fuzz with
# clang, AddressSanitizer and UBSan, and run each on its seed corpus. The
# time budget is split between them.
#
#   tests/fuzz/run.sh               # 30 seconds in all
#   tests/fuzz/run.sh 600           # ten minutes in all
#   tests/fuzz/run.sh 60 json demux # only these harnesses, 30 s each
#
# The harnesses, each a pure function of the bytes a peer sends (no
# libfcgi, no Docker, no sockets):
#   agent_request  nanobox-init's request parser (src/init/request.c)
#   route          the API's path matching (src/fcgi/route.c)
#   query          query-string decoding (src/fcgi/query.c)
#   json           body parsing, field checks, UTF-8-safe output (json.c)
#   demux          Docker's stream framing in random chunks (demux.c)
#   ndjson         the CLI's NDJSON line splitter (src/cli/ndjson.c)
#
# New inputs go to a scratch corpus per harness, never into the committed
# seeds (tests/fuzz/corpus/<harness>). A crash leaves its input in the
# scratch directory (printed); the other harnesses still run, and the
# script exits non-zero. Installs clang with apt-get when it is missing
# (Debian 12, as root).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SECS=${1:-30}
WORK=${NANOBOX_FUZZ_DIR:-${TMPDIR:-/tmp}/nanobox-fuzz}
ALL=(agent_request route query json demux ndjson)

log() { printf 'fuzz: %s\n' "$*" >&2; }

case $SECS in
''|*[!0-9]*) log "usage: $0 [SECONDS [HARNESS...]]"; exit 2 ;;
esac
shift || true
if [ "$#" -gt 0 ]; then
    harnesses=("$@")
else
    harnesses=("${ALL[@]}")
fi

if ! command -v clang >/dev/null 2>&1; then
    log "clang missing: installing it"
    apt-get install -y clang libclang-rt-14-dev >&2
fi

# Sources, include dirs, extra link flags and -max_len of each harness.
C=$ROOT/src/common
harness_build() {
    local name=$1 srcs incs libs=""
    case $name in
    agent_request)
        srcs="$ROOT/src/init/request.c $C/agentproto.c"; incs="-I$C -I$ROOT/src/init" ;;
    route)
        srcs="$ROOT/src/fcgi/route.c"; incs="-I$ROOT/src/fcgi" ;;
    query)
        srcs="$ROOT/src/fcgi/query.c $C/buf.c $C/log.c"; incs="-I$C -I$ROOT/src/fcgi" ;;
    json)
        srcs="$C/json.c $C/buf.c $C/log.c"; incs="-I$C"; libs=$YAJL_LIBS ;;
    demux)
        srcs="$C/demux.c"; incs="-I$C" ;;
    ndjson)
        srcs="$ROOT/src/cli/ndjson.c $C/json.c $C/buf.c $C/log.c"; incs="-I$C -I$ROOT/src/cli"
        libs=$YAJL_LIBS ;;
    *)
        log "no harness named '$name' (known: ${ALL[*]})"; return 2 ;;
    esac
    # shellcheck disable=SC2086 # word lists on purpose
    clang -g -O1 -Wall -Wextra -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
        -I"$WORK/include" $incs "$ROOT/tests/fuzz/fuzz_$name.c" $srcs $libs \
        -o "$WORK/fuzz_$name"
}

harness_max_len() {
    case $1 in
    agent_request) echo 4096 ;;
    route) echo 600 ;;
    query) echo 2100 ;;
    json) echo 8192 ;;
    *) echo 4096 ;;
    esac
}

YAJL_LIBS=$(pkg-config --libs yajl 2>/dev/null || echo -lyajl)

# The sources include the build's config.h; all they need of it is this.
mkdir -p "$WORK/include"
printf '#define _GNU_SOURCE 1\n' >"$WORK/include/config.h"

per=$(( SECS / ${#harnesses[@]} ))
[ "$per" -ge 1 ] || per=1
failed=()
for name in "${harnesses[@]}"; do
    seeds=$ROOT/tests/fuzz/corpus/$name
    mkdir -p "$WORK/$name/corpus" "$WORK/$name/artifacts"
    if ! harness_build "$name"; then
        failed+=("$name (build)")
        continue
    fi
    log "$name: running for ${per}s (scratch corpus: $WORK/$name/corpus)"
    if ! "$WORK/fuzz_$name" -max_total_time="$per" -max_len="$(harness_max_len "$name")" \
        -timeout=10 -artifact_prefix="$WORK/$name/artifacts/" -print_final_stats=1 \
        "$WORK/$name/corpus" "$seeds"; then
        log "$name: FAILED; the input is in $WORK/$name/artifacts/"
        failed+=("$name")
    fi
done

if [ "${#failed[@]}" -gt 0 ]; then
    log "failed: ${failed[*]}"
    exit 1
fi
log "all ${#harnesses[@]} harnesses ran clean"
