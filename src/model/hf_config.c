/* Hugging Face config.json -> per-layer attention specs.
 *
 * Contract: every value that decides a layer spec is read from a named field
 * and checked (type, sign, divisibility, agreement with the fields it must
 * agree with); a failure is ATTN_PARSE_ERROR naming the field, and nothing is
 * built. Fields that do not affect attention (vocab_size, rope_theta, ...) are
 * ignored; fields that would change attention in a way libattn does not model
 * (ALiBi, chunked local attention) are refused by name rather than dropped.
 * Defaults that Hugging Face itself documents (num_key_value_heads =
 * num_attention_heads, float32 when no dtype is stored) are applied and
 * recorded as notes on the model, so nothing is assumed silently.
 *
 * Families:
 *   decoder-only   Llama-like fields; per-layer windows from layer_types, the
 *                  Gemma-2 rule (even layers slide), the Gemma-3 rule
 *                  (sliding_window_pattern), Qwen2's use_sliding_window +
 *                  max_window_layers, else a Mistral-style window on all layers;
 *                  gpt_oss adds sinks on every layer; kv_lora_rank turns on MLA.
 *   encoder-only   BERT family: ENCODER_ONLY layers (no KV cache).
 *   encoder-decoder Whisper/BART family and T5 family: encoder self-attention
 *                  layers (ENCODER, no KV cache, as vLLM runs them), then per
 *                  decoder block a self-attention layer (DECODER) and a
 *                  cross-attention layer (ENCODER_DECODER, caches encoder K/V). */
#include <stdio.h>
#include <string.h>

#include "attn/model.h"
#include "model/hf_read.h"
#include "util/error.h"

static const char *const k_encoder_only[] = {
    "bert", "roberta", "xlm-roberta", "camembert", "electra", "distilbert", "ernie", "mpnet", NULL};
static const char *const k_seq2seq[] = {"whisper", "bart", "mbart", "marian", NULL};
static const char *const k_t5[] = {"t5", "mt5", "umt5", NULL};
/* Decoder families read with the generic rules below (the list only decides
 * whether a model_type is "known"; unknown ones still load if the standard
 * fields are all present, with a note). */
static const char *const k_decoders[] = {
    "llama",       "mistral", "mixtral",    "qwen2",       "qwen2_moe",   "qwen3",
    "qwen3_moe",   "phi3",    "phimoe",     "gemma",       "gemma2",      "gemma3",
    "gemma3_text", "cohere2", "gpt_oss",    "deepseek_v2", "deepseek_v3", "deepseek_v32",
    "granite",     "olmo2",   "starcoder2", "internlm2",   "exaone",      "glm4",
    "yi",          "kimi_k2", NULL};

/* ---- dtype ---------------------------------------------------------------------------- */

static attn_status read_dtype(attn__hf *c)
{
    const char *a = NULL, *b = NULL;
    attn_status st = attn__hf_str(c, "torch_dtype", &a);
    if (st == ATTN_OK) st = attn__hf_str(c, "dtype", &b);
    if (st != ATTN_OK) return st;
    if (!a && !b && c->obj != c->root) {
        /* multimodal wrappers often keep the dtype at the top level */
        attn__hf top = attn__hf_sub(c, c->root, "");
        if ((st = attn__hf_str(&top, "torch_dtype", &a)) != ATTN_OK ||
            (st = attn__hf_str(&top, "dtype", &b)) != ATTN_OK)
            return st;
    }
    attn_dtype da, db;
    if (a && attn_dtype_parse(a, &da) != ATTN_OK)
        return attn__hf_error(c, "torch_dtype", "unknown dtype '%s' (float16, bfloat16, float32)",
                              a);
    if (b && attn_dtype_parse(b, &db) != ATTN_OK)
        return attn__hf_error(c, "dtype", "unknown dtype '%s' (float16, bfloat16, float32)", b);
    if (a && b && da != db)
        return attn__hf_error(c, "dtype", "'%s' contradicts torch_dtype '%s'", b, a);
    if (a || b) {
        c->m->dtype = a ? da : db;
    } else {
        c->m->dtype = ATTN_DTYPE_FP32;
        attn__hf_note(c->m, "no torch_dtype/dtype: float32 (the Hugging Face default)");
    }
    return ATTN_OK;
}

/* ---- encoder-only -------------------------------------------------------------------- */

