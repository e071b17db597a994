/*
 * api.h - the HTTP API handlers, one per route (see docs/API.md). The
 * router in worker.c has checked the method, auth and id syntax already.
 */
#ifndef NB_API_H
#define NB_API_H

#include <yajl/yajl_tree.h>

#include "app.h"
#include "http.h"

void api_healthz(struct nb_app *a, struct nb_req *r);
void api_sandbox_create(struct nb_app *a, struct nb_req *r);
void api_sandbox_list(struct nb_app *a, struct nb_req *r);
void api_sandbox_get(struct nb_app *a, struct nb_req *r, const char *id);
void api_sandbox_delete(struct nb_app *a, struct nb_req *r, const char *id);
void api_sandbox_timeout(struct nb_app *a, struct nb_req *r, const char *id);
void api_sandbox_exec(struct nb_app *a, struct nb_req *r, const char *id);
void api_run(struct nb_app *a, struct nb_req *r);
void api_port_open(struct nb_app *a, struct nb_req *r, const char *id);
void api_port_list(struct nb_app *a, struct nb_req *r, const char *id);
void api_port_close(struct nb_app *a, struct nb_req *r, const char *id, const char *port);
/* op: "" (GET/PUT/DELETE a path), "mkdir" or "move" */
void api_files(struct nb_app *a, struct nb_req *r, const char *id, const char *op);
/* pid "" lists; op "" (GET/DELETE a process) or "stdin" */
void api_processes(struct nb_app *a, struct nb_req *r, const char *id, const char *pid,
                   const char *op);
/* MCP Streamable HTTP (api_mcp.c): one JSON-RPC message; end a session */
void api_mcp_post(struct nb_app *a, struct nb_req *r);
void api_mcp_delete(struct nb_app *a, struct nb_req *r);

/*
 * Read and parse the JSON body within the configured caps. On failure the
 * error answer has been sent and -1 is returned. *out is NULL for an empty
 * body; the caller frees it with yajl_tree_free.
 */
int api_read_json(struct nb_app *a, struct nb_req *r, yajl_val *out);
/*
 * The same; a string holding an escaped NUL (\u0000), which every field
 * would silently cut short, is refused with 400 nul_code ("bad_field" for
 * api_read_json, "bad_path" where every string is a path).
 */
int api_read_json_nul(struct nb_app *a, struct nb_req *r, yajl_val *out, const char *nul_code);

/*
 * Validate an env object ({NAME: "value"}) into "NAME=value" strings
 * (caller frees each and the array). -1 with ae set on a bad name/size.
 */
int api_env_list(const struct nb_conf *c, yajl_val env, char ***out, unsigned *n,
                 struct nb_apierr *ae);
void api_env_free(char **env, unsigned n);

/*
 * A command's timeout field (NULL: exec_timeout) into *out; -1 after
 * answering 422 when it is not in (0, exec_timeout_max].
 */
int api_exec_timeout(const struct nb_conf *c, yajl_val v, double *out, struct nb_req *r);

#endif
