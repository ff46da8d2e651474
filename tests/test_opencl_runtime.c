/* The OpenCL runtime of OPENCL_ATTN (src/backends/opencl/):
 * - the embedded kernel program is the text of src/backends/devkern/ (one
 *   copy of the source);
 * - programs are built once per process and (device, options), also when
 *   several threads open instances at the same time; a program that does
 *   not compile gives ATTN_IMPORT_ERROR whose detail holds the compiler's
 *   log, for an arbitrary source and for the kernel program itself, and
 *   the failure is remembered (no second compile);
 * - element conversions on the device are bit-exact with the host's: every
 *   fp16/bf16/fp8 code decoded, and the KV write (reshape_and_cache: every
 *   cache element x source element x layout, fp8 with per-tensor and
 *   per-head scales, padding slots) and the MLA latent write give the host
 *   write's bytes, on values built to hit rounding ties, subnormals,
 *   saturation, infinities and NaN;
 * - bad input (slots outside the cache, buffers too small, metadata that
 *   does not match, unsupported head sizes, NULLs) gets a clear status and
 *   changes nothing on the device.
 * Exit 77 without an OpenCL device. */
#include <pthread.h>
#include <stdio.h>

#include "backends/opencl/kd_embed.h"
#include "backends/reference/reference.h"
#include "ocl_testutil.h"

#define NAME "test_opencl_runtime"

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) n = 0;
    if (s) s[n] = '\0';
    fclose(f);
    return s;
}

static void embedded_is_the_source(void)
{
    CHECK(attn__kd_source_count >= 4);
    CHECK_STR(attn__kd_source_names[0], "kd_params.h");
    CHECK_STR(attn__kd_source_names[1], "attn_kdialect.h");
    for (int i = 0; i < attn__kd_source_count; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/src/backends/devkern/%s", attn_test_source_dir(),
                 attn__kd_source_names[i]);
        char *text = read_file(path);
        CHECK_MSG(text && strcmp(text, attn__kd_sources[i]) == 0,
                  "the embedded %s is not the text of %s", attn__kd_source_names[i], path);
        free(text);
    }
}

/* ---- program cache ------------------------------------------------------------ */

typedef struct {
    const char *options;
    attn_status st;
} open_job;

static void *open_close(void *arg)
{
    open_job *j = arg;
    attn__ocl_options opt = {.device = -1, .build_options = j->options};
    attn__ocl *o = NULL;
    j->st = attn__ocl_open(&opt, &o);
    attn__ocl_close(o);
    return NULL;
}

