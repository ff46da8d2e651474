/* CPU_MLA and CPU_MLA_SPARSE: MLA on the CPU with real kernels.
 *
 * forward_mqa (decode): the work is cut into pieces (request, row group,
 * key range) - once per step by CPU_MLA's builder (cpu_mla_builder.c) when
 * it knew the head count, else here -
 * and run on the persistent thread pool; a row group is up to
 * ATTN__MLA_MAX_ROWS (token, head) rows, so each cached latent row is loaded
 * once per group for all of its heads. Long contexts are split over key
 * ranges whose partial results (unnormalised accumulator, running max and
 * sum, base 2) are merged through their LSE afterwards.
 * forward_mha (prefill): one item per (request, head): the latent rows are
 * decompressed into that head's keys and values chunk by chunk and the
 * request's queries attend causally.
 * CPU_MLA_SPARSE runs forward_mqa for every token over its top-k positions.
 *
 * Kernels come from a variant chosen once by CPU features (AMX-BF16,
 * AVX-512, AVX2, portable; ATTN_CPU_MASK hides features to force
 * fallbacks). Scratch is one process-wide workspace that grows when a call
 * needs more than any before it, so calls in steady state allocate nothing;
 * a mutex serialises calls (the pool serialises them anyway). A kernel must
 * pass its self-test against REFERENCE_MLA before the selector may choose
 * it. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/catalog/catalog.h"
#include "attn/cpu.h"
#include "backends/mla/mla_internal.h"
#include "backends/reference/ref_mla.h"
#include "backends/reference/reference.h"
#include "util/error.h"
#include "util/numeric.h"
#include "util/threadpool.h"

/* ---- variant choice ------------------------------------------------------------ */

static const attn__mla_kern *const attn__mla_all[] = {
#if defined(__x86_64__)
    &attn__mla_kern_amx,
    &attn__mla_kern_avx512,
    &attn__mla_kern_avx2,
#endif
    &attn__mla_kern_portable,
};
#define ATTN__MLA_NKERN ((int)(sizeof attn__mla_all / sizeof attn__mla_all[0]))

static const attn__mla_kern *_Atomic attn__mla_forced;

void attn__mla_force_variant(const attn__mla_kern *k)
{
    attn__mla_forced = k;
}

const attn__mla_kern *attn__mla_variant_at(int i)
{
    return i >= 0 && i < ATTN__MLA_NKERN ? attn__mla_all[i] : NULL;
}

int attn__mla_variants(const attn__mla_kern **out, int max)
{
    int n = 0;
    for (int i = 0; i < ATTN__MLA_NKERN; i++)
        if (attn__mla_all[i]->usable() && n < max) out[n++] = attn__mla_all[i];
    return n;
}

const attn__mla_kern *attn__mla_decode_kern(attn_elem q, attn_elem kv, int R, int D)
{
    const attn__mla_kern *f = attn__mla_forced;
    if (f) return f->decode_ok(q, kv, R, D) ? f : &attn__mla_kern_portable;
    for (int i = 0; i < ATTN__MLA_NKERN; i++)
        if (attn__mla_all[i]->usable() && attn__mla_all[i]->decode_ok(q, kv, R, D))
            return attn__mla_all[i];
    return &attn__mla_kern_portable;
}

const attn__mla_kern *attn__mla_prefill_kern(void)
{
    const attn__mla_kern *f = attn__mla_forced;
    if (f && f->prefill) return f;
    for (int i = 0; i < ATTN__MLA_NKERN; i++)
        if (attn__mla_all[i]->usable() && attn__mla_all[i]->prefill) return attn__mla_all[i];
    return &attn__mla_kern_portable;
}

/* ---- workspace ------------------------------------------------------------------ */

static pthread_mutex_t attn__mla_ws_mu = PTHREAD_MUTEX_INITIALIZER;
static void *attn__mla_ws_mem;
static size_t attn__mla_ws_cap;

