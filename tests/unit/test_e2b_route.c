/*
 * test_e2b_route.c - the E2B front's paths (src/fcgi/e2b/e2b_route.c): its
 * control plane's shapes and sub-routes, its data plane named by headers
 * or by an E2B_DOMAIN host, its catch-all rows (route.c's lookup), and
 * the path each shape names for `nanobox-fcgi -R`.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "e2b_route.h"
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

#define SID "0b5f8a52-3c1e-4d7a-9f36-2a8c1e5d7b90"

/* Match path as the front does (no headers: the control plane) and give its sub-route. */
static int match(const char *path, struct nb_route_args *ra, const char **sub)
{
    enum nb_route rt = nb_e2b_match_path(path, ra->id, sizeof(ra->id), ra->arg, sizeof(ra->arg),
                                         ra->op, sizeof(ra->op));
    *sub = nb_e2b_sub(rt, ra);
    return (int)rt;
}

static void test_e2b_paths(void **state)
{
    struct nb_route_args ra;
    const char *sub;
    const struct nb_route_entry *row;
    unsigned flags;
    char allowed[64];
    static const struct nb_route_entry e2b[] = {
        {NB_E2B_OP, "connect", "POST", NB_ROUTE_ID | NB_ROUTE_ID_404, NB_MR_OTHER, h_a},
        {NB_E2B_OP, "*", "*", NB_ROUTE_ID | NB_ROUTE_ID_404, NB_MR_OTHER, h_b},
    };
    (void)state;

    assert_int_equal(match("/sandboxes", &ra, &sub), NB_E2B_SANDBOXES);
    assert_int_equal(match("/v2/sandboxes", &ra, &sub), NB_E2B_LIST);
    assert_int_equal(match("/sandboxes/" SID, &ra, &sub), NB_E2B_SANDBOX);
    assert_string_equal(ra.id, SID);
    /* E2B's ids are opaque: any segment is matched, the router checks it */
    assert_int_equal(match("/sandboxes/i3b7ktq1xk1z0c4l9mr8s/connect", &ra, &sub), NB_E2B_OP);
    assert_string_equal(ra.id, "i3b7ktq1xk1z0c4l9mr8s");
    assert_string_equal(sub, "connect");
    assert_int_equal(match("/sandboxes/" SID "/a/b", &ra, &sub), NB_E2B_OTHER);
    assert_string_equal(ra.id, "");
    assert_int_equal(match("/sandboxes//connect", &ra, &sub), NB_E2B_OTHER);
    /* e2b 2.50's /v2/sandboxes/{id}/{op}: an op, never the sandbox alone */
    assert_int_equal(match("/v2/sandboxes/" SID "/connect", &ra, &sub), NB_E2B_V2_OP);
    assert_string_equal(ra.id, SID);
    assert_string_equal(sub, "connect");
    assert_int_equal(match("/v2/sandboxes/" SID "/logs", &ra, &sub), NB_E2B_V2_OP);
    assert_int_equal(match("/v2/sandboxes/" SID, &ra, &sub), NB_E2B_OTHER);
    assert_int_equal(match("/v2/sandboxes/" SID "/", &ra, &sub), NB_E2B_OTHER);
    assert_int_equal(match("/v2/sandboxes/" SID "/a/b", &ra, &sub), NB_E2B_OTHER);
    assert_int_equal(match("/v2/sandboxes//connect", &ra, &sub), NB_E2B_OTHER);
    assert_int_equal(match("/sandboxesx", &ra, &sub), NB_E2B_OTHER);
    /* the native API's paths are not the front's */
    assert_int_equal(match("/sandbox/" SID, &ra, &sub), NB_ROUTE_NONE);
    assert_int_equal(match("/healthz", &ra, &sub), NB_ROUTE_NONE);

    /* the data plane: whatever the path, named by the headers */
    assert_int_equal(nb_e2b_match_data("/process.Process/Start", SID, "49983", ra.id, sizeof(ra.id),
                                       ra.arg, sizeof(ra.arg), ra.op, sizeof(ra.op)),
                     NB_E2B_DATA);
    assert_string_equal(ra.id, SID);
    assert_string_equal(ra.arg, "/process.Process/Start");
    assert_string_equal(ra.op, "49983");
    assert_string_equal(nb_e2b_sub(NB_E2B_DATA, &ra), "/process.Process/Start");
    /* the code interpreter's contexts: {ctx} (the handler reads it from the path) */
    snprintf(ra.arg, sizeof(ra.arg), "/contexts/ctx-0a1b");
    assert_string_equal(nb_e2b_sub(NB_E2B_DATA, &ra), "/contexts/{ctx}");
    snprintf(ra.arg, sizeof(ra.arg), "/contexts/python/restart");
    assert_string_equal(nb_e2b_sub(NB_E2B_DATA, &ra), "/contexts/{ctx}/restart");
    snprintf(ra.arg, sizeof(ra.arg), "/contexts/python/other");
    assert_string_equal(nb_e2b_sub(NB_E2B_DATA, &ra), "/contexts/python/other");
    snprintf(ra.arg, sizeof(ra.arg), "/contexts//restart");
    assert_string_equal(nb_e2b_sub(NB_E2B_DATA, &ra), "/contexts//restart");
    snprintf(ra.arg, sizeof(ra.arg), "/contexts");
    assert_string_equal(nb_e2b_sub(NB_E2B_DATA, &ra), "/contexts");

    /* E2B_DOMAIN's hosts: <port>-<id>.<domain>, the two ports of the data plane only */
    {
        char id[40], port[8];
        assert_int_equal(
            nb_e2b_host("49983-" SID ".sandbox.example.org", id, sizeof(id), port, sizeof(port)),
            1);
        assert_string_equal(id, SID);
        assert_string_equal(port, "49983");
        assert_int_equal(nb_e2b_host("49999-" SID ".x:8443", id, sizeof(id), port, sizeof(port)),
                         1);
        assert_string_equal(port, "49999");
        assert_int_equal(nb_e2b_host("8080-" SID ".x", id, sizeof(id), port, sizeof(port)), 0);
        assert_int_equal(nb_e2b_host("49983-" SID, id, sizeof(id), port, sizeof(port)), 0);
        assert_int_equal(nb_e2b_host("49983-" SID "0.x", id, sizeof(id), port, sizeof(port)), 0);
        assert_int_equal(nb_e2b_host("49983-ABC.x", id, sizeof(id), port, sizeof(port)), 0);
        assert_int_equal(nb_e2b_host("127.0.0.1:8080", id, sizeof(id), port, sizeof(port)), 0);
        assert_int_equal(nb_e2b_host(NULL, id, sizeof(id), port, sizeof(port)), 0);
        assert_int_equal(nb_e2b_host("49983-" SID ".x", id, 36, port, sizeof(port)), 0);
    }

    /* a "*" row serves every method */
    assert_int_equal(nb_route_lookup(e2b, 2, NB_E2B_OP, "connect", "POST", &row, &flags, allowed,
                                     sizeof(allowed)),
                     NB_ROUTE_FOUND);
    assert_ptr_equal(row, &e2b[0]);
    assert_int_equal(
        nb_route_lookup(e2b, 2, NB_E2B_OP, "*", "PATCH", &row, &flags, allowed, sizeof(allowed)),
        NB_ROUTE_FOUND);
    assert_ptr_equal(row, &e2b[1]);
    assert_int_equal(nb_route_lookup(e2b, 2, NB_E2B_OP, "metrics", "GET", &row, &flags, allowed,
                                     sizeof(allowed)),
                     NB_ROUTE_NO_ROWS);
}

