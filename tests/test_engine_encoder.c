/* The step loop drives encoder groups (no paged KV cache): bert-base on the
 * local CPU runs its encoder-only layers every step and each request
 * finishes in the step that processes its prompt; a small encoder-only
 * model's output equals REFERENCE on the same inputs (bf16 and fp32, native
 * and emulated on a simulated GPU); prompts are never chunked (refused when
 * longer than the budget, deferred when the rest of a step's budget is too
 * small); no metadata exists for the absent KV groups; Whisper drives its
 * encoder beside the decoder's KV groups with clean block accounting. */
#include "attn/engine.h"
#include "attn/registry.h"
#include "engine/engine_impl.h"
#include "engine_harness.h"
#include "test.h"
#include "util/numeric.h"

static attn_engine *start(const attn_platform *p, const attn_model *m, int budget, bool verify)
{
    attn_engine_config cfg;
    attn_engine_config_init(&cfg);
    cfg.platform = p;
    cfg.model = m;
    cfg.max_num_seqs = 8;
    cfg.max_num_batched_tokens = budget;
    cfg.check_metadata = true;
    attn_engine *e = NULL;
    attn_status st = test_engine_create(&cfg, 7, verify, &e);
    CHECK_MSG(st == ATTN_OK, "%s", e ? attn_engine_error(e) : attn_last_error());
    return e;
}

/* Nothing of a paged cache exists without KV groups. */
static void check_no_kv_metadata(const attn_engine *e)
{
    CHECK(attn_engine_num_groups(e) == 0);
    CHECK(attn_engine_common_metadata(e, 0) == NULL);
    const attn_builder_ops *b = (const attn_builder_ops *)1;
    CHECK(attn_engine_group_metadata(e, 0, &b) == NULL && b == NULL);
    CHECK(attn_engine_describe_metadata(e, 0, NULL, 0, NULL) == -1);
    attn_engine_block_accounting acc;
    CHECK_STATUS(attn_engine_block_stats(e, 0, &acc), ATTN_OUT_OF_RANGE);
}

static void test_bert_local(void)
{
    attn_model *m = NULL;
    CHECK_OK(attn_model_load("bert-base", &m));
    attn_engine *e = start(NULL, m, 512, false);
    if (!e) return;
    CHECK(attn_engine_num_encoder_groups(e) == 1);
    attn_engine_group_info gi;
    CHECK_OK(attn_engine_encoder_group_info_get(e, 0, &gi));
    CHECK(gi.model_group == 0 && gi.num_layers == 12 && gi.layers_run == 1);
    CHECK(gi.kernel_mode == ATTN_KERNEL_NATIVE);
    CHECK_STR(gi.kernel, "CPU_ATTN");
    CHECK_STR(gi.backend, "CPU_ATTN");
    CHECK(gi.builder_type == NULL && gi.num_blocks == 0);
    CHECK_STATUS(attn_engine_encoder_group_info_get(e, 1, &gi), ATTN_OUT_OF_RANGE);
    const int N = 4;
    int64_t added = 0;
    for (int s = 0; s < N; s++) {
        int tokens = 0;
        for (int i = 0; i < 3; i++) {
            /* output_len is ignored: an encoder-only request is its prompt */
            attn_request_desc r = {.prompt_len = 17 + 29 * i + 5 * s, .output_len = i};
            CHECK_OK(attn_engine_add_request(e, &r, NULL));
            tokens += r.prompt_len;
            added++;
        }
        attn_engine_step_stats st;
        attn__harness_stats hst;
        CHECK_OK(test_engine_step(e, &st, &hst));
        CHECK(st.num_reqs == 3 && st.admitted == 3 && st.finished == 3);
        CHECK(st.running == 0 && st.waiting == 0);
        CHECK(st.num_tokens == tokens && st.num_prefill_tokens == tokens);
        CHECK(st.num_decode_tokens == 0);
        CHECK(st.encoder_reqs == 3 && st.encoder_tokens == tokens);
        CHECK(st.encoder_layers_run == 1 && st.layers_run == 0);
        CHECK(st.builds == 0 && st.metadata_ns == 0 && st.blocks_in_use == 0);
        CHECK(st.attention_ns > 0 && st.encoder_attention_ns == st.attention_ns);
        CHECK(!st.emulated && hst.output_finite && hst.output_checksum != 0);
        check_no_kv_metadata(e);
    }
    attn_engine_step_stats st;
    attn__harness_stats hst;
    CHECK_OK(test_engine_step(e, &st, &hst)); /* nothing left: an empty step */
    CHECK(st.num_reqs == 0 && st.encoder_tokens == 0 && st.attention_ns == 0);
    attn_engine_counts c;
    CHECK_OK(attn_engine_get_counts(e, &c));
    CHECK(c.added == added && c.admitted == added && c.finished == added);
    CHECK(c.running == 0 && c.waiting == 0 && c.preemptions == 0);
    CHECK(e->num_free_slots == e->max_seqs && e->num_free_reqs == e->max_requests);
    CHECK_OK(attn_engine_abort_all(e));
    test_engine_free(e);
    attn_model_free(m);
}

