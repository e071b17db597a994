/*
 * test_mcp.c - the MCP core with a fake API backend: the HTTP calls each
 * tool makes, how answers become text (exec, file listings, binary files),
 * API errors as isError results, JSON-RPC errors for bad messages, and
 * tools/list's descriptions with and without the operator's config.
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

#include "buf.h"
#include "conf.h"
#include "json.h"
#include "mcp.h"

/* What the fake API saw, and what it answers. */
struct fake_api {
    char method[16];
    char path[1024];
    struct nb_buf body;
    char ctype[64];
    long status; /* answer */
    const char *answer;
    size_t answer_len; /* 0: strlen(answer) */
    int unreachable;
    int watched;     /* out: the last call came with a watch */
    int tick_stop;   /* out: a tick of the last call said stop (it then had no answer) */
    long long moved; /* >0: a watched call ticks with bytes: half of it, then all */
};

static int fake_call(void *ctx, const char *method, const char *path, const char *body,
                     size_t body_len, const char *content_type, long *status, struct nb_buf *answer,
                     const struct mcp_watch *watch)
{
    struct fake_api *f = ctx;

    snprintf(f->method, sizeof(f->method), "%s", method);
    snprintf(f->path, sizeof(f->path), "%s", path);
    nb_buf_reset(&f->body);
    if (body != NULL)
        nb_buf_append(&f->body, body, body_len);
    snprintf(f->ctype, sizeof(f->ctype), "%s", content_type ? content_type : "");
    f->watched = watch != NULL;
    f->tick_stop = 0;
    if (watch != NULL) { /* as a transport ticks while it waits */
        f->tick_stop = watch->tick(watch->arg, -1, -1) != 0;
        if (!f->tick_stop && f->moved > 0)
            f->tick_stop = watch->tick(watch->arg, f->moved / 2, f->moved) != 0 ||
                           watch->tick(watch->arg, f->moved / 2 + 1, f->moved) != 0 ||
                           watch->tick(watch->arg, f->moved, f->moved) != 0;
        if (f->tick_stop) {
            nb_buf_printf(answer, "error: cancelled (test)");
            return -1;
        }
    }
    if (f->unreachable) {
        nb_buf_printf(answer, "error: no answer (test)");
        return -1;
    }
    *status = f->status;
    nb_buf_append(answer, f->answer, f->answer_len ? f->answer_len : strlen(f->answer));
    return 0;
}

struct fixture {
    struct fake_api api;
    struct nb_conf conf; /* handed to the backend by setup_with_conf */
    struct mcp_backend be;
    struct mcp_session s;
    struct nb_buf out;
    yajl_val reply;
};

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof(*fx));
    nb_buf_init(&fx->api.body, 1u << 24);
    fx->be.call = fake_call;
    fx->be.ctx = &fx->api;
    mcp_session_init(&fx->s, &fx->be);
    nb_buf_init(&fx->out, MCP_MAX_REPLY);
    *state = fx;
    return 0;
}

/* As POST /mcp runs it: the backend knows the server's config, set apart
 * from every shipped default so a hard-coded number would show. */
static int setup_with_conf(void **state)
{
    struct fixture *fx;
    char err[256];

    setup(state);
    fx = *state;
    nb_conf_defaults(&fx->conf);
    assert_int_equal(nb_conf_set(&fx->conf, "default_ttl", "900", err, sizeof(err)), 0);
    assert_int_equal(nb_conf_set(&fx->conf, "max_ttl", "7200", err, sizeof(err)), 0);
    assert_int_equal(nb_conf_set(&fx->conf, "exec_timeout", "45", err, sizeof(err)), 0);
    assert_int_equal(nb_conf_set(&fx->conf, "exec_timeout_max", "120", err, sizeof(err)), 0);
    assert_int_equal(nb_conf_set(&fx->conf, "max_output", "2m", err, sizeof(err)), 0);
    assert_int_equal(nb_conf_set(&fx->conf, "memory", "512m", err, sizeof(err)), 0);
    assert_int_equal(nb_conf_set(&fx->conf, "cpus", "1.5", err, sizeof(err)), 0);
    assert_int_equal(nb_conf_set(&fx->conf, "pids", "64", err, sizeof(err)), 0);
    assert_int_equal(nb_conf_set(&fx->conf, "images", "py:3, nanobox:latest", err, sizeof(err)), 0);
    assert_int_equal(nb_conf_set(&fx->conf, "workspace", "/home/work", err, sizeof(err)), 0);
    assert_int_equal(nb_conf_set(&fx->conf, "allow_bridge", "yes", err, sizeof(err)), 0);
    assert_int_equal(nb_conf_set(&fx->conf, "max_port_duration", "300", err, sizeof(err)), 0);
    fx->be.conf = &fx->conf;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;
    yajl_tree_free(fx->reply);
    nb_buf_free(&fx->out);
    nb_buf_free(&fx->api.body);
    free(fx);
    return 0;
}

/* Send msg, parse the reply into fx->reply (NULL when none). */
static int send_msg(struct fixture *fx, const char *msg)
{
    char err[256];
    int rc;

    yajl_tree_free(fx->reply);
    fx->reply = NULL;
    nb_buf_reset(&fx->out);
    rc = mcp_handle(&fx->s, msg, strlen(msg), &fx->out);
    if (rc == MCP_REPLY)
        assert_int_equal(nb_json_parse(fx->out.data, fx->out.len, 64, &fx->reply, err, sizeof(err)),
                         0);
    return rc;
}

static yajl_val get(yajl_val v, const char *a, const char *b, const char *c)
{
    const char *p[] = {a, b, c, NULL};
    return yajl_tree_get(v, p, yajl_t_any);
}

static long long error_code(struct fixture *fx)
{
    yajl_val c = get(fx->reply, "error", "code", NULL);
    assert_non_null(c);
    return YAJL_GET_INTEGER(c);
}

