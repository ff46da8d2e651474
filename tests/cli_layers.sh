#!/usr/bin/env bash
# The tools sit on libattn.so's public API (issue 14): no file under tools/,
# sim/ or src/cp/mpi/ (the MPI communicator library) is compiled with the
# src/ include path, so none can include a libattn internal header (the
# compile commands of this build are the proof: a wrong include would not
# build); the attn binary needs libattn.so and carries none of its code;
# libattn.so exports only public attn_* symbols, none of the simulation
# library's (scenarios, their HTML and text views). Inside src/ each layer
# (cmake/layers.cmake) sees only its own folders and those below it: probe
# compiles with a layer's real flags show a wrong include fails to build;
# and (nm over each layer's objects) it references only symbols defined by
# itself or a layer below it: probe objects show an upward or sideways
# reference, public API calls included, fails the check.
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

# 2. inside src/ (cmake/layers.cmake): every libattn file is compiled with
# its layer's own include root (<build>/layers/<layer>: links to the
# folders of the layer and the layers below it) and never with the plain
# src/ root; no include climbs out of a folder with "../". The probes
# compile one #include with a layer's real flags: a header of a layer above
# or beside it must not be found, one of its own or a lower layer must.
# Then the link-level edges: the attn_ symbols each layer's objects (those
# of its compile commands, generated sources included) reference, against
# the layer that defines each; probe objects referencing one symbol each
# show the check refuses an upward, a sideways and a dangling reference.
grep -rn '#[[:space:]]*include[[:space:]]*"[^"]*\.\./' "$SRC/src" >&2 &&
    fail 'an #include under src/ climbs out of its folder with ../'
