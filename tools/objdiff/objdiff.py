#!/usr/bin/env python3
# objdiff.py BEFORE.o[,..] AFTER.o[,..] [FUNC,..]: per-function comparison of
# normalised disassembly (fdis.py), for kernel edits that must not change the
# instructions (code that cannot be run on the machine at hand).
import sys, difflib
sys.path.insert(0, __import__("os").path.dirname(__file__))
from fdis import funcs
a = funcs(sys.argv[1].split(',')); b = funcs(sys.argv[2].split(','))
only = sys.argv[3].split(',') if len(sys.argv) > 3 else None
ok = True
for k in sorted(set(a) | set(b)):
    if only and k not in only: continue
    st = 'same' if a.get(k) == b.get(k) else ('DIFF' if k in a and k in b else ('only-before' if k in a else 'only-after'))
    n = len(a.get(k, b.get(k)))
    print(f"{st:12s} {n:7d} {k}")
    if st == 'DIFF':
        ok = False
        print(''.join(l + '\n' for l in list(difflib.unified_diff(a[k], b[k], n=1, lineterm=''))[:12]))
print('ALL SAME' if ok else 'SOME DIFF')