/* tools/call name(args); returns the result's text, sets *is_error. */
static const char *call_tool(struct fixture *fx, const char *name, const char *args, int *is_error)
{
    char msg[8192];
    yajl_val text, err;

    snprintf(msg, sizeof(msg),
             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
             "\"params\":{\"name\":\"%s\",\"arguments\":%s}}",
             name, args);
    assert_int_equal(send_msg(fx, msg), MCP_REPLY);
    err = get(fx->reply, "result", "isError", NULL);
    assert_non_null(err);
    *is_error = YAJL_IS_TRUE(err);
    text = get(fx->reply, "result", "content", NULL);
    assert_non_null(text);
    text = text->u.array.values[0];
    return nb_json_string(get(text, "text", NULL, NULL));
}

#define SID "9d5ad481-3179-4bd9-9d2f-c00aae4a0279"

static void test_initialize_negotiates_the_version(void **state)
{
    struct fixture *fx = *state;

    send_msg(fx, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":"
                 "{\"protocolVersion\":\"2024-11-05\"}}");
    assert_string_equal(nb_json_string(get(fx->reply, "result", "protocolVersion", NULL)),
                        "2024-11-05");
    send_msg(fx, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"initialize\",\"params\":"
                 "{\"protocolVersion\":\"2030-01-01\"}}");
    assert_string_equal(nb_json_string(get(fx->reply, "result", "protocolVersion", NULL)),
                        MCP_VERSION_LATEST);
}

static void test_bad_messages_get_json_rpc_errors(void **state)
{
    struct fixture *fx = *state;

    send_msg(fx, "{oops");
    assert_int_equal(error_code(fx), MCP_PARSE_ERROR);
    send_msg(fx, "{\"jsonrpc\":\"2.0\",\"id\":1}");
    assert_int_equal(error_code(fx), MCP_INVALID_REQUEST);
    send_msg(fx, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"nope\"}");
    assert_int_equal(error_code(fx), MCP_METHOD_NOT_FOUND);
    send_msg(fx, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{}}");
    assert_int_equal(error_code(fx), MCP_INVALID_PARAMS);
    assert_int_equal(send_msg(fx, "{\"jsonrpc\":\"2.0\",\"method\":\"nope\"}"), MCP_NO_REPLY);
    assert_int_equal(send_msg(fx, "   "), MCP_NO_REPLY);
}

/* What HTTP needs to know of a message: its status code, and whether it starts a session. */
static void test_last_says_what_the_message_was(void **state)
{
    struct fixture *fx = *state;

    send_msg(fx, "{oops");
    assert_int_equal(fx->s.last, MCP_MSG_NOT_JSON);
    send_msg(fx, " \n ");
    assert_int_equal(fx->s.last, MCP_MSG_EMPTY);
    send_msg(fx, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}");
    assert_int_equal(fx->s.last, MCP_MSG_OTHER); /* refused: no session for it */
    send_msg(fx, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":"
                 "{\"protocolVersion\":\"2025-03-26\"}}");
    assert_int_equal(fx->s.last, MCP_MSG_INITIALIZE);
    send_msg(fx, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}");
    assert_int_equal(fx->s.last, MCP_MSG_OTHER);
}

static void test_exec_calls_the_api_and_formats_the_answer(void **state)
{
    struct fixture *fx = *state;
    int is_error;
    const char *text;

    fx->api.status = 200;
    fx->api.answer =
        "{\"output\":\"hi\\nboom\\n\",\"exit_code\":2,\"timed_out\":false,"
        "\"stdout\":\"hi\",\"stderr\":\"boom\\n\",\"truncated\":true,\"duration_ms\":5}";
    text = call_tool(fx, "sandbox_exec",
                     "{\"sandbox_id\":\"" SID "\",\"command\":\"echo hi\",\"timeout\":2.5}",
                     &is_error);
    assert_false(is_error);
    assert_string_equal(fx->api.method, "POST");
    assert_string_equal(fx->api.path, "/sandbox/" SID "/exec");
    assert_string_equal(fx->api.body.data, "{\"command\":\"echo hi\",\"timeout\":2.5}");
    assert_string_equal(text, "exit_code: 2\ntimed_out: false\ntruncated: true\n"
                              "--- stdout ---\nhi\n--- stderr ---\nboom\n");
    assert_null(get(fx->reply, "result", "structuredContent", "output"));
    assert_non_null(get(fx->reply, "result", "structuredContent", "duration_ms"));
}

static void test_api_error_is_an_error_result_with_its_message(void **state)
{
    struct fixture *fx = *state;
    int is_error;
    const char *text;

    fx->api.status = 404;
    fx->api.answer = "{\"error\":\"no sandbox " SID "\",\"code\":\"not_found\"}";
    text = call_tool(fx, "sandbox_destroy", "{\"sandbox_id\":\"" SID "\"}", &is_error);
    assert_true(is_error);
    assert_string_equal(fx->api.method, "DELETE");
    assert_string_equal(text, "error: no sandbox " SID " (code not_found, HTTP 404)");

    fx->api.unreachable = 1;
    text = call_tool(fx, "sandbox_list", "{}", &is_error);
    assert_true(is_error);
    assert_string_equal(text, "error: no answer (test)");
}

