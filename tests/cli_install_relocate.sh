#!/usr/bin/env bash
# An installed copy finds its own data: `cmake --install` into a temporary
# prefix, the prefix then moved elsewhere (so neither the configured install
# directory nor the first prefix exists), and `attn models`, `attn select
# --model` and `attn simulate` run from there. The data directories it
# reports must all lie in the moved prefix: the source tree is never
# consulted by an installed binary (before: data came from the source tree
# or the configured prefix, so an installed copy failed without
# ATTN_DATA_DIR).
set -u
if [ -n "${ATTN_SANITIZED:-}" ]; then
    echo "cli_install_relocate: skipped in the sanitizer build (checked in the normal build)"
    exit 77
fi
SRC=${ATTN_SOURCE_DIR:?}
B=${ATTN_BINARY_DIR:?}
unset ATTN_DATA_DIR ATTN_PLATFORM ATTN_BACKEND ATTN_PLUGIN_PATH ATTN_PLUGINS
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$B" --prefix "$tmp/first" >/dev/null || { echo "install failed"; exit 1; }
mv "$tmp/first" "$tmp/moved"
A="$tmp/moved/bin/attn"
data=$(cd "$tmp/moved/share/attn" && pwd -P)
cd "$tmp"

out=$("$A" models 2>&1) || fail "attn models: $out"
grep -qF "llama-3.1-8b" <<<"$out" || fail "attn models lists no presets: $out"
out=$("$A" models llama-3.1-8b 2>&1) || fail "attn models llama-3.1-8b: $out"
grep -qF "from $data/models/llama-3.1-8b.json" <<<"$out" || fail "preset not read from the moved prefix: $out"
out=$("$A" select --machine h100 --model llama-3.1-8b 2>&1) || fail "attn select --model: $out"
out=$("$A" simulate 2>&1) || fail "attn simulate: $out"
grep -qF "h100" <<<"$out" || fail "attn simulate printed no machines: $out"
out=$("$A" platforms --machine xeon-avx2 2>&1) || fail "machine spec from the data dir: $out"
# every data directory the installed copy searches is inside the moved prefix
err=$("$A" models no-such-model 2>&1)
dirs=$(sed -n 's/.*in the data directories (\([^)]*\)).*/\1/p' <<<"$err")
[ -n "$dirs" ] || fail "no data directories in: $err"
IFS=',' read -ra list <<<"$dirs"
for d in "${list[@]}"; do
    d=${d# }
    case "$d" in
    "$data") ;;
    *) fail "installed attn searches '$d' (outside the prefix)" ;;
    esac
done
grep -qF "$SRC" <<<"$err" && fail "installed attn refers to the source tree: $err"
echo "cli_install_relocate: $fails failed"
exit $((fails > 0))
