/* The CUDA, ROCm and OpenCL probes and platform detection. Probes run once
 * per process, so each scenario runs this binary again as a child with the
 * environment of that scenario (fake driver libraries from
 * tests/platform/fake_driver.c through ATTN_CUDA_LIBRARY / ATTN_HIP_LIBRARY)
 * and checks what the child reports. */
#include <stdint.h>
#include <unistd.h>

#include "platform/detect.h"
#include "platform/platform_impl.h"
#include "test.h"

static char self_path[4096];

static void child_report(void)
{
    const attn__gpu_probe *cu = attn__probe_cuda();
    const attn__gpu_probe *ro = attn__probe_rocm();
    printf("cuda.present=%d\ncuda.reason=%s\ncuda.count=%d\ncuda.listed=%d\n", cu->present,
           cu->reason, cu->device_count, cu->listed);
    for (int i = 0; i < cu->listed; i++)
        printf("cuda.dev%d=%s|%d.%d|%llu\n", i, cu->devices[i].name, cu->devices[i].cc_major,
               cu->devices[i].cc_minor, (unsigned long long)cu->devices[i].memory_bytes);
    printf("rocm.present=%d\nrocm.reason=%s\nrocm.count=%d\n", ro->present, ro->reason,
           ro->device_count);
    for (int i = 0; i < ro->listed; i++)
        printf("rocm.dev%d=%s|%s|%d.%d|%llu\n", i, ro->devices[i].name, ro->devices[i].gfx_arch,
               ro->devices[i].cc_major, ro->devices[i].cc_minor,
               (unsigned long long)ro->devices[i].memory_bytes);
    attn_platform *p = NULL;
    attn_status st = attn_platform_detect(&p);
    printf("detect.status=%s\n", attn_status_name(st));
    if (st != ATTN_OK) {
        printf("detect.error=%s\n", attn_last_error());
        return;
    }
    int maj = -1, min = -1;
    bool cc = attn_platform_capability(p, &maj, &min);
    const char *gfx = attn_platform_gfx_arch(p);
    printf("detect.kind=%s\ndetect.name=%s\ndetect.device=%s\ndetect.cc=%s%d.%d\n"
           "detect.gfx=%s\ndetect.gib=%llu\ndetect.count=%d\ndetect.simulated=%d\n"
           "detect.aiter=%d\ndetect.batch_invariant=%d\n",
           attn_platform_kind_name(attn_platform_get_kind(p)), attn_platform_name(p),
           attn_platform_device_name(p), cc ? "" : "none", maj, min, gfx ? gfx : "null",
           (unsigned long long)(attn_platform_memory_bytes(p) >> 30), attn_platform_device_count(p),
           attn_platform_is_simulated(p), attn_platform_setting(p, ATTN_SETTING_ROCM_USE_AITER),
           attn_platform_setting(p, ATTN_SETTING_BATCH_INVARIANT));
    const attn_platform *cur = NULL;
    CHECK_OK(attn_platform_current(&cur));
    printf("current.kind=%s\n", cur ? attn_platform_kind_name(cur->kind) : "?");
    attn_platform_free(p);
}

/* Runs the child with extra environment assignments; returns its report. */
static char *run_child(const char *env)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "env -u ATTN_PLATFORM %s '%s' --child 2>&1", env, self_path);
    char *out = NULL;
    int rc = attn_test_run(cmd, &out);
    CHECK_MSG(rc == 0, "child (%s) exited %d: %s", env, rc, out ? out : "");
    return out ? out : calloc(1, 1);
}