static void test_pause_and_resume_call_the_api(void **state)
{
    struct fixture *fx = *state;
    int is_error;
    const char *text;

    fx->api.status = 200;
    fx->api.answer = "{\"sandboxId\":\"" SID "\",\"state\":\"paused\",\"ttl_remaining\":590,"
                     "\"paused_at\":1700000000,\"pause_expires_at\":1700086400}";
    text = call_tool(fx, "sandbox_pause", "{\"sandbox_id\":\"" SID "\"}", &is_error);
    assert_false(is_error);
    assert_string_equal(fx->api.method, "POST");
    assert_string_equal(fx->api.path, "/sandbox/" SID "/pause");
    assert_non_null(strstr(text, "Sandbox " SID " is paused; ttl_remaining: 590s; destroyed if "
                                 "still paused at 2023-11-15"));
    assert_non_null(get(fx->reply, "result", "structuredContent", "pause_expires_at"));

    fx->api.answer = "{\"sandboxId\":\"" SID "\",\"state\":\"running\",\"ttl_remaining\":590}";
    text = call_tool(fx, "sandbox_resume", "{\"sandbox_id\":\"" SID "\"}", &is_error);
    assert_false(is_error);
    assert_string_equal(fx->api.path, "/sandbox/" SID "/resume");
    assert_string_equal(text, "Sandbox " SID " is running; ttl_remaining: 590s.");

    /* snapshot: the name passed on, the template answered */
    fx->api.status = 201;
    fx->api.answer = "{\"name\":\"keep\",\"status\":\"ready\",\"kind\":\"snapshot\","
                     "\"parent\":\"" SID "\"}";
    text = call_tool(fx, "sandbox_snapshot", "{\"sandbox_id\":\"" SID "\",\"name\":\"keep\"}",
                     &is_error);
    assert_false(is_error);
    assert_string_equal(fx->api.path, "/sandbox/" SID "/snapshot");
    assert_string_equal(fx->api.body.data, "{\"name\":\"keep\"}");
    assert_non_null(strstr(text, "as template \"keep\""));
    assert_non_null(get(fx->reply, "result", "structuredContent", "kind"));

    /* create passes auto_resume on, beside every other argument (the widest tool) */
    fx->api.status = 201;
    fx->api.answer = "{\"sandboxId\":\"" SID "\"}";
    call_tool(fx, "sandbox_create",
              "{\"image\":\"i\",\"ttl\":9,\"memory\":\"9m\",\"cpus\":1,\"pids\":9,"
              "\"network\":\"none\",\"env\":{},\"metadata\":{},\"auto_resume\":true}",
              &is_error);
    assert_false(is_error);
    assert_non_null(strstr(fx->api.body.data, "\"auto_resume\":true"));

    /* a paused sandbox's exec: the API's 409 as an error result */
    fx->api.status = 409;
    fx->api.answer = "{\"error\":\"sandbox " SID " is paused\",\"code\":\"paused\"}";
    text = call_tool(fx, "sandbox_exec", "{\"sandbox_id\":\"" SID "\",\"command\":\"true\"}",
                     &is_error);
    assert_true(is_error);
    assert_string_equal(text, "error: sandbox " SID " is paused (code paused, HTTP 409)");
}

static void test_write_file_puts_raw_bytes_decoding_base64(void **state)
{
    struct fixture *fx = *state;
    int is_error;
    const char *text;

    fx->api.status = 201;
    fx->api.answer = "{\"path\":\"/workspace/a b.bin\",\"size\":3}";
    text = call_tool(fx, "sandbox_write_file",
                     "{\"sandbox_id\":\"" SID "\",\"path\":\"a b.bin\",\"content\":\"AP8K\","
                     "\"encoding\":\"base64\"}",
                     &is_error);
    assert_false(is_error);
    assert_string_equal(fx->api.method, "PUT");
    assert_string_equal(fx->api.path, "/sandbox/" SID "/files?path=a%20b.bin");
    assert_string_equal(fx->api.ctype, "application/octet-stream");
    assert_int_equal(fx->api.body.len, 3);
    assert_memory_equal(fx->api.body.data, "\x00\xff\n", 3);
    assert_string_equal(text, "Wrote 3 bytes to /workspace/a b.bin.");

    text = call_tool(fx, "sandbox_write_file",
                     "{\"sandbox_id\":\"" SID "\",\"path\":\"e\",\"content\":\"\"}", &is_error);
    assert_false(is_error);
    assert_int_equal(fx->api.body.len, 0);
}

static void test_read_file_gives_text_or_base64(void **state)
{
    struct fixture *fx = *state;
    int is_error;
    const char *text;

    fx->api.status = 200;
    fx->api.answer = "héllo\n";
    text = call_tool(fx, "sandbox_read_file", "{\"sandbox_id\":\"" SID "\",\"path\":\"/x\"}",
                     &is_error);
    assert_false(is_error);
    assert_string_equal(fx->api.method, "GET");
    assert_string_equal(fx->api.path, "/sandbox/" SID "/files?path=/x");
    assert_string_equal(text, "héllo\n");

    fx->api.answer = "\x00\x01\x02\xff\xfe";
    fx->api.answer_len = 5;
    text = call_tool(fx, "sandbox_read_file", "{\"sandbox_id\":\"" SID "\",\"path\":\"/x\"}",
                     &is_error);
    assert_false(is_error);
    assert_non_null(strstr(text, "binary (5 bytes"));
    assert_non_null(strstr(text, "base64:\nAAEC//4="));
}

static void test_list_files_formats_the_entries(void **state)
{
    struct fixture *fx = *state;
    int is_error;
    const char *text;

    fx->api.status = 200;
    fx->api.answer =
        "{\"path\":\"/workspace\",\"entries\":["
        "{\"name\":\"src\",\"type\":\"dir\",\"size\":60,\"mode\":\"0755\",\"mtime\":0},"
        "{\"name\":\"a.py\",\"type\":\"file\",\"size\":1536,\"mode\":\"0644\",\"mtime\":86400}"
        "],\"truncated\":false}";
    text = call_tool(fx, "sandbox_list_files", "{\"sandbox_id\":\"" SID "\"}", &is_error);
    assert_false(is_error);
    assert_string_equal(fx->api.path, "/sandbox/" SID "/files?path=/workspace");
    assert_string_equal(text, "/workspace: 2 entries\n"
                              "type          size  mode  modified                 name\n"
                              "dir       60 bytes  0755  1970-01-01 00:00:00 UTC  src/\n"
                              "file       1.5 KiB  0644  1970-01-02 00:00:00 UTC  a.py\n");
}

