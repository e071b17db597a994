/*
 * netrule.c - see netrule.h.
 */
#include "config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netrule.h"

uint32_t nb_netrule_mask(unsigned prefix)
{
    return prefix == 0 ? 0 : 0xffffffffu << (32 - prefix);
}

/* n digits (at most 5) as a number up to max; -1 on anything else. */
static int parse_dec(const char *s, size_t n, unsigned long max, unsigned long *out)
{
    unsigned long v = 0;
    if (n == 0 || n > 5)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)s[i]))
            return -1;
        v = v * 10 + (unsigned long)(s[i] - '0');
    }
    if (v > max)
        return -1;
    *out = v;
    return 0;
}

int nb_netrule_parse(const char *s, struct nb_netrule *out, char *err, size_t errlen)
{
    char text[NB_NETRULE_TEXT + 1];
    const char *p, *slash, *colon;
    unsigned long v, prefix = 32, port = 0;
    uint32_t addr = 0;
    size_t len = strlen(s);
    int letters = 0, colons = 0;

    for (size_t i = 0; i < len; i++) {
        letters += isalpha((unsigned char)s[i]) != 0;
        colons += s[i] == ':';
    }
    if (colons > 1 || strchr(s, '[') != NULL) {
        snprintf(err, errlen, "\"%.60s\": IPv6 is not supported (sandboxes have no IPv6 address)",
                 s);
        return -1;
    }
    if (letters) {
        snprintf(err, errlen,
                 "\"%.60s\": domain names are not supported, give an IPv4 address or "
                 "CIDR, optionally with :port (see docs/SECURITY.md)",
                 s);
        return -1;
    }
    if (len == 0 || len > NB_NETRULE_TEXT) {
        snprintf(err, errlen,
                 "\"%.60s\" is not an IPv4 address or CIDR (like 10.1.2.0/24 or 192.0.2.7:443)", s);
        return -1;
    }
    memcpy(text, s, len + 1);
    colon = strchr(text, ':');
    slash = strchr(text, '/');
    if (slash != NULL && colon != NULL && slash > colon)
        goto bad;
    p = text;
    for (int i = 0; i < 4; i++) {
        size_t n = strspn(p, "0123456789");
        if (parse_dec(p, n, 255, &v) != 0 || (n > 1 && p[0] == '0'))
            goto bad;
        addr = addr << 8 | (uint32_t)v;
        p += n;
        if (i < 3) {
            if (*p != '.')
                goto bad;
            p++;
        }
    }
    if (*p == '/') {
        size_t n = strspn(p + 1, "0123456789");
        if (parse_dec(p + 1, n, 32, &prefix) != 0)
            goto bad;
        p += 1 + n;
    }
    if (*p == ':') {
        size_t n = strspn(p + 1, "0123456789");
        if (parse_dec(p + 1, n, 65535, &port) != 0 || port == 0) {
            snprintf(err, errlen, "\"%.60s\": the port must be between 1 and 65535", s);
            return -1;
        }
        p += 1 + n;
    }
    if (*p != '\0')
        goto bad;
    if (addr & ~nb_netrule_mask((unsigned)prefix)) {
        snprintf(err, errlen, "\"%.60s\" has host bits set beyond its /%lu prefix", s, prefix);
        return -1;
    }
    out->addr = addr;
    out->prefix = (uint8_t)prefix;
    out->port = (uint16_t)port;
    return 0;
bad:
    snprintf(err, errlen,
             "\"%.60s\" is not an IPv4 address or CIDR (like 10.1.2.0/24 or 192.0.2.7:443)", s);
    return -1;
}

int nb_netrules_add(struct nb_netrules *l, const char *s, char *err, size_t errlen)
{
    if (l->n >= NB_NETRULES_MAX) {
        snprintf(err, errlen, "at most %d rules in one list", NB_NETRULES_MAX);
        return -1;
    }
    if (nb_netrule_parse(s, &l->r[l->n], err, errlen) != 0)
        return -1;
    l->n++;
    return 0;
}

int nb_netrules_parse_list(const char *text, struct nb_netrules *out, char *err, size_t errlen)
{
    char word[NB_NETRULE_TEXT + 2];
    out->n = 0;
    while (*text) {
        size_t n;
        text += strspn(text, " \t,");
        n = strcspn(text, " \t,");
        if (n == 0)
            break;
        if (n >= sizeof(word)) {
            snprintf(err, errlen, "\"%.40s...\" is not an IPv4 address or CIDR", text);
            return -1;
        }
        memcpy(word, text, n);
        word[n] = '\0';
        if (nb_netrules_add(out, word, err, errlen) != 0)
            return -1;
        text += n;
    }
    return 0;
}

int nb_netrule_within(const struct nb_netrule *a, const struct nb_netrule *outer)
{
    if (a->prefix < outer->prefix)
        return 0;
    if ((a->addr & nb_netrule_mask(outer->prefix)) != outer->addr)
        return 0;
    return outer->port == 0 || outer->port == a->port;
}

int nb_netrule_overlaps(const struct nb_netrule *a, const struct nb_netrule *b)
{
    unsigned p = a->prefix < b->prefix ? a->prefix : b->prefix;
    if ((a->addr & nb_netrule_mask(p)) != (b->addr & nb_netrule_mask(p)))
        return 0;
    return a->port == 0 || b->port == 0 || a->port == b->port;
}

void nb_netrule_format(const struct nb_netrule *r, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%u.%u.%u.%u/%u", r->addr >> 24, (r->addr >> 16) & 255,
                     (r->addr >> 8) & 255, r->addr & 255, r->prefix);
    if (r->port && n > 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, ":%u", r->port);
}
