/* Every shipped preset parses, and its derived specs match hand-written
 * expectations (public architecture facts): head size, heads, KV heads,
 * windows per layer, soft-cap, sinks, MLA dims, attention types, groups. */
#include <math.h>

#include "attn/model.h"
#include "test.h"

static attn_model *load(const char *name)
{
    attn_model *m = NULL;
    attn_status st = attn_model_load(name, &m);
    CHECK_MSG(st == ATTN_OK && m, "load %s: %s %s", name, attn_status_name(st), attn_last_error());
    return m;
}

typedef struct expect {
    const char *name;
    const char *model_type;
    attn_dtype dtype;
    int layers, groups;
    int heads, kv_heads, head_size;
} expect;

static void check_uniform(const attn_model *m, const expect *e)
{
    CHECK_STR(attn_model_name(m), e->name);
    CHECK_STR(attn_model_type(m), e->model_type);
    CHECK(attn_model_dtype(m) == e->dtype);
    CHECK(attn_model_num_layers(m) == e->layers);
    CHECK_MSG(attn_model_num_groups(m) == e->groups, "%s groups %d", e->name,
              attn_model_num_groups(m));
    for (int i = 0; i < attn_model_num_layers(m); i++) {
        const attn_layer_spec *s = attn_model_layer(m, i);
        CHECK(s->num_heads == e->heads);
        CHECK(s->num_kv_heads == e->kv_heads);
        CHECK(s->head_size == e->head_size);
    }
    /* groups partition the layers, in order of first appearance */
    int total = 0, prev_first = -1;
    for (int g = 0; g < attn_model_num_groups(m); g++) {
        const int *l;
        int n = attn_model_group_layers(m, g, &l);
        CHECK(n > 0);
        CHECK(l[0] > prev_first);
        prev_first = l[0];
        for (int k = 0; k < n; k++) {
            CHECK(attn_model_layer_group(m, l[k]) == g);
            CHECK(attn_model_layer(m, l[k]) == attn_model_layer(m, l[k]));
            if (k) CHECK(l[k] > l[k - 1]);
        }
        total += n;
    }
    CHECK(total == attn_model_num_layers(m));
}

static void test_llama(void)
{
    attn_model *m = load("llama-3.1-8b");
    if (!m) return;
    expect e = {"llama-3.1-8b", "llama", ATTN_DTYPE_BF16, 32, 1, 32, 8, 128};
    check_uniform(m, &e);
    const attn_layer_spec *s = attn_model_group_spec(m, 0);
    CHECK(s->sliding_window == 0 && !s->has_sink && !s->use_mla && s->logits_soft_cap == 0);
    CHECK(s->attn_type == ATTN_TYPE_DECODER);
    CHECK(attn_model_group_has_kv_cache(m, 0));
    CHECK_STR(attn_model_layer_name(m, 5), "model.layers.5.self_attn");

    attn_selector_config c;
    attn_model_selector_config(m, s, ATTN_KV_AUTO, 0, &c);
    CHECK(c.head_size == 128 && c.dtype == ATTN_DTYPE_BF16 && c.kv_cache_dtype == ATTN_KV_AUTO);
    CHECK(c.block_size == 0 && !c.use_mla && !c.has_sink && !c.has_sliding_window);
    CHECK(c.num_heads == 0); /* plain attention layers do not pass num_heads */
    CHECK(c.attn_type == ATTN_TYPE_DECODER);
    attn_model_selector_config(m, s, ATTN_KV_FP8, 32, &c);
    CHECK(c.kv_cache_dtype == ATTN_KV_FP8 && c.block_size == 32);

    attn_layer_params p;
    attn_model_layer_params(m, s, ATTN_KV_FP8, &p);
    CHECK(p.num_heads == 32 && p.num_kv_heads == 8 && p.head_size == 128);
    CHECK_NEAR(p.scale, 1.0 / sqrt(128.0), 1e-7);
    CHECK(p.sinks == NULL && p.sliding_window == 0 && p.logits_soft_cap == 0);
    CHECK(p.kv_cache_dtype == ATTN_KV_FP8 && p.dtype == ATTN_DTYPE_BF16);
    attn_model_free(m);
}

static void test_mistral(void)
{
    attn_model *m = load("mistral-7b");
    if (!m) return;
    expect e = {"mistral-7b", "mistral", ATTN_DTYPE_BF16, 32, 1, 32, 8, 128};
    check_uniform(m, &e);
    for (int i = 0; i < 32; i++)
        CHECK(attn_model_layer(m, i)->sliding_window == 4096); /* global window */
    attn_selector_config c;
    attn_model_selector_config(m, attn_model_group_spec(m, 0), ATTN_KV_AUTO, 0, &c);
    CHECK(c.has_sliding_window);
    attn_model_free(m);
}