static void test_bad_arguments_are_an_error_result_without_api_call(void **state)
{
    struct fixture *fx = *state;
    int is_error;
    const char *text;

    text =
        call_tool(fx, "sandbox_exec", "{\"sandbox_id\":\"" SID "\",\"comand\":\"x\"}", &is_error);
    assert_true(is_error);
    assert_non_null(strstr(text, "unknown field \"comand\""));
    assert_string_equal(fx->api.method, ""); /* no call made */
    text = call_tool(fx, "run_code", "{\"language\":\"perl\",\"code\":\"1\"}", &is_error);
    assert_true(is_error);
    assert_non_null(strstr(text, "must be one of python, sh, javascript, typescript, bash"));
    assert_string_equal(fx->api.method, "");
}

/* The content items of the last reply. */
static yajl_val content(struct fixture *fx)
{
    yajl_val c = get(fx->reply, "result", "content", NULL);
    assert_non_null(c);
    assert_true(YAJL_IS_ARRAY(c));
    return c;
}

static const char *item_str(yajl_val items, size_t i, const char *key)
{
    assert_true(i < items->u.array.len);
    return nb_json_string(get(items->u.array.values[i], key, NULL, NULL));
}

/* Without sandbox_id, run_code is POST /run as before; python when no language is given. */
static void test_run_code_without_sandbox_runs_once(void **state)
{
    struct fixture *fx = *state;
    int is_error;
    const char *text;

    fx->api.status = 200;
    fx->api.answer = "{\"exit_code\":0,\"timed_out\":false,\"truncated\":false,"
                     "\"stdout\":\"42\\n\",\"stderr\":\"\",\"duration_ms\":80}";
    text = call_tool(fx, "run_code",
                     "{\"language\":\"sh\",\"code\":\"echo 42\",\"timeout\":5,\"stdin\":\"x\"}",
                     &is_error);
    assert_false(is_error);
    assert_string_equal(fx->api.path, "/run");
    assert_string_equal(fx->api.body.data,
                        "{\"language\":\"sh\",\"code\":\"echo 42\",\"timeout\":5,\"stdin\":\"x\"}");
    assert_string_equal(text, "exit_code: 0\ntimed_out: false\ntruncated: false\n"
                              "--- stdout ---\n42\n--- stderr ---\n");
    call_tool(fx, "run_code", "{\"code\":\"print(1)\"}", &is_error);
    assert_string_equal(fx->api.body.data, "{\"language\":\"python\",\"code\":\"print(1)\"}");

    /* what only a session has is refused without one, before any call */
    fx->api.method[0] = '\0';
    text = call_tool(fx, "run_code", "{\"language\":\"javascript\",\"code\":\"1\"}", &is_error);
    assert_true(is_error);
    assert_non_null(strstr(text, "sandbox_id"));
    text = call_tool(fx, "run_code", "{\"context\":\"ctx-1\",\"code\":\"1\"}", &is_error);
    assert_true(is_error);
    assert_non_null(strstr(text, "sandbox_id"));
    assert_string_equal(fx->api.method, "");
}

/* With sandbox_id: POST /sandbox/{id}/code; output, results and images as content items. */
static void test_run_code_in_a_sandbox_returns_text_and_images(void **state)
{
    struct fixture *fx = *state;
    int is_error;
    const char *text;
    yajl_val items, st;

    fx->api.status = 200;
    fx->api.answer =
        "{\"context\":\"python\",\"language\":\"python\",\"stdout\":\"hi\\n\",\"stderr\":\"\","
        "\"results\":["
        "{\"is_main_result\":false,\"data\":{\"text/plain\":\"<Figure size 640x480 with 1 Axes>\","
        "\"image/png\":\"iVBORw0K\\nGgo=\\n\"}},"
        "{\"is_main_result\":false,\"data\":{\"text/html\":\"<b>bold</b>\"}},"
        "{\"is_main_result\":true,\"data\":{\"text/plain\":\"42\",\"text/html\":\"<i>42</i>\"}}],"
        "\"error\":null,\"execution_count\":3,\"status\":\"ok\",\"timed_out\":false,"
        "\"truncated\":false,\"kernel_restarted\":false,\"duration_ms\":12}";
    text =
        call_tool(fx, "run_code",
                  "{\"sandbox_id\":\"" SID "\",\"code\":\"x+1\",\"context\":\"ctx-0123456789ab\","
                  "\"timeout\":2.5}",
                  &is_error);
    assert_false(is_error);
    assert_string_equal(fx->api.method, "POST");
    assert_string_equal(fx->api.path, "/sandbox/" SID "/code");
    assert_string_equal(fx->api.body.data,
                        "{\"code\":\"x+1\",\"context\":\"ctx-0123456789ab\",\"timeout\":2.5}");
    assert_string_equal(text, "status: ok\ncontext: python\nlanguage: python\nexecution_count: 3\n"
                              "--- stdout ---\nhi\n"
                              "--- display ---\n<Figure size 640x480 with 1 Axes>\n");
    items = content(fx);
    assert_int_equal(items->u.array.len, 3);
    assert_string_equal(item_str(items, 1, "type"), "image");
    assert_string_equal(item_str(items, 1, "mimeType"), "image/png");
    assert_string_equal(item_str(items, 1, "data"), "iVBORw0KGgo="); /* line breaks gone */
    assert_string_equal(item_str(items, 2, "type"), "text");
    /* HTML only where there is no plain text, and labelled as HTML */
    assert_string_equal(item_str(items, 2, "text"), "--- display (text/html) ---\n<b>bold</b>\n"
                                                    "--- result ---\n42\n");
    /* structuredContent: the API's answer, without the image bytes the items carry */
    st = get(fx->reply, "result", "structuredContent", NULL);
    assert_non_null(st);
    assert_int_equal(YAJL_GET_INTEGER(get(st, "execution_count", NULL, NULL)), 3);
    assert_null(
        strstr(fx->out.data + (strstr(fx->out.data, "structuredContent") - fx->out.data), "iVBOR"));
    assert_non_null(strstr(fx->out.data, "<Figure size 640x480 with 1 Axes>"));

    /* "sh" in a session is its bash; a language with no context is sent as given */
    call_tool(fx, "run_code", "{\"sandbox_id\":\"" SID "\",\"code\":\"ls\",\"language\":\"sh\"}",
              &is_error);
    assert_string_equal(fx->api.body.data, "{\"code\":\"ls\",\"language\":\"bash\"}");
    /* stdin is a one-off run's */
    fx->api.method[0] = '\0';
    text =
        call_tool(fx, "run_code",
                  "{\"sandbox_id\":\"" SID "\",\"code\":\"input()\",\"stdin\":\"x\"}", &is_error);
    assert_true(is_error);
    assert_non_null(strstr(text, "stdin"));
    assert_string_equal(fx->api.method, "");
}

