/* The Hugging Face config reader: family rules on small synthetic configs,
 * and malformed configs, each failing with a status and a message that names
 * the offending field (and building nothing). */
#include <math.h>

#include "attn/model.h"
#include "test.h"

static attn_model *parse_ok(const char *json)
{
    attn_model *m = NULL;
    attn_status st = attn_model_from_json(json, "t", &m);
    CHECK_MSG(st == ATTN_OK && m, "%s: %s", attn_status_name(st), attn_last_error());
    return m;
}

static void parse_fails(int line, const char *json, attn_status want, const char *field)
{
    attn_model *m = (attn_model *)0x1;
    attn_status st = attn_model_from_json(json, "t", &m);
    CHECK_MSG(st == want, "line %d: got %s (%s)", line, attn_status_name(st), attn_last_error());
    CHECK_MSG(m == NULL, "line %d: model set on failure", line);
    char quoted[128];
    snprintf(quoted, sizeof quoted, "'%s'", field);
    CHECK_MSG(strstr(attn_last_error(), quoted) != NULL, "line %d: '%s' does not name %s", line,
              attn_last_error(), quoted);
}
#define FAILS(json, field) parse_fails(__LINE__, json, ATTN_PARSE_ERROR, field)

#define LLAMA_HEAD "\"model_type\":\"llama\",\"num_hidden_layers\":4,\"torch_dtype\":\"float16\""

