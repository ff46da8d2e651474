/* The serving engine: the startup sequence and the step loop.
 *
 * Startup (attn_engine_create), in vLLM's order: load plugins -> platform ->
 * one selection per layer spec of the model (cached: layers with equal
 * specs share one), honouring a requested backend and per-kind overrides ->
 * block size (the user's --block-size wins, else the first KV group's
 * backend's preferred size) -> KV-cache groups allocated (one block pool
 * each, layout from the backend) -> metadata builders and kernels
 * constructed on the kernel's device (one instance, one queue, per engine
 * and device kind: attn/device.h; the KV cache and step buffers are its
 * memory, kernels are opened through attn/kernel.h) -> READY. From then on each group's backend is
 * fixed: the engine holds a const copy of its builder and kernel ops and never looks a backend up
 * again. A startup failure leaves the engine FAILED, carrying the selection's exact message; a
 * failed engine admits nothing.
 *
 * Every step (attn_engine_step): continuous batching (running decodes
 * first, then running prefills, then waiting requests, chunked under a token
 * budget), blocks allocated per step and requests preempted (blocks back to
 * the pool, recomputed later) when a pool runs dry; the common metadata is
 * built from the live batch into engine-owned buffers; each KV group's
 * builder runs, with the within-step reuse rule (groups sharing a builder
 * type and spec build once, the others only swap block tables); then K/V
 * are written and attention runs for the chosen layers on the Q/K/V the
 * caller writes through attn_engine_io, with the backend's own kernel, or —
 * for a backend with no code here (a simulated machine) — with a stand-in
 * kernel the caller names ("emulated"). The engine makes up no data and
 * checks no result: the test harness beside libattn (sim/harness) gives
 * synthetic inputs, sums outputs and re-runs REFERENCE. Encoder-only and encoder groups (no paged
 * cache) run too, over each step's new prompt tokens with K/V passed directly (see
 * attn_engine_num_encoder_groups). A step allocates no heap memory. Nothing of one step is
 * used by the next.
 *
 * Threads: an engine is used by one thread at a time; any number of engines
 * may live in one process (there is no global engine state). */
#ifndef ATTN_ENGINE_H
#define ATTN_ENGINE_H

#include "attn/comm.h"
#include "attn/kvcache.h"
#include "attn/model.h"
#include "attn/select.h"

ATTN_EXTERN_C_BEGIN

typedef struct attn_engine attn_engine;

typedef enum attn_engine_state { ATTN_ENGINE_READY = 1, ATTN_ENGINE_FAILED = 2 } attn_engine_state;

/* ---- the caller's side of the math ----------------------------------------- */

/* A group's constant tensors, asked for once at startup (engine-owned
 * memory, zero until written): the sink logits [num_heads] (float) when the
 * layer has sinks, MLA's W_UK [heads][qk_nope_head_dim][kv_lora_rank] and
 * W_UV [heads][kv_lora_rank][v_head_dim] in `elem`. */
typedef struct attn_engine_weights {
    int group;
    bool encoder; /* an encoder group (attn_engine_encoder_group_info_get) */
    const attn_layer_spec *spec;
    attn_elem elem;
    float *sinks; /* NULL without sinks */
    void *w_uk, *w_uv;
    size_t n_uk, n_uv; /* elements */
} attn_engine_weights;

/* One layer's call in a step. inputs() writes q, k and v (the step's new
 * tokens, row-major [num_tokens][heads][dim]; MLA: k = the latent
 * [num_tokens][1][kv_lora_rank], v = the rope part [num_tokens][1][rope]);
 * the engine then writes K/V into the cache and runs the kernel; outputs()
 * reads out [num_tokens][q_heads][out_dim]. The rest says what the kernel
 * ran on, for a caller that runs another kernel on the same data. q, k, v
 * and out are host memory whatever the device: the engine copies them to
 * and from the device's memory. kv is a view of the device's memory
 * (kv->device): when attn_device_host_visible() is false the caller must
 * not read kv->data directly (attn_kv_read copies rows out). */
typedef struct attn_engine_layer_io {
    int group;
    bool encoder;
    int layer;      /* model layer index */
    int layer_slot; /* 0 .. layers_run - 1 */
    attn_elem elem; /* of q, k, v and out */
    int num_tokens;
    const uint64_t *token_req_ids; /* [num_tokens] request id of each token */
    const int32_t *positions;      /* [num_tokens] */
    int q_heads, q_dim, k_heads, k_dim, v_heads, v_dim, out_dim;
    void *q, *k, *v;
    const void *out;
    const attn_layer_params *params;
    const attn_common_metadata *common;
    int common_prefix_len;
    const attn_kv_view *kv; /* after the write; NULL for encoder groups */
    const void *w_uk, *w_uv;
} attn_engine_layer_io;

