/*
 * multipart.c - the streaming multipart/form-data parser (multipart.h).
 *
 * The body is seen as if it began with "\r\n", so that the first delimiter
 * is the same "\r\n--boundary" as the others; what precedes it (a
 * preamble) is skipped, as is what follows the closing "--boundary--" (an
 * epilogue). A part's data is every byte up to the next "\r\n--boundary":
 * the last dlen - 1 bytes of the window are held back until more of the
 * body shows whether they begin a delimiter.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "multipart.h"

enum {
    MP_START,  /* before the first delimiter */
    MP_AFTER,  /* just after a delimiter: "--" (the end) or a part's headers */
    MP_BODY,   /* in a part's data */
    MP_DONE,   /* after the closing delimiter */
    MP_FAILED, /* malformed or unreadable: m->err */
};

static int fail(struct nb_mp *m, const char *msg)
{
    snprintf(m->err, sizeof(m->err), "%s", msg);
    m->state = MP_FAILED;
    return -1;
}

/* More of the body into the window (compacted first): 0 (eof may now be set), -1 on a read error. */
static int fill(struct nb_mp *m)
{
    int n;
    if (m->start > 0) {
        memmove(m->buf, m->buf + m->start, m->end - m->start);
        m->end -= m->start;
        m->start = 0;
    }
    if (m->eof || m->end == sizeof(m->buf))
        return 0;
    n = m->read(m->arg, m->buf + m->end, sizeof(m->buf) - m->end);
    if (n < 0)
        return fail(m, "the body could not be read");
    if (n == 0)
        m->eof = 1;
    m->end += (size_t)n;
    return 0;
}

/* At least want unread bytes in the window, unless the body ends first: 0, or -1. */
static int need(struct nb_mp *m, size_t want)
{
    while (m->end - m->start < want && !m->eof)
        if (fill(m) != 0)
            return -1;
    return 0;
}

static const unsigned char *find_delim(const struct nb_mp *m)
{
    return memmem(m->buf + m->start, m->end - m->start, m->delim, m->dlen);
}

int nb_mp_boundary(const char *ct, char *out, size_t outlen)
{
    const char *p = ct;
    size_t n = 0;

    if (ct == NULL || strncasecmp(p, "multipart/form-data", 19) != 0)
        return -1;
    p += 19;
    while (*p != '\0') {
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p != ';')
            return -1;
        p++;
        while (*p == ' ' || *p == '\t')
            p++;
        if (strncasecmp(p, "boundary=", 9) == 0) {
            p += 9;
            if (*p == '"') {
                const char *q = strchr(++p, '"');
                if (q == NULL)
                    return -1;
                n = (size_t)(q - p);
            } else {
                n = strcspn(p, "; \t");
            }
            break;
        }
        p += strcspn(p, ";"); /* another parameter (charset=...) */
    }
    if (n == 0 || n > NB_MP_BOUNDARY_MAX || n >= outlen)
        return -1;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)p[i] < 0x20 || (unsigned char)p[i] > 0x7e)
            return -1;
    memcpy(out, p, n);
    out[n] = '\0';
    return 0;
}

void nb_mp_init(struct nb_mp *m, const char *boundary, nb_mp_read_fn read, void *arg)
{
    m->read = read;
    m->arg = arg;
    m->dlen =
        (size_t)snprintf(m->delim, sizeof(m->delim), "\r\n--%.*s", NB_MP_BOUNDARY_MAX, boundary);
    memcpy(m->buf, "\r\n", 2);
    m->start = 0;
    m->end = 2;
    m->eof = 0;
    m->state = MP_START;
    m->err[0] = '\0';
}

/*
 * A parameter's value at *pp (quoted-string with \-escapes, or a token)
 * into out (NUL-terminated, cut at cap - 1): its length, or -1 if a quote
 * does not close before end.
 */
static long param_value(const char **pp, const char *end, char *out, size_t cap)
{
    const char *p = *pp;
    size_t n = 0;
    if (p < end && *p == '"') {
        for (p++; p < end && *p != '"'; p++) {
            if (*p == '\\' && p + 1 < end)
                p++;
            if (n + 1 < cap)
                out[n++] = *p;
        }
        if (p >= end)
            return -1;
        p++;
    } else {
        for (; p < end && *p != ';' && *p != ' ' && *p != '\t'; p++)
            if (n + 1 < cap)
                out[n++] = *p;
    }
    out[n] = '\0';
    *pp = p;
    return (long)n;
}

/* The Content-Disposition value v[0..len) into *part: 0, or -1 with the reason in m. */
static int disposition(struct nb_mp *m, const char *v, const char *end, struct nb_mp_part *part)
{
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    if ((size_t)(end - v) < 9 || strncasecmp(v, "form-data", 9) != 0)
        return fail(m, "a part's Content-Disposition is not form-data");
    v += 9;
    while (v < end) {
        const char *name;
        size_t nlen;
        char scratch[8];
        long vlen;
        while (v < end && (*v == ' ' || *v == '\t' || *v == ';'))
            v++;
        name = v;
        while (v < end && *v != '=' && *v != ';' && *v != ' ' && *v != '\t')
            v++;
        nlen = (size_t)(v - name);
        if (v >= end || *v != '=')
            continue; /* a parameter without a value */
        v++;
        if (nlen == 4 && strncasecmp(name, "name", 4) == 0)
            vlen = param_value(&v, end, part->name, sizeof(part->name));
        else if (nlen == 8 && strncasecmp(name, "filename", 8) == 0) {
            vlen = param_value(&v, end, part->filename, sizeof(part->filename));
            if (vlen >= (long)sizeof(part->filename) - 1)
                return fail(m, "a part's filename is too long");
            part->filename_len = vlen < 0 ? 0 : (size_t)vlen;
            part->has_filename = vlen >= 0;
        } else
            vlen = param_value(&v, end, scratch, sizeof(scratch));
        if (vlen < 0)
            return fail(m, "a part's Content-Disposition has an unclosed quote");
    }
    return 0;
}

