/* Models as the attention layer sees them.
 *
 * Contract: a model is immutable once built. Its layers are in execution
 * order; KV-cache groups are the distinct layer specs in order of first
 * appearance (layer i belongs to the group whose spec equals its own), so the
 * same config always yields the same group numbering. Encoder self-attention
 * layers (attn_type ENCODER) and encoder-only layers form groups like any
 * other (each needs a backend), but have no KV cache: see
 * attn_model_group_has_kv_cache. The selector config for a spec follows what
 * vLLM's layers pass: num_heads only for MLA layers, block size only when the
 * user gave one, has_sliding_window when the layer has a window. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "attn/model.h"
#include "model/model_impl.h"
#include "util/datadir.h"
#include "util/error.h"
#include "util/json.h"
#include "util/strbuf.h"

/* The presets shipped in data/models/ (one <name>.json each). */
static const char *const k_presets[] = {
    "llama-3.1-8b", "mistral-7b",  "qwen2.5-7b", "phi-3-mini",    "gemma-2-9b",
    "gpt-oss-20b",  "deepseek-v3", "bert-base",  "whisper-small",
};
#define PRESET_COUNT ((int)(sizeof k_presets / sizeof k_presets[0]))

attn_status attn__model_alloc(const char *name, int layers, attn_model **out)
{
    *out = NULL;
    if (layers <= 0 || layers > ATTN_MAX_LAYERS)
        return attn__fail(ATTN_INVALID_ARGUMENT, "model: number of layers %d out of range", layers);
    attn_model *m = calloc(1, sizeof *m);
    if (!m) return attn__fail(ATTN_OUT_OF_MEMORY, "model: out of memory");
    m->layers = calloc((size_t)layers, sizeof *m->layers);
    m->layer_names = calloc((size_t)layers, sizeof *m->layer_names);
    m->layer_group = calloc((size_t)layers, sizeof *m->layer_group);
    m->group_layers = calloc((size_t)layers, sizeof *m->group_layers);
    if (!m->layers || !m->layer_names || !m->layer_group || !m->group_layers) {
        attn_model_free(m);
        return attn__fail(ATTN_OUT_OF_MEMORY, "model: out of memory");
    }
    m->num_layers = layers;
    m->dtype = ATTN_DTYPE_BF16;
    snprintf(m->name, sizeof m->name, "%s", name ? name : "model");
    for (int i = 0; i < layers; i++)
        snprintf(m->layer_names[i], sizeof m->layer_names[i], "layers.%d.attn", i);
    *out = m;
    return ATTN_OK;
}

bool attn__layer_spec_equal(const attn_layer_spec *a, const attn_layer_spec *b)
{
    return a->attn_type == b->attn_type && a->num_heads == b->num_heads &&
           a->num_kv_heads == b->num_kv_heads && a->head_size == b->head_size &&
           a->head_size_v == b->head_size_v && a->sliding_window == b->sliding_window &&
           a->logits_soft_cap == b->logits_soft_cap && a->has_sink == b->has_sink &&
           a->use_mla == b->use_mla && a->use_sparse == b->use_sparse &&
           a->kv_lora_rank == b->kv_lora_rank && a->qk_rope_head_dim == b->qk_rope_head_dim &&
           a->qk_nope_head_dim == b->qk_nope_head_dim && a->v_head_dim == b->v_head_dim &&
           a->index_topk == b->index_topk && a->use_mm_prefix == b->use_mm_prefix;
}

