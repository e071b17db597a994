/*
 * fuzz_query.c - libFuzzer harness over query-string decoding (query.c):
 * nb_query_each, nb_query_get and nb_query_bytes, which every handler with
 * a query (files, processes, the sandbox list filter) goes through.
 *
 * Input: one byte picking a key from a fixed list, then the raw query
 * (cut at its first NUL and at NB_QUERY_MAX - 1 bytes, as request.c stores
 * it). Checks that each pair handed over fits its cap, that the three
 * functions agree with each other, and that a value's byte-exact decoding
 * honours its buffer's cap; anything else aborts (a finding).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "query.h"

#define QUERY_MAX_LEN 2047 /* NB_QUERY_MAX - 1 */
#define SMALL_CAP 16

static const char *const keys[] = {"path", "pid", "offset", "metadata.owner", "a", ""};

struct walk {
    const char *key;
    unsigned calls;
    unsigned stop_after; /* the callback says stop at this call (0: never) */
    int first_found;
    char first[NB_QUERY_VALUE_MAX];
};

static int walk_cb(void *arg, const char *k, const char *v)
{
    struct walk *w = arg;
    if (strlen(k) >= NB_QUERY_KEY_MAX || strlen(v) >= NB_QUERY_VALUE_MAX)
        abort();
    w->calls++;
    if (!w->first_found && strcmp(k, w->key) == 0) {
        w->first_found = 1;
        memcpy(w->first, v, strlen(v) + 1);
    }
    return w->stop_after != 0 && w->calls == w->stop_after ? -1 : 0;
}

static unsigned count_pairs(const char *q)
{
    unsigned n = 0;
    const char *p = q;
    while (*p) {
        size_t len = strcspn(p, "&");
        n += len > 0;
        p += len;
        if (*p == '&')
            p++;
    }
    return n;
}

/* The raw value of the first pair whose raw key is key, or NULL. */
static const char *raw_value(const char *q, const char *key, size_t *vlen)
{
    size_t klen = strlen(key);
    const char *p = q;
    while (*p) {
        size_t len = strcspn(p, "&");
        if (len > klen && p[klen] == '=' && strncmp(p, key, klen) == 0) {
            *vlen = len - klen - 1;
            return p + klen + 1;
        }
        p += len;
        if (*p == '&')
            p++;
    }
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *key;
    struct walk w;
    struct nb_buf big, small;
    char got[NB_QUERY_VALUE_MAX];
    char *q;
    size_t n, vlen = 0;
    const char *raw;
    int rb, rs, rg, re;
    unsigned pairs;

    if (size == 0)
        return 0;
    key = keys[data[0] % (sizeof(keys) / sizeof(keys[0]))];
    n = size - 1 < QUERY_MAX_LEN ? size - 1 : QUERY_MAX_LEN;
    q = malloc(n + 1);
    if (q == NULL)
        return 0;
    memcpy(q, data + 1, n);
    q[n] = '\0';
    n = strlen(q);
    pairs = count_pairs(q);

    /* every pair, in order; the first match is what nb_query_get answers */
    memset(&w, 0, sizeof(w));
    w.key = key;
    re = nb_query_each(q, walk_cb, &w);
    if (re != 0 || w.calls != pairs)
        abort();
    rg = nb_query_get(q, key, got, sizeof(got));
    if ((rg == 0) != w.first_found || (rg == 0 && strcmp(got, w.first) != 0))
        abort();
    /* a callback that says stop is obeyed at once */
    if (pairs > 0) {
        memset(&w, 0, sizeof(w));
        w.key = key;
        w.stop_after = 1 + data[0] % pairs;
        if (nb_query_each(q, walk_cb, &w) != -1 || w.calls != w.stop_after)
            abort();
    }

    /* byte-exact: found exactly when a raw key matches; never longer than
     * the raw value; a small cap answers -2 exactly when the value is longer */
    nb_buf_init(&big, QUERY_MAX_LEN);
    nb_buf_init(&small, SMALL_CAP);
    raw = raw_value(q, key, &vlen);
    rb = nb_query_bytes(q, key, &big);
    rs = nb_query_bytes(q, key, &small);
    if ((raw != NULL) != (rb == 0) || (rb != 0 && rb != -1))
        abort();
    if (rb == 0) {
        if (big.data == NULL || big.len > vlen || big.data[big.len] != '\0')
            abort();
        if (strcspn(raw, "%+") >= vlen && (big.len != vlen || memcmp(big.data, raw, vlen) != 0))
            abort(); /* nothing to decode: the value as it is */
        if (big.len <= SMALL_CAP
                ? (rs != 0 || small.len != big.len || memcmp(small.data, big.data, big.len) != 0)
                : rs != -2)
            abort();
        /* the decoded key and value agree with nb_query_get when no %XX or
         * '+' could make another pair's key decode to this one */
        if (strcspn(q, "%+") == n && memchr(big.data, '\0', big.len) == NULL &&
            big.len < NB_QUERY_VALUE_MAX && *key != '\0') {
            const char *first = q;
            /* the first pair named key, with or without '=' */
            while (*first) {
                size_t len = strcspn(first, "&"), kl = strlen(key);
                if (len >= kl && strncmp(first, key, kl) == 0 && (len == kl || first[kl] == '='))
                    break;
                first += len;
                if (*first == '&')
                    first++;
            }
            if (first == raw - strlen(key) - 1 && (rg != 0 || strcmp(got, big.data) != 0))
                abort();
        }
    } else if (rs != -1) {
        abort();
    }
    nb_buf_free(&big);
    nb_buf_free(&small);
    free(q);
    return 0;
}
