/*
 * test_route.c - the router's pure parts (src/fcgi/http/route.c): which path
 * shape and sub-route a path names, the {pid} syntax, and the route table
 * lookup (a method found, 405 with its Allow list in table order, HEAD
 * served as GET, a known place with no route, a shape with no rows). The
 * handlers are stand-ins: route.c never calls them.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "route.h"

static int h_a(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
               struct nb_apierr *ae)
{
    (void)a, (void)r, (void)ra, (void)ae;
    return 0;
}

static int h_b(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
               struct nb_apierr *ae)
{
    (void)a, (void)r, (void)ra, (void)ae;
    return 0;
}

static const struct nb_route_entry tab[] = {
    {NB_ROUTE_HEALTHZ, "", "GET", NB_ROUTE_PUBLIC | NB_ROUTE_HEAD, NB_MR_OTHER, h_a},
    {NB_ROUTE_SANDBOX, "", "GET", NB_ROUTE_ID, NB_MR_OTHER, h_a},
    {NB_ROUTE_SANDBOX, "", "DELETE", NB_ROUTE_ID, NB_MR_OTHER, h_b},
    {NB_ROUTE_FILES, "", "GET", NB_ROUTE_ID, NB_MR_OTHER, h_a},
    {NB_ROUTE_FILES, "mkdir", "POST", NB_ROUTE_ID, NB_MR_OTHER, h_b},
    {NB_ROUTE_PROCS, "{pid}", "GET", NB_ROUTE_ID | NB_ROUTE_PID, NB_MR_OTHER, h_a},
    {NB_ROUTE_PROCS, "{pid}/{op}", NULL, NB_ROUTE_ID | NB_ROUTE_PID, NB_MR_OTHER, NULL},
    {NB_ROUTE_CONTEXTS, "{ctx}/restart", "POST", NB_ROUTE_ID | NB_ROUTE_CTX, NB_MR_OTHER, h_b},
};
#define NTAB (sizeof(tab) / sizeof(tab[0]))

#define SID "0b5f8a52-3c1e-4d7a-9f36-2a8c1e5d7b90"

/* Match path and give its sub-route. */
static enum nb_route match(const char *path, struct nb_route_args *ra, const char **sub)
{
    enum nb_route rt = nb_route_match(path, ra->id, sizeof(ra->id), ra->arg, sizeof(ra->arg),
                                      ra->op, sizeof(ra->op));
    *sub = nb_route_sub(rt, ra);
    return rt;
}

static void test_paths_give_shape_and_sub_route(void **state)
{
    struct nb_route_args ra;
    const char *sub;
    (void)state;

    assert_int_equal(match("/healthz", &ra, &sub), NB_ROUTE_HEALTHZ);
    assert_string_equal(sub, "");
    assert_int_equal(match("/sandbox/" SID "/files/mkdir", &ra, &sub), NB_ROUTE_FILES);
    assert_string_equal(ra.id, SID);
    assert_string_equal(sub, "mkdir");
    assert_int_equal(match("/sandbox/" SID "/files/archive", &ra, &sub), NB_ROUTE_FILES);
    assert_string_equal(sub, "archive");
    assert_int_equal(match("/sandbox/" SID "/files/watch", &ra, &sub), NB_ROUTE_FILES);
    assert_string_equal(sub, "watch");
    assert_int_equal(match("/sandbox/" SID "/files/archive/x", &ra, &sub), NB_ROUTE_NONE);
    assert_int_equal(match("/sandbox/" SID "/processes", &ra, &sub), NB_ROUTE_PROCS);
    assert_string_equal(sub, "");
    assert_int_equal(match("/sandbox/" SID "/processes/42", &ra, &sub), NB_ROUTE_PROCS);
    assert_string_equal(sub, "{pid}");
    assert_string_equal(ra.arg, "42");
    assert_int_equal(match("/sandbox/" SID "/processes/42/stdin", &ra, &sub), NB_ROUTE_PROCS);
    assert_string_equal(sub, "{pid}/stdin");
    assert_int_equal(match("/sandbox/" SID "/processes/42/nope", &ra, &sub), NB_ROUTE_PROCS);
    assert_string_equal(sub, "{pid}/{op}");
    assert_int_equal(match("/sandbox/" SID "/pty/42/input", &ra, &sub), NB_ROUTE_PTY);
    assert_string_equal(sub, "{pid}/input");
    assert_string_equal(ra.arg, "42");
    assert_int_equal(match("/sandbox/" SID "/pty/42/resize", &ra, &sub), NB_ROUTE_PTY);
    assert_string_equal(sub, "{pid}/resize");
    assert_int_equal(match("/sandbox/" SID "/pty/42/stdin", &ra, &sub), NB_ROUTE_PTY);
    assert_string_equal(sub, "{pid}/{op}");
    assert_int_equal(match("/sandbox/" SID "/pty/42", &ra, &sub), NB_ROUTE_PTY);
    assert_string_equal(sub, "{pid}");
    assert_int_equal(match("/sandbox/" SID "/pty/", &ra, &sub), NB_ROUTE_NONE);
    assert_int_equal(match("/sandbox/" SID "/pty/42/input/x", &ra, &sub), NB_ROUTE_NONE);
    assert_int_equal(match("/sandbox/" SID "/ports/8080", &ra, &sub), NB_ROUTE_PORT);
    assert_string_equal(sub, "");
    assert_string_equal(ra.arg, "8080");
    assert_int_equal(match("/sandbox/" SID "/pause", &ra, &sub), NB_ROUTE_PAUSE);
    assert_string_equal(ra.id, SID);
    assert_string_equal(sub, "");
    assert_int_equal(match("/sandbox/" SID "/resume", &ra, &sub), NB_ROUTE_RESUME);
    assert_int_equal(match("/sandbox/" SID "/pause/now", &ra, &sub), NB_ROUTE_NONE);
    assert_int_equal(match("/sandbox/" SID "/snapshot", &ra, &sub), NB_ROUTE_SNAPSHOT);
    assert_string_equal(ra.id, SID);
    assert_string_equal(sub, "");
    assert_int_equal(match("/sandbox/" SID "/snapshot/x", &ra, &sub), NB_ROUTE_NONE);
    assert_int_equal(match("/nope", &ra, &sub), NB_ROUTE_NONE);
    assert_int_equal(match("/metrics", &ra, &sub), NB_ROUTE_METRICS);
    assert_string_equal(ra.id, "");
    assert_int_equal(match("/metrics/", &ra, &sub), NB_ROUTE_NONE);
    assert_int_equal(match("/sandbox/" SID "/metrics", &ra, &sub), NB_ROUTE_USAGE);
    assert_string_equal(ra.id, SID);
    assert_string_equal(sub, "");
    assert_int_equal(match("/sandbox/" SID "/metrics/cpu", &ra, &sub), NB_ROUTE_NONE);
    assert_int_equal(match("/openapi.json", &ra, &sub), NB_ROUTE_OPENAPI);
    assert_string_equal(sub, "");
    assert_int_equal(match("/openapi.json/x", &ra, &sub), NB_ROUTE_NONE);
}

