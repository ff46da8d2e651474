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
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/model.h"
#include "model/model_impl.h"
#include "util/error.h"
#include "util/json.h"

typedef struct hf {
    const attn__json *root; /* top-level object */
    const attn__json *obj;  /* where the text-model fields are (root or text_config) */
    const char *prefix;     /* "" or "text_config." */
    const char *what;       /* input name for messages */
    attn_model *m;
} hf;

static attn_status field_error(const hf *c, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static attn_status field_error(const hf *c, const char *field, const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return attn__fail(ATTN_PARSE_ERROR, "%s: field '%s%s': %s", c->what, c->prefix, field, msg);
}

static void note(attn_model *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void note(attn_model *m, const char *fmt, ...)
{
    if (m->num_notes >= (int)(sizeof m->notes / sizeof m->notes[0])) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->notes[m->num_notes++], sizeof m->notes[0], fmt, ap);
    va_end(ap);
}

/* Field lookup in c->obj; JSON null counts as absent (HF writes "head_dim": null). */
static const attn__json *field(const hf *c, const char *key)
{
    const attn__json *v = attn__json_get(c->obj, key);
    if (v && attn__json_type_of(v) == ATTN_JSON_NULL) return NULL;
    return v;
}

static const char *type_name(const attn__json *v)
{
    return attn__json_type_name(attn__json_type_of(v));
}

/* Integer field. Absent: *present=false and ATTN_OK. */
static attn_status get_int(const hf *c, const char *key, long long lo, long long hi, long long *out,
                           bool *present)
{
    const attn__json *v = field(c, key);
    *present = v != NULL;
    if (!v) return ATTN_OK;
    long long x;
    if (attn__json_type_of(v) != ATTN_JSON_NUMBER)
        return field_error(c, key, "must be an integer, got %s", type_name(v));
    if (!attn__json_is_int(v, &x))
        return field_error(c, key, "must be an integer, got %g", attn__json_number(v));
    if (x < lo || x > hi)
        return field_error(c, key, "%lld is out of range [%lld, %lld]", x, lo, hi);
    *out = x;
    return ATTN_OK;
}

static attn_status need_int(const hf *c, const char *key, long long lo, long long hi,
                            long long *out)
{
    bool present;
    attn_status st = get_int(c, key, lo, hi, out, &present);
    if (st == ATTN_OK && !present)
        return field_error(c, key, "is missing (required for model_type '%s')",
                           c->m->model_type[0] ? c->m->model_type : "(none)");
    return st;
}

static attn_status get_num(const hf *c, const char *key, double *out, bool *present)
{
    const attn__json *v = field(c, key);
    *present = v != NULL;
    if (!v) return ATTN_OK;
    if (attn__json_type_of(v) != ATTN_JSON_NUMBER)
        return field_error(c, key, "must be a number, got %s", type_name(v));
    *out = attn__json_number(v);
    return ATTN_OK;
}

static attn_status get_bool(const hf *c, const char *key, bool *out, bool *present)
{
    const attn__json *v = field(c, key);
    *present = v != NULL;
    if (!v) return ATTN_OK;
    if (attn__json_type_of(v) != ATTN_JSON_BOOL)
        return field_error(c, key, "must be true or false, got %s", type_name(v));
    *out = attn__json_bool(v);
    return ATTN_OK;
}

static attn_status get_str(const hf *c, const char *key, const char **out)
{
    const attn__json *v = field(c, key);
    *out = NULL;
    if (!v) return ATTN_OK;
    if (attn__json_type_of(v) != ATTN_JSON_STRING)
        return field_error(c, key, "must be a string, got %s", type_name(v));
    *out = attn__json_string(v);
    return ATTN_OK;
}

static bool in_list(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (!strcmp(s, *list)) return true;
    return false;
}

static const char *const k_encoder_only[] = {
    "bert", "roberta", "xlm-roberta", "camembert", "electra", "distilbert", "ernie", "mpnet", NULL};
static const char *const k_seq2seq[] = {"whisper", "bart", "mbart", "marian", NULL};
static const char *const k_t5[] = {"t5", "mt5", "umt5", NULL};
/* vLLM's prefix-LM multimodal models: image tokens attend bidirectionally. */
static const char *const k_qwen[] = {"qwen2", "qwen2_moe", "qwen3", "qwen3_moe", NULL};
static const char *const k_mm_prefix[] = {"gemma3", "paligemma", NULL};
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

static attn_status read_dtype(hf *c)
{
    const char *a = NULL, *b = NULL;
    attn_status st = get_str(c, "torch_dtype", &a);
    if (st == ATTN_OK) st = get_str(c, "dtype", &b);
    if (st != ATTN_OK) return st;
    if (!a && !b && c->obj != c->root) {
        /* multimodal wrappers often keep the dtype at the top level */
        hf top = *c;
        top.obj = c->root;
        top.prefix = "";
        if ((st = get_str(&top, "torch_dtype", &a)) != ATTN_OK ||
            (st = get_str(&top, "dtype", &b)) != ATTN_OK)
            return st;
    }
    attn_dtype da, db;
    if (a && attn_dtype_parse(a, &da) != ATTN_OK)
        return field_error(c, "torch_dtype", "unknown dtype '%s' (float16, bfloat16, float32)", a);
    if (b && attn_dtype_parse(b, &db) != ATTN_OK)
        return field_error(c, "dtype", "unknown dtype '%s' (float16, bfloat16, float32)", b);
    if (a && b && da != db)
        return field_error(c, "dtype", "'%s' contradicts torch_dtype '%s'", b, a);
    if (a || b) {
        c->m->dtype = a ? da : db;
    } else {
        c->m->dtype = ATTN_DTYPE_FP32;
        note(c->m, "no torch_dtype/dtype: float32 (the Hugging Face default)");
    }
    return ATTN_OK;
}

/* Refuse fields that change attention in ways libattn does not model. */
static attn_status refuse_unmodelled(const hf *c)
{
    bool b = false, present;
    attn_status st;
    if ((st = get_bool(c, "alibi", &b, &present)) != ATTN_OK) return st;
    if (present && b) return field_error(c, "alibi", "ALiBi position biases are not supported");
    if ((st = get_bool(c, "use_alibi", &b, &present)) != ATTN_OK) return st;
    if (present && b) return field_error(c, "use_alibi", "ALiBi position biases are not supported");
    const char *pe = NULL;
    if ((st = get_str(c, "position_embedding_type", &pe)) != ATTN_OK) return st;
    if (pe && strcmp(pe, "absolute") != 0 && strcmp(pe, "rope") != 0)
        return field_error(c, "position_embedding_type", "'%s' is not supported (absolute only)",
                           pe);
    long long chunk;
    if ((st = get_int(c, "attention_chunk_size", 0, 1LL << 40, &chunk, &present)) != ATTN_OK)
        return st;
    if (present && chunk > 0)
        return field_error(c, "attention_chunk_size", "chunked local attention is not supported");
    return ATTN_OK;
}

/* ---- decoder-only -------------------------------------------------------------------- */

typedef struct win_info {
    int window;    /* the window size when a layer slides */
    bool *sliding; /* per layer */
} win_info;

static attn_status read_layer_types(const hf *c, int layers, bool *sliding, bool *present)
{
    const attn__json *lt = field(c, "layer_types");
    *present = lt != NULL;
    if (!lt) return ATTN_OK;
    if (attn__json_type_of(lt) != ATTN_JSON_ARRAY)
        return field_error(c, "layer_types", "must be a list of strings, got %s", type_name(lt));
    if ((long long)attn__json_len(lt) != layers)
        return field_error(c, "layer_types", "has %zu entries but num_hidden_layers is %d",
                           attn__json_len(lt), layers);
    for (int i = 0; i < layers; i++) {
        const attn__json *e = attn__json_at(lt, (size_t)i);
        char key[40];
        snprintf(key, sizeof key, "layer_types[%d]", i);
        if (attn__json_type_of(e) != ATTN_JSON_STRING)
            return field_error(c, key, "must be a string, got %s", type_name(e));
        const char *s = attn__json_string(e);
        if (!strcmp(s, "sliding_attention"))
            sliding[i] = true;
        else if (!strcmp(s, "full_attention"))
            sliding[i] = false;
        else
            return field_error(c, key,
                               "unknown layer type '%s' (expected sliding_attention or "
                               "full_attention)",
                               s);
    }
    return ATTN_OK;
}

static attn_status read_windows(hf *c, int layers, win_info *w)
{
    attn_model *m = c->m;
    const char *mt = m->model_type;
    long long window = 0;
    bool has_window, flag = true, has_flag;
    attn_status st = get_int(c, "sliding_window", -(1LL << 40), 1LL << 40, &window, &has_window);
    if (st != ATTN_OK) return st;
    if (has_window && window < 0)
        return field_error(c, "sliding_window", "must not be negative (got %lld)", window);
    if (has_window && window > (1LL << 30))
        return field_error(c, "sliding_window", "%lld is too large", window);
    if ((st = get_bool(c, "use_sliding_window", &flag, &has_flag)) != ATTN_OK) return st;
    w->window = has_window ? (int)window : 0;

    bool lt_present;
    bool *lt = calloc((size_t)layers, sizeof *lt);
    if (!lt) return attn__fail(ATTN_OUT_OF_MEMORY, "model: out of memory");
    if ((st = read_layer_types(c, layers, lt, &lt_present)) != ATTN_OK) {
        free(lt);
        return st;
    }
    long long pattern = 0;
    bool has_pattern;
    if ((st = get_int(c, "sliding_window_pattern", 1, 1 << 20, &pattern, &has_pattern)) !=
        ATTN_OK) {
        free(lt);
        return st;
    }

    /* The rule a config's family implies when layer_types is absent. */
    bool *rule = calloc((size_t)layers, sizeof *rule);
    if (!rule) {
        free(lt);
        return attn__fail(ATTN_OUT_OF_MEMORY, "model: out of memory");
    }
    const char *rule_name = NULL;
    if (has_pattern) {
        for (int i = 0; i < layers; i++)
            rule[i] = ((i + 1) % pattern) != 0;
        rule_name = "sliding_window_pattern";
    } else if (!strcmp(mt, "gemma3_text") || !strcmp(mt, "gemma3")) {
        for (int i = 0; i < layers; i++)
            rule[i] = ((i + 1) % 6) != 0;
        rule_name = "Gemma-3 default pattern 6";
        if (!lt_present)
            note(m, "sliding_window_pattern absent: Gemma-3 default 6 (every 6th layer global)");
    } else if (!strcmp(mt, "gemma2")) {
        for (int i = 0; i < layers; i++)
            rule[i] = (i % 2) == 0;
        rule_name = "Gemma-2 alternation";
    } else if (in_list(mt, k_qwen)) {
        long long mwl = 0;
        if (!has_flag) {
            flag = false; /* Qwen2Config's default */
            has_flag = true;
            if (w->window > 0) note(m, "use_sliding_window absent: false (the Qwen2 default)");
        }
        bool has_mwl;
        if ((st = get_int(c, "max_window_layers", 0, 1 << 20, &mwl, &has_mwl)) != ATTN_OK) {
            free(lt);
            free(rule);
            return st;
        }
        if (flag && !has_mwl) {
            free(lt);
            free(rule);
            return field_error(c, "max_window_layers", "is missing but use_sliding_window is true");
        }
        for (int i = 0; i < layers; i++)
            rule[i] = flag && i >= mwl;
        rule_name = "use_sliding_window/max_window_layers";
    } else {
        /* Mistral style: one window for every layer */
        for (int i = 0; i < layers; i++)
            rule[i] = w->window > 0 && (!has_flag || flag);
        rule_name = NULL;
    }

    for (int i = 0; lt_present && st == ATTN_OK && i < layers; i++) {
        char key[40];
        snprintf(key, sizeof key, "layer_types[%d]", i);
        if (lt[i] && has_flag && !flag)
            st = field_error(c, "use_sliding_window",
                             "is false but layer_types[%d] is sliding_attention", i);
        else if (rule_name && rule[i] != lt[i])
            st = field_error(c, key, "'%s' contradicts the %s rule (layer %d %s)",
                             lt[i] ? "sliding_attention" : "full_attention", rule_name, i,
                             rule[i] ? "slides" : "is full");
    }
    memcpy(w->sliding, lt_present ? lt : rule, (size_t)layers * sizeof *lt);
    free(lt);
    free(rule);
    if (st != ATTN_OK) return st;

    bool any = false;
    for (int i = 0; i < layers; i++)
        any |= w->sliding[i];
    if (any && w->window <= 0)
        return field_error(c, "sliding_window",
                           "is %s but layers are declared sliding (layer_types or the "
                           "family's pattern)",
                           has_window ? "0" : "missing");
    if (!any && w->window > 0)
        note(m, "sliding_window %d unused: %s", w->window,
             has_flag && !flag ? "use_sliding_window is false" : "no layer slides");
    return ATTN_OK;
}

static attn_status read_decoder(hf *c)
{
    attn_model *m = NULL;
    long long layers = 0, heads = 0, kv_heads = 0, head_dim = 0, hidden = 0;
    bool p_kv, p_hd, p_hidden, present;
    attn_status st;
    attn_model *tmp = c->m; /* holds model_type/notes while we read */

    if ((st = need_int(c, "num_hidden_layers", 1, ATTN_MAX_LAYERS, &layers)) != ATTN_OK ||
        (st = need_int(c, "num_attention_heads", 1, ATTN_MAX_HEADS, &heads)) != ATTN_OK ||
        (st = get_int(c, "num_key_value_heads", 1, ATTN_MAX_HEADS, &kv_heads, &p_kv)) != ATTN_OK ||
        (st = get_int(c, "head_dim", 1, ATTN_MAX_HEAD_SIZE, &head_dim, &p_hd)) != ATTN_OK ||
        (st = get_int(c, "hidden_size", 1, 1 << 24, &hidden, &p_hidden)) != ATTN_OK)
        return st;
    if ((st = refuse_unmodelled(c)) != ATTN_OK) return st;

    /* MLA */
    long long lora = 0, rope = 0, nope = 0, vdim = 0, topk = 0;
    bool p_lora, p_topk;
    if ((st = get_int(c, "kv_lora_rank", 1, ATTN_MAX_HEAD_SIZE, &lora, &p_lora)) != ATTN_OK)
        return st;
    if (p_lora) {
        if ((st = need_int(c, "qk_rope_head_dim", 0, ATTN_MAX_HEAD_SIZE, &rope)) != ATTN_OK ||
            (st = need_int(c, "qk_nope_head_dim", 0, ATTN_MAX_HEAD_SIZE, &nope)) != ATTN_OK ||
            (st = need_int(c, "v_head_dim", 1, ATTN_MAX_HEAD_SIZE, &vdim)) != ATTN_OK ||
            (st = get_int(c, "index_topk", 1, 1 << 24, &topk, &p_topk)) != ATTN_OK)
            return st;
        if (rope + nope <= 0)
            return field_error(c, "qk_rope_head_dim", "qk_rope_head_dim + qk_nope_head_dim is 0");
    } else {
        static const char *const mla_only[] = {"qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim",
                                               "index_topk", NULL};
        for (const char *const *k = mla_only; *k; k++)
            if (field(c, *k) && strcmp(*k, "v_head_dim") != 0)
                return field_error(c, *k, "is an MLA dimension but kv_lora_rank is missing");
    }

    int head_size;
    if (p_lora) {
        head_size = (int)(lora + rope);
    } else if (p_hd) {
        head_size = (int)head_dim;
    } else {
        if (!p_hidden)
            return field_error(c, "head_dim",
                               "is missing and hidden_size is missing too (need one to know the "
                               "head size)");
        if (hidden % heads != 0)
            return field_error(c, "hidden_size",
                               "%lld is not divisible by num_attention_heads %lld (and head_dim "
                               "is not given)",
                               hidden, heads);
        head_size = (int)(hidden / heads);
    }
    if (head_size > ATTN_MAX_HEAD_SIZE)
        return field_error(c,
                           p_lora ? "kv_lora_rank"
                           : p_hd ? "head_dim"
                                  : "hidden_size",
                           "gives a head size of %d, above the limit %d", head_size,
                           ATTN_MAX_HEAD_SIZE);
    if (!p_kv) {
        kv_heads = heads;
        if (!p_lora) note(tmp, "num_key_value_heads absent: %lld (= num_attention_heads)", heads);
    }
    if (!p_lora && heads % kv_heads != 0)
        return field_error(c, "num_key_value_heads",
                           "%lld does not divide num_attention_heads %lld", kv_heads, heads);

    double cap = 0, scalar = 0;
    if ((st = get_num(c, "attn_logit_softcapping", &cap, &present)) != ATTN_OK) return st;
    if (present && !(cap >= 0 && cap < 1e9))
        return field_error(c, "attn_logit_softcapping", "must be >= 0 (got %g)", cap);
    if ((st = get_num(c, "query_pre_attn_scalar", &scalar, &present)) != ATTN_OK) return st;
    if (present && !(scalar > 0 && scalar < 1e9))
        return field_error(c, "query_pre_attn_scalar", "must be > 0 (got %g)", scalar);

    if ((st = attn__model_alloc(tmp->name, (int)layers, &m)) != ATTN_OK) return st;
    memcpy(m->model_type, tmp->model_type, sizeof m->model_type);
    memcpy(m->notes, tmp->notes, sizeof m->notes);
    m->num_notes = tmp->num_notes;
    m->dtype = tmp->dtype;
    m->query_pre_attn_scalar = (float)scalar;
    c->m = m;

    win_info w = {0, calloc((size_t)layers, sizeof(bool))};
    if (!w.sliding) {
        attn_model_free(m);
        c->m = tmp;
        return attn__fail(ATTN_OUT_OF_MEMORY, "model: out of memory");
    }
    st = read_windows(c, (int)layers, &w);
    if (st == ATTN_OK && p_lora) {
        /* DeepSeek YaRN: softmax scale gains mscale(factor, mscale_all_dim)^2 */
        const attn__json *rs = field(c, "rope_scaling");
        if (rs && attn__json_type_of(rs) == ATTN_JSON_OBJECT) {
            hf sub = *c;
            sub.obj = rs;
            sub.prefix = "rope_scaling.";
            double factor = 1, mall = 0;
            bool pf, pm;
            if ((st = get_num(&sub, "factor", &factor, &pf)) == ATTN_OK &&
                (st = get_num(&sub, "mscale_all_dim", &mall, &pm)) == ATTN_OK && pf && pm &&
                factor > 1 && mall > 0) {
                double ms = 0.1 * mall * log(factor) + 1.0;
                /* a multiplier past 1e6 makes every logit overflow: refuse it here, not at
                 * the first step */
                if (!(ms * ms <= 1e6))
                    st = field_error(&sub, "factor",
                                     "%g with mscale_all_dim %g gives a softmax scale multiplier "
                                     "of %g (limit 1e6)",
                                     factor, mall, ms * ms);
                else
                    m->scale_mult = (float)(ms * ms);
            }
        }
    }
    const char *mt = m->model_type;
    bool sinks = !strcmp(mt, "gpt_oss");
    bool mm_prefix = in_list(c->root == c->obj ? mt : "", k_mm_prefix);
    if (c->root != c->obj) {
        const char *top = NULL;
        hf t = *c;
        t.obj = c->root;
        t.prefix = "";
        if (get_str(&t, "model_type", &top) == ATTN_OK && top)
            mm_prefix = in_list(top, k_mm_prefix);
    }
    for (int i = 0; st == ATTN_OK && i < layers; i++) {
        attn_layer_spec *s = &m->layers[i];
        s->attn_type = ATTN_TYPE_DECODER;
        s->num_heads = (int)heads;
        s->num_kv_heads = p_lora ? 1 : (int)kv_heads;
        s->head_size = head_size;
        s->sliding_window = w.sliding[i] ? w.window : 0;
        s->logits_soft_cap = (float)cap;
        s->has_sink = sinks;
        s->use_mm_prefix = mm_prefix;
        if (p_lora) {
            s->use_mla = true;
            s->kv_lora_rank = (int)lora;
            s->qk_rope_head_dim = (int)rope;
            s->qk_nope_head_dim = (int)nope;
            s->v_head_dim = (int)vdim;
            s->use_sparse = p_topk;
            s->index_topk = p_topk ? (int)topk : 0;
        }
        snprintf(m->layer_names[i], sizeof m->layer_names[i], "model.layers.%d.self_attn", i);
    }
    free(w.sliding);
    if (st != ATTN_OK) {
        attn_model_free(m);
        c->m = tmp;
        return st;
    }
    attn_model_free(tmp);
    return ATTN_OK;
}

/* ---- encoder-only -------------------------------------------------------------------- */

static attn_status read_encoder_only(hf *c)
{
    const bool distil = !strcmp(c->m->model_type, "distilbert");
    const char *k_layers = distil ? "n_layers" : "num_hidden_layers";
    const char *k_heads = distil ? "n_heads" : "num_attention_heads";
    const char *k_hidden = distil ? "dim" : "hidden_size";
    long long layers = 0, heads = 0, hidden = 0;
    attn_status st;
    bool b = false, present;
    if ((st = need_int(c, k_layers, 1, 100000, &layers)) != ATTN_OK ||
        (st = need_int(c, k_heads, 1, ATTN_MAX_HEADS, &heads)) != ATTN_OK ||
        (st = need_int(c, k_hidden, 1, 1 << 24, &hidden)) != ATTN_OK)
        return st;
    if ((st = refuse_unmodelled(c)) != ATTN_OK) return st;
    if ((st = get_bool(c, "is_decoder", &b, &present)) != ATTN_OK) return st;
    if (present && b)
        return field_error(c, "is_decoder", "is true, but model_type '%s' is read as encoder-only",
                           c->m->model_type);
    if (hidden % heads != 0)
        return field_error(c, k_hidden, "%lld is not divisible by %s %lld", hidden, k_heads, heads);
    attn_model *m;
    if ((st = attn__model_alloc(c->m->name, (int)layers, &m)) != ATTN_OK) return st;
    memcpy(m->model_type, c->m->model_type, sizeof m->model_type);
    memcpy(m->notes, c->m->notes, sizeof m->notes);
    m->num_notes = c->m->num_notes;
    m->dtype = c->m->dtype;
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

static attn_status read_seq2seq(hf *c, bool t5)
{
    long long enc_layers = 0, dec_layers = 0, enc_heads = 0, dec_heads = 0, d_model = 0, d_kv = 0;
    bool present;
    attn_status st;
    if (t5) {
        if ((st = need_int(c, "num_layers", 1, 100000, &enc_layers)) != ATTN_OK ||
            (st = get_int(c, "num_decoder_layers", 1, 100000, &dec_layers, &present)) != ATTN_OK)
            return st;
        if (!present) {
            dec_layers = enc_layers;
            note(c->m, "num_decoder_layers absent: %lld (= num_layers)", enc_layers);
        }
        if ((st = need_int(c, "num_heads", 1, ATTN_MAX_HEADS, &enc_heads)) != ATTN_OK ||
            (st = need_int(c, "d_kv", 1, ATTN_MAX_HEAD_SIZE, &d_kv)) != ATTN_OK)
            return st;
        dec_heads = enc_heads;
    } else {
        if ((st = need_int(c, "encoder_layers", 1, 100000, &enc_layers)) != ATTN_OK ||
            (st = need_int(c, "decoder_layers", 1, 100000, &dec_layers)) != ATTN_OK ||
            (st = need_int(c, "encoder_attention_heads", 1, ATTN_MAX_HEADS, &enc_heads)) !=
                ATTN_OK ||
            (st = need_int(c, "decoder_attention_heads", 1, ATTN_MAX_HEADS, &dec_heads)) !=
                ATTN_OK ||
            (st = need_int(c, "d_model", 1, 1 << 24, &d_model)) != ATTN_OK)
            return st;
        if (d_model % enc_heads != 0)
            return field_error(c, "d_model",
                               "%lld is not divisible by encoder_attention_heads %lld", d_model,
                               enc_heads);
        if (d_model % dec_heads != 0)
            return field_error(c, "d_model",
                               "%lld is not divisible by decoder_attention_heads %lld", d_model,
                               dec_heads);
    }
    if ((st = refuse_unmodelled(c)) != ATTN_OK) return st;
    bool encdec = true;
    if ((st = get_bool(c, "is_encoder_decoder", &encdec, &present)) != ATTN_OK) return st;
    if (present && !encdec)
        return field_error(c, "is_encoder_decoder",
                           "is false, but model_type '%s' is an "
                           "encoder-decoder family",
                           c->m->model_type);
    int total = (int)(enc_layers + 2 * dec_layers);
    attn_model *m;
    if ((st = attn__model_alloc(c->m->name, total, &m)) != ATTN_OK) return st;
    memcpy(m->model_type, c->m->model_type, sizeof m->model_type);
    memcpy(m->notes, c->m->notes, sizeof m->notes);
    m->num_notes = c->m->num_notes;
    m->dtype = c->m->dtype;
    if (t5) {
        m->query_pre_attn_scalar = 1.0f; /* T5 folds the 1/sqrt(d) into its weights */
        note(m, "T5 relative position bias is not modelled (it does not affect selection)");
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

static attn_status parse(hf *c)
{
    attn_status st;
    const attn__json *tc = attn__json_get(c->root, "text_config");
    if (tc && attn__json_type_of(tc) != ATTN_JSON_NULL) {
        if (attn__json_type_of(tc) != ATTN_JSON_OBJECT)
            return field_error(c, "text_config", "must be an object, got %s", type_name(tc));
        /* a wrapper (multimodal) config: the language model's fields are nested */
        if (!field(c, "num_attention_heads") && !field(c, "num_hidden_layers")) {
            c->obj = tc;
            c->prefix = "text_config.";
        }
    }
    const char *mt = NULL;
    if ((st = get_str(c, "model_type", &mt)) != ATTN_OK) return st;
    if (!mt && c->obj != c->root) {
        hf top = *c;
        top.obj = c->root;
        top.prefix = "";
        if ((st = get_str(&top, "model_type", &mt)) != ATTN_OK) return st;
    }
    snprintf(c->m->model_type, sizeof c->m->model_type, "%s", mt ? mt : "");
    if ((st = read_dtype(c)) != ATTN_OK) return st;

    if (mt && in_list(mt, k_encoder_only)) return read_encoder_only(c);
    if (mt && in_list(mt, k_seq2seq)) return read_seq2seq(c, false);
    if (mt && in_list(mt, k_t5)) return read_seq2seq(c, true);

    bool encdec = false, present;
    if ((st = get_bool(c, "is_encoder_decoder", &encdec, &present)) != ATTN_OK) return st;
    if (encdec)
        return field_error(c, "model_type",
                           "'%s' is an encoder-decoder model libattn does not know (known: "
                           "whisper, bart, mbart, marian, t5, mt5, umt5)",
                           mt ? mt : "(missing)");
    if (!mt || !in_list(mt, k_decoders)) {
        /* unknown family: only the standard decoder fields, all present, will do */
        static const char *const need[] = {"num_hidden_layers", "num_attention_heads", NULL};
        for (const char *const *k = need; *k; k++)
            if (!field(c, *k))
                return field_error(c, mt ? "model_type" : *k,
                                   mt ? "'%s' is not a known model type and the standard "
                                        "decoder field '%s' is missing"
                                      : "model_type is missing and '%s%s' is missing too",
                                   mt ? mt : "", *k);
        if (!field(c, "head_dim") && !field(c, "hidden_size"))
            return field_error(c, "head_dim",
                               "model_type '%s' is not known and neither head_dim nor "
                               "hidden_size is given",
                               mt ? mt : "(missing)");
        note(c->m,
             "model_type '%s' not known: read as a decoder-only transformer from its "
             "standard fields",
             mt ? mt : "(missing)");
    }
    return read_decoder(c);
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
    hf c = {root, root, "", what, NULL};
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
