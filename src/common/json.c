/*
 * json.c - see json.h.
 */
#include "config.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "json.h"

int nb_json_depth(const char *text, size_t len)
{
    int depth = 0, max = 0, in_str = 0, esc = 0;
    for (size_t i = 0; i < len; i++) {
        char ch = text[i];
        if (in_str) {
            if (esc)
                esc = 0;
            else if (ch == '\\')
                esc = 1;
            else if (ch == '"')
                in_str = 0;
            continue;
        }
        switch (ch) {
        case '"':
            in_str = 1;
            break;
        case '{':
        case '[':
            if (++depth > max)
                max = depth;
            break;
        case '}':
        case ']':
            if (--depth < 0)
                return -1;
            break;
        default:
            break;
        }
    }
    return max;
}

static size_t utf8_seq(const unsigned char *s, size_t len);

/* The value of the escape "\uXXXX" at p (p[0] is the backslash), or -1. */
static long json_u_escape(const char *p, const char *end)
{
    long v = 0;

    if (end - p < 6 || p[0] != '\\' || p[1] != 'u')
        return -1;
    for (int i = 2; i < 6; i++) {
        int c = (unsigned char)p[i], d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/*
 * Walk the escapes of a JSON text: each backslash starts one (backslashes
 * only occur in JSON as escapes inside strings), stepped over whole. For
 * each "\uXXXX", *v is its value, and a high surrogate's pair is taken
 * with it (*lo: the \u escape that follows, -1 if none; stepped over
 * with it only when it is the low half). Returns the
 * offset of the next escape at or after *pos, or -1 at the end.
 */
static long json_next_u_escape(const char *text, size_t len, size_t *pos, long *v, long *lo)
{
    const char *end = text + len, *p;

    while (*pos < len && (p = memchr(text + *pos, '\\', len - *pos)) != NULL) {
        size_t at = (size_t)(p - text), step;
        *v = json_u_escape(p, end);
        *lo = -1;
        step = *v >= 0 ? 6 : 2;
        if (*v >= 0xD800 && *v <= 0xDBFF) {
            *lo = json_u_escape(p + 6, end);
            if (*lo >= 0xDC00 && *lo <= 0xDFFF)
                step = 12; /* the pair is one character */
        }
        *pos = at + step;
        if (*v >= 0)
            return (long)at;
    }
    return -1;
}

/*
 * The byte offset of a "\uD800"-"\uDFFF" escape that is not half of a
 * high + low pair, or -1. yajl turns a lone high surrogate into "?", pairs
 * a high one with whatever \u follows it, and writes a lone low one as
 * the invalid UTF-8 of a surrogate: each would hand a handler something
 * other than what the client sent.
 */
static long json_lone_surrogate(const char *text, size_t len)
{
    size_t pos = 0;
    long at, v, lo;

    while ((at = json_next_u_escape(text, len, &pos, &v, &lo)) >= 0) {
        if (v >= 0xD800 && v <= 0xDBFF && (lo < 0xDC00 || lo > 0xDFFF))
            return at;
        if (v >= 0xDC00 && v <= 0xDFFF)
            return at;
    }
    return -1;
}

int nb_json_parse(const char *text, size_t len, unsigned max_depth, yajl_val *out, char *err,
                  size_t errlen)
{
    char yerr[256];
    size_t i;
    long lone;
    int depth;

    *out = NULL;
    for (i = 0; i < len; i++)
        if (text[i] != ' ' && text[i] != '\t' && text[i] != '\r' && text[i] != '\n')
            break;
    if (i == len)
        return 0;
    if (memchr(text, '\0', len) != NULL) {
        snprintf(err, errlen, "invalid JSON: NUL byte in body");
        return -1;
    }
    /* yajl lets UTF-8-encoded surrogates and code points past U+10FFFF
     * through: JSON text is UTF-8 (RFC 8259), so check all of it strictly */
    for (i = 0; i < len;) {
        size_t n = utf8_seq((const unsigned char *)text + i, len - i);
        if (n == 0) {
            snprintf(err, errlen, "invalid JSON: invalid UTF-8 at byte %zu", i);
            return -1;
        }
        i += n;
    }
    if ((lone = json_lone_surrogate(text, len)) >= 0) {
        snprintf(err, errlen,
                 "invalid JSON: the \\u escape at byte %ld is half of a UTF-16 "
                 "surrogate pair (\\uD800-\\uDFFF must come as high + low)",
                 lone);
        return -1;
    }
    depth = nb_json_depth(text, len);
    if (depth > (int)max_depth) {
        snprintf(err, errlen, "invalid JSON: nested deeper than %u levels", max_depth);
        return -1;
    }
    yerr[0] = '\0';
    *out = yajl_tree_parse(text, yerr, sizeof(yerr));
    if (*out == NULL) {
        char *nl;
        /* yajl's message spans lines with a caret diagram: keep line one */
        if ((nl = strchr(yerr, '\n')) != NULL)
            *nl = '\0';
        snprintf(err, errlen, "invalid JSON: %s", yerr[0] ? yerr : "parse error");
        return -1;
    }
    return 0;
}

int nb_json_has_nul(const char *text, size_t len)
{
    size_t pos = 0;
    long v, lo;

    if (text == NULL)
        return 0;
    while (json_next_u_escape(text, len, &pos, &v, &lo) >= 0) {
        if (v == 0)
            return 1;
    }
    return 0;
}

static const char *type_name(unsigned types)
{
    if (types == NB_JT_STRING)
        return "a string";
    if (types == NB_JT_INT)
        return "an integer";
    if (types & NB_JT_NUMBER)
        return "a number";
    if (types == NB_JT_BOOL)
        return "true or false";
    if (types == NB_JT_OBJECT)
        return "an object";
    if (types == NB_JT_ARRAY)
        return "an array";
    if (types == (NB_JT_INT | NB_JT_STRING))
        return "an integer or a string";
    return "of another type";
}

static int type_ok(yajl_val v, unsigned types)
{
    if (YAJL_IS_STRING(v))
        return (types & NB_JT_STRING) != 0;
    if (YAJL_IS_INTEGER(v))
        return (types & (NB_JT_INT | NB_JT_NUMBER)) != 0;
    if (YAJL_IS_NUMBER(v)) {
        if (types & NB_JT_NUMBER)
            return 1;
        /* 30.0 is still an integer to a person; 1e400 is not */
        if (types & NB_JT_INT) {
            double d = YAJL_GET_DOUBLE(v);
            /* range first: converting inf, NaN or 1e300 to an integer is undefined */
            return d > -9e15 && d < 9e15 && d == (double)(long long)d;
        }
        return 0;
    }
    if (YAJL_IS_TRUE(v) || YAJL_IS_FALSE(v))
        return (types & NB_JT_BOOL) != 0;
    if (YAJL_IS_OBJECT(v))
        return (types & NB_JT_OBJECT) != 0;
    if (YAJL_IS_ARRAY(v))
        return (types & NB_JT_ARRAY) != 0;
    if (YAJL_IS_NULL(v))
        return (types & NB_JT_NULL) != 0;
    return 0;
}

int nb_json_fields(yajl_val obj, struct nb_jfield *fields, size_t n, char *err, size_t errlen)
{
    for (size_t j = 0; j < n; j++)
        fields[j].val = NULL;
    if (obj == NULL)
        return 0;
    if (!YAJL_IS_OBJECT(obj)) {
        snprintf(err, errlen, "the body must be a JSON object");
        return -1;
    }
    for (size_t i = 0; i < obj->u.object.len; i++) {
        const char *key = obj->u.object.keys[i];
        yajl_val v = obj->u.object.values[i];
        size_t j;
        for (j = 0; j < n; j++)
            if (!strcmp(key, fields[j].name))
                break;
        if (j == n) {
            snprintf(err, errlen, "unknown field \"%.64s\"", key);
            return -1;
        }
        if (fields[j].val != NULL) {
            snprintf(err, errlen, "field \"%s\" given twice", key);
            return -1;
        }
        if (!type_ok(v, fields[j].types)) {
            snprintf(err, errlen, "field \"%s\" must be %s", key, type_name(fields[j].types));
            return -1;
        }
        fields[j].val = YAJL_IS_NULL(v) ? NULL : v;
    }
    return 0;
}

static int key_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int nb_json_no_dup_keys(yajl_val v, char *err, size_t errlen)
{
    if (YAJL_IS_ARRAY(v)) {
        for (size_t i = 0; i < v->u.array.len; i++)
            if (nb_json_no_dup_keys(v->u.array.values[i], err, errlen) != 0)
                return -1;
        return 0;
    }
    if (!YAJL_IS_OBJECT(v) || v->u.object.len == 0)
        return 0;
    if (v->u.object.len > 1) {
        /* sorted copies of the keys: n log n, whatever a hostile body holds */
        const char **keys = nb_xmalloc(v->u.object.len * sizeof(*keys));
        int dup = 0;
        memcpy(keys, v->u.object.keys, v->u.object.len * sizeof(*keys));
        qsort(keys, v->u.object.len, sizeof(*keys), key_cmp);
        for (size_t i = 1; i < v->u.object.len && !dup; i++) {
            if (!strcmp(keys[i - 1], keys[i])) {
                snprintf(err, errlen, "field \"%.64s\" given twice", keys[i]);
                dup = 1;
            }
        }
        free(keys);
        if (dup)
            return -1;
    }
    for (size_t i = 0; i < v->u.object.len; i++)
        if (nb_json_no_dup_keys(v->u.object.values[i], err, errlen) != 0)
            return -1;
    return 0;
}

const char *nb_json_string(yajl_val v)
{
    return YAJL_IS_STRING(v) ? v->u.string : "";
}

long long nb_json_int(yajl_val v)
{
    double d;
    if (YAJL_IS_INTEGER(v))
        return YAJL_GET_INTEGER(v);
    if (!YAJL_IS_NUMBER(v)) /* missing or not a number (NULL included): 0 */
        return 0;
    /* saturate: converting a double out of range (1e309 is inf) is undefined */
    d = YAJL_GET_DOUBLE(v);
    if (!(d == d))
        return 0;
    if (d >= 9.2e18)
        return LLONG_MAX;
    if (d <= -9.2e18)
        return LLONG_MIN;
    return (long long)d;
}

double nb_json_double(yajl_val v)
{
    if (YAJL_IS_INTEGER(v))
        return (double)YAJL_GET_INTEGER(v);
    return YAJL_IS_NUMBER(v) ? YAJL_GET_DOUBLE(v) : 0;
}

yajl_gen nb_json_gen(void)
{
    yajl_gen g = yajl_gen_alloc(NULL);
    if (g == NULL)
        abort();
    yajl_gen_config(g, yajl_gen_validate_utf8, 1);
    return g;
}

char *nb_json_gen_take(yajl_gen g)
{
    const unsigned char *buf;
    size_t len;
    char *text;
    yajl_gen_get_buf(g, &buf, &len);
    text = nb_xmalloc(len + 1);
    memcpy(text, buf, len);
    text[len] = '\0';
    yajl_gen_free(g);
    return text;
}

/* Length of a valid UTF-8 sequence at s (RFC 3629), or 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t len)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        return (len >= 2 && (s[1] & 0xC0) == 0x80) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        if (len < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80)
            return 0;
        if (c == 0xE0 && s[1] < 0xA0)
            return 0; /* overlong */
        if (c == 0xED && s[1] > 0x9F)
            return 0; /* surrogates */
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (len < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80)
            return 0;
        if (c == 0xF0 && s[1] < 0x90)
            return 0; /* overlong */
        if (c == 0xF4 && s[1] > 0x8F)
            return 0; /* past U+10FFFF */
        return 4;
    }
    return 0;
}

