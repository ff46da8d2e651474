#!/usr/bin/env bash
# Install rules: `cmake --install` into a temporary prefix, then build a small
# application against it three ways (pkg-config + shared, pkg-config +
# static, CMake find_package(attn)) and run each: all must select FLASH_ATTN
# for a bf16 head-128 layer on a simulated H100.
set -euo pipefail
if [ -n "${ATTN_SANITIZED:-}" ]; then
    # A sanitized libattn needs the sanitizer runtime in the consumer too;
    # the install rules are checked by the normal build's run of this test.
    echo "cli_install: skipped in the sanitizer build (checked in the normal build)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$ATTN_BINARY_DIR" --prefix "$tmp/prefix" >/dev/null
cat >"$tmp/app.c" <<'C'
#include <attn/attn.h>
#include <stdio.h>
int main(void)
{
    attn_platform *p = NULL;
    if (attn_platform_open("h100", &p) != ATTN_OK) return 1;
    attn_selector_config c;
    attn_selector_config_init(&c);
    c.head_size = 128;
    const attn_selection *s = NULL;
    attn_status st = attn_select(p, NULL, &c, &s);
    printf("%s\n", st == ATTN_OK ? attn_selection_backend(s) : attn_status_name(st));
    attn_platform_free(p);
    return st == ATTN_OK ? 0 : 1;
}
C
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig:$tmp/prefix/lib64/pkgconfig"
libdir=$(pkg-config --variable=libdir attn)
cc -std=c17 -Wall -Werror "$tmp/app.c" $(pkg-config --cflags --libs attn) \
    -Wl,-rpath,"$libdir" -o "$tmp/app_shared"
cc -std=c17 -Wall -Werror "$tmp/app.c" $(pkg-config --cflags attn) "$libdir/libattn.a" \
    $(pkg-config --libs-only-other --static attn) -lpthread -ldl -lm -o "$tmp/app_static"
mkdir -p "$tmp/cm"
cat >"$tmp/cm/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.20)
project(attn_consumer C)
find_package(attn REQUIRED)
add_executable(app "$tmp/app.c")
target_link_libraries(app attn::attn)
CM
cmake -S "$tmp/cm" -B "$tmp/cm/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/cm/build" >/dev/null
fails=0
for app in "$tmp/app_shared" "$tmp/app_static" "$tmp/cm/build/app"; do
    out=$("$app")
    if [ "$out" = "FLASH_ATTN" ]; then echo "ok: $(basename "$app") -> $out"
    else echo "FAIL: $(basename "$app") printed '$out'"; fails=$((fails + 1)); fi
done
[ -f "$tmp/prefix/share/attn/models/llama-3.1-8b.json" ] || { echo "FAIL: presets not installed"; fails=$((fails + 1)); }
echo "$((4 - fails)) passed, $fails failed"
exit $((fails > 0))
