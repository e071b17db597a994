/*
 * buf.h - a growable byte buffer that carries its own size cap (after
 * curl's dynbuf). Anything read from outside (request bodies, Docker
 * answers, command output) lands in one of these, so no input can grow
 * memory past a limit the operator configured.
 */
#ifndef NB_BUF_H
#define NB_BUF_H

#include <stddef.h>

struct nb_buf {
    char *data;   /* always NUL-terminated when non-NULL */
    size_t len;   /* bytes held, excluding the terminating NUL */
    size_t alloc; /* bytes allocated */
    size_t cap;   /* most bytes it may ever hold */
};

#define NB_OK 0
#define NB_ERR -1
#define NB_ETOOBIG -2 /* an append would pass the cap: nothing was appended */

void nb_buf_init(struct nb_buf *b, size_t cap);
void nb_buf_free(struct nb_buf *b);
void nb_buf_reset(struct nb_buf *b);
int nb_buf_append(struct nb_buf *b, const void *data, size_t len);
/* Append as much of data as fits under the cap; returns bytes appended. */
size_t nb_buf_append_some(struct nb_buf *b, const void *data, size_t len);
int nb_buf_printf(struct nb_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hand the bytes over to the caller (who frees them); b becomes empty. */
char *nb_buf_steal(struct nb_buf *b);

/* x-allocators: abort on out-of-memory (the master respawns the worker). */
void *nb_xmalloc(size_t n);
void *nb_xcalloc(size_t n, size_t size);
void *nb_xrealloc(void *p, size_t n);
char *nb_xstrdup(const char *s);

#endif