/* nb_route_path (nanobox-fcgi -R, which the OpenAPI check reads) names
 * each shape by the path it matches: {id} put in, the path matches back;
 * every shape of route.h's list is there, with the path the list gives. */
static void test_route_path_matches_its_shape(void **state)
{
    struct nb_route_args ra;
    const char *sub;
    char path[256];
#define SHAPE(name, path) {NB_ROUTE_##name, path},
    static const struct {
        enum nb_route shape;
        const char *path;
    } shapes[] = {NB_ROUTE_SHAPES(SHAPE)};
#undef SHAPE
    (void)state;
    assert_null(nb_route_path(NB_ROUTE_NONE));
    assert_null(nb_route_path(NB_ROUTE_FRONT));
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        enum nb_route s = shapes[i].shape;
        const char *p = nb_route_path(s), *brace;
        assert_non_null(p);
        assert_string_equal(p, shapes[i].path);
        if (s == NB_ROUTE_TEMPLATE || s == NB_ROUTE_PTY)
            continue; /* no path of its own: its sub-route makes it */
        brace = strstr(p, "{id}");
        if (brace != NULL)
            snprintf(path, sizeof(path), "%.*s%s%s", (int)(brace - p), p, SID, brace + 4);
        else
            snprintf(path, sizeof(path), "%s", p);
        if (s == NB_ROUTE_PORT)
            snprintf(path, sizeof(path), "/sandbox/" SID "/ports/8080");
        assert_int_equal(match(path, &ra, &sub), s);
    }
}

static void test_template_paths(void **state)
{
    struct nb_route_args ra;
    const char *sub;
    char path[256];
    (void)state;

    assert_int_equal(match("/templates", &ra, &sub), NB_ROUTE_TEMPLATES);
    assert_string_equal(sub, "");
    assert_int_equal(match("/templates/", &ra, &sub), NB_ROUTE_TEMPLATES);
    assert_int_equal(match("/templates/tools", &ra, &sub), NB_ROUTE_TEMPLATE);
    assert_string_equal(ra.arg, "tools");
    assert_string_equal(ra.id, "");
    assert_string_equal(sub, "{name}");
    assert_int_equal(match("/templates/tools/logs", &ra, &sub), NB_ROUTE_TEMPLATE);
    assert_string_equal(sub, "{name}/logs");
    assert_int_equal(match("/templates/tools/other", &ra, &sub), NB_ROUTE_TEMPLATE);
    assert_string_equal(sub, "{name}/{op}");
    assert_int_equal(match("/templates//logs", &ra, &sub), NB_ROUTE_NONE);
    assert_int_equal(match("/templates/a/logs/x", &ra, &sub), NB_ROUTE_NONE);
    /* a name too long for any template is no route, never cut to another name */
    snprintf(path, sizeof(path), "/templates/%0100d", 0);
    assert_int_equal(match(path, &ra, &sub), NB_ROUTE_NONE);
}

