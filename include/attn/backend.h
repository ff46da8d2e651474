/* The backend contract — the header for backend and plugin authors.
 * Applications use opaque handles (select.h, device.h, kernel.h); only this
 * header defines the descriptor and ops structs. Every struct starts with
 * its ABI version and/or size; initialise with designated initializers;
 * slots marked (optional) may be NULL/0.
 *
 * A backend is a descriptor (static data: what it can run, validated by one
 * generic walk that produces vLLM's reasons in vLLM's order), a kernel
 * provider (the code that runs it) and, from contract v2 on, the device its
 * memory lives on (NULL = the host device). A registry locator names where
 * the attn_backend object lives: built in, or "module.so:symbol".
 * docs/design/contract-v2.md explains the kernel, builder and device
 * sections and what changed from v1. */
#ifndef ATTN_BACKEND_H
#define ATTN_BACKEND_H

#include "attn/config.h"
#include "attn/device.h"
#include "attn/layer.h"
#include "attn/metadata.h"
#include "attn/platform.h"

ATTN_EXTERN_C_BEGIN

/* 2: contract v2 (devices, kernel create with attn_kernel_init, builder
 * init with the device, offsets in the forward args). A module or plugin
 * built for 1 is refused before any of its code runs. */
#define ATTN_BACKEND_ABI_VERSION 2u

/* ---- descriptor ------------------------------------------------------- */

/* What a validation hook sees. has_cc false = no capability (CPU/XPU). */
typedef struct attn_check_ctx {
    const attn_platform *platform;
    const attn_selector_config *cfg;
    bool has_cc;
    int cc_major, cc_minor;
} attn_check_ctx;

/* How a backend's code imports vllm.vllm_flash_attn: not at all, on CUDA
 * only (an ImportError on a CUDA machine without fa2/fa3), or on every
 * platform (also an ImportError off CUDA, where the package is absent). */
typedef enum attn_fa_import {
    ATTN_FA_IMPORT_NONE = 0,
    ATTN_FA_IMPORT_CUDA = 1,
    ATTN_FA_IMPORT_ALWAYS = 2
} attn_fa_import;

/* vLLM 0.32.0's KVCacheLayout, in its order: the memory order of a KV-cache
 * group's logical axes [layers L, blocks B, heads H, tokens N, content C]
 * (libattn's engine lays caches out by attn_kv_layout and the stride
 * order; this names what vLLM's kernels consume). */
typedef enum attn_kv_cache_layout {
    ATTN_KVL_LBHNC = 0,
    ATTN_KVL_LBNHC,
    ATTN_KVL_LHBNC,
    ATTN_KVL_BLHNC,
    ATTN_KVL_BLNHC,
    ATTN_KVL_BHLNC,
    ATTN_KVL_COUNT
} attn_kv_cache_layout;
#define ATTN_KVL_BIT(l) (1u << (l))
/* "LBHNC", ... (vLLM's member names); NULL outside the enum. */
ATTN_API const char *attn_kv_cache_layout_name(attn_kv_cache_layout l);

/* Head sizes: membership when n_sizes > 0; otherwise min/max/multiple_of
 * (0 = unbounded). All zero = any head size. */
typedef struct attn_head_rule {
    const int *sizes;
    int n_sizes;
    int min, max, multiple_of;
} attn_head_rule;

typedef struct attn_cc {
    int major, minor;
} attn_cc;

struct attn_backend_desc {
    uint32_t abi_version;     /* ATTN_BACKEND_ABI_VERSION */
    uint32_t struct_size;     /* sizeof(attn_backend_desc): attn/abi.h */
    const char *name;         /* registry name, e.g. "FLASH_ATTN" */
    const char *display_name; /* get_name() when it differs (optional) */
    const char *platforms;    /* human text: "CUDA", "ROCm", "CPU" ... */
    uint32_t dtypes;          /* ATTN_DTYPE_BIT mask */
    uint64_t kv_dtypes;       /* ATTN_KV_BIT mask */
    bool kv_none_rejected;    /* true only for TURBOQUANT-style rules */
    const int *block_sizes;   /* divisibility by any entry; n == 0: any */
    int n_block_sizes;
    int preferred_block_size; /* 0: rule of reference §3 (16 if supported...) */
    attn_head_rule heads;
    attn_cc cc_min, cc_max; /* {0,0} = unbounded */
    bool is_mla;
    bool is_sparse;
    bool supports_sink;
    bool supports_mm_prefix;
    bool supports_per_head_quant_scales;
    bool supports_non_causal;
    bool supports_batch_invariance;
    uint32_t attn_types; /* ATTN_TYPE_BIT mask */
    attn_cg_support cg_support;
    bool can_return_lse_for_decode;
    attn_kv_layout required_layout;
    uint32_t import_requires; /* bit per attn_component needed to load its code */

