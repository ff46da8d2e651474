/* Engine internals shared by its files: engine.c (create, free, the
 * startup sequence), engine_groups.c (selection, KV and encoder groups,
 * pools, builders), engine_kernels.c (kernels, stand-ins, step buffers),
 * engine_info.c (accessors), scheduler.c (requests and the step loop),
 * step.c (the batch, its metadata and the attention calls), engine_dcp.c.
 * Everything a step touches is allocated at startup; the step only writes
 * into these buffers. */
#ifndef ATTN_ENGINE_IMPL_H
#define ATTN_ENGINE_IMPL_H

#include "attn/backend.h"
#include "attn/engine.h"
#include "attn/kernel.h"
#include "device/device_impl.h"

#define ATTN__ENGINE_ERR_MAX 4096

/* One device instance of the engine (one queue: every operation of the
 * engine on that device runs on it, in order) and its step buffers: the
 * device's own memory for q, k, v and out, or, on a host-visible device,
 * the engine's host staging buffers themselves (no copies). */
typedef struct attn__eng_dev {
    attn_device *dev;
    bool host_visible;
    void *q, *k, *v, *out;
} attn__eng_dev;

#define ATTN__ENG_MAX_DEVS 4

/* The kernel a group runs each step: the selected backend's own (native)
 * or a stand-in the caller named (emulated), opened per layer through the
 * checked handle (attn/kernel.h), with its own builder state when its
 * metadata differs from the selected backend's. */
typedef struct attn__eng_kernel {
    const attn_backend *backend; /* the resolved object (name, descriptor) */
    attn__eng_dev *dev;          /* the device it runs on */
    bool own_builder;            /* true: metadata from `builder`, else the group's */
    attn_builder_ops builder;
    void *builder_state;
    attn_kernel **k; /* [layers_run] one handle per layer */
    const void *md;  /* this step's metadata for it */
} attn__eng_kernel;

typedef struct attn__eng_group {
    int model_group;
    int num_layers;
    int *layers;
    attn_layer_spec spec;
    attn_layer_params params;
    attn_selector_config selcfg;
    attn_kv_kind kind;
    const attn_selection *sel;
    const char *requested;
    const attn_backend *backend;
    attn_builder_ops builder; /* const copy, fixed at startup */
    void *builder_state;
    attn__eng_dev *builder_dev; /* the device its builder was created on */
    attn_kv_layout_info layout;
    attn_block_pool *pool;
    /* kernels */
    attn_kernel_mode mode;
    const char *kernel_name;
    const char *kernel_variant;
    char kernel_note[512];
    attn__eng_kernel run; /* the kernel that computes */
    int layers_run;
    int *run_layers;
    attn_kv_cache *cache; /* memory of the layers run */
    float *sinks;         /* [num_heads] sink logits (from io.weights), or NULL */
    void *w_uk, *w_uv;    /* MLA projections (from io.weights), or NULL */
    /* per step */
    int32_t *block_table;  /* [max_seqs][max_blocks] */
    int64_t *slot_mapping; /* [max_tokens] */
    attn_common_metadata cm;
    int common_prefix_len;
    const void *md;
    /* Decided at startup: the earlier group with the same builder type and
     * spec whose build this one reuses within a step (-1: none). */
    int share_with;
    bool built; /* built (not reused) in the current step */
    bool reused;
    bool have_step;       /* cm/md describe the last step with a batch */
    struct attn_dcp *dcp; /* DCP runner (engine_dcp.c), NULL without DCP */
    int64_t *dcp_slots;   /* [max_tokens] this rank's write slots */
} attn__eng_group;

/* engine_dcp.c: DCP startup consensus and runners (after attn__startup,
 * whatever its result, so that every rank takes part), and teardown. */
attn_status attn__engine_dcp_setup(attn_engine *e, attn_status startup);
void attn__engine_dcp_free(attn__eng_group *g);

/* Encoder-only (BERT) and encoder (Whisper encoder) layer groups reuse the
 * group record without pool, cache, builder or block table: their kernels
 * take the step's K/V directly and need no backend metadata. */

enum { ATTN__REQ_FREE = 0, ATTN__REQ_WAITING, ATTN__REQ_RUNNING };

typedef struct attn__eng_req {
    uint64_t id;
    int state;
    int prompt_len, output_len;
    int num_output;   /* generated so far */
    int num_computed; /* tokens whose K/V are in the cache */
    int prefix_id, prefix_len;
    int slot;      /* running slot (block lists), -1 when waiting */
    int scheduled; /* tokens scheduled this step */
    int order_pos; /* batch row this step */
} attn__eng_req;

/* A cached shared prefix: its full blocks in every group, one reference
 * held by the cache itself. */
typedef struct attn__eng_prefix {
    int prefix_id;
    int num_blocks;  /* per group */
    int32_t *blocks; /* [num_groups][max_blocks] */
} attn__eng_prefix;

#define ATTN__ENG_MAX_PREFIXES 16

