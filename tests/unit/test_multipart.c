/*
 * test_multipart.c - the streaming multipart/form-data parser
 * (src/fcgi/http/multipart.c): the boundary of a Content-Type, parts and their
 * bytes exact whatever size the reads come in (a delimiter split across
 * reads, data that looks like a delimiter's start, parts larger than the
 * window), a preamble and an epilogue, and malformed bodies refused.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "multipart.h"

/* A body handed over step bytes at a time (the last read may be shorter). */
struct src {
    const char *data;
    size_t len, off, step;
};

static int src_read(void *arg, void *buf, size_t n)
{
    struct src *s = arg;
    size_t k = s->len - s->off;
    if (k > n)
        k = n;
    if (k > s->step)
        k = s->step;
    memcpy(buf, s->data + s->off, k);
    s->off += k;
    return (int)k;
}

/* Parse body in reads of step bytes; the parts' filenames and data, "|"-joined, into out. */
static int parse(const char *body, size_t len, size_t step, char *out, size_t outlen,
                 struct nb_mp *m)
{
    struct src s = {body, len, 0, step};
    struct nb_mp_part p;
    size_t used = 0;
    int k;

    nb_mp_init(m, "XyZ", src_read, &s);
    out[0] = '\0';
    while ((k = nb_mp_next(m, &p)) == 1) {
        char buf[7];
        int n;
        used += (size_t)snprintf(out + used, outlen - used, "%s%s:%s=", used ? "|" : "", p.name,
                                 p.filename);
        /* odd read sizes: pieces end anywhere */
        while ((n = nb_mp_read(m, buf, sizeof(buf))) > 0) {
            memcpy(out + used, buf, (size_t)n);
            used += (size_t)n;
            out[used] = '\0';
        }
        if (n < 0)
            return -1;
    }
    return k;
}

static void test_boundary_from_content_type(void **state)
{
    char b[NB_MP_BOUNDARY_MAX + 1];
    (void)state;
    assert_int_equal(
        nb_mp_boundary("multipart/form-data; boundary=----formdata-undici-0123", b, sizeof(b)), 0);
    assert_string_equal(b, "----formdata-undici-0123");
    assert_int_equal(
        nb_mp_boundary("Multipart/Form-Data;charset=utf-8; BOUNDARY=\"a b;c\"", b, sizeof(b)), 0);
    assert_string_equal(b, "a b;c");
    assert_int_equal(nb_mp_boundary("multipart/form-data; boundary=x; charset=utf-8", b, sizeof(b)),
                     0);
    assert_string_equal(b, "x");
    assert_int_equal(nb_mp_boundary("application/octet-stream", b, sizeof(b)), -1);
    assert_int_equal(nb_mp_boundary("multipart/form-data", b, sizeof(b)), -1);
    assert_int_equal(nb_mp_boundary("multipart/form-data; boundary=", b, sizeof(b)), -1);
    assert_int_equal(nb_mp_boundary("multipart/form-data; boundary=\"open", b, sizeof(b)), -1);
    assert_int_equal(nb_mp_boundary("multipart/form-datax; boundary=a", b, sizeof(b)), -1);
    assert_int_equal(nb_mp_boundary(NULL, b, sizeof(b)), -1);
    char longb[120] = "multipart/form-data; boundary=";
    memset(longb + strlen(longb), 'a', 71);
    assert_int_equal(nb_mp_boundary(longb, b, sizeof(b)), -1);
}

static const char two_parts[] =
    "preamble to skip\r\n"
    "--XyZ\r\n"
    "Content-Disposition: form-data; name=\"file\"; filename=\"dir/a.txt\"\r\n"
    "Content-Type: application/octet-stream\r\n"
    "\r\n"
    "hello\r\n--XyY-not-it\r\n-- and \r\n--Xy\r\n"
    "\r\n--XyZ  \r\n"
    "content-disposition: form-data; filename=\"q\\\"uote\"; name=file\r\n"
    "\r\n"
    "\r\n--XyZ--\r\nepilogue";

static void test_parts_are_exact_in_any_read_size(void **state)
{
    static struct nb_mp m;
    char out[512];
    (void)state;
    for (size_t step = 1; step <= sizeof(two_parts); step++) {
        assert_int_equal(parse(two_parts, sizeof(two_parts) - 1, step, out, sizeof(out), &m), 0);
        /* the first part's data holds near-delimiters; the second is empty */
        assert_string_equal(out, "file:dir/a.txt=hello\r\n--XyY-not-it\r\n-- and \r\n--Xy\r\n"
                                 "|file:q\"uote=");
    }
}