/* Called with the mutex held. */
static attn_status attn__mla_ws_reserve(size_t need, void **mem)
{
    if (need > attn__mla_ws_cap) {
        size_t cap = need + need / 4;
        cap = (cap + 4095) & ~(size_t)4095;
        void *p = aligned_alloc(4096, cap);
        if (!p)
            return attn__fail(ATTN_OUT_OF_MEMORY, "CPU_MLA: no memory for %zu bytes of scratch",
                              cap);
        free(attn__mla_ws_mem);
        attn__mla_ws_mem = p;
        attn__mla_ws_cap = cap;
    }
    *mem = attn__mla_ws_mem;
    return ATTN_OK;
}

attn_status attn__mla_ws_acquire(size_t need, void **mem)
{
    pthread_mutex_lock(&attn__mla_ws_mu);
    attn_status st = attn__mla_ws_reserve(need, mem);
    if (st != ATTN_OK) pthread_mutex_unlock(&attn__mla_ws_mu);
    return st;
}

void attn__mla_ws_release(void)
{
    pthread_mutex_unlock(&attn__mla_ws_mu);
}

/* ---- projections (W_UK absorption, W_UV up-projection) ----------------------------- */

#define ATTN__PROJ_TOK 128

typedef struct {
    const attn__mla_kern *k;
    int T, Kin, Nout;
    const void *in, *w;
    void *out;
    size_t in_tok, in_head, out_tok, out_head, esz;
    attn_elem e;
    char *thread_ws;
    size_t thread_ws_size;
} attn__proj_job;

/* One head: W[h] converted once, then the tokens in chunks through the GEMM. */
static void attn__proj_heads(void *ctx, int64_t begin, int64_t end, int tid)
{
    const attn__proj_job *j = ctx;
    void (*load)(const void *, attn_elem, int, float *) =
        j->k->load_row ? j->k->load_row : attn__mla_load_row_f32;
    void (*store)(const float *, float, int, attn_elem, void *) =
        j->k->store_row ? j->k->store_row : attn__mla_store_row;
    void (*gemm)(int, int, int, const float *, size_t, const float *, size_t, float *, size_t, bool,
                 const float *) = j->k->gemm ? j->k->gemm : attn__mla_gemm;
    float *wf = (float *)(j->thread_ws + (size_t)tid * j->thread_ws_size);
    float *af = wf + (size_t)j->Kin * j->Nout;
    float *cf = af + (size_t)ATTN__PROJ_TOK * j->Kin;
    for (int64_t h = begin; h < end; h++) {
        load((const char *)j->w + (size_t)h * j->Kin * j->Nout * j->esz, j->e, j->Kin * j->Nout,
             wf);
        for (int t0 = 0; t0 < j->T; t0 += ATTN__PROJ_TOK) {
            int nt = j->T - t0 < ATTN__PROJ_TOK ? j->T - t0 : ATTN__PROJ_TOK;
            for (int t = 0; t < nt; t++)
                load((const char *)j->in +
                         ((size_t)(t0 + t) * j->in_tok + (size_t)h * j->in_head) * j->esz,
                     j->e, j->Kin, af + (size_t)t * j->Kin);
            gemm(nt, j->Nout, j->Kin, af, (size_t)j->Kin, wf, (size_t)j->Nout, cf, (size_t)j->Nout,
                 false, NULL);
            for (int t = 0; t < nt; t++)
                store(cf + (size_t)t * j->Nout, 1.0f, j->Nout, j->e,
                      (char *)j->out +
                          ((size_t)(t0 + t) * j->out_tok + (size_t)h * j->out_head) * j->esz);
        }
    }
}