char *nb_utf8_repair(const char *s, size_t len, size_t *outlen)
{
    const unsigned char *p = (const unsigned char *)s;
    char *out = nb_xmalloc(len * 3 + 1), *o = out;
    size_t i = 0;
    while (i < len) {
        size_t n = utf8_seq(p + i, len - i);
        if (n == 0) {
            memcpy(o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        } else {
            memcpy(o, p + i, n);
            o += n;
            i += n;
        }
    }
    *o = '\0';
    *outlen = (size_t)(o - out);
    return out;
}

void nb_json_str(yajl_gen g, const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    /* fast path: already valid */
    while (i < len) {
        size_t n = utf8_seq(p + i, len - i);
        if (n == 0)
            break;
        i += n;
    }
    if (i == len) {
        yajl_gen_string(g, p, len);
    } else {
        size_t n;
        char *fixed = nb_utf8_repair(s, len, &n);
        yajl_gen_string(g, (const unsigned char *)fixed, n);
        free(fixed);
    }
}

void nb_json_cstr(yajl_gen g, const char *s)
{
    nb_json_str(g, s, strlen(s));
}

void nb_json_kv_str(yajl_gen g, const char *key, const char *value)
{
    nb_json_cstr(g, key);
    nb_json_cstr(g, value);
}

void nb_json_kv_int(yajl_gen g, const char *key, long long value)
{
    nb_json_cstr(g, key);
    yajl_gen_integer(g, value);
}

void nb_json_kv_bool(yajl_gen g, const char *key, int value)
{
    nb_json_cstr(g, key);
    yajl_gen_bool(g, value);
}

void nb_json_kv_double(yajl_gen g, const char *key, double value)
{
    nb_json_cstr(g, key);
    yajl_gen_double(g, value);
}

void nb_json_tree(yajl_gen g, yajl_val v)
{
    if (v == NULL || YAJL_IS_NULL(v)) {
        yajl_gen_null(g);
    } else if (YAJL_IS_STRING(v)) {
        nb_json_cstr(g, nb_json_string(v));
    } else if (YAJL_IS_NUMBER(v)) {
        /* keep the number's own text: no float round trip */
        const char *t = YAJL_GET_NUMBER(v);
        yajl_gen_number(g, t, strlen(t));
    } else if (YAJL_IS_TRUE(v)) {
        yajl_gen_bool(g, 1);
    } else if (YAJL_IS_FALSE(v)) {
        yajl_gen_bool(g, 0);
    } else if (YAJL_IS_OBJECT(v)) {
        yajl_gen_map_open(g);
        for (size_t i = 0; i < v->u.object.len; i++) {
            nb_json_cstr(g, v->u.object.keys[i]);
            nb_json_tree(g, v->u.object.values[i]);
        }
        yajl_gen_map_close(g);
    } else if (YAJL_IS_ARRAY(v)) {
        yajl_gen_array_open(g);
        for (size_t i = 0; i < v->u.array.len; i++)
            nb_json_tree(g, v->u.array.values[i]);
        yajl_gen_array_close(g);
    }
}
