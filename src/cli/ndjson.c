/*
 * ndjson.c - see ndjson.h. A line that arrives whole in one piece goes to
 * the callback straight from that piece; only a line split across pieces is
 * copied into pending.
 */
#include "config.h"

#include <string.h>

#include "ndjson.h"

int ndjson_feed(struct nb_buf *pending, const char *data, size_t len, ndjson_line_fn fn, void *ctx)
{
    const char *nl;

    while (len > 0 && (nl = memchr(data, '\n', len)) != NULL) {
        size_t part = (size_t)(nl - data);
        int rc;
        if (pending->len > 0) {
            if (nb_buf_append(pending, data, part) != NB_OK)
                return NDJSON_OVERFLOW;
            rc = fn(ctx, pending->data, pending->len);
            nb_buf_reset(pending);
        } else {
            rc = fn(ctx, data, part);
        }
        if (rc != 0)
            return NDJSON_STOP;
        data = nl + 1;
        len -= part + 1;
    }
    if (len > 0 && nb_buf_append(pending, data, len) != NB_OK)
        return NDJSON_OVERFLOW;
    return NDJSON_OK;
}
