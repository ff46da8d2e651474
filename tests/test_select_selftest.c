/* The core's self-test service (src/selftest): a backend that declares its
 * kernel kind and writes no harness is checked by the core before it may
 * be chosen. A kernel whose forward is wrong is refused through the
 * service with its reason (standard attention and MLA, decode and
 * prefill); a kind declared without its entry points is a failure too; the
 * result is cached per backend object; correct kernels pass, as do the
 * built-ins through their old hooks. */
#include <stdio.h>
#include <string.h>

#include "backends/cpu/cpu_attn.h"
#include "backends/mla/mla_internal.h"
#include "selftest/selftest.h"
#include "test.h"

/* CPU_ATTN's forward with the output scaled: the bug. */
static attn_status wrong_forward(void *impl, const attn_forward_args *a)
{
    attn_status st = attn__backend_cpu_attn.kernel->forward(impl, a);
    attn_elem e = attn_dtype_elem(a->layer->dtype);
    int64_t n = (int64_t)a->common->num_actual_tokens * a->layer->num_heads * a->layer->head_size;
    for (int64_t i = 0; st == ATTN_OK && i < n; i++)
        if (e == ATTN_ELEM_F32) ((float *)a->out)[i] *= 1.5f;
    return st;
}

static attn_status cpu_forward(void *impl, const attn_forward_args *a)
{
    return attn__backend_cpu_attn.kernel->forward(impl, a);
}

/* CPU_MLA's decode, with a prefill that forgets to write its output. */
static attn_status mla_mqa(void *impl, const attn_mla_args *a)
{
    return attn__backend_cpu_mla.kernel->forward_mqa(impl, a);
}

static attn_status wrong_mha(void *impl, const attn_mla_args *a)
{
    (void)impl;
    (void)a;
    return ATTN_OK;
}

static attn_backend_desc desc_std, desc_mla;
static attn_kernel_ops ops_wrong, ops_good, ops_mla, ops_empty;
static attn_backend bk_wrong, bk_good, bk_mla, bk_empty;

static void make(attn_backend *b, const attn_backend_desc *d, const attn_kernel_ops *k)
{
    b->abi_version = ATTN_BACKEND_ABI_VERSION;
    b->struct_size = sizeof *b;
    b->desc = d;
    b->kernel = k;
}

static const attn_selection *select_cpu(attn_platform *p, const char *name, bool mla)
{
    attn_selector_config cfg;
    attn_selector_config_init(&cfg);
    cfg.head_size = mla ? 576 : 128;
    cfg.use_mla = mla;
    cfg.block_size = 16;
    const attn_selection *s = NULL;
    attn_select(p, name, &cfg, &s);
    CHECK(s != NULL);
    return s;
}

