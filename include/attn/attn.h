/* libattn: the attention-backend layer of an LLM inference engine.
 * Include this for the application-facing API; it does not include
 * attn/backend.h, so an application is not bound to the descriptor and ops
 * layout. Backend and plugin authors include attn/backend.h as well. */
#ifndef ATTN_ATTN_H
#define ATTN_ATTN_H

#include "attn/export.h"
#include "attn/version.h"
#include "attn/status.h"
#include "attn/types.h"
#include "attn/log.h"
#include "attn/config.h"
#include "attn/cpu.h"
#include "attn/platform.h"
#include "attn/metadata.h"
#include "attn/layer.h"
#include "attn/device.h"
#include "attn/kernel.h"
#include "attn/registry.h"
#include "attn/select.h"
#include "attn/plugin.h"
#include "attn/kvcache.h"
#include "attn/model.h"
#include "attn/engine.h"
#include "attn/mla.h"

#endif
