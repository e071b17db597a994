/*
 * fuzz_json.c - libFuzzer harness over the one JSON helper (json.c), which
 * every request body goes through: nb_json_parse with its depth cap,
 * nb_json_fields on a fixed field table (exec's), nb_json_has_nul, and the
 * generator side (nb_json_tree, nb_json_str, nb_utf8_repair) that must
 * never emit invalid UTF-8, whatever bytes it is given.
 *
 * Input: a request body. Checks:
 * - a parse that succeeds was given strictly valid UTF-8 and gives a tree
 *   no deeper than the cap; one that fails says why on one line;
 * - fields found have a type their table entry allows;
 * - an escaped NUL that yajl decodes into a string or key is always seen
 *   by nb_json_has_nul (the handlers' guard against silent truncation);
 * - the tree written back out is valid UTF-8 JSON that parses again to the
 *   same text (a fixed point);
 * - the raw input written as one string (nb_json_str) or repaired
 *   (nb_utf8_repair) is valid UTF-8, and unchanged when it already was.
 * Anything else aborts (a finding).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_parse.h>

#include "json.h"

#define MAX_DEPTH 32 /* max_json_depth's default */

/* RFC 3629 UTF-8, written independently of json.c's. */
static int utf8_valid(const unsigned char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        unsigned c = s[i], need, min, cp;
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xC0 && c < 0xE0) {
            need = 1;
            min = 0x80;
            cp = c & 0x1F;
        } else if (c >= 0xE0 && c < 0xF0) {
            need = 2;
            min = 0x800;
            cp = c & 0x0F;
        } else if (c >= 0xF0 && c < 0xF8) {
            need = 3;
            min = 0x10000;
            cp = c & 0x07;
        } else
            return 0;
        if (i + need >= len)
            return 0; /* cut short */
        for (unsigned k = 1; k <= need; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return 0;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += need + 1;
    }
    return 1;
}

static int tree_depth(yajl_val v)
{
    int d = 0;
    if (v == NULL)
        return 0;
    if (YAJL_IS_OBJECT(v)) {
        for (size_t i = 0; i < v->u.object.len; i++) {
            int c = tree_depth(v->u.object.values[i]);
            if (c > d)
                d = c;
        }
        return d + 1;
    }
    if (YAJL_IS_ARRAY(v)) {
        for (size_t i = 0; i < v->u.array.len; i++) {
            int c = tree_depth(v->u.array.values[i]);
            if (c > d)
                d = c;
        }
        return d + 1;
    }
    return 0;
}

/* The event parser sees each string with its length: a decoded NUL shows. */
static int saw_nul;

static int on_string(void *ctx, const unsigned char *s, size_t len)
{
    (void)ctx;
    if (memchr(s, '\0', len) != NULL)
        saw_nul = 1;
    return 1;
}

static const yajl_callbacks nul_finder = {
    NULL, NULL, NULL, NULL, NULL, on_string, NULL, on_string, NULL, NULL, NULL,
};

static void check_nul_guard(const char *text, size_t len)
{
    yajl_handle h = yajl_alloc(&nul_finder, NULL, NULL);
    saw_nul = 0;
    if (yajl_parse(h, (const unsigned char *)text, len) == yajl_status_ok &&
        yajl_complete_parse(h) == yajl_status_ok && saw_nul && !nb_json_has_nul(text, len))
        abort();
    yajl_free(h);
}

/* The tree as text; aborts unless the generator was happy and it is UTF-8. */
static char *regenerate(yajl_val v, size_t *len)
{
    yajl_gen g = nb_json_gen();
    const unsigned char *buf;
    char *out;
    nb_json_tree(g, v);
    if (yajl_gen_get_buf(g, &buf, len) != yajl_gen_status_ok || *len == 0)
        abort();
    if (!utf8_valid(buf, *len))
        abort();
    out = malloc(*len + 1);
    if (out == NULL)
        abort();
    memcpy(out, buf, *len);
    out[*len] = '\0';
    yajl_gen_free(g);
    return out;
}

