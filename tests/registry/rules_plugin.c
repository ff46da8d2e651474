/* A plugin that makes a backend selectable on the OpenCL platform without
 * touching libattn's selector: it registers RULES_CL (REFERENCE's kernel
 * under its own descriptor) and a platform rule for it, ahead of the
 * built-in OPENCL_ATTN's (priority 0) for standard layers and the only one
 * for MLA layers (REFERENCE_MLA's kernel as RULES_CL_MLA). With
 * ATTN_TEST_RULES_FAIL set its init fails after registering, so the loader
 * must roll the name and the rule back. Takes libattn's headers only. */
#include <stdlib.h>

#include "attn/backend.h"
#include "attn/plugin.h"

ATTN_EXPORT const uint32_t attn_plugin_abi = ATTN_PLUGIN_ABI_VERSION;

static attn_backend_desc desc, desc_mla;
static attn_backend obj, obj_mla;

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
                               .priority = -1};
    if ((st = api->register_platform_rule(&rule)) != ATTN_OK) return st;
    const attn_backend *ref_mla = NULL;
    if ((st = api->backend_resolve(NULL, "REFERENCE_MLA", &ref_mla)) != ATTN_OK) return st;
    desc_mla = *ref_mla->desc;
    desc_mla.name = "RULES_CL_MLA";
    obj_mla = *ref_mla;
    obj_mla.desc = &desc_mla;
    if ((st = api->register_backend_object("RULES_CL_MLA", &obj_mla)) != ATTN_OK) return st;
    rule.backend = "RULES_CL_MLA";
    rule.mla = true;
    if ((st = api->register_platform_rule(&rule)) != ATTN_OK) return st;
    if (getenv("ATTN_TEST_RULES_FAIL"))
        return api->fail(ATTN_INTERNAL, "asked to fail (ATTN_TEST_RULES_FAIL)");
    return ATTN_OK;
}