# one probe folder per build tree (ctest runs this test once per tree)
probe_dir="$B/cli_layers_probes"
rm -rf "$probe_dir" && mkdir -p "$probe_dir"
trap 'rm -rf "$probe_dir"' EXIT
out=$(python3 - "$cc_json" "$SRC" "$B" "$probe_dir" <<'PY'
import json, os, re, shlex, subprocess, sys
cmds, src = json.load(open(sys.argv[1])), os.path.realpath(sys.argv[2])
build, probe_dir = os.path.realpath(sys.argv[3]), sys.argv[4]
internal = os.path.join(src, "src")
layers_dir = os.path.join(build, "layers") + os.sep
flags = {}  # layer -> (directory, arguments) of one of its files
objs = {}  # layer -> its object files; "common" (common/util, below every layer)
n = 0

def output(c, args):
    o = next((args[i + 1] for i, a in enumerate(args[:-1]) if a == "-o"), None)
    return os.path.join(c["directory"], o) if o else None

def layer_roots(c, args):
    """The layer include roots of a compile command; also names a plain
    -I <src>/src."""
    roots = []
    for i, a in enumerate(args):
        d = args[i + 1] if a == "-I" and i + 1 < len(args) else a[2:] if a.startswith("-I") else None
        if d is None:
            continue
        d = os.path.realpath(os.path.join(c["directory"], d))
        if d == internal:
            roots.append(None)
        elif (d + os.sep).startswith(layers_dir):
            roots.append(os.path.basename(d))
    return roots

for c in cmds:
    f = os.path.realpath(os.path.join(c["directory"], c["file"]))
    args = c.get("arguments") or shlex.split(c["command"])
    roots = layer_roots(c, args)
    if f.startswith(os.path.join(src, "common") + os.sep):
        objs.setdefault("common", []).append(output(c, args))
        continue
    if not f.startswith(internal + os.sep) or f.startswith(os.path.join(internal, "cp", "mpi") + os.sep):
        # a source the build generates into a layer (the embedded kernels)
        if f.startswith(build + os.sep) and len(roots) == 1 and roots[0]:
            objs.setdefault(roots[0], []).append(output(c, args))
        continue
    n += 1
    if None in roots:
        print("BAD %s is compiled with the plain src/ root -I %s" % (os.path.relpath(f, src), internal))
        roots = [r for r in roots if r]
    if len(roots) != 1:
        print("BAD %s has %d layer include roots, not one" % (os.path.relpath(f, src), len(roots)))
        continue
    flags.setdefault(roots[0], (c["directory"], args))
    objs.setdefault(roots[0], []).append(output(c, args))
print("LAYERS %d FILES %d" % (len(flags), n))

def compile_probe(layer, name, text, obj):
    """Compiles text with the layer's real flags (to an object when obj):
    (0, object path) when it compiles, else the compiler's first error line."""
    directory, args = flags[layer]
    cmd, skip = [], False
    for i, a in enumerate(args):
        if skip:
            skip = False
        elif a in ("-o", "-c", "-MF", "-MT", "-MQ"):
            skip = True
        elif a in ("-MD", "-MMD") or (i > 0 and a.endswith(".c")):
            pass
        else:
            cmd.append(a)
    path = os.path.join(probe_dir, "%s.c" % name)
    with open(path, "w") as fh:
        fh.write(text)
    out = path[:-2] + ".o"
    tail = ["-c", "-o", out, path] if obj else ["-fsyntax-only", path]
    r = subprocess.run(cmd + tail, cwd=directory, capture_output=True, text=True)
    if r.returncode == 0:
        return 0, out
    return next((l for l in r.stderr.splitlines() if "error" in l), r.stderr.strip() or "failed"), None

def probe(layer, header):
    """0 when '#include "header"' compiles with the layer's flags, else the
    compiler's first error line."""
    text = '#include "%s"\nint attn__probe(void);\nint attn__probe(void) { return 0; }\n' % header
    return compile_probe(layer, "probe_%s" % layer, text, False)[0]

# (layer, header, allowed): the arrows the layers forbid, the issue's
# platform -> select first, and what each layer does include.
cases = [
    ("platform", "select/selection.h", False),
    ("platform", "registry/registry_impl.h", False),
    ("platform", "platform/platform_impl.h", True),
    ("platform", "util/error.h", True),
    ("catalog", "select/selection.h", False),
    ("catalog", "registry/registry_impl.h", False),
    ("catalog", "backends/cpu/cpu_attn.h", False),
    ("catalog", "registry/catalog_table.h", False),
    ("catalog", "metadata/builders.h", True),
    ("catalog", "metadata/mla_builder.h", True),
    ("catalog", "platform/platform_impl.h", True),
    ("registry", "select/selection.h", False),
    ("registry", "plugin/plugin_impl.h", False),
    ("registry", "backends/cpu/cpu_attn.h", True),
    ("registry", "backends/opencl/opencl.h", True),
    ("registry", "backends/catalog/catalog.h", True),
    ("plugin", "select/selection.h", False),
    ("plugin", "registry/registry_impl.h", True),
    ("metadata", "backends/mla/mla_internal.h", False),
    ("metadata", "engine/engine_impl.h", False),
    ("metadata", "platform/platform_impl.h", False),
    ("metadata", "backends/catalog/catalog.h", False),
    ("metadata", "metadata/builders.h", True),
    ("device", "engine/engine_impl.h", False),
    ("device", "backends/reference/reference.h", False),
    ("device", "util/numeric.h", True),
    ("kvcache", "metadata/builders.h", False),
    ("kvcache", "selftest/selftest.h", False),
    ("kvcache", "backends/catalog/catalog.h", False),
    ("kvcache", "util/numeric.h", True),
    ("kvcache", "platform/platform_impl.h", True),
    ("kvcache", "device/device_impl.h", True),
    ("kernels", "selftest/selftest.h", False),
    ("kernels", "select/selection.h", False),
    ("kernels", "registry/registry_impl.h", False),
    ("kernels", "registry/catalog_table.h", False),
    ("kernels", "engine/engine_impl.h", False),
    ("kernels", "backends/mla/mla_internal.h", True),
    ("kernels", "backends/reference/reference.h", True),
    ("kernels", "metadata/mla_builder.h", True),
    ("selftest", "select/selection.h", False),
    ("selftest", "registry/catalog_table.h", False),
    ("opencl", "registry/registry_impl.h", False),
    ("opencl", "selftest/selftest.h", False),
    ("selftest", "backends/reference/ref_mla.h", True),
    ("selftest", "device/device_impl.h", True),
    ("cp", "engine/engine_impl.h", False),
    ("cp", "select/selection.h", False),
    ("cp", "selftest/selftest.h", True),
    ("kernels", "device/device_impl.h", True),
    ("select", "engine/engine_impl.h", False),
    ("select", "plugin/plugin_impl.h", True),
    ("select", "selftest/selftest.h", True),
    ("select", "registry/registry_impl.h", True),
    ("engine", "select/selection.h", True),
    ("engine", "model/model_impl.h", True),
    ("engine", "metadata/builders.h", True),
]
for layer, header, allowed in cases:
    if layer not in flags:
        print("BAD no compile command of layer %s" % layer)
        continue
    err = probe(layer, header)
    if allowed and err:
        print("BAD layer %s cannot include %s: %s" % (layer, header, err))
    elif not allowed and not err:
        print("BAD layer %s compiles #include \"%s\"" % (layer, header))
    elif not allowed and "No such file" not in err:
        print("BAD layer %s: #include \"%s\" fails for another reason: %s" % (layer, header, err))
    elif not allowed:
        print("REFUSED %s -> %s: %s" % (layer, header, err))
print("PROBES %d" % len(cases))

# The symbols: every attn_* / attn__* symbol a layer's objects leave
# undefined must be defined by the layer itself, a layer below it (the
# closure of _DEPS) or common/. Public API functions are no exception: a
# call of one a higher layer defines is an upward edge at link level like
# any other (docs/design/layers.md). Names the symbol, the referencing
# object and the defining layer.
cm = open(os.path.join(src, "cmake", "layers.cmake")).read()
deps = {m.group(1): m.group(2).split() for m in
        re.finditer(r"set\(ATTN_LAYER_(\w+)_DEPS([^)]*)\)", cm)}

def below(layer):
    seen, pending = set(), [layer]
    while pending:
        l = pending.pop()
        if l not in seen:
            seen.add(l)
            pending += deps.get(l, [])
    return seen | {"common"}

def scan(layer_of):
    """(definitions {symbol: [(layer, object)]}, references [(layer, object,
    symbol)]) of the attn_ symbols of the objects in layer_of. A symbol may
    have several definitions: a module beside libattn (libattn_cuda.so, its
    own root "cuda") compiles files of a lower layer again into itself."""
    files = sorted(layer_of)
    r = subprocess.run(["nm", "-A", "-P", "-g"] + files, capture_output=True, text=True)
    if r.returncode != 0:
        print("BAD nm failed: %s" % r.stderr.strip()[:300])
    defs, refs = {}, []
    for line in r.stdout.splitlines():
        path, _, rest = line.partition(": ")
        f = rest.split()
        if len(f) < 2 or not f[0].startswith("attn_") or path not in layer_of:
            continue
        if f[1] in "Uvw":
            refs.append((layer_of[path], path, f[0]))
        else:
            defs.setdefault(f[0], []).append((layer_of[path], path))
    return defs, refs

# common/ is no layer: every layer may use it, and it is also linked into
# the tools (attn_common), where libattn.so supplies what it calls of
# libattn: the public error setter alone, whose object uses nothing of
# common/ (so no cycle, checked below).
common_uses = {"attn_set_error": "util"}

def wrong(refs, defs):
    """The references that point up, sideways or nowhere:
    [(layer, object, symbol, defining layer or None, what)]. A definition
    in the layer or below it satisfies a reference, whatever else defines
    the symbol."""
    out = []
    for layer, path, sym in refs:
        ds = defs.get(sym, [])
        if layer == "common" and common_uses.get(sym) in [l for l, _ in ds]:
            continue
        if not ds:
            out.append((layer, path, sym, None, "no libattn object defines it"))
        elif not any(l in below(layer) for l, _ in ds):
            d = ds[0]
            way = "upward" if layer in below(d[0]) else "sideways"
            out.append((layer, path, sym, d[0], "%s: defined in layer %s by %s" %
                        (way, d[0], os.path.relpath(d[1], build))))
    return out

layer_of = {o: l for l, os_ in objs.items() for o in os_ if o}
absent = [o for o in layer_of if not os.path.exists(o)]
for o in absent[:5]:
    print("BAD object %s is not built" % os.path.relpath(o, build))
defs, refs = scan({o: l for o, l in layer_of.items() if o not in absent})
for layer, path, sym, _, what in wrong(refs, defs):
    print("BAD layer %s: %s references %s (%s)" % (layer, os.path.relpath(path, build), sym, what))
for sym in common_uses:
    where = [o for _, o in defs.get(sym, [])]
    for layer, path, used in refs:
        if path in where and "common" in [l for l, _ in defs.get(used, [])]:
            print("BAD %s (%s, which common/ calls) references common/'s %s" %
                  (os.path.relpath(path, build), sym, used))

# Probe objects compiled with a layer's real flags, each referencing one
# symbol: (layer, symbol, the defining layer the check must name, or None
# when the reference is allowed; "" when nothing defines it).
sym_cases = [
    ("platform", "attn__platform_ops_for", "select"),  # the old platform -> select edge
    ("util", "attn_select", "select"),                 # public API, upward
    ("metadata", "attn_block_pool_alloc", "kvcache"),  # public API, sideways
    ("kvcache", "attn__model_from_hf", "model"),       # sideways
    ("catalog", "attn__backend_cpu_attn", "kernels"),  # the old catalog -> kernels edge
    ("util", "attn__cli_layers_no_such_symbol", ""),
    ("registry", "attn__backend_cpu_attn", None),
    ("catalog", "attn__builder_flash_attn", None),
    ("engine", "attn__device_range", None),
    ("kernels", "attn__jw_key", None),                 # common/
]
for i, (layer, sym, want) in enumerate(sym_cases):
    text = "int %s(void);\nint attn__probe_sym(void);\nint attn__probe_sym(void) { return %s(); }\n"
    err, obj = compile_probe(layer, "sym%d_%s" % (i, layer), text % (sym, sym), True)
    if err:
        print("BAD symbol probe %s -> %s does not compile: %s" % (layer, sym, err))
        continue
    got = wrong(scan({obj: layer})[1], defs)
    hit = [w for w in got if w[2] == sym]
    if want is None and got:
        print("BAD symbol probe: layer %s may reference %s, but the check says %s" %
              (layer, sym, got[0][4]))
    elif want is not None and (len(got) != 1 or not hit or (hit[0][3] or "") != want):
        print("BAD symbol probe: layer %s -> %s should fail naming layer %r: %s" %
              (layer, sym, want, got))
    elif want is not None:
        print("REFUSED symbol %s -> %s: %s" % (layer, sym, hit[0][4]))
print("SYMBOLS %d %d %d" % (len(refs), len(layer_of), len(sym_cases)))
PY
)
grep '^BAD' <<<"$out" | sed 's/^BAD /FAIL: /' >&2
fails=$((fails + $(grep -c '^BAD' <<<"$out")))
grep '^REFUSED' <<<"$out" | grep -v '^REFUSED symbol' | head -2
grep '^REFUSED symbol' <<<"$out" | head -2
layers=$(sed -n 's/^LAYERS \([0-9]*\).*/\1/p' <<<"$out")
lib_files=$(sed -n 's/^LAYERS [0-9]* FILES //p' <<<"$out")
[ "${layers:-0}" -ge 14 ] || fail "only ${layers:-0} layers found in the compile commands: $out"
[ "${lib_files:-0}" -ge 100 ] || fail "only ${lib_files:-0} libattn compile commands found"
grep -q '^PROBES' <<<"$out" || fail "the include probes did not run: $out"
read -r sym_refs sym_objs sym_probes < <(sed -n 's/^SYMBOLS //p' <<<"$out")
[ "${sym_refs:-0}" -ge 500 ] && [ "${sym_objs:-0}" -ge 100 ] ||
    fail "the symbol check saw ${sym_refs:-0} references in ${sym_objs:-0} objects"