/* Any member may be NULL (inputs then stay as the last call left them,
 * zero at first). A callback's failure status ends the step with it. Time
 * spent in callbacks is reported as io_ns, not as attention_ns. */
typedef struct attn_engine_io {
    void *user;
    attn_status (*weights)(void *user, const attn_engine_weights *w);
    attn_status (*inputs)(void *user, const attn_engine_layer_io *io);
    attn_status (*outputs)(void *user, const attn_engine_layer_io *io);
} attn_engine_io;

/* Limits (attn/types.h): block_size <= ATTN_MAX_BLOCK_SIZE, num_blocks <=
 * ATTN_MAX_NUM_BLOCKS, max_num_seqs and max_waiting <= ATTN_MAX_NUM_REQS,
 * max_num_batched_tokens and max_model_len <= ATTN_MAX_SEQ_LEN; beyond them
 * attn_engine_create returns ATTN_INVALID_ARGUMENT. */
typedef struct attn_engine_config {
    uint32_t struct_size;          /* sizeof: attn_engine_config_init; attn/abi.h */
    const attn_platform *platform; /* NULL = attn_platform_current(); borrowed */
    const attn_model *model;       /* required; borrowed for the engine's lifetime */
    const char *backend;           /* requested backend; NULL/"auto" = automatic */
    /* per-kind overrides, NULL = unset (reference §14) */
    const char *per_kind[ATTN_KIND_COUNT];
    int block_size;               /* 0 = the backend's preferred size */
    attn_kv_dtype kv_cache_dtype; /* default ATTN_KV_AUTO */
    attn_kv_layout kv_layout;     /* asked for when the backend has no requirement */
    int num_blocks;               /* blocks per KV group; 0 = from memory */
    double kv_memory_fraction;    /* 0 = 0.9 of the device memory (CPU: of 4 GiB) */
    int max_num_seqs;             /* 0 = 256 */
    int max_num_batched_tokens;   /* token budget per step; 0 = 2048 */
    int max_model_len;            /* 0 = 8192, lowered to what the pool can hold */
    int max_waiting;              /* waiting-queue capacity; 0 = 4096 */
    bool run_kernels;             /* write K/V and run attention each step */
    int layers_to_run;            /* 0 = one per KV group; -1 = every layer; N = first N */
    attn_engine_io io;            /* where Q/K/V come from and outputs go */
    /* Kernels that stand in for a selected backend without code here:
     * NULL-terminated backend names, tried in order on stand_in_platform
     * (borrowed); the first that resolves, has the entry points and is
     * valid for the layer computes. NULL = no stand-ins: such a group runs
     * no kernel (kernel_note says why). */
    const attn_platform *stand_in_platform;
    const char *const *stand_ins;     /* standard attention (and encoder groups) */
    const char *const *stand_ins_mla; /* MLA layers */
    bool check_metadata;              /* run attn_common_metadata_check every step */
    /* Decode context parallelism (attn/dcp.h): NULL or a one-rank
     * communicator = off. Every rank creates the same engine with the same
     * config and traffic; startup compares the ranks' choices (backend, KV
     * layout, block size per KV group) and fails on every rank with one
     * message naming each rank's choice when they differ. Each rank then
     * keeps only its share of every request's KV cache and every step's
     * attention is merged across ranks, so all ranks see the same outputs
     * (io.outputs sees the merged output; io.kv holds only this rank's share). */
    attn_comm *dcp_comm;
    int dcp_interleave; /* cp_kv_cache_interleave_size; 0 = 1 */
    /* vLLM's --kv-cache-dtype-skip-layers: layer indices and "sliding_window"
     * (every sliding-window layer), comma-separated; those layers keep the
     * model's dtype ("auto") while kv_cache_dtype stays the run's, which
     * every group's selection reads (run_kv_cache_dtype). libattn keeps one
     * KV dtype per group of equal layers: a list that covers some layers of
     * a group and not others is ATTN_UNSUPPORTED, naming them. NULL = none. */
    const char *kv_cache_dtype_skip_layers;
} attn_engine_config;