static void test_real_probes(void)
{
    const attn__gpu_probe *cu = attn__probe_cuda();
    CHECK(cu == attn__probe_cuda()); /* cached: same object every call */
    if (cu->present) {
        CHECK(cu->listed > 0 && cu->device_count >= cu->listed && !cu->reason[0]);
    } else {
        CHECK(cu->listed == 0 && cu->reason[0]);
        if (!getenv("ATTN_CUDA_LIBRARY")) CHECK_CONTAINS(cu->reason, "libcuda");
    }
    const attn__gpu_probe *ro = attn__probe_rocm();
    CHECK(ro == attn__probe_rocm());
    if (!ro->present) {
        CHECK(ro->reason[0]);
        if (!getenv("ATTN_HIP_LIBRARY")) CHECK_CONTAINS(ro->reason, "libamdhip64");
    }
    attn_platform *p = NULL;
    CHECK_OK(attn_platform_detect(&p));
    CHECK(p && !attn_platform_is_simulated(p));
    CHECK_STR(attn_platform_name(p), "local");
    if (!cu->present && !ro->present) {
        CHECK(attn_platform_get_kind(p) == ATTN_PLATFORM_CPU);
        CHECK(!attn_platform_capability(p, NULL, NULL));
        CHECK_STR(attn_platform_device_name(p), attn_cpu_info_get()->model);
        CHECK(attn_platform_memory_bytes(p) == attn_cpu_info_get()->memory_bytes);
    }
    attn_platform *q = NULL;
    CHECK_OK(attn_platform_detect(&q));
    CHECK(q && p && q->id != p->id); /* every object is its own cache key */
    attn_platform_free(q);
    attn_platform_free(p);
    CHECK_STATUS(attn_platform_detect(NULL), ATTN_NULL_ARGUMENT);
}

static void test_missing_library(void)
{
    char *out = run_child("ATTN_CUDA_LIBRARY=/nonexistent/libcuda.so.1 "
                          "ATTN_HIP_LIBRARY=/nonexistent/libamdhip64.so");
    CHECK_CONTAINS(out, "cuda.present=0");
    CHECK_CONTAINS(out, "cuda.reason=/nonexistent/libcuda.so.1: cannot open shared object file");
    CHECK_CONTAINS(out, "rocm.reason=/nonexistent/libamdhip64.so: cannot open shared object");
    CHECK_CONTAINS(out, "detect.kind=cpu");
    CHECK_CONTAINS(out, "current.kind=cpu");
    free(out);
}

#if defined(ATTN_FAKE_CUDA) && defined(ATTN_FAKE_HIP)
static void test_fake_cuda(void)
{
    char *out = run_child("ATTN_CUDA_LIBRARY=" ATTN_FAKE_CUDA " ATTN_BATCH_INVARIANT=1");
    CHECK_CONTAINS(out, "cuda.present=1\n");
    CHECK_CONTAINS(out, "cuda.reason=\n");
    CHECK_CONTAINS(out, "cuda.count=2\n");
    CHECK_CONTAINS(out, "cuda.dev0=NVIDIA H100 80GB HBM3|9.0|85899345920\n");
    CHECK_CONTAINS(out, "cuda.dev1=NVIDIA A100-SXM4-80GB|8.0|");
    CHECK_CONTAINS(out, "detect.status=OK\n");
    CHECK_CONTAINS(out, "detect.kind=cuda\n");
    CHECK_CONTAINS(out, "detect.name=local\n");
    CHECK_CONTAINS(out, "detect.device=NVIDIA H100 80GB HBM3\n");
    CHECK_CONTAINS(out, "detect.cc=9.0\n");
    CHECK_CONTAINS(out, "detect.gfx=null\n");
    CHECK_CONTAINS(out, "detect.gib=80\n");
    CHECK_CONTAINS(out, "detect.count=2\n");
    CHECK_CONTAINS(out, "detect.simulated=0\n");
    CHECK_CONTAINS(out, "detect.batch_invariant=1\n"); /* ATTN_<SETTING> on the real machine */
    CHECK_CONTAINS(out, "detect.aiter=0\n");
    CHECK_CONTAINS(out, "current.kind=cuda\n");
    CHECK(!strstr(out, "rocm.present=1")); /* CUDA found: ROCm not needed */
    free(out);

    out = run_child("ATTN_CUDA_LIBRARY=" ATTN_FAKE_CUDA " FAKE_CUDA_MODE=init_fail "
                    "ATTN_HIP_LIBRARY=/nonexistent/libamdhip64.so");
    CHECK_CONTAINS(out, "cuda.present=0\n");
    CHECK_CONTAINS(out, "cuda.reason=cuInit failed: CUresult 100 (CUDA_ERROR_NO_DEVICE)\n");
    CHECK_CONTAINS(out, "detect.kind=cpu\n");
    free(out);

    out = run_child("ATTN_CUDA_LIBRARY=" ATTN_FAKE_CUDA " FAKE_CUDA_MODE=no_device "
                    "ATTN_HIP_LIBRARY=/nonexistent/libamdhip64.so");
    CHECK_CONTAINS(out, "cuda.present=0\n");
    CHECK_CONTAINS(out, "reports no CUDA device");
    CHECK_CONTAINS(out, "detect.kind=cpu\n");
    free(out);

    out = run_child("ATTN_CUDA_LIBRARY=" ATTN_FAKE_CUDA " FAKE_CUDA_MODE=query_fail "
                    "ATTN_HIP_LIBRARY=/nonexistent/libamdhip64.so");
    CHECK_CONTAINS(out, "cuda.present=0\n");
    CHECK_CONTAINS(out, "querying CUDA device 0 failed: CUresult 999");
    CHECK_CONTAINS(out, "detect.kind=cpu\n");
    free(out);

    /* A library that loads but is not the driver. */
    out = run_child("ATTN_CUDA_LIBRARY=" ATTN_FAKE_HIP
                    " ATTN_HIP_LIBRARY=/nonexistent/libamdhip64.so");
    CHECK_CONTAINS(out, "cuda.present=0\n");
    CHECK_CONTAINS(out, ": missing symbol cuInit\n");
    free(out);
}