    /* (optional) dynamic rules: consulted instead of the static field, they may
     * only refine it (accept a subset; tests/test_registry_hooks.c). */
    bool (*supports_head_size)(const attn_check_ctx *c, int head_size);
    bool (*supports_dtype)(const attn_check_ctx *c, attn_dtype d);
    bool (*supports_kv_cache_dtype)(const attn_check_ctx *c, attn_kv_dtype kv);
    bool (*supports_block_size)(const attn_check_ctx *c, int block_size);
    bool (*supports_sink_fn)(const attn_check_ctx *c);
    bool (*supports_per_head_quant_scales_fn)(const attn_check_ctx *c);
    bool (*supports_compute_capability)(const attn_check_ctx *c);
    /* (optional) extra check: NULL = fine, else the reason (static text, or
     * written into buf). */
    const char *(*supports_combination)(const attn_check_ctx *c, char *buf, size_t size);

    /* (optional) logical KV-cache shape; NULL = no cache (attention-free). */
    attn_status (*kv_cache_shape)(int num_blocks, int block_size, int num_kv_heads, int head_size,
                                  attn_kv_dtype kv, attn_kv_shape *out);
    /* (optional) permutation from logical shape to memory order for a layout
     * (reference §12). NULL = identity. Returns ATTN_UNSUPPORTED for
     * include_layers when cross-layer layout is unsupported. */
    attn_status (*kv_stride_order)(attn_kv_layout layout, bool include_layers, int *order, int *n);
    const attn_builder_ops *builder; /* per-step metadata builder */
    /* (optional) KV layout this backend needs on a given platform when it is
     * not static (FlashInfer reads HND only with its TRT-LLM kernels on
     * 10.x). Consulted when required_layout is ATTN_LAYOUT_DEFAULT. */
    attn_kv_layout (*required_layout_fn)(const attn_platform *p);
    /* Context parallelism (vLLM's AttentionImpl flags). */
    attn_lse_base lse_base; /* base of the LSE returned with can_return_lse_for_decode */
    bool supports_pcp;      /* prefill context parallelism */
    bool supports_dcp;      /* decode context parallelism */

    /* ---- appended after the first release (attn/abi.h) --------------------
     * Zero means vLLM's base-class default. A descriptor whose struct_size
     * ends before these fields (built against an older libattn) could not
     * state them and is not refused for them: it reads sliding window, R-SWA
     * and non-causal DCP as supported, the rest as zero. */
    bool supports_sliding_window; /* has_sliding_window (vLLM default false) */
    bool supports_rswa;           /* use_rswa: R-SWA (default false) */
    /* use_mla && use_non_causal && use_dcp: the builder takes non-causal
     * multi-token MLA queries under DCP (default false). */
    bool supports_non_causal_dcp;
    /* Negated so that zero is vLLM's default (supported): the KV layout
     * cannot serve a KV connector; the kernels plan from the CPU query
     * lengths, so adaptive verification (device/CPU query-length mismatch)
     * is refused. */
    bool rejects_kv_connector;
    bool rejects_query_lens_mismatch;
    /* Whether its code imports vLLM's FlashAttention package
     * (vllm.vllm_flash_attn), which only CUDA builds ship and which loads only
     * with fa2 or fa3 installed (attn_fa_import): where it cannot, the
     * backend is an ImportError. */
    attn_fa_import imports_vllm_flash_attn;
    /* (optional) machine-dependent refinements, like the hooks above: of
     * supports_mm_prefix, supports_non_causal, of accepting adaptive
     * verification (!rejects_query_lens_mismatch), supports_pcp and
     * supports_dcp. */
    bool (*supports_mm_prefix_fn)(const attn_check_ctx *c);
    bool (*supports_non_causal_fn)(const attn_check_ctx *c);
    bool (*supports_query_lens_mismatch_fn)(const attn_check_ctx *c);
    bool (*supports_pcp_fn)(const attn_check_ctx *c);
    bool (*supports_dcp_fn)(const attn_check_ctx *c);
    /* The KV-cache layouts its kernels consume (vLLM's
     * supported_kv_cache_layouts, as a set): ATTN_KVL_BIT mask, 0 = any
     * (vLLM's None). One layout serves a whole worker, so in a
     * turboquant/ultraquant run ROCm refuses a backend that shares none
     * with TURBOQUANT / ULTRAQUANT (the layers kept at the native dtype run
     * beside them). The hook, when set, answers for the machine and config
     * (FlashInfer's TRT-LLM kernels on 10.x) and may only narrow the field. */
    uint32_t kv_cache_layouts;
    uint32_t (*kv_cache_layouts_fn)(const attn_check_ctx *c);
};

