/*
 * test_json.c - request validation and safe output: depth caps, field and
 * type checks, UTF-8 repair of arbitrary bytes.
 */
#include "config.h"

#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "buf.h"
#include "json.h"

static int parse(const char *text, yajl_val *out, char *err, size_t errlen)
{
    return nb_json_parse(text, strlen(text), 32, out, err, errlen);
}

static void test_empty_body_is_absent(void **state)
{
    char err[128];
    yajl_val v = (yajl_val)1;
    (void)state;
    assert_int_equal(parse("  \n", &v, err, sizeof(err)), 0);
    assert_null(v);
}

static void test_malformed_json_is_refused_with_message(void **state)
{
    char err[256];
    yajl_val v;
    (void)state;
    assert_int_equal(parse("{\"a\":", &v, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "invalid JSON"));
    assert_null(strchr(err, '\n'));
}

static void test_deep_nesting_is_refused_before_parsing(void **state)
{
    size_t depth = 10000;
    char *text = malloc(depth * 2 + 1);
    char err[256];
    yajl_val v;
    (void)state;
    memset(text, '[', depth);
    memset(text + depth, ']', depth);
    text[depth * 2] = '\0';
    assert_int_equal(nb_json_parse(text, depth * 2, 32, &v, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "deeper than 32"));
    free(text);
}

static void test_depth_ignores_brackets_in_strings(void **state)
{
    const char *t = "{\"a\":\"[[[[{{{{\\\"]]]\"}";
    (void)state;
    assert_int_equal(nb_json_depth(t, strlen(t)), 1);
    assert_int_equal(nb_json_depth("[[1],[2,[3]]]", 13), 3);
}

static void test_nul_byte_in_body_is_refused(void **state)
{
    char text[] = "{\"a\":1}\0{}";
    char err[128];
    yajl_val v;
    (void)state;
    assert_int_equal(nb_json_parse(text, sizeof(text) - 1, 32, &v, err, sizeof(err)), -1);
}

static void test_fields_accept_known_and_typed(void **state)
{
    char err[256];
    yajl_val v;
    struct nb_jfield f[] = {
        {"ttl", NB_JT_INT, NULL}, {"image", NB_JT_STRING, NULL}, {"cpus", NB_JT_NUMBER, NULL}};
    (void)state;
    assert_int_equal(parse("{\"ttl\":30,\"cpus\":0.25}", &v, err, sizeof(err)), 0);
    assert_int_equal(nb_json_fields(v, f, 3, err, sizeof(err)), 0);
    assert_int_equal(nb_json_int(f[0].val), 30);
    assert_null(f[1].val);
    assert_true(nb_json_double(f[2].val) == 0.25);
    yajl_tree_free(v);
}

/* A missing member (NULL) or one that is no number reads as 0, not a crash:
 * an MCP exec polled with a progress token reads pid and offsets so. */
static void test_numbers_of_missing_or_other_values_are_zero(void **state)
{
    char err[256];
    yajl_val v;
    (void)state;
    assert_int_equal(nb_json_int(NULL), 0);
    assert_true(nb_json_double(NULL) == 0);
    assert_int_equal(parse("{\"pid\":\"7\"}", &v, err, sizeof(err)), 0);
    assert_int_equal(nb_json_int(v->u.object.values[0]), 0);
    assert_true(nb_json_double(v->u.object.values[0]) == 0);
    yajl_tree_free(v);
}

static void test_fields_refuse_unknown_key(void **state)
{
    char err[256];
    yajl_val v;
    struct nb_jfield f[] = {{"ttl", NB_JT_INT, NULL}};
    (void)state;
    assert_int_equal(parse("{\"tll\":30}", &v, err, sizeof(err)), 0);
    assert_int_equal(nb_json_fields(v, f, 1, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "unknown field \"tll\""));
    yajl_tree_free(v);
}

static void test_no_dup_keys_at_any_depth(void **state)
{
    char err[256];
    yajl_val v;
    (void)state;
    assert_int_equal(
        parse("{\"a\":{\"x\":1},\"b\":[{\"x\":1,\"y\":2}],\"c\":{}}", &v, err, sizeof(err)), 0);
    assert_int_equal(nb_json_no_dup_keys(v, err, sizeof(err)), 0);
    yajl_tree_free(v);
    assert_int_equal(
        parse("{\"b\":1,\"a\":[{\"k\":{\"z\":1,\"y\":2,\"z\":3}}]}", &v, err, sizeof(err)), 0);
    assert_int_equal(nb_json_no_dup_keys(v, err, sizeof(err)), -1);
    assert_string_equal(err, "field \"z\" given twice");
    yajl_tree_free(v);
}

