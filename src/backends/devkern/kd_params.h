/* Constants the device kernels and their host runtimes agree on. Plain
 * #defines only: this file is read by the host C compiler (the OpenCL
 * runtime, later the CUDA one), by OpenCL C (embedded ahead of the kernel
 * sources) and by nvcc/hipcc (through attn_kdialect.h). Changing a value
 * changes every kernel's launch geometry and local-memory budget; the host
 * static-asserts the element codes against attn_elem. */
#ifndef ATTN_KD_PARAMS_H
#define ATTN_KD_PARAMS_H

/* Element codes: attn_elem's values (attn/types.h). */
#define KD_ELEM_F32  0
#define KD_ELEM_F16  1
#define KD_ELEM_BF16 2
#define KD_ELEM_E4M3 3
#define KD_ELEM_E5M2 4

/* Work-items of every work-group (one CUDA block): 1-D, fixed, so local
 * arrays are sized at compile time and OpenCL 1.2 devices that require
 * uniform work-groups need no remainder handling on the host. */
#define KD_WG 128
/* Attention: query rows (token, query head of one KV head) per work-group,
 * and the work-items that share one row (KD_ROWS * KD_LANES == KD_WG). */
#define KD_ROWS  16
#define KD_LANES 8
/* Largest head size (K and V) the attention kernels take; multiples of 8. */
#define KD_MAX_HEAD 256
/* Floats of the K/V tile in local memory: keys per tile = KD_TILE / head
 * size, at most KD_MAX_BN. Local memory: Q rows 16 KiB + tile 8 KiB +
 * scores 4 KiB + row state, under the 32 KiB OpenCL 1.2 guarantees. */
#define KD_TILE   2048
#define KD_MAX_BN 64
/* Accumulator floats per work-item (V columns lane, lane + KD_LANES, ...). */
#define KD_ACC (KD_MAX_HEAD / KD_LANES)
/* Work-items that load one key row of a tile. */
#define KD_TPK 32

/* MLA decode (kd_mla.cl): KD_ROWS rows (token, head) per work-group; keys
 * in tiles of KD_MLA_BN; the scores read q and the latent rows in chunks
 * of KD_MLA_DC columns (any kv_lora_rank + rope); the latent output of a
 * row is kv_lora_rank <= KD_MLA_MAX_R floats, KD_MLA_ACC per work-item.
 * KD_MLA_KC floats of local memory hold a key chunk (KD_MLA_BN rows of
 * KD_MLA_DC + 1: padded against bank conflicts) for the scores, then
 * KD_MLA_KC / kv_lora_rank whole latent rows for P.V. Local memory: 25.1
 * KiB. */
#define KD_MLA_BN    64
#define KD_MLA_DC    64
#define KD_MLA_MAX_R 512
#define KD_MLA_ACC   (KD_MLA_MAX_R / KD_LANES)
#define KD_MLA_KC    (KD_MLA_BN * (KD_MLA_DC + 1))
/* MLA prefill decompression (kd_mla.cl): a work-group makes KD_MLA_BN keys
 * x KD_MLA_DC output columns of one head, over kv_lora_rank in steps of
 * KD_MLA_TK; the decompressed keys and values land in blocks of
 * KD_MLA_BN tokens. */
#define KD_MLA_TK 16

/* MLA projections (kd_proj.cl): tokens per work-group, inner-dimension
 * chunk staged in local memory */
#define KD_PJ_T 16
#define KD_PJ_K 64

/* kd_paged_attention's flags argument. */
#define KD_F_CAUSAL 1
#define KD_F_SINKS  2
#define KD_F_ALIBI  4
#define KD_F_LSE    8

/* Slack of the causal bound (keys j <= pos + KD_CAUSAL_SLACK are visible).
 * Always 0; the conformance test builds a program with -DKD_CAUSAL_SLACK=1
 * to prove that it catches an off-by-one. */
#ifndef KD_CAUSAL_SLACK
#define KD_CAUSAL_SLACK 0
#endif

#endif