static void test_a_part_larger_than_the_window(void **state)
{
    static struct nb_mp m;
    struct nb_mp_part p;
    size_t size = 3 * NB_MP_WINDOW + 17, got = 0, head;
    char *body = malloc(size + 256), buf[5000];
    struct src s;
    int n;
    (void)state;
    head = (size_t)sprintf(body, "--XyZ\r\nContent-Disposition: form-data; name=file; "
                                 "filename=big\r\n\r\n");
    for (size_t i = 0; i < size; i++)
        body[head + i] = (char)(i % 251 == 0 ? '\r' : i % 253 == 0 ? '\n' : 'a' + i % 26);
    memcpy(body + head + size, "\r\n--XyZ--", 9);
    s = (struct src){body, head + size + 9, 0, 65536};
    nb_mp_init(&m, "XyZ", src_read, &s);
    assert_int_equal(nb_mp_next(&m, &p), 1);
    assert_string_equal(p.filename, "big");
    while ((n = nb_mp_read(&m, buf, sizeof(buf))) > 0) {
        assert_memory_equal(buf, body + head + got, (size_t)n);
        got += (size_t)n;
    }
    assert_int_equal(n, 0);
    assert_int_equal(got, size);
    assert_int_equal(nb_mp_next(&m, &p), 0);
    free(body);
}

static void test_skipping_an_unread_part(void **state)
{
    static struct nb_mp m;
    static const char body[] = "--XyZ\r\nContent-Disposition: form-data; name=other\r\n\r\n"
                               "not read\r\n--XyZ\r\n"
                               "Content-Disposition: form-data; name=file; filename=b\r\n\r\n"
                               "B\r\n--XyZ--\r\n";
    struct src s = {body, sizeof(body) - 1, 0, 3};
    struct nb_mp_part p;
    char buf[8];
    (void)state;
    nb_mp_init(&m, "XyZ", src_read, &s);
    assert_int_equal(nb_mp_next(&m, &p), 1);
    assert_string_equal(p.name, "other");
    assert_false(p.has_filename);
    assert_int_equal(nb_mp_next(&m, &p), 1);
    assert_string_equal(p.name, "file");
    assert_true(p.has_filename && p.filename_len == 1);
    assert_int_equal(nb_mp_read(&m, buf, sizeof(buf)), 1);
    assert_int_equal(buf[0], 'B');
    assert_int_equal(nb_mp_read(&m, buf, sizeof(buf)), 0);
    assert_int_equal(nb_mp_next(&m, &p), 0);
    assert_int_equal(nb_mp_next(&m, &p), 0);
}

static void test_malformed_bodies(void **state)
{
    static struct nb_mp m;
    static const char *const bad[] = {
        "",                                                             /* no delimiter */
        "no delimiter at all",                                          /* no delimiter */
        "--XyZ\r\n\r\ndata\r\n--XyZ--",                                 /* no headers */
        "--XyZ\r\nContent-Type: text/plain\r\n\r\nx\r\n--XyZ--",        /* no disposition */
        "--XyZ\r\nContent-Disposition: attachment\r\n\r\nx\r\n--XyZ--", /* not form-data */
        "--XyZ\r\nContent-Disposition: form-data; name=\"file\r\n\r\nx\r\n--XyZ--",
        "--XyZ\r\nContent-Disposition: form-data; name=file\r\n\r\nno end", /* cut short */
        "--XyZ\r\nContent-Disposition: form-data; name=file",               /* headers cut short */
        "--XyZjunk\r\nContent-Disposition: form-data; name=file\r\n\r\nx\r\n--XyZ--",
        "--XyZ", /* ends after it */
    };
    char out[256];
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        for (size_t step = 1; step < 64; step += 13) {
            assert_int_equal(parse(bad[i], strlen(bad[i]), step, out, sizeof(out), &m), -1);
            assert_true(m.err[0] != '\0');
        }
    }
}

static void test_headers_too_long(void **state)
{
    static struct nb_mp m;
    size_t n = NB_MP_HEADERS_MAX + 100;
    char *body = malloc(n + 64), out[64];
    (void)state;
    strcpy(body, "--XyZ\r\nX-Long: ");
    memset(body + strlen(body), 'a', n);
    body[15 + n] = '\0';
    strcat(body, "\r\n\r\n");
    assert_int_equal(parse(body, strlen(body), 4096, out, sizeof(out), &m), -1);
    assert_string_equal(m.err, "a part's headers are too long");
    free(body);
}

static int failing_read(void *arg, void *buf, size_t n)
{
    (void)arg, (void)buf, (void)n;
    return -1;
}

static void test_a_read_error(void **state)
{
    static struct nb_mp m;
    struct nb_mp_part p;
    (void)state;
    nb_mp_init(&m, "XyZ", failing_read, NULL);
    assert_int_equal(nb_mp_next(&m, &p), -1);
    assert_string_equal(m.err, "the body could not be read");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_boundary_from_content_type),
        cmocka_unit_test(test_parts_are_exact_in_any_read_size),
        cmocka_unit_test(test_a_part_larger_than_the_window),
        cmocka_unit_test(test_skipping_an_unread_part),
        cmocka_unit_test(test_malformed_bodies),
        cmocka_unit_test(test_headers_too_long),
        cmocka_unit_test(test_a_read_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
