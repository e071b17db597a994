/*
 * base64.c - see base64.h.
 */
#include "base64.h"

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int nb_base64_encode(struct nb_buf *out, const void *data, size_t len)
{
    const unsigned char *p = data;
    char q[4];
    for (size_t i = 0; i < len; i += 3) {
        unsigned v = (unsigned)p[i] << 16;
        size_t n = len - i < 3 ? len - i : 3;
        if (n > 1)
            v |= (unsigned)p[i + 1] << 8;
        if (n > 2)
            v |= p[i + 2];
        q[0] = b64_alphabet[(v >> 18) & 63];
        q[1] = b64_alphabet[(v >> 12) & 63];
        q[2] = n > 1 ? b64_alphabet[(v >> 6) & 63] : '=';
        q[3] = n > 2 ? b64_alphabet[v & 63] : '=';
        if (nb_buf_append(out, q, 4) != NB_OK)
            return NB_ETOOBIG;
    }
    return NB_OK;
}

static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

int nb_base64_decode(struct nb_buf *out, const char *text, size_t len)
{
    unsigned v = 0;
    int bits = 0, pad = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i], b;
        int x;
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
            continue;
        if (c == '=') {
            pad = 1;
            continue;
        }
        x = b64_value(c);
        if (x < 0 || pad)
            return NB_ERR; /* junk, or data after padding */
        v = (v << 6) | (unsigned)x;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            b = (unsigned char)(v >> bits);
            if (nb_buf_append(out, &b, 1) != NB_OK)
                return NB_ETOOBIG;
        }
    }
    /* 6 leftover bits cannot come from whole bytes */
    return bits >= 6 ? NB_ERR : NB_OK;
}