attn_status attn__model_finish(attn_model *m)
{
    int n = m->num_layers;
    if (n < 1 || n > ATTN_MAX_LAYERS) return attn__fail(ATTN_INTERNAL, "model: %d layers", n);
    for (int i = 0; i < n; i++) { /* every way of building a model ends here */
        const attn_layer_spec *l = &m->layers[i];
        if (l->head_size > ATTN_MAX_HEAD_SIZE || l->head_size_v > ATTN_MAX_HEAD_SIZE ||
            l->num_heads > ATTN_MAX_HEADS || l->num_kv_heads > ATTN_MAX_HEADS)
            return attn__fail(ATTN_INVALID_ARGUMENT,
                              "model: layer %d has %d heads / %d KV heads of size %d / %d, above "
                              "the limits (%d heads, head size %d)",
                              i, l->num_heads, l->num_kv_heads, l->head_size, l->head_size_v,
                              ATTN_MAX_HEADS, ATTN_MAX_HEAD_SIZE);
    }
    free(m->group_first);
    free(m->group_count);
    free(m->group_offset);
    m->group_first = calloc((size_t)n, sizeof(int));
    m->group_count = calloc((size_t)n, sizeof(int));
    m->group_offset = calloc((size_t)n, sizeof(int));
    if (!m->group_first || !m->group_count || !m->group_offset)
        return attn__fail(ATTN_OUT_OF_MEMORY, "model: out of memory");
    int groups = 0;
    for (int i = 0; i < n; i++) {
        int g = 0;
        while (g < groups && !attn__layer_spec_equal(&m->layers[m->group_first[g]], &m->layers[i]))
            g++;
        if (g == groups) m->group_first[groups++] = i;
        m->layer_group[i] = g;
        m->group_count[g]++;
    }
    int off = 0;
    for (int g = 0; g < groups; g++) {
        m->group_offset[g] = off;
        off += m->group_count[g];
    }
    int *fill = calloc((size_t)groups, sizeof(int));
    if (!fill) return attn__fail(ATTN_OUT_OF_MEMORY, "model: out of memory");
    for (int i = 0; i < n; i++) {
        int g = m->layer_group[i];
        m->group_layers[m->group_offset[g] + fill[g]++] = i;
    }
    free(fill);
    m->num_groups = groups;
    return ATTN_OK;
}

attn_status attn_model_from_shape(int layers, int heads, int kv_heads, int head_size,
                                  attn_dtype dtype, attn_model **out)
{
    ATTN__CHECK_NULL(out);
    *out = NULL;
    if (layers <= 0 || layers > ATTN_MAX_LAYERS)
        return attn__fail(ATTN_INVALID_ARGUMENT, "model: layers must be in [1, %d] (got %d)",
                          ATTN_MAX_LAYERS, layers);
    if (heads <= 0 || heads > ATTN_MAX_HEADS)
        return attn__fail(ATTN_INVALID_ARGUMENT, "model: heads must be in [1, %d] (got %d)",
                          ATTN_MAX_HEADS, heads);
    if (kv_heads <= 0 || heads % kv_heads != 0)
        return attn__fail(ATTN_INVALID_ARGUMENT,
                          "model: kv_heads must be > 0 and divide heads (%d, %d)", kv_heads, heads);
    if (head_size <= 0 || head_size > ATTN_MAX_HEAD_SIZE)
        return attn__fail(ATTN_INVALID_ARGUMENT, "model: head_size must be in [1, %d] (got %d)",
                          ATTN_MAX_HEAD_SIZE, head_size);
    if ((int)dtype < 0 || dtype >= ATTN_DTYPE_COUNT)
        return attn__fail(ATTN_INVALID_ARGUMENT, "model: invalid dtype %d", (int)dtype);
    char name[96];
    snprintf(name, sizeof name, "shape-%dx%dh%dkv%d", layers, heads, kv_heads, head_size);
    attn_model *m;
    attn_status st = attn__model_alloc(name, layers, &m);
    if (st != ATTN_OK) return st;
    m->dtype = dtype;
    for (int i = 0; i < layers; i++) {
        attn_layer_spec *s = &m->layers[i];
        s->attn_type = ATTN_TYPE_DECODER;
        s->num_heads = heads;
        s->num_kv_heads = kv_heads;
        s->head_size = head_size;
    }
    st = attn__model_finish(m);
    if (st != ATTN_OK) {
        attn_model_free(m);
        return st;
    }
    *out = m;
    return ATTN_OK;
}

