/*
 * ibuf.c - see ibuf.h.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdlib.h>
#include <string.h>

#include "ibuf.h"

#define IBUF_MIN 4096

void init_buf_init(struct init_buf *b, size_t max)
{
    memset(b, 0, sizeof(*b));
    b->max = max;
}

void init_buf_free(struct init_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->off = b->len = b->size = 0;
}

void init_buf_release(struct init_buf *b)
{
    init_buf_free(b);
}

size_t init_buf_space(const struct init_buf *b)
{
    return b->max - init_buf_pending(b);
}

unsigned char *init_buf_reserve(struct init_buf *b, size_t n)
{
    size_t pending = init_buf_pending(b);
    size_t need, nsize;
    unsigned char *p;

    if (n > b->max - pending)
        return NULL;
    need = pending + n;
    if (b->size - b->len >= n)
        return b->data + b->len;
    /* Compacting is enough when the consumed head makes the room. */
    if (b->size >= need) {
        memmove(b->data, b->data + b->off, pending);
        b->off = 0;
        b->len = pending;
        return b->data + b->len;
    }
    nsize = b->size < IBUF_MIN ? IBUF_MIN : b->size;
    while (nsize < need)
        nsize *= 2;
    if (nsize > b->max)
        nsize = b->max;
    if (b->off > 0) {
        memmove(b->data, b->data + b->off, pending);
        b->off = 0;
        b->len = pending;
    }
    p = realloc(b->data, nsize);
    if (p == NULL)
        return NULL;
    b->data = p;
    b->size = nsize;
    return b->data + b->len;
}

void init_buf_commit(struct init_buf *b, size_t n)
{
    b->len += n;
}

int init_buf_append(struct init_buf *b, const void *p, size_t n)
{
    unsigned char *dst;

    if (n == 0)
        return 0;
    dst = init_buf_reserve(b, n);
    if (dst == NULL)
        return -1;
    memcpy(dst, p, n);
    b->len += n;
    return 0;
}

void init_buf_consume(struct init_buf *b, size_t n)
{
    b->off += n;
    if (b->off >= b->len)
        b->off = b->len = 0;
}
