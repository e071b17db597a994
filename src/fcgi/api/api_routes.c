/*
 * api_routes.c - the API's route table (docs/API.md): which handler serves
 * which method on which path, what the HTTP layer checks before it calls
 * the handler (the API key unless public, the sandbox id's and the pid's
 * syntax), and the latency histogram its calls are timed in (metrics.h,
 * the label "route" of GET /metrics). A route is added here (its shape,
 * if new, in route.h's NB_ROUTE_SHAPES), and described in
 * docs/openapi.yaml (tests/integration/test_openapi.py compares the two
 * through `nanobox-fcgi -R`); the order of one path's rows is the order
 * of its Allow header.
 */
#include "config.h"

#include "api.h"

#define ID NB_ROUTE_ID
#define PID NB_ROUTE_PID
#define CTX NB_ROUTE_CTX
#define PUBLIC NB_ROUTE_PUBLIC
#define AWAKE NB_ROUTE_AWAKE /* 409 paused while paused (or resumed with auto_resume) */
#define BULK NB_ROUTE_BULK   /* a file's bytes: outside workers_max (pool.c) */

const struct nb_route_entry nb_api_routes[] = {
    {NB_ROUTE_HEALTHZ, "", "GET", NB_ROUTE_PUBLIC | NB_ROUTE_HEAD, NB_MR_HEALTHZ, api_healthz},
    /* Prometheus: the API key, or the operator's metrics_token */
    {NB_ROUTE_METRICS, "", "GET", NB_ROUTE_METRICS_AUTH | NB_ROUTE_HEAD, NB_MR_METRICS,
     api_metrics},
    {NB_ROUTE_USAGE, "", "GET", ID, NB_MR_SANDBOX_METRICS, api_sandbox_metrics},
    /* the OpenAPI description (docs/openapi.yaml): public, like the docs */
    {NB_ROUTE_OPENAPI, "", "GET", NB_ROUTE_PUBLIC | NB_ROUTE_HEAD, NB_MR_OTHER, api_openapi},
    {NB_ROUTE_RUN, "", "POST", 0, NB_MR_RUN, api_run},
    /* no GET: the server sends nothing unasked, so it offers no SSE stream */
    {NB_ROUTE_MCP, "", "POST", 0, NB_MR_MCP, api_mcp_post},
    {NB_ROUTE_MCP, "", "DELETE", 0, NB_MR_MCP, api_mcp_delete},
    {NB_ROUTE_SANDBOXES, "", "GET", 0, NB_MR_LIST, api_sandbox_list},
    {NB_ROUTE_SANDBOXES, "", "POST", 0, NB_MR_CREATE, api_sandbox_create},
    {NB_ROUTE_SANDBOX, "", "GET", ID, NB_MR_GET, api_sandbox_get},
    {NB_ROUTE_SANDBOX, "", "DELETE", ID, NB_MR_DESTROY, api_sandbox_delete},
    {NB_ROUTE_TIMEOUT, "", "POST", ID, NB_MR_TIMEOUT, api_sandbox_timeout},
    {NB_ROUTE_PAUSE, "", "POST", ID, NB_MR_PAUSE, api_sandbox_pause},
    {NB_ROUTE_RESUME, "", "POST", ID, NB_MR_RESUME, api_sandbox_resume},
    {NB_ROUTE_EXEC, "", "POST", ID | AWAKE, NB_MR_EXEC, api_sandbox_exec},
    {NB_ROUTE_NETWORK, "", "PUT", ID, NB_MR_NETWORK, api_sandbox_network},
    {NB_ROUTE_PORT_OPEN, "", "POST", ID | AWAKE, NB_MR_PORTS, api_port_open},
    {NB_ROUTE_PORTS, "", "GET", ID | AWAKE, NB_MR_PORTS, api_port_list},
    {NB_ROUTE_PORT, "", "DELETE", ID | AWAKE, NB_MR_PORTS, api_port_close},
    {NB_ROUTE_FILES, "", "GET", ID | AWAKE | BULK, NB_MR_FILES, api_files_get},
    {NB_ROUTE_FILES, "", "PUT", ID | AWAKE | BULK, NB_MR_FILES, api_files_put},
    {NB_ROUTE_FILES, "", "DELETE", ID | AWAKE | BULK, NB_MR_FILES, api_files_delete},
    {NB_ROUTE_FILES, "mkdir", "POST", ID | AWAKE, NB_MR_FILES, api_files_mkdir},
    {NB_ROUTE_FILES, "move", "POST", ID | AWAKE, NB_MR_FILES, api_files_move},
    /* a directory tree as one tar, out and in (tarstream.c) */
    {NB_ROUTE_FILES, "archive", "GET", ID | AWAKE | BULK, NB_MR_FILES, api_files_archive_get},
    {NB_ROUTE_FILES, "archive", "PUT", ID | AWAKE | BULK, NB_MR_FILES, api_files_archive_put},
    /* a directory's changes, streamed (NDJSON) until the client leaves */
    {NB_ROUTE_FILES, "watch", "GET", ID | AWAKE, NB_MR_FILES, api_files_watch},
    {NB_ROUTE_PROCS, "", "GET", ID | AWAKE, NB_MR_PROCESSES, api_procs_list},
    {NB_ROUTE_PROCS, "{pid}", "GET", ID | PID | AWAKE, NB_MR_PROCESSES, api_procs_get},
    {NB_ROUTE_PROCS, "{pid}", "DELETE", ID | PID | AWAKE, NB_MR_PROCESSES, api_procs_signal},
    {NB_ROUTE_PROCS, "{pid}/stdin", "POST", ID | PID | AWAKE, NB_MR_PROCESSES, api_procs_stdin},
    /* any other op under a pid: a known place with nothing there (404 after the checks) */
    {NB_ROUTE_PROCS, "{pid}/{op}", NULL, ID | PID | AWAKE, NB_MR_PROCESSES, NULL},
    /* a PTY session's input and window (its output streams from POST exec with "pty") */
    {NB_ROUTE_PTY, "{pid}/input", "POST", ID | PID | AWAKE, NB_MR_OTHER, api_pty_input},
    {NB_ROUTE_PTY, "{pid}/resize", "POST", ID | PID | AWAKE, NB_MR_OTHER, api_pty_resize},
    {NB_ROUTE_PTY, "{pid}", NULL, ID | PID | AWAKE, NB_MR_OTHER, NULL},
    {NB_ROUTE_PTY, "{pid}/{op}", NULL, ID | PID | AWAKE, NB_MR_OTHER, NULL},
    {NB_ROUTE_CODE, "", "POST", ID | AWAKE, NB_MR_CODE, api_code_run},
    {NB_ROUTE_CODE, "interrupt", "POST", ID | AWAKE, NB_MR_CODE, api_code_interrupt},
    {NB_ROUTE_CONTEXTS, "", "GET", ID | AWAKE, NB_MR_CONTEXTS, api_contexts_list},
    {NB_ROUTE_CONTEXTS, "", "POST", ID | AWAKE, NB_MR_CONTEXTS, api_contexts_create},
    {NB_ROUTE_CONTEXTS, "{ctx}", "DELETE", ID | CTX | AWAKE, NB_MR_CONTEXTS, api_contexts_delete},
    {NB_ROUTE_CONTEXTS, "{ctx}/restart", "POST", ID | CTX | AWAKE, NB_MR_CONTEXTS,
     api_contexts_restart},
    {NB_ROUTE_CONTEXTS, "{ctx}/{op}", NULL, ID | CTX | AWAKE, NB_MR_CONTEXTS, NULL},

    /* templates: {name} is checked by the handlers (docs/API.md, Templates) */
    {NB_ROUTE_TEMPLATES, "", "GET", 0, NB_MR_OTHER, api_templates_list},
    {NB_ROUTE_TEMPLATES, "", "POST", 0, NB_MR_OTHER, api_templates_create},
    {NB_ROUTE_TEMPLATE, "{name}", "GET", 0, NB_MR_OTHER, api_template_get},
    {NB_ROUTE_TEMPLATE, "{name}", "DELETE", 0, NB_MR_OTHER, api_template_delete},
    {NB_ROUTE_TEMPLATE, "{name}/logs", "GET", 0, NB_MR_OTHER, api_template_logs},
    {NB_ROUTE_TEMPLATE, "{name}/{op}", NULL, 0, NB_MR_OTHER, NULL},
    /* a snapshot: a running or paused sandbox's files as a new template */
    {NB_ROUTE_SNAPSHOT, "", "POST", ID, NB_MR_OTHER, api_sandbox_snapshot},
    /* a fork: its files, env and metadata into N new sandboxes */
    {NB_ROUTE_FORK, "", "POST", ID, NB_MR_OTHER, api_sandbox_fork},
    /* persistent volumes, each its key's (volume.h); {name} checked by the engine */
    {NB_ROUTE_VOLUMES, "", "GET", 0, NB_MR_OTHER, api_volumes_list},
    {NB_ROUTE_VOLUMES, "", "POST", 0, NB_MR_OTHER, api_volumes_create},
    {NB_ROUTE_VOLUME, "", "GET", 0, NB_MR_OTHER, api_volume_get},
    {NB_ROUTE_VOLUME, "", "DELETE", 0, NB_MR_OTHER, api_volume_delete},
};

const size_t nb_api_n_routes = sizeof(nb_api_routes) / sizeof(nb_api_routes[0]);

/* nginx's port-on-demand check: the worker serves it past the table, by this name */
int (*const nb_api_port_on_demand)(struct nb_app *, struct nb_req *,
                                   struct nb_apierr *) = api_port_on_demand;
