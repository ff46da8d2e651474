#!/bin/bash
# Instruction counts (callgrind) of the same engine workload on two builds:
# the whole run, the CPU kernels' entry points (inclusive) and the K/V
# write, single-threaded so the counts are deterministic. Figures only: no
# pass/fail. AVX-512 is masked off (valgrind cannot run it); the AVX2
# variants run.
# usage: bench/ab/callgrind.sh A_ATTN B_ATTN [attn serve options...]
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ] || [ $# -lt 2 ]; then
  echo "usage: bench/ab/callgrind.sh A_ATTN B_ATTN [attn serve options...]"
  echo "Runs one 'attn serve' workload of each build under callgrind and prints"
  echo "instructions: total, CPU_ATTN / CPU_MLA / REFERENCE kernel entries"
  echo "(inclusive) and attn_kv_write / attn_mla_write_latent (inclusive)."
  case "${1:-}" in --help | -h) exit 0 ;; *) exit 2 ;; esac
fi
command -v valgrind >/dev/null || { echo "callgrind.sh: valgrind not installed"; exit 77; }
A=$1; B=$2; shift 2
[ $# -gt 0 ] || set -- --layers 2 --heads 32 --kv-heads 8 --head-size 128 --dtype bf16 \
    --steps 6 --rate 2 --prompt-len 64:192 --output-len 4:8 --num-blocks 256 \
    --layers-to-run all --quiet
out=$(mktemp -d)
for side in A B; do
  bin=${!side}
  ATTN_NUM_THREADS=1 ATTN_CPU_MASK=-avx512 valgrind --tool=callgrind \
    --callgrind-out-file="$out/$side.cg" "$bin" serve "$@" >"$out/$side.log" 2>&1 ||
    { echo "$side: attn serve failed: $(tail -3 "$out/$side.log")"; exit 1; }
done
for side in A B; do
  echo "== $side (${!side})"
  callgrind_annotate --inclusive=yes "$out/$side.cg" 2>/dev/null |
    grep -E 'PROGRAM TOTALS|:(cpu_forward|cpu_mla_mqa|cpu_mla_mha|ref_forward|attn_kv_write|attn_kv_write_at|attn_mla_write_latent|attn_mla_write_latent_at|attn_kernel_forward|attn_kernel_mla_forward) ' |
    sed 's/ *\[[^]]*\]$//'
done
rm -rf "$out"
