/* The merge of partial attention states: exact against attention over all
 * keys, the LSE base read from each part's backend (a base-2 LSE merged as
 * natural log is wrong beyond tolerance; the flag makes it right), parts
 * without keys, refusal of a backend that cannot return an LSE, and
 * argument errors that write nothing. Also the DCP token placement against
 * vLLM's get_dcp_local_seq_lens and its slot rule. */
#include <math.h>

#include "attn/dcp.h"
#include "attn/merge.h"
#include "test.h"

#define D    16
#define KEYS 40
#define ROWS 6

static double g_scores[ROWS][KEYS], g_vals[KEYS][D];

/* Attention of every row over keys [k0, k1): normalised output and
 * natural-log LSE. */
static void attend(int k0, int k1, float out[ROWS][D], float lse[ROWS])
{
    for (int r = 0; r < ROWS; r++) {
        double m = -INFINITY, s = 0, o[D] = {0};
        for (int k = k0; k < k1; k++)
            m = g_scores[r][k] > m ? g_scores[r][k] : m;
        for (int k = k0; k < k1; k++) {
            double p = exp(g_scores[r][k] - m);
            s += p;
            for (int d = 0; d < D; d++)
                o[d] += p * g_vals[k][d];
        }
        for (int d = 0; d < D; d++)
            out[r][d] = (float)(o[d] / s);
        lse[r] = (float)(m + log(s));
    }
}

static double max_diff(float a[ROWS][D], float b[ROWS][D])
{
    double e = 0;
    for (int r = 0; r < ROWS; r++)
        for (int d = 0; d < D; d++)
            e = fmax(e, fabs((double)a[r][d] - (double)b[r][d]));
    return e;
}

static void test_merge(void)
{
    uint64_t s = 12345;
    for (int r = 0; r < ROWS; r++)
        for (int k = 0; k < KEYS; k++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            /* rows with very different score ranges on the two halves */
            g_scores[r][k] = ((double)(s >> 40) / 16777216.0 - 0.5) * 8.0 + (k < 17 ? r : -r);
        }
    for (int k = 0; k < KEYS; k++)
        for (int d = 0; d < D; d++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            g_vals[k][d] = (double)(s >> 40) / 16777216.0 * 2.0 - 1.0;
        }
    float full[ROWS][D], fl[ROWS], a[ROWS][D], al[ROWS], b[ROWS][D], bl[ROWS], m[ROWS][D], ml[ROWS];
    attend(0, KEYS, full, fl);
    attend(0, 17, a, al);
    attend(17, KEYS, b, bl);
    attn_partial_state parts[2] = {{.out = &a[0][0], .lse = al, .base = ATTN_LSE_BASE_E},
                                   {.out = &b[0][0], .lse = bl, .base = ATTN_LSE_BASE_E}};
    CHECK_OK(attn_merge_states(parts, 2, ROWS, D, &m[0][0], ml));
    CHECK_MSG(max_diff(m, full) < 1e-5, "natural merge error %.3g", max_diff(m, full));
    for (int r = 0; r < ROWS; r++)
        CHECK(fabs(ml[r] - fl[r]) < 1e-5);

    /* the second part comes from a base-2 backend: LSE / ln 2 */
    float bl2[ROWS];
    for (int r = 0; r < ROWS; r++)
        bl2[r] = (float)(bl[r] / log(2.0));
    attn_backend_desc base2 = {
        .name = "BASE2_BACKEND", .can_return_lse_for_decode = true, .lse_base = ATTN_LSE_BASE_2};
    CHECK_OK(attn_partial_from_backend(&base2, &b[0][0], bl2, &parts[1]));
    CHECK(parts[1].base == ATTN_LSE_BASE_2);
    CHECK_OK(attn_merge_states(parts, 2, ROWS, D, &m[0][0], ml));
    double right = max_diff(m, full);
    CHECK_MSG(right < 1e-5, "base-2 merge read by its flag: error %.3g", right);
    for (int r = 0; r < ROWS; r++)
        CHECK(fabs(ml[r] - fl[r]) < 1e-5); /* out LSE natural */
    /* the same numbers read as natural log: the denominator is corrupted */
    parts[1].base = ATTN_LSE_BASE_E;
    CHECK_OK(attn_merge_states(parts, 2, ROWS, D, &m[0][0], ml));
    double wrong = max_diff(m, full);
    CHECK_MSG(wrong > 1e-2, "base-2 LSE misread as natural: error %.3g, want > 1e-2", wrong);
    printf("merge: base-2 LSE read by its flag: max error %.3g; misread as natural log: %.3g\n",
           right, wrong);

    /* a part with no keys (lse -inf) contributes nothing; +inf/NaN likewise */
    float none[ROWS], ninf[ROWS];
    for (int r = 0; r < ROWS; r++)
        none[r] = -INFINITY, ninf[r] = NAN;
    attn_partial_state p3[3] = {{.out = &b[0][0], .lse = none},
                                {.out = &full[0][0], .lse = fl},
                                {.out = &a[0][0], .lse = ninf}};
    CHECK_OK(attn_merge_states(p3, 3, ROWS, D, &m[0][0], ml));
    CHECK(max_diff(m, full) == 0);
    attn_partial_state p0[1] = {{.out = &a[0][0], .lse = none}};
    CHECK_OK(attn_merge_states(p0, 1, ROWS, D, &m[0][0], ml));
    CHECK(m[0][0] == 0.0f && isinf(ml[0]) && ml[0] < 0);

    /* argument errors write nothing */
    m[0][0] = 42.0f;
    CHECK_STATUS(attn_merge_states(parts, 0, ROWS, D, &m[0][0], ml), ATTN_INVALID_ARGUMENT);
    CHECK_STATUS(attn_merge_states(parts, 2, ROWS, 0, &m[0][0], ml), ATTN_INVALID_ARGUMENT);
    attn_partial_state bad = parts[0];
    bad.base = (attn_lse_base)7;
    CHECK_STATUS(attn_merge_states(&bad, 1, ROWS, D, &m[0][0], ml), ATTN_INVALID_ARGUMENT);
    bad = parts[0];
    bad.lse = NULL;
    CHECK_STATUS(attn_merge_states(&bad, 1, ROWS, D, &m[0][0], ml), ATTN_NULL_ARGUMENT);
    CHECK(m[0][0] == 42.0f);

    /* a backend that cannot return an LSE is refused, by name */
    attn_backend_desc nolse = {.name = "NO_LSE", .can_return_lse_for_decode = false};
    attn_partial_state keep = {.out = NULL};
    CHECK_STATUS(attn_partial_from_backend(&nolse, &a[0][0], al, &keep), ATTN_UNSUPPORTED);
    CHECK(strstr(attn_last_error(), "NO_LSE cannot return the softmax LSE for decode") != NULL);
    CHECK(keep.out == NULL);
    CHECK_STATUS(attn_merge_check_backend(&nolse), ATTN_UNSUPPORTED);
    attn_backend nolse_b = {.desc = &nolse};
    attn_layer_params lp = {.num_heads = 1, .num_kv_heads = 1, .head_size = 64};
    attn_comm *self = NULL;
    CHECK_OK(attn_comm_self(&self));
    attn_dcp_init di = {.struct_size = sizeof di,
                        .backend = &nolse_b,
                        .layer = &lp,
                        .comm = self,
                        .block_size = 16,
                        .num_blocks = 4,
                        .max_num_tokens = 4,
                        .max_blocks_per_req = 4};
    attn_dcp *d = (attn_dcp *)&di;
    CHECK_STATUS(attn_dcp_create(&di, &d), ATTN_UNSUPPORTED);
    CHECK(d == NULL);
    attn_comm_free(self);
}

