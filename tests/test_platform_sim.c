/* Simulated machines: the catalog, bare specs, JSON specs (text and files,
 * every malformed case), installed components and settings, the JSON
 * description, NULL arguments and the process-wide platform. */
#include <dirent.h>
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#include "platform/platform_impl.h"
#include "select/selection.h"
#include "test.h"
#include "util/json.h"

#define GIB     (1ull << 30)
#define COMP(x) (1u << ATTN_COMPONENT_##x)
#define CUDA_WHEEL                                                                                 \
    (COMP(FA2) | COMP(FA3) | COMP(FA4) | COMP(FLASHINFER) | COMP(FLASHINFER_CUBIN) | COMP(FLASHMLA))

static uint32_t installed_bits(const attn_platform *p)
{
    uint32_t b = 0;
    for (int c = 0; c < ATTN_COMPONENT_COUNT; c++)
        if (attn_platform_has_component(p, (attn_component)c)) b |= 1u << c;
    return b;
}

static void test_catalog(void)
{
    static const struct {
        const char *name;
        attn_platform_kind kind;
        const char *device;
        int major, minor; /* -1: no capability */
        const char *gfx;
        uint64_t gib;
        uint32_t installed;
    } want[] = {
        {"h100", ATTN_PLATFORM_CUDA, "NVIDIA H100 80GB HBM3", 9, 0, NULL, 80, CUDA_WHEEL},
        {"h200", ATTN_PLATFORM_CUDA, "NVIDIA H200", 9, 0, NULL, 141, CUDA_WHEEL},
        {"a100", ATTN_PLATFORM_CUDA, "NVIDIA A100-SXM4-80GB", 8, 0, NULL, 80, CUDA_WHEEL},
        {"l4", ATTN_PLATFORM_CUDA, "NVIDIA L4", 8, 9, NULL, 24, CUDA_WHEEL},
        {"t4", ATTN_PLATFORM_CUDA, "Tesla T4", 7, 5, NULL, 16, CUDA_WHEEL},
        {"v100", ATTN_PLATFORM_CUDA, "Tesla V100-SXM2-32GB", 7, 0, NULL, 32, CUDA_WHEEL},
        {"b200", ATTN_PLATFORM_CUDA, "NVIDIA B200", 10, 0, NULL, 180, CUDA_WHEEL},
        {"mi300x", ATTN_PLATFORM_ROCM, "AMD Instinct MI300X", 9, 4, "gfx942", 192, 0},
        {"mi250", ATTN_PLATFORM_ROCM, "AMD Instinct MI250X/MI250", 9, 0, "gfx90a", 128, 0},
        {"xpu", ATTN_PLATFORM_XPU, "Intel(R) Data Center GPU Max 1550", -1, -1, NULL, 128, 0},
        {"xeon", ATTN_PLATFORM_CPU, "Intel(R) Xeon(R) Platinum 8480+", -1, -1, NULL, 512, 0},
        {"epyc", ATTN_PLATFORM_CPU, "AMD EPYC 9654 96-Core Processor", -1, -1, NULL, 768, 0},
    };
    int n = (int)(sizeof want / sizeof want[0]);
    CHECK(attn_catalog_count() == n);
    uint64_t last_id = 0;
    for (int i = 0; i < n && i < attn_catalog_count(); i++) {
        CHECK_STR(attn_catalog_name(i), want[i].name);
        CHECK_CONTAINS(attn_catalog_description(i), want[i].device);
        attn_platform *p = NULL;
        CHECK_OK(attn_platform_open(want[i].name, &p));
        if (!p) continue;
        CHECK(p->id != last_id);
        last_id = p->id;
        CHECK_STR(attn_platform_name(p), want[i].name);
        CHECK(attn_platform_get_kind(p) == want[i].kind);
        CHECK_STR(attn_platform_device_name(p), want[i].device);
        CHECK(attn_platform_is_simulated(p));
        int a = -1, b = -1;
        CHECK(attn_platform_capability(p, &a, &b) == (want[i].major >= 0));
        CHECK_MSG(a == want[i].major && b == want[i].minor, "%s: %d.%d", want[i].name, a, b);
        if (want[i].gfx)
            CHECK_STR(attn_platform_gfx_arch(p), want[i].gfx);
        else
            CHECK(attn_platform_gfx_arch(p) == NULL);
        CHECK(attn_platform_memory_bytes(p) == want[i].gib * GIB);
        CHECK(attn_platform_device_count(p) == 1);
        CHECK_MSG(installed_bits(p) == want[i].installed, "%s installed 0x%x", want[i].name,
                  installed_bits(p));
        /* the selector keeps each family's rules, by kind (the platform holds none) */
        const attn__platform_ops *ops = attn__platform_ops_for(attn_platform_get_kind(p));
        CHECK(ops && ops->kind == want[i].kind);
        /* settings start at their defaults */
        CHECK(!attn_platform_setting(p, ATTN_SETTING_ROCM_USE_AITER));
        CHECK(attn_platform_setting(p, ATTN_SETTING_ROCM_USE_AITER_MHA));
        CHECK(attn_platform_setting(p, ATTN_SETTING_ROCM_USE_AITER_MLA));
        CHECK(!attn_platform_setting(p, ATTN_SETTING_BATCH_INVARIANT));
        attn_platform_free(p);
    }
    CHECK(attn_catalog_name(-1) == NULL && attn_catalog_name(n) == NULL);
    CHECK(attn_catalog_description(n) == NULL);
    CHECK_CONTAINS(attn_catalog_description(0), "flashinfer_cubin");
    CHECK_CONTAINS(attn_catalog_description(7), "aiter absent");

    attn_platform *p = NULL;
    CHECK_OK(attn_platform_open("H100", &p)); /* case-insensitive */
    CHECK_STR(attn_platform_name(p), "h100");
    attn_platform_free(p);

    CHECK_OK(attn_platform_open("xeon", &p));
    const attn_cpu_info *x = &p->cpu;
    CHECK(x->logical_cores == 56);
    CHECK_STR(x->vendor, "GenuineIntel");
    CHECK(x->present == x->usable && x->masked == 0);
    CHECK(x->usable & (1ull << ATTN_CPU_AMX_BF16));
    CHECK(x->usable & (1ull << ATTN_CPU_AVX512_BF16));
    CHECK(x->memory_bytes == 512 * GIB);
    attn_platform_free(p);
    CHECK_OK(attn_platform_open("epyc", &p));
    x = &p->cpu;
    CHECK(x->logical_cores == 96);
    CHECK_STR(x->vendor, "AuthenticAMD");
    CHECK(x->usable & (1ull << ATTN_CPU_AVX512_BF16));
    CHECK(!(x->usable & (1ull << ATTN_CPU_AMX_TILE)));
    CHECK(!(x->usable & (1ull << ATTN_CPU_AVX512_FP16)));
    attn_platform_free(p);
}