static void test_code_and_context_paths(void **state)
{
    struct nb_route_args ra;
    const char *sub;
    char path[256];
    (void)state;

    assert_int_equal(match("/sandbox/" SID "/code", &ra, &sub), NB_ROUTE_CODE);
    assert_string_equal(ra.id, SID);
    assert_string_equal(sub, "");
    assert_int_equal(match("/sandbox/" SID "/code/interrupt", &ra, &sub), NB_ROUTE_CODE);
    assert_string_equal(sub, "interrupt");
    assert_int_equal(match("/sandbox/" SID "/code/other", &ra, &sub), NB_ROUTE_NONE);
    assert_int_equal(match("/sandbox/" SID "/contexts", &ra, &sub), NB_ROUTE_CONTEXTS);
    assert_string_equal(sub, "");
    assert_int_equal(match("/sandbox/" SID "/contexts/", &ra, &sub), NB_ROUTE_CONTEXTS);
    assert_string_equal(sub, "");
    assert_int_equal(match("/sandbox/" SID "/contexts/ctx-0123456789ab", &ra, &sub),
                     NB_ROUTE_CONTEXTS);
    assert_string_equal(sub, "{ctx}");
    assert_string_equal(ra.arg, "ctx-0123456789ab");
    assert_int_equal(match("/sandbox/" SID "/contexts/python/restart", &ra, &sub),
                     NB_ROUTE_CONTEXTS);
    assert_string_equal(sub, "{ctx}/restart");
    assert_string_equal(ra.arg, "python");
    assert_string_equal(ra.op, "restart");
    assert_int_equal(match("/sandbox/" SID "/contexts/python/stop", &ra, &sub), NB_ROUTE_CONTEXTS);
    assert_string_equal(sub, "{ctx}/{op}");
    assert_int_equal(match("/sandbox/" SID "/contexts/python/restart/x", &ra, &sub), NB_ROUTE_NONE);
    assert_int_equal(match("/sandbox/" SID "/contexts//restart", &ra, &sub), NB_ROUTE_NONE);
    /* a context id longer than arg is cut, never dropped: the ctx check refuses it */
    snprintf(path, sizeof(path), "/sandbox/" SID "/contexts/%0100d", 7);
    assert_int_equal(match(path, &ra, &sub), NB_ROUTE_CONTEXTS);
    assert_int_equal(strlen(ra.arg), sizeof(ra.arg) - 1);
    assert_int_equal(nb_route_ctx(ra.arg), -1);
}

static void test_ctx_segment_syntax(void **state)
{
    char max[NB_ROUTE_CTX_MAX + 2];
    (void)state;

    assert_int_equal(nb_route_ctx("python"), 0);
    assert_int_equal(nb_route_ctx("ctx-0123456789ab"), 0);
    assert_int_equal(nb_route_ctx("-"), 0);
    assert_int_equal(nb_route_ctx(""), -1);
    assert_int_equal(nb_route_ctx("Python"), -1);
    assert_int_equal(nb_route_ctx("a_b"), -1);
    assert_int_equal(nb_route_ctx("a.b"), -1);
    assert_int_equal(nb_route_ctx("%2e"), -1);
    memset(max, 'a', NB_ROUTE_CTX_MAX);
    max[NB_ROUTE_CTX_MAX] = '\0';
    assert_int_equal(nb_route_ctx(max), 0);
    max[NB_ROUTE_CTX_MAX] = 'a';
    max[NB_ROUTE_CTX_MAX + 1] = '\0';
    assert_int_equal(nb_route_ctx(max), -1);
}

static void test_pid_segment_syntax(void **state)
{
    uint32_t pid = 0;
    (void)state;

    assert_int_equal(nb_route_pid("1", &pid), 0);
    assert_int_equal(pid, 1);
    assert_int_equal(nb_route_pid("4194304", &pid), 0);
    assert_int_equal(pid, 4194304);
    assert_int_equal(nb_route_pid("4194305", &pid), -1);
    assert_int_equal(nb_route_pid("0", &pid), -1);
    assert_int_equal(nb_route_pid("012", &pid), -1);
    assert_int_equal(nb_route_pid("12a", &pid), -1);
    assert_int_equal(nb_route_pid("", &pid), -1);
    assert_int_equal(nb_route_pid("-1", &pid), -1);
}