static attn_status read_encoder_only(attn__hf *c)
{
    const bool distil = !strcmp(c->m->model_type, "distilbert");
    const char *k_layers = distil ? "n_layers" : "num_hidden_layers";
    const char *k_heads = distil ? "n_heads" : "num_attention_heads";
    const char *k_hidden = distil ? "dim" : "hidden_size";
    long long layers = 0, heads = 0, hidden = 0;
    attn_status st;
    bool b = false, present;
    if ((st = attn__hf_need_int(c, k_layers, 1, 100000, &layers)) != ATTN_OK ||
        (st = attn__hf_need_int(c, k_heads, 1, ATTN_MAX_HEADS, &heads)) != ATTN_OK ||
        (st = attn__hf_need_int(c, k_hidden, 1, 1 << 24, &hidden)) != ATTN_OK)
        return st;
    if ((st = attn__hf_refuse_unmodelled(c)) != ATTN_OK) return st;
    if ((st = attn__hf_bool(c, "is_decoder", &b, &present)) != ATTN_OK) return st;
    if (present && b)
        return attn__hf_error(c, "is_decoder",
                              "is true, but model_type '%s' is read as encoder-only",
                              c->m->model_type);
    if (hidden % heads != 0)
        return attn__hf_error(c, k_hidden, "%lld is not divisible by %s %lld", hidden, k_heads,
                              heads);
    attn_model *m;
    if ((st = attn__hf_model_alloc(c, (int)layers, &m)) != ATTN_OK) return st;
    for (int i = 0; i < layers; i++) {
        attn_layer_spec *s = &m->layers[i];
        s->attn_type = ATTN_TYPE_ENCODER_ONLY;
        s->num_heads = s->num_kv_heads = (int)heads;
        s->head_size = (int)(hidden / heads);
        snprintf(m->layer_names[i], sizeof m->layer_names[i], "encoder.layer.%d.attention", i);
    }
    attn_model_free(c->m);
    c->m = m;
    return ATTN_OK;
}

/* ---- encoder-decoder ----------------------------------------------------------------- */

static attn_status read_seq2seq(attn__hf *c, bool t5)
{
    long long enc_layers = 0, dec_layers = 0, enc_heads = 0, dec_heads = 0, d_model = 0, d_kv = 0;
    bool present;
    attn_status st;
    if (t5) {
        if ((st = attn__hf_need_int(c, "num_layers", 1, 100000, &enc_layers)) != ATTN_OK ||
            (st = attn__hf_int(c, "num_decoder_layers", 1, 100000, &dec_layers, &present)) !=
                ATTN_OK)
            return st;
        if (!present) {
            dec_layers = enc_layers;
            attn__hf_note(c->m, "num_decoder_layers absent: %lld (= num_layers)", enc_layers);
        }
        if ((st = attn__hf_need_int(c, "num_heads", 1, ATTN_MAX_HEADS, &enc_heads)) != ATTN_OK ||
            (st = attn__hf_need_int(c, "d_kv", 1, ATTN_MAX_HEAD_SIZE, &d_kv)) != ATTN_OK)
            return st;
        dec_heads = enc_heads;
    } else {
        if ((st = attn__hf_need_int(c, "encoder_layers", 1, 100000, &enc_layers)) != ATTN_OK ||
            (st = attn__hf_need_int(c, "decoder_layers", 1, 100000, &dec_layers)) != ATTN_OK ||
            (st = attn__hf_need_int(c, "encoder_attention_heads", 1, ATTN_MAX_HEADS, &enc_heads)) !=
                ATTN_OK ||
            (st = attn__hf_need_int(c, "decoder_attention_heads", 1, ATTN_MAX_HEADS, &dec_heads)) !=
                ATTN_OK ||
            (st = attn__hf_need_int(c, "d_model", 1, 1 << 24, &d_model)) != ATTN_OK)
            return st;
        if (d_model % enc_heads != 0)
            return attn__hf_error(c, "d_model",
                                  "%lld is not divisible by encoder_attention_heads %lld", d_model,
                                  enc_heads);
        if (d_model % dec_heads != 0)
            return attn__hf_error(c, "d_model",
                                  "%lld is not divisible by decoder_attention_heads %lld", d_model,
                                  dec_heads);
    }
    if ((st = attn__hf_refuse_unmodelled(c)) != ATTN_OK) return st;
    bool encdec = true;
    if ((st = attn__hf_bool(c, "is_encoder_decoder", &encdec, &present)) != ATTN_OK) return st;
    if (present && !encdec)
        return attn__hf_error(c, "is_encoder_decoder",
                              "is false, but model_type '%s' is an "
                              "encoder-decoder family",
                              c->m->model_type);
    int total = (int)(enc_layers + 2 * dec_layers);
    attn_model *m;
    if ((st = attn__hf_model_alloc(c, total, &m)) != ATTN_OK) return st;
    if (t5) {
        m->query_pre_attn_scalar = 1.0f; /* T5 folds the 1/sqrt(d) into its weights */
        attn__hf_note(m,
                      "T5 relative position bias is not modelled (it does not affect selection)");
    }
    int L = 0;
    for (int i = 0; i < enc_layers; i++, L++) {
        attn_layer_spec *s = &m->layers[L];
        s->attn_type = ATTN_TYPE_ENCODER;
        s->num_heads = s->num_kv_heads = (int)enc_heads;
        s->head_size = t5 ? (int)d_kv : (int)(d_model / enc_heads);
        snprintf(m->layer_names[L], sizeof m->layer_names[L],
                 t5 ? "encoder.block.%d.layer.0.SelfAttention" : "encoder.layers.%d.self_attn", i);
    }
    for (int i = 0; i < dec_layers; i++) {
        for (int k = 0; k < 2; k++, L++) {
            attn_layer_spec *s = &m->layers[L];
            s->attn_type = k == 0 ? ATTN_TYPE_DECODER : ATTN_TYPE_ENCODER_DECODER;
            s->num_heads = s->num_kv_heads = (int)dec_heads;
            s->head_size = t5 ? (int)d_kv : (int)(d_model / dec_heads);
            if (t5)
                snprintf(m->layer_names[L], sizeof m->layer_names[L],
                         k == 0 ? "decoder.block.%d.layer.0.SelfAttention"
                                : "decoder.block.%d.layer.1.EncDecAttention",
                         i);
            else
                snprintf(m->layer_names[L], sizeof m->layer_names[L],
                         k == 0 ? "decoder.layers.%d.self_attn" : "decoder.layers.%d.encoder_attn",
                         i);
        }
    }
    attn_model_free(c->m);
    c->m = m;
    return ATTN_OK;
}

