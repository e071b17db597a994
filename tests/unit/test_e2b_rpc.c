/*
 * test_e2b_rpc.c - the Connect-RPC codec of the E2B facade
 * (src/fcgi/e2b/e2b_rpc.c): the 5-byte envelope both ways, the end-of-stream
 * message with and without an error, unary error bodies, Connect's codes
 * and their HTTP statuses, which paths are procedures, which content type
 * is a stream's, and the Connect-Timeout-Ms header.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "e2b_rpc.h"

static void test_envelope_is_flags_then_big_endian_length(void **state)
{
    struct nb_buf b;
    const unsigned char want[] = {0x00, 0x00, 0x00, 0x00, 0x02, '{', '}'};
    (void)state;
    nb_buf_init(&b, 1 << 20);
    assert_int_equal(nb_rpc_envelope(&b, 0, "{}", 2), NB_OK);
    assert_int_equal(b.len, sizeof(want));
    assert_memory_equal(b.data, want, sizeof(want));
    nb_buf_reset(&b);

    /* a length past 255 and 65535 sets the higher bytes */
    char big[70000];
    memset(big, 'x', sizeof(big));
    assert_int_equal(nb_rpc_envelope(&b, NB_RPC_FLAG_END, big, sizeof(big)), NB_OK);
    assert_int_equal((unsigned char)b.data[0], 0x02);
    assert_int_equal((unsigned char)b.data[1], 0x00);
    assert_int_equal((unsigned char)b.data[2], 0x01);
    assert_int_equal((unsigned char)b.data[3], 0x11);
    assert_int_equal((unsigned char)b.data[4], 0x70);
    assert_int_equal(b.len, 5 + sizeof(big));
    nb_buf_free(&b);

    /* past the buffer's cap: nothing appended */
    nb_buf_init(&b, 6);
    assert_int_equal(nb_rpc_envelope(&b, 0, "{}", 2), NB_ETOOBIG);
    assert_int_equal(b.len, 0);
    nb_buf_free(&b);
}

static void test_unenvelope_takes_exactly_one_plain_envelope(void **state)
{
    const char *msg = NULL;
    size_t len = 0;
    const unsigned char ok[] = {0,   0,   0,   0,   13,  '{', '"', 'p', 'i',
                                'd', '"', ':', ' ', '4', '2', '}', ' ', ' '};
    const unsigned char empty[] = {0, 0, 0, 0, 0};
    const unsigned char zipped[] = {1, 0, 0, 0, 2, 'x', 'y'};
    const unsigned char end[] = {2, 0, 0, 0, 2, '{', '}'};
    const unsigned char lying[] = {0, 0, 0, 0, 9, '{', '}'};
    (void)state;

    assert_int_equal(nb_rpc_unenvelope(ok, sizeof(ok), &msg, &len), 0);
    assert_int_equal(len, 13);
    assert_memory_equal(msg, "{\"pid\": 42}  ", 13);
    assert_int_equal(nb_rpc_unenvelope(empty, sizeof(empty), &msg, &len), 0);
    assert_int_equal(len, 0);
    /* short, a length that does not match, trailing bytes, other flags */
    assert_int_equal(nb_rpc_unenvelope(ok, 4, &msg, &len), -1);
    assert_int_equal(nb_rpc_unenvelope(lying, sizeof(lying), &msg, &len), -1);
    assert_int_equal(nb_rpc_unenvelope(ok, sizeof(ok) - 1, &msg, &len), -1);
    assert_int_equal(nb_rpc_unenvelope(end, sizeof(end), &msg, &len), -1);
    assert_int_equal(nb_rpc_unenvelope(zipped, sizeof(zipped), &msg, &len), -2);
}

static void test_end_stream_carries_the_error(void **state)
{
    struct nb_buf b;
    const char *want = "{\"error\":{\"code\":\"not_found\",\"message\":\"no \\\"pid\\\" 7\"}}";
    (void)state;
    nb_buf_init(&b, 4096);
    assert_int_equal(nb_rpc_end_stream(&b, NULL, NULL), NB_OK);
    assert_int_equal(b.len, 7);
    assert_memory_equal(b.data, "\x02\x00\x00\x00\x02{}", 7);
    nb_buf_reset(&b);
    assert_int_equal(nb_rpc_end_stream(&b, "not_found", "no \"pid\" 7"), NB_OK);
    assert_int_equal((unsigned char)b.data[0], NB_RPC_FLAG_END);
    assert_int_equal((size_t)(unsigned char)b.data[4], strlen(want));
    assert_int_equal(b.len, 5 + strlen(want));
    assert_memory_equal(b.data + 5, want, strlen(want));
    nb_buf_free(&b);
}

static void test_unary_error_body(void **state)
{
    struct nb_buf b;
    (void)state;
    nb_buf_init(&b, 4096);
    assert_int_equal(nb_rpc_error_body(&b, "unauthenticated", "wrong token"), NB_OK);
    assert_string_equal(b.data, "{\"code\":\"unauthenticated\",\"message\":\"wrong token\"}");
    nb_buf_free(&b);
}

