#!/usr/bin/env python3
# Normalised per-function disassembly (objdump -d -r --no-show-raw-insn):
# addresses, jump/call offsets and local clone suffixes stripped; a relocation
# against read-only data is replaced by the 32 bytes it points at, so two
# objects compare equal when every function has the same instructions loading
# the same constants, whatever the layout of .rodata. Functions sorted by name.
import re, subprocess, sys

def sections(o):
    txt = subprocess.run(["objdump", "-s", o], capture_output=True, text=True, check=True).stdout
    secs, cur = {}, None
    for line in txt.splitlines():
        m = re.match(r"^Contents of section (\S+):", line)
        if m:
            cur = m.group(1); secs[cur] = bytearray(); continue
        m = re.match(r"^ ([0-9a-f]+) ((?:[0-9a-f]{2,8} ){1,4})", line)
        if m and cur is not None:
            off = int(m.group(1), 16)
            data = bytes.fromhex(m.group(2).replace(" ", ""))
            if len(secs[cur]) < off: secs[cur].extend(b"\0" * (off - len(secs[cur])))
            secs[cur][off:off + len(data)] = data
    return secs

def symtab(o):
    txt = subprocess.run(["objdump", "-t", o], capture_output=True, text=True, check=True).stdout
    syms = {}
    for line in txt.splitlines():
        m = re.match(r"^([0-9a-f]+) .{7} (\S+)\s+[0-9a-f]+ (\S+)$", line)
        if m: syms[m.group(3)] = (m.group(2), int(m.group(1), 16))
    return syms

def norm_name(s):
    return re.sub(r"\.(constprop|isra|part|cold)\.\d+", r".\1", s)

def funcs(objs):
    out = {}
    for o in objs:
        secs, syms = sections(o), symtab(o)
        txt = subprocess.run(["objdump", "-d", "-r", "--no-show-raw-insn", o], capture_output=True, text=True, check=True).stdout
        cur = None
        for line in txt.splitlines():
            m = re.match(r"^[0-9a-f]+ <(.+)>:$", line)
            if m:
                cur = norm_name(m.group(1)); out.setdefault(cur, []); continue
            if cur is None: continue
            m = re.match(r"^\s+[0-9a-f]+:\s+(R_X86_64_\S+)\s+(\S+)$", line)
            if m:
                kind, tgt = m.groups()
                mm = re.match(r"^(.*?)([-+]0x[0-9a-f]+)?$", tgt)
                sym, add = mm.group(1), int(mm.group(2) or "0", 16)
                sec, base = (sym, 0) if sym.startswith(".rodata") else syms.get(sym, (None, 0))
                if sec and sec.startswith(".rodata") and sec in secs:
                    p = base + add + 4
                    out[cur].append("RELOC %s data=%s" % (kind, secs[sec][p:p + 32].hex()))
                else:
                    out[cur].append("RELOC %s %s%s" % (kind, norm_name(sym), "" if sym.startswith(".") else mm.group(2) or ""))
                continue
            m = re.match(r"^\s+[0-9a-f]+:\s+(.*)$", line)
            if not m: continue
            ins = m.group(1)
            if re.match(r"^(cs |ds |data16 )*(nop|xchg %ax,%ax)", ins): continue  # alignment padding
            ins = re.sub(r"\b[0-9a-f]+ <([^>+]+)(\+0x[0-9a-f]+)?>", r"<\1>", ins)
            ins = norm_name(ins)
            ins = re.sub(r"-?0x[0-9a-f]+\(%rip\)", "X(%rip)", ins)
            ins = re.sub(r"\s+", " ", ins).strip()
            out[cur].append(ins)
    return out

PAT = re.compile(r"^(vcvtne\w*bf16\w*|vcvtneps2bf16|vcvtne2ps2bf16|vdpbf16ps|tdp\w+|tileloadd\w*|tilestored|tilezero|ldtilecfg|sttilecfg|tilerelease)\b")

if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "dump":
        f = funcs(sys.argv[2:])
        for k in sorted(f):
            print("== " + k)
            for i in f[k]: print("  " + i)
    elif mode == "grep":  # count BF16/AMX instructions per function
        f = funcs(sys.argv[2:])
        n = 0
        for k in sorted(f):
            hits = [i for i in f[k] if PAT.match(i)]
            if hits:
                n += len(hits); print(k, len(hits), sorted(set(h.split()[0] for h in hits)))
        print("BF16/AMX instructions:", n)