/* ---- kernels -------------------------------------------------------------- */

typedef enum attn_kernel_kind {
    ATTN_KERNEL_UNDECLARED = 0, /* no core self-test (the self_test hook, if any) */
    ATTN_KERNEL_STANDARD,       /* forward: paged standard attention */
    ATTN_KERNEL_MLA,            /* forward_mqa (decode) and forward_mha (prefill) */
    ATTN_KERNEL_MLA_SPARSE,     /* forward_mqa over top-k indices */
} attn_kernel_kind;

/* What create() gets (filled by libattn; a kernel reads a field only when
 * ATTN_STRUCT_HAS says libattn's struct holds it). */
typedef struct attn_kernel_init {
    uint32_t struct_size; /* sizeof(attn_kernel_init) of libattn */
    /* The layer the state is for, valid until destroy: its geometry
     * (heads, head sizes, dtypes, MLA dims) is fixed for the state's life.
     * Its sinks / alibi_slopes are host memory whose contents do not change
     * while the state lives (a device kernel uploads them here, once). A
     * call's args->layer has the same geometry; its scalars (scale, soft
     * cap, window) are the ones that count for that call. */
    const attn_layer_params *layer;
    attn_device *device; /* the instance the kernel runs on (its queue) */
    void *device_state;  /* what the backend's device open() returned; NULL on the host device */
    int num_threads;     /* host threads it may use; 0 = libattn's pool */
} attn_kernel_init;

/* Kernel entry points. Calls come only through libattn's checked handle
 * (attn/kernel.h), which has opened the state with create, checked the
 * entry point, the layer geometry and that the args' tensors and KV view
 * are memory of the kernel's device, and folded offsets on a host-visible
 * device. Every tensor pointer in the args is memory of that device (a
 * host pointer on the host device); attn_common_metadata and the layer's
 * arrays are host memory; args->metadata is what the backend's own builder
 * returned (it may hold device memory the builder uploaded). A kernel
 * enqueues on the device's one queue and may return before it finishes. */
typedef struct attn_kernel_ops {
    uint32_t struct_size; /* sizeof(attn_kernel_ops): attn/abi.h */
    /* (optional) per-layer state; NULL create = stateless (impl is NULL).
     * A backend with a device other than the host's needs create: it is how
     * the kernel learns its device instance. */
    attn_status (*create)(const attn_kernel_init *init, void **impl);
    void (*destroy)(void *impl);
    /* standard attention; NULL for MLA backends */
    attn_status (*forward)(void *impl, const attn_forward_args *a);
    /* MLA decode / prefill; NULL for standard backends */
    attn_status (*forward_mqa)(void *impl, const attn_mla_args *a);
    attn_status (*forward_mha)(void *impl, const attn_mla_args *a);
    /* (optional) known-answer test run before the backend may be chosen;
     * ATTN_SELFTEST_FAILED with "max error <e> on <shape>" in detail. */
    attn_status (*self_test)(char *detail, size_t size);
    /* (optional) the variant in use, e.g. "avx512-bf16", "avx2", "portable" */
    const char *(*variant)(void);
    /* (optional) the kind of kernel this is. A declared kind makes the core
     * run its own known-answer test for that kind (attn_backend_self_test)
     * before the backend may be chosen or opened (attn_kernel_open), through
     * forward / forward_mqa / forward_mha on an instance of the backend's
     * device against REFERENCE / REFERENCE_MLA, so the backend writes no
     * harness; it then wins over the self_test hook. */
    attn_kernel_kind kind;
    /* (optional, appended: an MLA kernel on a device) MLA's projections
     * around forward_mqa on the kernel's device for num_tokens tokens: absorb
     * (in = q [T][H][N + P] through w = W_UK into out = [T][H][R + P], the
     * rope part copied) or up-project (in = the latent output [T][H][R]
     * through w = W_UV into out = [T][H][V]); in, w and out are memory of
     * the device, offsets in elements. With it attn_kernel_mla_forward runs
     * on a device whose memory is not host-visible (its scratch is then
     * memory of that device); enqueued like the entry points. */
    attn_status (*mla_project)(void *impl, const attn_layer_params *layer, int num_tokens,
                               bool absorb, const void *in, int64_t in_offset, const void *w,
                               void *out, int64_t out_offset);
} attn_kernel_ops;