static void test_bare_specs(void)
{
    static const struct {
        const char *spec;
        attn_platform_kind kind;
        int major, minor;
        const char *gfx, *device;
        uint32_t installed;
    } ok[] = {
        {"cuda:8.9", ATTN_PLATFORM_CUDA, 8, 9, NULL, "NVIDIA GPU (cc 8.9)",
         COMP(FA2) | COMP(FA3) | COMP(FA4)},
        {"CUDA:10.0", ATTN_PLATFORM_CUDA, 10, 0, NULL, "NVIDIA GPU (cc 10.0)",
         COMP(FA2) | COMP(FA3) | COMP(FA4)},
        {"cuda:12.1", ATTN_PLATFORM_CUDA, 12, 1, NULL, "NVIDIA GPU (cc 12.1)",
         COMP(FA2) | COMP(FA3) | COMP(FA4)},
        {"cuda:7.0", ATTN_PLATFORM_CUDA, 7, 0, NULL, "NVIDIA GPU (cc 7.0)",
         COMP(FA2) | COMP(FA3) | COMP(FA4)},
        {"rocm:gfx942", ATTN_PLATFORM_ROCM, 9, 4, "gfx942", "AMD GPU (gfx942)", 0},
        {"rocm:gfx90a", ATTN_PLATFORM_ROCM, 9, 0, "gfx90a", "AMD GPU (gfx90a)", 0},
        {"rocm:gfx950", ATTN_PLATFORM_ROCM, 9, 5, "gfx950", "AMD GPU (gfx950)", 0},
        {"rocm:gfx1100", ATTN_PLATFORM_ROCM, 11, 0, "gfx1100", "AMD GPU (gfx1100)", 0},
        {"rocm:gfx1200", ATTN_PLATFORM_ROCM, 12, 0, "gfx1200", "AMD GPU (gfx1200)", 0},
        {"xpu", ATTN_PLATFORM_XPU, -1, -1, NULL, "Intel(R) Data Center GPU Max 1550", 0},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        attn_platform *p = NULL;
        CHECK_OK(attn_platform_open(ok[i].spec, &p));
        if (!p) continue;
        CHECK(attn_platform_get_kind(p) == ok[i].kind);
        CHECK(attn_platform_is_simulated(p));
        int a = -1, b = -1;
        CHECK(attn_platform_capability(p, &a, &b) == (ok[i].major >= 0));
        CHECK_MSG(a == ok[i].major && b == ok[i].minor, "%s: %d.%d", ok[i].spec, a, b);
        if (ok[i].gfx)
            CHECK_STR(attn_platform_gfx_arch(p), ok[i].gfx);
        else
            CHECK(attn_platform_gfx_arch(p) == NULL);
        CHECK_STR(attn_platform_device_name(p), ok[i].device);
        CHECK(installed_bits(p) == ok[i].installed);
        CHECK(attn_platform_memory_bytes(p) > 0);
        attn_platform_free(p);
    }
    attn_platform *p = NULL;
    CHECK_OK(attn_platform_open("cuda:8.9", &p));
    CHECK_STR(attn_platform_name(p), "cuda:8.9");
    attn_platform_free(p);

    /* "cpu": a simulated copy of this machine's CPU */
    CHECK_OK(attn_platform_open("cpu", &p));
    CHECK(attn_platform_get_kind(p) == ATTN_PLATFORM_CPU && attn_platform_is_simulated(p));
    CHECK(!attn_platform_capability(p, NULL, NULL));
    CHECK(p->cpu.usable == attn_cpu_info_get()->usable);
    CHECK_STR(p->cpu.model, attn_cpu_info_get()->model);
    CHECK_STR(attn_platform_device_name(p), attn_cpu_info_get()->model);
    CHECK(installed_bits(p) == 0);
    attn_platform_free(p);

    /* "local": the detected machine, not simulated */
    CHECK_OK(attn_platform_open("local", &p));
    CHECK(p && !attn_platform_is_simulated(p));
    CHECK_STR(attn_platform_name(p), "local");
    attn_platform_free(p);

    static const struct {
        const char *spec;
        attn_status st;
        const char *frag;
    } bad[] = {
        {"cuda:", ATTN_INVALID_ARGUMENT, "capability"},
        {"cuda:9", ATTN_INVALID_ARGUMENT, "'9' is not a CUDA compute capability"},
        {"cuda:x.y", ATTN_INVALID_ARGUMENT, "capability"},
        {"cuda:9.0.1", ATTN_INVALID_ARGUMENT, "capability"},
        {"cuda:0.5", ATTN_INVALID_ARGUMENT, "capability"},
        {"cuda:123.0", ATTN_INVALID_ARGUMENT, "capability"},
        {"cuda", ATTN_INVALID_ARGUMENT, "cuda:X.Y"},
        {"rocm", ATTN_INVALID_ARGUMENT, "rocm:gfxNNN"},
        {"rocm:gfx803", ATTN_INVALID_ARGUMENT, "major version 8 is outside 9..12"},
        {"rocm:gfx9", ATTN_INVALID_ARGUMENT, "expected 2 to 4 digits"},
        {"rocm:gfx12345", ATTN_INVALID_ARGUMENT, "expected 2 to 4 digits"},
        {"rocm:mi300", ATTN_INVALID_ARGUMENT, "invalid ROCm gfx arch 'mi300'"},
        {"h900", ATTN_NOT_FOUND, "unknown machine 'h900'"},
        {"tpu:v5", ATTN_NOT_FOUND, "h100"},
        {"", ATTN_INVALID_ARGUMENT, "empty"},
        {"/nonexistent/machine.json", ATTN_IO_ERROR, "/nonexistent/machine.json"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        p = (attn_platform *)&p;
        CHECK_STATUS(attn_platform_open(bad[i].spec, &p), bad[i].st);
        CHECK(p == NULL);
        CHECK_CONTAINS(attn_last_error(), bad[i].frag);
    }
}

static void test_json_specs(void)
{
    attn_platform *p = NULL;
    CHECK_OK(attn_platform_from_json(
        "{\"name\": \"rig\", \"platform\": \"cuda\", \"device_name\": \"NVIDIA RTX 4090\", "
        "\"capability\": \"8.9\", \"memory_gib\": 24, \"device_count\": 2, "
        "\"installed\": [\"fa2\", \"flashinfer\"], \"settings\": {\"batch_invariant\": true}, "
        "\"description\": \"a workstation\"}",
        &p));
    if (p) {
        CHECK_STR(attn_platform_name(p), "rig");
        CHECK(attn_platform_get_kind(p) == ATTN_PLATFORM_CUDA);
        CHECK_STR(attn_platform_device_name(p), "NVIDIA RTX 4090");
        int a, b;
        CHECK(attn_platform_capability(p, &a, &b) && a == 8 && b == 9);
        CHECK(attn_platform_memory_bytes(p) == 24 * GIB);
        CHECK(attn_platform_device_count(p) == 2);
        CHECK(installed_bits(p) == (COMP(FA2) | COMP(FLASHINFER)));
        CHECK(attn_platform_setting(p, ATTN_SETTING_BATCH_INVARIANT));
        CHECK_STR(p->description, "a workstation");
        attn_platform_free(p);
    }

    CHECK_OK(attn_platform_from_json("{\"platform\": \"rocm\", \"capability\": \"gfx950\", "
                                     "\"installed\": [\"aiter\"], \"settings\": "
                                     "{\"rocm_use_aiter\": true, \"rocm_use_aiter_mha\": false}}",
                                     &p));
    if (p) {
        CHECK_STR(attn_platform_name(p), "custom");
        CHECK_STR(attn_platform_gfx_arch(p), "gfx950");
        CHECK(attn_platform_has_component(p, ATTN_COMPONENT_AITER));
        CHECK(attn_platform_setting(p, ATTN_SETTING_ROCM_USE_AITER));
        CHECK(!attn_platform_setting(p, ATTN_SETTING_ROCM_USE_AITER_MHA));
        CHECK(attn_platform_setting(p, ATTN_SETTING_ROCM_USE_AITER_MLA));
        CHECK(attn_platform_memory_bytes(p) == 64 * GIB); /* placeholder when not given */
        attn_platform_free(p);
    }

    CHECK_OK(attn_platform_from_json("{\"platform\": \"cuda\", \"capability\": \"9.0\", "
                                     "\"installed\": []}",
                                     &p));
    CHECK(p && installed_bits(p) == 0); /* explicit empty list: nothing installed */
    attn_platform_free(p);
    CHECK_OK(attn_platform_from_json("{\"platform\": \"cuda\", \"capability\": \"9.0\"}", &p));
    CHECK(p && installed_bits(p) == (COMP(FA2) | COMP(FA3) | COMP(FA4)));
    attn_platform_free(p);

    CHECK_OK(attn_platform_from_json(
        "{\"name\": \"grav\", \"platform\": \"cpu\", \"memory_gib\": 256, \"cpu\": {\"vendor\": "
        "\"arm\", \"model\": \"Neoverse-V2\", \"cores\": 64, \"features\": [\"neon\", "
        "\"asimdhp\", \"sve\", \"bf16\"]}}",
        &p));
    if (p) {
        CHECK(attn_platform_get_kind(p) == ATTN_PLATFORM_CPU);
        CHECK_STR(p->cpu.arch, "aarch64");
        CHECK_STR(p->cpu.model, "Neoverse-V2");
        CHECK_STR(attn_platform_device_name(p), "Neoverse-V2");
        CHECK(p->cpu.logical_cores == 64);
        CHECK(p->cpu.usable == ((1ull << ATTN_CPU_NEON) | (1ull << ATTN_CPU_ASIMDHP) |
                                (1ull << ATTN_CPU_SVE) | (1ull << ATTN_CPU_BF16_ARM)));
        CHECK(p->cpu.memory_bytes == 256 * GIB && attn_platform_memory_bytes(p) == 256 * GIB);
        attn_platform_free(p);
    }
    /* cpu without a block: this machine's CPU */
    CHECK_OK(attn_platform_from_json("{\"platform\": \"cpu\", \"capability\": null}", &p));
    CHECK(p && p->cpu.usable == attn_cpu_info_get()->usable);
    attn_platform_free(p);
    CHECK_OK(attn_platform_from_json("{\"platform\": \"xpu\"}", &p));
    CHECK(p && attn_platform_get_kind(p) == ATTN_PLATFORM_XPU);
    CHECK(!attn_platform_capability(p, NULL, NULL));
    attn_platform_free(p);

    static const struct {
        const char *json;
        attn_status st;
        const char *frag;
    } bad[] = {
        {"{", ATTN_PARSE_ERROR, "line 1"},
        {"[]", ATTN_PARSE_ERROR, "expected a JSON object"},
        {"{\"platform\": \"cuda\", \"capability\": \"9.0\", \"bogus\": 1}", ATTN_PARSE_ERROR,
         "field 'bogus': unknown field"},
        {"{\"capability\": \"9.0\"}", ATTN_PARSE_ERROR, "field 'platform': required"},
        {"{\"platform\": 5}", ATTN_PARSE_ERROR, "field 'platform': expected a string"},
        {"{\"platform\": \"tpu\"}", ATTN_INVALID_ARGUMENT, "field 'platform': 'tpu'"},
        {"{\"platform\": \"opencl\", \"capability\": \"9.0\"}", ATTN_INVALID_ARGUMENT,
         "field 'capability': not allowed for platform opencl"},
        {"{\"platform\": \"cuda\"}", ATTN_PARSE_ERROR, "field 'capability': required"},
        {"{\"platform\": \"rocm\"}", ATTN_PARSE_ERROR, "field 'capability': required"},
        {"{\"platform\": \"cuda\", \"capability\": 9.0}", ATTN_PARSE_ERROR,
         "field 'capability': expected a string"},
        {"{\"platform\": \"cuda\", \"capability\": \"nine\"}", ATTN_INVALID_ARGUMENT,
         "field 'capability': 'nine'"},
        {"{\"platform\": \"cuda\", \"capability\": \"gfx942\"}", ATTN_INVALID_ARGUMENT,
         "field 'capability'"},
        {"{\"platform\": \"rocm\", \"capability\": \"gfx803\"}", ATTN_INVALID_ARGUMENT,
         "field 'capability': invalid ROCm gfx arch 'gfx803'"},
        {"{\"platform\": \"rocm\", \"capability\": \"9.4\"}", ATTN_INVALID_ARGUMENT,
         "field 'capability'"},
        {"{\"platform\": \"cpu\", \"capability\": \"9.0\"}", ATTN_INVALID_ARGUMENT,
         "field 'capability': not allowed for platform cpu"},
        {"{\"platform\": \"xpu\", \"capability\": \"1.0\"}", ATTN_INVALID_ARGUMENT,
         "field 'capability': not allowed for platform xpu"},
        {"{\"platform\": \"xpu\", \"memory_gib\": \"80\"}", ATTN_PARSE_ERROR,
         "field 'memory_gib': expected a number"},
        {"{\"platform\": \"xpu\", \"memory_gib\": -1}", ATTN_INVALID_ARGUMENT,
         "field 'memory_gib'"},
        {"{\"platform\": \"xpu\", \"memory_gib\": 0}", ATTN_INVALID_ARGUMENT, "field 'memory_gib'"},
        {"{\"platform\": \"xpu\", \"device_count\": 1.5}", ATTN_PARSE_ERROR,
         "field 'device_count': expected an integer"},
        {"{\"platform\": \"xpu\", \"device_count\": \"2\"}", ATTN_PARSE_ERROR,
         "field 'device_count'"},
        {"{\"platform\": \"xpu\", \"device_count\": 0}", ATTN_INVALID_ARGUMENT,
         "field 'device_count': 0 is outside"},
        {"{\"platform\": \"cuda\", \"capability\": \"9.0\", \"installed\": \"fa2\"}",
         ATTN_PARSE_ERROR, "field 'installed': expected an array"},
        {"{\"platform\": \"cuda\", \"capability\": \"9.0\", \"installed\": [\"fa2\", 3]}",
         ATTN_PARSE_ERROR, "field 'installed[1]': expected a string"},
        {"{\"platform\": \"cuda\", \"capability\": \"9.0\", \"installed\": [\"fa2\", \"fa5\"]}",
         ATTN_INVALID_ARGUMENT, "field 'installed[1]': unknown component 'fa5'"},
        {"{\"platform\": \"rocm\", \"capability\": \"gfx942\", \"settings\": []}", ATTN_PARSE_ERROR,
         "field 'settings': expected an object"},
        {"{\"platform\": \"rocm\", \"capability\": \"gfx942\", \"settings\": "
         "{\"rocm_use_aiter\": \"yes\"}}",
         ATTN_PARSE_ERROR, "field 'settings.rocm_use_aiter': expected true or false"},
        {"{\"platform\": \"rocm\", \"capability\": \"gfx942\", \"settings\": {\"bogus\": true}}",
         ATTN_INVALID_ARGUMENT, "field 'settings.bogus': unknown setting 'bogus'"},
        {"{\"platform\": \"xpu\", \"name\": 5}", ATTN_PARSE_ERROR, "field 'name'"},
        {"{\"platform\": \"xpu\", \"name\": \"\"}", ATTN_INVALID_ARGUMENT, "field 'name'"},
        {"{\"platform\": \"xpu\", \"name\": \"0123456789012345678901234567890123456789012345"
         "678901234567890123456789\"}",
         ATTN_INVALID_ARGUMENT, "field 'name': longer than 63"},
        {"{\"platform\": \"xpu\", \"device_name\": []}", ATTN_PARSE_ERROR, "field 'device_name'"},
        {"{\"platform\": \"xpu\", \"description\": true}", ATTN_PARSE_ERROR, "field 'description'"},
        {"{\"platform\": \"cuda\", \"capability\": \"9.0\", \"cpu\": {\"cores\": 4}}",
         ATTN_INVALID_ARGUMENT, "field 'cpu': only allowed for platform cpu"},
        {"{\"platform\": \"cpu\", \"cpu\": []}", ATTN_PARSE_ERROR,
         "field 'cpu': expected an object"},
        {"{\"platform\": \"cpu\", \"cpu\": {\"cores\": 0}}", ATTN_INVALID_ARGUMENT,
         "field 'cpu.cores'"},
        {"{\"platform\": \"cpu\", \"cpu\": {\"cores\": \"4\"}}", ATTN_PARSE_ERROR,
         "field 'cpu.cores'"},
        {"{\"platform\": \"cpu\", \"cpu\": {\"features\": [\"avx512f\"]}}", ATTN_INVALID_ARGUMENT,
         "field 'cpu.features': avx512f needs avx2 fma f16c"},
        {"{\"platform\": \"cpu\", \"cpu\": {\"features\": [\"avx9\"]}}", ATTN_INVALID_ARGUMENT,
         "field 'cpu.features[0]': unknown CPU feature 'avx9'"},
        {"{\"platform\": \"cpu\", \"cpu\": {\"features\": \"avx\"}}", ATTN_PARSE_ERROR,
         "field 'cpu.features': expected an array"},
        {"{\"platform\": \"cpu\", \"cpu\": {\"features\": [\"sse4_2\", \"avx\", \"neon\"]}}",
         ATTN_INVALID_ARGUMENT, "field 'cpu.features': mixes x86 and arm"},
        {"{\"platform\": \"cpu\", \"cpu\": {\"bogus\": 1}}", ATTN_PARSE_ERROR,
         "field 'cpu.bogus': unknown field"},
        {"{\"platform\": \"cpu\", \"cpu\": {\"vendor\": 1}}", ATTN_PARSE_ERROR,
         "field 'cpu.vendor'"},
        {"{\"platform\": \"cpu\", \"cpu\": {\"vendor\": \"AVeryLongVendorName\"}}",
         ATTN_INVALID_ARGUMENT, "field 'cpu.vendor': longer than 15"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        p = (attn_platform *)&p;
        attn_status st = attn_platform_from_json(bad[i].json, &p);
        CHECK_MSG(st == bad[i].st, "case %zu %s: got %s (%s)", i, bad[i].json, attn_status_name(st),
                  attn_last_error());
        CHECK(p == NULL);
        CHECK_CONTAINS(attn_last_error(), bad[i].frag);
        CHECK_CONTAINS(attn_last_error(), "machine spec");
    }
}

static void test_spec_files(void)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/data/machines", attn_test_source_dir());
    DIR *d = opendir(dir);
    CHECK_MSG(d != NULL, "cannot open %s", dir);
    int files = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 5, ".json") != 0) continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        attn_platform *p = NULL;
        CHECK_MSG(attn_platform_open(path, &p) == ATTN_OK, "%s: %s", path, attn_last_error());
        CHECK(p && attn_platform_is_simulated(p));
        files++;
        /* and by bare file name, found in the data folder */
        char stem[256];
        snprintf(stem, sizeof stem, "%.*s", (int)(n - 5), e->d_name);
        attn_platform *q = NULL;
        CHECK_MSG(attn_platform_open(stem, &q) == ATTN_OK, "%s: %s", stem, attn_last_error());
        if (p && q) CHECK_STR(attn_platform_name(q), attn_platform_name(p));
        attn_platform_free(q);
        attn_platform_free(p);
    }
    if (d) closedir(d);
    CHECK(files >= 3);

    /* A spec file without "name" is named after the file; errors name the path. */
    char tmp[] = "/tmp/attn_spec_XXXXXX";
    int fd = mkstemp(tmp);
    CHECK(fd >= 0);
    if (fd < 0) return;
    close(fd);
    char path[64];
    snprintf(path, sizeof path, "%s.json", tmp);
    CHECK(rename(tmp, path) == 0);
    FILE *f = fopen(path, "w");
    fputs("{\"platform\": \"cuda\", \"capability\": \"9.0\"}\n", f);
    fclose(f);
    attn_platform *p = NULL;
    CHECK_OK(attn_platform_open(path, &p));
    CHECK_STR(attn_platform_name(p), strrchr(tmp, '/') + 1);
    attn_platform_free(p);
    f = fopen(path, "w");
    fputs("{\"platform\": \"cuda\", \"capability\": \"9.0\", \"installed\": [\"fa9\"]}\n", f);
    fclose(f);
    p = (attn_platform *)&p;
    CHECK_STATUS(attn_platform_open(path, &p), ATTN_INVALID_ARGUMENT);
    CHECK(p == NULL);
    CHECK_CONTAINS(attn_last_error(), path);
    CHECK_CONTAINS(attn_last_error(), "installed[0]");
    f = fopen(path, "w");
    fputs("{\"platform\": \"cuda\",\n \"capability\": }\n", f);
    fclose(f);
    CHECK_STATUS(attn_platform_open(path, &p), ATTN_PARSE_ERROR);
    CHECK_CONTAINS(attn_last_error(), "line 2");
    unlink(path);
}

