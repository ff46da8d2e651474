/* Decoder-only Hugging Face configs (see hf_config.c for the families):
 * Llama-like dimensions, MLA when kv_lora_rank is given, and per-layer
 * sliding windows from layer_types or the family's rule; the two must agree
 * when both are present. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/hf_read.h"
#include "util/error.h"

/* vLLM's prefix-LM multimodal models: image tokens attend bidirectionally. */
static const char *const k_qwen[] = {"qwen2", "qwen2_moe", "qwen3", "qwen3_moe", NULL};
static const char *const k_mm_prefix[] = {"gemma3", "paligemma", NULL};

typedef struct dec_dims {
    long long layers, heads, kv_heads, head_dim, hidden;
    long long lora, rope, nope, vdim, topk; /* MLA (p_lora) */
    bool p_kv, p_hd, p_hidden, p_lora, p_topk;
    int head_size;
    double cap, scalar;
} dec_dims;

/* ---- sliding windows ----------------------------------------------------------------- */

typedef struct win_info {
    int window;    /* the window size when a layer slides */
    bool *sliding; /* per layer */
} win_info;

/* use_sliding_window (Qwen2 gives it a default of its own). */
typedef struct win_flag {
    bool flag, has_flag;
} win_flag;

static attn_status read_layer_types(const attn__hf *c, int layers, bool *sliding, bool *present)
{
    const attn__json *lt = attn__hf_field(c, "layer_types");
    *present = lt != NULL;
    if (!lt) return ATTN_OK;
    if (attn__json_type_of(lt) != ATTN_JSON_ARRAY)
        return attn__hf_error(c, "layer_types", "must be a list of strings, got %s",
                              attn__hf_type_name(lt));
    if ((long long)attn__json_len(lt) != layers)
        return attn__hf_error(c, "layer_types", "has %zu entries but num_hidden_layers is %d",
                              attn__json_len(lt), layers);
    for (int i = 0; i < layers; i++) {
        const attn__json *e = attn__json_at(lt, (size_t)i);
        char key[40];
        snprintf(key, sizeof key, "layer_types[%d]", i);
        if (attn__json_type_of(e) != ATTN_JSON_STRING)
            return attn__hf_error(c, key, "must be a string, got %s", attn__hf_type_name(e));
        const char *s = attn__json_string(e);
        if (!strcmp(s, "sliding_attention"))
            sliding[i] = true;
        else if (!strcmp(s, "full_attention"))
            sliding[i] = false;
        else
            return attn__hf_error(c, key,
                                  "unknown layer type '%s' (expected sliding_attention or "
                                  "full_attention)",
                                  s);
    }
    return ATTN_OK;
}

/* The rule a config's family implies when layer_types is absent, into rule;
 * *rule_name NULL for the Mistral style (one window for every layer). */
static attn_status family_rule(attn__hf *c, int layers, const win_info *w, bool lt_present,
                               win_flag *f, bool *rule, const char **rule_name)
{
    attn_model *m = c->m;
    const char *mt = m->model_type;
    long long pattern = 0;
    bool has_pattern;
    attn_status st = attn__hf_int(c, "sliding_window_pattern", 1, 1 << 20, &pattern, &has_pattern);
    if (st != ATTN_OK) return st;
    *rule_name = NULL;
    if (has_pattern) {
        for (int i = 0; i < layers; i++)
            rule[i] = ((i + 1) % pattern) != 0;
        *rule_name = "sliding_window_pattern";
    } else if (!strcmp(mt, "gemma3_text") || !strcmp(mt, "gemma3")) {
        for (int i = 0; i < layers; i++)
            rule[i] = ((i + 1) % 6) != 0;
        *rule_name = "Gemma-3 default pattern 6";
        if (!lt_present)
            attn__hf_note(
                m, "sliding_window_pattern absent: Gemma-3 default 6 (every 6th layer global)");
    } else if (!strcmp(mt, "gemma2")) {
        for (int i = 0; i < layers; i++)
            rule[i] = (i % 2) == 0;
        *rule_name = "Gemma-2 alternation";
    } else if (attn__hf_in_list(mt, k_qwen)) {
        long long mwl = 0;
        if (!f->has_flag) {
            f->flag = false; /* Qwen2Config's default */
            f->has_flag = true;
            if (w->window > 0)
                attn__hf_note(m, "use_sliding_window absent: false (the Qwen2 default)");
        }
        bool has_mwl;
        if ((st = attn__hf_int(c, "max_window_layers", 0, 1 << 20, &mwl, &has_mwl)) != ATTN_OK)
            return st;
        if (f->flag && !has_mwl)
            return attn__hf_error(c, "max_window_layers",
                                  "is missing but use_sliding_window is true");
        for (int i = 0; i < layers; i++)
            rule[i] = f->flag && i >= mwl;
        *rule_name = "use_sliding_window/max_window_layers";
    } else {
        for (int i = 0; i < layers; i++)
            rule[i] = w->window > 0 && (!f->has_flag || f->flag);
    }
    return ATTN_OK;
}

