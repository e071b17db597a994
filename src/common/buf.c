/*
 * buf.c - see buf.h.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "log.h"

void *nb_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL) {
        nb_error("out of memory allocating %zu bytes", n);
        abort();
    }
    return p;
}

void *nb_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (p == NULL) {
        nb_error("out of memory allocating %zu x %zu bytes", n, size);
        abort();
    }
    return p;
}

void *nb_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (q == NULL) {
        nb_error("out of memory reallocating %zu bytes", n);
        abort();
    }
    return q;
}

char *nb_xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = nb_xmalloc(n);
    memcpy(p, s, n);
    return p;
}

void nb_buf_init(struct nb_buf *b, size_t cap)
{
    b->data = NULL;
    b->len = 0;
    b->alloc = 0;
    b->cap = cap;
}

void nb_buf_free(struct nb_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = 0;
    b->alloc = 0;
}

void nb_buf_reset(struct nb_buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

static void buf_grow(struct nb_buf *b, size_t need)
{
    size_t n = b->alloc ? b->alloc : 256;
    while (n < need + 1)
        n *= 2;
    if (n > b->cap + 1 && need + 1 <= b->cap + 1)
        n = b->cap + 1;
    b->data = nb_xrealloc(b->data, n);
    b->alloc = n;
}

int nb_buf_append(struct nb_buf *b, const void *data, size_t len)
{
    if (len > b->cap - b->len)
        return NB_ETOOBIG;
    if (b->len + len + 1 > b->alloc)
        buf_grow(b, b->len + len);
    if (len)
        memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
    return NB_OK;
}

size_t nb_buf_append_some(struct nb_buf *b, const void *data, size_t len)
{
    size_t room = b->cap - b->len;
    if (len > room)
        len = room;
    if (len == 0 && b->data != NULL)
        return 0;
    nb_buf_append(b, data, len);
    return len;
}

int nb_buf_printf(struct nb_buf *b, const char *fmt, ...)
{
    char small[512];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0)
        return NB_ERR;
    if ((size_t)n < sizeof(small))
        return nb_buf_append(b, small, (size_t)n);
    {
        char *big = nb_xmalloc((size_t)n + 1);
        int rc;
        va_start(ap, fmt);
        vsnprintf(big, (size_t)n + 1, fmt, ap);
        va_end(ap);
        rc = nb_buf_append(b, big, (size_t)n);
        free(big);
        return rc;
    }
}

char *nb_buf_steal(struct nb_buf *b)
{
    char *p = b->data;
    if (p == NULL)
        p = nb_xstrdup("");
    b->data = NULL;
    b->len = 0;
    b->alloc = 0;
    return p;
}
