/*
 * demux.c - see demux.h.
 */
#include "config.h"

#include <string.h>

#include "demux.h"

void nb_demux_init(struct nb_demux *d, nb_demux_cb cb, void *arg)
{
    memset(d, 0, sizeof(*d));
    d->cb = cb;
    d->arg = arg;
}

int nb_demux_feed(struct nb_demux *d, const char *data, size_t len)
{
    if (d->error)
        return -1;
    while (len > 0) {
        if (d->remaining == 0) {
            size_t take = 8 - d->hdr_len;
            if (take > len)
                take = len;
            memcpy(d->hdr + d->hdr_len, data, take);
            d->hdr_len += (unsigned)take;
            data += take;
            len -= take;
            if (d->hdr_len < 8)
                return 0;
            d->hdr_len = 0;
            if (d->hdr[0] > NB_STREAM_STDERR || d->hdr[1] || d->hdr[2] || d->hdr[3]) {
                d->error = 1;
                return -1;
            }
            d->stream = (enum nb_stream)d->hdr[0];
            d->remaining = (uint32_t)d->hdr[4] << 24 | (uint32_t)d->hdr[5] << 16 |
                           (uint32_t)d->hdr[6] << 8 | (uint32_t)d->hdr[7];
            continue;
        }
        {
            size_t take = d->remaining < len ? d->remaining : len;
            if (d->cb && d->cb(d->arg, d->stream, data, take) != 0) {
                d->error = 1;
                return -1;
            }
            d->remaining -= (uint32_t)take;
            data += take;
            len -= take;
        }
    }
    return 0;
}

int nb_demux_at_boundary(const struct nb_demux *d)
{
    return d->hdr_len == 0 && d->remaining == 0 && !d->error;
}