/* ---- entry --------------------------------------------------------------------------- */

static attn_status parse(attn__hf *c)
{
    attn_status st;
    const attn__json *tc = attn__json_get(c->root, "text_config");
    if (tc && attn__json_type_of(tc) != ATTN_JSON_NULL) {
        if (attn__json_type_of(tc) != ATTN_JSON_OBJECT)
            return attn__hf_error(c, "text_config", "must be an object, got %s",
                                  attn__hf_type_name(tc));
        /* a wrapper (multimodal) config: the language model's fields are nested */
        if (!attn__hf_field(c, "num_attention_heads") && !attn__hf_field(c, "num_hidden_layers")) {
            c->obj = tc;
            c->prefix = "text_config.";
        }
    }
    const char *mt = NULL;
    if ((st = attn__hf_str(c, "model_type", &mt)) != ATTN_OK) return st;
    if (!mt && c->obj != c->root) {
        attn__hf top = attn__hf_sub(c, c->root, "");
        if ((st = attn__hf_str(&top, "model_type", &mt)) != ATTN_OK) return st;
    }
    snprintf(c->m->model_type, sizeof c->m->model_type, "%s", mt ? mt : "");
    if ((st = read_dtype(c)) != ATTN_OK) return st;

    if (mt && attn__hf_in_list(mt, k_encoder_only)) return read_encoder_only(c);
    if (mt && attn__hf_in_list(mt, k_seq2seq)) return read_seq2seq(c, false);
    if (mt && attn__hf_in_list(mt, k_t5)) return read_seq2seq(c, true);

    bool encdec = false, present;
    if ((st = attn__hf_bool(c, "is_encoder_decoder", &encdec, &present)) != ATTN_OK) return st;
    if (encdec)
        return attn__hf_error(c, "model_type",
                              "'%s' is an encoder-decoder model libattn does not know (known: "
                              "whisper, bart, mbart, marian, t5, mt5, umt5)",
                              mt ? mt : "(missing)");
    if (!mt || !attn__hf_in_list(mt, k_decoders)) {
        /* unknown family: only the standard decoder fields, all present, will do */
        static const char *const need[] = {"num_hidden_layers", "num_attention_heads", NULL};
        for (const char *const *k = need; *k; k++)
            if (!attn__hf_field(c, *k))
                return attn__hf_error(c, mt ? "model_type" : *k,
                                      mt ? "'%s' is not a known model type and the standard "
                                           "decoder field '%s' is missing"
                                         : "model_type is missing and '%s%s' is missing too",
                                      mt ? mt : "", *k);
        if (!attn__hf_field(c, "head_dim") && !attn__hf_field(c, "hidden_size"))
            return attn__hf_error(c, "head_dim",
                                  "model_type '%s' is not known and neither head_dim nor "
                                  "hidden_size is given",
                                  mt ? mt : "(missing)");
        attn__hf_note(c->m,
                      "model_type '%s' not known: read as a decoder-only transformer from its "
                      "standard fields",
                      mt ? mt : "(missing)");
    }
    return attn__hf_read_decoder(c);
}

attn_status attn__model_from_hf(const char *json, size_t len, const char *name, const char *what,
                                attn_model **out)
{
    *out = NULL;
    attn__json *root = NULL;
    char err[256];
    attn_status st = attn__json_parse(json, len, &root, err, sizeof err);
    if (st != ATTN_OK) return attn__fail(ATTN_PARSE_ERROR, "%s: invalid JSON: %s", what, err);
    if (attn__json_type_of(root) != ATTN_JSON_OBJECT) {
        attn__json_free(root);
        return attn__fail(ATTN_PARSE_ERROR, "%s: a model config must be a JSON object", what);
    }
    attn__hf c = {root, root, "", what, NULL};
    /* a one-layer placeholder carries name, model_type, dtype and notes until
     * the family reader knows the layer count */
    if ((st = attn__model_alloc(name, 1, &c.m)) != ATTN_OK) {
        attn__json_free(root);
        return st;
    }
    st = parse(&c);
    if (st == ATTN_OK) st = attn__model_finish(c.m);
    attn__json_free(root);
    if (st != ATTN_OK) {
        attn_model_free(c.m);
        return st;
    }
    *out = c.m;
    return ATTN_OK;
}