static void test_qwen(void)
{
    attn_model *m = load("qwen2.5-7b");
    if (!m) return;
    expect e = {"qwen2.5-7b", "qwen2", ATTN_DTYPE_BF16, 28, 1, 28, 4, 128};
    check_uniform(m, &e);
    /* use_sliding_window false: sliding_window 131072 is not applied */
    for (int i = 0; i < 28; i++)
        CHECK(attn_model_layer(m, i)->sliding_window == 0);
    attn_model_free(m);
}

static void test_phi3(void)
{
    attn_model *m = load("phi-3-mini");
    if (!m) return;
    expect e = {"phi-3-mini", "phi3", ATTN_DTYPE_BF16, 32, 1, 32, 32, 96};
    check_uniform(m, &e);
    CHECK(attn_model_layer(m, 0)->sliding_window == 2047);
    attn_layer_params p;
    attn_model_layer_params(m, attn_model_group_spec(m, 0), ATTN_KV_AUTO, &p);
    CHECK_NEAR(p.scale, 1.0 / sqrt(96.0), 1e-7);
    attn_model_free(m);
}

static void test_gemma2(void)
{
    attn_model *m = load("gemma-2-9b");
    if (!m) return;
    expect e = {"gemma-2-9b", "gemma2", ATTN_DTYPE_BF16, 42, 2, 16, 8, 256};
    check_uniform(m, &e);
    for (int i = 0; i < 42; i++) {
        const attn_layer_spec *s = attn_model_layer(m, i);
        CHECK_MSG(s->sliding_window == (i % 2 == 0 ? 4096 : 0), "layer %d window %d", i,
                  s->sliding_window);
        CHECK(s->logits_soft_cap == 50.0f);
        CHECK(attn_model_layer_group(m, i) == i % 2);
    }
    CHECK(attn_model_group_spec(m, 0)->sliding_window == 4096);
    CHECK(attn_model_group_spec(m, 1)->sliding_window == 0);
    attn_selector_config c;
    attn_model_selector_config(m, attn_model_group_spec(m, 0), ATTN_KV_AUTO, 0, &c);
    CHECK(c.has_sliding_window && c.head_size == 256);
    attn_model_selector_config(m, attn_model_group_spec(m, 1), ATTN_KV_AUTO, 0, &c);
    CHECK(!c.has_sliding_window);
    attn_layer_params p;
    attn_model_layer_params(m, attn_model_group_spec(m, 0), ATTN_KV_AUTO, &p);
    CHECK_NEAR(p.scale, 1.0 / 16.0, 1e-7); /* query_pre_attn_scalar 256 */
    CHECK(p.logits_soft_cap == 50.0f && p.sliding_window == 4096);
    attn_model_free(m);
}

static void test_gpt_oss(void)
{
    attn_model *m = load("gpt-oss-20b");
    if (!m) return;
    expect e = {"gpt-oss-20b", "gpt_oss", ATTN_DTYPE_BF16, 24, 2, 64, 8, 64};
    check_uniform(m, &e);
    for (int i = 0; i < 24; i++) {
        const attn_layer_spec *s = attn_model_layer(m, i);
        CHECK(s->has_sink);
        CHECK(s->sliding_window == (i % 2 == 0 ? 128 : 0));
    }
    attn_selector_config c;
    attn_model_selector_config(m, attn_model_group_spec(m, 1), ATTN_KV_AUTO, 0, &c);
    CHECK(c.has_sink && !c.has_sliding_window && c.num_heads == 0);
    attn_layer_params p;
    attn_model_layer_params(m, attn_model_group_spec(m, 0), ATTN_KV_AUTO, &p);
    CHECK(p.sinks == NULL); /* sink values come from the serving side */
    attn_model_free(m);
}

static void test_deepseek(void)
{
    attn_model *m = load("deepseek-v3");
    if (!m) return;
    expect e = {"deepseek-v3", "deepseek_v3", ATTN_DTYPE_BF16, 61, 1, 128, 1, 576};
    check_uniform(m, &e);
    const attn_layer_spec *s = attn_model_group_spec(m, 0);
    CHECK(s->use_mla && !s->use_sparse);
    CHECK(s->kv_lora_rank == 512 && s->qk_rope_head_dim == 64 && s->qk_nope_head_dim == 128 &&
          s->v_head_dim == 128);
    attn_selector_config c;
    attn_model_selector_config(m, s, ATTN_KV_AUTO, 0, &c);
    CHECK(c.use_mla && c.head_size == 576 && c.num_heads == 128);
    attn_layer_params p;
    attn_model_layer_params(m, s, ATTN_KV_AUTO, &p);
    CHECK(p.kv_lora_rank == 512 && p.qk_rope_head_dim == 64 && p.qk_nope_head_dim == 128 &&
          p.v_head_dim == 128);
    /* 1/sqrt(192) times YaRN mscale(40, 1.0)^2 */
    double ms = 0.1 * log(40.0) + 1.0;
    CHECK_NEAR(p.scale, ms * ms / sqrt(192.0), 1e-6);
    attn_model_free(m);
}

