/*
 * api_run.c - POST /run: one fresh sandbox per call (the hardened one-shot
 * pattern). The code is handed to the interpreter as one argv entry, never
 * spliced into a shell string; stdin, when given, is fed to it by the
 * sandbox's agent. The sandbox is destroyed (gone from the API before the
 * answer; its container removed just after it, by an nb_http_after hook)
 * on every path once it exists: success, failure to run, timeout.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "exec.h"
#include "json.h"
#include "log.h"
#include "metrics.h"
#include "sandbox.h"

/* Interpreters in the default image, as argv prefixes before the code. */
static const struct {
    const char *language;
    const char *argv[3];
} run_languages[] = {
    {"python", {"python3", "-c", NULL}},
    {"sh", {"/bin/sh", "-c", NULL}},
};

/* Slack on top of the run's timeout before the reaper may destroy it. */
#define RUN_TTL_SLACK 60

/* The second half of a run sandbox's destroy, for after the answer. */
struct run_destroy {
    char id[NB_ID_LEN + 1];
    char cid[NB_CID_LEN + 1];
    uint32_t gen;
};

/* An nb_http_hook_fn: remove the container, free the slot, free arg. */
static void run_destroy_after(struct nb_app *a, void *arg)
{
    struct run_destroy *d = arg;
    struct nb_derr de = {0};
    if (nb_sandbox_finish_destroy(a, d->id, d->cid, d->gen, &de) != 0)
        /* left DESTROYING: reconciliation retries once it counts as stuck */
        nb_warn("run: could not remove sandbox %s: %s (reconciliation will)", d->id, de.msg);
    else
        nb_metrics_destroy(NB_MD_RUN);
    free(d);
}

int api_run(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
            struct nb_apierr *ae)
{
    const struct nb_conf *c = &a->conf;
    struct nb_jfield f[] = {
        {"language", NB_JT_STRING, NULL},
        {"code", NB_JT_STRING, NULL},
        {"timeout", NB_JT_NUMBER, NULL},
        {"stdin", NB_JT_STRING, NULL},
    };
    enum { F_LANGUAGE, F_CODE, F_TIMEOUT, F_STDIN };
    struct nb_sandbox_spec spec;
    struct nb_exec_result res;
    struct nb_apierr dae;
    struct nb_slot slot;
    const char *argv[4];
    struct nb_exec_req rq = {0};
    unsigned li, n = 0;
    const char *language, *code;
    double timeout = c->exec_timeout;
    char err[256];
    yajl_val body = NULL;
    int ran, rc = NB_ERR;
    yajl_gen g;

    (void)ra;
    nb_exec_result_init(&res, c->max_output);
    if (api_read_json(a, r, &body, ae) != 0)
        goto out;
    if (nb_json_fields(body, f, sizeof(f) / sizeof(f[0]), err, sizeof(err)) != 0) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field", "%s", err);
        goto out;
    }
    if (f[F_LANGUAGE].val == NULL || f[F_CODE].val == NULL) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field",
                      "fields \"language\" and \"code\" are required");
        goto out;
    }
    language = nb_json_string(f[F_LANGUAGE].val);
    for (li = 0; li < sizeof(run_languages) / sizeof(run_languages[0]); li++)
        if (!strcmp(run_languages[li].language, language))
            break;
    if (li == sizeof(run_languages) / sizeof(run_languages[0])) {
        nb_apierr_set(ae, NB_E_OUT_OF_RANGE, "out_of_range",
                      "language must be \"python\" or \"sh\" (what the image has)");
        goto out;
    }
    code = nb_json_string(f[F_CODE].val);
    if (strlen(code) > c->max_command) {
        nb_apierr_set(ae, NB_E_OUT_OF_RANGE, "out_of_range",
                      "code must be at most %zu bytes (max_command)", c->max_command);
        goto out;
    }
    if (api_exec_timeout(c, f[F_TIMEOUT].val, &timeout, ae) != 0)
        goto out;
    if (f[F_STDIN].val) {
        rq.stdin_data = nb_json_string(f[F_STDIN].val);
        rq.stdin_len = strlen(rq.stdin_data);
    }
    argv[n++] = run_languages[li].argv[0];
    argv[n++] = run_languages[li].argv[1];
    argv[n++] = code;
    argv[n] = NULL;

    /* the operator's defaults, which are already the strictest allowed */
    memset(&spec, 0, sizeof(spec));
    snprintf(spec.image, sizeof(spec.image), "%s", c->images[0]);
    spec.memory = c->memory;
    spec.nano_cpus = c->nano_cpus;
    spec.pids = c->pids;
    spec.ttl = (unsigned)timeout + RUN_TTL_SLACK; /* the reaper's backstop if we die */
    snprintf(spec.metadata, sizeof(spec.metadata), "{\"nanobox.run\":\"1\"}");
    spec.key = nb_http_key(r);
    if (nb_sandbox_create(a, &spec, &slot, ae) != 0)
        goto out;
    nb_http_audit(r, "create", slot.id);
    rq.argv = argv;
    rq.timeout = timeout;
    rq.client_fd = nb_http_client_fd(r);
    ran = nb_exec_run(a, &slot, &rq, &res, ae);
    {
        /* gone from the API now; its container is removed once we have answered */
        struct run_destroy *d = nb_xcalloc(1, sizeof(*d));
        if (nb_sandbox_mark_destroy(a, slot.id, d->cid, &d->gen, &dae) != 0) {
            nb_warn("run: could not destroy sandbox %s: %s (the reaper will)", slot.id, dae.msg);
            free(d);
        } else {
            snprintf(d->id, sizeof(d->id), "%s", slot.id);
            if (nb_http_after(r, run_destroy_after, d) != 0)
                run_destroy_after(a, d); /* no room left: before the answer, then */
        }
    }
    if (ran != 0)
        goto out;
    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_exec_result_json(g, &res, 0);
    yajl_gen_map_close(g);
    nb_http_json(r, 200, g);
    yajl_gen_free(g);
    rc = NB_OK;
out:
    yajl_tree_free(body);
    nb_exec_result_free(&res);
    return rc;
}
