#!/usr/bin/env bash
#
# tests/fuzz/run.sh - build every libFuzzer harness in tests/fuzz (with
# clang, AddressSanitizer and UBSan, through `make fuzzers` in the build
# tree: $NANOBOX_BUILD, default build/) and run each on its seed corpus.
# The time budget is split between them.
#
#   tests/fuzz/run.sh               # 30 seconds in all
#   tests/fuzz/run.sh 600           # ten minutes in all
#   tests/fuzz/run.sh 60 json demux # only these harnesses, 30 s each
#
# The harnesses, each a pure function of the bytes a peer sends (no
# libfcgi, no Docker, no sockets):
#   agent_request  nanobox-init's request parser (src/init/request.c)
#   route          the API's path matching (src/fcgi/http/route.c)
#   query          query-string decoding (src/fcgi/http/query.c)
#   json           body parsing, field checks, UTF-8-safe output (json.c)
#   demux          Docker's stream framing in random chunks (demux.c)
#   ndjson         the CLI's NDJSON line splitter (src/cli/ndjson.c)
#   keys           the API keys file's parser (src/common/keys.c)
#   dockerfile     the Dockerfile reader of template builds (src/fcgi/engine/dockerfile.c):
#                  what it writes reads back the same, naming only allowed images
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
ALL=(agent_request route query json demux ndjson keys dockerfile)

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

BUILD=${NANOBOX_BUILD:-$ROOT/build}
if ! command -v clang >/dev/null 2>&1; then
    log "clang missing: installing it (then re-run configure in $BUILD)"
    apt-get install -y clang libclang-rt-14-dev >&2
fi
for name in "${harnesses[@]}"; do
    case " ${ALL[*]} " in
    *" $name "*) ;;
    *) log "no harness named '$name' (known: ${ALL[*]})"; exit 2 ;;
    esac
done

# The harnesses are built by automake (`make fuzzers`, FUZZ_CC: clang),
# into tests/fuzz/ of the build tree; a harness that does not build fails.
harness_max_len() {
    case $1 in
    agent_request) echo 4096 ;;
    route) echo 600 ;;
    query) echo 2100 ;;
    json) echo 8192 ;;
    *) echo 4096 ;;
    esac
}

if ! make -C "$BUILD" fuzzers >&2; then
    log "make fuzzers failed in $BUILD"
    exit 1
fi

per=$(( SECS / ${#harnesses[@]} ))
[ "$per" -ge 1 ] || per=1
failed=()
for name in "${harnesses[@]}"; do
    seeds=$ROOT/tests/fuzz/corpus/$name
    mkdir -p "$WORK/$name/corpus" "$WORK/$name/artifacts"
    log "$name: running for ${per}s (scratch corpus: $WORK/$name/corpus)"
    if ! "$BUILD/tests/fuzz/fuzz_$name" -max_total_time="$per" -max_len="$(harness_max_len "$name")" \
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