static void test_bert(void)
{
    attn_model *m = load("bert-base");
    if (!m) return;
    expect e = {"bert-base", "bert", ATTN_DTYPE_FP32, 12, 1, 12, 12, 64};
    check_uniform(m, &e);
    const attn_layer_spec *s = attn_model_group_spec(m, 0);
    CHECK(s->attn_type == ATTN_TYPE_ENCODER_ONLY);
    CHECK(!attn_model_group_has_kv_cache(m, 0));
    attn_selector_config c;
    attn_model_selector_config(m, s, ATTN_KV_AUTO, 0, &c);
    CHECK(c.attn_type == ATTN_TYPE_ENCODER_ONLY && c.dtype == ATTN_DTYPE_FP32);
    attn_model_free(m);
}

static void test_whisper(void)
{
    attn_model *m = load("whisper-small");
    if (!m) return;
    /* 12 encoder self-attention layers, then 12 decoder blocks x (self, cross) */
    expect e = {"whisper-small", "whisper", ATTN_DTYPE_FP32, 36, 3, 12, 12, 64};
    check_uniform(m, &e);
    for (int i = 0; i < 12; i++)
        CHECK(attn_model_layer(m, i)->attn_type == ATTN_TYPE_ENCODER);
    for (int i = 0; i < 12; i++) {
        CHECK(attn_model_layer(m, 12 + 2 * i)->attn_type == ATTN_TYPE_DECODER);
        CHECK(attn_model_layer(m, 13 + 2 * i)->attn_type == ATTN_TYPE_ENCODER_DECODER);
    }
    CHECK(attn_model_group_spec(m, 0)->attn_type == ATTN_TYPE_ENCODER);
    CHECK(attn_model_group_spec(m, 1)->attn_type == ATTN_TYPE_DECODER);
    CHECK(attn_model_group_spec(m, 2)->attn_type == ATTN_TYPE_ENCODER_DECODER);
    CHECK(!attn_model_group_has_kv_cache(m, 0));
    CHECK(attn_model_group_has_kv_cache(m, 1));
    CHECK(attn_model_group_has_kv_cache(m, 2));
    CHECK_STR(attn_model_layer_name(m, 0), "encoder.layers.0.self_attn");
    CHECK_STR(attn_model_layer_name(m, 13), "decoder.layers.0.encoder_attn");
    attn_model_free(m);
}

static void test_presets_listed(void)
{
    CHECK(attn_model_preset_count() == 9);
    for (int i = 0; i < attn_model_preset_count(); i++) {
        attn_model *m = load(attn_model_preset_name(i));
        attn_model_free(m);
        char path[1024];
        CHECK_OK(attn_model_preset_path(attn_model_preset_name(i), path, sizeof path));
    }
    CHECK(attn_model_preset_name(-1) == NULL);
    CHECK(attn_model_preset_name(attn_model_preset_count()) == NULL);
}

static void test_from_shape(void)
{
    attn_model *m = NULL;
    CHECK_OK(attn_model_from_shape(4, 16, 4, 64, ATTN_DTYPE_FP16, &m));
    if (m) {
        CHECK(attn_model_num_layers(m) == 4 && attn_model_num_groups(m) == 1);
        const int *l;
        CHECK(attn_model_group_layers(m, 0, &l) == 4 && l[3] == 3);
        CHECK(attn_model_dtype(m) == ATTN_DTYPE_FP16);
        CHECK(attn_model_layer(m, 4) == NULL && attn_model_group_spec(m, 1) == NULL);
        CHECK(attn_model_layer_group(m, -1) == -1);
        attn_model_free(m);
    }
    CHECK_STATUS(attn_model_from_shape(4, 16, 5, 64, ATTN_DTYPE_FP16, &m), ATTN_INVALID_ARGUMENT);
    CHECK(m == NULL);
    CHECK_STATUS(attn_model_from_shape(0, 16, 4, 64, ATTN_DTYPE_FP16, &m), ATTN_INVALID_ARGUMENT);
    CHECK_STATUS(attn_model_from_shape(4, 16, 4, 0, ATTN_DTYPE_FP16, &m), ATTN_INVALID_ARGUMENT);
    CHECK_STATUS(attn_model_from_shape(4, 16, 4, 64, ATTN_DTYPE_FP16, NULL), ATTN_NULL_ARGUMENT);
    CHECK_STATUS(attn_model_load("no-such-model", &m), ATTN_NOT_FOUND);
    CHECK_CONTAINS(attn_last_error(), "llama-3.1-8b");
}

int main(void)
{
    test_llama();
    test_mistral();
    test_qwen();
    test_phi3();
    test_gemma2();
    test_gpt_oss();
    test_deepseek();
    test_bert();
    test_whisper();
    test_presets_listed();
    test_from_shape();
    return attn_test_finish("test_model_presets");
}