# 3. the attn binary links libattn.so and defines none of its functions.
readelf -d "$ATTN" | grep -q 'NEEDED.*\[libattn\.so' ||
    fail "attn does not need libattn.so: $(readelf -d "$ATTN" | grep NEEDED)"
for sym in attn_platform_open attn_select attn_cpu_measure_machine attn_probe_gpu; do
    nm -D "$lib" | grep -q " T $sym\$" || fail "libattn.so does not export $sym"
    nm "$ATTN" 2>/dev/null | grep -q " [Tt] $sym\$" && fail "attn carries its own copy of $sym"
done

# 4. libattn.so exports public attn_* symbols only: no attn__ internals, no
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

# 5. docs/design.md's table of the layers inside src/ says what
# cmake/layers.cmake says: the same layers, in the same order, each with the
# same layers directly below it.
doc_diff=$(python3 - "$SRC/cmake/layers.cmake" "$SRC/docs/design.md" <<'PY'
import re, sys
cm, doc = open(sys.argv[1]).read(), open(sys.argv[2]).read()
order = re.search(r"set\(ATTN_LAYERS([^)]*)\)", cm).group(1).split()
deps = {m.group(1): m.group(2).split() for m in
        re.finditer(r"set\(ATTN_LAYER_(\w+)_DEPS([^)]*)\)", cm)}
rows = re.findall(r"^\| `attn_(\w+)` +\|[^|]*\| *([^|]*?) *\|", doc, re.M)
want = [(l, sorted(deps.get(l, []))) for l in order]
got = [(l, sorted([] if b == "(none)" else b.replace(",", " ").split())) for l, b in rows]
if got != want:
    print("cmake: %s\ndocs:  %s" % (want, got))
PY
)
[ -z "$doc_diff" ] || fail "docs/design.md's layer table differs from cmake/layers.cmake:
$doc_diff"

[ "$fails" -eq 0 ] || { echo "cli_layers: $fails failure(s)"; exit 1; }
echo "cli_layers: ok ($seen tools/sim compile commands checked, $lib_files libattn files in $layers layers, $(sed -n 's/^PROBES //p' <<<"$out") include probes, $sym_refs symbol references of $sym_objs objects, $sym_probes symbol probes, $(wc -l <<<"$exports") exports)"