/* vLLM's get_dcp_local_seq_lens, written from its formula. */
static int32_t vllm_local(int32_t len, int W, int rank, int I)
{
    int32_t base = len / I / W * I;
    int32_t rem = len - base * W - rank * I;
    rem = rem < 0 ? 0 : rem > I ? I : rem;
    return base + rem;
}

static void test_placement(void)
{
    const int bs = 16;
    int32_t row[64];
    for (int i = 0; i < 64; i++)
        row[i] = 63 - i;
    int Ws[] = {1, 2, 3, 4}, Is[] = {1, 2, 4, 16};
    for (int wi = 0; wi < 4; wi++)
        for (int ii = 0; ii < 4; ii++) {
            int W = Ws[wi], I = Is[ii];
            for (int rank = 0; rank < W; rank++) {
                int32_t held = 0;
                for (int32_t p = 0; p < 600; p++) {
                    int64_t slot = attn_dcp_local_slot(p, row, W, rank, I, bs);
                    bool mine = attn_dcp_owner(p, W, I, bs) == rank;
                    CHECK(mine == (slot >= 0));
                    if (mine) {
                        /* dense in position order through the block table */
                        CHECK(slot == (int64_t)row[held / bs] * bs + held % bs);
                        held++;
                    }
                    CHECK(attn_dcp_local_len(p + 1, W, rank, I) == held);
                    CHECK(vllm_local(p + 1, W, rank, I) == held);
                }
            }
        }
    CHECK(attn_dcp_local_len(0, 2, 0, 1) == 0);
    CHECK(attn_dcp_local_len(5, 2, 0, 4) == 4 && attn_dcp_local_len(5, 2, 1, 4) == 1);
    CHECK_OK(attn_dcp_check(2, 1, 16, 16));
    CHECK_STATUS(attn_dcp_check(2, 2, 1, 16), ATTN_INVALID_ARGUMENT);
    CHECK_STATUS(attn_dcp_check(2, 0, 3, 16), ATTN_INVALID_ARGUMENT);
    CHECK(strstr(attn_last_error(), "interleave size 3 must be >= 1 and divide the block size 16"));
}

