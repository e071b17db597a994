#!/usr/bin/env bash
#
# tests/lint.sh - the habits CI checks mechanically: every C file is laid
# out as .clang-format says, every shell script passes shellcheck, no
# source line ends in whitespace, and commit subjects stay within 72
# characters. `make check` runs it (the gate before each commit, and so
# does tests/run.sh); it also runs alone. Exits non-zero and names what is
# off.
#
#   tests/lint.sh          # check
#   tests/lint.sh --fix    # rewrite the C files in place with clang-format
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

log() { printf 'lint: %s\n' "$*" >&2; }
fix=0
[ "${1:-}" = --fix ] && fix=1

for tool in clang-format shellcheck; do
    command -v "$tool" >/dev/null 2>&1 ||
        { log "$tool missing (apt-get install clang-format shellcheck)"; exit 2; }
done

status=0
mapfile -t cfiles < <(git ls-files -- 'src/*.[ch]' 'tests/*.[ch]')
mapfile -t shfiles < <(git ls-files -- '*.sh' .ci/run)

if [ "$fix" = 1 ]; then
    clang-format -i "${cfiles[@]}"
    log "reformatted ${#cfiles[@]} C files"
    exit 0
fi

bad=()
for f in "${cfiles[@]}"; do
    if ! clang-format "$f" | cmp -s - "$f"; then
        bad+=("$f")
    fi
done
if [ "${#bad[@]}" -gt 0 ]; then
    status=1
    log "not laid out as .clang-format says (tests/lint.sh --fix, then review):"
    for f in "${bad[@]}"; do
        clang-format "$f" | diff -u --label "$f" --label "$f (clang-format)" "$f" - | head -n 20 >&2 || true
    done
fi

if ! shellcheck -x -P SCRIPTDIR "${shfiles[@]}"; then
    status=1
    log "shellcheck found problems in the scripts above"
fi

if git grep -n -I -E '[[:blank:]]+$' -- 'src/' 'tests/*.py' 'tests/*.sh' 'tests/*.c' 'nginx/' 'www/' \
    'Makefile.am' 'configure.ac' '.ci/'; then
    status=1
    log "trailing whitespace on the lines above"
fi

# Commit subjects: "area: change" in at most 72 characters, the why in the
# body. Checked for the commits after SUBJECTS_FROM (the last one before the
# rule held everywhere), merges excepted; a clone without that history (a
# shallow one, an export) has nothing to check.
SUBJECTS_FROM=4c4ba59c525d
if git cat-file -e "$SUBJECTS_FROM^{commit}" 2>/dev/null; then
    long=0
    while IFS=' ' read -r hash subject; do
        # characters, not bytes: an en dash counts as one
        if [ "$(LC_ALL=C.UTF-8 bash -c 'printf %s "${#1}"' _ "$subject")" -gt 72 ]; then
            printf '%s %s\n' "$hash" "$subject" >&2
            long=1
        fi
    done < <(git log --no-merges --format='%h %s' "$SUBJECTS_FROM..HEAD")
    if [ "$long" = 1 ]; then
        status=1
        log "commit subjects over 72 characters above: say the area and the change, the why in the body"
    fi
fi

[ "$status" = 0 ] && log "clean: ${#cfiles[@]} C files, ${#shfiles[@]} shell scripts"
exit "$status"