/* Defaults above; model must still be set. */
ATTN_API void attn_engine_config_init(attn_engine_config *cfg);

/* Returns ATTN_OK with a READY engine, or a failure status. Argument errors
 * (NULL cfg/out, no model, sizes out of range) return the status with *out
 * NULL. Startup failures (no plugin platform, a selection that fails, a
 * block size a backend cannot use, memory) return the status with *out set
 * to an engine in the FAILED state whose attn_engine_error() is the exact
 * message (e.g. "Selected backend FLASHINFER is not valid for this
 * configuration. Reason: ['ImportError: ...']"); free it as usual. */
ATTN_API attn_status attn_engine_create(const attn_engine_config *cfg, attn_engine **out);
ATTN_API void attn_engine_free(attn_engine *e);

ATTN_API attn_engine_state attn_engine_get_state(const attn_engine *e);
ATTN_API attn_status attn_engine_status(const attn_engine *e); /* ATTN_OK when READY */
ATTN_API const char *attn_engine_error(const attn_engine *e);  /* NULL when READY */
ATTN_API const attn_platform *attn_engine_platform(const attn_engine *e);
ATTN_API const attn_model *attn_engine_model(const attn_engine *e);

/* ---- startup summary ---------------------------------------------------- */

/* Block size of every KV group and where it came from ("--block-size",
 * "preferred by FLASH_ATTN", ...). 0 when the model has no KV cache. */
ATTN_API int attn_engine_block_size(const attn_engine *e);
ATTN_API const char *attn_engine_block_size_source(const attn_engine *e);
ATTN_API int attn_engine_num_blocks(const attn_engine *e);    /* per KV group */
ATTN_API uint64_t attn_engine_kv_bytes(const attn_engine *e); /* all groups, all layers */
ATTN_API int attn_engine_max_model_len(const attn_engine *e);

/* One selection per model group (attn_model_num_groups), including groups
 * without a KV cache (encoder-only, encoder self-attention). NULL for a
 * group the startup did not reach. The selection belongs to the selector's
 * cache. */
ATTN_API const attn_selection *attn_engine_selection(const attn_engine *e, int model_group);

/* KV-cache groups: the model's groups that keep a paged decoder cache,
 * split like vLLM's hybrid allocator when several specs are present (each
 * spec's layers in groups of the smallest spec's layer count), so two KV
 * groups may share a spec. 0 for an attention-free model. */
ATTN_API int attn_engine_num_groups(const attn_engine *e);

typedef enum attn_kernel_mode {
    ATTN_KERNEL_NONE = 0,    /* no kernel runs (disabled, or none usable) */
    ATTN_KERNEL_NATIVE = 1,  /* the selected backend's own kernel */
    ATTN_KERNEL_EMULATED = 2 /* libattn's CPU kernel stands in for a descriptor-only backend */
} attn_kernel_mode;

typedef struct attn_engine_group_info {
    int model_group;
    int num_layers;
    const int *layers; /* model layer indices */
    attn_kv_kind kind;
    const char *backend;   /* the fixed backend */
    const char *requested; /* what was asked for this group (NULL = automatic) */
    const attn_selection *selection;
    const char *builder_type;   /* the builder's type_name */
    attn_cg_support cg_support; /* graph-capture tier of its metadata */
    int reorder_batch_threshold;
    attn_kv_layout layout;
    attn_kv_shape kv_shape; /* one layer's logical cache shape */
    attn_elem kv_elem;
    uint64_t bytes_per_block; /* one block across the group's layers */
    int num_blocks;
    attn_kernel_mode kernel_mode;
    const char *kernel;              /* backend whose kernel computes ("CPU_ATTN"), or NULL */
    const char *kernel_variant;      /* e.g. "avx2" when the kernel reports one */
    const char *kernel_note;         /* why no kernel runs, when kernel_mode is NONE */
    const char *device;              /* (v2) the kernel's device ("host"), or NULL */
    int layers_run;                  /* layers executed per step */
    const attn_layer_params *params; /* what the kernels are created with */
    /* the sizes the group's builder was created with */
    int max_num_reqs, max_num_tokens, max_blocks_per_req;
} attn_engine_group_info;

ATTN_API attn_status attn_engine_group_info_get(const attn_engine *e, int group,
                                                attn_engine_group_info *out);
ATTN_API const char *attn_engine_group_backend(const attn_engine *e, int group);
ATTN_API const attn_selection *attn_engine_group_selection(const attn_engine *e, int group);