attn_status attn__mla_project(int T, int H, int Kin, int Nout, const void *in, size_t in_tok,
                              size_t in_head, const void *w, void *out, size_t out_tok,
                              size_t out_head, attn_elem e)
{
    if (T <= 0 || H <= 0) return ATTN_OK;
    attn__pool *pool = attn__pool_global();
    int nthreads = attn__pool_threads(pool);
    attn__proj_job j = {
        .k = attn__mla_prefill_kern(),
        .T = T,
        .Kin = Kin,
        .Nout = Nout,
        .in = in,
        .w = w,
        .out = out,
        .in_tok = in_tok,
        .in_head = in_head,
        .out_tok = out_tok,
        .out_head = out_head,
        .esz = e == ATTN_ELEM_F32 ? 4 : 2,
        .e = e,
    };
    j.thread_ws_size =
        attn__mla_al64(sizeof(float) * ((size_t)Kin * Nout + (size_t)ATTN__PROJ_TOK * Kin +
                                        (size_t)ATTN__PROJ_TOK * Nout));
    pthread_mutex_lock(&attn__mla_ws_mu);
    void *mem = NULL;
    attn_status st = attn__mla_ws_reserve(j.thread_ws_size * (size_t)nthreads, &mem);
    if (st == ATTN_OK) {
        j.thread_ws = mem;
        if (H == 1)
            attn__proj_heads(&j, 0, 1, 0);
        else
            attn__pool_for(pool, H, 1, attn__proj_heads, &j);
    }
    pthread_mutex_unlock(&attn__mla_ws_mu);
    return st;
}

/* ---- entry points and descriptors --------------------------------------------------- */

static attn_status cpu_mla_mqa(void *impl, const attn_mla_args *a)
{
    (void)impl;
    return attn__cpu_mla_mqa(a, false);
}

static attn_status cpu_mla_mqa_sparse(void *impl, const attn_mla_args *a)
{
    (void)impl;
    return attn__cpu_mla_mqa(a, true);
}

static attn_status cpu_mla_mha(void *impl, const attn_mla_args *a)
{
    (void)impl;
    return attn__cpu_mla_mha(a);
}

static const char *cpu_mla_variant(void)
{
    static _Thread_local char buf[96];
    const attn__mla_kern *bf = attn__mla_decode_kern(ATTN_ELEM_BF16, ATTN_ELEM_BF16, 512, 576);
    const attn__mla_kern *f32 = attn__mla_decode_kern(ATTN_ELEM_F32, ATTN_ELEM_F32, 512, 576);
    const attn__mla_kern *pre = attn__mla_prefill_kern();
    if (bf == f32)
        snprintf(buf, sizeof buf, "%s (prefill %s)", bf->name, pre->name);
    else
        snprintf(buf, sizeof buf, "%s for bf16, %s (prefill %s)", bf->name, f32->name, pre->name);
    return buf;
}

static const attn_kernel_ops cpu_mla_ops = {
    .struct_size = sizeof(attn_kernel_ops),
    .forward_mqa = cpu_mla_mqa,
    .forward_mha = cpu_mla_mha,
    .variant = cpu_mla_variant,
    .kind = ATTN_KERNEL_MLA, /* the core's known-answer tests (src/selftest), no own hook */
};

static const attn_kernel_ops cpu_mla_sparse_ops = {
    .struct_size = sizeof(attn_kernel_ops),
    .forward_mqa = cpu_mla_mqa_sparse,
    .variant = cpu_mla_variant,
    .kind = ATTN_KERNEL_MLA_SPARSE,
};

static const int attn__cpu_mla_heads[] = {320, 576};

#define KV(x) ATTN_KV_BIT(ATTN_KV_##x)
/* What the kernels really run: fp32/bf16/fp16 queries, latent cache in the
 * model dtype, fp16, bf16 or fp8 (e4m3/e5m2 with a per-tensor scale), any
 * block size (rows are addressed one by one through the block table),
 * kv_lora_rank + rope of 320 (256 + 64) or 576 (512 + 64); LSE returned. */
