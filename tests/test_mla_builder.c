/* The MLA metadata builders: vLLM's decode/prefill split for each query-
 * length class on hand-worked batches, the per-backend thresholds and
 * capture tiers, the speculative-decoding raise, update_block_table reuse,
 * describe(), CPU_MLA's own builder (the common fields plus its split-KV
 * decode partition, which the common builders do not carry), the partition
 * itself (every visible key of every row covered exactly once, partial
 * slots distinct), a rebuild leaving nothing stale, and bad input refused. */
#include "mla_fixture.h"

extern const attn_builder_ops attn__builder_mla_varlen, attn__builder_mla_flashmla,
    attn__builder_mla_uniform, attn__builder_mla_single;

static void split(const int *ql, int n, int thr, bool uniform, int want_nd, int want_ndt,
                  int want_np, int want_npt)
{
    int32_t qsl[16] = {0}, sl[16];
    for (int i = 0; i < n; i++) {
        qsl[i + 1] = qsl[i] + ql[i];
        sl[i] = ql[i] + 10;
    }
    attn_common_metadata cm = {0};
    cm.query_start_loc = qsl;
    cm.seq_lens = sl;
    cm.num_reqs = n;
    cm.num_actual_tokens = qsl[n];
    int nd, ndt, np, npt;
    attn_mla_split_decodes(&cm, thr, uniform, &nd, &ndt, &np, &npt);
    CHECK_MSG(nd == want_nd && ndt == want_ndt && np == want_np && npt == want_npt,
              "split thr=%d uniform=%d: got %d/%d/%d/%d want %d/%d/%d/%d", thr, uniform, nd, ndt,
              np, npt, want_nd, want_ndt, want_np, want_npt);
}

static void check_partition(int H, int nthreads, int nreq, const int *q, const int *s)
{
    int32_t qsl[16] = {0}, sl[16];
    int T = 0;
    for (int i = 0; i < nreq; i++) {
        qsl[i + 1] = qsl[i] + q[i];
        sl[i] = s[i];
        T += q[i];
    }
    attn_common_metadata cm = {0};
    cm.query_start_loc = qsl;
    cm.seq_lens = sl;
    cm.num_reqs = nreq;
    cm.num_actual_tokens = T;
    int bound = attn__mla_partition_bound(nreq, T, H, nthreads);
    attn__mla_work *w = calloc((size_t)bound, sizeof *w);
    int nparts = -1;
    int np = attn__mla_partition(&cm, 0, nreq, H, nthreads, w, bound, &nparts);
    CHECK(np > 0 && np <= bound);
    /* coverage: for each request, rows x visible keys counted once */
    int64_t covered = 0, want = 0;
    for (int r = 0; r < nreq; r++)
        for (int t = 0; t < q[r]; t++)
            want += (int64_t)H * (s[r] - q[r] + t + 1);
    char *slot_used = calloc((size_t)(nparts > 0 ? nparts : 1), 1);
    bool ok = true;
    for (int i = 0; i < np; i++) {
        const attn__mla_work *p = &w[i];
        ok &= p->row_end > p->row_begin && p->row_end - p->row_begin <= ATTN__MLA_MAX_ROWS;
        ok &= p->kv_begin < p->kv_end && p->split < p->nsplits;
        for (int row = p->row_begin; row < p->row_end; row++) {
            int lim = s[p->req] - q[p->req] + row / H; /* last visible position */
            int hi = p->kv_end - 1 < lim ? p->kv_end - 1 : lim;
            if (hi >= p->kv_begin) covered += hi - p->kv_begin + 1;
        }
        if (p->nsplits > 1) {
            ok &= p->partial >= 0 && p->partial < nparts && !slot_used[p->partial];
            if (p->partial >= 0 && p->partial < nparts) slot_used[p->partial] = 1;
        } else {
            ok &= p->partial == -1;
        }
        if (i > 0) {
            int64_t a = (int64_t)(w[i - 1].row_end - w[i - 1].row_begin) *
                        (w[i - 1].kv_end - w[i - 1].kv_begin);
            int64_t b = (int64_t)(p->row_end - p->row_begin) * (p->kv_end - p->kv_begin);
            ok &= a >= b; /* largest first */
        }
    }
    /* ranges of one group do not overlap: the coverage sum would exceed */
    CHECK_MSG(ok && covered == want, "partition H=%d threads=%d: covered %lld of %lld keys", H,
              nthreads, (long long)covered, (long long)want);
    free(slot_used);
    free(w);
}

