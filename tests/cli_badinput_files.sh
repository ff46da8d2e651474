#!/usr/bin/env bash
# No command deletes or truncates a file it did not create when it fails.
# The file-writing commands (today `attn simulate --html`; a new one adds its
# rows here) run into an existing file with a failing run: the bytes, the
# mode and the folder are as before (no temporary left behind). Then the
# kinds of path: a symbolic link (the file it names is replaced, the link
# stays), a FIFO made here (written in place, never unlinked; the
# character-device case, without touching the machine's /dev nodes), a
# folder (refused), "-" (stdout), and a successful run replacing a file
# whole with its mode kept.
set -u
ATTN=${ATTN_BIN:?}
unset ATTN_PLATFORM ATTN_BACKEND ATTN_PLUGIN_PATH ATTN_PLUGINS ATTN_CPU_MASK
export ATTN_LOG=warn
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
rows=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
d="$tmp/out"
mkdir -p "$d"
# a small run (one simulated machine, a 2-layer model, 2 steps, an event at step 1):
# fast under the sanitizers; --steps 1 puts the event outside the run, a failure
printf '{"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 256, "num_key_value_heads": 2}' >"$tmp/cfg.json"
printf '{"name": "tiny", "machines": [{"label": "h100-0", "machine": "h100"}],
 "deployments": [{"machine": "h100-0", "model": "%s"}],
 "traffic": {"rate": 1, "prompt_len": [8, 16], "output_len": [2, 4], "steps": 2},
 "events": [{"at_step": 1, "machine": "h100-0", "action": "stop"}]}' "$tmp/cfg.json" >"$tmp/tiny.json"
TINY="$tmp/tiny.json"
state() { (cd "$d" && find . -printf '%p %y %m %s\n' | sort && find . -type f -print0 | sort -z |
    xargs -0 -r md5sum); }