static void test_installed_and_settings(void)
{
    attn_platform *p = NULL;
    CHECK_OK(attn_platform_open("h100", &p));
    if (!p) return;
    CHECK_OK(attn_platform_set_installed(p, "fa2, flashinfer"));
    CHECK(installed_bits(p) == (COMP(FA2) | COMP(FLASHINFER)));
    CHECK_STATUS(attn_platform_set_installed(p, "fa2,bogus"), ATTN_INVALID_ARGUMENT);
    CHECK_CONTAINS(attn_last_error(), "'bogus'");
    CHECK(installed_bits(p) == (COMP(FA2) | COMP(FLASHINFER))); /* unchanged */
    CHECK_STATUS(attn_platform_set_installed(p, "none,fa2"), ATTN_INVALID_ARGUMENT);
    CHECK(installed_bits(p) == (COMP(FA2) | COMP(FLASHINFER)));
    CHECK_OK(attn_platform_set_installed(p, "AITER,tokenspeed_mla,"));
    CHECK(installed_bits(p) == (COMP(AITER) | COMP(TOKENSPEED_MLA)));
    CHECK_OK(attn_platform_set_installed(p, ""));
    CHECK(installed_bits(p) == 0);
    CHECK_OK(attn_platform_set_installed(p, "fa3"));
    CHECK_OK(attn_platform_set_installed(p, " none "));
    CHECK(installed_bits(p) == 0);
    CHECK_STATUS(attn_platform_set_installed(NULL, "fa2"), ATTN_NULL_ARGUMENT);
    CHECK_STATUS(attn_platform_set_installed(p, NULL), ATTN_NULL_ARGUMENT);

    CHECK_OK(attn_platform_set_setting(p, "rocm_use_aiter=true"));
    CHECK(attn_platform_setting(p, ATTN_SETTING_ROCM_USE_AITER));
    CHECK_OK(attn_platform_set_setting(p, "ROCM_USE_AITER=0"));
    CHECK(!attn_platform_setting(p, ATTN_SETTING_ROCM_USE_AITER));
    CHECK_OK(attn_platform_set_setting(p, "batch_invariant=1"));
    CHECK(attn_platform_setting(p, ATTN_SETTING_BATCH_INVARIANT));
    CHECK_OK(attn_platform_set_setting(p, "rocm_use_aiter_mha=FALSE"));
    CHECK(!attn_platform_setting(p, ATTN_SETTING_ROCM_USE_AITER_MHA));
    static const struct {
        const char *in, *frag;
    } bad[] = {{"bogus=true", "unknown setting 'bogus'"},
               {"batch_invariant=maybe", "'maybe'"},
               {"batch_invariant", "key=value"},
               {"=true", "missing"},
               {"batch_invariant=", "value ''"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_STATUS(attn_platform_set_setting(p, bad[i].in), ATTN_INVALID_ARGUMENT);
        CHECK_CONTAINS(attn_last_error(), bad[i].frag);
        CHECK(attn_platform_setting(p, ATTN_SETTING_BATCH_INVARIANT)); /* unchanged */
    }
    CHECK_STATUS(attn_platform_set_setting(NULL, "batch_invariant=1"), ATTN_NULL_ARGUMENT);
    CHECK_STATUS(attn_platform_set_setting(p, NULL), ATTN_NULL_ARGUMENT);
    attn_platform_free(p);

    attn_component c;
    CHECK_OK(attn_component_parse("flashinfer_cubin", &c));
    CHECK(c == ATTN_COMPONENT_FLASHINFER_CUBIN);
    CHECK_STR(attn_component_name(ATTN_COMPONENT_AITER), "aiter");
    CHECK_STR(attn_component_name(ATTN_COMPONENT_COUNT), "?");
    CHECK_STATUS(attn_component_parse("fa5", &c), ATTN_INVALID_ARGUMENT);
    CHECK_CONTAINS(attn_last_error(), "fa2, fa3, fa4, flashinfer");
    attn_setting s;
    CHECK_OK(attn_setting_parse("rocm_use_aiter_mla", &s));
    CHECK(s == ATTN_SETTING_ROCM_USE_AITER_MLA);
    CHECK_STR(attn_setting_name(ATTN_SETTING_BATCH_INVARIANT), "batch_invariant");
    CHECK_STATUS(attn_setting_parse("nope", &s), ATTN_INVALID_ARGUMENT);
    CHECK_STATUS(attn_component_parse(NULL, &c), ATTN_NULL_ARGUMENT);
    CHECK_STATUS(attn_setting_parse("batch_invariant", NULL), ATTN_NULL_ARGUMENT);
}

static const attn__json *get(const attn__json *o, const char *k)
{
    const attn__json *v = attn__json_get(o, k);
    CHECK_MSG(v != NULL, "missing key %s", k);
    return v;
}

static void test_to_json(void)
{
    static const struct {
        const char *spec, *kind, *cap, *gfx;
        bool cpu;
    } cases[] = {{"h100", "cuda", "9.0", NULL, false},
                 {"mi300x", "rocm", "9.4", "gfx942", false},
                 {"xpu", "xpu", NULL, NULL, false},
                 {"xeon", "cpu", NULL, NULL, true}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        attn_platform *p = NULL;
        CHECK_OK(attn_platform_open(cases[i].spec, &p));
        char *text = NULL;
        CHECK_OK(attn_platform_to_json(p, &text));
        attn__json *v = NULL;
        char err[128];
        CHECK_OK(attn__json_parse(text, strlen(text), &v, err, sizeof err));
        if (v) {
            CHECK_STR(attn__json_string(get(v, "kind")), cases[i].kind);
            CHECK_STR(attn__json_string(get(v, "name")), cases[i].spec);
            CHECK_STR(attn__json_string(get(v, "device")), attn_platform_device_name(p));
            CHECK(attn__json_bool(get(v, "simulated")));
            if (cases[i].cap)
                CHECK_STR(attn__json_string(get(v, "capability")), cases[i].cap);
            else
                CHECK(attn__json_type_of(get(v, "capability")) == ATTN_JSON_NULL);
            if (cases[i].gfx)
                CHECK_STR(attn__json_string(get(v, "gfx_arch")), cases[i].gfx);
            else
                CHECK(attn__json_type_of(get(v, "gfx_arch")) == ATTN_JSON_NULL);
            long long mem = 0;
            CHECK(attn__json_is_int(get(v, "memory_bytes"), &mem) &&
                  (uint64_t)mem == attn_platform_memory_bytes(p));
            CHECK(attn__json_len(get(v, "installed")) ==
                  (size_t)__builtin_popcount(installed_bits(p)));
            const attn__json *set = get(v, "settings");
            CHECK(attn__json_len(set) == ATTN_SETTING_COUNT);
            CHECK(attn__json_bool(attn__json_get(set, "rocm_use_aiter_mha")));
            const attn__json *cpu = attn__json_get(v, "cpu");
            CHECK((cpu != NULL) == cases[i].cpu);
            if (cpu) {
                long long cores = 0;
                CHECK(attn__json_is_int(get(cpu, "cores"), &cores) && cores == 56);
                CHECK_STR(attn__json_string(get(cpu, "vendor")), "GenuineIntel");
                const attn__json *f = get(cpu, "features");
                CHECK(attn__json_len(get(f, "present")) == 15);
                CHECK(attn__json_len(get(f, "usable")) == 15);
                CHECK(attn__json_len(get(f, "masked")) == 0);
            }
        }
        attn__json_free(v);
        free(text);
        attn_platform_free(p);
    }
}

static void test_null_arguments(void)
{
    attn_platform *p = NULL;
    CHECK_STATUS(attn_platform_open(NULL, &p), ATTN_NULL_ARGUMENT);
    CHECK_STATUS(attn_platform_open("h100", NULL), ATTN_NULL_ARGUMENT);
    CHECK_STATUS(attn_platform_from_json(NULL, &p), ATTN_NULL_ARGUMENT);
    CHECK_STATUS(attn_platform_from_json("{}", NULL), ATTN_NULL_ARGUMENT);
    CHECK_STATUS(attn_platform_current(NULL), ATTN_NULL_ARGUMENT);
    CHECK_STATUS(attn_platform_detect(NULL), ATTN_NULL_ARGUMENT);
    char *s = NULL;
    CHECK_STATUS(attn_platform_to_json(NULL, &s), ATTN_NULL_ARGUMENT);
    CHECK_OK(attn_platform_open("t4", &p));
    CHECK_STATUS(attn_platform_to_json(p, NULL), ATTN_NULL_ARGUMENT);
    attn_selector_config cfg;
    attn_selector_config_init(&cfg);
    const char *names[8];
    CHECK(attn_platform_priorities(NULL, &cfg, names, 8) == 0);
    CHECK(attn_platform_priorities(p, NULL, names, 8) == 0);
    attn_platform_free(p);
    attn_platform_free(NULL);
    /* accessors on NULL answer "nothing" instead of crashing */
    CHECK(attn_platform_get_kind(NULL) == ATTN_PLATFORM_UNSPECIFIED);
    CHECK_STR(attn_platform_name(NULL), "");
    CHECK_STR(attn_platform_device_name(NULL), "");
    CHECK(!attn_platform_is_simulated(NULL));
    CHECK(!attn_platform_capability(NULL, NULL, NULL));
    CHECK(attn_platform_gfx_arch(NULL) == NULL);
    CHECK(attn_platform_memory_bytes(NULL) == 0);
    CHECK(attn_platform_device_count(NULL) == 0);
    CHECK(!attn_platform_has_component(NULL, ATTN_COMPONENT_FA2));
    CHECK_STR(attn_platform_kind_name(ATTN_PLATFORM_OPENCL), "opencl");
    CHECK_STR(attn_platform_kind_name((attn_platform_kind)99), "unspecified");
}

static void *thread_current(void *arg)
{
    const attn_platform *p = NULL;
    attn_status st = attn_platform_current(&p);
    *(attn_status *)arg = st;
    return (void *)p;
}

/* ATTN_PLATFORM is read once: set before the first call in this process. */
static void test_current(void)
{
    setenv("ATTN_PLATFORM", "mi300x", 1);
    pthread_t t[8];
    attn_status st[8];
    void *r[8];
    for (int i = 0; i < 8; i++)
        pthread_create(&t[i], NULL, thread_current, &st[i]);
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], &r[i]);
    const attn_platform *p = NULL;
    CHECK_OK(attn_platform_current(&p));
    for (int i = 0; i < 8; i++)
        CHECK(st[i] == ATTN_OK && r[i] == (void *)p);
    CHECK_STR(attn_platform_name(p), "mi300x");
    CHECK(attn_platform_is_simulated(p));
    setenv("ATTN_PLATFORM", "h100", 1); /* too late: already made */
    const attn_platform *q = NULL;
    CHECK_OK(attn_platform_current(&q));
    CHECK(q == p);
}

int main(void)
{
    test_current();
    test_catalog();
    test_bare_specs();
    test_json_specs();
    test_spec_files();
    test_installed_and_settings();
    test_to_json();
    test_null_arguments();
    return attn_test_finish("test_platform_sim");
}