/* nb_e2b_path names each shape of a path by the path it matches back. */
static void test_e2b_path_matches_its_shape(void **state)
{
    struct nb_route_args ra;
    const char *sub;
    (void)state;
    assert_string_equal(nb_e2b_path(NB_E2B_SANDBOXES), "/sandboxes");
    assert_int_equal(match(nb_e2b_path(NB_E2B_SANDBOXES), &ra, &sub), NB_E2B_SANDBOXES);
    assert_int_equal(match(nb_e2b_path(NB_E2B_LIST), &ra, &sub), NB_E2B_LIST);
    assert_string_equal(nb_e2b_path(NB_E2B_SANDBOX), "/sandboxes/{id}");
    assert_int_equal(match("/sandboxes/" SID, &ra, &sub), NB_E2B_SANDBOX);
    assert_string_equal(nb_e2b_path(NB_E2B_DATA), "");
    assert_null(nb_e2b_path(NB_ROUTE_SANDBOX));
}

/* E2B's snapshot list beside /sandboxes: /snapshots. */
static void test_e2b_snapshot_paths(void **state)
{
    char arg[64], big[200];
    (void)state;
    assert_int_equal(nb_e2b_match_snapshots("/snapshots", arg, sizeof(arg)), NB_E2B_SNAPSHOTS);
    assert_string_equal(arg, "");
    assert_int_equal(nb_e2b_match_snapshots("/snapshots/", arg, sizeof(arg)), NB_E2B_SNAPSHOTS);
    /* deleteSnapshot's /templates/{id} is the template API's (nb_e2b_match_tpl) */
    assert_int_equal(nb_e2b_match_snapshots("/templates/snap-1", arg, sizeof(arg)), NB_ROUTE_NONE);
    assert_string_equal(nb_e2b_path(NB_E2B_SNAPSHOTS), "/snapshots");
    /* not the front's: nanobox's own and E2B's other template paths */
    assert_int_equal(nb_e2b_match_snapshots("/templates", arg, sizeof(arg)), NB_ROUTE_NONE);
    assert_int_equal(nb_e2b_match_snapshots("/templates/", arg, sizeof(arg)), NB_ROUTE_NONE);
    assert_int_equal(nb_e2b_match_snapshots("/templates/aliases/base", arg, sizeof(arg)),
                     NB_ROUTE_NONE);
    assert_int_equal(nb_e2b_match_snapshots("/snapshotsx", arg, sizeof(arg)), NB_ROUTE_NONE);
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    memcpy(big, "/templates/", 11);
    assert_int_equal(nb_e2b_match_snapshots(big, arg, sizeof(arg)), NB_ROUTE_NONE);
}

