/*
 * ibuf.h - a byte queue with its own cap, for what a connection has read
 * and not yet handled, what it has to send, and a command's pending stdin.
 * Bytes are appended at the tail and consumed from the head; the storage
 * grows on demand up to the cap and is compacted when it needs room.
 */
#ifndef INIT_IBUF_H
#define INIT_IBUF_H

#include <stddef.h>

struct init_buf {
    unsigned char *data; /* storage, NULL until first used */
    size_t off;          /* first pending byte */
    size_t len;          /* end of the pending bytes */
    size_t size;         /* bytes allocated */
    size_t max;          /* most bytes ever pending */
};

void init_buf_init(struct init_buf *b, size_t max);
void init_buf_free(struct init_buf *b);

static inline size_t init_buf_pending(const struct init_buf *b)
{
    return b->len - b->off;
}
static inline unsigned char *init_buf_head(const struct init_buf *b)
{
    return b->data + b->off;
}

/* Room for n more bytes at the tail; NULL if that would pass the cap or
 * memory ran out. Write them, then init_buf_commit. */
unsigned char *init_buf_reserve(struct init_buf *b, size_t n);
void init_buf_commit(struct init_buf *b, size_t n);
/* Bytes writable at the tail without growing past the cap. */
size_t init_buf_space(const struct init_buf *b);

/* 0, or -1 if the bytes do not fit under the cap. */
int init_buf_append(struct init_buf *b, const void *p, size_t n);
void init_buf_consume(struct init_buf *b, size_t n);
/* Drop everything and give the memory back. */
void init_buf_release(struct init_buf *b);

#endif