static void test_fields_refuse_wrong_type(void **state)
{
    char err[256];
    yajl_val v;
    struct nb_jfield f[] = {{"ttl", NB_JT_INT, NULL}};
    (void)state;
    assert_int_equal(parse("{\"ttl\":\"abc\"}", &v, err, sizeof(err)), 0);
    assert_int_equal(nb_json_fields(v, f, 1, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "must be an integer"));
    yajl_tree_free(v);
    assert_int_equal(parse("{\"ttl\":1.5}", &v, err, sizeof(err)), 0);
    assert_int_equal(nb_json_fields(v, f, 1, err, sizeof(err)), -1);
    yajl_tree_free(v);
    assert_int_equal(parse("{\"ttl\":30.0}", &v, err, sizeof(err)), 0);
    assert_int_equal(nb_json_fields(v, f, 1, err, sizeof(err)), 0);
    assert_int_equal(nb_json_int(f[0].val), 30);
    yajl_tree_free(v);
}

static void test_fields_refuse_duplicates_and_non_objects(void **state)
{
    char err[256];
    yajl_val v;
    struct nb_jfield f[] = {{"ttl", NB_JT_INT, NULL}};
    (void)state;
    assert_int_equal(parse("{\"ttl\":1,\"ttl\":2}", &v, err, sizeof(err)), 0);
    assert_int_equal(nb_json_fields(v, f, 1, err, sizeof(err)), -1);
    yajl_tree_free(v);
    assert_int_equal(parse("[1]", &v, err, sizeof(err)), 0);
    assert_int_equal(nb_json_fields(v, f, 1, err, sizeof(err)), -1);
    yajl_tree_free(v);
}

static char *gen_string(const char *s, size_t len)
{
    yajl_gen g = nb_json_gen();
    const unsigned char *buf;
    size_t n;
    char *out;
    nb_json_str(g, s, len);
    assert_int_equal(yajl_gen_get_buf(g, &buf, &n), yajl_gen_status_ok);
    out = malloc(n + 1);
    memcpy(out, buf, n);
    out[n] = '\0';
    yajl_gen_free(g);
    return out;
}

static void test_invalid_utf8_becomes_replacement_chars(void **state)
{
    char *out;
    yajl_val v;
    char err[128];
    (void)state;
    out = gen_string("\xff\xfe"
                     "abc",
                     5);
    assert_string_equal(out, "\"\xEF\xBF\xBD\xEF\xBF\xBD"
                             "abc\"");
    assert_int_equal(parse(out, &v, err, sizeof(err)), 0);
    yajl_tree_free(v);
    free(out);
}

static void test_valid_utf8_is_kept_and_truncated_sequence_repaired(void **state)
{
    char *out;
    (void)state;
    out = gen_string("h\xC3\xA9llo \xE2\x82\xAC", 10);
    assert_string_equal(out, "\"h\xC3\xA9llo \xE2\x82\xAC\"");
    free(out);
    out = gen_string("x\xE2\x82", 3); /* a euro sign cut by the output cap */
    assert_string_equal(out, "\"x\xEF\xBF\xBD\xEF\xBF\xBD\"");
    free(out);
    out = gen_string("\xED\xA0\x80", 3); /* a UTF-16 surrogate is not UTF-8 */
    assert_null(strstr(out, "\xED\xA0\x80"));
    free(out);
}

static void test_every_byte_value_gives_valid_json(void **state)
{
    char bytes[256];
    char *out;
    yajl_val v;
    char err[128];
    (void)state;
    for (int i = 0; i < 256; i++)
        bytes[i] = (char)i;
    out = gen_string(bytes, sizeof(bytes));
    assert_int_equal(parse(out, &v, err, sizeof(err)), 0);
    assert_true(YAJL_IS_STRING(v));
    yajl_tree_free(v);
    free(out);
}

static void test_tree_round_trip_keeps_numbers_exact(void **state)
{
    const char *t = "{\"a\":[1,2.5,\"x\",true,null],\"b\":{\"c\":123456789012345678}}";
    char err[128];
    yajl_val v;
    yajl_gen g = nb_json_gen();
    const unsigned char *buf;
    size_t n;
    (void)state;
    assert_int_equal(parse(t, &v, err, sizeof(err)), 0);
    nb_json_tree(g, v);
    yajl_gen_get_buf(g, &buf, &n);
    assert_int_equal(n, strlen(t));
    assert_memory_equal(buf, t, n);
    yajl_gen_free(g);
    yajl_tree_free(v);
}

static void test_escaped_nul_is_found_but_not_an_escaped_backslash(void **state)
{
    (void)state;
    assert_int_equal(nb_json_has_nul("{\"c\":\"a\\u0000b\"}", 16), 1);
    assert_int_equal(nb_json_has_nul("{\"c\":\"\\\\\\u0000\"}", 16), 1); /* \\ then \u0000 */
    assert_int_equal(nb_json_has_nul("{\"c\":\"\\\\u0000\"}", 15), 0);   /* \\ then text */
    assert_int_equal(nb_json_has_nul("{\"c\":\"u0000\"}", 13), 0);
    assert_int_equal(nb_json_has_nul("\\u0000", 5), 0); /* past len */
    assert_int_equal(nb_json_has_nul(NULL, 0), 0);
}

