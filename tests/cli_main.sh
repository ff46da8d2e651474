#!/usr/bin/env bash
# `attn` itself: --version, -V and `version` print the version the build
# states (CMakeLists.txt's project()) for attn and the libattn it runs, --json
# too; `attn --help` lists every environment variable the sources read
# (each getenv'd "ATTN_..." literal, and ATTN_<SETTING> for each machine
# switch of attn/platform.h), and the README's Environment table lists the
# same names: one list, checked both ways.
set -u
ATTN=${ATTN_BIN:?}
SRC=${ATTN_SOURCE_DIR:?}
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

version=$(sed -n 's/^project(libattn VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")
[ -n "$version" ] || fail "no project(libattn VERSION ...) in CMakeLists.txt"
# the ABI versions the headers state
pabi=$(sed -n 's/^#define ATTN_PLUGIN_ABI_VERSION \([0-9]*\)u*.*/\1/p' "$SRC/include/attn/plugin.h")
babi=$(sed -n 's/^#define ATTN_BACKEND_ABI_VERSION \([0-9]*\)u*.*/\1/p' "$SRC/include/attn/backend.h")
[ -n "$pabi" ] && [ -n "$babi" ] || fail "no ABI version defines in attn/plugin.h / attn/backend.h"
want="attn $version (libattn $version; plugin ABI $pabi, backend ABI $babi)"
for how in --version -V version; do
    out=$("$ATTN" $how 2>"$tmp/err"); rc=$?
    [ $rc = 0 ] || fail "attn $how exited $rc: $(cat "$tmp/err")"
    [ "$out" = "$want" ] || fail "attn $how printed '$out', want '$want'"
done
for how in --version version; do
    "$ATTN" $how --json >"$tmp/v.json" || fail "attn $how --json exited $?"
    python3 - "$tmp/v.json" "$version" "$pabi" "$babi" <<'PY' || fail "attn $how --json content"
import json, sys
d, v, pabi, babi = json.load(open(sys.argv[1])), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
assert d == {"attn": v, "libattn": v, "libattn_number": int(v.split(".")[0]) * 10000
             + int(v.split(".")[1]) * 100 + int(v.split(".")[2]),
             "plugin_abi": pabi, "backend_abi": babi}, d
PY
done
"$ATTN" version --help >"$tmp/out" || fail "attn version --help exited $?"
grep -q "^usage: attn version \[--json\]" "$tmp/out" || fail "version --help: $(cat "$tmp/out")"
"$ATTN" version --bogus >/dev/null 2>&1; [ $? = 2 ] || fail "attn version --bogus is not a usage error"
"$ATTN" --help | grep -q "^  version " || fail "attn --help does not list 'version'"

# ---- the one list of environment variables ---------------------------------------------------
"$ATTN" --help >"$tmp/help" || fail "attn --help exited $?"
python3 - "$SRC" "$tmp/help" <<'PY' || fail "environment variables: --help, README and sources differ"
import os, re, sys
src, help_path = sys.argv[1:3]
read = set()
for top in ("src", "common", "sim", "tools", "python/src"):
    for d, _, files in os.walk(os.path.join(src, top)):
        for f in files:
            p = os.path.join(d, f)
            if not f.endswith((".c", ".h")) or p.endswith("tools/attn/main.c"):
                continue
            read |= set(re.findall(r'"(ATTN_[A-Z0-9_]+)"', open(p, errors="replace").read()))
table = open(os.path.join(src, "include/attn/platform.h")).read()
table = table[table.index("#define ATTN_SETTING_TABLE"):]
table = table[:table.index("typedef")]
settings = {"ATTN_" + t.upper() for t in re.findall(r'X\([A-Z0-9_]+, "([a-z0-9_]+)"', table)}
assert settings, "no machine switches found in attn/platform.h"
read |= settings
text = open(help_path).read()
env = text[text.index("\nEnvironment"):]
listed = set(re.findall(r"^  (ATTN_[A-Z0-9_]+)", env, re.M))
readme = open(os.path.join(src, "README.md")).read()
readme = readme[readme.index("\n## Environment\n"):]
readme = readme[:readme.index("\n## ", 1)]
rows = [l.split("|")[1] for l in readme.splitlines() if l.startswith("| `ATTN_")]
in_readme = set(re.findall(r"`(ATTN_[A-Z0-9_]+)`", "".join(rows)))
bad = False
for what, names in (("attn --help", listed), ("README.md's Environment table", in_readme)):
    for n in sorted(read - names):
        print("%s does not list %s, which the sources read" % (what, n)); bad = True
    for n in sorted(names - read):
        print("%s lists %s, which no source reads" % (what, n)); bad = True
print("environment: %d variables, listed in attn --help and README.md" % len(read))
sys.exit(1 if bad else 0)
PY

[ $fails = 0 ] && echo "cli_main: all passed"
exit $((fails > 0))