static void check_fields(yajl_val v)
{
    struct nb_jfield f[] = {
        {"command", NB_JT_STRING, NULL},
        {"timeout", NB_JT_NUMBER, NULL},
        {"cwd", NB_JT_STRING, NULL},
        {"env", NB_JT_OBJECT, NULL},
        {"stream", NB_JT_BOOL, NULL},
        {"ttl", NB_JT_INT, NULL},
        {"sandboxport", NB_JT_INT | NB_JT_STRING, NULL},
        {"opt", NB_JT_ARRAY | NB_JT_NULL, NULL},
    };
    size_t n = sizeof(f) / sizeof(f[0]);
    char err[256];

    err[0] = '\0';
    if (nb_json_fields(v, f, n, err, sizeof(err)) != 0) {
        if (v == NULL || err[0] == '\0')
            abort();
        return;
    }
    if (v != NULL && !YAJL_IS_OBJECT(v))
        abort();
    for (size_t i = 0; i < n; i++) {
        yajl_val x = f[i].val;
        if (x == NULL)
            continue;
        if ((YAJL_IS_STRING(x) && !(f[i].types & NB_JT_STRING)) ||
            (YAJL_IS_NUMBER(x) && !(f[i].types & (NB_JT_INT | NB_JT_NUMBER))) ||
            ((YAJL_IS_TRUE(x) || YAJL_IS_FALSE(x)) && !(f[i].types & NB_JT_BOOL)) ||
            (YAJL_IS_OBJECT(x) && !(f[i].types & NB_JT_OBJECT)) ||
            (YAJL_IS_ARRAY(x) && !(f[i].types & NB_JT_ARRAY)) || YAJL_IS_NULL(x))
            abort();
        if (f[i].types == NB_JT_INT && !YAJL_IS_INTEGER(x)) {
            double d = nb_json_double(x);
            if (d != (double)nb_json_int(x))
                abort(); /* an "integer" that is not one */
        }
    }
}

static void check_strings(const char *data, size_t size)
{
    yajl_gen g = nb_json_gen();
    const unsigned char *buf;
    size_t len, rlen;
    char *fixed;
    yajl_val back;
    char err[256];

    yajl_gen_map_open(g);
    nb_json_cstr(g, "data");
    nb_json_str(g, data, size);
    yajl_gen_map_close(g);
    if (yajl_gen_get_buf(g, &buf, &len) != yajl_gen_status_ok || !utf8_valid(buf, len))
        abort();
    {
        char *text = malloc(len + 1);
        if (text == NULL)
            abort();
        memcpy(text, buf, len);
        text[len] = '\0';
        if (nb_json_parse(text, len, MAX_DEPTH, &back, err, sizeof(err)) != 0 || back == NULL ||
            !YAJL_IS_OBJECT(back))
            abort();
        yajl_tree_free(back);
        free(text);
    }
    yajl_gen_free(g);

    fixed = nb_utf8_repair(data, size, &rlen);
    if (!utf8_valid((const unsigned char *)fixed, rlen) || fixed[rlen] != '\0' || rlen > size * 3)
        abort();
    if (utf8_valid((const unsigned char *)data, size) &&
        (rlen != size || (size > 0 && memcmp(fixed, data, size) != 0)))
        abort();
    free(fixed);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    char err[256];
    yajl_val v = NULL;
    int rc;

    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0'; /* what nb_json_parse requires (nb_buf holds it so) */

    err[0] = '\0';
    rc = nb_json_parse(text, size, MAX_DEPTH, &v, err, sizeof(err));
    if (rc != 0) {
        if (v != NULL || err[0] == '\0' || strchr(err, '\n') != NULL)
            abort();
    } else if (v != NULL) {
        size_t len1, len2;
        char *once, *twice;
        yajl_val again = NULL;
        if (tree_depth(v) > MAX_DEPTH)
            abort();
        if (!utf8_valid(data, size))
            abort(); /* accepted text is UTF-8, strictly (no surrogates, nothing past U+10FFFF) */
        check_fields(v);
        check_nul_guard(text, size);
        once = regenerate(v, &len1);
        if (nb_json_parse(once, len1, MAX_DEPTH, &again, err, sizeof(err)) != 0 || again == NULL)
            abort();
        twice = regenerate(again, &len2);
        if (len1 != len2 || memcmp(once, twice, len1) != 0)
            abort();
        yajl_tree_free(again);
        free(once);
        free(twice);
        yajl_tree_free(v);
    } else {
        check_fields(NULL);
    }
    check_strings((const char *)data, size);
    free(text);
    return 0;
}