void attn_model_free(attn_model *m)
{
    if (!m) return;
    free(m->layers);
    free(m->layer_names);
    free(m->layer_group);
    free(m->group_first);
    free(m->group_count);
    free(m->group_offset);
    free(m->group_layers);
    free(m);
}

/* ---- loading -------------------------------------------------------------------------- */

static bool file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static bool valid_preset_name(const char *name)
{
    if (!*name || strlen(name) > 100) return false;
    for (const char *p = name; *p; p++) {
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.'))
            return false;
    }
    return strstr(name, "..") == NULL;
}

int attn_model_data_dirs(const char **dirs, int max)
{
    if (!dirs || max <= 0) return 0; /* nothing to write to */
    return attn__data_dirs(dirs, max);
}

attn_status attn_model_preset_path(const char *name, char *buf, size_t size)
{
    ATTN__CHECK_NULL(name);
    ATTN__CHECK_NULL(buf);
    if (!valid_preset_name(name))
        return attn__fail(ATTN_INVALID_ARGUMENT, "model preset name '%s' is not valid", name);
    const char *dirs[8];
    int nd = attn__data_dirs(dirs, 8);
    bool truncated = false;
    for (int i = 0; i < nd; i++) {
        char path[4096];
        int w = snprintf(path, sizeof path, "%s/models/%s.json", dirs[i], name);
        if (w <= 0 || (size_t)w >= sizeof path || !file_exists(path)) continue;
        if ((size_t)w >= size) {
            truncated = true; /* found, but the caller's buffer cannot hold the path */
            continue;
        }
        memcpy(buf, path, (size_t)w + 1);
        return ATTN_OK;
    }
    if (size) buf[0] = 0;
    if (truncated)
        return attn__fail(ATTN_OUT_OF_RANGE,
                          "model preset '%s' exists, but its path does not fit a buffer of %zu "
                          "bytes",
                          name, size);
    char where[2048];
    attn__data_dirs_text(where, sizeof where);
    char known[512] = "";
    size_t kl = 0;
    for (int i = 0; i < PRESET_COUNT && kl < sizeof known; i++)
        kl += (size_t)snprintf(known + kl, sizeof known - kl, "%s%s", i ? ", " : "", k_presets[i]);
    return attn__fail(ATTN_NOT_FOUND,
                      "unknown model '%s': no file models/%s.json in the data directories "
                      "(%s). Presets: %s",
                      name, name, where, known);
}

static bool looks_like_path(const char *s)
{
    size_t n = strlen(s);
    return strchr(s, '/') != NULL || (n > 5 && strcmp(s + n - 5, ".json") == 0);
}

static attn_status load_file(const char *path, const char *name, attn_model **out)
{
    char *text = NULL;
    size_t len = 0;
    attn_status st = attn__read_file(path, &text, &len);
    if (st != ATTN_OK) return attn__wrap(st, "cannot read model config '%s'", path);
    st = attn__model_from_hf(text, len, name, path, out);
    free(text);
    if (st == ATTN_OK) { /* a longer path is cut (it is only shown) */
        size_t n = strnlen(path, sizeof(*out)->source - 1);
        memcpy((*out)->source, path, n);
        (*out)->source[n] = '\0';
    }
    return st;
}

attn_status attn_model_load(const char *name_or_path, attn_model **out)
{
    ATTN__CHECK_NULL(out);
    *out = NULL;
    ATTN__CHECK_NULL(name_or_path);
    if (looks_like_path(name_or_path) || file_exists(name_or_path))
        return load_file(name_or_path, name_or_path, out);
    char path[1024];
    attn_status st = attn_model_preset_path(name_or_path, path, sizeof path);
    if (st != ATTN_OK) return st;
    return load_file(path, name_or_path, out);
}