/* The core's self-test service: the known-answer test of b's kernel kind
 * (or b's own self_test hook when no kind is declared), run once per
 * process per backend object and cached. ATTN_OK when it passes or b has
 * no test; ATTN_SELFTEST_FAILED with "max error <e> on <shape>" in detail;
 * ATTN_IMPORT_ERROR when its code cannot load on its device (a device
 * program that does not build: the compiler's log in detail). */
ATTN_API attn_status attn_backend_self_test(const attn_backend *b, char *detail, size_t size);

/* ---- devices ------------------------------------------------------------------ */

/* The cache writes a device performs, as libattn hands them over after it
 * has checked the view, every slot (-1 or inside the cache) and every
 * source range (attn_kv_write*, attn_mla_write_latent*): the device writes
 * and checks nothing again. Filled by libattn (fields only appended; read
 * a field only when ATTN_STRUCT_HAS says it is there). */

/* vLLM's reshape_and_cache: row t of k ([num_tokens][num_kv_heads]
 * [head_size]) and of v ([num_tokens][num_kv_heads][head_size_v]) go to
 * cache slot slot_mapping[t] (block slot / block_size, offset slot %
 * block_size; -1 = padding, skipped). fp8 caches (e4m3 / e5m2) store
 * value / scale (the head's own scale when the view has per-head scales),
 * rounded to nearest even and saturated at the format's largest finite
 * value; other caches store the value converted to their element. */
typedef struct attn_kv_write_args {
    uint32_t struct_size;        /* sizeof(attn_kv_write_args) of libattn */
    const int64_t *slot_mapping; /* host memory, [num_tokens], checked */
    int num_tokens;              /* >= 1 */
    const void *k;               /* memory of the view's device */
    const void *v;               /* NULL exactly when the view stores no values */
    int64_t k_offset, v_offset;  /* elements into k / v where row 0 starts */
    attn_elem src;               /* element of k and v: f32, f16 or bf16 */
} attn_kv_write_args;

/* vLLM's concat_and_cache_mla: row t of latent ([num_tokens][latent_dim])
 * then row t of k_rope ([num_tokens][rope_dim]) go to slot_mapping[t] as
 * one cache row of head_size = latent_dim + rope_dim elements; fp8 caches
 * store value / kv->k_scale, saturating. */
typedef struct attn_mla_write_args {
    uint32_t struct_size; /* sizeof(attn_mla_write_args) of libattn */
    const int64_t *slot_mapping;
    int num_tokens;
    const void *latent;
    const void *k_rope; /* NULL when rope_dim is 0 */
    int64_t latent_offset, k_rope_offset;
    int latent_dim, rope_dim;
    attn_elem src;
} attn_mla_write_args;

/* Handles are host pointers the host may read and write (the host device,
 * unified memory). Without it the host never touches a handle. */
#define ATTN_DEVICE_HOST_VISIBLE (1u << 0)

/* A backend's device, as ggml's buffer types: the memory its kernels read
 * and how data gets there. All ops but open receive the state open
 * returned; all run on the instance's one queue, in order. Sizes and
 * offsets are bytes; libattn has checked every range against the
 * allocation it lies in before calling. */
typedef struct attn_device_ops {
    uint32_t struct_size; /* sizeof(attn_device_ops): attn/abi.h */
    const char *name;     /* "opencl", "cuda": shown in reports and JSON */
    uint32_t flags;       /* ATTN_DEVICE_HOST_VISIBLE */
    /* A context and exactly one queue/stream for cfg (platform, device
     * index, host threads). Fails with its reason (api->fail / detail) when
     * the device cannot be used here. */
    attn_status (*open)(const attn_device_config *cfg, void **state);
    void (*close)(void *state);
    /* bytes (> 0) of zeroed memory, at least 64-byte aligned; *mem is the
     * handle (never NULL on success). */
    attn_status (*alloc)(void *state, size_t bytes, attn_mem_kind kind, void **mem);
    void (*free)(void *state, void *mem, size_t bytes, attn_mem_kind kind);
    /* host src -> dst + dst_offset; returns once src may be reused */
    attn_status (*copy_in)(void *state, void *dst, size_t dst_offset, const void *src,
                           size_t bytes);
    /* src + src_offset -> host dst; returns once dst holds the data (and
     * reports a failure of earlier work on the queue) */
    attn_status (*copy_out)(void *state, void *dst, const void *src, size_t src_offset,
                            size_t bytes);
    /* into kv (a view of this device's memory) */
    attn_status (*kv_write)(void *state, const attn_kv_view *kv, const attn_kv_write_args *a);
    /* (optional) NULL: MLA latent caches cannot live on this device */
    attn_status (*mla_write)(void *state, const attn_kv_view *kv, const attn_mla_write_args *a);
    /* waits for everything issued; reports the first failure */
    attn_status (*synchronize)(void *state);
} attn_device_ops;

