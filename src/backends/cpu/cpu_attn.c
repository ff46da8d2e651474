/* CPU_ATTN: the kernel object and its self-test. The driver lives beside
 * it: variant dispatch (cpu_variants.c), per-thread scratch
 * (cpu_scratch.c), tile rows (cpu_rows.c), the forward and its phases
 * (cpu_forward.c), the descriptor (cpu_attn_desc.c). */
#include "backends/cpu/cpu_attn.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/reference/reference.h"
#include "util/error.h"
#include "util/numeric.h"

/* ---- kernel ops -------------------------------------------------------------- */

/* No per-layer state: create checks the layer once (the limits of
 * attn/types.h, finite sinks) so a layer that can never run is refused
 * when it is set up, not at its first forward. */
static attn_status cpu_create(const attn_kernel_init *init, void **impl)
{
    ATTN__CHECK_NULL(init);
    ATTN__CHECK_NULL(impl);
    *impl = NULL;
    attn_status st = attn__fwd_check_layer(init->layer);
    return st == ATTN_OK ? ATTN_OK : attn__wrap(st, "CPU_ATTN create");
}

static attn_status cpu_forward(void *impl, const attn_forward_args *a)
{
    (void)impl;
    return attn__cpu_attn_forward_isa(NULL, a);
}

static const char *cpu_variant(void)
{
    return attn__cpu_attn_active()->name;
}

static const attn_kernel_ops cpu_kernel = {
    .struct_size = sizeof(attn_kernel_ops),
    .create = cpu_create,
    .forward = cpu_forward,
    .variant = cpu_variant,
    .kind = ATTN_KERNEL_STANDARD, /* the core's known-answer test (src/selftest), no own hook */
};

const attn_backend attn__backend_cpu_attn = ATTN__CPU_BACKEND(&attn__desc_cpu_attn, &cpu_kernel);
