/* A plugin that makes a backend selectable on the OpenCL platform without
 * touching libattn's selector: it registers RULES_CL (REFERENCE's kernel
 * under its own descriptor) and a platform rule for it. With
 * ATTN_TEST_RULES_FAIL set its init fails after registering, so the loader
 * must roll the name and the rule back. Takes libattn's headers only. */
#include <stdlib.h>

#include "attn/backend.h"
#include "attn/plugin.h"

ATTN_EXPORT const uint32_t attn_plugin_abi = ATTN_PLUGIN_ABI_VERSION;

static attn_backend_desc desc;
static attn_backend obj;

ATTN_EXPORT attn_status attn_plugin_init(const attn_plugin_api *api)
{
    if (!ATTN_PLUGIN_API_HAS(api, register_platform_rule))
        return api->fail(ATTN_UNSUPPORTED, "the host cannot register platform rules");
    const attn_backend *ref = NULL;
    attn_status st = api->backend_resolve(NULL, "REFERENCE", &ref);
    if (st != ATTN_OK) return st;
    desc = *ref->desc;
    desc.name = "RULES_CL";
    desc.platforms = "OpenCL (test plugin)";
    obj = *ref;
    obj.desc = &desc;
    if ((st = api->register_backend_object("RULES_CL", &obj)) != ATTN_OK) return st;
    attn_platform_rule rule = {.struct_size = sizeof rule,
                               .kind = ATTN_PLATFORM_OPENCL,
                               .backend = "RULES_CL",
                               .priority = 0};
    if ((st = api->register_platform_rule(&rule)) != ATTN_OK) return st;
    if (getenv("ATTN_TEST_RULES_FAIL"))
        return api->fail(ATTN_INTERNAL, "asked to fail (ATTN_TEST_RULES_FAIL)");
    return ATTN_OK;
}
