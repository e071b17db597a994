/*
 * agentproto.c - frame and field codec shared by nanobox-init and the host
 * (agentproto.h). Every length is checked against the bytes actually held
 * before anything is read: this file parses what an untrusted peer sends.
 */
#include "agentproto.h"

#include <string.h>
#include <strings.h>

uint32_t nba_get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

uint64_t nba_get_u64(const unsigned char *p)
{
    return (uint64_t)nba_get_u32(p) << 32 | nba_get_u32(p + 4);
}

void nba_put_u32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

void nba_put_u64(unsigned char *p, uint64_t v)
{
    nba_put_u32(p, (uint32_t)(v >> 32));
    nba_put_u32(p + 4, (uint32_t)v);
}

long nba_frame_peek(const unsigned char *buf, size_t n, size_t max_body, uint8_t *type,
                    const unsigned char **body, uint32_t *len)
{
    uint32_t l;
    if (n < NBA_HDR)
        return 0;
    l = nba_get_u32(buf + 1);
    if (l > max_body)
        return -1;
    if (n - NBA_HDR < l)
        return 0;
    *type = buf[0];
    *body = buf + NBA_HDR;
    *len = l;
    return (long)(NBA_HDR + (size_t)l);
}

void nba_frame_hdr(unsigned char *out, uint8_t type, uint32_t len)
{
    out[0] = type;
    nba_put_u32(out + 1, len);
}

void nba_fields_init(struct nba_fields *it, const unsigned char *body, uint32_t len)
{
    it->p = body;
    it->end = body + len;
}

int nba_fields_next(struct nba_fields *it, uint8_t *tag, const unsigned char **val, uint32_t *len)
{
    size_t left = (size_t)(it->end - it->p);
    uint32_t l;
    if (left == 0)
        return 0;
    if (left < NBA_HDR)
        return -1;
    l = nba_get_u32(it->p + 1);
    if (l > left - NBA_HDR)
        return -1;
    *tag = it->p[0];
    *val = it->p + NBA_HDR;
    *len = l;
    it->p += NBA_HDR + (size_t)l;
    return 1;
}

size_t nba_field_put(unsigned char *out, uint8_t tag, const void *val, uint32_t len)
{
    nba_frame_hdr(out, tag, len);
    if (len > 0)
        memcpy(out + NBA_HDR, val, len);
    return NBA_HDR + (size_t)len;
}

int nba_path_ok(const char *path, size_t len)
{
    size_t i = 0;
    if (len == 0 || len > NBA_MAX_PATH || path[0] != '/' || memchr(path, '\0', len) != NULL)
        return 0;
    while (i < len) {
        size_t start, clen;
        while (i < len && path[i] == '/')
            i++;
        start = i;
        while (i < len && path[i] != '/')
            i++;
        clen = i - start;
        if ((clen == 1 && path[start] == '.') ||
            (clen == 2 && path[start] == '.' && path[start + 1] == '.'))
            return 0;
    }
    return 1;
}

int nba_meta_key_ok(const char *key, size_t len)
{
    static const char *const namespaces[] = {"user.", "trusted.", "security.", "system."};
    if (len == 0 || len > NBA_META_KEY_MAX)
        return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)key[i];
        /* RFC 9110's tchar: what an X-Metadata-<key> header name may hold */
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              (ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch) != NULL)))
            return 0;
    }
    for (size_t k = 0; k < sizeof(namespaces) / sizeof(namespaces[0]); k++) {
        size_t n = strlen(namespaces[k]);
        if (len >= n && strncasecmp(key, namespaces[k], n) == 0)
            return 0;
    }
    return 1;
}

int nba_meta_value_ok(const char *value, size_t len)
{
    if (len > NBA_META_VALUE_MAX)
        return 0;
    for (size_t i = 0; i < len; i++) {
        if ((unsigned char)value[i] < 0x20 || (unsigned char)value[i] > 0x7e)
            return 0;
    }
    return 1;
}
