/* The generic validator's answers that a platform family's rules may wrap
 * (src/select/rules_*.c); the generic code itself knows no platform. */
#ifndef ATTN_SELECT_VALIDATE_H
#define ATTN_SELECT_VALIDATE_H

#include "attn/backend.h"

/* vLLM's get_preferred_block_size(default_size) for d (NULL: default_size):
 * the descriptor's preference, else default_size when supported, else the
 * smallest kernel block size, else the smallest supported size. */
int attn__preferred_block_size(const attn_backend_desc *d, const attn_platform *p,
                               int default_size);

#endif