/* CPU_MLA's builder on a batch: its metadata starts with the common fields
 * (the same as the common varlen-128 class gives) and carries the split-KV
 * partition of the decodes for the layer's heads; want_pieces / want_parts
 * -1 = any (> 0 pieces when there are decodes). Also its describe() keys
 * and update_block_table (the partition travels; common metadata refused). */
static void cpu_partition(const attn_common_metadata *cm, const attn_builder_init *bi, int heads,
                          int want_pieces, int want_parts)
{
    void *st = NULL, *st2 = NULL;
    const void *mdp = NULL, *md2p = NULL;
    CHECK_OK(attn__builder_mla_cpu.create(bi, &st));
    CHECK_OK(attn__builder_mla_cpu.build(st, 0, cm, false, &mdp));
    const attn_mla_metadata *md = mdp;
    const attn__cpu_mla_metadata *c = attn__cpu_mla_md(md);
    CHECK(c != NULL && md->magic == ATTN_MLA_METADATA_MAGIC && md->struct_size == sizeof *c);
    if (!c) goto out;
    int nd, ndt, np, npt;
    attn_mla_split_decodes(cm, 128, false, &nd, &ndt, &np, &npt);
    CHECK(md->query_class == ATTN_MLA_QUERY_VARLEN && md->reorder_batch_threshold == 128);
    CHECK(md->num_decodes == nd && md->num_decode_tokens == ndt && md->num_prefills == np &&
          md->num_prefill_tokens == npt);
    if (want_pieces < 0)
        CHECK(c->num_work > (nd > 0 ? 0 : -1) && c->work_heads == heads);
    else
        CHECK_MSG(c->num_work == want_pieces, "CPU_MLA builder: %d pieces, want %d", c->num_work,
                  want_pieces);
    if (want_parts >= 0) CHECK(c->num_partials == want_parts);
    CHECK((c->work != NULL) == (c->num_work > 0));
    char js[1024];
    CHECK(attn__builder_mla_cpu.describe(md, js, sizeof js) > 0);
    char want[96];
    snprintf(want, sizeof want, "\"decode_work_pieces\":%d,\"decode_partials\":%d", c->num_work,
             c->num_partials);
    CHECK_CONTAINS(js, want);
    CHECK_CONTAINS(js, "\"query_class\":\"varlen\"");
    /* update_block_table: the other group's partition comes along */
    CHECK_OK(attn__builder_mla_cpu.create(bi, &st2));
    int32_t other_bt[64] = {0};
    CHECK_OK(attn__builder_mla_cpu.update_block_table(st2, md, other_bt, 16, NULL, &md2p));
    const attn__cpu_mla_metadata *c2 = attn__cpu_mla_md(md2p);
    CHECK(c2 && c2 != c && c2->work == c->work && c2->num_work == c->num_work &&
          c2->num_partials == c->num_partials && c2->mla.common.block_table == other_bt);
    /* metadata of a common builder has no partition to reuse */
    void *gs = NULL;
    const void *gmd = NULL;
    CHECK_OK(attn__builder_mla_varlen.create(bi, &gs));
    CHECK_OK(attn__builder_mla_varlen.build(gs, 0, cm, false, &gmd));
    CHECK_STATUS(attn__builder_mla_cpu.update_block_table(st2, gmd, other_bt, 16, NULL, &md2p),
                 ATTN_BAD_METADATA);
    /* and a common builder takes the common part of CPU_MLA's */
    CHECK_OK(attn__builder_mla_varlen.update_block_table(gs, md, other_bt, 16, NULL, &md2p));
    CHECK(((const attn_mla_metadata *)md2p)->struct_size == sizeof(attn_mla_metadata) &&
          ((const attn_mla_metadata *)md2p)->num_decodes == md->num_decodes);
    attn__builder_mla_varlen.destroy(gs);
out:
    attn__builder_mla_cpu.destroy(st);
    if (st2) attn__builder_mla_cpu.destroy(st2);
}