static void test_rules(void)
{
    /* head size from hidden_size / heads; KV heads default to heads */
    attn_model *m = parse_ok("{" LLAMA_HEAD ",\"num_attention_heads\":8,\"hidden_size\":512}");
    if (m) {
        CHECK(attn_model_layer(m, 0)->head_size == 64);
        CHECK(attn_model_layer(m, 0)->num_kv_heads == 8);
        CHECK(attn_model_dtype(m) == ATTN_DTYPE_FP16);
        attn_model_free(m);
    }
    /* "dtype" (newer transformers) works as well; null fields are absent */
    m = parse_ok("{\"model_type\":\"llama\",\"num_hidden_layers\":2,\"dtype\":\"bfloat16\","
                 "\"num_attention_heads\":4,\"hidden_size\":256,\"head_dim\":null,"
                 "\"sliding_window\":null}");
    if (m) {
        CHECK(attn_model_dtype(m) == ATTN_DTYPE_BF16 && attn_model_layer(m, 1)->head_size == 64);
        CHECK(attn_model_layer(m, 1)->sliding_window == 0);
        attn_model_free(m);
    }
    /* explicit layer_types */
    m = parse_ok("{" LLAMA_HEAD ",\"num_attention_heads\":8,\"head_dim\":64,"
                 "\"sliding_window\":512,\"layer_types\":[\"full_attention\","
                 "\"sliding_attention\",\"sliding_attention\",\"full_attention\"]}");
    if (m) {
        CHECK(attn_model_layer(m, 0)->sliding_window == 0);
        CHECK(attn_model_layer(m, 1)->sliding_window == 512);
        CHECK(attn_model_layer(m, 2)->sliding_window == 512);
        CHECK(attn_model_num_groups(m) == 2);
        CHECK(attn_model_layer_group(m, 0) == 0 && attn_model_layer_group(m, 1) == 1);
        CHECK(attn_model_layer_group(m, 3) == 0);
        attn_model_free(m);
    }
    /* Gemma-3: every 6th layer global */
    m = parse_ok("{\"model_type\":\"gemma3_text\",\"num_hidden_layers\":12,"
                 "\"num_attention_heads\":8,\"num_key_value_heads\":4,\"head_dim\":256,"
                 "\"sliding_window\":1024,\"sliding_window_pattern\":6,"
                 "\"query_pre_attn_scalar\":256,\"torch_dtype\":\"bfloat16\"}");
    if (m) {
        for (int i = 0; i < 12; i++)
            CHECK_MSG(attn_model_layer(m, i)->sliding_window == ((i + 1) % 6 ? 1024 : 0),
                      "gemma3 layer %d", i);
        CHECK(!attn_model_layer(m, 0)->use_mm_prefix);
        attn_model_free(m);
    }
    /* Gemma-3 multimodal wrapper: text fields nested, prefix-LM attention */
    m = parse_ok("{\"model_type\":\"gemma3\",\"torch_dtype\":\"bfloat16\",\"text_config\":{"
                 "\"model_type\":\"gemma3_text\",\"num_hidden_layers\":6,\"num_attention_heads\":8,"
                 "\"num_key_value_heads\":4,\"head_dim\":128,\"sliding_window\":1024}}");
    if (m) {
        CHECK(attn_model_layer(m, 0)->use_mm_prefix);
        CHECK(attn_model_layer(m, 0)->sliding_window == 1024);
        CHECK(attn_model_layer(m, 5)->sliding_window == 0);
        attn_selector_config c;
        attn_model_selector_config(m, attn_model_layer(m, 0), ATTN_KV_AUTO, 0, &c);
        CHECK(c.use_mm_prefix);
        attn_model_free(m);
    }
    /* Qwen2 with use_sliding_window: layers from max_window_layers slide */
    m = parse_ok(
        "{\"model_type\":\"qwen2\",\"num_hidden_layers\":4,\"num_attention_heads\":4,"
        "\"num_key_value_heads\":2,\"hidden_size\":512,\"sliding_window\":256,"
        "\"use_sliding_window\":true,\"max_window_layers\":2,\"torch_dtype\":\"bfloat16\"}");
    if (m) {
        CHECK(attn_model_layer(m, 1)->sliding_window == 0);
        CHECK(attn_model_layer(m, 2)->sliding_window == 256);
        attn_model_free(m);
    }
    /* sparse MLA (DeepSeek-V3.2 style) */
    m = parse_ok("{\"model_type\":\"deepseek_v32\",\"num_hidden_layers\":2,"
                 "\"num_attention_heads\":16,\"kv_lora_rank\":512,\"qk_rope_head_dim\":64,"
                 "\"qk_nope_head_dim\":128,\"v_head_dim\":128,\"index_topk\":2048,"
                 "\"torch_dtype\":\"bfloat16\"}");
    if (m) {
        const attn_layer_spec *s = attn_model_layer(m, 0);
        CHECK(s->use_mla && s->use_sparse && s->index_topk == 2048 && s->head_size == 576);
        attn_layer_params p;
        attn_model_layer_params(m, s, ATTN_KV_AUTO, &p);
        CHECK_NEAR(p.scale, 1.0 / sqrt(192.0), 1e-7); /* no rope_scaling: no mscale */
        attn_model_free(m);
    }
    /* T5: encoder layers, then decoder self + cross per block; unscaled scores */
    m = parse_ok("{\"model_type\":\"t5\",\"d_model\":512,\"d_kv\":64,\"num_heads\":8,"
                 "\"num_layers\":6,\"is_encoder_decoder\":true,\"torch_dtype\":\"float32\"}");
    if (m) {
        CHECK(attn_model_num_layers(m) == 18);
        CHECK(attn_model_num_groups(m) == 3);
        CHECK(attn_model_layer(m, 0)->attn_type == ATTN_TYPE_ENCODER);
        CHECK(attn_model_layer(m, 7)->attn_type == ATTN_TYPE_ENCODER_DECODER);
        attn_layer_params p;
        attn_model_layer_params(m, attn_model_layer(m, 0), ATTN_KV_AUTO, &p);
        CHECK_NEAR(p.scale, 1.0, 1e-7);
        attn_model_free(m);
    }
    /* unknown model type with all standard fields loads (with a note) */
    m = parse_ok("{\"model_type\":\"brand_new\",\"num_hidden_layers\":2,"
                 "\"num_attention_heads\":4,\"hidden_size\":256,\"torch_dtype\":\"bfloat16\"}");
    if (m) {
        CHECK(attn_model_layer(m, 0)->head_size == 64);
        attn_model_free(m);
    }
    /* distilbert names its fields differently */
    m = parse_ok("{\"model_type\":\"distilbert\",\"n_layers\":6,\"n_heads\":12,\"dim\":768}");
    if (m) {
        CHECK(attn_model_layer(m, 0)->attn_type == ATTN_TYPE_ENCODER_ONLY);
        CHECK(attn_model_dtype(m) == ATTN_DTYPE_FP32); /* HF default, recorded as a note */
        attn_model_free(m);
    }
}