static void test_integer_fields_refuse_inf_and_huge_without_overflow(void **state)
{
    const char *bodies[] = {"{\"ttl\":1e309}", "{\"ttl\":-1e309}", "{\"ttl\":1e300}",
                            "{\"ttl\":9223372036854775808}"};
    (void)state;
    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        struct nb_jfield f[] = {{"ttl", NB_JT_INT, NULL}, {"x", NB_JT_NUMBER, NULL}};
        char err[256];
        yajl_val v;
        assert_int_equal(parse(bodies[i], &v, err, sizeof(err)), 0);
        assert_int_equal(nb_json_fields(v, f, 2, err, sizeof(err)), -1);
        assert_non_null(strstr(err, "integer"));
        yajl_tree_free(v);
    }
}

static void test_invalid_utf8_that_yajl_lets_through_is_refused(void **state)
{
    const char *bodies[] = {
        "{\"a\":\"\xed\xa0\x80\"}",     /* a UTF-8-encoded surrogate */
        "{\"a\":\"\xf4\x90\x80\x80\"}", /* past U+10FFFF */
        "{\"a\":\"\xc0\x80\"}",         /* overlong NUL */
        "{\"a\":\"\xff\"}",
    };
    (void)state;
    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        char err[256];
        yajl_val v;
        assert_int_equal(parse(bodies[i], &v, err, sizeof(err)), -1);
        assert_non_null(strstr(err, "UTF-8"));
        assert_null(v);
    }
}

static void test_unpaired_surrogate_escapes_are_refused(void **state)
{
    const char *bad[] = {
        "{\"a\":\"\\udc00\"}", /* a low half alone */
        "{\"a\":\"\\ud800\"}", /* a high half alone (yajl: "?") */
        "{\"a\":\"\\ud800x\"}",
        "{\"a\":\"\\uD800\\u0041\"}", /* high + not a low (yajl: pairs them anyway) */
        "{\"a\":\"\\ud800\\ud800\"}",
        "{\"a\":\"x\\\\\\udfff\"}", /* an escaped backslash, then a low half */
        "{\"a\":\"\\ud800",         /* cut short */
    };
    const char *good[] = {
        "{\"a\":\"\\ud83d\\ude00\"}", /* U+1F600, as a pair */
        "{\"a\":\"\\uD7FF\\uE000\"}", /* either side of the range */
        "{\"a\":\"\\\\udc00\"}",      /* an escaped backslash: the text \udc00 */
        "{\"a\":\"\\\\\",\"b\":1}",
    };
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char err[256];
        yajl_val v;
        assert_int_equal(parse(bad[i], &v, err, sizeof(err)), -1);
        if (i < sizeof(bad) / sizeof(bad[0]) - 1)
            assert_non_null(strstr(err, "surrogate"));
        assert_null(v);
    }
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        char err[256];
        yajl_val v;
        assert_int_equal(parse(good[i], &v, err, sizeof(err)), 0);
        yajl_tree_free(v);
    }
}

static void test_int_of_a_huge_number_saturates(void **state)
{
    char err[256];
    yajl_val v;
    (void)state;
    assert_int_equal(parse("[1e309,-1e309,2.5e19,42.0]", &v, err, sizeof(err)), 0);
    assert_true(nb_json_int(v->u.array.values[0]) == LLONG_MAX);
    assert_true(nb_json_int(v->u.array.values[1]) == LLONG_MIN);
    assert_true(nb_json_int(v->u.array.values[2]) == LLONG_MAX);
    assert_int_equal(nb_json_int(v->u.array.values[3]), 42);
    yajl_tree_free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_numbers_of_missing_or_other_values_are_zero),
        cmocka_unit_test(test_empty_body_is_absent),
        cmocka_unit_test(test_unpaired_surrogate_escapes_are_refused),
        cmocka_unit_test(test_malformed_json_is_refused_with_message),
        cmocka_unit_test(test_deep_nesting_is_refused_before_parsing),
        cmocka_unit_test(test_depth_ignores_brackets_in_strings),
        cmocka_unit_test(test_nul_byte_in_body_is_refused),
        cmocka_unit_test(test_fields_accept_known_and_typed),
        cmocka_unit_test(test_fields_refuse_unknown_key),
        cmocka_unit_test(test_fields_refuse_wrong_type),
        cmocka_unit_test(test_fields_refuse_duplicates_and_non_objects),
        cmocka_unit_test(test_invalid_utf8_becomes_replacement_chars),
        cmocka_unit_test(test_valid_utf8_is_kept_and_truncated_sequence_repaired),
        cmocka_unit_test(test_every_byte_value_gives_valid_json),
        cmocka_unit_test(test_tree_round_trip_keeps_numbers_exact),
        cmocka_unit_test(test_escaped_nul_is_found_but_not_an_escaped_backslash),
        cmocka_unit_test(test_integer_fields_refuse_inf_and_huge_without_overflow),
        cmocka_unit_test(test_int_of_a_huge_number_saturates),
        cmocka_unit_test(test_invalid_utf8_that_yajl_lets_through_is_refused),
        cmocka_unit_test(test_no_dup_keys_at_any_depth),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
