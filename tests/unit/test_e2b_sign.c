/*
 * test_e2b_sign.c - E2B's signed file URLs (src/fcgi/e2b/e2b_sign.c): the
 * signature against what the SDK's own getSignature (npm e2b 2.45.0 and
 * 2.51.0) made for the same input, with and without a user, a path and an
 * expiration; the expiration's parsing as envd's; the comparison.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "e2b_sign.h"

#define TOKEN_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" /* 64 */

static void sign_is(const char *path, const char *op, const char *user, int has_exp, int64_t exp,
                    const char *want)
{
    char out[E2B_SIGNATURE_LEN + 1];
    assert_int_equal(e2b_sign(path, strlen(path), op, user, TOKEN_A, has_exp, exp, out), 0);
    assert_string_equal(out, want);
    assert_int_equal(strlen(out), E2B_SIGNATURE_LEN);
}

static void test_signature_is_the_sdks(void **state)
{
    (void)state;
    /* getSignature({path, operation, user, envdAccessToken: 'a' x 64}) */
    sign_is("data/x.txt", E2B_SIGN_READ, "", 0, 0,
            "v1_UBCqOWbkFuXptOPfnYXWhqsxUQOTqsoDKgH2lGXfI1k");
    sign_is("/home/user/a b.txt", E2B_SIGN_WRITE, "user", 0, 0,
            "v1_6Vj/bbkWtfte3q8Vwz0PpVqgIb3nDMBsI1ndyo6jiMs");
    sign_is("", E2B_SIGN_WRITE, "root", 0, 0, "v1_DYw51YC9i+71QsvJnqZLa9vR9CZibNRPR9YtsM4aFVk");
    /* expirationInSeconds 0 at Date.now() = 1700000000 s */
    sign_is("data/x.txt", E2B_SIGN_READ, "", 1, 1700000000,
            "v1_QTQoT6kH7hdpeQwlv7dVYgVWTP6Zj4QlIv8/T7r62m8");
}

static void test_every_part_changes_it(void **state)
{
    char base[E2B_SIGNATURE_LEN + 1], other[E2B_SIGNATURE_LEN + 1];
    (void)state;
    assert_int_equal(e2b_sign("a", 1, "read", "", TOKEN_A, 1, 5, base), 0);
    assert_int_equal(e2b_sign("b", 1, "read", "", TOKEN_A, 1, 5, other), 0);
    assert_string_not_equal(base, other);
    assert_int_equal(e2b_sign("a", 1, "write", "", TOKEN_A, 1, 5, other), 0);
    assert_string_not_equal(base, other);
    assert_int_equal(e2b_sign("a", 1, "read", "user", TOKEN_A, 1, 5, other), 0);
    assert_string_not_equal(base, other);
    assert_int_equal(e2b_sign("a", 1, "read", "", TOKEN_A "b", 1, 5, other), 0);
    assert_string_not_equal(base, other);
    assert_int_equal(e2b_sign("a", 1, "read", "", TOKEN_A, 1, 6, other), 0);
    assert_string_not_equal(base, other);
    assert_int_equal(e2b_sign("a", 1, "read", "", TOKEN_A, 0, 5, other), 0);
    assert_string_not_equal(base, other);
    /* the path's bytes, a NUL among them, all count */
    assert_int_equal(e2b_sign("a\0b", 3, "read", "", TOKEN_A, 1, 5, other), 0);
    assert_string_not_equal(base, other);
}

static void test_expiration_is_a_decimal_int64(void **state)
{
    int64_t v = 0;
    (void)state;
    assert_int_equal(e2b_sign_expiration("1700000000", &v), 0);
    assert_true(v == 1700000000);
    assert_int_equal(e2b_sign_expiration("-5", &v), 0);
    assert_true(v == -5);
    assert_int_equal(e2b_sign_expiration("+07", &v), 0);
    assert_true(v == 7);
    assert_int_equal(e2b_sign_expiration("9223372036854775807", &v), 0);
    const char *bad[] = {
        "", "-", "+", " 5", "5 ", "5x", "0x10", "1e9", "1.5", "9223372036854775808", "--5"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(e2b_sign_expiration(bad[i], &v), -1);
    assert_int_equal(e2b_sign_expiration(NULL, &v), -1);
}

static void test_equal_is_exact(void **state)
{
    (void)state;
    assert_true(e2b_sign_equal("v1_abc", "v1_abc"));
    assert_false(e2b_sign_equal("v1_ab", "v1_abc"));
    assert_false(e2b_sign_equal("v1_abcd", "v1_abc"));
    assert_false(e2b_sign_equal("v1_abd", "v1_abc"));
    assert_false(e2b_sign_equal(NULL, "v1_abc"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_signature_is_the_sdks),
        cmocka_unit_test(test_every_part_changes_it),
        cmocka_unit_test(test_expiration_is_a_decimal_int64),
        cmocka_unit_test(test_equal_is_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
