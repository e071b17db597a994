/*
 * api.h - the HTTP API handlers, one per route (see docs/API.md). The
 * router has checked the method, auth and id syntax already. A handler
 * validates its input, calls an engine (sandbox.c, exec.c, files.c,
 * procs.c, ports.c, code.c) and shapes the answer; it answers only success, and
 * returns its error for the HTTP layer to answer (nb_http_finalize).
 */
#ifndef NB_API_H
#define NB_API_H

#include <stdio.h>

#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#include "api_common.h"
#include "app.h"
#include "http.h"
#include "route.h"

/*
 * The API's route table (api_routes.c), which the worker hands to the HTTP
 * layer (nb_http_set_routes): every route, its method and its checks.
 */
extern const struct nb_route_entry nb_api_routes[];
extern const size_t nb_api_n_routes;
/*
 * The one request served past the table (api_routes.c): nginx's
 * port-on-demand check, a request with NANOBOX_PORT_ON_DEMAND (the worker
 * serves it so, never a client's); api_port_on_demand below.
 */
extern int (*const nb_api_port_on_demand)(struct nb_app *a, struct nb_req *r, struct nb_apierr *ae);

/* Each: NB_OK once answered, or NB_ERR with ae set (route.h's nb_route_handler). */
int api_healthz(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                struct nb_apierr *ae);
/* GET /metrics (Prometheus text) and GET /sandbox/{id}/metrics (JSON), api_metrics.c */
int api_metrics(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                struct nb_apierr *ae);
/* GET /openapi.json: the API's description (api_openapi.c) */
int api_openapi(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                struct nb_apierr *ae);
int api_sandbox_metrics(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                        struct nb_apierr *ae);
int api_sandbox_create(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                       struct nb_apierr *ae);
int api_sandbox_list(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                     struct nb_apierr *ae);
int api_sandbox_get(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                    struct nb_apierr *ae);
int api_sandbox_delete(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                       struct nb_apierr *ae);
int api_sandbox_pause(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                      struct nb_apierr *ae);
int api_sandbox_resume(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                       struct nb_apierr *ae);
int api_sandbox_timeout(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                        struct nb_apierr *ae);
int api_sandbox_exec(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                     struct nb_apierr *ae);
/* a PTY session (api_exec.c): ra->arg is its pid */
int api_pty_input(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                  struct nb_apierr *ae);
int api_pty_resize(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                   struct nb_apierr *ae);
int api_run(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
            struct nb_apierr *ae);
int api_port_open(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                  struct nb_apierr *ae);
int api_port_list(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                  struct nb_apierr *ae);
/* ra->arg: the sandboxport */
int api_port_close(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                   struct nb_apierr *ae);

/*
 * nginx's check before it proxies a port host with no forwarder yet
 * (nanobox-ports.conf.in, auth_request with NANOBOX_PORT_ON_DEMAND and the
 * host in NANOBOX_PORT_HOST): 204 once the port is open (ports_on_demand,
 * nb_port_open_on_demand), else 403 with the reason in X-Nanobox-Port:
 * off, out_of_range, not_found, not_listening, too_many_ports, quota,
 * no_free_port, fwd_failed.
 */
int api_port_on_demand(struct nb_app *a, struct nb_req *r, struct nb_apierr *ae);
/* files (api_files.c): GET/PUT/DELETE ?path=, POST mkdir and move */
int api_files_get(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                  struct nb_apierr *ae);
int api_files_put(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                  struct nb_apierr *ae);
int api_files_archive_get(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                          struct nb_apierr *ae);
int api_files_watch(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                    struct nb_apierr *ae);
int api_files_archive_put(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                          struct nb_apierr *ae);
int api_files_delete(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                     struct nb_apierr *ae);
int api_files_mkdir(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                    struct nb_apierr *ae);
int api_files_move(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                   struct nb_apierr *ae);
/* background processes (api_processes.c): list; ra->arg is the pid for the others */
int api_procs_list(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                   struct nb_apierr *ae);
int api_procs_get(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                  struct nb_apierr *ae);
int api_procs_stdin(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                    struct nb_apierr *ae);
int api_procs_signal(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                     struct nb_apierr *ae);
/* the code interpreter (api_code.c): run a cell, interrupt; contexts (ra->arg: {ctx}) */
int api_code_run(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                 struct nb_apierr *ae);
int api_code_interrupt(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                       struct nb_apierr *ae);
int api_contexts_list(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                      struct nb_apierr *ae);
int api_contexts_create(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                        struct nb_apierr *ae);
int api_contexts_delete(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                        struct nb_apierr *ae);
int api_contexts_restart(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                         struct nb_apierr *ae);
/* MCP Streamable HTTP (api_mcp.c): one JSON-RPC message; end a session */
int api_sandbox_network(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                        struct nb_apierr *ae);
int api_mcp_post(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                 struct nb_apierr *ae);
int api_mcp_delete(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                   struct nb_apierr *ae);
/* volumes (api_volumes.c): ra->arg is the {name} (or the volume's id) */
int api_volumes_list(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                     struct nb_apierr *ae);
int api_volumes_create(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                       struct nb_apierr *ae);
int api_volume_get(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                   struct nb_apierr *ae);
int api_volume_delete(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                      struct nb_apierr *ae);
/* templates (api_templates.c): ra->arg is the {name} */
int api_templates_list(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                       struct nb_apierr *ae);
int api_templates_create(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                         struct nb_apierr *ae);
int api_template_get(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                     struct nb_apierr *ae);
int api_template_delete(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                        struct nb_apierr *ae);
/* POST /sandbox/{id}/snapshot (api_templates.c) */
int api_sandbox_snapshot(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                         struct nb_apierr *ae);
/* POST /sandbox/{id}/fork (api_sandbox.c) */
int api_sandbox_fork(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                     struct nb_apierr *ae);
int api_template_logs(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                      struct nb_apierr *ae);

#endif
