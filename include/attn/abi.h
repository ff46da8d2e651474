/* The struct_size rule, the same for every versioned struct (attn_backend,
 * attn_backend_desc, attn_kernel_ops, attn_builder_ops in backend.h;
 * attn_comm_ops, attn_dcp_init, attn_engine_config, attn_plugin_api,
 * attn_selector_config).
 *
 * The side that fills a struct sets struct_size = sizeof at its build time.
 * Fields are only ever appended. libattn accepts any struct_size from the
 * struct's first release up to its own sizeof: a field the caller's older
 * struct does not reach is read as its default (the value the struct's
 * _init function or documentation gives; NULL / 0 otherwise). A struct_size
 * below the first release or above libattn's own sizeof (built against a
 * newer libattn) is ATTN_ABI_MISMATCH, with the sizes named, and nothing is
 * changed. In the other direction (attn_plugin_api, filled by libattn) the
 * plugin reads a field only when ATTN_STRUCT_HAS says the host's struct
 * holds it. abi_version (ATTN_BACKEND_ABI_VERSION, ATTN_PLUGIN_ABI_VERSION)
 * changes only for a break that sizes cannot express. attn_mla_metadata's
 * struct_size is not part of this rule: libattn builds those itself and
 * checks it (at least sizeof; a backend's builder may append its own
 * fields, see attn/mla.h), with the magic, to recognise its own objects.
 * Appended so far: attn_backend_desc from supports_sliding_window on (the
 * facts the selector once kept by name; their older-struct defaults are
 * stated in attn/backend.h; kv_cache_layouts reads as any), attn_kernel_ops.kind.
 * attn_selector_config (attn/config.h) follows the rule since ABI 2: its
 * first release is the struct with run_kv_cache_dtype. */
#ifndef ATTN_ABI_H
#define ATTN_ABI_H

#include <stddef.h>

/* Bytes up to and including field. */
#define ATTN_STRUCT_END(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))
/* True when *p (of type, with a struct_size member) holds field. */
#define ATTN_STRUCT_HAS(type, p, field) ((size_t)(p)->struct_size >= ATTN_STRUCT_END(type, field))

#endif
