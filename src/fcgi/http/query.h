/*
 * query.h - a URL query string ("a=1&b=x%20y") decoded: %XX and '+' as in
 * application/x-www-form-urlencoded. Pure functions of the raw string (no
 * request, no FastCGI), so they can be fuzzed on their own
 * (tests/fuzz/fuzz_query.c); request.c's nb_http_query* call them on a
 * request's query.
 */
#ifndef NB_QUERY_H
#define NB_QUERY_H

#include <stddef.h>

#include "buf.h"

#define NB_QUERY_KEY_MAX 256    /* decoded key bytes nb_query_each hands over, NUL included */
#define NB_QUERY_VALUE_MAX 1024 /* decoded value bytes, NUL included */

/*
 * Walk the decoded "key=value" pairs of query (empty pairs skipped; a pair
 * without '=' has the value ""): calls cb for each, keys and values cut to
 * the sizes above and at a decoded NUL. Stops and returns -1 if cb does.
 */
int nb_query_each(const char *query, int (*cb)(void *arg, const char *k, const char *v), void *arg);

/* Decode %XX and '+' of s into out (NUL-terminated, cut to outlen - 1 bytes). */
void nb_query_decode(const char *s, char *out, size_t outlen);

/* Decoded value of the first pair whose decoded key is key, into out (cut
 * to outlen - 1 bytes): 0 found, -1 not. */
int nb_query_get(const char *query, const char *key, char *out, size_t outlen);

/*
 * Decoded value of the first pair whose raw key is key, byte-exact (NUL
 * bytes kept, out->len says how many), within out's cap: 0 found, -1
 * absent, -2 longer than the cap.
 */
int nb_query_bytes(const char *query, const char *key, struct nb_buf *out);

#endif