attn_status attn_model_from_json(const char *json, const char *name, attn_model **out)
{
    ATTN__CHECK_NULL(out);
    *out = NULL;
    ATTN__CHECK_NULL(json);
    return attn__model_from_hf(json, strlen(json), name ? name : "model", "<json>", out);
}

/* ---- accessors -------------------------------------------------------------------------- */

const char *attn_model_name(const attn_model *m)
{
    return m ? m->name : NULL;
}
const char *attn_model_type(const attn_model *m)
{
    return m ? m->model_type : NULL;
}
const char *attn_model_source(const attn_model *m)
{
    return m ? m->source : NULL;
}
attn_dtype attn_model_dtype(const attn_model *m)
{
    return m ? m->dtype : ATTN_DTYPE_BF16;
}
int attn_model_num_layers(const attn_model *m)
{
    return m ? m->num_layers : 0;
}

const attn_layer_spec *attn_model_layer(const attn_model *m, int layer)
{
    if (!m || layer < 0 || layer >= m->num_layers) return NULL;
    return &m->layers[layer];
}

const char *attn_model_layer_name(const attn_model *m, int layer)
{
    if (!m || layer < 0 || layer >= m->num_layers) return NULL;
    return m->layer_names[layer];
}

int attn_model_num_groups(const attn_model *m)
{
    return m ? m->num_groups : 0;
}

const attn_layer_spec *attn_model_group_spec(const attn_model *m, int group)
{
    if (!m || group < 0 || group >= m->num_groups) return NULL;
    return &m->layers[m->group_first[group]];
}

int attn_model_group_layers(const attn_model *m, int group, const int **layers)
{
    if (layers) *layers = NULL;
    if (!m || group < 0 || group >= m->num_groups) return 0;
    if (layers) *layers = &m->group_layers[m->group_offset[group]];
    return m->group_count[group];
}

int attn_model_layer_group(const attn_model *m, int layer)
{
    if (!m || layer < 0 || layer >= m->num_layers) return -1;
    return m->layer_group[layer];
}

bool attn_layer_spec_has_kv_cache(const attn_layer_spec *spec)
{
    /* vLLM runs encoder self-attention and encoder-only attention on K/V of
     * the current pass; only decoder self-attention and cross-attention
     * (the encoder's K/V, written once) keep a paged cache. */
    return spec &&
           (spec->attn_type == ATTN_TYPE_DECODER || spec->attn_type == ATTN_TYPE_ENCODER_DECODER);
}

bool attn_model_group_has_kv_cache(const attn_model *m, int group)
{
    return attn_layer_spec_has_kv_cache(attn_model_group_spec(m, group));
}

void attn_model_selector_config(const attn_model *m, const attn_layer_spec *spec,
                                attn_kv_dtype kv_cache_dtype, int user_block_size,
                                attn_selector_config *out)
{
    if (!out) return;
    attn_selector_config_init(out);
    if (!spec) return;
    out->head_size = spec->head_size;
    out->dtype = m ? m->dtype : ATTN_DTYPE_BF16;
    out->kv_cache_dtype = kv_cache_dtype;
    out->block_size = user_block_size > 0 ? user_block_size : 0;
    out->use_mla = spec->use_mla;
    out->has_sink = spec->has_sink;
    out->use_sparse = spec->use_sparse;
    out->use_mm_prefix = spec->use_mm_prefix;
    out->attn_type = spec->attn_type;
    out->has_sliding_window = spec->sliding_window > 0;
    /* Plain Attention layers do not pass num_heads; MLAAttention does. */
    out->num_heads = spec->use_mla ? spec->num_heads : 0;
}

