/* The CPU platform's selection rules. Unlike vLLM's CPU platform (which
 * neither validates nor honours explicit requests), libattn's CPU platform
 * validates like CUDA (reference preface 3): explicit requests are hard
 * requirements, and the automatic list is CPU_ATTN then REFERENCE; MLA
 * layers get one list for dense and sparse as on CUDA (the sparse/non-sparse
 * reasons filter): CPU_MLA, CPU_MLA_SPARSE, REFERENCE_MLA,
 * REFERENCE_MLA_SPARSE. The REFERENCE backends are the exact scalar oracles
 * of lowest priority. A backend whose kernels were not built does not resolve
 * and is never chosen. As in vLLM, the block size defaults to 128 when the
 * user did not give one, and sizes that are not multiples of 32 get a
 * performance warning. */
#include "select/selection.h"
#include "select/validate.h"

static int attn__cpu_list(const attn_selector_config *cfg, const char **l)
{
    int n = 0;
    if (cfg->use_mla) {
        l[n++] = "CPU_MLA";
        l[n++] = "CPU_MLA_SPARSE";
        l[n++] = "REFERENCE_MLA";
        l[n++] = "REFERENCE_MLA_SPARSE";
    } else {
        l[n++] = "CPU_ATTN";
        l[n++] = "REFERENCE";
    }
    return n;
}

static int attn__cpu_priorities(const attn_platform *p, const attn_selector_config *cfg,
                                const char **names, int max)
{
    (void)p;
    const char *l[8];
    int n = attn__cpu_list(cfg, l);
    for (int i = 0; i < n && i < max; i++)
        names[i] = l[i];
    return n;
}

static attn_status attn__cpu_select(const attn_platform *p, const char *requested,
                                    const attn_selector_config *cfg, attn_selection *sel)
{
    (void)p;
    attn_status st;
    if (requested) {
        st = attn__sel_explicit(sel, requested);
    } else {
        const char *l[8];
        int n = attn__cpu_list(cfg, l);
        st = attn__sel_auto(sel, l, n, true);
    }
    if (st != ATTN_OK) return st;
    if (cfg->block_size <= 0)
        attn__sel_note(sel, "block size 128 (the CPU platform default when --block-size is not "
                            "given)");
    else if (cfg->block_size % 32 != 0)
        attn__sel_warn(sel, "CPU backend prefers block_size is multiples of 32, otherwise the "
                            "performance is not optimized.");
    return st;
}

/* vLLM's CPU platform sets 128 whenever --block-size was not given. */
static int attn__cpu_preferred_block_size(const attn_platform *p, const attn_backend_desc *d,
                                          int default_size)
{
    (void)default_size;
    return attn__preferred_block_size(d, p, 128);
}

const attn__platform_ops attn__rules_cpu = {
    .kind = ATTN_PLATFORM_CPU,
    .device_family = "cpu",
    .priorities = attn__cpu_priorities,
    .select = attn__cpu_select,
    .preferred_block_size = attn__cpu_preferred_block_size,
};
