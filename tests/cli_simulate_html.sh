#!/usr/bin/env bash
# `attn simulate --html`: the page is self-contained (no script, nothing
# fetched), headless Chromium renders it to a screenshot that is not blank,
# and the rendered page's text names every machine and every backend that
# appears in the run (chosen or rejected). Chromium is a test dependency:
# scripts/setup-deps.sh installs the Debian `chromium` package; without it
# this test fails rather than passing silently.
set -euo pipefail
BIN=${ATTN_BIN:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

CHROME=""
for c in chromium chromium-browser google-chrome; do
    if command -v "$c" >/dev/null 2>&1; then CHROME=$(command -v "$c"); break; fi
done
[ -n "$CHROME" ] || fail "chromium is not installed; run scripts/setup-deps.sh (installs the \
Debian 'chromium' package) - this test needs a headless browser to render the --html page"

"$BIN" simulate --json --html "$tmp/run.html" >"$tmp/run.json" || fail "attn simulate exited $?"
[ -s "$tmp/run.html" ] || fail "no HTML written"
grep -qi "<script" "$tmp/run.html" && fail "the page has a script"
grep -Eqi "(src|href)=\"(https?:)?//" "$tmp/run.html" && fail "the page fetches something"
grep -q "<svg" "$tmp/run.html" || fail "the page has no inline SVG"

# Chromium wants a writable home and profile; keep them in the temp dir.
export HOME="$tmp/home"
mkdir -p "$HOME"
chrome() {
    timeout 120 "$CHROME" --headless --no-sandbox --disable-gpu --no-first-run \
        --user-data-dir="$tmp/profile" "$@" 2>>"$tmp/chrome.log"
}
chrome --screenshot="$tmp/out.png" --window-size=1400,2000 "file://$tmp/run.html" >/dev/null ||
    { cat "$tmp/chrome.log" >&2; fail "chromium --screenshot failed"; }
[ -s "$tmp/out.png" ] || { cat "$tmp/chrome.log" >&2; fail "no screenshot"; }
chrome --dump-dom "file://$tmp/run.html" >"$tmp/dom.html" ||
    { cat "$tmp/chrome.log" >&2; fail "chromium --dump-dom failed"; }

python3 - "$tmp/out.png" "$tmp/dom.html" "$tmp/run.json" <<'PY'
import html, json, re, struct, sys, zlib

png, dom_path, run_path = sys.argv[1:4]
data = open(png, "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat, ihdr = 8, [], None
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR":
        ihdr = struct.unpack(">IIBBBBB", body)
    elif kind == b"IDAT":
        idat.append(body)
    pos += 12 + n
w, h, depth, ctype, _, _, interlace = ihdr
assert depth == 8 and ctype in (2, 6) and interlace == 0, ihdr
bpp = 4 if ctype == 6 else 3
raw = zlib.decompress(b"".join(idat))
stride = w * bpp
prev = bytearray(stride)
colors, nonwhite, total = set(), 0, 0
for y in range(h):
    f = raw[y * (stride + 1)]
    row = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    if f == 1:
        for i in range(bpp, stride):
            row[i] = (row[i] + row[i - bpp]) & 255
    elif f == 2:
        row = bytearray((a + b) & 255 for a, b in zip(row, prev))
    elif f == 3:
        for i in range(stride):
            left = row[i - bpp] if i >= bpp else 0
            row[i] = (row[i] + ((left + prev[i]) >> 1)) & 255
    elif f == 4:
        for i in range(stride):
            a = row[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            pr = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
            row[i] = (row[i] + pr) & 255
    else:
        assert f == 0, f
    prev = row
    if y % 4 == 0:  # sample every 4th row, every 4th pixel
        for x in range(0, w, 4):
            px = bytes(row[x * bpp:x * bpp + 3])
            colors.add(px)
            total += 1
            if px != b"\xff\xff\xff":
                nonwhite += 1
frac = nonwhite / total
print(f"screenshot {w}x{h}: {len(colors)} distinct colours, {frac:.1%} not white")
assert len(colors) >= 16, "screenshot looks blank (too few colours)"
assert frac > 0.05, "screenshot looks blank (almost all white)"

dom = open(dom_path, encoding="utf-8", errors="replace").read()
text = html.unescape(re.sub(r"<[^>]+>", " ", dom))
doc = json.load(open(run_path))
names = set()
for st in doc["stages"]:
    for m in st.get("machines", []):
        names.add(m["label"])
        for g in m.get("groups", []):
            for c in g.get("candidates", []):
                names.add(c["name"])
                for r in c["reasons"]:
                    assert r in text, "reason not visible: " + r
            if g.get("selected"):
                names.add(g["selected"])
    for e in st.get("events", []):
        names.add(e["machine"])
for s in doc["summary"]:
    names.add(s["machine"])
assert {"h100-0", "a100-0", "mi300x-0", "FLASH_ATTN", "FLASHINFER", "ROCM_ATTN"} <= names, names
missing = sorted(n for n in names if n not in text)
assert not missing, "not in the rendered page: %s" % missing
assert "Selected backend AttentionBackendEnum.FLASHINFER is not valid for this configuration." in text
print("page names", len(names), "machines and backends")
PY
echo "cli_simulate_html: ok"
