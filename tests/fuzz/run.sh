#!/usr/bin/env bash
#
# tests/fuzz/run.sh - build the libFuzzer harness over nanobox-init's request
# parser (fuzz_agent_request.c + src/init/request.c + src/common/agentproto.c)
# with clang, AddressSanitizer and UBSan, and run it on the seed corpus.
#
#   tests/fuzz/run.sh          # 30 seconds
#   tests/fuzz/run.sh 600      # ten minutes
#
# New inputs go to a scratch corpus, never into the committed seeds
# (tests/fuzz/corpus/agent_request). A crash leaves its input in the
# scratch directory (printed) and makes the script exit non-zero.
# Installs clang with apt-get when it is missing (Debian 12, as root).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SECS=${1:-30}
WORK=${NANOBOX_FUZZ_DIR:-${TMPDIR:-/tmp}/nanobox-fuzz}
SEEDS=$ROOT/tests/fuzz/corpus/agent_request

log() { printf 'fuzz: %s\n' "$*" >&2; }

case $SECS in
''|*[!0-9]*) log "usage: $0 [SECONDS]"; exit 2 ;;
esac

if ! command -v clang >/dev/null 2>&1; then
    log "clang missing: installing it"
    apt-get install -y clang libclang-rt-14-dev >&2
fi

mkdir -p "$WORK/corpus" "$WORK/artifacts"
clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$ROOT/src/common" -I"$ROOT/src/init" \
    "$ROOT/tests/fuzz/fuzz_agent_request.c" "$ROOT/src/init/request.c" \
    "$ROOT/src/common/agentproto.c" -o "$WORK/fuzz_agent_request"

log "running for ${SECS}s (scratch corpus: $WORK/corpus)"
"$WORK/fuzz_agent_request" -max_total_time="$SECS" -max_len=4096 -timeout=10 \
    -artifact_prefix="$WORK/artifacts/" -print_final_stats=1 \
    "$WORK/corpus" "$SEEDS"