/* A prompt is scheduled whole: longer than the budget is refused at once,
 * one that does not fit what is left of a step waits for the next. */
static void test_budget(void)
{
    attn_model *m = NULL;
    CHECK_OK(attn_model_load("bert-base", &m));
    attn_engine *e = start(NULL, m, 100, false);
    if (!e) return;
    attn_request_desc big = {.prompt_len = 101, .output_len = 1};
    CHECK_STATUS(attn_engine_add_request(e, &big, NULL), ATTN_INVALID_ARGUMENT);
    CHECK_CONTAINS(attn_last_error(), "whole prompt in one step");
    attn_request_desc r = {.prompt_len = 60, .output_len = 1};
    CHECK_OK(attn_engine_add_request(e, &r, NULL));
    CHECK_OK(attn_engine_add_request(e, &r, NULL));
    r.prompt_len = 40;
    CHECK_OK(attn_engine_add_request(e, &r, NULL));
    attn_engine_step_stats st;
    attn__harness_stats hst;
    CHECK_OK(test_engine_step(e, &st, &hst));
    CHECK(st.num_reqs == 1 && st.num_tokens == 60 && st.finished == 1 && st.waiting == 2);
    CHECK_OK(test_engine_step(e, &st, &hst));
    CHECK(st.num_reqs == 2 && st.num_tokens == 100 && st.finished == 2 && st.waiting == 0);
    CHECK(st.encoder_tokens == 100);
    test_engine_free(e);
    attn_model_free(m);
}

static const char *small_bert(const char *dtype, char *buf, size_t size)
{
    snprintf(buf, size,
             "{\"model_type\": \"bert\", \"hidden_size\": 128, \"num_hidden_layers\": 2,"
             " \"num_attention_heads\": 2, \"torch_dtype\": \"%s\"}",
             dtype);
    return buf;
}

/* The last layer run: the engine's output against REFERENCE computed here
 * on the same inputs, as max |diff| / max |ref|. */
static double rel_diff_last_layer(attn_engine *e)
{
    const attn__eng_group *g = &e->enc[e->num_enc - 1];
    attn_platform *cpu = NULL;
    CHECK_OK(attn_platform_open("cpu", &cpu));
    const attn_backend *ref = NULL;
    CHECK_OK(attn_backend_resolve(cpu, "REFERENCE", &ref));
    double rel = INFINITY;
    if (ref && ref->kernel && ref->kernel->forward) {
        attn_elem el = attn_dtype_elem(g->params.dtype);
        int ntok = e->enc_cm.num_actual_tokens;
        int Dv = g->spec.head_size_v ? g->spec.head_size_v : g->spec.head_size;
        size_t n = (size_t)ntok * (size_t)g->spec.num_heads * (size_t)Dv;
        void *out = calloc(n, attn_elem_size(el));
        attn_forward_args a = {
            .layer = &g->params, .common = &e->enc_cm, .q = e->q, .out = out, .k = e->k, .v = e->v};
        CHECK(out != NULL);
        if (out) {
            CHECK_OK(ref->kernel->forward(NULL, &a));
            double md = 0, mr = 0;
            for (size_t i = 0; i < n; i++) {
                double x = attn__load_elem(e->out, el, i), y = attn__load_elem(out, el, i);
                md = fabs(x - y) > md ? fabs(x - y) : md;
                mr = fabs(y) > mr ? fabs(y) : mr;
            }
            rel = mr > 0 ? md / mr : md;
            CHECK(mr > 0);
        }
        free(out);
    }
    attn_platform_free(cpu);
    return rel;
}

