/* `attn serve` for 200 steps of seeded traffic on a pool small enough to
 * force preemption: the JSON run must show preemptions and a clean block
 * accounting at every level (no reference leaked, no double free refused,
 * the pool consistent, every block free after releasing all requests), the
 * same seed must give the same run, and every step must have produced
 * finite attention output. */
#include <stdlib.h>

#include "test.h"
#include "util/json.h"

static attn__json *run_json(const char *args, int *rc)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' serve %s --json 2>/dev/null",
             getenv("ATTN_BIN") ? getenv("ATTN_BIN") : "attn", args);
    char *out = NULL;
    *rc = attn_test_run(cmd, &out);
    attn__json *j = NULL;
    char err[256] = "";
    if (!out || attn__json_parse(out, strlen(out), &j, err, sizeof err) != ATTN_OK) {
        fprintf(stderr, "could not parse the output of %s: %s\n%.400s\n", cmd, err, out ? out : "");
        j = NULL;
    }
    free(out);
    return j;
}

static long long num(const attn__json *o, const char *key)
{
    const attn__json *v = attn__json_get(o, key);
    long long x = -1;
    if (!v || !attn__json_is_int(v, &x)) return -999999;
    return x;
}

static bool flag(const attn__json *o, const char *key)
{
    const attn__json *v = attn__json_get(o, key);
    return v && attn__json_type_of(v) == ATTN_JSON_BOOL && attn__json_bool(v);
}

#define SMALL "--machine h100 --layers 2 --heads 4 --kv-heads 2 --head-size 64 "

int main(void)
{
    const char *args = SMALL "--num-blocks 40 --block-size 16 --max-num-seqs 16 --steps 200 "
                             "--rate 0.6 --prompt-len 24:200 --output-len 8:48 --seed 11 "
                             "--prefix-share 1 --prefix-len 48 --check";
    int rc = -1;
    attn__json *j = run_json(args, &rc);
    CHECK(rc == 0);
    if (!j) return attn_test_finish("test_engine_serve");
    CHECK_STR(attn__json_string(attn__json_get(j, "state")), "ready");
    const attn__json *groups = attn__json_get(j, "groups");
    CHECK(groups && attn__json_len(groups) == 1);
    CHECK_STR(attn__json_string(attn__json_get(attn__json_at(groups, 0), "backend")), "FLASH_ATTN");
    CHECK(num(j, "num_blocks") == 40 && num(j, "block_size") == 16);
    const attn__json *steps = attn__json_get(j, "steps");
    CHECK(steps && attn__json_len(steps) == 200);
    long long preempted = 0, tokens = 0, cascade_steps = 0;
    bool finite = true, in_budget = true, emulated = true;
    for (size_t i = 0; steps && i < attn__json_len(steps); i++) {
        const attn__json *s = attn__json_at(steps, i);
        preempted += num(s, "preempted");
        tokens += num(s, "num_tokens");
        cascade_steps += num(s, "common_prefix_len") > 0;
        finite = finite && flag(s, "output_finite");
        in_budget = in_budget && num(s, "blocks_in_use") <= 40 && num(s, "num_reqs") <= 16;
        emulated = emulated && (num(s, "num_reqs") == 0 || flag(s, "emulated"));
    }
    CHECK_MSG(preempted > 0, "the small pool forced no preemption");
    CHECK(finite && in_budget && emulated);
    CHECK(cascade_steps > 0); /* shared prefixes reached the cascade path */
    const attn__json *fin = attn__json_get(j, "final");
    CHECK(fin != NULL);
    if (fin) {
        CHECK(num(fin, "steps") == 200);
        CHECK(num(fin, "preemptions") == preempted && num(fin, "tokens") == tokens);
        CHECK(num(fin, "finished") > 0 && num(fin, "admitted") >= num(fin, "finished"));
        CHECK(flag(fin, "accounting_ok"));
        const attn__json *b = attn__json_at(attn__json_get(fin, "blocks"), 0);
        CHECK(b && num(b, "leaked") == 0 && num(b, "rejected_releases") == 0 &&
              flag(b, "consistent"));
        CHECK(b &&
              num(b, "total_refs") == num(b, "held_by_requests") + num(b, "held_by_prefix_cache"));
        const attn__json *a = attn__json_at(attn__json_get(fin, "after_release"), 0);
        CHECK(a && num(a, "num_free") == 40 && num(a, "total_refs") == 0 && num(a, "leaked") == 0 &&
              flag(a, "consistent"));
    }

    /* the same seed, the same run */
    int rc2 = -1;
    attn__json *j2 = run_json(args, &rc2);
    CHECK(rc2 == 0 && j2);
    if (j2 && fin) {
        const attn__json *f2 = attn__json_get(j2, "final");
        CHECK(num(f2, "preemptions") == num(fin, "preemptions") &&
              num(f2, "tokens") == num(fin, "tokens") &&
              num(f2, "finished") == num(fin, "finished"));
        const attn__json *s1 = attn__json_at(steps, 150),
                         *s2 = attn__json_at(attn__json_get(j2, "steps"), 150);
        CHECK(num(s1, "num_tokens") == num(s2, "num_tokens") &&
              num(s1, "blocks_in_use") == num(s2, "blocks_in_use"));
        double c1 = attn__json_number(attn__json_get(s1, "output_checksum"));
        double c2 = attn__json_number(attn__json_get(s2, "output_checksum"));
        CHECK(c1 == c2);
    }
    attn__json_free(j2);
    attn__json_free(j);

    /* a failed startup: exit 3, no step, the selector's message */
    j = run_json(SMALL "--installed fa2,fa3,fa4 --backend FLASHINFER --steps 5", &rc);
    CHECK(rc == 3);
    if (j) {
        CHECK_STR(attn__json_string(attn__json_get(j, "state")), "failed");
        CHECK_CONTAINS(
            attn__json_string(attn__json_get(j, "error")),
            "Selected backend AttentionBackendEnum.FLASHINFER is not valid for this "
            "configuration. Reason: [ModuleNotFoundError: No module named 'flashinfer']");
        CHECK(attn__json_get(j, "steps") == NULL);
    }
    attn__json_free(j);
    return attn_test_finish("test_engine_serve");
}
