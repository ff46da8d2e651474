/* Internals shared by the files of src/model: the model object and the builder the
 * config readers use. A model owns its layer specs; groups are computed once
 * by attn__model_finish and never change afterwards. */
#ifndef ATTN_MODEL_IMPL_H
#define ATTN_MODEL_IMPL_H

#include "attn/model.h"

#define ATTN__MODEL_NAME_MAX 128
#define ATTN__MODEL_TYPE_MAX 64
#define ATTN__LAYER_NAME_MAX 48

struct attn_model {
    char name[ATTN__MODEL_NAME_MAX];
    char model_type[ATTN__MODEL_TYPE_MAX]; /* HF model_type, "" when built from a shape */
    char source[512];                      /* file it was read from, "" if none */
    attn_dtype dtype;
    float query_pre_attn_scalar; /* 0 = scale from the head size */
    float scale_mult;            /* 0 or 1 = none; YaRN mscale^2 for DeepSeek MLA */
    int num_notes;
    char notes[8][160]; /* facts taken from defaults, shown by `attn models` */
    int num_layers;
    attn_layer_spec *layers;
    char (*layer_names)[ATTN__LAYER_NAME_MAX];
    /* groups */
    int num_groups;
    int *layer_group;  /* [num_layers] */
    int *group_first;  /* [num_groups] first layer of each group */
    int *group_count;  /* [num_groups] */
    int *group_offset; /* [num_groups] into group_layers */
    int *group_layers; /* [num_layers] layers ordered by group */
};

/* Allocates a model with `layers` zeroed specs. */
attn_status attn__model_alloc(const char *name, int layers, attn_model **out);
/* Computes the KV-cache groups from the specs. */
attn_status attn__model_finish(attn_model *m);
bool attn__layer_spec_equal(const attn_layer_spec *a, const attn_layer_spec *b);

/* Reads a Hugging Face config.json text into m (hf_config.c). `what` names
 * the input in error messages (file path or "<json>"). */
attn_status attn__model_from_hf(const char *json, size_t len, const char *name, const char *what,
                                attn_model **out);

#endif
