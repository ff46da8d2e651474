/* HF config.json: a config either loads into a model whose every layer
 * spec yields sane kernel parameters (finite softmax scale, heads that divide,
 * head sizes in the stated limits) and valid UTF-8 JSON, or is refused. */
#include <math.h>

#include "attn/attn.h"
#include "fuzz_common.h"

FZ_DEFAULT_INITIALIZE

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fz_cstr(data, size);
    attn_model *m = NULL;
    attn_status st = attn_model_from_json(s, "fuzz", &m);
    if (st != ATTN_OK) {
        FZ_ASSERT(m == NULL);
        FZ_ASSERT(attn_last_error()[0] != '\0');
        free(s);
        return 0;
    }
    int nl = attn_model_num_layers(m);
    FZ_ASSERT(nl >= 1 && nl <= ATTN_MAX_LAYERS);
    for (int g = 0; g < attn_model_num_groups(m); g++) {
        const attn_layer_spec *spec = attn_model_group_spec(m, g);
        attn_layer_params lp;
        attn_model_layer_params(m, spec, ATTN_KV_AUTO, &lp);
        FZ_ASSERT(isfinite(lp.scale) && lp.scale >= 0.0f);
        FZ_ASSERT(lp.num_heads >= 1 && lp.num_heads <= ATTN_MAX_HEADS);
        FZ_ASSERT(lp.num_kv_heads >= 1 && lp.num_heads % lp.num_kv_heads == 0);
        FZ_ASSERT(lp.head_size >= 1 && lp.head_size <= ATTN_MAX_HEAD_SIZE);
        attn_selector_config sc;
        attn_model_selector_config(m, spec, ATTN_KV_AUTO, 0, &sc);
        char repr[512];
        FZ_ASSERT(attn_selector_config_repr(&sc, repr, sizeof repr) >= 0);
        const int *layers = NULL;
        int n = attn_model_group_layers(m, g, &layers);
        FZ_ASSERT(n >= 1 && n <= nl);
        for (int i = 0; i < n; i++)
            FZ_ASSERT(attn_model_layer_group(m, layers[i]) == g);
    }
    char *json = NULL;
    FZ_ASSERT(attn_model_to_json(m, &json) == ATTN_OK);
    FZ_ASSERT(fz_utf8_ok(json));
    free(json);
    attn_model_free(m);
    free(s);
    return 0;
}
