/* The struct_size rule of attn/abi.h on libattn's side: the size of each
 * versioned struct at its first release (a struct_size below it is refused)
 * and the copy that gives an older, shorter struct its defaults. When a
 * field is appended to one of these structs, its _V1 / _V2 size stays. */
#ifndef ATTN_UTIL_ABI_H
#define ATTN_UTIL_ABI_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "attn/abi.h"
#include "attn/backend.h"
#include "attn/comm.h"
#include "attn/config.h"
#include "attn/dcp.h"
#include "attn/engine.h"
#include "attn/registry.h"

/* attn_backend and attn_kernel_ops were released again with contract v2
 * (ATTN_BACKEND_ABI_VERSION 2): their floor is the v2 size. attn_device_ops
 * is new in v2. */
#define ATTN__V2_BACKEND       ATTN_STRUCT_END(attn_backend, device)
#define ATTN__V1_BACKEND_DESC  ATTN_STRUCT_END(attn_backend_desc, supports_dcp)
#define ATTN__V2_KERNEL_OPS    ATTN_STRUCT_END(attn_kernel_ops, kind)
#define ATTN__V2_DEVICE_OPS    ATTN_STRUCT_END(attn_device_ops, synchronize)
#define ATTN__V1_BUILDER_OPS   ATTN_STRUCT_END(attn_builder_ops, describe)
#define ATTN__V1_COMM_OPS      ATTN_STRUCT_END(attn_comm_ops, destroy)
#define ATTN__V1_DCP_INIT      ATTN_STRUCT_END(attn_dcp_init, num_threads)
#define ATTN__V1_ENGINE_CONFIG ATTN_STRUCT_END(attn_engine_config, dcp_interleave)
#define ATTN__V1_PLATFORM_RULE ATTN_STRUCT_END(attn_platform_rule, mla)
/* attn_selector_config got struct_size with ABI 2 (issue 27 item 6). */
#define ATTN__V1_SELECTOR_CONFIG ATTN_STRUCT_END(attn_selector_config, run_kv_cache_dtype)

/* size is one this libattn accepts for a struct first released at v1 bytes
 * and now current bytes long. */
static inline bool attn__struct_size_ok(uint32_t size, size_t v1, size_t current)
{
    return size >= v1 && size <= current;
}

/* dst (current bytes, holding the defaults) takes the caller's first size
 * bytes (attn__struct_size_ok checked), so fields past them keep their
 * defaults; its struct_size (at offset struct_size_at) becomes current. */
static inline void attn__struct_read(void *dst, size_t current, const void *src, uint32_t size,
                                     size_t struct_size_at)
{
    memcpy(dst, src, size < current ? size : current);
    uint32_t cur = (uint32_t)current;
    memcpy((char *)dst + struct_size_at, &cur, sizeof cur);
}

#endif