/* layer_types, when given, must agree with use_sliding_window and the rule. */
static attn_status check_layer_types(const attn__hf *c, int layers, const bool *lt,
                                     const bool *rule, const char *rule_name, const win_flag *f)
{
    for (int i = 0; i < layers; i++) {
        char key[40];
        snprintf(key, sizeof key, "layer_types[%d]", i);
        if (lt[i] && f->has_flag && !f->flag)
            return attn__hf_error(c, "use_sliding_window",
                                  "is false but layer_types[%d] is sliding_attention", i);
        if (rule_name && rule[i] != lt[i])
            return attn__hf_error(c, key, "'%s' contradicts the %s rule (layer %d %s)",
                                  lt[i] ? "sliding_attention" : "full_attention", rule_name, i,
                                  rule[i] ? "slides" : "is full");
    }
    return ATTN_OK;
}

static attn_status read_windows(attn__hf *c, int layers, win_info *w)
{
    long long window = 0;
    bool has_window;
    win_flag f = {true, false};
    attn_status st =
        attn__hf_int(c, "sliding_window", -(1LL << 40), 1LL << 40, &window, &has_window);
    if (st != ATTN_OK) return st;
    if (has_window && window < 0)
        return attn__hf_error(c, "sliding_window", "must not be negative (got %lld)", window);
    if (has_window && window > (1LL << 30))
        return attn__hf_error(c, "sliding_window", "%lld is too large", window);
    if ((st = attn__hf_bool(c, "use_sliding_window", &f.flag, &f.has_flag)) != ATTN_OK) return st;
    w->window = has_window ? (int)window : 0;

    bool lt_present = false;
    const char *rule_name = NULL;
    bool *lt = calloc((size_t)layers, sizeof *lt);
    bool *rule = calloc((size_t)layers, sizeof *rule);
    if (!lt || !rule) st = attn__fail(ATTN_OUT_OF_MEMORY, "model: out of memory");
    if (st == ATTN_OK) st = read_layer_types(c, layers, lt, &lt_present);
    if (st == ATTN_OK) st = family_rule(c, layers, w, lt_present, &f, rule, &rule_name);
    if (st == ATTN_OK && lt_present) st = check_layer_types(c, layers, lt, rule, rule_name, &f);
    if (st == ATTN_OK) memcpy(w->sliding, lt_present ? lt : rule, (size_t)layers * sizeof *lt);
    free(lt);
    free(rule);
    if (st != ATTN_OK) return st;

    bool any = false;
    for (int i = 0; i < layers; i++)
        any |= w->sliding[i];
    if (any && w->window <= 0)
        return attn__hf_error(c, "sliding_window",
                              "is %s but layers are declared sliding (layer_types or the "
                              "family's pattern)",
                              has_window ? "0" : "missing");
    if (!any && w->window > 0)
        attn__hf_note(c->m, "sliding_window %d unused: %s", w->window,
                      f.has_flag && !f.flag ? "use_sliding_window is false" : "no layer slides");
    return ATTN_OK;
}

/* ---- dimensions ---------------------------------------------------------------------- */