static void test_codes_from_domain_codes_and_statuses(void **state)
{
    (void)state;
    /* a code that is Connect's already is kept, whatever the status */
    assert_string_equal(nb_rpc_code(NB_E_TIMEOUT, "deadline_exceeded"), "deadline_exceeded");
    assert_string_equal(nb_rpc_code(NB_E_UPSTREAM, "unavailable"), "unavailable");
    assert_string_equal(nb_rpc_code(NB_E_INVALID, "unimplemented"), "unimplemented");
    /* nanobox's own codes map by their domain code */
    assert_string_equal(nb_rpc_code(NB_E_INVALID, "bad_field"), "invalid_argument");
    assert_string_equal(nb_rpc_code(NB_E_UNAUTHENTICATED, "unauthorized"), "unauthenticated");
    assert_string_equal(nb_rpc_code(NB_E_FORBIDDEN, "forbidden"), "permission_denied");
    assert_string_equal(nb_rpc_code(NB_E_NOT_FOUND, "no_process"), "not_found");
    assert_string_equal(nb_rpc_code(NB_E_CONFLICT, "exists"), "already_exists");
    assert_string_equal(nb_rpc_code(NB_E_CONFLICT, "not_running"), "failed_precondition");
    assert_string_equal(nb_rpc_code(NB_E_TOO_LARGE, "too_large"), "resource_exhausted");
    assert_string_equal(nb_rpc_code(NB_E_LIMIT, "busy"), "resource_exhausted");
    assert_string_equal(nb_rpc_code(NB_E_UNSUPPORTED, "not_implemented"), "unimplemented");
    assert_string_equal(nb_rpc_code(NB_E_METHOD, "method_not_allowed"), "unimplemented");
    assert_string_equal(nb_rpc_code(NB_E_AGENT_DOWN, "agent_unavailable"), "unavailable");
    assert_string_equal(nb_rpc_code(NB_E_INTERNAL, "internal"), "internal");
    assert_string_equal(nb_rpc_code(NB_E_INTERNAL, NULL), "internal");
    /* Connect's table of HTTP statuses */
    assert_int_equal(nb_rpc_http_status("not_found"), 404);
    assert_int_equal(nb_rpc_http_status("invalid_argument"), 400);
    assert_int_equal(nb_rpc_http_status("unauthenticated"), 401);
    assert_int_equal(nb_rpc_http_status("deadline_exceeded"), 504);
    assert_int_equal(nb_rpc_http_status("already_exists"), 409);
    assert_int_equal(nb_rpc_http_status("unavailable"), 503);
    assert_int_equal(nb_rpc_http_status("unimplemented"), 501);
    assert_int_equal(nb_rpc_http_status("resource_exhausted"), 429);
    assert_int_equal(nb_rpc_http_status("no_such_code"), 500);
    assert_true(nb_rpc_code_valid("canceled"));
    assert_false(nb_rpc_code_valid("cancelled"));
    assert_false(nb_rpc_code_valid(NULL));
}

static void test_procedures_and_stream_content_type(void **state)
{
    (void)state;
    assert_true(nb_rpc_is_procedure("/process.Process/Start"));
    assert_true(nb_rpc_is_procedure("/filesystem.Filesystem/ListDir"));
    assert_false(nb_rpc_is_procedure("/health"));
    assert_false(nb_rpc_is_procedure("/files"));
    assert_false(nb_rpc_is_procedure("/contexts/abc"));
    assert_false(nb_rpc_is_procedure("/process.Process/"));
    assert_false(nb_rpc_is_procedure("/process.Process/Start/x"));
    assert_false(nb_rpc_is_procedure("/.Process/Start"));
    assert_false(nb_rpc_is_procedure("/Process./Start"));
    assert_false(nb_rpc_is_procedure("process.Process/Start"));
    assert_false(nb_rpc_is_procedure(NULL));

    assert_true(nb_rpc_is_stream_ctype("application/connect+json"));
    assert_true(nb_rpc_is_stream_ctype("Application/Connect+JSON; charset=utf-8"));
    assert_false(nb_rpc_is_stream_ctype("application/json"));
    assert_false(nb_rpc_is_stream_ctype("application/connect+jsonx"));
    assert_false(nb_rpc_is_stream_ctype("application/connect+proto"));
    assert_false(nb_rpc_is_stream_ctype(NULL));
}

static void test_timeout_header(void **state)
{
    int64_t ms = -1;
    (void)state;
    assert_int_equal(nb_rpc_timeout_ms(NULL, &ms), 0);
    assert_int_equal(ms, 0);
    assert_int_equal(nb_rpc_timeout_ms("60000", &ms), 0);
    assert_int_equal(ms, 60000);
    assert_int_equal(nb_rpc_timeout_ms("9999999999", &ms), 0);
    assert_int_equal(ms, 9999999999LL);
    assert_int_equal(nb_rpc_timeout_ms("99999999999", &ms), -1); /* 11 digits */
    assert_int_equal(nb_rpc_timeout_ms("", &ms), -1);
    assert_int_equal(nb_rpc_timeout_ms("-5", &ms), -1);
    assert_int_equal(nb_rpc_timeout_ms("5s", &ms), -1);
    assert_int_equal(nb_rpc_timeout_ms(" 5", &ms), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_envelope_is_flags_then_big_endian_length),
        cmocka_unit_test(test_unenvelope_takes_exactly_one_plain_envelope),
        cmocka_unit_test(test_end_stream_carries_the_error),
        cmocka_unit_test(test_unary_error_body),
        cmocka_unit_test(test_codes_from_domain_codes_and_statuses),
        cmocka_unit_test(test_procedures_and_stream_content_type),
        cmocka_unit_test(test_timeout_header),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