/* An exception is an error result with its traceback; output before it is kept. */
static void test_run_code_error_is_an_error_result_with_the_traceback(void **state)
{
    struct fixture *fx = *state;
    int is_error;
    const char *text;

    fx->api.status = 200;
    fx->api.answer = "{\"context\":\"python\",\"language\":\"python\",\"stdout\":\"before\","
                     "\"stderr\":\"\",\"results\":[],\"error\":{\"name\":\"ZeroDivisionError\","
                     "\"value\":\"division by zero\",\"traceback\":\"Traceback...\\n1/0\"},"
                     "\"execution_count\":4,\"status\":\"error\",\"timed_out\":false,"
                     "\"truncated\":true,\"kernel_restarted\":true,\"duration_ms\":3}";
    text = call_tool(fx, "run_code", "{\"sandbox_id\":\"" SID "\",\"code\":\"1/0\"}", &is_error);
    assert_true(is_error);
    assert_non_null(strstr(text, "status: error\n"));
    assert_non_null(strstr(text, "truncated: true"));
    assert_non_null(strstr(text, "kernel_restarted: true"));
    assert_non_null(strstr(text, "--- stdout ---\nbefore\n"));
    assert_non_null(strstr(text, "--- error ---\nZeroDivisionError: division by zero\n"
                                 "Traceback...\n1/0\n"));

    /* nothing printed at all says so */
    fx->api.answer = "{\"stdout\":\"\",\"stderr\":\"\",\"results\":[],\"error\":null,"
                     "\"status\":\"ok\"}";
    text = call_tool(fx, "run_code", "{\"sandbox_id\":\"" SID "\",\"code\":\"x=1\"}", &is_error);
    assert_false(is_error);
    assert_string_equal(text, "status: ok\n(no output)\n");

    /* the API's refusal, with what to do about it */
    fx->api.status = 409;
    fx->api.answer = "{\"error\":\"the image has no Jupyter kernel\",\"code\":\"no_kernel\"}";
    text = call_tool(fx, "run_code", "{\"sandbox_id\":\"" SID "\",\"code\":\"x\"}", &is_error);
    assert_true(is_error);
    assert_non_null(strstr(text, "(code no_kernel, HTTP 409)"));
    assert_non_null(strstr(text, "nanobox-python:latest"));
    assert_int_equal(content(fx)->u.array.len, 1);
}

/* tools/list's reply as one string, and the description of a tool or of one of its arguments. */
static const char *list_tools(struct fixture *fx)
{
    assert_int_equal(send_msg(fx, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}"),
                     MCP_REPLY);
    assert_null(strstr(fx->out.data, "${")); /* every template filled in */
    return fx->out.data;
}

static const char *description(struct fixture *fx, const char *tool, const char *argname)
{
    yajl_val list = get(fx->reply, "result", "tools", NULL);

    assert_non_null(list);
    for (size_t i = 0; i < list->u.array.len; i++) {
        yajl_val t = list->u.array.values[i];
        if (strcmp(nb_json_string(get(t, "name", NULL, NULL)), tool) != 0)
            continue;
        if (argname == NULL)
            return nb_json_string(get(t, "description", NULL, NULL));
        t = get(t, "inputSchema", "properties", argname);
        assert_non_null(t);
        return nb_json_string(get(t, "description", NULL, NULL));
    }
    fail_msg("no tool %s in tools/list", tool);
    return NULL;
}

static void test_descriptions_quote_the_servers_config(void **state)
{
    struct fixture *fx = *state;

    list_tools(fx);
    assert_non_null(strstr(description(fx, "sandbox_create", "ttl"),
                           "(default: 900 seconds (15 minutes); at most 7200 seconds (2 hours))"));
    assert_non_null(strstr(description(fx, "sandbox_create", NULL),
                           "keeps its files in /home/work between calls until sandbox_destroy "
                           "or until its ttl (default: 900 seconds (15 minutes)) runs out"));
    assert_non_null(strstr(description(fx, "sandbox_create", "image"),
                           "(py:3, nanobox:latest; default: py:3)"));
    assert_non_null(
        strstr(description(fx, "sandbox_create", "memory"), "(default and maximum: 512 MiB)"));
    assert_non_null(
        strstr(description(fx, "sandbox_create", "cpus"), "(default and maximum: 1.5)"));
    assert_non_null(strstr(description(fx, "sandbox_create", "pids"), "(default and maximum: 64)"));
    assert_non_null(strstr(description(fx, "sandbox_create", "network"),
                           "outbound network (this server allows it)"));
    assert_non_null(
        strstr(description(fx, "sandbox_exec", "timeout"),
               "(default: 45 seconds; at least 0.001, at most 120 seconds (2 minutes))"));
    assert_non_null(
        strstr(description(fx, "run_code", "timeout"),
               "(default: 45 seconds; at least 0.001, at most 120 seconds (2 minutes))"));
    assert_non_null(strstr(description(fx, "sandbox_exec", NULL), "capped at 2 MiB"));
    assert_non_null(strstr(description(fx, "sandbox_pause", NULL),
                           "paused longer than 86400 seconds (1 day) is destroyed"));
    assert_non_null(strstr(description(fx, "run_code", NULL), "(capped at 2 MiB)"));
    assert_non_null(strstr(description(fx, "sandbox_exec", "cwd"), "(default: /home/work)"));
    assert_non_null(
        strstr(description(fx, "sandbox_read_file", "path"), "relative to /home/work."));
    assert_non_null(strstr(description(fx, "sandbox_open_port", "duration"),
                           "(default: 300 seconds (5 minutes); at most 300 seconds (5 minutes)"));
    /* no shipped default slips through */
    assert_null(strstr(fx->out.data, "1800"));
    assert_null(strstr(fx->out.data, "/workspace"));
    assert_null(strstr(fx->out.data, "1 MiB"));

    send_msg(fx, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"initialize\",\"params\":"
                 "{\"protocolVersion\":\"2025-06-18\"}}");
    assert_non_null(strstr(nb_json_string(get(fx->reply, "result", "instructions", NULL)),
                           "Files live in /home/work and persist"));
}

