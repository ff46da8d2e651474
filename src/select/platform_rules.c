/* Placeholder until the selection rules land: no platform has rules. */
#include "platform/platform_impl.h"

const attn__platform_ops *attn__platform_ops_for(attn_platform_kind kind)
{
    (void)kind;
    return (const attn__platform_ops *)0;
}
