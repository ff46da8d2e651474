#!/usr/bin/env python3
"""What this machine reports, for the shell tests: they derive what they
expect from it by parsing JSON, never by grepping it (the JSON spans lines,
and a CPU may have more or fewer features than the one a test was written
on).

    machine.py features [--mask M]     usable CPU features, one line
    machine.py attn-variant [--mask M] the CPU_ATTN variant that must run
    machine.py mla-variant [--mask M]  the CPU_MLA bf16 decode kernel that must run
    machine.py get FILE KEY...         a value from a JSON file ('-': stdin):
                                       keys and list indexes in turn; strings
                                       print bare, the rest as JSON

--mask runs `attn platforms --json` under ATTN_CPU_MASK=M ('' unmasks).
$ATTN_BIN names attn. The variant tables restate, as the test's own
oracle, the features each kernel's usable() checks; a variant runs when
all of them are usable, the first such one in order.
"""
import json
import os
import subprocess
import sys

AVX2 = {"avx", "avx2", "fma", "f16c"}
AVX512 = AVX2 | {"avx512f", "avx512bw", "avx512vl", "avx512dq"}
# src/backends/cpu/cpu_variants.c's order, best first
CPU_ATTN_VARIANTS = [
    ("amx-bf16", AVX512 | {"avx512_bf16", "amx_tile", "amx_bf16"}),
    ("avx512-bf16", AVX512 | {"avx512_bf16"}),
    ("avx512", AVX512),
    ("avx2", AVX2),
    ("portable", set()),
]
# src/backends/mla/cpu_mla.c's order; amx decodes bf16 (and fp8) caches
MLA_VARIANTS = [
    ("amx", AVX512 | {"avx512_bf16", "amx_tile", "amx_bf16"}),
    ("avx512", AVX512),
    ("avx2", AVX2),
    ("portable", set()),
]


def platforms(mask=None):
    env = dict(os.environ)
    env.pop("ATTN_PLATFORM", None)
    if mask is None:
        env.pop("ATTN_CPU_MASK", None)
    else:
        env["ATTN_CPU_MASK"] = mask
    out = subprocess.run([os.environ["ATTN_BIN"], "platforms", "--json"], env=env,
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def usable(mask=None):
    return set(platforms(mask)["local"]["cpu"]["features"]["usable"])


def pick(table, features):
    return next(name for name, needs in table if needs <= features)


def get(path, keys):
    v = json.load(sys.stdin if path == "-" else open(path))
    for k in keys:
        v = v[int(k)] if isinstance(v, list) else v[k]
    return v if isinstance(v, str) else json.dumps(v)


def main(argv):
    if len(argv) >= 2 and argv[0] == "get":
        print(get(argv[1], argv[2:]))
        return 0
    mask = None
    if len(argv) == 3 and argv[1] == "--mask":
        mask = argv[2]
    elif len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    feats = usable(mask)
    if argv[0] == "features":
        print(" ".join(sorted(feats)))
    elif argv[0] == "attn-variant":
        print(pick(CPU_ATTN_VARIANTS, feats))
    elif argv[0] == "mla-variant":
        print(pick(MLA_VARIANTS, feats))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
