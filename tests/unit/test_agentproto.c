/*
 * test_agentproto.c - the agent protocol codec (src/common/agentproto.c)
 * both nanobox-init and the host parse untrusted bytes with: a frame is
 * found whatever the split, an announced body past the cap is refused
 * before any byte of it, fields never run past their body, and paths with
 * . or .. components, NUL bytes or no leading slash are refused.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agentproto.h"

/* Two frames back to back: 'o' with 300 bytes, then an empty 'x'. */
static size_t two_frames(unsigned char *out)
{
    size_t n = 0;

    nba_frame_hdr(out, 'o', 300);
    for (int i = 0; i < 300; i++)
        out[NBA_HDR + i] = (unsigned char)i;
    n = NBA_HDR + 300;
    nba_frame_hdr(out + n, 'x', 0);
    return n + NBA_HDR;
}

static void test_big_endian_round_trip(void **state)
{
    unsigned char b[8];

    nba_put_u32(b, 0x01020304u);
    assert_memory_equal(b, "\x01\x02\x03\x04", 4);
    assert_int_equal(nba_get_u32(b), 0x01020304u);
    nba_put_u64(b, 0x0102030405060708ull);
    assert_memory_equal(b, "\x01\x02\x03\x04\x05\x06\x07\x08", 8);
    assert_true(nba_get_u64(b) == 0x0102030405060708ull);
}

static void test_frame_peek_needs_every_byte_at_every_split(void **state)
{
    unsigned char buf[400];
    size_t total = two_frames(buf);
    uint8_t type;
    const unsigned char *body;
    uint32_t len;

    /* Every prefix shorter than the first frame is "need more". */
    for (size_t n = 0; n < NBA_HDR + 300; n++)
        assert_int_equal(nba_frame_peek(buf, n, NBA_MAX_BODY, &type, &body, &len), 0);
    /* From the exact end of the first frame on, the first frame comes out. */
    for (size_t n = NBA_HDR + 300; n <= total; n++) {
        assert_int_equal(nba_frame_peek(buf, n, NBA_MAX_BODY, &type, &body, &len), NBA_HDR + 300);
        assert_int_equal(type, 'o');
        assert_int_equal(len, 300);
        assert_ptr_equal(body, buf + NBA_HDR);
    }
    /* The second frame (empty body) after consuming the first. */
    assert_int_equal(
        nba_frame_peek(buf + NBA_HDR + 300, NBA_HDR - 1, NBA_MAX_BODY, &type, &body, &len), 0);
    assert_int_equal(nba_frame_peek(buf + NBA_HDR + 300, NBA_HDR, NBA_MAX_BODY, &type, &body, &len),
                     NBA_HDR);
    assert_int_equal(type, 'x');
    assert_int_equal(len, 0);
}

static void test_frame_peek_refuses_oversize_length_from_the_header_alone(void **state)
{
    unsigned char hdr[NBA_HDR];
    uint8_t type = 0;
    const unsigned char *body = NULL;
    uint32_t len = 7;

    nba_frame_hdr(hdr, 'X', NBA_MAX_BODY + 1);
    assert_int_equal(nba_frame_peek(hdr, sizeof(hdr), NBA_MAX_BODY, &type, &body, &len), -1);
    assert_int_equal(len, 7); /* untouched */
    nba_frame_hdr(hdr, 'X', 0xffffffffu);
    assert_int_equal(nba_frame_peek(hdr, sizeof(hdr), NBA_MAX_BODY, &type, &body, &len), -1);
    /* The cap is the caller's: 100 bytes allowed, 101 announced. */
    nba_frame_hdr(hdr, 'X', 101);
    assert_int_equal(nba_frame_peek(hdr, sizeof(hdr), 100, &type, &body, &len), -1);
    /* Exactly the cap is fine (needs more bytes). */
    nba_frame_hdr(hdr, 'X', NBA_MAX_BODY);
    assert_int_equal(nba_frame_peek(hdr, sizeof(hdr), NBA_MAX_BODY, &type, &body, &len), 0);
}

static void test_fields_iterate_in_order(void **state)
{
    unsigned char body[64];
    size_t n = 0;
    struct nba_fields it;
    uint8_t tag;
    const unsigned char *v;
    uint32_t len;

    n += nba_field_put(body + n, 'A', "echo", 4);
    n += nba_field_put(body + n, 'B', NULL, 0);
    n += nba_field_put(body + n, 'A', "hi", 2);
    nba_fields_init(&it, body, (uint32_t)n);
    assert_int_equal(nba_fields_next(&it, &tag, &v, &len), 1);
    assert_int_equal(tag, 'A');
    assert_int_equal(len, 4);
    assert_memory_equal(v, "echo", 4);
    assert_int_equal(nba_fields_next(&it, &tag, &v, &len), 1);
    assert_int_equal(tag, 'B');
    assert_int_equal(len, 0);
    assert_int_equal(nba_fields_next(&it, &tag, &v, &len), 1);
    assert_int_equal(tag, 'A');
    assert_memory_equal(v, "hi", 2);
    assert_int_equal(nba_fields_next(&it, &tag, &v, &len), 0);
    assert_int_equal(nba_fields_next(&it, &tag, &v, &len), 0);
}