static attn_status read_mla_dims(const attn__hf *c, dec_dims *d)
{
    attn_status st = attn__hf_int(c, "kv_lora_rank", 1, ATTN_MAX_HEAD_SIZE, &d->lora, &d->p_lora);
    if (st != ATTN_OK) return st;
    if (d->p_lora) {
        if ((st = attn__hf_need_int(c, "qk_rope_head_dim", 0, ATTN_MAX_HEAD_SIZE, &d->rope)) !=
                ATTN_OK ||
            (st = attn__hf_need_int(c, "qk_nope_head_dim", 0, ATTN_MAX_HEAD_SIZE, &d->nope)) !=
                ATTN_OK ||
            (st = attn__hf_need_int(c, "v_head_dim", 1, ATTN_MAX_HEAD_SIZE, &d->vdim)) != ATTN_OK ||
            (st = attn__hf_int(c, "index_topk", 1, 1 << 24, &d->topk, &d->p_topk)) != ATTN_OK)
            return st;
        if (d->rope + d->nope <= 0)
            return attn__hf_error(c, "qk_rope_head_dim",
                                  "qk_rope_head_dim + qk_nope_head_dim is 0");
        return ATTN_OK;
    }
    static const char *const mla_only[] = {"qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim",
                                           "index_topk", NULL};
    for (const char *const *k = mla_only; *k; k++)
        if (attn__hf_field(c, *k) && strcmp(*k, "v_head_dim") != 0)
            return attn__hf_error(c, *k, "is an MLA dimension but kv_lora_rank is missing");
    return ATTN_OK;
}

/* The head size (MLA: kv_lora_rank + qk_rope_head_dim; else head_dim, else
 * hidden_size / num_attention_heads) and the KV-head default. */
static attn_status read_head_size(const attn__hf *c, dec_dims *d)
{
    if (d->p_lora) {
        d->head_size = (int)(d->lora + d->rope);
    } else if (d->p_hd) {
        d->head_size = (int)d->head_dim;
    } else {
        if (!d->p_hidden)
            return attn__hf_error(c, "head_dim",
                                  "is missing and hidden_size is missing too (need one to know "
                                  "the head size)");
        if (d->hidden % d->heads != 0)
            return attn__hf_error(c, "hidden_size",
                                  "%lld is not divisible by num_attention_heads %lld (and "
                                  "head_dim is not given)",
                                  d->hidden, d->heads);
        d->head_size = (int)(d->hidden / d->heads);
    }
    if (d->head_size > ATTN_MAX_HEAD_SIZE)
        return attn__hf_error(c,
                              d->p_lora ? "kv_lora_rank"
                              : d->p_hd ? "head_dim"
                                        : "hidden_size",
                              "gives a head size of %d, above the limit %d", d->head_size,
                              ATTN_MAX_HEAD_SIZE);
    if (!d->p_kv) {
        d->kv_heads = d->heads;
        if (!d->p_lora)
            attn__hf_note(c->m, "num_key_value_heads absent: %lld (= num_attention_heads)",
                          d->heads);
    }
    if (!d->p_lora && d->heads % d->kv_heads != 0)
        return attn__hf_error(c, "num_key_value_heads",
                              "%lld does not divide num_attention_heads %lld", d->kv_heads,
                              d->heads);
    return ATTN_OK;
}

static attn_status read_dims(const attn__hf *c, dec_dims *d)
{
    attn_status st;
    bool present;
    if ((st = attn__hf_need_int(c, "num_hidden_layers", 1, ATTN_MAX_LAYERS, &d->layers)) !=
            ATTN_OK ||
        (st = attn__hf_need_int(c, "num_attention_heads", 1, ATTN_MAX_HEADS, &d->heads)) !=
            ATTN_OK ||
        (st = attn__hf_int(c, "num_key_value_heads", 1, ATTN_MAX_HEADS, &d->kv_heads, &d->p_kv)) !=
            ATTN_OK ||
        (st = attn__hf_int(c, "head_dim", 1, ATTN_MAX_HEAD_SIZE, &d->head_dim, &d->p_hd)) !=
            ATTN_OK ||
        (st = attn__hf_int(c, "hidden_size", 1, 1 << 24, &d->hidden, &d->p_hidden)) != ATTN_OK)
        return st;
    if ((st = attn__hf_refuse_unmodelled(c)) != ATTN_OK) return st;
    if ((st = read_mla_dims(c, d)) != ATTN_OK) return st;
    if ((st = read_head_size(c, d)) != ATTN_OK) return st;
    if ((st = attn__hf_num(c, "attn_logit_softcapping", &d->cap, &present)) != ATTN_OK) return st;
    if (present && !(d->cap >= 0 && d->cap < 1e9))
        return attn__hf_error(c, "attn_logit_softcapping", "must be >= 0 (got %g)", d->cap);
    if ((st = attn__hf_num(c, "query_pre_attn_scalar", &d->scalar, &present)) != ATTN_OK) return st;
    if (present && !(d->scalar > 0 && d->scalar < 1e9))
        return attn__hf_error(c, "query_pre_attn_scalar", "must be > 0 (got %g)", d->scalar);
    return ATTN_OK;
}