#define ATTN__CPU_MLA_DESC                                                                         \
    .abi_version = ATTN_BACKEND_ABI_VERSION, .struct_size = sizeof(attn_backend_desc),             \
    .platforms = "CPU",                                                                            \
    .dtypes = ATTN_DTYPE_BIT(ATTN_DTYPE_FP16) | ATTN_DTYPE_BIT(ATTN_DTYPE_BF16) |                  \
              ATTN_DTYPE_BIT(ATTN_DTYPE_FP32),                                                     \
    .kv_dtypes = KV(AUTO) | KV(FLOAT16) | KV(BFLOAT16) | KV(FP8) | KV(FP8_E4M3) | KV(FP8_E5M2),    \
    .heads = {.sizes = attn__cpu_mla_heads, .n_sizes = 2}, .is_mla = true,                         \
    .attn_types = ATTN_TYPE_BIT(ATTN_TYPE_DECODER), .cg_support = ATTN_CG_NEVER,                   \
    .can_return_lse_for_decode = true, .lse_base = ATTN_LSE_BASE_E,                                \
    .kv_cache_shape = attn__kv_shape_mla, .kv_stride_order = attn__stride_order_mla

/* On vLLM's platforms CPU_MLA answers with vLLM's CPUMLABackend: head 576,
 * an "auto" cache, blocks of exactly 16. The CPU platform keeps what the
 * kernels above run (libattn differs there by design: docs/vllm-parity.md). */
static bool cpu_mla_on_vllm_platform(const attn_check_ctx *c)
{
    attn_platform_kind k = attn_platform_get_kind(c->platform);
    return k == ATTN_PLATFORM_CUDA || k == ATTN_PLATFORM_ROCM || k == ATTN_PLATFORM_XPU;
}

static bool cpu_mla_head(const attn_check_ctx *c, int hs)
{
    return hs == 576 || (hs == 320 && !cpu_mla_on_vllm_platform(c));
}

static bool cpu_mla_kv(const attn_check_ctx *c, attn_kv_dtype kv)
{
    if (cpu_mla_on_vllm_platform(c)) return kv == ATTN_KV_AUTO;
    return ((KV(AUTO) | KV(FLOAT16) | KV(BFLOAT16) | KV(FP8) | KV(FP8_E4M3) | KV(FP8_E5M2)) >> kv) &
           1u;
}

static bool cpu_mla_block(const attn_check_ctx *c, int bs)
{
    return !cpu_mla_on_vllm_platform(c) || bs == 16;
}

/* vLLM's MLA implementations take PCP; libattn's CPU kernels do not. */
static bool cpu_mla_pcp(const attn_check_ctx *c)
{
    return cpu_mla_on_vllm_platform(c);
}

/* vLLM's CPU_MLA impl has no DCP (AttentionImpl.supports_dcp stays False). */
static bool cpu_mla_dcp(const attn_check_ctx *c)
{
    return !cpu_mla_on_vllm_platform(c);
}

static const attn_backend_desc cpu_mla_desc = {
    ATTN__CPU_MLA_DESC,
    .name = "CPU_MLA",
    .supports_pcp = true, /* refined: on vLLM's platforms only */
    .supports_pcp_fn = cpu_mla_pcp,
    .supports_head_size = cpu_mla_head,
    .supports_kv_cache_dtype = cpu_mla_kv,
    .supports_block_size = cpu_mla_block,
    .supports_dcp = true, /* attn_dcp (sparse top-k indices are global); not on vLLM's platforms */
    .supports_dcp_fn = cpu_mla_dcp,
    .builder = &attn__builder_mla_cpu,
};

static const attn_backend_desc cpu_mla_sparse_desc = {
    ATTN__CPU_MLA_DESC,
    .name = "CPU_MLA_SPARSE",
    .is_sparse = true,
    .builder = &attn__builder_mla_sparse,
};

const attn_backend attn__backend_cpu_mla = ATTN__CPU_BACKEND(&cpu_mla_desc, &cpu_mla_ops);

const attn_backend attn__backend_cpu_mla_sparse =
    ATTN__CPU_BACKEND(&cpu_mla_sparse_desc, &cpu_mla_sparse_ops);