/* The stdio front cannot read a remote server's config: no number it might get wrong. */
static void test_descriptions_without_config_name_the_settings(void **state)
{
    struct fixture *fx = *state;
    const char *all = list_tools(fx);

    assert_non_null(strstr(description(fx, "sandbox_create", "ttl"),
                           "(default: the server's default_ttl setting; at most the server's "
                           "max_ttl setting)"));
    assert_non_null(strstr(description(fx, "sandbox_exec", "timeout"),
                           "(default: the server's exec_timeout setting; at least 0.001, at most "
                           "the server's exec_timeout_max setting)"));
    assert_non_null(
        strstr(description(fx, "sandbox_exec", NULL), "capped at the server's max_output setting"));
    assert_non_null(strstr(description(fx, "sandbox_create", "network"),
                           "outbound network (if the server allows it)"));
    assert_non_null(strstr(description(fx, "sandbox_list_files", "path"),
                           "relative to the workspace directory (default: /workspace)"));
    assert_null(strstr(all, "1800"));
    assert_null(strstr(all, "300 seconds"));
}

/* A missing argument's error carries its description, filled in the same way. */
static void test_missing_argument_error_fills_in_its_description(void **state)
{
    struct fixture *fx = *state;
    int is_error;
    const char *text;

    text = call_tool(fx, "sandbox_read_file", "{\"sandbox_id\":\"" SID "\"}", &is_error);
    assert_true(is_error);
    assert_string_equal(text, "error: sandbox_read_file needs the argument \"path\": File to "
                              "read: absolute, or relative to /home/work.");
}

/* The config's workspace and port cap reach the calls, not only the text. */
static void test_config_sets_the_defaults_the_tools_send(void **state)
{
    struct fixture *fx = *state;
    int is_error;

    fx->api.status = 200;
    fx->api.answer = "{\"path\":\"/home/work\",\"entries\":[],\"truncated\":false}";
    call_tool(fx, "sandbox_list_files", "{\"sandbox_id\":\"" SID "\"}", &is_error);
    assert_false(is_error);
    assert_string_equal(fx->api.path, "/sandbox/" SID "/files?path=/home/work");

    fx->api.answer = "{\"url\":\"u\",\"host\":\"h\",\"hostport\":20000,\"sandboxport\":80}";
    call_tool(fx, "sandbox_open_port", "{\"sandbox_id\":\"" SID "\",\"port\":80}", &is_error);
    assert_false(is_error);
    assert_string_equal(fx->api.body.data, "{\"sandboxport\":80,\"duration\":300}");
}

/* libcurl's escaping, '/' kept: what the API's query parser decodes. */
/* Refused as the REST side refuses them (nb_json_fields): yajl keeps one silently. */
static void test_duplicate_keys_are_an_invalid_request(void **state)
{
    struct fixture *fx = *state;

    send_msg(fx, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\",\"method\":\"tools/list\"}");
    assert_int_equal(error_code(fx), MCP_INVALID_REQUEST);
    assert_non_null(strstr(fx->out.data, "field \\\"method\\\" given twice"));
    assert_int_equal(YAJL_GET_INTEGER(get(fx->reply, "id", NULL, NULL)), 4);
    send_msg(fx, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":"
                 "\"sandbox_destroy\",\"arguments\":{\"sandbox_id\":\"a\",\"sandbox_id\":\"" SID
                 "\"}}}");
    assert_int_equal(error_code(fx), MCP_INVALID_REQUEST);
    assert_string_equal(fx->api.method, ""); /* no API call */
    send_msg(fx, "{\"jsonrpc\":\"2.0\",\"id\":6,\"id\":7,\"method\":\"ping\"}");
    assert_int_equal(error_code(fx), MCP_INVALID_REQUEST);
    assert_true(YAJL_IS_NULL(get(fx->reply, "id", NULL, NULL))); /* which id would it be? */
    send_msg(fx,
             "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"ping\",\"params\":{\"a\":{},\"b\":{}}}");
    assert_non_null(get(fx->reply, "result", NULL, NULL)); /* same keys in different objects */
}

static int progress_sent;
static char progress_msg[1024];

static int fake_notify(void *ctx, const char *msg, size_t len)
{
    (void)ctx;
    progress_sent++;
    snprintf(progress_msg, sizeof(progress_msg), "%.*s", (int)len, msg);
    return 0;
}

/* With a progressToken, sandbox_exec starts the command in the background and polls it. */
static void test_exec_with_a_progress_token_is_watched(void **state)
{
    struct fixture *fx = *state;
    yajl_val st;

    fx->be.notify = fake_notify;
    fx->api.status = 200; /* one answer for the start, the poll and the forgetting */
    fx->api.answer = "{\"pid\":5,\"running\":false,\"exit_code\":3,\"stdout\":\"hi\\n\","
                     "\"stderr\":\"e\\n\",\"stdout_offset\":0,\"stderr_offset\":0,"
                     "\"stdout_next\":3,\"stderr_next\":2}";
    send_msg(fx, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
                 "\"sandbox_exec\",\"_meta\":{\"progressToken\":\"t\"},\"arguments\":{"
                 "\"sandbox_id\":\"" SID "\",\"command\":\"x\"}}}");
    assert_string_equal(
        nb_json_string(
            get(fx->reply, "result", "content", NULL)->u.array.values[0]->u.object.values[1]),
        "exit_code: 3\ntimed_out: false\ntruncated: false\n--- stdout ---\nhi\n--- stderr "
        "---\ne\n");
    st = get(fx->reply, "result", "structuredContent", NULL);
    assert_int_equal(YAJL_GET_INTEGER(get(st, "exit_code", NULL, NULL)), 3);
    /* the last call forgets the ended process */
    assert_string_equal(fx->api.method, "DELETE");
    assert_string_equal(fx->api.path, "/sandbox/" SID "/processes/5");
    assert_int_equal(progress_sent, 0); /* it ended at once: nothing to report */
}