void attn_model_layer_params(const attn_model *m, const attn_layer_spec *spec,
                             attn_kv_dtype kv_cache_dtype, attn_layer_params *out)
{
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!spec) return;
    out->num_heads = spec->num_heads;
    out->num_kv_heads = spec->num_kv_heads;
    out->head_size = spec->head_size;
    out->head_size_v = spec->head_size_v;
    if (m && m->query_pre_attn_scalar > 0)
        out->scale = 1.0f / sqrtf(m->query_pre_attn_scalar);
    else if (spec->use_mla && spec->qk_nope_head_dim + spec->qk_rope_head_dim > 0)
        out->scale = 1.0f / sqrtf((float)(spec->qk_nope_head_dim + spec->qk_rope_head_dim));
    else if (spec->head_size > 0)
        out->scale = 1.0f / sqrtf((float)spec->head_size);
    if (m && m->scale_mult > 0) out->scale *= m->scale_mult;
    out->logits_soft_cap = spec->logits_soft_cap;
    out->sliding_window = spec->sliding_window;
    out->sinks = NULL; /* sink logits are weights: the serving side supplies them */
    out->alibi_slopes = NULL;
    out->attn_type = spec->attn_type;
    out->dtype = m ? m->dtype : ATTN_DTYPE_BF16;
    out->kv_cache_dtype = kv_cache_dtype;
    out->kv_lora_rank = spec->kv_lora_rank;
    out->qk_rope_head_dim = spec->qk_rope_head_dim;
    out->qk_nope_head_dim = spec->qk_nope_head_dim;
    out->v_head_dim = spec->v_head_dim;
}

int attn_model_preset_count(void)
{
    return PRESET_COUNT;
}

const char *attn_model_preset_name(int i)
{
    return (i >= 0 && i < PRESET_COUNT) ? k_presets[i] : NULL;
}

int attn_model_num_notes(const attn_model *m)
{
    return m ? m->num_notes : 0;
}

const char *attn_model_note(const attn_model *m, int i)
{
    return (m && i >= 0 && i < m->num_notes) ? m->notes[i] : NULL;
}

const char *attn_layer_spec_kind(const attn_layer_spec *s)
{
    if (!s) return NULL;
    if (s->attn_type == ATTN_TYPE_ENCODER_ONLY) return "encoder_only_attention";
    if (s->attn_type == ATTN_TYPE_ENCODER_DECODER) return "cross_attention";
    if (s->use_mla) return s->sliding_window > 0 ? "sliding_window_mla" : "mla_attention";
    return s->sliding_window > 0 ? "sliding_window" : "full_attention";
}

void attn_model_layers_text(const int *l, int n, char *buf, size_t size)
{
    if (!buf || !size) return;
    buf[0] = 0;
    if (!l || n <= 0) return;
    if (n == 1) {
        snprintf(buf, size, "%d", l[0]);
        return;
    }
    int step = l[1] - l[0];
    bool arith = step > 0;
    for (int i = 2; arith && i < n; i++)
        arith = l[i] - l[i - 1] == step;
    if (arith && step == 1)
        snprintf(buf, size, "%d-%d", l[0], l[n - 1]);
    else if (arith && n > 3)
        snprintf(buf, size, "%d,%d,...,%d", l[0], l[1], l[n - 1]);
    else {
        size_t off = 0;
        for (int i = 0; i < n && off < size; i++) {
            if (i == 8 && n > 9) {
                snprintf(buf + off, size - off, ",...,%d", l[n - 1]);
                break;
            }
            off += (size_t)snprintf(buf + off, size - off, "%s%d", i ? "," : "", l[i]);
        }
    }
}

