/*
 * test_files_procs.c - the pure parts of the files and processes engines and
 * of the agent client (src/fcgi/engine/files.c, procs.c, agent.c), no sandbox
 * needed: how a path is resolved and refused, how an agent's errno becomes
 * an API error (status and code), signal names, and a process entry's
 * command line as the agent sends it.
 */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "agent.h"
#include "agentproto.h"
#include "files.h"
#include "procs.h"

static struct nb_conf conf;

static int resolve(const char *raw, char *out, size_t outlen, struct nb_apierr *ae)
{
    return nb_files_path(&conf, raw, strlen(raw), out, outlen, ae);
}

static void test_files_path_resolves_from_the_workspace(void **state)
{
    char out[NB_FILES_PATH_MAX + 1];
    struct nb_apierr ae;
    (void)state;

    assert_int_equal(resolve("out.txt", out, sizeof(out), &ae), 0);
    assert_string_equal(out, "/workspace/out.txt");
    assert_int_equal(resolve("/tmp/x/", out, sizeof(out), &ae), 0);
    assert_string_equal(out, "/tmp/x");
    assert_int_equal(resolve("/", out, sizeof(out), &ae), 0);
    assert_string_equal(out, "/");
}

static void test_files_path_refuses_what_could_escape(void **state)
{
    char out[NB_FILES_PATH_MAX + 1], longp[NB_FILES_PATH_MAX + 8];
    struct nb_apierr ae;
    (void)state;

    assert_int_equal(resolve("", out, sizeof(out), &ae), -1);
    assert_int_equal(ae.err, NB_E_INVALID);
    assert_string_equal(ae.code, "bad_path");
    assert_int_equal(resolve("/workspace/../etc/passwd", out, sizeof(out), &ae), -1);
    assert_string_equal(ae.code, "bad_path");
    assert_int_equal(resolve("a/./b", out, sizeof(out), &ae), -1);
    assert_int_equal(nb_files_path(&conf, "a\0b", 3, out, sizeof(out), &ae), -1);
    assert_non_null(strstr(ae.msg, "NUL"));
    memset(longp, 'a', sizeof(longp) - 1);
    longp[0] = '/';
    longp[sizeof(longp) - 1] = '\0';
    assert_int_equal(resolve(longp, out, sizeof(out), &ae), -1);
    assert_int_equal(ae.err, NB_E_INVALID);
}

/* An agent error frame: errno, then the message. */
static void agent_error(int e, const char *msg, struct nb_apierr *ae)
{
    unsigned char body[256];
    size_t n = strlen(msg);
    nba_put_u32(body, (uint32_t)e);
    memcpy(body + 4, msg, n);
    nb_agent_error(body, (uint32_t)(4 + n), "read the path", ae);
}

static void test_agent_errno_maps_to_status_and_code(void **state)
{
    static const struct {
        int e;
        enum nb_err err;
        const char *code;
    } cases[] = {
        {ENOENT, NB_E_NOT_FOUND, "not_found"}, {EACCES, NB_E_FORBIDDEN, "forbidden"},
        {EROFS, NB_E_FORBIDDEN, "forbidden"},  {EEXIST, NB_E_CONFLICT, "conflict"},
        {EISDIR, NB_E_CONFLICT, "conflict"},   {EFBIG, NB_E_TOO_LARGE, "too_large"},
        {ENOSPC, NB_E_NO_SPACE, "no_space"},   {EINVAL, NB_E_INVALID, "bad_request"},
        {EAGAIN, NB_E_LIMIT, "busy"},          {ESRCH, NB_E_NOT_FOUND, "no_process"},
        {EIO, NB_E_INTERNAL, "agent_error"},
    };
    struct nb_apierr ae;
    (void)state;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        agent_error(cases[i].e, "why", &ae);
        assert_int_equal(ae.err, cases[i].err);
        assert_string_equal(ae.code, cases[i].code);
        assert_string_equal(ae.msg, "could not read the path: why");
    }
    /* no message: the errno's own text */
    agent_error(ENOENT, "", &ae);
    assert_string_equal(ae.msg, "could not read the path: No such file or directory");
}

static unsigned caps_of(const char *pong)
{
    return nb_agent_caps_parse((const unsigned char *)pong, (uint32_t)strlen(pong));
}

