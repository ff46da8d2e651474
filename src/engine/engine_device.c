/* The engine's devices (attn/device.h): one instance per device kind the
 * engine's kernels and builders run on, opened at startup and closed with
 * the engine; devs[0] is the engine's own host instance, whose memory holds
 * the host staging buffers the caller's io callbacks read and write.
 *
 * A device whose memory is host-visible (the host device) computes on the
 * staging buffers themselves: nothing is copied, so REFERENCE, CPU_ATTN
 * and CPU_MLA run exactly as before devices existed. Any other device gets
 * step buffers of the same sizes in its own memory; a step copies the
 * caller's inputs in and the outputs out through the device's copies.
 * Every allocation is made at startup; closing an instance frees what is
 * still allocated on it. */
#include <string.h>

#include "device/device_impl.h"
#include "engine/engine_impl.h"
#include "util/error.h"

attn_status attn__engine_open_host(attn_engine *e)
{
    attn_device *d = NULL;
    attn_status st = attn_device_open(NULL, NULL, &d);
    if (st != ATTN_OK) return attn__engine_fail(e, st, "host device: %s", attn_last_error());
    e->devs[0] = (attn__eng_dev){.dev = d, .host_visible = true};
    e->num_devs = 1;
    return ATTN_OK;
}

attn_status attn__engine_device(attn_engine *e, const attn_backend *b, attn__eng_dev **out)
{
    const attn_device_ops *ops = attn__device_ops_of(b);
    for (int i = 0; i < e->num_devs; i++)
        if (e->devs[i].dev->ops == ops) {
            *out = &e->devs[i];
            return ATTN_OK;
        }
    if (e->num_devs == ATTN__ENG_MAX_DEVS)
        return attn__engine_fail(e, ATTN_UNSUPPORTED, "engine: more than %d device kinds",
                                 ATTN__ENG_MAX_DEVS);
    attn_device_config cfg;
    attn_device_config_init(&cfg);
    cfg.platform = e->platform;
    attn_device *d = NULL;
    attn_status st = attn_device_open(b, &cfg, &d);
    if (st != ATTN_OK) return attn__engine_fail(e, st, "%s: %s", b->desc->name, attn_last_error());
    attn__eng_dev *ed = &e->devs[e->num_devs++];
    *ed = (attn__eng_dev){.dev = d, .host_visible = attn_device_host_visible(d)};
    *out = ed;
    return ATTN_OK;
}

/* After the staging buffers exist: host-visible devices use them, the
 * others get their own of the same sizes. */
attn_status attn__engine_device_buffers(attn_engine *e)
{
    for (int i = 0; i < e->num_devs; i++) {
        attn__eng_dev *d = &e->devs[i];
        if (d->host_visible) {
            d->q = e->q, d->k = e->k, d->v = e->v, d->out = e->out;
            continue;
        }
        if (!e->q_bytes) continue;
        attn_status st;
        if ((st = attn_device_alloc(d->dev, e->q_bytes, ATTN_MEM_STEP, &d->q)) != ATTN_OK ||
            (st = attn_device_alloc(d->dev, e->k_bytes, ATTN_MEM_STEP, &d->k)) != ATTN_OK ||
            (st = attn_device_alloc(d->dev, e->k_bytes, ATTN_MEM_STEP, &d->v)) != ATTN_OK ||
            (st = attn_device_alloc(d->dev, e->out_bytes, ATTN_MEM_STEP, &d->out)) != ATTN_OK)
            return attn__engine_fail(e, st, "step buffers on device %s: %s",
                                     attn_device_name(d->dev), attn_last_error());
    }
    return ATTN_OK;
}

void attn__engine_devices_free(attn_engine *e)
{
    /* the host instance last: the others' memory may be described by it */
    for (int i = e->num_devs - 1; i >= 0; i--)
        attn_device_close(e->devs[i].dev);
    memset(e->devs, 0, sizeof e->devs);
    e->num_devs = 0;
    e->q = e->k = e->v = e->out = e->mla_scratch = NULL;
}

attn_status attn__eng_dev_in(const attn__eng_dev *d, void *dev_buf, const void *host, size_t bytes)
{
    if (d->host_visible || bytes == 0) return ATTN_OK;
    return attn_device_copy_in(d->dev, dev_buf, 0, host, bytes);
}

attn_status attn__eng_dev_out(const attn__eng_dev *d, void *host, const void *dev_buf, size_t bytes)
{
    if (d->host_visible || bytes == 0) return ATTN_OK;
    return attn_device_copy_out(d->dev, host, dev_buf, 0, bytes);
}