/* The header block h[0..len) ("Name: value" lines, CRLF between them) into *part. */
static int headers(struct nb_mp *m, const char *h, size_t len, struct nb_mp_part *part)
{
    const char *end = h + len;
    int seen = 0;
    while (h < end) {
        const char *eol = memmem(h, (size_t)(end - h), "\r\n", 2);
        const char *colon;
        if (eol == NULL)
            eol = end;
        colon = memchr(h, ':', (size_t)(eol - h));
        if (colon != NULL && colon - h == 19 && strncasecmp(h, "Content-Disposition", 19) == 0) {
            if (disposition(m, colon + 1, eol, part) != 0)
                return -1;
            seen = 1;
        }
        h = eol + (eol < end ? 2 : 0);
    }
    if (!seen)
        return fail(m, "a part has no Content-Disposition header");
    return 0;
}

/* After a delimiter: the closing "--", or a part's header block. */
static int after_delim(struct nb_mp *m, struct nb_mp_part *part)
{
    const unsigned char *q;
    size_t lwsp = 0;

    if (need(m, 2) != 0)
        return -1;
    if (m->end - m->start >= 2 && !memcmp(m->buf + m->start, "--", 2)) {
        m->state = MP_DONE;
        return 0;
    }
    /* transport padding, then the CRLF that ends the delimiter's line */
    for (;;) {
        if (need(m, lwsp + 1) != 0)
            return -1;
        if (m->end - m->start <= lwsp)
            return fail(m, "the body ended after a delimiter");
        if (m->buf[m->start + lwsp] != ' ' && m->buf[m->start + lwsp] != '\t')
            break;
        if (++lwsp > 64)
            return fail(m, "a delimiter line is malformed");
    }
    m->start += lwsp;
    if (need(m, 2) != 0)
        return -1;
    if (m->end - m->start < 2 || memcmp(m->buf + m->start, "\r\n", 2) != 0)
        return fail(m, "a delimiter is not followed by CRLF (is the boundary right?)");
    /* the header block: from that CRLF to the empty line */
    while ((q = memmem(m->buf + m->start, m->end - m->start, "\r\n\r\n", 4)) == NULL) {
        if (m->end - m->start > NB_MP_HEADERS_MAX)
            return fail(m, "a part's headers are too long");
        if (m->eof)
            return fail(m, "the body ended in a part's headers");
        if (fill(m) != 0)
            return -1;
    }
    if ((size_t)(q - (m->buf + m->start)) > NB_MP_HEADERS_MAX)
        return fail(m, "a part's headers are too long");
    memset(part, 0, sizeof(*part));
    if (q > m->buf + m->start && headers(m, (const char *)m->buf + m->start + 2,
                                         (size_t)(q - (m->buf + m->start)) - 2, part) != 0)
        return -1;
    if (q == m->buf + m->start)
        return fail(m, "a part has no Content-Disposition header");
    m->start = (size_t)(q - m->buf) + 4;
    m->state = MP_BODY;
    return 1;
}

int nb_mp_read(struct nb_mp *m, void *buf, size_t n)
{
    if (m->state == MP_FAILED)
        return -1;
    if (m->state != MP_BODY || n == 0)
        return 0;
    for (;;) {
        const unsigned char *d = find_delim(m);
        size_t avail;
        if (d != NULL) {
            avail = (size_t)(d - (m->buf + m->start));
            if (avail == 0) {
                m->start += m->dlen;
                m->state = MP_AFTER;
                return 0;
            }
        } else {
            /* hold back what may be the start of a delimiter */
            avail = m->end - m->start;
            avail = avail >= m->dlen ? avail - (m->dlen - 1) : 0;
        }
        if (avail > 0) {
            if (avail > n)
                avail = n;
            if (avail > (size_t)0x7fffffff)
                avail = 0x7fffffff;
            memcpy(buf, m->buf + m->start, avail);
            m->start += avail;
            return (int)avail;
        }
        if (m->eof)
            return fail(m, "the body ended inside a part (no closing delimiter)");
        if (fill(m) != 0)
            return -1;
    }
}

int nb_mp_next(struct nb_mp *m, struct nb_mp_part *part)
{
    unsigned char skip[4096];
    int n;

    switch (m->state) {
    case MP_START:
        for (;;) {
            const unsigned char *d = find_delim(m);
            if (d != NULL) {
                m->start = (size_t)(d - m->buf) + m->dlen;
                m->state = MP_AFTER;
                break;
            }
            if (m->eof)
                return fail(m, "the body has no multipart delimiter (is the boundary right?)");
            if (m->end - m->start >= m->dlen)
                m->start = m->end - (m->dlen - 1); /* the preamble so far */
            if (fill(m) != 0)
                return -1;
        }
        return after_delim(m, part);
    case MP_BODY:
        while ((n = nb_mp_read(m, skip, sizeof(skip))) > 0)
            ;
        if (n < 0)
            return -1;
        return after_delim(m, part);
    case MP_AFTER:
        return after_delim(m, part);
    case MP_DONE:
        return 0;
    default:
        return -1;
    }
}