static void test_errors(void)
{
    /* missing heads */
    FAILS("{" LLAMA_HEAD ",\"hidden_size\":512}", "num_attention_heads");
    FAILS("{\"model_type\":\"llama\",\"num_attention_heads\":8,\"hidden_size\":512}",
          "num_hidden_layers");
    /* head size undeterminable or not dividing */
    FAILS("{" LLAMA_HEAD ",\"num_attention_heads\":8}", "head_dim");
    FAILS("{" LLAMA_HEAD ",\"num_attention_heads\":7,\"hidden_size\":512}", "hidden_size");
    FAILS("{" LLAMA_HEAD ",\"num_attention_heads\":8,\"num_key_value_heads\":3,"
          "\"hidden_size\":512}",
          "num_key_value_heads");
    /* windows */
    FAILS("{" LLAMA_HEAD ",\"num_attention_heads\":8,\"hidden_size\":512,\"sliding_window\":-1}",
          "sliding_window");
    FAILS("{" LLAMA_HEAD ",\"num_attention_heads\":8,\"hidden_size\":512,"
          "\"layer_types\":[\"sliding_attention\",\"full_attention\",\"full_attention\","
          "\"full_attention\"]}",
          "sliding_window");
    FAILS("{" LLAMA_HEAD ",\"num_attention_heads\":8,\"hidden_size\":512,\"sliding_window\":64,"
          "\"layer_types\":[\"sliding_attention\",\"full_attention\"]}",
          "layer_types");
    FAILS("{" LLAMA_HEAD ",\"num_attention_heads\":8,\"hidden_size\":512,\"sliding_window\":64,"
          "\"layer_types\":[\"full_attention\",\"chunked_attention\",\"full_attention\","
          "\"full_attention\"]}",
          "layer_types[1]");
    FAILS("{" LLAMA_HEAD ",\"num_attention_heads\":8,\"hidden_size\":512,\"sliding_window\":64,"
          "\"layer_types\":[\"full_attention\",3,\"full_attention\",\"full_attention\"]}",
          "layer_types[1]");
    FAILS("{" LLAMA_HEAD ",\"num_attention_heads\":8,\"hidden_size\":512,\"sliding_window\":64,"
          "\"layer_types\":\"sliding_attention\"}",
          "layer_types");
    FAILS("{\"model_type\":\"qwen2\",\"num_hidden_layers\":2,\"num_attention_heads\":8,"
          "\"hidden_size\":512,\"sliding_window\":64,\"use_sliding_window\":false,"
          "\"layer_types\":[\"sliding_attention\",\"full_attention\"]}",
          "use_sliding_window");
    FAILS("{\"model_type\":\"gemma2\",\"num_hidden_layers\":2,\"num_attention_heads\":8,"
          "\"head_dim\":256,\"sliding_window\":4096,"
          "\"layer_types\":[\"full_attention\",\"sliding_attention\"]}",
          "layer_types[0]");
    /* wrong types */
    FAILS("{" LLAMA_HEAD ",\"num_attention_heads\":\"8\",\"hidden_size\":512}",
          "num_attention_heads");
    FAILS("{" LLAMA_HEAD ",\"num_attention_heads\":8.5,\"hidden_size\":512}",
          "num_attention_heads");
    FAILS("{" LLAMA_HEAD ",\"num_attention_heads\":8,\"head_dim\":true}", "head_dim");
    FAILS("{" LLAMA_HEAD ",\"num_attention_heads\":8,\"hidden_size\":512,"
          "\"attn_logit_softcapping\":\"50\"}",
          "attn_logit_softcapping");
    FAILS("{" LLAMA_HEAD ",\"num_attention_heads\":8,\"hidden_size\":512,"
          "\"attn_logit_softcapping\":-5}",
          "attn_logit_softcapping");
    FAILS("{\"model_type\":\"qwen2\",\"num_hidden_layers\":2,\"num_attention_heads\":8,"
          "\"hidden_size\":512,\"use_sliding_window\":\"yes\"}",
          "use_sliding_window");
    FAILS("{\"model_type\":7,\"num_hidden_layers\":2}", "model_type");
    FAILS("{\"model_type\":\"llama\",\"num_hidden_layers\":2,\"num_attention_heads\":8,"
          "\"hidden_size\":512,\"torch_dtype\":\"int8\"}",
          "torch_dtype");
    FAILS("{\"model_type\":\"llama\",\"num_hidden_layers\":2,\"num_attention_heads\":8,"
          "\"hidden_size\":512,\"torch_dtype\":\"float16\",\"dtype\":\"bfloat16\"}",
          "dtype");
    FAILS("{\"text_config\":[1]}", "text_config");
    /* MLA needs all of its dimensions */
    FAILS("{\"model_type\":\"deepseek_v3\",\"num_hidden_layers\":2,\"num_attention_heads\":16,"
          "\"kv_lora_rank\":512,\"qk_nope_head_dim\":128,\"v_head_dim\":128}",
          "qk_rope_head_dim");
    FAILS("{\"model_type\":\"deepseek_v3\",\"num_hidden_layers\":2,\"num_attention_heads\":16,"
          "\"hidden_size\":1024,\"qk_rope_head_dim\":64}",
          "qk_rope_head_dim");
    /* attention libattn does not model is refused by name */
    FAILS("{" LLAMA_HEAD ",\"num_attention_heads\":8,\"hidden_size\":512,\"alibi\":true}", "alibi");
    FAILS("{" LLAMA_HEAD ",\"num_attention_heads\":8,\"hidden_size\":512,"
          "\"attention_chunk_size\":8192}",
          "attention_chunk_size");
    FAILS("{\"model_type\":\"bert\",\"num_hidden_layers\":2,\"num_attention_heads\":12,"
          "\"hidden_size\":768,\"position_embedding_type\":\"relative_key\"}",
          "position_embedding_type");
    /* unknown type without enough fields */
    FAILS("{\"model_type\":\"mystery\",\"hidden_size\":512}", "model_type");
    FAILS("{\"hidden_size\":512}", "num_hidden_layers");
    FAILS("{\"model_type\":\"mystery\",\"is_encoder_decoder\":true}", "model_type");
    /* encoder-only and encoder-decoder families */
    FAILS("{\"model_type\":\"bert\",\"num_hidden_layers\":2,\"num_attention_heads\":5,"
          "\"hidden_size\":768}",
          "hidden_size");
    FAILS("{\"model_type\":\"bert\",\"num_hidden_layers\":2,\"num_attention_heads\":12,"
          "\"hidden_size\":768,\"is_decoder\":true}",
          "is_decoder");
    FAILS("{\"model_type\":\"whisper\",\"encoder_layers\":2,\"decoder_layers\":2,"
          "\"encoder_attention_heads\":12,\"decoder_attention_heads\":12}",
          "d_model");
    FAILS("{\"model_type\":\"whisper\",\"encoder_layers\":2,\"decoder_layers\":2,"
          "\"encoder_attention_heads\":12,\"decoder_attention_heads\":7,\"d_model\":768}",
          "d_model");
    FAILS("{\"model_type\":\"t5\",\"d_model\":512,\"num_heads\":8,\"num_layers\":6}", "d_kv");
    FAILS("{\"model_type\":\"t5\",\"d_model\":512,\"num_heads\":8,\"d_kv\":64,\"num_layers\":6,"
          "\"is_encoder_decoder\":false}",
          "is_encoder_decoder");
    /* not JSON / not an object */
    attn_model *m = NULL;
    CHECK_STATUS(attn_model_from_json("{\"model_type\": ", "t", &m), ATTN_PARSE_ERROR);
    CHECK_CONTAINS(attn_last_error(), "line 1");
    CHECK_STATUS(attn_model_from_json("[1,2]", "t", &m), ATTN_PARSE_ERROR);
    CHECK(m == NULL);
    CHECK_STATUS(attn_model_from_json(NULL, "t", &m), ATTN_NULL_ARGUMENT);
    CHECK_STATUS(attn_model_load("/nonexistent/config.json", &m), ATTN_IO_ERROR);
    CHECK_CONTAINS(attn_last_error(), "/nonexistent/config.json");
}

static void test_file(void)
{
    /* a config.json path is read like a preset; the source is remembered */
    char path[256];
    snprintf(path, sizeof path, "%s/test_model_hf_config.json", attn_test_binary_dir());
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs("{\"model_type\":\"mistral\",\"num_hidden_layers\":3,\"num_attention_heads\":8,"
          "\"num_key_value_heads\":2,\"hidden_size\":1024,\"sliding_window\":128,"
          "\"torch_dtype\":\"bfloat16\"}",
          f);
    fclose(f);
    attn_model *m = NULL;
    CHECK_OK(attn_model_load(path, &m));
    if (m) {
        CHECK_STR(attn_model_source(m), path);
        CHECK(attn_model_layer(m, 2)->sliding_window == 128);
        CHECK(attn_model_layer(m, 2)->num_kv_heads == 2);
        attn_model_free(m);
    }
    remove(path);
}

int main(void)
{
    test_rules();
    test_errors();
    test_file();
    return attn_test_finish("test_model_hf");
}
