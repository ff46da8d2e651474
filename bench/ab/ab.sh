#!/bin/bash
# Same-run A/B of `attn bench`: baseline (A) and new (B) alternate, N rounds;
# prints the median ms per shape and B/A. usage: ab.sh A_BIN B_BIN [rounds] [extra attn bench args]
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ] || [ $# -lt 2 ]; then
  echo "usage: bench/ab/ab.sh A_ATTN B_ATTN [ROUNDS (default 3)] [attn bench options...]"
  echo "Runs 'attn bench --json' of two builds alternately, ROUNDS times, and prints"
  echo "per shape the median ms of each and B/A. Figures only: no pass/fail."
  case "${1:-}" in --help | -h) exit 0 ;; *) exit 2 ;; esac
fi
A=$1; B=$2; N=${3:-3}; shift $(( $# < 3 ? $# : 3 ))
out=$(mktemp -d)
for r in $(seq 1 $N); do
  "$A" bench --json "$@" > $out/a$r.json 2>/dev/null
  "$B" bench --json "$@" > $out/b$r.json 2>/dev/null
done
python3 - $out $N <<'PY'
import json,sys,statistics as st
d,n=sys.argv[1],int(sys.argv[2])
def load(p):
    rows={}
    for r in range(1,n+1):
        for x in json.load(open(f"{d}/{p}{r}.json"))["results"]:
            k=(x["phase"],x["batch"],x["context"],x["query_len"],x["kv_dtype"])
            rows.setdefault(k,[]).append(x["ms"])
    return rows
a,b=load("a"),load("b")
print(f"{'phase':8}{'batch':>6}{'ctx':>7}{'q':>6} {'kv':10}{'A ms':>10}{'B ms':>10}{'B/A':>7}")
for k in a:
    ma,mb=st.median(a[k]),st.median(b.get(k,[float('nan')]))
    print(f"{k[0]:8}{k[1]:>6}{k[2]:>7}{k[3]:>6} {k[4]:10}{ma:>10.3f}{mb:>10.3f}{mb/ma:>7.3f}")
PY