# row EXIT FRAGMENT FILE -- ARGS...: FILE (under $d) exists with known bytes;
# the command fails with EXIT and FRAGMENT on stderr and changes nothing in $d.
# The word OUT in ARGS is replaced by the file's path; STDOUT=closed closes
# stdout first.
row() {
    local want=$1 frag=$2 file=$3
    shift 4
    rows=$((rows + 1))
    rm -rf "${d:?}"/* "$d"/.[!.]* 2>/dev/null
    printf 'precious bytes\n' >"$d/$file"
    chmod 640 "$d/$file"
    local before args=()
    before=$(state)
    for a in "$@"; do args+=("${a//OUT/$d/$file}"); done
    if [ "${STDOUT:-}" = closed ]; then
        "$ATTN" "${args[@]}" >&- 2>"$tmp/err"
    else
        "$ATTN" "${args[@]}" >"$tmp/stdout" 2>"$tmp/err"
    fi
    local rc=$?
    [ "$rc" = "$want" ] || fail "attn $*: exit $rc, want $want ($(head -c 300 "$tmp/err"))"
    grep -qF -- "$frag" "$tmp/err" || fail "attn $*: stderr lacks '$frag': $(head -c 300 "$tmp/err")"
    [ "$(state)" = "$before" ] || fail "attn $*: the folder changed: $(diff <(echo "$before") <(state))"
}

# ---- every file-writing command, failing, into an existing file ---------------
row 2 "would fall outside the run" r.html -- simulate "$TINY" --steps 1 --html OUT
row 2 "would fall outside the run" r.html -- simulate "$TINY" --steps 1 --json --html OUT
row 2 "would fall outside the run" r.html -- simulate --steps 3 --html OUT
row 2 "unknown scenario 'no-such'" r.html -- simulate no-such --html OUT
row 2 "unknown option '--bogus'" r.html -- simulate "$TINY" --html OUT --bogus
row 2 "--html - and --json both want stdout" r.html -- simulate "$TINY" --html - --json
# the run succeeds but its report cannot reach stdout: the page is not published
STDOUT=closed row 1 "error writing the output" r.html -- simulate "$TINY" --html OUT
STDOUT=closed row 1 "error writing the output" r.html -- simulate "$TINY" --json --html OUT

# ---- a folder is refused ---------------------------------------------------------
rows=$((rows + 1))
mkdir -p "$d/adir"
"$ATTN" simulate "$TINY" --html "$d/adir" >/dev/null 2>"$tmp/err"
rc=$?
[ "$rc" = 1 ] || fail "--html FOLDER: exit $rc, want 1"
grep -qF "cannot write '$d/adir': is a folder" "$tmp/err" || fail "--html FOLDER: $(cat "$tmp/err")"
[ -d "$d/adir" ] || fail "--html FOLDER: the folder is gone"

# ---- success replaces the file whole, mode kept, nothing left beside it ----------
rows=$((rows + 1))
rm -rf "${d:?}"/*
printf 'old\n' >"$d/r.html"
chmod 640 "$d/r.html"
"$ATTN" simulate "$TINY" --html "$d/r.html" >"$tmp/stdout" 2>"$tmp/err" || fail "success: exit $?"
head -c 15 "$d/r.html" | grep -qF "<!DOCTYPE html>" || fail "success: no page written"
[ "$(stat -c %a "$d/r.html")" = 640 ] || fail "success: mode $(stat -c %a "$d/r.html"), want 640"
[ "$(ls -A "$d")" = r.html ] || fail "success: left beside it: $(ls -A "$d")"
grep -qF "HTML report written to $d/r.html" "$tmp/stdout" || fail "success: no report line"

# ---- a symbolic link: the file it names is replaced, the link stays -------------
rows=$((rows + 1))
rm -rf "${d:?}"/*
printf 'precious bytes\n' >"$d/target.html"
ln -s target.html "$d/link.html"
"$ATTN" simulate "$TINY" --steps 1 --html "$d/link.html" >/dev/null 2>&1
[ "$(cat "$d/target.html")" = "precious bytes" ] || fail "link, failing: target changed"
"$ATTN" simulate "$TINY" --html "$d/link.html" >/dev/null 2>&1 || fail "link: exit $?"
[ -L "$d/link.html" ] || fail "link: the link was replaced by a file"
head -c 15 "$d/target.html" | grep -qF "<!DOCTYPE html>" || fail "link: target not written"
[ "$(ls -A "$d" | tr '\n' ' ')" = "link.html target.html " ] || fail "link: left: $(ls -A "$d")"
rm -f "$d/target.html"
"$ATTN" simulate "$TINY" --html "$d/link.html" >/dev/null 2>"$tmp/err"
[ $? = 1 ] && grep -qF "dangling symbolic link" "$tmp/err" || fail "dangling link: $(cat "$tmp/err")"
[ ! -e "$d/target.html" ] || fail "dangling link: created its target"

# ---- a FIFO (the device case): written in place, never unlinked -----------------
for run in fail ok; do
    rows=$((rows + 1))
    rm -rf "${d:?}"/*
    mkfifo "$d/pipe"
    cat "$d/pipe" >"$tmp/got" &
    reader=$!
    if [ $run = fail ]; then
        "$ATTN" simulate "$TINY" --steps 1 --html "$d/pipe" >/dev/null 2>"$tmp/err"
        rc=$?
        [ "$rc" = 2 ] || fail "FIFO, failing run: exit $rc, want 2"
    else
        "$ATTN" simulate "$TINY" --html "$d/pipe" >/dev/null 2>"$tmp/err" || fail "FIFO: exit $?"
    fi
    wait $reader
    [ -p "$d/pipe" ] || fail "FIFO ($run): no longer a FIFO"
    [ "$(ls -A "$d")" = pipe ] || fail "FIFO ($run): left beside it: $(ls -A "$d")"
    if [ $run = fail ]; then
        [ ! -s "$tmp/got" ] || fail "FIFO, failing run: wrote $(wc -c <"$tmp/got") bytes"
    else
        head -c 15 "$tmp/got" | grep -qF "<!DOCTYPE html>" || fail "FIFO: no page through it"
    fi
done

# ---- "-": the page on stdout instead of the report --------------------------------
rows=$((rows + 1))
"$ATTN" simulate "$TINY" --html - >"$tmp/stdout" 2>"$tmp/err" || fail "--html -: exit $?"
head -c 15 "$tmp/stdout" | grep -qF "<!DOCTYPE html>" || fail "--html -: stdout is not the page"
[ ! -e ./- ] || fail "--html -: wrote a file named '-'"

echo "file-output rows: $rows, $fails failed"
exit $((fails > 0))