/* Encoder groups: the model's encoder-only (BERT) and encoder (Whisper
 * encoder) self-attention groups, one per model group, which keep no paged
 * cache. Each step runs their kernel once over every scheduled request's
 * new prompt tokens, non-causal, with K/V passed directly (no block table,
 * no slot mapping, no backend metadata). An engine with encoder groups
 * never chunks a prompt (a request waits until its whole prompt fits the
 * step's budget) and refuses prompts longer than max_num_batched_tokens;
 * without KV groups (an encoder-only model) a request is its prompt and
 * finishes in the step that processes it. The info's cache fields
 * (builder_type, layout, kv_shape, kv_elem, bytes_per_block, num_blocks)
 * are zero/NULL. */
ATTN_API int attn_engine_num_encoder_groups(const attn_engine *e);
ATTN_API attn_status attn_engine_encoder_group_info_get(const attn_engine *e, int group,
                                                        attn_engine_group_info *out);

/* ---- one model group's selection --------------------------------------------- */

/* The launch options that shape a model group's selection. */
typedef struct attn_group_launch {
    const char *backend;         /* requested for every kind; NULL = automatic */
    const char *const *per_kind; /* [ATTN_KIND_COUNT] overrides (NULL entries unset), or NULL */
    attn_kv_dtype kv_cache_dtype;
    int block_size;          /* 0 = unset */
    const attn_dtype *dtype; /* the serving dtype chosen at launch (vLLM's --dtype), or NULL */
    bool non_causal;
    bool batch_invariant; /* the selector also ORs in the machine's batch_invariant setting */
    /* As attn_engine_config.kv_cache_dtype_skip_layers: the group's layers
     * keep "auto", kv_cache_dtype stays the run's. NULL = none. */
    const char *kv_cache_dtype_skip_layers;
} attn_group_launch;

typedef struct attn_group_choice {
    attn_selector_config config;     /* the group's selector config */
    const char *requested;           /* what was asked for the group's kind; NULL = automatic */
    const attn_selection *selection; /* the selector's cache; NULL when none was made */
} attn_group_choice;

/* The engine's startup step for one model group — its selector config
 * from the model and the launch (the layers' KV dtype, and the run's as
 * run_kv_cache_dtype), what was requested for its kind, and the selection —
 * for tools that show it without starting an engine. Returns attn_select's
 * status (ATTN_INVALID_ARGUMENT / ATTN_UNSUPPORTED for a skip list it cannot
 * apply, with no selection); *out is filled either way. */
ATTN_API attn_status attn_engine_select_group(const attn_platform *p, const attn_model *m,
                                              int model_group, const attn_group_launch *launch,
                                              attn_group_choice *out);

/* ---- requests ------------------------------------------------------------- */

typedef struct attn_request_desc {
    int prompt_len; /* >= 1 */
    int output_len; /* tokens to generate, >= 1 (ignored by an encoder-only model) */
    int prefix_id;  /* > 0: the prompt starts with shared prefix number prefix_id */
    int prefix_len; /* tokens of that prefix (<= prompt_len) */
} attn_request_desc;

/* Queues a request. ATTN_BAD_STATE on a failed engine; ATTN_INVALID_ARGUMENT
 * for lengths out of range (longer than max_model_len, or more blocks than a
 * pool has, or — with encoder groups — a prompt longer than
 * max_num_batched_tokens); ATTN_OUT_OF_RANGE when the waiting queue is full. *id (optional)
 * receives the request's id (0, 1, 2, ... in order of admission). */
ATTN_API attn_status attn_engine_add_request(attn_engine *e, const attn_request_desc *r,
                                             uint64_t *id);

typedef struct attn_engine_step_stats {
    int64_t step;             /* this step's index, from 0 */
    int num_reqs, num_tokens; /* the batch */
    int num_decode_reqs, num_decode_tokens, num_prefill_reqs, num_prefill_tokens;
    int admitted, finished, preempted;
    int running, waiting;            /* after the step */
    int blocks_in_use;               /* first KV group, after the step */
    int common_prefix_len;           /* first KV group */
    int builds, block_table_updates; /* builder calls this step, all groups */
    int layers_run;
    bool emulated;       /* attention math came from a stand-in kernel */
    double metadata_ns;  /* common metadata + every builder */
    double attention_ns; /* K/V writes + attention, without io_ns */
    double io_ns;        /* in the io callbacks */
    /* encoder groups (their time is also part of attention_ns; layers_run
     * above counts KV groups only) */
    int encoder_reqs, encoder_tokens; /* the encoder batch: new prompt tokens */
    int encoder_layers_run;
    double encoder_attention_ns;
    /* DCP (zero without): the first KV group's cross-rank parts of
     * attention_ns, summed over the layers run, and the KV tokens of the
     * batch's requests this rank holds / all ranks hold. */
    double dcp_local_ns, dcp_exchange_ns, dcp_merge_ns;
    int64_t kv_tokens_local, kv_tokens_total;
} attn_engine_step_stats;