static int cancel_all(void *ctx, const char *id_json)
{
    (void)ctx;
    (void)id_json;
    return 1;
}

/* A file written with a progressToken: its call is watched, and the bytes
 * ticked become progress (the first at once, the last at once, none
 * between within MCP_BYTES_EVERY_MS); without a token it is not watched. */
static void test_file_write_with_a_progress_token_reports_bytes(void **state)
{
    struct fixture *fx = *state;
    static const char call[] =
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
        "\"sandbox_write_file\",%s\"arguments\":{\"sandbox_id\":\"" SID "\",\"path\":\"a\","
        "\"content\":\"abcdefghij\"}}}";
    char msg[512];

    fx->be.notify = fake_notify;
    fx->api.status = 201;
    fx->api.answer = "{\"path\":\"/workspace/a\"}";
    fx->api.moved = 10;
    progress_sent = 0;
    snprintf(msg, sizeof(msg), call, "");
    send_msg(fx, msg);
    assert_false(fx->api.watched);
    assert_int_equal(progress_sent, 0);

    snprintf(msg, sizeof(msg), call, "\"_meta\":{\"progressToken\":9},");
    send_msg(fx, msg);
    assert_true(fx->api.watched);
    assert_false(YAJL_IS_TRUE(get(fx->reply, "result", "isError", NULL)));
    assert_int_equal(progress_sent, 2); /* 5 of 10 at once, 6 throttled, 10 at once */
    assert_non_null(strstr(progress_msg, "\"progressToken\":9,\"progress\":10,\"total\":10"));
    assert_non_null(strstr(progress_msg, "sandbox_write_file: 10 bytes of 10 bytes sent"));
    progress_sent = 0;
}

/* A cancelled watched call (run_code in a session) is given up: no reply. */
static void test_cancelled_watched_call_gets_no_reply(void **state)
{
    struct fixture *fx = *state;

    fx->be.notify = fake_notify;
    fx->be.is_cancelled = cancel_all;
    fx->api.status = 200;
    fx->api.answer = "{\"status\":\"ok\"}";
    assert_int_equal(send_msg(fx, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
                                  "\"params\":{\"name\":\"run_code\",\"_meta\":{\"progressToken\":"
                                  "1},\"arguments\":{\"sandbox_id\":\"" SID "\",\"code\":\"1\"}}}"),
                     MCP_NO_REPLY);
    assert_true(fx->api.watched);
    assert_true(fx->api.tick_stop);
    assert_string_equal(fx->api.path, "/sandbox/" SID "/code");
    assert_int_equal(fx->s.last, MCP_MSG_CANCELLED);
}

/* Every tool, with an output schema and its hints, in the list a client reads. */
static void test_tools_list_names_every_tool_with_an_output_schema(void **state)
{
    static const char *const names[] = {"sandbox_create",
                                        "sandbox_exec",
                                        "sandbox_write_file",
                                        "sandbox_read_file",
                                        "sandbox_list_files",
                                        "sandbox_open_port",
                                        "sandbox_list",
                                        "sandbox_destroy",
                                        "sandbox_pause",
                                        "sandbox_resume",
                                        "sandbox_snapshot",
                                        "sandbox_fork",
                                        "run_code",
                                        "sandbox_set_timeout",
                                        "sandbox_start_process",
                                        "sandbox_list_processes",
                                        "sandbox_read_process_output",
                                        "sandbox_write_process_stdin",
                                        "sandbox_kill_process",
                                        "sandbox_delete_file",
                                        "sandbox_make_dir",
                                        "sandbox_move_file",
                                        "sandbox_list_ports",
                                        "sandbox_close_port",
                                        "volume_create",
                                        "volume_list",
                                        "volume_delete"};
    struct fixture *fx = *state;
    yajl_val list;

    list_tools(fx);
    list = get(fx->reply, "result", "tools", NULL);
    assert_int_equal(list->u.array.len, sizeof(names) / sizeof(names[0]));
    for (size_t i = 0; i < list->u.array.len; i++) {
        yajl_val t = list->u.array.values[i];
        assert_string_equal(nb_json_string(get(t, "name", NULL, NULL)), names[i]);
        assert_string_equal(nb_json_string(get(t, "outputSchema", "type", NULL)), "object");
        assert_non_null(get(t, "outputSchema", "properties", NULL));
        assert_non_null(get(t, "annotations", "readOnlyHint", NULL));
        assert_non_null(get(t, "annotations", "destructiveHint", NULL));
        assert_non_null(get(t, "annotations", "idempotentHint", NULL));
    }
}

