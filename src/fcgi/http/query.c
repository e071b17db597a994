/*
 * query.c - see query.h.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "query.h"

static int hexval(int ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Decode %XX and '+' from s[0..len) into out (NUL-terminated, truncated). */
static void url_decode(const char *s, size_t len, char *out, size_t outlen)
{
    size_t o = 0;
    for (size_t i = 0; i < len && o + 1 < outlen; i++) {
        if (s[i] == '%' && i + 2 < len && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
            out[o++] = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
            i += 2;
        } else if (s[i] == '+') {
            out[o++] = ' ';
        } else {
            out[o++] = s[i];
        }
    }
    out[o] = '\0';
}

void nb_query_decode(const char *s, char *out, size_t outlen)
{
    url_decode(s, strlen(s), out, outlen);
}

int nb_query_each(const char *query, int (*cb)(void *arg, const char *k, const char *v), void *arg)
{
    const char *p = query;
    while (*p) {
        const char *amp = strchr(p, '&'), *eq;
        size_t len = amp ? (size_t)(amp - p) : strlen(p);
        char k[NB_QUERY_KEY_MAX], v[NB_QUERY_VALUE_MAX];
        eq = memchr(p, '=', len);
        if (len > 0) {
            if (eq) {
                url_decode(p, (size_t)(eq - p), k, sizeof(k));
                url_decode(eq + 1, len - (size_t)(eq - p) - 1, v, sizeof(v));
            } else {
                url_decode(p, len, k, sizeof(k));
                v[0] = '\0';
            }
            if (cb(arg, k, v) != 0)
                return -1;
        }
        p += len;
        if (*p == '&')
            p++;
    }
    return 0;
}

int nb_query_bytes(const char *query, const char *key, struct nb_buf *out)
{
    size_t klen = strlen(key);
    const char *p = query;
    while (*p) {
        const char *amp = strchr(p, '&');
        size_t len = amp ? (size_t)(amp - p) : strlen(p);
        if (len > klen && p[klen] == '=' && !strncmp(p, key, klen)) {
            const char *v = p + klen + 1;
            size_t vlen = len - klen - 1;
            nb_buf_reset(out);
            for (size_t i = 0; i < vlen; i++) {
                char ch = v[i];
                if (v[i] == '%' && i + 2 < vlen && hexval(v[i + 1]) >= 0 && hexval(v[i + 2]) >= 0) {
                    ch = (char)(hexval(v[i + 1]) * 16 + hexval(v[i + 2]));
                    i += 2;
                } else if (v[i] == '+') {
                    ch = ' ';
                }
                if (nb_buf_append(out, &ch, 1) != NB_OK)
                    return -2;
            }
            if (out->data == NULL)
                nb_buf_append(out, "", 0);
            return 0;
        }
        p += len;
        if (*p == '&')
            p++;
    }
    return -1;
}

struct query_find {
    const char *key;
    char *out;
    size_t outlen;
    int found;
};

static int query_find_cb(void *arg, const char *k, const char *v)
{
    struct query_find *f = arg;
    if (strcmp(k, f->key) != 0)
        return 0;
    snprintf(f->out, f->outlen, "%s", v);
    f->found = 1;
    return -1;
}

int nb_query_get(const char *query, const char *key, char *out, size_t outlen)
{
    struct query_find f = {key, out, outlen, 0};
    nb_query_each(query, query_find_cb, &f);
    return f.found ? 0 : -1;
}