struct attn_engine {
    attn_engine_config cfg;
    attn_engine_state state;
    attn_status status;
    char error[ATTN__ENGINE_ERR_MAX];
    const attn_platform *platform;
    const attn_model *model;
    int num_model_groups;
    const attn_selection **selections; /* [num_model_groups] */
    char (*requested)[64];             /* [num_model_groups] */
    attn_selector_config *selcfgs;     /* [num_model_groups] */
    int block_size;                    /* of a physical block: tokens of this rank */
    char block_size_source[96];
    /* DCP world size, and the scheduler's (virtual) block of block_size *
     * dcp_world tokens: each rank's block with the same id holds its own
     * block_size of them (vLLM's block_size * dcp_world_size), so a rank's
     * pool is sized for its share of the tokens. Both 1 / block_size
     * without DCP. */
    int dcp_world;
    int sched_block_size;
    int num_blocks; /* per rank */
    int max_blocks; /* scheduler blocks per request */
    int max_model_len;
    int max_seqs, max_tokens, max_requests;
    uint64_t kv_bytes;
    int reorder_threshold; /* smallest positive builder threshold */
    int num_groups;
    attn__eng_group *groups;
    /* encoder groups (no paged cache), driven over each step's new prompt
     * tokens; a prompt is then never chunked */
    int num_enc;
    attn__eng_group *enc;
    bool encoder_only; /* encoder groups and no KV group: a request is its prompt */
    /* requests */
    attn__eng_req *reqs; /* [max_requests] */
    int *free_reqs, num_free_reqs;
    int *waiting; /* ring of request indices */
    int wait_head, num_waiting;
    int *running, num_running;       /* request indices, admission order */
    int *free_slots, num_free_slots; /* running slots */
    attn_block_list *lists;          /* [max_seqs][num_groups] */
    int32_t *list_ids;               /* backing store of lists */
    attn__eng_prefix prefixes[ATTN__ENG_MAX_PREFIXES];
    int num_prefixes;
    int32_t *prefix_ids; /* backing store of prefixes */
    int *reserve_before; /* [num_groups] list lengths before a reservation */
    uint64_t next_id;
    attn_engine_counts counts;
    /* per-step scratch */
    int *sched; /* [max_seqs] request indices scheduled */
    int num_sched;
    int *order;             /* [max_seqs] batch order (indices into sched) */
    int32_t *qlens;         /* [max_seqs] */
    int32_t *qsl;           /* [max_seqs + 1] */
    int32_t *seq_lens;      /* [max_seqs] */
    int32_t *positions;     /* [max_tokens] */
    uint8_t *is_prefilling; /* [max_seqs] */
    uint64_t *token_req_id; /* [max_tokens] request id of each token */
    /* the encoder batch: each scheduled request's new prompt tokens */
    int32_t *enc_qsl;           /* [max_seqs + 1] */
    int32_t *enc_seq_lens;      /* [max_seqs] */
    int32_t *enc_positions;     /* [max_tokens] */
    uint64_t *enc_token_req_id; /* [max_tokens] */
    attn_common_metadata enc_cm;
    /* devices: devs[0] is the engine's own host instance */
    attn__eng_dev devs[ATTN__ENG_MAX_DEVS];
    int num_devs;
    /* host staging of the layers run (devs[0]'s memory): inputs written by
     * io.inputs, outputs read by io.outputs; bytes of each */
    void *q, *k, *v, *out;
    size_t q_bytes, k_bytes, out_bytes;
    void *mla_scratch;
    size_t mla_scratch_size;
    /* within-step reuse: (builder type, spec) -> group that built */
    bool have_step;
};

static inline attn_block_list *attn__list(attn_engine *e, const attn__eng_req *r, int g)
{
    return &e->lists[(size_t)r->slot * (size_t)e->num_groups + (size_t)g];
}

/* engine.c */
attn_status attn__engine_fail(attn_engine *e, attn_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void *attn__eng_calloc(size_t n, size_t size, bool *oom); /* sets *oom on failure */

/* engine_groups.c: the startup steps before the kernels */
attn_status attn__engine_select_all(attn_engine *e);
attn_status attn__engine_make_groups(attn_engine *e);
attn_status attn__engine_make_enc_groups(attn_engine *e);
attn_status attn__engine_size_pools(attn_engine *e);
attn_status attn__engine_create_builders(attn_engine *e);
attn_builder_init attn__engine_builder_init(const attn_engine *e, const attn__eng_group *g,
                                            const attn_backend_desc *d);
int attn__engine_kv_heads(const attn__eng_group *g);

/* engine_device.c: the engine's device instances and their step buffers */
attn_status attn__engine_open_host(attn_engine *e);
attn_status attn__engine_device(attn_engine *e, const attn_backend *b, attn__eng_dev **out);
attn_status attn__engine_device_buffers(attn_engine *e);
void attn__engine_devices_free(attn_engine *e);
/* host staging -> the device's buffer, and back (no-ops on host-visible devices) */
attn_status attn__eng_dev_in(const attn__eng_dev *d, void *dev_buf, const void *host, size_t bytes);
attn_status attn__eng_dev_out(const attn__eng_dev *d, void *host, const void *dev_buf,
                              size_t bytes);

/* engine_kernels.c */
attn_status attn__engine_setup_kernels(attn_engine *e, attn__eng_group *g);
attn_status attn__engine_setup_enc_kernels(attn_engine *e, attn__eng_group *g);
attn_status attn__engine_alloc_buffers(attn_engine *e);
void attn__engine_kernel_free(attn__eng_group *g, attn__eng_kernel *k);

/* step.c */
void attn__engine_build_batch(attn_engine *e, attn_engine_step_stats *st);
attn_status attn__engine_build_metadata(attn_engine *e, attn_engine_step_stats *st);
attn_status attn__engine_run_attention(attn_engine *e, attn_engine_step_stats *st);
void attn__engine_build_enc_batch(attn_engine *e, attn_engine_step_stats *st);
attn_status attn__engine_run_encoder(attn_engine *e, attn_engine_step_stats *st);
double attn__engine_now_ns(void);

/* scheduler.c */
attn_status attn__engine_alloc_requests(attn_engine *e);
void attn__engine_free_requests(attn_engine *e);
void attn__engine_release_all(attn_engine *e);

#endif