/* The new tools are thin over their routes. */
static void test_process_file_port_and_ttl_tools_call_their_routes(void **state)
{
    struct fixture *fx = *state;
    int is_error;
    const char *text;

    fx->api.status = 200;
    fx->api.answer = "{\"sandboxId\":\"" SID "\",\"expires_at\":0,\"ttl\":3600}";
    text = call_tool(fx, "sandbox_set_timeout", "{\"sandbox_id\":\"" SID "\",\"ttl\":3600}",
                     &is_error);
    assert_false(is_error);
    assert_string_equal(fx->api.method, "POST");
    assert_string_equal(fx->api.path, "/sandbox/" SID "/timeout");
    assert_string_equal(fx->api.body.data, "{\"ttl\":3600}");
    assert_non_null(strstr(text, "3600 seconds (1 hour) from now"));

    fx->api.status = 201;
    fx->api.answer = "{\"pid\":12,\"background\":true}";
    text =
        call_tool(fx, "sandbox_start_process",
                  "{\"sandbox_id\":\"" SID "\",\"command\":\"python3 -m http.server\"}", &is_error);
    assert_false(is_error);
    assert_string_equal(fx->api.path, "/sandbox/" SID "/exec");
    assert_string_equal(fx->api.body.data,
                        "{\"command\":\"python3 -m http.server\",\"background\":true}");
    assert_non_null(strstr(text, "Started process 12"));

    fx->api.status = 200;
    fx->api.answer = "{\"pid\":12,\"command\":[\"/bin/sh\",\"-c\",\"cat\"],\"running\":true,"
                     "\"exit_code\":null,\"stdout_bytes\":3145728,\"stderr_bytes\":0,"
                     "\"stdout\":\"hi\\n\",\"stderr\":\"\",\"stdout_next\":3,\"stderr_next\":0}";
    text = call_tool(fx, "sandbox_read_process_output",
                     "{\"sandbox_id\":\"" SID "\",\"pid\":12,\"stdout_offset\":1}", &is_error);
    assert_false(is_error);
    assert_string_equal(fx->api.path,
                        "/sandbox/" SID "/processes/12?stdout_offset=1&stderr_offset=0");
    assert_non_null(strstr(text, "pid 12  running  stdout 3 MiB, stderr 0 bytes  command: "
                                 "/bin/sh -c cat\n"));
    assert_non_null(strstr(text, "--- stdout ---\nhi\n"));

    fx->api.answer = "{\"written\":3}";
    call_tool(fx, "sandbox_write_process_stdin",
              "{\"sandbox_id\":\"" SID "\",\"pid\":12,\"data\":\"hi\\n\",\"eof\":true}", &is_error);
    assert_false(is_error);
    assert_string_equal(fx->api.path, "/sandbox/" SID "/processes/12/stdin");
    assert_string_equal(fx->api.body.data, "{\"data\":\"hi\\n\",\"eof\":true}");

    fx->api.status = 204;
    fx->api.answer = "";
    call_tool(fx, "sandbox_kill_process",
              "{\"sandbox_id\":\"" SID "\",\"pid\":12,\"signal\":\"TERM\"}", &is_error);
    assert_false(is_error);
    assert_string_equal(fx->api.method, "DELETE");
    assert_string_equal(fx->api.path, "/sandbox/" SID "/processes/12?signal=TERM");
    call_tool(fx, "sandbox_delete_file",
              "{\"sandbox_id\":\"" SID "\",\"path\":\"a b\",\"recursive\":true}", &is_error);
    assert_false(is_error);
    assert_string_equal(fx->api.path, "/sandbox/" SID "/files?path=a%20b&recursive=1");
    call_tool(fx, "sandbox_close_port", "{\"sandbox_id\":\"" SID "\",\"port\":8000}", &is_error);
    assert_false(is_error);
    assert_string_equal(fx->api.path, "/sandbox/" SID "/ports/8000");

    fx->api.status = 200;
    fx->api.answer = "{\"from\":\"/workspace/a\",\"path\":\"/workspace/b\"}";
    text = call_tool(fx, "sandbox_move_file",
                     "{\"sandbox_id\":\"" SID "\",\"from\":\"a\",\"to\":\"b\"}", &is_error);
    assert_false(is_error);
    assert_string_equal(fx->api.path, "/sandbox/" SID "/files/move");
    assert_string_equal(fx->api.body.data, "{\"from\":\"a\",\"to\":\"b\"}");
    assert_string_equal(text, "Moved a to /workspace/b.");
    fx->api.answer = "{\"ports\":[]}";
    text = call_tool(fx, "sandbox_list_ports", "{\"sandbox_id\":\"" SID "\"}", &is_error);
    assert_string_equal(fx->api.path, "/sandbox/" SID "/ports");
    assert_string_equal(text, "No open ports.");
}

static void test_paths_and_metadata_are_url_escaped(void **state)
{
    struct fixture *fx = *state;
    int is_error;

    fx->api.status = 200;
    fx->api.answer = "x";
    call_tool(fx, "sandbox_read_file",
              "{\"sandbox_id\":\"" SID "\",\"path\":\"/a b/c&d=e?f%/\u00e9~._-\"}", &is_error);
    assert_false(is_error);
    assert_string_equal(fx->api.path,
                        "/sandbox/" SID "/files?path=/a%20b/c%26d%3De%3Ff%25/%C3%A9~._-");

    fx->api.answer = "{\"sandboxes\":[]}";
    call_tool(fx, "sandbox_list", "{\"metadata\":{\"k y\":\"v/w+\"}}", &is_error);
    assert_false(is_error);
    assert_string_equal(fx->api.path, "/sandbox?metadata.k%20y=v/w%2B");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_initialize_negotiates_the_version, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_messages_get_json_rpc_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_last_says_what_the_message_was, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exec_calls_the_api_and_formats_the_answer, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_api_error_is_an_error_result_with_its_message, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_pause_and_resume_call_the_api, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_file_puts_raw_bytes_decoding_base64, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_read_file_gives_text_or_base64, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_files_formats_the_entries, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_arguments_are_an_error_result_without_api_call,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_run_code_without_sandbox_runs_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_run_code_in_a_sandbox_returns_text_and_images, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_run_code_error_is_an_error_result_with_the_traceback,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_descriptions_quote_the_servers_config, setup_with_conf,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_descriptions_without_config_name_the_settings, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_missing_argument_error_fills_in_its_description,
                                        setup_with_conf, teardown),
        cmocka_unit_test_setup_teardown(test_config_sets_the_defaults_the_tools_send,
                                        setup_with_conf, teardown),
        cmocka_unit_test_setup_teardown(test_paths_and_metadata_are_url_escaped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_duplicate_keys_are_an_invalid_request, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_tools_list_names_every_tool_with_an_output_schema,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_process_file_port_and_ttl_tools_call_their_routes,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_write_with_a_progress_token_reports_bytes, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cancelled_watched_call_gets_no_reply, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exec_with_a_progress_token_is_watched, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
