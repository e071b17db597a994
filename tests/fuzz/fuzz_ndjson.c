/*
 * fuzz_ndjson.c - libFuzzer harness over the CLI's NDJSON line splitter
 * (ndjson_feed, src/cli/ndjson.c), which cuts a streamed exec answer into
 * lines as libcurl hands its bytes over, and over what the CLI then does
 * with each line (nb_json_parse with the CLI's depth cap).
 *
 * Input: one byte seeding how the rest is cut into pieces, then the
 * stream. Checks: without an overflow, the lines handed over, each
 * followed by '\n', then what is left pending, are exactly the stream; no
 * line holds a '\n'; with an overflow (a line split across pieces past
 * pending's cap), what was handed over is a prefix of those lines; a
 * callback that says stop is obeyed at once. Anything else aborts.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "json.h"
#include "ndjson.h"

#define ANSWER_MAX_DEPTH 64u /* client.c's */

struct lines {
    char *out; /* the lines, each with its '\n' put back */
    size_t len;
    unsigned calls;
    unsigned stop_at; /* say stop at this call (0: never) */
};

static int on_line(void *ctx, const char *line, size_t len)
{
    struct lines *l = ctx;
    char *copy;
    yajl_val v = NULL;
    char err[256];

    if (memchr(line, '\n', len) != NULL)
        abort();
    memcpy(l->out + l->len, line, len);
    l->out[l->len + len] = '\n';
    l->len += len + 1;
    l->calls++;
    /* what client.c's feed_line does with it: parse a NUL-terminated copy */
    copy = malloc(len + 1);
    if (copy == NULL)
        abort();
    memcpy(copy, line, len);
    copy[len] = '\0';
    if (nb_json_parse(copy, len, ANSWER_MAX_DEPTH, &v, err, sizeof(err)) == 0)
        yajl_tree_free(v);
    free(copy);
    return l->stop_at != 0 && l->calls == l->stop_at ? -1 : 0;
}

static void run(const char *p, size_t n, uint8_t seed, size_t cap, unsigned stop_at)
{
    struct nb_buf pending;
    struct lines l;
    uint32_t rnd = seed * 2654435761u + 7;
    size_t off = 0;
    int rc = NDJSON_OK;

    memset(&l, 0, sizeof(l));
    l.out = malloc(n + 1);
    if (l.out == NULL)
        abort();
    l.stop_at = stop_at;
    nb_buf_init(&pending, cap);
    while (off < n) {
        size_t chunk;
        char *piece;
        rnd = rnd * 1103515245u + 12345u;
        chunk = 1 + (rnd >> 16) % (seed & 1 ? 4 : 96);
        if (chunk > n - off)
            chunk = n - off;
        piece = malloc(chunk); /* exact size: a read past it is caught */
        if (piece == NULL)
            abort();
        memcpy(piece, p + off, chunk);
        rc = ndjson_feed(&pending, piece, chunk, on_line, &l);
        free(piece);
        off += chunk;
        if (rc != NDJSON_OK)
            break;
    }
    if (rc != NDJSON_OK && rc != NDJSON_STOP && rc != NDJSON_OVERFLOW)
        abort();
    if (rc == NDJSON_STOP && l.calls != stop_at)
        abort();
    if (pending.len > cap)
        abort();
    /* what was handed over is the stream's start, line by line */
    if (l.len > n || (l.len > 0 && memcmp(l.out, p, l.len) != 0))
        abort();
    if (rc == NDJSON_OK) {
        /* and the rest is pending: no byte lost or doubled */
        if (l.len + pending.len != n ||
            (pending.len > 0 && memcmp(p + l.len, pending.data, pending.len) != 0))
            abort();
        if (memchr(p + l.len, '\n', n - l.len) != NULL)
            abort();
    }
    nb_buf_free(&pending);
    free(l.out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data + 1;
    size_t n;

    if (size == 0)
        return 0;
    n = size - 1;
    run(p, n, data[0], 1u << 20, 0);
    run(p, n, data[0], 8, 0);                      /* a tiny cap: overflows */
    run(p, n, data[0], 1u << 20, 1 + data[0] % 4); /* the callback stops early */
    return 0;
}