/* E2B's template paths: which are E2B's whoever asks, which only for an E2B key. */
static void test_e2b_template_paths(void **state)
{
    const char *h = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    char p[256];
    (void)state;
    assert_int_equal(nb_e2b_match_tpl("/v3/templates", 0), NB_E2B_TPL_V3);
    assert_int_equal(nb_e2b_match_tpl("/v3/templates/", 0), NB_E2B_TPL_V3);
    assert_int_equal(nb_e2b_match_tpl("/v3/templates/x", 0), NB_E2B_TPL_OTHER);
    assert_int_equal(nb_e2b_match_tpl("/v3/templatesx", 0), NB_ROUTE_NONE);
    assert_int_equal(nb_e2b_match_tpl("/v2/templates/t/builds/b", 0), NB_E2B_TPL_BUILD);
    assert_int_equal(nb_e2b_match_tpl("/v2/templates/t/builds", 0), NB_E2B_TPL_OTHER);
    assert_int_equal(nb_e2b_match_tpl("/v2/templates/t/x/b", 0), NB_E2B_TPL_OTHER);
    snprintf(p, sizeof(p), "/templates/t/files/%s", h);
    assert_int_equal(nb_e2b_match_tpl(p, 0), NB_E2B_TPL_FILES);
    assert_int_equal(nb_e2b_match_tpl("/templates/t/filesx/h", 0), NB_ROUTE_NONE);
    assert_int_equal(nb_e2b_match_tpl("/templates/t/builds/b/status", 0), NB_E2B_TPL_STATUS);
    assert_int_equal(nb_e2b_match_tpl("/templates/t/builds/b/statusx", 0), NB_ROUTE_NONE);
    /* the native API's without an E2B key */
    assert_int_equal(nb_e2b_match_tpl("/templates", 0), NB_ROUTE_NONE);
    assert_int_equal(nb_e2b_match_tpl("/templates/t", 0), NB_ROUTE_NONE);
    assert_int_equal(nb_e2b_match_tpl("/templates/t/logs", 0), NB_ROUTE_NONE);
    assert_int_equal(nb_e2b_match_tpl("/templates/aliases/base", 0), NB_ROUTE_NONE);
    /* E2B's with one */
    assert_int_equal(nb_e2b_match_tpl("/templates", 1), NB_E2B_TPL_LIST);
    assert_int_equal(nb_e2b_match_tpl("/templates/t", 1), NB_E2B_TPL_ONE);
    assert_int_equal(nb_e2b_match_tpl("/templates/aliases/base", 1), NB_E2B_TPL_ALIAS);
    assert_int_equal(nb_e2b_match_tpl("/templates/t/logs", 1), NB_E2B_TPL_OTHER);
    assert_int_equal(nb_e2b_match_tpl("/templatesx", 1), NB_ROUTE_NONE);
    assert_int_equal(nb_e2b_match_tpl("/sandboxes", 1), NB_ROUTE_NONE);
    assert_string_equal(nb_e2b_path(NB_E2B_TPL_FILES), "/templates/{id}/files/{hash}");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_e2b_paths),
        cmocka_unit_test(test_e2b_path_matches_its_shape),
        cmocka_unit_test(test_e2b_snapshot_paths),
        cmocka_unit_test(test_e2b_template_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
