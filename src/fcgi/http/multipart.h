/*
 * multipart.h - a streaming multipart/form-data parser (RFC 7578 over
 * RFC 2046's framing): the parts of a body that is read as it comes, never
 * held whole. Only a window of the body (NB_MP_WINDOW bytes) is kept: a
 * part's data goes out in pieces as soon as it cannot be the start of the
 * next delimiter. Pure: the body comes through a read callback, so the
 * parser knows no HTTP (unit-tested and fuzzed on its own).
 *
 *   nb_mp_boundary(content_type)      the boundary, or not a form
 *   nb_mp_init(m, boundary, read)     then, per part:
 *   nb_mp_next(m, &part)              its name and filename (1), the end (0)
 *   nb_mp_read(m, buf, n)             its data until 0
 *
 * Malformed input (no delimiter, a part without Content-Disposition or
 * with headers over NB_MP_HEADERS_MAX, a body that ends inside a part) is
 * -1 with m->err saying what, as is a read error.
 */
#ifndef NB_MULTIPART_H
#define NB_MULTIPART_H

#include <stddef.h>

#define NB_MP_BOUNDARY_MAX 70      /* RFC 2046 */
#define NB_MP_HEADERS_MAX 16384    /* bytes of one part's header block */
#define NB_MP_NAME_MAX 255         /* bytes of a part's name="" */
#define NB_MP_FILENAME_MAX 4096    /* bytes of a part's filename="" */
#define NB_MP_WINDOW (96u * 1024u) /* bytes of the body held at once */

/* Up to n bytes of the body into buf: the bytes read, 0 at its end, -1 on an error. */
typedef int (*nb_mp_read_fn)(void *arg, void *buf, size_t n);

struct nb_mp_part {
    char name[NB_MP_NAME_MAX + 1];
    char filename[NB_MP_FILENAME_MAX + 1];
    size_t filename_len; /* may hold a NUL byte: the caller checks the path */
    int has_filename;
};

struct nb_mp {
    nb_mp_read_fn read;
    void *arg;
    char delim[NB_MP_BOUNDARY_MAX + 5]; /* "\r\n--" boundary */
    size_t dlen;
    unsigned char buf[NB_MP_WINDOW];
    size_t start, end; /* the unread bytes: buf[start..end) */
    int eof;           /* read said 0 */
    int state;         /* multipart.c's */
    char err[160];     /* why -1 */
};

/*
 * The boundary of a Content-Type value if it is multipart/form-data
 * (case-insensitive, the boundary quoted or not): 0, or -1 (not a form,
 * no boundary, or one that is empty, over 70 bytes or not printable).
 */
int nb_mp_boundary(const char *content_type, char *out, size_t outlen);

/* Start parsing a body of that boundary, read through read(arg, ...). */
void nb_mp_init(struct nb_mp *m, const char *boundary, nb_mp_read_fn read, void *arg);

/*
 * The next part's headers into *p (the rest of the current part's data,
 * if any, is skipped): 1 a part (its data through nb_mp_read), 0 the
 * closing delimiter was reached, -1 malformed (m->err).
 */
int nb_mp_next(struct nb_mp *m, struct nb_mp_part *p);

/* Up to n (> 0) bytes of the current part's data: the bytes, 0 at its end, -1 malformed. */
int nb_mp_read(struct nb_mp *m, void *buf, size_t n);

#endif
