#!/bin/bash
# Builds bench/ab/icount.c against BUILD's libattn.so and runs it:
#   bench/ab/icount.sh BUILD [icount options...]   (icount --help lists them)
# The binary goes to BUILD/bench-ab/icount (rebuilt when older than the source).
if [ $# -lt 1 ] || [ "$1" = --help ] || [ "$1" = -h ]; then
    echo "usage: bench/ab/icount.sh BUILD_DIR [icount options...]"
    echo "Exact instructions per CPU_ATTN forward call of BUILD_DIR's libattn.so"
    echo "(single-stepped under ptrace; see bench/ab/icount.c)."
    [ $# -lt 1 ] && exit 2 || exit 0
fi
set -e
B=$(cd "$1" && pwd); shift
src=$(cd "$(dirname "$0")" && pwd)/icount.c
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$B/bench-ab/icount
if [ ! -x "$bin" ] || [ "$src" -nt "$bin" ] || [ "$B/libattn.so" -nt "$bin" ]; then
    mkdir -p "$B/bench-ab"
    cc -O2 -std=c17 -Wall -Wextra -Werror -I"$root/include" -I"$B/include" "$src" \
        -L"$B" -lattn -Wl,-rpath,"$B" -o "$bin"
fi
exec "$bin" "$@"
