/*
 * code.h - the code interpreter's engine: one request to a sandbox's code
 * bridge and the JSON objects that answer it (code.c).
 *
 * The bridge (bridge.py, run by nanobox-init inside the sandbox) keeps the
 * sandbox's execution contexts: Jupyter kernels for python, node and bash
 * processes of its own. The host reaches it through the agent: request
 * K, the bridge's hello, one JSON request, then JSON objects until the
 * end (request K in docs/AGENT-PROTOCOL.md). No HTTP here: objects
 * go to a callback as they come, errors come back as nb_apierr.
 */
#ifndef NB_CODE_H
#define NB_CODE_H

#include <stddef.h>
#include <yajl/yajl_tree.h>

#include "app.h"

/*
 * The bridge's name of a request's language ("python", "javascript" or its
 * alias "js", "typescript" or its alias "ts", "bash"); NULL when there is no
 * such language.
 */
const char *nb_code_language(const char *s);

/*
 * Called with each object of the answer (an event of a run, a context's
 * info) as a parsed tree: 0 when done with it (it is freed), 1 to keep it
 * (the callee frees it with yajl_tree_free), -1 to stop the call: the
 * connection to the bridge is closed, which interrupts a running execution.
 */
typedef int (*nb_code_object_fn)(void *ctx, yajl_val obj);

/* One execution (op "run"). */
struct nb_code_run {
    const char *code;
    const char *context;  /* NULL: the default context of language */
    const char *language; /* the bridge's name (nb_code_language); NULL: python, or the context's */
    double timeout;       /* seconds; the host gives up 10 s after it */
    char **env;           /* "NAME=value" strings for this execution only */
    unsigned n_env;
    size_t max_output; /* bytes of text and result data the bridge keeps */
    int client_fd;     /* the FastCGI connection: its loss interrupts the execution; -1 none */
    nb_code_object_fn on_event; /* each event, the last one "end" */
    void *ctx;
};

/*
 * Run rq in the sandbox of slot. 0 when the execution ended (its end event
 * was handed over) or the client left (*client_gone set, or on_event said
 * stop); -1 with ae set otherwise: 409 no_kernel (no interpreter for the
 * language in the image), 404 unknown_context, 422 language_mismatch (the
 * context is of another language), 429 busy (too many contexts), 502
 * bad_gateway (the bridge sent something that is not an event), 504
 * agent_timeout, or the agent's own errors (agent.h).
 */
int nb_code_run(const struct nb_slot *slot, const struct nb_code_run *rq, int *client_gone,
                struct nb_apierr *ae);

/* Interrupt what context runs (fine when idle). 404 unknown_context. */
int nb_code_interrupt(const struct nb_slot *slot, const char *context, struct nb_apierr *ae);

/* Each context's info object to cb. */
int nb_code_contexts(const struct nb_slot *slot, nb_code_object_fn cb, void *ctx,
                     struct nb_apierr *ae);

/*
 * Create a context of language (the bridge's name) in cwd (NULL: the
 * workspace) with env added; its info to cb once its kernel is ready.
 */
int nb_code_create(const struct nb_slot *slot, const char *language, const char *cwd, char **env,
                   unsigned n_env, nb_code_object_fn cb, void *ctx, struct nb_apierr *ae);

/* Restart a context (its state is gone); its new info to cb. */
int nb_code_restart(const struct nb_slot *slot, const char *context, nb_code_object_fn cb,
                    void *ctx, struct nb_apierr *ae);

/* Delete a context (its kernel stops). */
int nb_code_delete(const struct nb_slot *slot, const char *context, struct nb_apierr *ae);

/*
 * Start the default python context (op "warm"), waiting up to timeout_ms
 * for its kernel: what the warm pool does before it keeps a sandbox of
 * the code image.
 */
int nb_code_warm(const struct nb_slot *slot, int timeout_ms, struct nb_apierr *ae);

#endif