static void test_fake_rocm(void)
{
    char *out = run_child("ATTN_CUDA_LIBRARY=/nonexistent/libcuda.so.1 "
                          "ATTN_HIP_LIBRARY=" ATTN_FAKE_HIP " ATTN_ROCM_USE_AITER=true");
    CHECK_CONTAINS(out, "rocm.present=1\n");
    CHECK_CONTAINS(out, "rocm.count=1\n");
    CHECK_CONTAINS(out, "rocm.dev0=AMD Instinct MI300X|gfx942|9.4|206158430208\n");
    CHECK_CONTAINS(out, "detect.kind=rocm\n");
    CHECK_CONTAINS(out, "detect.device=AMD Instinct MI300X\n");
    CHECK_CONTAINS(out, "detect.cc=9.4\n");
    CHECK_CONTAINS(out, "detect.gfx=gfx942\n");
    CHECK_CONTAINS(out, "detect.gib=192\n");
    CHECK_CONTAINS(out, "detect.aiter=1\n");
    CHECK_CONTAINS(out, "current.kind=rocm\n");
    free(out);

    out = run_child("ATTN_CUDA_LIBRARY=/nonexistent/libcuda.so.1 "
                    "ATTN_HIP_LIBRARY=" ATTN_FAKE_HIP " FAKE_HIP_GFX=gfx90a:xnack-");
    CHECK_CONTAINS(out, "rocm.dev0=AMD Instinct MI300X|gfx90a|9.0|");
    CHECK_CONTAINS(out, "detect.cc=9.0\n");
    free(out);

    out = run_child("ATTN_CUDA_LIBRARY=/nonexistent/libcuda.so.1 "
                    "ATTN_HIP_LIBRARY=" ATTN_FAKE_HIP " FAKE_HIP_GFX=gfx1100");
    CHECK_CONTAINS(out, "detect.cc=11.0\n");
    CHECK_CONTAINS(out, "detect.gfx=gfx1100\n");
    free(out);

    /* No properties: the gfx arch comes from the KFD topology in sysfs, or,
     * where there is none (no ROCm kernel driver), stays unknown and the
     * machine cannot be used as ROCm. */
    char cmd[8192];
    bool kfd = access("/sys/class/kfd/kfd/topology/nodes", F_OK) == 0;
    snprintf(cmd, sizeof cmd,
             "env -u ATTN_PLATFORM ATTN_CUDA_LIBRARY=/nonexistent/libcuda.so.1 "
             "ATTN_HIP_LIBRARY=%s FAKE_HIP_NOPROPS=1 '%s' --child 2>&1",
             ATTN_FAKE_HIP, self_path);
    out = NULL;
    attn_test_run(cmd, &out);
    CHECK_CONTAINS(out, "rocm.present=1\n");
    if (!kfd) {
        CHECK_CONTAINS(out, "rocm.dev0=AMD Instinct MI300X||-1.-1|");
        CHECK_CONTAINS(out, "detect.status=PLATFORM_UNAVAILABLE\n");
        CHECK_CONTAINS(out, "gfx arch could not be determined");
    }
    free(out);

    /* An arch the ROCm rules reject makes detection fail (reference §6b). The
     * child's platform_current fails too; its CHECK makes it exit 1. */
    snprintf(cmd, sizeof cmd,
             "env -u ATTN_PLATFORM ATTN_CUDA_LIBRARY=/nonexistent/libcuda.so.1 "
             "ATTN_HIP_LIBRARY=%s FAKE_HIP_GFX=gfx803 '%s' --child 2>&1",
             ATTN_FAKE_HIP, self_path);
    out = NULL;
    attn_test_run(cmd, &out);
    CHECK_CONTAINS(out, "rocm.dev0=AMD Instinct MI300X|gfx803|-1.-1|");
    CHECK_CONTAINS(out, "detect.status=INVALID_ARGUMENT\n");
    CHECK_CONTAINS(out, "invalid ROCm gfx arch 'gfx803': major version 8 is outside 9..12");
    free(out);
}
#endif