static void program_cache(attn__ocl *o)
{
    unsigned before = attn__ocl_build_count();
    attn__ocl *o2 = tocl_open_or_skip(NAME, NULL);
    CHECK_MSG(attn__ocl_build_count() == before, "a second instance rebuilt the program");
    attn__ocl_close(o2);
    /* four threads open instances of a program nobody built yet: one build */
    open_job jobs[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (open_job){.options = "-DATTN_TEST_PROGRAM_CACHE=1"};
        CHECK(pthread_create(&th[i], NULL, open_close, &jobs[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK_OK(jobs[i].st);
    }
    CHECK_MSG(attn__ocl_build_count() == before + 1, "4 concurrent opens built %u programs",
              attn__ocl_build_count() - before);

    /* a broken program: the status, the compiler's log in the detail, and
     * the failure remembered */
    static const char *broken[] = {"__kernel void attn_test_broken(__global float *p)\n"
                                   "{\n    p[0] = attn_test_undeclared;\n}\n"};
    unsigned b0 = attn__ocl_build_count();
    CHECK_STATUS(attn__ocl_program_check(o, broken, 1, NULL), ATTN_IMPORT_ERROR);
    CHECK_CONTAINS(attn_last_error(), "OpenCL program build failed");
    CHECK_CONTAINS(attn_last_error(), "attn_test_undeclared");
    CHECK_CONTAINS(attn_last_error(), "CL_BUILD_PROGRAM_FAILURE");
    CHECK_STATUS(attn__ocl_program_check(o, broken, 1, NULL), ATTN_IMPORT_ERROR);
    CHECK_CONTAINS(attn_last_error(), "attn_test_undeclared");
    CHECK_MSG(attn__ocl_build_count() == b0 + 1, "the failed build was repeated");
    /* the kernel program itself, broken by an option: open fails the same way */
    attn__ocl_options bad = {.device = -1, .build_options = "-DKD_CAUSAL_SLACK=("};
    attn__ocl *ob = NULL;
    CHECK_STATUS(attn__ocl_open(&bad, &ob), ATTN_IMPORT_ERROR);
    CHECK_CONTAINS(attn_last_error(), "kd_attention.cl:");
    CHECK(ob == NULL);
    printf("broken program detail: %.300s\n", attn_last_error());
}

/* ---- conversions ------------------------------------------------------------------ */

static bool same_float(float a, float b)
{
    return (isnan(a) && isnan(b)) || attn__f32_bits(a) == attn__f32_bits(b);
}

static void decode_all_codes(attn__ocl *o)
{
    uint16_t codes[65536];
    for (int i = 0; i < 65536; i++)
        codes[i] = (uint16_t)i;
    attn__ocl_mem *m = tocl_upload(o, codes, sizeof codes);
    float *got = malloc(sizeof(float) * 65536);
    static const attn_elem elems[] = {ATTN_ELEM_F16, ATTN_ELEM_BF16, ATTN_ELEM_FP8_E4M3,
                                      ATTN_ELEM_FP8_E5M2};
    for (int e = 0; e < 4; e++) {
        size_t n = attn_elem_size(elems[e]) == 2 ? 65536 : 256;
        CHECK_OK(attn__ocl_to_f32(o, m, 0, elems[e], n, got));
        int bad = 0;
        for (size_t i = 0; i < n; i++) {
            float want = attn__load_elem(codes, elems[e], i);
            if (!same_float(got[i], want) && bad++ < 3)
                fprintf(stderr, "%s code 0x%zx: device %a, host %a\n", attn_elem_name(elems[e]), i,
                        (double)got[i], (double)want);
        }
        CHECK_MSG(bad == 0, "%d %s codes decode differently on the device", bad,
                  attn_elem_name(elems[e]));
    }
    free(got);
    attn__ocl_free(m);
}

/* Float bits that hit what the encoders must get right: ties at the
 * rounding bit of fp16 (12), bf16 (15), e4m3 (19) and e5m2 (20), one ulp
 * either side, subnormals of every format, saturation, inf, NaN, -0. */
static uint32_t crafted_bits(trng *g)
{
    static const int tie_bits[] = {12, 15, 19, 20};
    static const float edges[] = {448.0f,   464.0f, 480.0f, 57344.0f, 61440.0f,    65504.0f,
                                  65520.0f, 1e30f,  0.0f,   1.0f,     0.001953125f};
    uint32_t sign = (uint32_t)trng_int(g, 2) << 31;
    uint32_t e = (uint32_t)(127 - 26 + trng_int(g, 44)) << 23; /* 2^-26 .. 2^17 */
    uint32_t m = (uint32_t)trng_next(g) & 0x7fffffu;
    switch (trng_int(g, 8)) {
    case 0: return (uint32_t)trng_next(g);
    case 1:
    case 2: {
        int k = tie_bits[trng_int(g, 4)];
        uint32_t t = (m & ~((2u << k) - 1u)) | (1u << k);
        return sign | e | ((t + (uint32_t)trng_int(g, 3) - 1u) & 0x7fffffu);
    }
    case 3: return sign | attn__f32_bits(edges[trng_int(g, 11)]);
    case 4: return sign | (trng_int(g, 2) ? 0x7f800000u : 0x7fc00000u | (m & 0x3fffffu));
    case 5: return sign | (m >> trng_int(g, 23)); /* float subnormals */
    default: return sign | e | m;
    }
}

/* ---- cache writes --------------------------------------------------------------- */

typedef struct {
    attn_elem cache, src;
    int layout;
    bool per_head, unit_scale;
} wcase;

static void fill_src(trng *g, void *buf, attn_elem e, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (e == ATTN_ELEM_F32)
            ((uint32_t *)buf)[i] = crafted_bits(g);
        else
            ((uint16_t *)buf)[i] = (uint16_t)trng_next(g);
    }
}

static void kv_write_case(attn__ocl *o, trng *g, const wcase *w)
{
    const int nb = 7, bs = 16, kvh = 3, D = 64, ntok = 41;
    tcache host;
    tcache_init_layout(&host, w->cache, nb, bs, kvh, D, D, w->layout);
    size_t bytes = tcache_bytes(&host);
    for (size_t i = 0; i < bytes; i++) /* old contents: untouched slots must keep them */
        ((unsigned char *)host.data)[i] = (unsigned char)trng_next(g);
    if (attn__elem_is_fp8(w->cache) && !w->unit_scale) {
        host.view.k_scale = trng_unif(g, 0.01f, 4.0f);
        host.view.v_scale = trng_unif(g, 0.01f, 4.0f);
        if (w->per_head) {
            for (int h = 0; h < kvh; h++) {
                host.kscale_ph[h] = trng_unif(g, 0.01f, 4.0f);
                host.vscale_ph[h] = trng_unif(g, 0.01f, 4.0f);
            }
            host.view.k_scale_per_head = host.kscale_ph;
            host.view.v_scale_per_head = host.vscale_ph;
        }
    }
    int64_t slots[41];
    int perm[7 * 16];
    for (int i = 0; i < nb * bs; i++)
        perm[i] = i;
    for (int i = nb * bs - 1; i > 0; i--) {
        int k = trng_int(g, i + 1), t = perm[i];
        perm[i] = perm[k];
        perm[k] = t;
    }
    for (int t = 0; t < ntok; t++)
        slots[t] = trng_int(g, 8) == 0 ? -1 : perm[t];
    size_t n = (size_t)ntok * kvh * D, esz = attn_elem_size(w->src);
    void *k = malloc(n * esz), *v = malloc(n * esz);
    fill_src(g, k, w->src, n);
    fill_src(g, v, w->src, n);
    /* sources at element offsets inside bigger buffers (v2: allocation + offset) */
    int64_t ko = w->layout * 5, vo = w->layout * 3;
    attn__ocl_mem *cm = tocl_upload(o, host.data, bytes);
    attn__ocl_mem *km = tocl_upload(o, NULL, (n + (size_t)ko) * esz);
    attn__ocl_mem *vm = tocl_upload(o, NULL, (n + (size_t)vo) * esz);
    CHECK_OK(attn__ocl_copy_in(o, km, (size_t)ko * esz, k, n * esz));
    CHECK_OK(attn__ocl_copy_in(o, vm, (size_t)vo * esz, v, n * esz));
    attn_kv_view dview = host.view;
    dview.data = cm;
    CHECK_OK(attn_kv_write(&host.view, slots, ntok, k, v, w->src));
    CHECK_OK(attn__ocl_kv_write(o, &dview, slots, ntok, km, ko, vm, vo, w->src));
    unsigned char *got = malloc(bytes);
    CHECK_OK(attn__ocl_copy_out(o, got, cm, 0, bytes));
    size_t diff = 0, first = 0;
    for (size_t i = 0; i < bytes; i++)
        if (got[i] != ((unsigned char *)host.data)[i] && diff++ == 0) first = i;
    CHECK_MSG(diff == 0,
              "KV write %s <- %s (%s%s): %zu bytes differ from the host write, first at "
              "byte %zu",
              attn_elem_name(w->cache), attn_elem_name(w->src), tlayout_names[w->layout],
              w->per_head ? ", per-head scales" : "", diff, first);
    /* a slot outside the cache: refused, nothing written */
    slots[ntok / 2] = (int64_t)nb * bs;
    CHECK_STATUS(attn__ocl_kv_write(o, &dview, slots, ntok, km, ko, vm, vo, w->src),
                 ATTN_INVALID_ARGUMENT);
    CHECK_CONTAINS(attn_last_error(), "outside the cache");
    slots[ntok / 2] = -1;
    /* sources and cache smaller than the call addresses: refused */
    attn__ocl_mem *small = tocl_upload(o, NULL, n * esz - 1);
    CHECK_STATUS(attn__ocl_kv_write(o, &dview, slots, ntok, small, 0, vm, vo, w->src),
                 ATTN_OUT_OF_RANGE);
    CHECK_STATUS(attn__ocl_kv_write(o, &dview, slots, ntok, km, ko + 1, vm, vo, w->src),
                 ATTN_OUT_OF_RANGE);
    CHECK_STATUS(attn__ocl_kv_write(o, &dview, slots, ntok, km, -1, vm, vo, w->src),
                 ATTN_OUT_OF_RANGE);
    dview.data = small;
    CHECK_STATUS(attn__ocl_kv_write(o, &dview, slots, ntok, km, ko, vm, vo, w->src),
                 ATTN_OUT_OF_RANGE);
    CHECK_STATUS(attn__ocl_kv_write(o, &dview, slots, ntok, km, ko, NULL, 0, w->src),
                 ATTN_NULL_ARGUMENT);
    CHECK_OK(attn__ocl_copy_out(o, got, cm, 0, bytes));
    CHECK_MSG(memcmp(got, host.data, bytes) == 0, "a refused KV write changed the cache");
    attn__ocl_free(small);
    attn__ocl_free(cm);
    attn__ocl_free(km);
    attn__ocl_free(vm);
    free(got);
    free(k);
    free(v);
    tcache_free(&host);
}

static void kv_writes(attn__ocl *o)
{
    trng g = {0x3417e5u};
    static const attn_elem caches[] = {ATTN_ELEM_F32, ATTN_ELEM_F16, ATTN_ELEM_BF16,
                                       ATTN_ELEM_FP8_E4M3, ATTN_ELEM_FP8_E5M2};
    static const attn_elem srcs[] = {ATTN_ELEM_F32, ATTN_ELEM_F16, ATTN_ELEM_BF16};
    int n = 0;
    for (int c = 0; c < 5; c++)
        for (int s = 0; s < 3; s++)
            for (int l = 0; l < TLAYOUT_COUNT; l++) {
                wcase w = {caches[c], srcs[s], l, false, true};
                bool fp8 = attn__elem_is_fp8(caches[c]);
                if (fp8) { /* unit, per-tensor and per-head scales over the layouts */
                    w.unit_scale = l == 0;
                    w.per_head = l == 2;
                }
                kv_write_case(o, &g, &w);
                n++;
            }
    printf("KV write: %d cases (cache x source x layout) bit-exact with the host write\n", n);
}

static void mla_writes(attn__ocl *o)
{
    trng g = {0x3ea7u};
    const int nb = 5, bs = 16, R = 48, P = 16, hs = R + P, ntok = 33;
    static const attn_elem caches[] = {ATTN_ELEM_F32, ATTN_ELEM_F16, ATTN_ELEM_BF16,
                                       ATTN_ELEM_FP8_E4M3, ATTN_ELEM_FP8_E5M2};
    static const attn_dtype dtypes[] = {ATTN_DTYPE_FP32, ATTN_DTYPE_FP16, ATTN_DTYPE_BF16};
    for (int c = 0; c < 5; c++)
        for (int d = 0; d < 3; d++) {
            attn_elem ce = caches[c], se = attn_dtype_elem(dtypes[d]);
            size_t bytes = (size_t)nb * bs * hs * attn_elem_size(ce), esz = attn_elem_size(se);
            unsigned char *host = malloc(bytes), *got = malloc(bytes);
            for (size_t i = 0; i < bytes; i++)
                host[i] = (unsigned char)trng_next(&g);
            attn_kv_view kv = {.data = host,
                               .elem = ce,
                               .num_blocks = nb,
                               .block_size = bs,
                               .num_kv_heads = 1,
                               .head_size = hs,
                               .head_size_v = R,
                               .stride_block = (int64_t)bs * hs,
                               .stride_token = hs,
                               .k_scale = c >= 3 ? trng_unif(&g, 0.05f, 3.0f) : 1.0f,
                               .v_scale = 1.0f};
            int64_t slots[33];
            for (int t = 0; t < ntok; t++)
                slots[t] = trng_int(&g, 6) == 0 ? -1 : (int64_t)((t * 37) % (nb * bs));
            void *lat = malloc((size_t)ntok * R * esz), *rope = malloc((size_t)ntok * P * esz);
            fill_src(&g, lat, se, (size_t)ntok * R);
            fill_src(&g, rope, se, (size_t)ntok * P);
            attn__ocl_mem *cm = tocl_upload(o, host, bytes);
            int64_t lo = d * 7, ro = c * 2; /* element offsets into the sources */
            attn__ocl_mem *lm = tocl_upload(o, NULL, ((size_t)ntok * R + (size_t)lo) * esz);
            attn__ocl_mem *rm = tocl_upload(o, NULL, ((size_t)ntok * P + (size_t)ro) * esz);
            CHECK_OK(attn__ocl_copy_in(o, lm, (size_t)lo * esz, lat, (size_t)ntok * R * esz));
            CHECK_OK(attn__ocl_copy_in(o, rm, (size_t)ro * esz, rope, (size_t)ntok * P * esz));
            CHECK_OK(attn_mla_write_latent(&kv, slots, ntok, lat, rope, dtypes[d]));
            attn_kv_view dv = kv;
            dv.data = cm;
            CHECK_OK(attn__ocl_mla_write(o, &dv, slots, ntok, lm, lo, rm, ro, R, P, se));
            CHECK_OK(attn__ocl_copy_out(o, got, cm, 0, bytes));
            CHECK_MSG(memcmp(got, host, bytes) == 0, "MLA latent write %s <- %s differs",
                      attn_elem_name(ce), attn_elem_name(se));
            slots[3] = -2;
            CHECK_STATUS(attn__ocl_mla_write(o, &dv, slots, ntok, lm, lo, rm, ro, R, P, se),
                         ATTN_OUT_OF_RANGE);
            CHECK_STATUS(attn__ocl_mla_write(o, &dv, slots, ntok, lm, lo, NULL, 0, R, P, se),
                         ATTN_NULL_ARGUMENT);
            CHECK_STATUS(attn__ocl_mla_write(o, &dv, slots, ntok, lm, lo, rm, ro, R, P + 1, se),
                         ATTN_INVALID_ARGUMENT);
            CHECK_STATUS(attn__ocl_mla_write(o, &dv, slots, ntok, lm, lo + 1, rm, ro, R, P, se),
                         ATTN_OUT_OF_RANGE);
            CHECK_OK(attn__ocl_copy_out(o, got, cm, 0, bytes));
            CHECK_MSG(memcmp(got, host, bytes) == 0, "a refused MLA write changed the cache");
            attn__ocl_free(cm);
            attn__ocl_free(lm);
            attn__ocl_free(rm);
            free(lat);
            free(rope);
            free(host);
            free(got);
        }
}

/* ---- memory and forward misuse -------------------------------------------------- */

static void memory(attn__ocl *o)
{
    attn__ocl_mem *m = NULL;
    CHECK_STATUS(attn__ocl_alloc(o, 0, &m), ATTN_INVALID_ARGUMENT);
    CHECK(m == NULL);
    CHECK_OK(attn__ocl_alloc(o, 1001, &m));
    unsigned char buf[1001];
    memset(buf, 0x5a, sizeof buf);
    CHECK_OK(attn__ocl_copy_out(o, buf, m, 0, sizeof buf));
    int nonzero = 0;
    for (int i = 0; i < 1001; i++)
        nonzero += buf[i] != 0;
    CHECK_MSG(nonzero == 0, "a new buffer is not zeroed (%d bytes)", nonzero);
    CHECK_STATUS(attn__ocl_copy_out(o, buf, m, 1000, 2), ATTN_OUT_OF_RANGE);
    CHECK_STATUS(attn__ocl_copy_in(o, m, SIZE_MAX, buf, 2), ATTN_OUT_OF_RANGE);
    CHECK_STATUS(attn__ocl_copy_in(o, m, 0, NULL, 2), ATTN_NULL_ARGUMENT);
    CHECK_STATUS(attn__ocl_to_f32(o, m, 0, ATTN_ELEM_F32, 251, (float *)buf), ATTN_OUT_OF_RANGE);
    CHECK_OK(attn__ocl_sync(o));
    attn__ocl_free(m);
}

static void forward_misuse(attn__ocl *o)
{
    attn_layer_params lp = {.num_heads = 4,
                            .num_kv_heads = 2,
                            .head_size = 64,
                            .dtype = ATTN_DTYPE_FP32,
                            .attn_type = ATTN_TYPE_DECODER};
    attn__ocl_step *s = NULL;
    attn_layer_params big = lp;
    big.head_size = 512;
    CHECK_STATUS(attn__ocl_step_create(o, &big, &s), ATTN_UNSUPPORTED);
    big.head_size = 36;
    CHECK_STATUS(attn__ocl_step_create(o, &big, &s), ATTN_UNSUPPORTED);
    big.head_size = 64;
    big.num_kv_heads = 3;
    CHECK_STATUS(attn__ocl_step_create(o, &big, &s), ATTN_INVALID_ARGUMENT);
    CHECK_OK(attn__ocl_step_create(o, &lp, &s));
    attn__ocl_kernel *k = NULL;
    CHECK_OK(attn__ocl_kernel_create(o, &lp, &k));
    int32_t qsl[3] = {0, 1, 5}, seq[2] = {20, 5}, bt[4] = {0, 1, 2, 0};
    attn_common_metadata cm = {.query_start_loc = qsl,
                               .seq_lens = seq,
                               .num_reqs = 2,
                               .num_actual_tokens = 5,
                               .max_query_len = 4,
                               .max_seq_len = 20,
                               .block_table = bt,
                               .block_table_stride = 2,
                               .causal = true,
                               .block_size = 16};
    bt[1] = 3; /* outside a pool of 3 blocks */
    CHECK_STATUS(attn__ocl_step_build(s, &cm, 3, NULL), ATTN_BAD_METADATA);
    CHECK_CONTAINS(attn_last_error(), "outside the pool");
    bt[1] = 1;
    CHECK_OK(attn__ocl_step_build(s, &cm, 3, NULL));
    tcache c;
    tcache_init_layout(&c, ATTN_ELEM_F32, 3, 16, 2, 64, 64, TLAYOUT_FLASH_NHD);
    attn__ocl_mem *kvm = tocl_upload(o, c.data, tcache_bytes(&c));
    attn__ocl_mem *q = tocl_upload(o, NULL, 5 * 4 * 64 * 4),
                  *out = tocl_upload(o, NULL, 5 * 4 * 64 * 4);
    attn__ocl_mem *small = tocl_upload(o, NULL, 5 * 4 * 64 * 4 - 4);
    attn_kv_view kv = c.view;
    kv.data = kvm;
    attn__ocl_fwd f = {.layer = &lp, .common = &cm, .step = s, .kv = &kv, .q = q, .out = out};
    CHECK_OK(attn__ocl_forward(k, &f));
    f.q = small;
    CHECK_STATUS(attn__ocl_forward(k, &f), ATTN_OUT_OF_RANGE);
    f.q = q;
    f.out_offset = 1;
    CHECK_STATUS(attn__ocl_forward(k, &f), ATTN_OUT_OF_RANGE);
    f.out_offset = 0;
    f.lse = small;
    f.lse_offset = -1;
    CHECK_STATUS(attn__ocl_forward(k, &f), ATTN_OUT_OF_RANGE);
    f.lse = NULL;
    kv.data = small; /* the view addresses more than this buffer */
    CHECK_STATUS(attn__ocl_forward(k, &f), ATTN_OUT_OF_RANGE);
    kv.data = kvm;
    attn_layer_params other = lp;
    other.num_heads = 8;
    f.layer = &other;
    CHECK_STATUS(attn__ocl_forward(k, &f), ATTN_INVALID_ARGUMENT);
    float sinks[4] = {0};
    other = lp;
    other.sinks = sinks; /* sinks the kernel was not created with */
    CHECK_STATUS(attn__ocl_forward(k, &f), ATTN_INVALID_ARGUMENT);
    CHECK_CONTAINS(attn_last_error(), "fixed at create");
    f.layer = &lp;
    CHECK_OK(attn__ocl_forward(k, &f));
    qsl[2] = 4; /* other metadata than the step's */
    seq[1] = 4;
    cm.num_actual_tokens = 4;
    cm.max_query_len = 3;
    CHECK_STATUS(attn__ocl_forward(k, &f), ATTN_BAD_METADATA);
    CHECK_CONTAINS(attn_last_error(), "the step was built for");
    /* a step of another instance (another queue), an empty batch */
    attn__ocl *o2 = tocl_open_or_skip(NAME, NULL);
    attn__ocl_step *s2 = NULL;
    CHECK_OK(attn__ocl_step_create(o2, &lp, &s2));
    qsl[1] = qsl[2] = 0;
    cm.num_actual_tokens = cm.max_query_len = 0;
    CHECK_OK(attn__ocl_step_build(s2, &cm, 3, NULL));
    f.step = s2;
    CHECK_STATUS(attn__ocl_forward(k, &f), ATTN_BAD_STATE);
    CHECK_CONTAINS(attn_last_error(), "another instance");
    CHECK_OK(attn__ocl_step_build(s, &cm, 3, NULL));
    f.step = s;
    CHECK_OK(attn__ocl_forward(k, &f));
    attn__ocl_step_destroy(s2);
    attn__ocl_close(o2);
    f.step = NULL;
    CHECK_STATUS(attn__ocl_forward(k, &f), ATTN_NULL_ARGUMENT);
    CHECK_OK(attn__ocl_sync(o));
    attn__ocl_step_destroy(s);
    attn__ocl_kernel_destroy(k);
    attn__ocl_free(kvm);
    attn__ocl_free(q);
    attn__ocl_free(out);
    attn__ocl_free(small);
    tcache_free(&c);
}

int main(void)
{
    embedded_is_the_source();
    attn__ocl *o = tocl_open_or_skip(NAME, NULL);
    printf("device: %s (%d OpenCL device(s))\n", attn__ocl_device_name(o),
           attn__ocl_device_count());
    program_cache(o);
    decode_all_codes(o);
    kv_writes(o);
    mla_writes(o);
    memory(o);
    forward_misuse(o);
    attn__ocl_close(o);
    return attn_test_finish(NAME);
}