int main(void)
{
    /* split_decodes_and_prefills */
    int a[] = {1, 1, 1};
    split(a, 3, 1, false, 3, 3, 0, 0);
    int b[] = {1, 2, 5, 1};
    split(b, 4, 1, false, 1, 1, 3, 8);
    int c[] = {1, 300, 600, 2};
    split(c, 4, 512, false, 2, 301, 2, 602);
    int d[] = {2, 2, 3, 100};
    split(d, 4, 128, true, 2, 4, 2, 103);
    split(d, 4, 128, false, 4, 107, 0, 0);
    int e[] = {700, 1};
    split(e, 2, 512, false, 0, 0, 2, 701);
    split(e, 0, 512, false, 0, 0, 0, 0);

    /* per-backend classes */
    CHECK(attn__builder_mla_varlen.reorder_batch_threshold == 512);
    CHECK(attn__builder_mla_flashmla.reorder_batch_threshold == 128);
    CHECK(attn__builder_mla_cpu.reorder_batch_threshold == 128);
    CHECK(attn__builder_mla_cpu.cg_support == ATTN_CG_NEVER);
    CHECK(attn__builder_mla_single.cg_support == ATTN_CG_UNIFORM_SINGLE_TOKEN_DECODE);
    CHECK(attn__builder_mla_uniform.cg_support == ATTN_CG_UNIFORM_BATCH);
    CHECK(attn__builder_mla.reorder_batch_threshold == 1);
    CHECK_STR(attn_mla_query_class_name(ATTN_MLA_QUERY_VARLEN), "varlen");

    /* build: a mixed batch on the FlashMLA builder (uniform, 128) */
    static const int q[] = {2, 2, 1, 300}, s[] = {40, 90, 17, 300};
    mla_fx f;
    mla_fx_init(&f, 16, 64, 32, 32, 32, ATTN_DTYPE_BF16, ATTN_ELEM_BF16, 16, 4, q, s, 5);
    attn_builder_init bi = {0};
    bi.layer = &f.lp;
    bi.block_size = 16;
    bi.num_blocks = f.nb;
    bi.max_num_reqs = 8;
    bi.max_num_tokens = 512;
    void *st = NULL;
    const void *mdp = NULL;
    CHECK_OK(attn__builder_mla_flashmla.create(&bi, &st));
    CHECK_OK(attn__builder_mla_flashmla.build(st, 0, &f.cm, false, &mdp));
    const attn_mla_metadata *md = mdp;
    CHECK(md->magic == ATTN_MLA_METADATA_MAGIC);
    CHECK(md->query_class == ATTN_MLA_QUERY_UNIFORM && md->reorder_batch_threshold == 128);
    CHECK(md->num_decodes == 2 && md->num_decode_tokens == 4);
    CHECK(md->num_prefills == 2 && md->num_prefill_tokens == 301);
    CHECK(md->max_decode_query_len == 2 && md->max_decode_seq_len == 90);
    CHECK(md->max_prefill_query_len == 300 && md->max_prefill_seq_len == 300);
    CHECK(md->struct_size == sizeof(attn_mla_metadata) && !attn__cpu_mla_md(md));
    CHECK(md->common.block_table == f.bt);
    char js[1024];
    int n = attn__builder_mla_flashmla.describe(md, js, sizeof js);
    CHECK(n > 0 && (size_t)n < sizeof js);
    CHECK_CONTAINS(js, "\"num_decodes\":2");
    CHECK_CONTAINS(js, "\"query_class\":\"uniform\"");
    CHECK_CONTAINS(js, "\"num_prefill_tokens\":301");
    CHECK(!strstr(js, "decode_work"));
    cpu_partition(&f.cm, &bi, 16, -1, -1);

    /* update_block_table: another group's builder reuses md with its table */
    void *st2 = NULL;
    const void *md2p = NULL;
    CHECK_OK(attn__builder_mla_flashmla.create(&bi, &st2));
    int32_t other_bt[64] = {0};
    int64_t other_slots[512] = {0};
    CHECK_OK(
        attn__builder_mla_flashmla.update_block_table(st2, md, other_bt, 16, other_slots, &md2p));
    const attn_mla_metadata *md2 = md2p;
    CHECK(md2 != md && md2->common.block_table == other_bt &&
          md2->common.block_table_stride == 16 && md2->common.slot_mapping == other_slots);
    CHECK(md2->num_decodes == md->num_decodes && md2->num_prefill_tokens == 301);
    CHECK(md->common.block_table == f.bt); /* the source is not changed */
    attn_common_metadata junk = {0};
    CHECK_STATUS(
        attn__builder_mla_flashmla.update_block_table(st2, &junk, other_bt, 16, NULL, &md2p),
        ATTN_BAD_METADATA);

    /* rebuild with another batch: nothing stale */
    static const int q2[] = {1}, s2[] = {7};
    mla_fx g;
    mla_fx_init(&g, 16, 64, 32, 32, 32, ATTN_DTYPE_BF16, ATTN_ELEM_BF16, 16, 1, q2, s2, 6);
    CHECK_OK(attn__builder_mla_flashmla.build(st, 0, &g.cm, false, &mdp));
    md = mdp;
    CHECK(md->num_decodes == 1 && md->num_decode_tokens == 1 && md->num_prefills == 0 &&
          md->num_prefill_tokens == 0);
    CHECK(md->max_prefill_query_len == 0 && md->max_prefill_seq_len == 0);
    CHECK(md->max_decode_seq_len == 7);
    cpu_partition(&g.cm, &bi, 16, 1, 0);
    CHECK(md->common.block_table == g.bt && md->common.num_reqs == 1);

    /* an empty batch */
    attn_common_metadata empty = {0};
    int32_t zero = 0;
    empty.query_start_loc = &zero;
    CHECK_OK(attn__builder_mla_flashmla.build(st, 0, &empty, false, &mdp));
    md = mdp;
    CHECK(md->num_decodes == 0 && md->num_prefills == 0);
    cpu_partition(&empty, &bi, 16, 0, 0);

    /* bad input */
    int32_t bq[] = {0, 5}, bs_[] = {3};
    attn_common_metadata bad = {0};
    bad.query_start_loc = bq;
    bad.seq_lens = bs_;
    bad.num_reqs = 1;
    bad.num_actual_tokens = 5;
    CHECK_STATUS(attn__builder_mla_flashmla.build(st, 0, &bad, false, &mdp), ATTN_BAD_METADATA);
    CHECK_STATUS(attn__builder_mla_flashmla.build(st, 0, NULL, false, &mdp), ATTN_NULL_ARGUMENT);

    attn__builder_mla_flashmla.destroy(st);
    attn__builder_mla_flashmla.destroy(st2);

    /* speculative decoding raises the threshold, except for single-token classes */
    bi.num_speculative_tokens = 3;
    static const int q3[] = {4, 4, 5}, s3[] = {20, 30, 40};
    mla_fx h;
    mla_fx_init(&h, 4, 64, 32, 32, 32, ATTN_DTYPE_BF16, ATTN_ELEM_BF16, 16, 3, q3, s3, 7);
    CHECK_OK(attn__builder_mla_uniform.create(&bi, &st));
    CHECK_OK(attn__builder_mla_uniform.build(st, 0, &h.cm, false, &mdp));
    md = mdp;
    CHECK(md->reorder_batch_threshold == 4 && md->num_decodes == 2 && md->num_decode_tokens == 8);
    attn__builder_mla_uniform.destroy(st);
    CHECK_OK(attn__builder_mla_single.create(&bi, &st));
    CHECK_OK(attn__builder_mla_single.build(st, 0, &h.cm, false, &mdp));
    md = mdp;
    CHECK(md->reorder_batch_threshold == 1 && md->num_decodes == 0);
    attn__builder_mla_single.destroy(st);
    CHECK_OK(attn__builder_mla_varlen.create(&bi, &st));
    CHECK_OK(attn__builder_mla_varlen.build(st, 0, &h.cm, false, &mdp));
    md = mdp;
    CHECK(md->reorder_batch_threshold == 512 && md->num_decodes == 3);
    attn__builder_mla_varlen.destroy(st);

    /* the split-KV partition */
    static const int pq1[] = {1}, ps1[] = {16384};
    check_partition(128, 2, 1, pq1, ps1);
    check_partition(128, 8, 1, pq1, ps1);
    static const int pq2[] = {1, 1, 1, 1, 3, 1}, ps2[] = {1024, 4096, 1, 33, 700, 16000};
    check_partition(128, 2, 6, pq2, ps2);
    check_partition(16, 2, 6, pq2, ps2);
    check_partition(5, 3, 6, pq2, ps2);
    check_partition(200, 2, 6, pq2, ps2);
    static const int pq3[] = {8, 16}, ps3[] = {100, 5000};
    check_partition(16, 2, 2, pq3, ps3);
    check_partition(48, 4, 2, pq3, ps3);

    mla_fx_free(&f);
    mla_fx_free(&g);
    mla_fx_free(&h);
    return attn_test_finish("test_mla_builder");
}