static void test_lookup_finds_the_row_of_the_method(void **state)
{
    const struct nb_route_entry *row;
    unsigned flags;
    char allowed[64];
    (void)state;

    assert_int_equal(nb_route_lookup(tab, NTAB, NB_ROUTE_SANDBOX, "", "DELETE", &row, &flags,
                                     allowed, sizeof(allowed)),
                     NB_ROUTE_FOUND);
    assert_ptr_equal(row, &tab[2]);
    assert_int_equal(flags, NB_ROUTE_ID);
    assert_int_equal(nb_route_lookup(tab, NTAB, NB_ROUTE_FILES, "mkdir", "POST", &row, &flags,
                                     allowed, sizeof(allowed)),
                     NB_ROUTE_FOUND);
    assert_ptr_equal(row->handler, h_b);
}

static void test_lookup_lists_allowed_methods_in_table_order(void **state)
{
    const struct nb_route_entry *row;
    unsigned flags;
    char allowed[64], tiny[6];
    (void)state;

    assert_int_equal(nb_route_lookup(tab, NTAB, NB_ROUTE_SANDBOX, "", "PUT", &row, &flags, allowed,
                                     sizeof(allowed)),
                     NB_ROUTE_NO_METHOD);
    assert_null(row);
    assert_string_equal(allowed, "GET, DELETE");
    assert_int_equal(flags, NB_ROUTE_ID);
    /* the list is cut to its buffer, never past it */
    assert_int_equal(
        nb_route_lookup(tab, NTAB, NB_ROUTE_SANDBOX, "", "PUT", &row, &flags, tiny, sizeof(tiny)),
        NB_ROUTE_NO_METHOD);
    assert_string_equal(tiny, "GET, ");
    /* mkdir is its own path: GET there is not the files GET */
    assert_int_equal(nb_route_lookup(tab, NTAB, NB_ROUTE_FILES, "mkdir", "GET", &row, &flags,
                                     allowed, sizeof(allowed)),
                     NB_ROUTE_NO_METHOD);
    assert_string_equal(allowed, "POST");
}

static void test_lookup_serves_head_as_get_only_where_flagged(void **state)
{
    const struct nb_route_entry *row;
    unsigned flags;
    char allowed[64];
    (void)state;

    assert_int_equal(nb_route_lookup(tab, NTAB, NB_ROUTE_HEALTHZ, "", "HEAD", &row, &flags, allowed,
                                     sizeof(allowed)),
                     NB_ROUTE_FOUND);
    assert_int_equal(flags, NB_ROUTE_PUBLIC | NB_ROUTE_HEAD);
    assert_int_equal(nb_route_lookup(tab, NTAB, NB_ROUTE_SANDBOX, "", "HEAD", &row, &flags, allowed,
                                     sizeof(allowed)),
                     NB_ROUTE_NO_METHOD);
    assert_string_equal(allowed, "GET, DELETE");
}

static void test_lookup_known_place_without_route_and_unknown_shape(void **state)
{
    const struct nb_route_entry *row;
    unsigned flags;
    char allowed[64];
    (void)state;

    /* rows exist (their checks apply) but serve no method: the router's 404 */
    assert_int_equal(nb_route_lookup(tab, NTAB, NB_ROUTE_PROCS, "{pid}/{op}", "GET", &row, &flags,
                                     allowed, sizeof(allowed)),
                     NB_ROUTE_NO_METHOD);
    assert_string_equal(allowed, "");
    assert_int_equal(flags, NB_ROUTE_ID | NB_ROUTE_PID);
    /* a context's restart is its own row, with the context id check */
    assert_int_equal(nb_route_lookup(tab, NTAB, NB_ROUTE_CONTEXTS, "{ctx}/restart", "POST", &row,
                                     &flags, allowed, sizeof(allowed)),
                     NB_ROUTE_FOUND);
    assert_int_equal(flags, NB_ROUTE_ID | NB_ROUTE_CTX);
    assert_int_equal(nb_route_lookup(tab, NTAB, NB_ROUTE_RUN, "", "POST", &row, &flags, allowed,
                                     sizeof(allowed)),
                     NB_ROUTE_NO_ROWS);
    assert_int_equal(flags, 0);
    assert_null(row);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paths_give_shape_and_sub_route),
        cmocka_unit_test(test_route_path_matches_its_shape),
        cmocka_unit_test(test_pid_segment_syntax),
        cmocka_unit_test(test_code_and_context_paths),
        cmocka_unit_test(test_template_paths),
        cmocka_unit_test(test_ctx_segment_syntax),
        cmocka_unit_test(test_lookup_finds_the_row_of_the_method),
        cmocka_unit_test(test_lookup_lists_allowed_methods_in_table_order),
        cmocka_unit_test(test_lookup_serves_head_as_get_only_where_flagged),
        cmocka_unit_test(test_lookup_known_place_without_route_and_unknown_shape),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