attn_status attn_model_to_json(const attn_model *m, char **out)
{
    ATTN__CHECK_NULL(out);
    *out = NULL;
    ATTN__CHECK_NULL(m);
    attn__sb sb;
    attn__jw w;
    attn__sb_init(&sb);
    attn__jw_init(&w, &sb, true);
    attn__jw_obj_begin(&w);
    attn__jw_key(&w, "name");
    attn__jw_str(&w, m->name);
    attn__jw_key(&w, "model_type");
    attn__jw_str(&w, m->model_type);
    attn__jw_key(&w, "source");
    attn__jw_str(&w, m->source);
    attn__jw_key(&w, "dtype");
    attn__jw_str(&w, attn_dtype_name(m->dtype));
    attn__jw_key(&w, "num_layers");
    attn__jw_int(&w, m->num_layers);
    attn__jw_key(&w, "notes");
    attn__jw_arr_begin(&w);
    for (int i = 0; i < m->num_notes; i++)
        attn__jw_str(&w, m->notes[i]);
    attn__jw_arr_end(&w);
    attn__jw_key(&w, "groups");
    attn__jw_arr_begin(&w);
    for (int g = 0; g < m->num_groups; g++) {
        const attn_layer_spec *s = attn_model_group_spec(m, g);
        const int *l;
        int n = attn_model_group_layers(m, g, &l);
        char text[128];
        attn_model_layers_text(l, n, text, sizeof text);
        attn_layer_params p;
        attn_model_layer_params(m, s, ATTN_KV_AUTO, &p);
        attn__jw_obj_begin(&w);
        attn__jw_key(&w, "group");
        attn__jw_int(&w, g);
        attn__jw_key(&w, "kind");
        attn__jw_str(&w, attn_layer_spec_kind(s));
        attn__jw_key(&w, "attn_type");
        attn__jw_str(&w, attn_attn_type_name(s->attn_type));
        attn__jw_key(&w, "has_kv_cache");
        attn__jw_bool(&w, attn_layer_spec_has_kv_cache(s));
        attn__jw_key(&w, "num_layers");
        attn__jw_int(&w, n);
        attn__jw_key(&w, "layers_text");
        attn__jw_str(&w, text);
        attn__jw_key(&w, "layers");
        attn__jw_arr_begin(&w);
        for (int k = 0; k < n; k++)
            attn__jw_int(&w, l[k]);
        attn__jw_arr_end(&w);
        attn__jw_key(&w, "first_layer_name");
        attn__jw_str(&w, m->layer_names[l[0]]);
        attn__jw_key(&w, "num_heads");
        attn__jw_int(&w, s->num_heads);
        attn__jw_key(&w, "num_kv_heads");
        attn__jw_int(&w, s->num_kv_heads);
        attn__jw_key(&w, "head_size");
        attn__jw_int(&w, s->head_size);
        attn__jw_key(&w, "sliding_window");
        attn__jw_int(&w, s->sliding_window);
        attn__jw_key(&w, "logits_soft_cap");
        attn__jw_num(&w, s->logits_soft_cap);
        attn__jw_key(&w, "scale");
        attn__jw_num(&w, p.scale);
        attn__jw_key(&w, "has_sink");
        attn__jw_bool(&w, s->has_sink);
        attn__jw_key(&w, "use_mla");
        attn__jw_bool(&w, s->use_mla);
        attn__jw_key(&w, "use_sparse");
        attn__jw_bool(&w, s->use_sparse);
        attn__jw_key(&w, "use_mm_prefix");
        attn__jw_bool(&w, s->use_mm_prefix);
        if (s->use_mla) {
            attn__jw_key(&w, "kv_lora_rank");
            attn__jw_int(&w, s->kv_lora_rank);
            attn__jw_key(&w, "qk_rope_head_dim");
            attn__jw_int(&w, s->qk_rope_head_dim);
            attn__jw_key(&w, "qk_nope_head_dim");
            attn__jw_int(&w, s->qk_nope_head_dim);
            attn__jw_key(&w, "v_head_dim");
            attn__jw_int(&w, s->v_head_dim);
            if (s->use_sparse) {
                attn__jw_key(&w, "index_topk");
                attn__jw_int(&w, s->index_topk);
            }
        }
        attn__jw_obj_end(&w);
    }
    attn__jw_arr_end(&w);
    attn__jw_obj_end(&w);
    if (sb.oom) {
        attn__sb_free(&sb);
        return attn__fail(ATTN_OUT_OF_MEMORY, "model: out of memory");
    }
    *out = attn__sb_take(&sb);
    return ATTN_OK;
}