static void test_rocm_capability(void)
{
    static const struct {
        const char *gfx;
        int major, minor;
    } ok[] = {{"gfx90a", 9, 0},
              {"gfx942", 9, 4},
              {"gfx950", 9, 5},
              {"gfx1100", 11, 0},
              {"gfx1200", 12, 0},
              {"gfx1201", 12, 0},
              {"gfx942:sramecc+:xnack-", 9, 4},
              {"gfx908", 9, 0}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        int a = -1, b = -1;
        CHECK_OK(attn__rocm_capability(ok[i].gfx, &a, &b));
        CHECK_MSG(a == ok[i].major && b == ok[i].minor, "%s -> %d.%d", ok[i].gfx, a, b);
    }
    static const char *const bad[] = {"gfx803", "gfx9",   "gfx12345", "gfx1300", "gfx",
                                      "sm_90",  "gfx9-4", "",         "gfxa00"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int a = 7, b = 7;
        CHECK_STATUS(attn__rocm_capability(bad[i], &a, &b), ATTN_INVALID_ARGUMENT);
        CHECK(a == 7 && b == 7);
        CHECK_CONTAINS(attn_last_error(), "invalid ROCm gfx arch");
    }
}

static void test_opencl_probe(void)
{
    /* Consistency only: whether an ICD is installed depends on the machine
     * (cli_platforms.sh checks PoCL where clinfo sees it). */
    const attn__opencl_probe *cl = attn__probe_opencl();
    CHECK(cl == attn__probe_opencl());
    if (!cl->present) {
        printf("test_platform_probe: OpenCL not present here: %s\n", cl->reason);
        CHECK(cl->reason[0]);
        return;
    }
    CHECK(cl->platform_count > 0 && cl->device_count > 0);
    int sum = 0;
    for (int i = 0; i < cl->platform_count; i++)
        sum += cl->platforms[i].device_count;
    CHECK(sum == cl->device_count);
    for (int k = 0; k < cl->device_count; k++) {
        const attn__opencl_device *d = &cl->devices[k];
        CHECK(d->name[0] && d->type && d->extensions);
        CHECK(d->platform >= 0 && d->platform < cl->platform_count);
        CHECK(d->fp16 == (strstr(d->extensions, "cl_khr_fp16") != NULL));
    }
    attn_platform *p = NULL;
    CHECK_OK(attn_platform_open("opencl", &p));
    CHECK(p && attn_platform_get_kind(p) == ATTN_PLATFORM_OPENCL);
    CHECK(p && !attn_platform_is_simulated(p));
    CHECK_STR(attn_platform_device_name(p), cl->devices[0].name);
    attn_platform_free(p);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--child")) {
        child_report();
        return attn_test_failures ? 1 : 0;
    }
    ssize_t n = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
    if (n <= 0) {
        printf("test_platform_probe: SKIP child scenarios (no /proc/self/exe)\n");
        self_path[0] = '\0';
    } else {
        self_path[n] = '\0';
    }
    test_rocm_capability();
    test_real_probes();
    if (self_path[0]) {
        test_missing_library();
#if defined(ATTN_FAKE_CUDA) && defined(ATTN_FAKE_HIP)
        test_fake_cuda();
        test_fake_rocm();
#else
        printf("test_platform_probe: SKIP fake-driver scenarios (tests/platform.cmake not used)\n");
#endif
    }
    test_opencl_probe();
    return attn_test_finish("test_platform_probe");
}