static void test_comm_self(void)
{
    attn_comm *c = NULL;
    CHECK_OK(attn_comm_self(&c));
    CHECK(attn_comm_size(c) == 1 && attn_comm_rank(c) == 0);
    CHECK_STR(attn_comm_name(c), "self");
    int x = 7, y = 0;
    CHECK_OK(attn_comm_allgather(c, &x, sizeof x, &y));
    CHECK(y == 7);
    CHECK_STATUS(attn_comm_set_timeout(c, 0), ATTN_INVALID_ARGUMENT);
    CHECK(attn_comm_timeout(c) == ATTN_COMM_DEFAULT_TIMEOUT_S);
    char msg[256];
    CHECK_OK(attn_dcp_agree(c, "backend CPU_ATTN", msg, sizeof msg));
    attn_comm_free(c);
}

/* One rank (the self communicator): attn_dcp_forward equals the plain
 * CPU_ATTN forward, and its buffers are leak-checked under ASan here, where
 * no MPI runtime muddies the report. */
static void test_dcp_one_rank(void)
{
    enum { NH = 4, NKV = 2, HS = 64, BSZ = 16, NB = 4 };
    const attn_platform *p = NULL;
    const attn_backend *b = NULL;
    CHECK_OK(attn_platform_current(&p));
    CHECK_OK(attn_backend_resolve(p, "CPU_ATTN", &b));
    if (!b) return;
    static float cache[2 * NB * NKV * BSZ * HS], q[2 * NH * HS], o1[2 * NH * HS], o2[2 * NH * HS];
    uint64_t s = 99;
    for (size_t i = 0; i < sizeof cache / sizeof cache[0]; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        cache[i] = (float)((double)(s >> 40) / 16777216.0 - 0.5);
    }
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++)
        q[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    attn_kv_view kv = {.data = cache,
                       .elem = ATTN_ELEM_F32,
                       .num_blocks = NB,
                       .block_size = BSZ,
                       .num_kv_heads = NKV,
                       .head_size = HS,
                       .head_size_v = HS,
                       .v_offset = NB * NKV * BSZ * HS,
                       .stride_block = NKV * BSZ * HS,
                       .stride_token = HS,
                       .stride_head = BSZ * HS,
                       .k_scale = 1,
                       .v_scale = 1};
    int32_t qsl[3] = {0, 1, 2}, sl[2] = {37, 5}, bt[2][3] = {{2, 0, 3}, {1, 0, 0}};
    attn_common_metadata cm = {.query_start_loc = qsl,
                               .seq_lens = sl,
                               .num_reqs = 2,
                               .num_actual_tokens = 2,
                               .max_query_len = 1,
                               .max_seq_len = 37,
                               .block_table = &bt[0][0],
                               .block_table_stride = 3,
                               .causal = true,
                               .block_size = BSZ};
    attn_layer_params lp = {.num_heads = NH,
                            .num_kv_heads = NKV,
                            .head_size = HS,
                            .attn_type = ATTN_TYPE_DECODER,
                            .dtype = ATTN_DTYPE_FP32};
    attn_forward_args fa = {.layer = &lp, .common = &cm, .q = q, .kv = &kv, .out = o1};
    attn_kernel *k = NULL;
    CHECK_OK(attn_kernel_open(b, &lp, NULL, &k));
    CHECK_OK(attn_kernel_forward(k, &fa));
    attn_kernel_close(k);
    attn_comm *self = NULL;
    CHECK_OK(attn_comm_self(&self));
    attn_dcp_init di = {.struct_size = sizeof di,
                        .backend = b,
                        .layer = &lp,
                        .comm = self,
                        .block_size = BSZ,
                        .num_blocks = NB,
                        .max_num_tokens = 4,
                        .max_blocks_per_req = 3};
    attn_dcp *d = NULL;
    CHECK_OK(attn_dcp_create(&di, &d));
    attn_dcp_args a = {.cm = &cm, .kv = &kv, .q = q, .out = o2};
    CHECK_OK(attn_dcp_forward(d, &a));
    double e = 0;
    for (int i = 0; i < 2 * NH * HS; i++)
        e = fmax(e, fabs((double)o1[i] - (double)o2[i]));
    CHECK_MSG(e < 1e-6, "one-rank DCP vs plain forward: %.3g", e);
    int64_t slots[2];
    CHECK_OK(attn_dcp_slot_mapping(d, &cm, slots));
    CHECK(slots[0] == 3 * BSZ + 36 % BSZ && slots[1] == 1 * BSZ + 4);
    /* inconsistent metadata is refused and writes nothing */
    sl[1] = 0;
    o2[0] = 42.0f;
    CHECK_STATUS(attn_dcp_forward(d, &a), ATTN_BAD_METADATA);
    CHECK(o2[0] == 42.0f);
    attn_dcp_free(d);
    /* sinks need one denominator: refused */
    float sinks[NH] = {0};
    lp.sinks = sinks;
    CHECK_STATUS(attn_dcp_create(&di, &d), ATTN_UNSUPPORTED);
    attn_comm_free(self);
}

int main(void)
{
    test_dcp_one_rank();
    test_merge();
    test_placement();
    test_comm_self();
    return attn_test_finish("test_cp_merge");
}