int main(void)
{
    desc_std = attn__desc_cpu_attn;
    desc_std.name = "KAT_WRONG";
    ops_wrong = (attn_kernel_ops){.struct_size = sizeof(attn_kernel_ops),
                                  .forward = wrong_forward,
                                  .kind = ATTN_KERNEL_STANDARD};
    ops_good = ops_wrong;
    ops_good.forward = cpu_forward;
    ops_empty =
        (attn_kernel_ops){.struct_size = sizeof(attn_kernel_ops), .kind = ATTN_KERNEL_STANDARD};
    desc_mla = *attn__backend_cpu_mla.desc;
    desc_mla.name = "KAT_MLA_WRONG";
    ops_mla = (attn_kernel_ops){.struct_size = sizeof(attn_kernel_ops),
                                .forward_mqa = mla_mqa,
                                .forward_mha = wrong_mha,
                                .kind = ATTN_KERNEL_MLA};
    make(&bk_wrong, &desc_std, &ops_wrong);
    make(&bk_good, &desc_std, &ops_good);
    make(&bk_mla, &desc_mla, &ops_mla);
    make(&bk_empty, &desc_std, &ops_empty);

    char detail[256];
    /* The built-ins pass, through the service; they declare a kind and have
     * no hook of their own (a kernel calling the service would be an
     * upward reference, docs/design/layers.md). */
    CHECK_OK(attn_backend_self_test(&attn__backend_cpu_attn, detail, sizeof detail));
    CHECK_OK(attn_backend_self_test(&attn__backend_cpu_mla, detail, sizeof detail));
    CHECK_OK(attn_backend_self_test(&attn__backend_cpu_mla_sparse, detail, sizeof detail));
    CHECK(!attn__backend_cpu_attn.kernel->self_test && !attn__backend_cpu_mla.kernel->self_test &&
          !attn__backend_cpu_mla_sparse.kernel->self_test);
    CHECK(attn__kernel_kind(attn__backend_cpu_attn.kernel) == ATTN_KERNEL_STANDARD);
    CHECK(attn__kernel_kind(attn__backend_cpu_mla.kernel) == ATTN_KERNEL_MLA);
    CHECK(attn__kernel_kind(attn__backend_cpu_mla_sparse.kernel) == ATTN_KERNEL_MLA_SPARSE);
    /* A harness-free backend with a correct forward passes. */
    CHECK_OK(attn_backend_self_test(&bk_good, detail, sizeof detail));
    /* The wrong standard forward fails on the first shape it gets wrong. */
    CHECK_STATUS(attn_backend_self_test(&bk_wrong, detail, sizeof detail), ATTN_SELFTEST_FAILED);
    CHECK_CONTAINS(detail, "max error ");
    CHECK_CONTAINS(detail, " on decode+prefill fp32 heads=8/2 head_size=64 block_size=16");
    char again[256];
    CHECK_STATUS(attn_backend_self_test(&bk_wrong, again, sizeof again), ATTN_SELFTEST_FAILED);
    CHECK_STR(again, detail); /* cached: the same result */
    CHECK_STATUS(attn_backend_self_test(&bk_mla, detail, sizeof detail), ATTN_SELFTEST_FAILED);
    CHECK_CONTAINS(detail, "forward_mha dtype=bf16 kv=bf16 heads=16 rank=64 rope=32");
    CHECK_STATUS(attn_backend_self_test(&bk_empty, detail, sizeof detail), ATTN_SELFTEST_FAILED);
    CHECK_STR(detail, "kernel kind 1 declared without its forward entry points");
    CHECK_STATUS(attn_backend_self_test(NULL, detail, sizeof detail), ATTN_NULL_ARGUMENT);

    /* Through selection: refused with the service's reason, never chosen. */
    CHECK_OK(attn_register_backend_object("KAT_WRONG", &bk_wrong));
    CHECK_OK(attn_register_backend_object("KAT_MLA_WRONG", &bk_mla));
    attn_platform *p = NULL;
    CHECK_OK(attn_platform_open("cpu", &p));
    if (!p) return attn_test_finish("test_select_selftest");
    const attn_selection *s = select_cpu(p, "KAT_WRONG", false);
    CHECK(attn_selection_status(s) == ATTN_BACKEND_INVALID);
    CHECK(attn_selection_backend(s) == NULL);
    CHECK_CONTAINS(attn_selection_reason(s, 0, 0), "self-test failed: max error ");
    CHECK_CONTAINS(attn_selection_message(s),
                   "Selected backend AttentionBackendEnum.KAT_WRONG is not valid for this "
                   "configuration. Reason: ['self-test failed: max error ");
    CHECK_CONTAINS(attn_selection_message(s), "on decode+prefill fp32 heads=8/2");
    s = select_cpu(p, "KAT_MLA_WRONG", true);
    CHECK(attn_selection_status(s) == ATTN_BACKEND_INVALID);
    CHECK_CONTAINS(attn_selection_reason(s, 0, 0), "self-test failed: max error ");
    CHECK_CONTAINS(attn_selection_reason(s, 0, 0), "forward_mha");
    /* The real ones are chosen for the same configurations. */
    CHECK_STR(attn_selection_backend(select_cpu(p, "CPU_ATTN", false)), "CPU_ATTN");
    CHECK_STR(attn_selection_backend(select_cpu(p, "CPU_MLA", true)), "CPU_MLA");
    attn_platform_free(p);
    return attn_test_finish("test_select_selftest");
}
