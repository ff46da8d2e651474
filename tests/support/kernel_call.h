/* Tests that call one kernel once: b's checked handle (attn/kernel.h)
 * opened for the call's own layer on the host device, one call, closed.
 * The open's failure is returned when the kernel cannot be opened (no
 * kernel code, a failed self-test, a malformed layer). A NULL args is
 * passed to a handle opened for a small valid layer, so the handle's own
 * NULL check answers. */
#ifndef ATTN_TEST_KERNEL_CALL_H
#define ATTN_TEST_KERNEL_CALL_H

#include "attn/kernel.h"

typedef enum { TK_FORWARD, TK_MQA, TK_MHA, TK_MLA_BATCH } tk_entry;

static inline attn_status tk_call(const attn_backend *b, tk_entry e, const void *args,
                                  void *scratch, size_t scratch_size)
{
    static const attn_layer_params small = {
        .num_heads = 1, .num_kv_heads = 1, .head_size = 64, .dtype = ATTN_DTYPE_FP32};
    const attn_layer_params *l = &small;
    if (args && e == TK_FORWARD && ((const attn_forward_args *)args)->layer)
        l = ((const attn_forward_args *)args)->layer;
    if (args && e != TK_FORWARD && ((const attn_mla_args *)args)->layer)
        l = ((const attn_mla_args *)args)->layer;
    attn_kernel *k = NULL;
    attn_status st = attn_kernel_open(b, l, NULL, &k);
    if (st != ATTN_OK) return st;
    switch (e) {
    case TK_FORWARD: st = attn_kernel_forward(k, args); break;
    case TK_MQA: st = attn_kernel_forward_mqa(k, args); break;
    case TK_MHA: st = attn_kernel_forward_mha(k, args); break;
    case TK_MLA_BATCH: st = attn_kernel_mla_forward(k, args, scratch, scratch_size); break;
    }
    attn_kernel_close(k);
    return st;
}

#define tk_forward(b, a)                    tk_call((b), TK_FORWARD, (a), NULL, 0)
#define tk_mqa(b, a)                        tk_call((b), TK_MQA, (a), NULL, 0)
#define tk_mha(b, a)                        tk_call((b), TK_MHA, (a), NULL, 0)
#define tk_mla_forward(b, a, scratch, size) tk_call((b), TK_MLA_BATCH, (a), (scratch), (size))

#endif