static void test_empty_body_has_no_fields(void **state)
{
    struct nba_fields it;
    uint8_t tag;
    const unsigned char *v;
    uint32_t len;

    nba_fields_init(&it, (const unsigned char *)"", 0);
    assert_int_equal(nba_fields_next(&it, &tag, &v, &len), 0);
}

static void test_fields_truncated_anywhere_is_an_error(void **state)
{
    unsigned char body[64];
    size_t n = 0;

    n += nba_field_put(body + n, 'F', "/tmp/x", 6);
    n += nba_field_put(body + n, 'G', "/tmp/yy", 7);
    /* Cut the body at every offset inside the second field: the first
     * field still comes out, then -1 (never a read past the cut). */
    for (size_t cut = NBA_HDR + 6 + 1; cut < n; cut++) {
        struct nba_fields it;
        uint8_t tag;
        const unsigned char *v;
        uint32_t len;
        unsigned char *copy = malloc(cut); /* exact size: ASan sees any overread */
        memcpy(copy, body, cut);
        nba_fields_init(&it, copy, (uint32_t)cut);
        assert_int_equal(nba_fields_next(&it, &tag, &v, &len), 1);
        assert_int_equal(tag, 'F');
        assert_int_equal(nba_fields_next(&it, &tag, &v, &len), -1);
        free(copy);
    }
}

static void test_field_length_past_body_is_an_error(void **state)
{
    unsigned char body[NBA_HDR + 3];
    struct nba_fields it;
    uint8_t tag;
    const unsigned char *v;
    uint32_t len;

    nba_frame_hdr(body, 'D', 0xfffffffbu); /* would wrap a careless end check */
    nba_fields_init(&it, body, sizeof(body));
    assert_int_equal(nba_fields_next(&it, &tag, &v, &len), -1);
    nba_frame_hdr(body, 'D', 4);
    assert_int_equal(nba_fields_next(&it, &tag, &v, &len), -1);
    nba_frame_hdr(body, 'D', 3);
    nba_fields_init(&it, body, sizeof(body));
    assert_int_equal(nba_fields_next(&it, &tag, &v, &len), 1);
    assert_int_equal(len, 3);
}

static int path_ok(const char *s)
{
    return nba_path_ok(s, strlen(s));
}

static void test_path_accepts_absolute_clean_paths(void **state)
{
    assert_true(path_ok("/"));
    assert_true(path_ok("/a"));
    assert_true(path_ok("/a//b"));
    assert_true(path_ok("/workspace/src/main.c"));
    assert_true(path_ok("/a/b/"));
    assert_true(path_ok("/..a/b..c/.d/..."));
}

static void test_path_refuses_dot_components(void **state)
{
    assert_false(path_ok(".."));
    assert_false(path_ok("/.."));
    assert_false(path_ok("/a/../b"));
    assert_false(path_ok("/a/.."));
    assert_false(path_ok("/./x"));
    assert_false(path_ok("/x/."));
    assert_false(path_ok("/x/./"));
    assert_false(path_ok("//..//"));
}

static void test_path_refuses_relative_empty_and_nul(void **state)
{
    assert_false(path_ok("a/b"));
    assert_false(path_ok("workspace"));
    assert_false(nba_path_ok("", 0));
    assert_false(nba_path_ok("/a\0b", 4));
    assert_false(nba_path_ok("/ab\0", 4));
}

static void test_path_length_cap(void **state)
{
    char *p = malloc(NBA_MAX_PATH + 2);

    memset(p, 'a', NBA_MAX_PATH + 1);
    p[0] = '/';
    assert_true(nba_path_ok(p, NBA_MAX_PATH));
    assert_false(nba_path_ok(p, NBA_MAX_PATH + 1));
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_big_endian_round_trip),
        cmocka_unit_test(test_frame_peek_needs_every_byte_at_every_split),
        cmocka_unit_test(test_frame_peek_refuses_oversize_length_from_the_header_alone),
        cmocka_unit_test(test_fields_iterate_in_order),
        cmocka_unit_test(test_empty_body_has_no_fields),
        cmocka_unit_test(test_fields_truncated_anywhere_is_an_error),
        cmocka_unit_test(test_field_length_past_body_is_an_error),
        cmocka_unit_test(test_path_accepts_absolute_clean_paths),
        cmocka_unit_test(test_path_refuses_dot_components),
        cmocka_unit_test(test_path_refuses_relative_empty_and_nul),
        cmocka_unit_test(test_path_length_cap),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
