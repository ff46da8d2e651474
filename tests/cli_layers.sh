#!/usr/bin/env bash
# The tools sit on libattn.so's public API (issue 14): no file under tools/,
# sim/ or src/cp/mpi/ (the MPI communicator library) is compiled with the
# src/ include path, so none can include a libattn internal header (the
# compile commands of this build are the proof: a wrong include would not
# build); the attn binary needs libattn.so and carries none of its code;
# libattn.so exports only public attn_* symbols, none of the simulation
# library's (scenarios, their HTML and text views).
set -u
SRC=${ATTN_SOURCE_DIR:?}
B=${ATTN_BINARY_DIR:?}
ATTN=${ATTN_BIN:?}
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
for tool in python3 readelf nm; do
    command -v "$tool" >/dev/null || { echo "cli_layers: $tool not installed"; exit 77; }
done
cc_json="$B/compile_commands.json"
[ -f "$cc_json" ] || { echo "cli_layers: no $cc_json (CMAKE_EXPORT_COMPILE_COMMANDS)"; exit 77; }
lib=$(ls "$B"/libattn.so.[0-9]* 2>/dev/null | head -1)
[ -n "$lib" ] || { echo "cli_layers: no libattn.so in $B"; exit 77; }

# 1. compile commands of the layers above libattn: no -I <src>/src.
out=$(python3 - "$cc_json" "$SRC" <<'PY'
import json, os, shlex, sys
cmds, src = json.load(open(sys.argv[1])), os.path.realpath(sys.argv[2])
internal = os.path.join(src, "src")
layers = [os.path.join(src, d) + os.sep for d in ("tools", "sim", os.path.join("src", "cp", "mpi"))]
seen = 0
for c in cmds:
    f = os.path.realpath(os.path.join(c["directory"], c["file"]))
    if not any(f.startswith(l) for l in layers):
        continue
    seen += 1
    args = c.get("arguments") or shlex.split(c["command"])
    incs = []
    for i, a in enumerate(args):
        if a in ("-I", "-isystem", "-iquote") and i + 1 < len(args):
            incs.append(args[i + 1])
        elif a.startswith("-I") and len(a) > 2:
            incs.append(a[2:])
    for d in incs:
        if os.path.realpath(os.path.join(c["directory"], d)) == internal:
            print("BAD %s is compiled with -I %s" % (os.path.relpath(f, src), d))
print("SEEN %d" % seen)
PY
)
grep '^BAD' <<<"$out" | sed 's/^BAD /FAIL: /' >&2
bad=$(grep -c '^BAD' <<<"$out")
fails=$((fails + bad))
seen=$(sed -n 's/^SEEN //p' <<<"$out")
[ "${seen:-0}" -ge 10 ] || fail "only ${seen:-0} tools/sim compile commands found: $out"
# the same checked the other way: no source under tools/ or sim/ names a
# header that only src/ has
for f in "$SRC"/tools/attn/*.[ch] "$SRC"/sim/*/*.[ch]; do
    while read -r inc; do
        [ -e "$SRC/src/$inc" ] && [ ! -e "$SRC/common/$inc" ] && [ ! -e "$SRC/include/$inc" ] &&
            fail "${f#"$SRC"/} includes the libattn internal header $inc"
    done < <(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f")
done

# 2. the attn binary links libattn.so and defines none of its functions.
readelf -d "$ATTN" | grep -q 'NEEDED.*\[libattn\.so' ||
    fail "attn does not need libattn.so: $(readelf -d "$ATTN" | grep NEEDED)"
for sym in attn_platform_open attn_select attn_cpu_measure_machine attn_probe_gpu; do
    nm -D "$lib" | grep -q " T $sym\$" || fail "libattn.so does not export $sym"
    nm "$ATTN" 2>/dev/null | grep -q " [Tt] $sym\$" && fail "attn carries its own copy of $sym"
done

# 3. libattn.so exports public attn_* symbols only: no attn__ internals, no
# scenario / HTML / text-view code of the simulation library.
exports=$(nm -D --defined-only "$lib" | awk '{print $3}')
[ "$(wc -l <<<"$exports")" -ge 100 ] || fail "libattn.so exports only $(wc -l <<<"$exports") symbols"
while read -r s; do
    case $s in
    attn__* | *scenario* | *scn* | *html* | *srv_*) fail "libattn.so exports $s" ;;
    attn_*) ;;
    _init | _fini | '') ;;
    *) fail "libattn.so exports the non-attn symbol $s" ;;
    esac
done <<<"$exports"

[ "$fails" -eq 0 ] || { echo "cli_layers: $fails failure(s)"; exit 1; }
echo "cli_layers: ok ($seen compile commands checked, $(wc -l <<<"$exports") exports)"
