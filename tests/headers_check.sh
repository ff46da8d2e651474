#!/usr/bin/env bash
# The application headers do not need the implementer header: every
# include/attn/*.h except backend.h is copied into a folder where backend.h
# does not exist and compiled alone as one translation unit (C17, -Werror);
# backend.h itself must compile alone from the full include folder. A header
# that includes attn/backend.h again fails here with "No such file".
set -u
src=${ATTN_SOURCE_DIR:?ATTN_SOURCE_DIR not set}
cc=${ATTN_CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/inc/attn"
for h in "$src"/include/attn/*.h; do
    [ "$(basename "$h")" = backend.h ] || cp "$h" "$tmp/inc/attn/"
done
flags=(-std=c17 -Wall -Wextra -Werror -Wstrict-prototypes -pedantic -fsyntax-only)
fails=0
n=0
check() { # check NAME INCLUDE_DIR
    printf '#include "attn/%s"\n#include "attn/%s"\ntypedef int tu_not_empty;\n' "$1" "$1" >"$tmp/tu_$1.c"
    n=$((n + 1))
    if ! "$cc" "${flags[@]}" -I "$2" -c "$tmp/tu_$1.c" -o /dev/null 2>"$tmp/err"; then
        echo "FAIL: attn/$1 does not compile alone (include dir $2):"
        sed 's/^/    /' "$tmp/err"
        fails=$((fails + 1))
    fi
}
for h in "$tmp"/inc/attn/*.h; do
    check "$(basename "$h")" "$tmp/inc"
done
check backend.h "$src/include"
[ ! -e "$tmp/inc/attn/backend.h" ] || { echo "FAIL: backend.h reachable"; exit 1; }
echo "headers_check: $n headers, $fails failed"
[ "$fails" -eq 0 ]
