/* The platform layer's last-level cache (cpu_cache.c) over fake sysfs
 * trees written here: the highest data level wins, instructions caches do
 * not count, instances are told apart by shared_cpu_list and summed, the
 * affinity set picks the CPUs, malformed sizes are skipped, an empty or
 * missing tree is "unknown" (0), never an error. Then this machine: where
 * sysfs describes caches the detected LLC agrees with a scan of it. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "platform/detect.h"
#include "test.h"

#define MIB ((uint64_t)1 << 20)

static char g_root[256];

static void put(const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_root, rel);
    for (char *p = path + strlen(g_root) + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        CHECK_MSG(mkdir(path, 0700) == 0 || errno == EEXIST, "mkdir %s", path);
        *p = '/';
    }
    FILE *f = fopen(path, "w");
    CHECK_MSG(f != NULL, "cannot write %s", path);
    if (!f) return;
    fprintf(f, "%s\n", text);
    fclose(f);
}

/* cpuN/cache/indexI with the four attributes */
static void cache(const char *tree, int cpu, int index, const char *level, const char *type,
                  const char *size, const char *shared)
{
    char rel[160];
    const char *attr[4][2] = {
        {"level", level}, {"type", type}, {"size", size}, {"shared_cpu_list", shared}};
    for (int i = 0; i < 4; i++) {
        if (!attr[i][1]) continue;
        snprintf(rel, sizeof rel, "%s/cpu%d/cache/index%d/%s", tree, cpu, index, attr[i][0]);
        put(rel, attr[i][1]);
    }
}

static attn__cpu_llc scan(const char *tree, const cpu_set_t *cpus)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_root, tree);
    attn__cpu_llc l;
    CHECK_OK(attn__cpu_llc_scan(path, cpus, &l));
    return l;
}

/* Two sockets of two CPUs: private L1/L2, one L3 per socket. */
static void test_two_sockets(void)
{
    for (int c = 0; c < 4; c++) {
        char own[8];
        snprintf(own, sizeof own, "%d", c);
        const char *l3 = c < 2 ? "0-1" : "2-3";
        cache("two", c, 0, "1", "Data", "48K", own);
        cache("two", c, 1, "1", "Instruction", "32K", own);
        cache("two", c, 2, "2", "Unified", "2048K", own);
        cache("two", c, 3, "3", "Unified", "107520K", l3);
    }
    put("two/cpufreq/policy", "not a cpu folder");
    put("two/online", "0-3");
    attn__cpu_llc l = scan("two", NULL);
    CHECK(l.level == 3 && l.instances == 2);
    CHECK(l.instance_bytes == 105 * MIB && l.total_bytes == 210 * MIB);
    CHECK_STR(l.source, "sysfs");

    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(2, &one);
    CPU_SET(3, &one);
    l = scan("two", &one); /* affinity on the second socket only */
    CHECK(l.instances == 1 && l.total_bytes == 105 * MIB);
    CPU_ZERO(&one);
    CPU_SET(7, &one);
    l = scan("two", &one); /* no listed CPU in the set */
    CHECK(l.total_bytes == 0 && l.instances == 0);
    CHECK_STR(l.source, "none");
}

/* No L3: the L2s are the LLC; an Instruction cache at a higher level, a
 * malformed size and a missing shared_cpu_list do not break it. */
static void test_odd_trees(void)
{
    cache("l2", 0, 0, "1", "Data", "32K", "0");
    cache("l2", 0, 1, "2", "Unified", "1M", "0-1");
    cache("l2", 0, 2, "4", "Instruction", "64M", "0-1");
    cache("l2", 1, 0, "1", "Data", "32K", "1");
    cache("l2", 1, 1, "2", "Unified", "1M", "0-1");
    cache("l2", 2, 0, "1", "Data", "32K", "2");
    cache("l2", 2, 1, "2", "Unified", "lots", "2-3");
    cache("l2", 3, 1, "2", "Unified", "2M", NULL); /* its own instance */
    attn__cpu_llc l = scan("l2", NULL);
    CHECK(l.level == 2 && l.instances == 2);
    CHECK(l.instance_bytes == 2 * MIB && l.total_bytes == 3 * MIB);

    put("empty/cpu0/topology/core_id", "0");
    l = scan("empty", NULL);
    CHECK(l.total_bytes == 0 && l.level == 0);
    CHECK_STR(l.source, "none");
    l = scan("no-such-tree", NULL);
    CHECK(l.total_bytes == 0);

    cache("big", 0, 0, "3", "Unified", "99999999999999999999G", "0");
    l = scan("big", NULL); /* a size that overflows is malformed */
    CHECK(l.total_bytes == 0);

    attn__cpu_llc out;
    CHECK_STATUS(attn__cpu_llc_scan(NULL, NULL, &out), ATTN_NULL_ARGUMENT);
    CHECK_STATUS(attn__cpu_llc_scan(g_root, NULL, NULL), ATTN_NULL_ARGUMENT);
}

static void test_this_machine(void)
{
    const attn__cpu_llc *l = attn__cpu_llc_get();
    CHECK(l == attn__cpu_llc_get());
    CHECK(l->total_bytes == (uint64_t)l->instances * l->instance_bytes ||
          !strcmp(l->source, "sysfs")); /* cpuid: instances x one size */
    CHECK(l->instance_bytes <= l->total_bytes);
    printf("this machine: L%d, %d instance(s), %llu bytes in all (from %s)\n", l->level,
           l->instances, (unsigned long long)l->total_bytes, l->source);
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0 ||
        access("/sys/devices/system/cpu/cpu0/cache/index0/size", R_OK) != 0) {
        printf("SKIP sysfs comparison: no affinity set or no sysfs cache folders here\n");
        return;
    }
    attn__cpu_llc again;
    CHECK_OK(attn__cpu_llc_scan("/sys/devices/system/cpu", &set, &again));
    CHECK_STR(l->source, "sysfs");
    CHECK(again.total_bytes == l->total_bytes && again.instances == l->instances);
    CHECK(l->total_bytes > 0 && l->level >= 1);
}

int main(void)
{
    snprintf(g_root, sizeof g_root, "/tmp/attn_llc_XXXXXX");
    if (!mkdtemp(g_root)) attn_test_skip("test_platform_cpu_cache", "no temporary folder");
    test_two_sockets();
    test_odd_trees();
    test_this_machine();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
    CHECK(system(cmd) == 0);
    return attn_test_finish("test_platform_cpu_cache");
}