/* DeepSeek YaRN: the softmax scale gains mscale(factor, mscale_all_dim)^2. */
static attn_status read_yarn_scale(const attn__hf *c, attn_model *m)
{
    const attn__json *rs = attn__hf_field(c, "rope_scaling");
    if (!rs || attn__json_type_of(rs) != ATTN_JSON_OBJECT) return ATTN_OK;
    attn__hf sub = attn__hf_sub(c, rs, "rope_scaling.");
    double factor = 1, mall = 0;
    bool pf, pm;
    attn_status st;
    if ((st = attn__hf_num(&sub, "factor", &factor, &pf)) != ATTN_OK ||
        (st = attn__hf_num(&sub, "mscale_all_dim", &mall, &pm)) != ATTN_OK)
        return st;
    if (!(pf && pm && factor > 1 && mall > 0)) return ATTN_OK;
    double ms = 0.1 * mall * log(factor) + 1.0;
    /* a multiplier past 1e6 makes every logit overflow: refuse it here, not at
     * the first step */
    if (!(ms * ms <= 1e6))
        return attn__hf_error(&sub, "factor",
                              "%g with mscale_all_dim %g gives a softmax scale multiplier of %g "
                              "(limit 1e6)",
                              factor, mall, ms * ms);
    m->scale_mult = (float)(ms * ms);
    return ATTN_OK;
}

/* Prefix-LM multimodal: decided by the wrapper's model_type when nested. */
static bool mm_prefix_of(const attn__hf *c)
{
    bool mm = attn__hf_in_list(c->root == c->obj ? c->m->model_type : "", k_mm_prefix);
    if (c->root != c->obj) {
        const char *top = NULL;
        attn__hf t = attn__hf_sub(c, c->root, "");
        if (attn__hf_str(&t, "model_type", &top) == ATTN_OK && top)
            mm = attn__hf_in_list(top, k_mm_prefix);
    }
    return mm;
}

static void fill_layers(attn_model *m, const dec_dims *d, const win_info *w, bool mm_prefix)
{
    bool sinks = !strcmp(m->model_type, "gpt_oss");
    for (int i = 0; i < d->layers; i++) {
        attn_layer_spec *s = &m->layers[i];
        s->attn_type = ATTN_TYPE_DECODER;
        s->num_heads = (int)d->heads;
        s->num_kv_heads = d->p_lora ? 1 : (int)d->kv_heads;
        s->head_size = d->head_size;
        s->sliding_window = w->sliding[i] ? w->window : 0;
        s->logits_soft_cap = (float)d->cap;
        s->has_sink = sinks;
        s->use_mm_prefix = mm_prefix;
        if (d->p_lora) {
            s->use_mla = true;
            s->kv_lora_rank = (int)d->lora;
            s->qk_rope_head_dim = (int)d->rope;
            s->qk_nope_head_dim = (int)d->nope;
            s->v_head_dim = (int)d->vdim;
            s->use_sparse = d->p_topk;
            s->index_topk = d->p_topk ? (int)d->topk : 0;
        }
        snprintf(m->layer_names[i], sizeof m->layer_names[i], "model.layers.%d.self_attn", i);
    }
}

attn_status attn__hf_read_decoder(attn__hf *c)
{
    dec_dims d = {0};
    attn_status st = read_dims(c, &d);
    if (st != ATTN_OK) return st;
    attn_model *tmp = c->m; /* the placeholder: model_type/notes so far */
    attn_model *m;
    if ((st = attn__hf_model_alloc(c, (int)d.layers, &m)) != ATTN_OK) return st;
    m->query_pre_attn_scalar = (float)d.scalar;
    c->m = m;
    win_info w = {0, calloc((size_t)d.layers, sizeof(bool))};
    if (!w.sliding) st = attn__fail(ATTN_OUT_OF_MEMORY, "model: out of memory");
    if (st == ATTN_OK) st = read_windows(c, (int)d.layers, &w);
    if (st == ATTN_OK && d.p_lora) st = read_yarn_scale(c, m);
    if (st == ATTN_OK) fill_layers(m, &d, &w, mm_prefix_of(c));
    free(w.sliding);
    if (st != ATTN_OK) {
        attn_model_free(m);
        c->m = tmp;
        return st;
    }
    attn_model_free(tmp);
    return ATTN_OK;
}