/* ---- per-step metadata builders ------------------------------------------- */

typedef struct attn_builder_init {
    const attn_backend_desc *desc;
    const attn_layer_params *layer; /* the KV group's spec */
    int block_size;
    int num_blocks;
    int max_num_reqs;
    int max_num_tokens;
    int max_blocks_per_req;
    int num_speculative_tokens;
    int num_threads;
    /* (v2) the device the kernels run on: a device backend's builder plans
     * on the host and uploads its metadata once per build (build returns
     * metadata holding device memory). NULL / host device for host backends. */
    attn_device *device;
    void *device_state; /* its open() state; NULL on the host device */
} attn_builder_init;

struct attn_builder_ops {
    uint32_t struct_size;  /* sizeof(attn_builder_ops): attn/abi.h */
    const char *type_name; /* builders with equal type_name and spec share one build per step */
    attn_cg_support cg_support;
    int reorder_batch_threshold; /* 0 = none; N: queries of length <= N are decodes */
    bool supports_update_block_table;
    /* Allocates all scratch up front: build never allocates. */
    attn_status (*create)(const attn_builder_init *init, void **state);
    void (*destroy)(void *state);
    /* The returned metadata lives in state until the next build. */
    attn_status (*build)(void *state, int common_prefix_len, const attn_common_metadata *cm,
                         bool fast_build, const void **md);
    attn_status (*build_for_capture)(void *state, const attn_common_metadata *cm,
                                     const void **md); /* (optional) default build(0) */
    /* (optional) reuse md built by another group, swapping the block table. */
    attn_status (*update_block_table)(void *state, const void *md, const int32_t *block_table,
                                      int block_table_stride, const int64_t *slot_mapping,
                                      const void **new_md);
    /* (optional) JSON object text describing md (for `attn simulate`). Returns
     * the length needed, like snprintf. */
    int (*describe)(const void *md, char *buf, size_t size);
};

/* ---- the object a locator resolves to ---------------------------------- */

/* ---- backend modules ---------------------------------------------------------
 * A module (the file of a "file.so:symbol" locator) may export
 *   ATTN_EXPORT attn_status attn_module_init(const attn_module_host *host);
 * The loader calls it after dlopen and before it reads any backend object
 * of the module (again for each symbol resolved: it must be idempotent).
 * A module whose backends serve catalog names does not restate their
 * facts: init points its objects' desc at the host's catalog descriptors
 * (host->catalog_builtin(name)->desc). A failing init is the module's
 * import failure (ATTN_IMPORT_ERROR, the text it gave host->fail). Its
 * exported objects may be read before init (abi_version, struct_size,
 * kernel, device: attn_backend_has_kernel), so "backed by code" is known
 * without running any of its code. */
typedef struct attn_module_host {
    uint32_t abi_version; /* ATTN_BACKEND_ABI_VERSION */
    uint32_t struct_size; /* sizeof(attn_module_host) of libattn */
    /* attn_backend_catalog_builtin: the catalog's object (its desc) */
    const attn_backend *(*catalog_builtin)(const char *name);
    /* Sets the calling thread's attn_last_error() to msg and returns s; valid
     * for the life of the process (a module's ops report failures with it). */
    attn_status (*fail)(attn_status s, const char *msg);
} attn_module_host;
typedef attn_status (*attn_module_init_fn)(const attn_module_host *host);

struct attn_backend {
    uint32_t abi_version; /* ATTN_BACKEND_ABI_VERSION */
    uint32_t struct_size; /* sizeof(attn_backend): attn/abi.h */
    const attn_backend_desc *desc;
    const attn_kernel_ops *kernel; /* NULL: descriptor only (simulated machines emulate) */
    /* (optional, v2) where its memory lives and its kernels run; NULL = the
     * host device (libattn's: host memory, CPU kernels). */
    const attn_device_ops *device;
};

ATTN_EXTERN_C_END

#endif
