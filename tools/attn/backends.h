/* `attn backends`, shared between its files: the capability text of a
 * descriptor (backends_fmt.c), the support matrix (backends_md.c) and the
 * command itself (backends.c). Every yes/no capability is a flag row of the
 * selector's own validation table (attn_backend_check_*), so the JSON, the
 * text and docs/backends.md print what the selector checks. */
#ifndef ATTN_TOOLS_BACKENDS_H
#define ATTN_TOOLS_BACKENDS_H

#include "attn/attn.h"
#include "attn/backend.h"
#include "util/strbuf.h"

/* One capability field of d as text. */
typedef void (*attn__bk_fmt)(attn__sb *, const attn_backend_desc *);
void attn__bk_dtypes(attn__sb *sb, const attn_backend_desc *d);
void attn__bk_kv(attn__sb *sb, const attn_backend_desc *d);
void attn__bk_blocks(attn__sb *sb, const attn_backend_desc *d);
void attn__bk_heads(attn__sb *sb, const attn_backend_desc *d);
void attn__bk_cc(attn__sb *sb, const attn_backend_desc *d);
void attn__bk_types(attn__sb *sb, const attn_backend_desc *d);
/* The installed components its code needs, and fa2/fa3 on CUDA when it
 * imports vllm.vllm_flash_attn. */
void attn__bk_needs(attn__sb *sb, const attn_backend_desc *d);
/* The KV-cache layouts its kernels read ("any" when none is stated), " *"
 * when a hook narrows them per machine or config. */
void attn__bk_kv_layouts(attn__sb *sb, const attn_backend_desc *d);
/* f(d) as a new string (caller frees; "" when out of memory). */
char *attn__bk_text(attn__bk_fmt f, const attn_backend_desc *d);
/* A flag's static statement as text: "yes", "no", "yes *" (narrowed on
 * some machines); NULL for ATTN_FACT_NONE. */
const char *attn__bk_fact_text(attn_fact f);

/* `attn backends --markdown`: docs/backends.md. */
int attn__bk_markdown(void);

#endif
