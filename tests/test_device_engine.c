/* The engine on a device whose memory is not host-visible (contract v2):
 * DEVTEST_ATTN (tests/device/devtest_plugin.c) keeps its memory in a
 * private arena behind handles that fault when the host touches them. The
 * engine allocates the KV cache and the step buffers through the device,
 * copies the caller's inputs in and the outputs out, writes K/V by the
 * device's write and runs the kernel through the checked handle; the
 * harness re-runs REFERENCE on a host mirror. Anything that read device
 * memory directly would crash this test. The outputs equal a host engine's
 * (REFERENCE on host memory) bit for bit, and the device saw every op. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attn/engine.h"
#include "attn/plugin.h"
#include "devtest_device.h"
#include "engine_harness.h"
#include "test.h"

static const devtest_stats *plugin_stats(void)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/test-devices/libattn_devtest.so", getenv("ATTN_BINARY_DIR"));
    void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    const devtest_stats *s = h ? dlsym(h, "attn_devtest_stats") : NULL;
    if (h) dlclose(h); /* the loader's reference keeps it mapped */
    return s;
}

typedef struct run_result {
    double checksum[8], diff[8];
    int steps;
    char device[32];
} run_result;

static void run(const char *backend, const attn_model *m, run_result *r)
{
    attn_engine_config cfg;
    attn_engine_config_init(&cfg);
    cfg.model = m;
    cfg.backend = backend;
    cfg.num_blocks = 64;
    cfg.block_size = 16;
    cfg.max_num_seqs = 8;
    cfg.max_num_batched_tokens = 64;
    cfg.layers_to_run = -1;
    cfg.check_metadata = true;
    attn_engine *e = NULL;
    CHECK_OK(test_engine_create(&cfg, 11, true, &e));
    if (!e || attn_engine_get_state(e) != ATTN_ENGINE_READY) {
        fprintf(stderr, "engine (%s): %s\n", backend, e ? attn_engine_error(e) : "none");
        test_engine_free(e);
        return;
    }
    attn_engine_group_info gi;
    CHECK_OK(attn_engine_group_info_get(e, 0, &gi));
    CHECK(gi.kernel_mode == ATTN_KERNEL_NATIVE);
    snprintf(r->device, sizeof r->device, "%s", gi.device ? gi.device : "");
    /* prompts of several blocks, chunked prefills, then decodes */
    attn_request_desc reqs[] = {{.prompt_len = 40, .output_len = 4},
                                {.prompt_len = 70, .output_len = 3},
                                {.prompt_len = 9, .output_len = 5}};
    for (int i = 0; i < 3; i++)
        CHECK_OK(attn_engine_add_request(e, &reqs[i], NULL));
    for (r->steps = 0; r->steps < 8; r->steps++) {
        attn_engine_step_stats st;
        attn__harness_stats hs;
        CHECK_OK(test_engine_step(e, &st, &hs));
        CHECK(hs.output_finite);
        r->checksum[r->steps] = hs.output_checksum;
        r->diff[r->steps] = hs.max_abs_diff;
    }
    CHECK_OK(attn_engine_abort_all(e));
    test_engine_free(e);
}

int main(void)
{
    const char *bin = getenv("ATTN_BINARY_DIR");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/test-devices", bin ? bin : ".");
    char so[4200];
    snprintf(so, sizeof so, "%s/libattn_devtest.so", dir);
    if (!bin || access(so, F_OK) != 0) {
        fprintf(stderr, "test_device_engine: %s not built\n", so);
        return 77;
    }
    setenv("ATTN_PLUGIN_PATH", dir, 1);
    setenv("ATTN_PLUGINS", "attn_devtest", 1);
    CHECK_OK(attn_plugins_load());
    attn_plugin_report rep;
    CHECK_OK(attn_plugins_report(0, &rep));
    CHECK_MSG(rep.loaded, "devtest plugin: %s", rep.error ? rep.error : "?");
    const devtest_stats *ds = plugin_stats();
    CHECK(ds != NULL);
    if (!ds) return attn_test_finish("test_device_engine");

    /* the known-answer test on a devtest instance first (cached), so the
     * counts below are the engine's alone */
    const attn_platform *p = NULL;
    const attn_backend *b = NULL;
    CHECK_OK(attn_platform_current(&p));
    CHECK_OK(attn_backend_resolve(p, "DEVTEST_ATTN", &b));
    char detail[256];
    CHECK_OK(attn_backend_self_test(b, detail, sizeof detail));
    CHECK(ds->kernels > 0 && ds->copies_out > 0); /* it ran on the device */
    attn_model *m = NULL;
    CHECK_OK(attn_model_from_shape(2, 8, 2, 64, ATTN_DTYPE_BF16, &m));
    devtest_stats before = *ds;
    run_result dev = {0}, host = {0};
    run("DEVTEST_ATTN", m, &dev);
    devtest_stats after = *ds;
    run("REFERENCE", m, &host);
    CHECK_STR(dev.device, "devtest");
    CHECK_STR(host.device, "host");
    CHECK(dev.steps == 8 && host.steps == 8);
    for (int s = 0; s < 8; s++) {
        /* the same kernel on the same data: the same bits */
        CHECK_MSG(dev.checksum[s] == host.checksum[s], "step %d: checksum %.17g vs host %.17g", s,
                  dev.checksum[s], host.checksum[s]);
        /* REFERENCE re-run on the harness's host mirror of the device cache */
        CHECK_MSG(dev.diff[s] == 0.0, "step %d: device cache differs from the mirror by %g", s,
                  dev.diff[s]);
    }
    /* what the engine did on the device: one instance (plus the self-test's),
     * K/V written by the device, inputs in, outputs out, kernels run */
    CHECK(after.opens - before.opens >= 1);
    CHECK(after.kv_writes - before.kv_writes > 0);
    CHECK(after.copies_in - before.copies_in >= 3 * (after.kv_writes - before.kv_writes));
    CHECK(after.copies_out - before.copies_out == after.kv_writes - before.kv_writes);
    CHECK(after.kernels - before.kernels == after.kv_writes - before.kv_writes);
    CHECK(after.frees - before.frees == after.allocs - before.allocs); /* all given back */
    printf("devtest: %ld opens, %ld allocs, %ld copies in, %ld out, %ld K/V writes, %ld kernels\n",
           after.opens - before.opens, after.allocs - before.allocs,
           after.copies_in - before.copies_in, after.copies_out - before.copies_out,
           after.kv_writes - before.kv_writes, after.kernels - before.kernels);
    attn_model_free(m);
    return attn_test_finish("test_device_engine");
}
