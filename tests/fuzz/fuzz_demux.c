/*
 * fuzz_demux.c - libFuzzer harness over Docker's stream demultiplexer
 * (demux.c), which every exec's output goes through in whatever chunks
 * libcurl hands over.
 *
 * Input: one byte seeding how the rest is cut into chunks, then the stream
 * bytes. The same bytes are also walked by a reference reader here, frame
 * by frame, which says what the stream's valid prefix carries. Checks: the
 * payload delivered, per stream and in order, is exactly that of the
 * valid prefix (nothing past an invalid header, nothing invented); an
 * invalid header is an error that sticks; at the end, the boundary flag
 * is right; a callback that says stop is obeyed. Anything else aborts.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "demux.h"

struct sink {
    unsigned char *out[3]; /* payload bytes per stream */
    size_t len[3];
    size_t total;
    size_t stop_at; /* say stop once this many bytes came (0: never) */
    int stopped;
};

static int on_payload(void *arg, enum nb_stream stream, const char *data, size_t len)
{
    struct sink *s = arg;
    if ((unsigned)stream > NB_STREAM_STDERR || len == 0 || s->stopped)
        abort(); /* no empty calls, none after a stop */
    memcpy(s->out[stream] + s->len[stream], data, len);
    s->len[stream] += len;
    s->total += len;
    if (s->stop_at != 0 && s->total >= s->stop_at) {
        s->stopped = 1;
        return -1;
    }
    return 0;
}

struct expect {
    unsigned char *out[3];
    size_t len[3];
    size_t total;
    int invalid;  /* a bad header ends the valid prefix */
    int boundary; /* the stream ends between frames */
};

static void reference(const unsigned char *p, size_t n, struct expect *e)
{
    size_t i = 0;
    e->boundary = 1;
    while (i < n) {
        uint32_t flen;
        size_t take;
        if (n - i < 8) {
            e->boundary = 0;
            return;
        }
        if (p[i] > 2 || p[i + 1] || p[i + 2] || p[i + 3]) {
            e->invalid = 1;
            e->boundary = 0;
            return;
        }
        flen = (uint32_t)p[i + 4] << 24 | (uint32_t)p[i + 5] << 16 | (uint32_t)p[i + 6] << 8 |
               p[i + 7];
        take = n - i - 8 < flen ? n - i - 8 : flen;
        memcpy(e->out[p[i]] + e->len[p[i]], p + i + 8, take);
        e->len[p[i]] += take;
        e->total += take;
        if (take < flen)
            e->boundary = 0;
        i += 8 + take;
    }
}

static void run(const unsigned char *p, size_t n, uint8_t seed, size_t stop_at)
{
    struct nb_demux d;
    struct sink s;
    struct expect e;
    size_t off = 0;
    uint32_t rnd = seed * 2654435761u + 1;
    int rc = 0;

    memset(&s, 0, sizeof(s));
    memset(&e, 0, sizeof(e));
    for (int k = 0; k < 3; k++) {
        s.out[k] = malloc(n + 1);
        e.out[k] = malloc(n + 1);
        if (s.out[k] == NULL || e.out[k] == NULL)
            abort();
    }
    s.stop_at = stop_at;
    reference(p, n, &e);

    nb_demux_init(&d, on_payload, &s);
    while (off < n) {
        size_t chunk;
        char *piece;
        rnd = rnd * 1103515245u + 12345u;
        chunk = 1 + (rnd >> 16) % (seed & 1 ? 3 : 64); /* tiny or small chunks */
        if (chunk > n - off)
            chunk = n - off;
        piece = malloc(chunk); /* exact size: a read past it is caught */
        if (piece == NULL)
            abort();
        memcpy(piece, p + off, chunk);
        rc = nb_demux_feed(&d, piece, chunk);
        free(piece);
        off += chunk;
        if (rc != 0)
            break;
    }
    if (rc != 0 && nb_demux_feed(&d, "\1\0\0\0\0\0\0\1x", 9) != -1)
        abort(); /* the error sticks */

    if (s.stopped) {
        /* stopped by the callback: a prefix of what the stream carries */
        if (rc != -1 || s.total > e.total)
            abort();
        for (int k = 0; k < 3; k++)
            if (s.len[k] > e.len[k] || memcmp(s.out[k], e.out[k], s.len[k]) != 0)
                abort();
    } else {
        if ((rc != 0) != e.invalid)
            abort();
        for (int k = 0; k < 3; k++)
            if (s.len[k] != e.len[k] || memcmp(s.out[k], e.out[k], s.len[k]) != 0)
                abort();
        if (nb_demux_at_boundary(&d) != e.boundary)
            abort();
    }
    for (int k = 0; k < 3; k++) {
        free(s.out[k]);
        free(e.out[k]);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    run(data + 1, size - 1, data[0], 0);
    if (size > 2)
        run(data + 1, size - 1, data[0], 1 + data[0] % (size - 1));
    return 0;
}