/* Runs one step. An empty schedule is a valid step (no batch, no metadata).
 * ATTN_BAD_STATE on a failed engine. A kernel or builder failure returns its
 * status; the scheduler's state is then as after the step's bookkeeping. */
ATTN_API attn_status attn_engine_step(attn_engine *e, attn_engine_step_stats *stats);

/* Releases every request (running and waiting) and the cached prefixes:
 * afterwards every pool must be whole (see attn_engine_block_stats). */
ATTN_API attn_status attn_engine_abort_all(attn_engine *e);

typedef struct attn_engine_counts {
    int64_t steps;
    int64_t added, admitted, finished, preemptions;
    int running, waiting;
    int64_t tokens; /* tokens computed over all steps */
} attn_engine_counts;
ATTN_API attn_status attn_engine_get_counts(const attn_engine *e, attn_engine_counts *out);

/* ---- the last step, for display ------------------------------------------ */

/* The common metadata group g's builder got in the last step that had a
 * batch (block table and slot mapping are the group's own; the rest is
 * shared). NULL before any such step, for a bad g, or without KV groups.
 * Pointers stay valid until the next step. */
ATTN_API const attn_common_metadata *attn_engine_common_metadata(const attn_engine *e, int g);
/* The backend metadata group g got in that step: its builder's describe()
 * JSON text (snprintf-like return; -1 when there is none). *reused (optional)
 * says whether it came from update_block_table. */
ATTN_API int attn_engine_describe_metadata(const attn_engine *e, int g, char *buf, size_t size,
                                           bool *reused);
/* The raw metadata object and its builder (for tests and kernels). */
ATTN_API const void *attn_engine_group_metadata(const attn_engine *e, int g,
                                                const attn_builder_ops **builder);

/* ---- block accounting ------------------------------------------------------ */

typedef struct attn_engine_block_accounting {
    int num_blocks, num_free, num_used;
    int64_t held_by_requests; /* block references held by live requests */
    int64_t held_by_prefix_cache;
    int64_t total_refs;        /* the pool's own count */
    int64_t leaked;            /* total_refs - held_by_requests - held_by_prefix_cache */
    int64_t rejected_releases; /* double frees / bad ids the pool refused */
    bool consistent;           /* attn_block_pool_check passed */
} attn_engine_block_accounting;
ATTN_API attn_status attn_engine_block_stats(const attn_engine *e, int g,
                                             attn_engine_block_accounting *out);

/* ---- synthetic traffic ----------------------------------------------------- */

/* A deterministic request source: for each step a Poisson number of
 * arrivals (mean `rate`), prompt and output lengths uniform in their ranges,
 * and a fraction of requests starting with one of num_prefixes shared
 * prefixes of prefix_len tokens. The same config and seed always give the
 * same sequence. */
typedef struct attn_traffic_config {
    double rate;                /* mean arrivals per step, >= 0 */
    int prompt_min, prompt_max; /* >= 1 */
    int output_min, output_max; /* >= 1 */
    double prefix_fraction;     /* 0..1 */
    int prefix_len;             /* tokens; prompts are lengthened to hold it */
    int num_prefixes;           /* >= 1 when prefix_fraction > 0 */
    uint64_t seed;
} attn_traffic_config;

/* rate 1, prompts 32..512, outputs 16..128, no shared prefix, seed 0. */
ATTN_API void attn_traffic_config_init(attn_traffic_config *c);

typedef struct attn_traffic attn_traffic;
ATTN_API attn_status attn_traffic_create(const attn_traffic_config *c, attn_traffic **out);
ATTN_API void attn_traffic_free(attn_traffic *t);
/* The requests arriving at the next step: writes at most max of them and
 * returns how many it wrote; arrivals beyond max are kept for the next call
 * (nothing is dropped). */
ATTN_API int attn_traffic_next(attn_traffic *t, attn_request_desc *out, int max);

ATTN_EXTERN_C_END

#endif
