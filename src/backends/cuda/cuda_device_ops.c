/* The CUDA device of FLASH_ATTN, TRITON_ATTN and TRITON_MLA
 * (attn_device_ops): an instance is a runtime instance (the device's
 * primary context, one non-blocking stream) with the steps its kernels
 * share; a memory handle is an attn__cuda_mem *. Memory is not
 * host-visible. libattn has checked every handle and range before an op
 * runs; the runtime checks them again against its buffers (cheap). A
 * failure's detail reaches attn_last_error() through attn__cuda_report. */
#include <stdlib.h>

#include "backends/cuda/cuda_api.h"
#include "backends/cuda/cuda_backend.h"

/* A step shared by the layers of one geometry (key). */
struct attn__cuda_shared {
    attn__cuda_shared *next;
    int key[7];
    attn__cuda_step *step;
    attn__cuda_mla_step *mla;
};

static attn_status dev_open(const attn_device_config *cfg, void **state)
{
    *state = NULL;
    attn__cuda_inst *inst = calloc(1, sizeof *inst);
    if (!inst)
        return attn__cuda_report(
            attn__cuda_fail(ATTN_OUT_OF_MEMORY, "CUDA instance: out of memory"));
    attn__cuda_options o = {.device = cfg && cfg->device_index > 0 ? cfg->device_index : 0};
    attn_status st = attn__cuda_open(&o, &inst->c);
    if (st != ATTN_OK) {
        free(inst);
        return attn__cuda_report(st);
    }
    *state = inst;
    return ATTN_OK;
}

static void dev_close(void *state)
{
    attn__cuda_inst *inst = state;
    if (!inst) return;
    for (attn__cuda_shared *s = inst->shared, *next; s; s = next) {
        next = s->next;
        attn__cuda_step_destroy(s->step);
        attn__cuda_mla_step_destroy(s->mla);
        free(s);
    }
    attn__cuda_close(inst->c);
    free(inst);
}

static attn__cuda_shared *find_shared(attn__cuda_inst *inst, const int *key)
{
    for (attn__cuda_shared *s = inst->shared; s; s = s->next) {
        bool same = true;
        for (int i = 0; i < 7; i++)
            same &= s->key[i] == key[i];
        if (same) return s;
    }
    attn__cuda_shared *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    for (int i = 0; i < 7; i++)
        s->key[i] = key[i];
    s->next = inst->shared;
    inst->shared = s;
    return s;
}

attn_status attn__cuda_inst_step(attn__cuda_inst *inst, const attn_layer_params *l,
                                 attn__cuda_step **out)
{
    int key[7] = {0, l->num_heads, l->num_kv_heads, l->head_size, l->head_size_v, (int)l->attn_type,
                  0};
    attn__cuda_shared *s = find_shared(inst, key);
    if (!s) return attn__cuda_fail(ATTN_OUT_OF_MEMORY, "CUDA step: out of memory");
    if (!s->step) {
        attn_status st = attn__cuda_step_create(inst->c, l, &s->step);
        if (st != ATTN_OK) return st;
    }
    *out = s->step;
    return ATTN_OK;
}

attn_status attn__cuda_inst_mla_step(attn__cuda_inst *inst, const attn_layer_params *l,
                                     attn__cuda_mla_step **out)
{
    int key[7] = {1,
                  l->num_heads,
                  l->kv_lora_rank,
                  l->qk_rope_head_dim,
                  l->qk_nope_head_dim,
                  l->v_head_dim,
                  (int)l->dtype};
    attn__cuda_shared *s = find_shared(inst, key);
    if (!s) return attn__cuda_fail(ATTN_OUT_OF_MEMORY, "CUDA MLA step: out of memory");
    if (!s->mla) {
        attn_status st = attn__cuda_mla_step_create(inst->c, l, &s->mla);
        if (st != ATTN_OK) return st;
    }
    *out = s->mla;
    return ATTN_OK;
}

static attn_status dev_alloc(void *state, size_t bytes, attn_mem_kind kind, void **mem)
{
    (void)kind; /* one kind of buffer: zero-filled device memory */
    attn__cuda_inst *inst = state;
    return attn__cuda_report(attn__cuda_alloc(inst->c, bytes, (attn__cuda_mem **)mem));
}

static void dev_free(void *state, void *mem, size_t bytes, attn_mem_kind kind)
{
    (void)state;
    (void)bytes;
    (void)kind;
    attn__cuda_free(mem);
}

static attn_status dev_copy_in(void *state, void *dst, size_t dst_offset, const void *src,
                               size_t bytes)
{
    attn__cuda_inst *inst = state;
    return attn__cuda_report(attn__cuda_copy_in(inst->c, dst, dst_offset, src, bytes));
}

static attn_status dev_copy_out(void *state, void *dst, const void *src, size_t src_offset,
                                size_t bytes)
{
    attn__cuda_inst *inst = state;
    return attn__cuda_report(attn__cuda_copy_out(inst->c, dst, src, src_offset, bytes));
}

static attn_status dev_kv_write(void *state, const attn_kv_view *kv, const attn_kv_write_args *a)
{
    attn__cuda_inst *inst = state;
    return attn__cuda_report(attn__cuda_kv_write(inst->c, kv, a->slot_mapping, a->num_tokens, a->k,
                                                 a->k_offset, a->v, a->v_offset, a->src));
}

static attn_status dev_mla_write(void *state, const attn_kv_view *kv, const attn_mla_write_args *a)
{
    attn__cuda_inst *inst = state;
    return attn__cuda_report(attn__cuda_mla_write(
        inst->c, kv, a->slot_mapping, a->num_tokens, a->latent, a->latent_offset, a->k_rope,
        a->k_rope_offset, a->latent_dim, a->rope_dim, a->src));
}

static attn_status dev_sync(void *state)
{
    attn__cuda_inst *inst = state;
    return attn__cuda_report(attn__cuda_sync(inst->c));
}

const attn_device_ops attn__cuda_device_ops = {
    .struct_size = sizeof(attn_device_ops),
    .name = "cuda",
    .flags = 0,
    .open = dev_open,
    .close = dev_close,
    .alloc = dev_alloc,
    .free = dev_free,
    .copy_in = dev_copy_in,
    .copy_out = dev_copy_out,
    .kv_write = dev_kv_write,
    .mla_write = dev_mla_write,
    .synchronize = dev_sync,
};