static void test_reference(const char *machine, const char *dtype, double tol)
{
    char json[256];
    attn_model *m = NULL;
    CHECK_OK(attn_model_from_json(small_bert(dtype, json, sizeof json), "bert-small", &m));
    attn_platform *p = NULL;
    CHECK_OK(attn_platform_open(machine, &p));
    attn_engine *e = start(p, m, 256, true);
    if (!e) goto done;
    bool emulated = strcmp(machine, "cpu") != 0;
    attn_engine_group_info gi;
    CHECK_OK(attn_engine_encoder_group_info_get(e, 0, &gi));
    CHECK(gi.kernel_mode == (emulated ? ATTN_KERNEL_EMULATED : ATTN_KERNEL_NATIVE));
    for (int s = 0; s < 2; s++) {
        for (int i = 0; i < 3; i++) {
            attn_request_desc r = {.prompt_len = 9 + 23 * i + 11 * s, .output_len = 1};
            CHECK_OK(attn_engine_add_request(e, &r, NULL));
        }
        attn_engine_step_stats st;
        attn__harness_stats hst;
        CHECK_OK(test_engine_step(e, &st, &hst));
        CHECK(st.finished == 3 && st.encoder_layers_run == 1 && st.emulated == emulated);
        CHECK_MSG(hst.max_abs_diff <= tol, "%s %s: engine verify diff %g", machine, dtype,
                  hst.max_abs_diff);
        double rel = rel_diff_last_layer(e);
        CHECK_MSG(rel <= tol, "%s %s step %d: relative diff %g > %g", machine, dtype, s, rel, tol);
        check_no_kv_metadata(e);
    }
done:
    test_engine_free(e);
    attn_platform_free(p);
    attn_model_free(m);
}

/* Whisper: its encoder runs over new prompt tokens beside the decoder's
 * paged KV groups, and every block comes back. */
static void test_whisper(void)
{
    attn_model *m = NULL;
    CHECK_OK(attn_model_load("whisper-small", &m));
    attn_engine *e = start(NULL, m, 128, false);
    if (!e) goto done;
    CHECK(attn_engine_num_encoder_groups(e) == 1 && attn_engine_num_groups(e) > 0);
    for (int i = 0; i < 3; i++) {
        attn_request_desc r = {.prompt_len = 30 + 10 * i, .output_len = 2};
        CHECK_OK(attn_engine_add_request(e, &r, NULL));
    }
    attn_engine_step_stats st;
    attn__harness_stats hst;
    CHECK_OK(test_engine_step(e, &st, &hst));
    /* all three prompts (120 tokens) fit the budget of 128 */
    CHECK(st.encoder_reqs == 3 && st.encoder_tokens == 120 && st.num_prefill_tokens == 120);
    CHECK(st.encoder_layers_run == 1 && st.layers_run > 0);
    CHECK_OK(test_engine_step(e, &st, &hst)); /* decodes: no new prompt tokens */
    CHECK(st.num_decode_tokens == 3 && st.encoder_tokens == 0 && st.encoder_layers_run == 0);
    attn_engine_counts c;
    CHECK_OK(attn_engine_get_counts(e, &c));
    CHECK(c.finished == 3 && c.running == 0);
    for (int g = 0; g < attn_engine_num_groups(e); g++) {
        attn_engine_block_accounting b;
        CHECK_OK(attn_engine_block_stats(e, g, &b));
        CHECK(b.num_free == b.num_blocks && b.leaked == 0 && b.consistent &&
              b.rejected_releases == 0);
    }
done:
    test_engine_free(e);
    attn_model_free(m);
}

int main(void)
{
    test_bert_local();
    test_budget();
    test_reference("cpu", "float32", 1e-4);
    test_reference("cpu", "bfloat16", 2e-2);
    test_reference("h100", "bfloat16", 2e-2);
    test_reference("h100", "float32", 1e-4);
    test_whisper();
    return attn_test_finish("engine_encoder");
}