/* User metadata (E2B's files.write metadata): the agent's rules, held on the host too. */
static void test_file_meta_keeps_to_its_rules_and_caps(void **state)
{
    static struct nb_file_meta m;
    static const char *const bad_keys[] = {"",        "user.x", "USER.x", "trusted.x", "Security.y",
                                           "system.", "a b",    "a\"b",   "a/b",       "a=b"};
    char key[NBA_META_KEY_MAX + 2], value[NBA_META_VALUE_MAX + 2];
    const char *k, *v;
    size_t pos = 0;
    (void)state;
    memset(&m, 0, sizeof(m));
    for (size_t i = 0; i < sizeof(bad_keys) / sizeof(bad_keys[0]); i++)
        assert_int_equal(nb_file_meta_add(&m, bad_keys[i], strlen(bad_keys[i]), "v", 1), -1);
    assert_int_equal(nb_file_meta_add(&m, "k", 1, "line\nbreak", 10), -1);
    assert_int_equal(nb_file_meta_add(&m, "k", 1, "nul\0", 4), -1);
    memset(key, 'k', sizeof(key));
    memset(value, 'v', sizeof(value));
    assert_int_equal(nb_file_meta_add(&m, key, NBA_META_KEY_MAX + 1, "v", 1), -1);
    assert_int_equal(nb_file_meta_add(&m, "k", 1, value, NBA_META_VALUE_MAX + 1), -1);
    assert_int_equal(m.n, 0);
    assert_int_equal(nb_file_meta_add(&m, "owner-id", 8, "42", 2), 0);
    assert_int_equal(nb_file_meta_add(&m, "empty", 5, "", 0), 0);
    assert_int_equal(nb_file_meta_add(&m, "owner-id", 8, "43", 2), -1); /* given twice */
    assert_int_equal(nb_file_meta_next(&m, &pos, &k, &v), 1);
    assert_string_equal(k, "owner-id");
    assert_string_equal(v, "42");
    assert_int_equal(nb_file_meta_next(&m, &pos, &k, &v), 1);
    assert_string_equal(k, "empty");
    assert_string_equal(v, "");
    assert_int_equal(nb_file_meta_next(&m, &pos, &k, &v), 0);
    /* the caps: 16 entries, 4096 bytes of keys and values */
    memset(&m, 0, sizeof(m));
    for (int i = 0; i < 4; i++) {
        key[0] = (char)('a' + i);
        assert_int_equal(nb_file_meta_add(&m, key, 1, value, NBA_META_VALUE_MAX - 1), 0);
    }
    key[0] = 'z';
    assert_int_equal(nb_file_meta_add(&m, key, 1, value, 5), -1); /* 4096 + 6 */
    memset(&m, 0, sizeof(m));
    for (int i = 0; i < NBA_META_MAX; i++) {
        char kk[4];
        snprintf(kk, sizeof(kk), "k%d", i);
        assert_int_equal(nb_file_meta_add(&m, kk, strlen(kk), "v", 1), 0);
    }
    assert_int_equal(nb_file_meta_add(&m, "one-more", 8, "v", 1), -1);
}

/* The pong names what the agent does beyond version 1; an older agent names nothing. */
static void test_agent_caps_come_from_the_pong(void **state)
{
    (void)state;
    assert_int_equal(caps_of("nanobox-init 1"), 0);
    assert_int_equal(caps_of("nanobox-init 1 " NBA_CAPS), NB_AGENT_CAPS_ALL);
    assert_int_equal(caps_of("nanobox-init 1 query-wait"), NB_AGENT_CAP_QUERY_WAIT);
    assert_int_equal(caps_of("nanobox-init 1 bg-close some-later-one bg-pty"),
                     NB_AGENT_CAP_BG_CLOSE | NB_AGENT_CAP_BG_PTY);
    /* an agent of before kernel-pipe: its K gets the request only after the hello */
    assert_int_equal(
        caps_of("nanobox-init 1 query-wait bg-pty bg-close meta") & NB_AGENT_CAP_KERNEL_PIPE, 0);
    assert_int_equal(caps_of("nanobox-init 1 meta kernel-pipe"),
                     NB_AGENT_CAP_META | NB_AGENT_CAP_KERNEL_PIPE);
    /* a name is a whole word, never the version or a prefix */
    assert_int_equal(caps_of("query-wait bg-pty"), 0);
    assert_int_equal(caps_of("nanobox-init 1 query-waits bg-pt"), 0);
    assert_int_equal(caps_of(""), 0);
}

static void test_signal_names(void **state)
{
    (void)state;
    assert_int_equal(nb_procs_signal_number("KILL"), SIGKILL);
    assert_int_equal(nb_procs_signal_number("SIGTERM"), SIGTERM);
    assert_int_equal(nb_procs_signal_number("CONT"), SIGCONT);
    assert_int_equal(nb_procs_signal_number("SEGV"), 0);
    assert_int_equal(nb_procs_signal_number("kill"), 0);
    assert_int_equal(nb_procs_signal_number(""), 0);
}

static void test_process_command_line_walk(void **state)
{
    unsigned char fields[128];
    size_t n = 0, pos = 0, len;
    struct nb_proc_info p;
    const char *s;
    (void)state;

    n += nba_field_put(fields + n, NBA_T_ARG, "/bin/sh", 7);
    n += nba_field_put(fields + n, NBA_T_PID, "\0\0\0\7", 4);
    n += nba_field_put(fields + n, NBA_T_ARG, "-c", 2);
    n += nba_field_put(fields + n, NBA_T_ARG, "", 0);
    memset(&p, 0, sizeof(p));
    p.fields = fields;
    p.fields_len = (uint32_t)n;
    assert_int_equal(nb_proc_next_arg(&p, &pos, &s, &len), 1);
    assert_int_equal(len, 7);
    assert_memory_equal(s, "/bin/sh", 7);
    assert_int_equal(nb_proc_next_arg(&p, &pos, &s, &len), 1);
    assert_int_equal(len, 2);
    assert_memory_equal(s, "-c", 2);
    assert_int_equal(nb_proc_next_arg(&p, &pos, &s, &len), 1);
    assert_int_equal(len, 0);
    assert_int_equal(nb_proc_next_arg(&p, &pos, &s, &len), 0);
    assert_int_equal(nb_proc_next_arg(&p, &pos, &s, &len), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_files_path_resolves_from_the_workspace),
        cmocka_unit_test(test_files_path_refuses_what_could_escape),
        cmocka_unit_test(test_agent_errno_maps_to_status_and_code),
        cmocka_unit_test(test_agent_caps_come_from_the_pong),
        cmocka_unit_test(test_file_meta_keeps_to_its_rules_and_caps),
        cmocka_unit_test(test_signal_names),
        cmocka_unit_test(test_process_command_line_walk),
    };
    snprintf(conf.workspace, sizeof(conf.workspace), "/workspace");
    return cmocka_run_group_tests(tests, NULL, NULL);
}
