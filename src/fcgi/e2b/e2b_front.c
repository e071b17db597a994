/*
 * e2b_front.c - the E2B front (docs/E2B.md) as the HTTP layer sees it
 * (http.h, struct nb_front): which requests are E2B's (e2b_route.h), its
 * rows of the route table, its key style ("X-API-KEY: e2b_<key>") and its
 * error shapes, {"code": status, "message"} on the control plane and
 * Connect's on envd's procedures. The process layer registers it
 * (worker.c) when it is compiled in (./configure --disable-e2b leaves it
 * out). Like api_routes.c, the one file of the front that names handlers.
 */
#include "config.h"

#include <string.h>

#include "e2b_api.h"
#include "e2b_front.h"
#include "e2b_route.h"
#include "e2b_rpc.h"
#include "http.h"
#include "json.h"

#define ID NB_ROUTE_ID
#define ID_404 NB_ROUTE_ID_404 /* E2B's ids are opaque to its SDK: not ours, no sandbox */
#define PUBLIC NB_ROUTE_PUBLIC
#define BULK NB_ROUTE_BULK /* a file's bytes: outside workers_max (pool.c) */

/*
 * The front's rows: E2B's paths, through the same checks and guard as the
 * native API's; their calls are timed under the label "other" (metrics.h).
 */
static const struct nb_route_entry e2b_routes[] = {
    {NB_E2B_SANDBOXES, "", "GET", 0, NB_MR_OTHER, api_e2b_list},
    {NB_E2B_SANDBOXES, "", "POST", 0, NB_MR_OTHER, api_e2b_create},
    {NB_E2B_LIST, "", "GET", 0, NB_MR_OTHER, api_e2b_list},
    {NB_E2B_LIST, "", "POST", 0, NB_MR_OTHER, api_e2b_create_v2},
    {NB_E2B_SANDBOX, "", "GET", ID | ID_404, NB_MR_OTHER, api_e2b_get},
    {NB_E2B_SANDBOX, "", "DELETE", ID | ID_404, NB_MR_OTHER, api_e2b_kill},
    {NB_E2B_OP, "timeout", "POST", ID | ID_404, NB_MR_OTHER, api_e2b_timeout},
    {NB_E2B_OP, "connect", "POST", ID | ID_404, NB_MR_OTHER, api_e2b_connect},
    {NB_E2B_OP, "pause", "POST", ID | ID_404, NB_MR_OTHER, api_e2b_pause},
    {NB_E2B_OP, "resume", "POST", ID | ID_404, NB_MR_OTHER, api_e2b_resume},
    {NB_E2B_OP, "metrics", "GET", ID | ID_404, NB_MR_OTHER, api_e2b_metrics},
    /* snapshots and fork (api_e2b_snap.c), over the snapshot and fork engines */
    {NB_E2B_OP, "snapshots", "POST", ID | ID_404, NB_MR_OTHER, api_e2b_snapshot_create},
    {NB_E2B_OP, "fork", "POST", ID | ID_404, NB_MR_OTHER, api_e2b_fork},
    {NB_E2B_SNAPSHOTS, "", "GET", 0, NB_MR_OTHER, api_e2b_snapshots_list},
    /* logs, network, refreshes...: 501 in E2B's shape */
    {NB_E2B_OP, "*", "*", ID | ID_404, NB_MR_OTHER, api_e2b_not_implemented},
    /* the v2 paths of e2b 2.50 on: connect; logs is 501 as above */
    {NB_E2B_V2_OP, "connect", "POST", ID | ID_404, NB_MR_OTHER, api_e2b_connect_v2},
    {NB_E2B_V2_OP, "*", "*", ID | ID_404, NB_MR_OTHER, api_e2b_not_implemented},
    /* the data plane: no API key (the SDK sends none there); the handler checks the id */
    {NB_E2B_DATA, "/health", "GET", PUBLIC, NB_MR_OTHER, api_e2b_health},
    /* envd's Connect-RPC process.Process (api_e2b_proc.c): the sandbox's access token, not the key */
    {NB_E2B_DATA, "/process.Process/Start", "POST", PUBLIC, NB_MR_OTHER, api_e2b_proc_start},
    {NB_E2B_DATA, "/process.Process/Connect", "POST", PUBLIC, NB_MR_OTHER, api_e2b_proc_connect},
    {NB_E2B_DATA, "/process.Process/List", "POST", PUBLIC, NB_MR_OTHER, api_e2b_proc_list},
    {NB_E2B_DATA, "/process.Process/SendInput", "POST", PUBLIC, NB_MR_OTHER, api_e2b_proc_input},
    {NB_E2B_DATA, "/process.Process/CloseStdin", "POST", PUBLIC, NB_MR_OTHER,
     api_e2b_proc_close_stdin},
    {NB_E2B_DATA, "/process.Process/SendSignal", "POST", PUBLIC, NB_MR_OTHER, api_e2b_proc_signal},
    {NB_E2B_DATA, "/process.Process/Update", "POST", PUBLIC, NB_MR_OTHER, api_e2b_proc_update},
    /* envd's Connect-RPC filesystem.Filesystem (api_e2b_fs.c) */
    {NB_E2B_DATA, "/filesystem.Filesystem/Stat", "POST", PUBLIC, NB_MR_OTHER, api_e2b_fs_stat},
    {NB_E2B_DATA, "/filesystem.Filesystem/ListDir", "POST", PUBLIC, NB_MR_OTHER, api_e2b_fs_list},
    {NB_E2B_DATA, "/filesystem.Filesystem/MakeDir", "POST", PUBLIC, NB_MR_OTHER, api_e2b_fs_mkdir},
    {NB_E2B_DATA, "/filesystem.Filesystem/Move", "POST", PUBLIC, NB_MR_OTHER, api_e2b_fs_move},
    {NB_E2B_DATA, "/filesystem.Filesystem/Remove", "POST", PUBLIC, NB_MR_OTHER, api_e2b_fs_remove},
    {NB_E2B_DATA, "/filesystem.Filesystem/WatchDir", "POST", PUBLIC, NB_MR_OTHER, api_e2b_fs_watch},
    {NB_E2B_DATA, "/filesystem.Filesystem/CreateWatcher", "POST", PUBLIC, NB_MR_OTHER,
     api_e2b_fs_watcher_create},
    {NB_E2B_DATA, "/filesystem.Filesystem/GetWatcherEvents", "POST", PUBLIC, NB_MR_OTHER,
     api_e2b_fs_watcher_events},
    {NB_E2B_DATA, "/filesystem.Filesystem/RemoveWatcher", "POST", PUBLIC, NB_MR_OTHER,
     api_e2b_fs_watcher_remove},
    /* envd's files and the code interpreter (api_e2b_data.c; the port checked there) */
    {NB_E2B_DATA, "/files", "GET", PUBLIC | BULK, NB_MR_OTHER, api_e2b_files_get},
    {NB_E2B_DATA, "/files", "POST", PUBLIC | BULK, NB_MR_OTHER, api_e2b_files_post},
    {NB_E2B_DATA, "/execute", "POST", PUBLIC, NB_MR_OTHER, api_e2b_execute},
    {NB_E2B_DATA, "/contexts", "GET", PUBLIC, NB_MR_OTHER, api_e2b_contexts_list},
    {NB_E2B_DATA, "/contexts", "POST", PUBLIC, NB_MR_OTHER, api_e2b_contexts_create},
    {NB_E2B_DATA, "/contexts/{ctx}", "DELETE", PUBLIC, NB_MR_OTHER, api_e2b_context_delete},
    {NB_E2B_DATA, "/contexts/{ctx}/restart", "POST", PUBLIC, NB_MR_OTHER, api_e2b_context_restart},
    {NB_E2B_DATA, "*", "*", PUBLIC, NB_MR_OTHER, api_e2b_not_implemented},
    /* volumes (api_e2b_volumes.c): the native API's, for a key with E2B's prefix */
    {NB_E2B_VOLUMES, "", "GET", 0, NB_MR_OTHER, api_e2b_volumes_list},
    {NB_E2B_VOLUMES, "", "POST", 0, NB_MR_OTHER, api_e2b_volumes_create},
    {NB_E2B_VOLUME, "", "GET", 0, NB_MR_OTHER, api_e2b_volume_get},
    {NB_E2B_VOLUME, "", "DELETE", 0, NB_MR_OTHER, api_e2b_volume_delete},
    /* E2B's template API (api_e2b_tpl.c); the upload link's PUT is signed, not keyed */
    {NB_E2B_TPL_V3, "", "POST", 0, NB_MR_OTHER, api_e2b_tpl_create},
    {NB_E2B_TPL_FILES, "", "GET", 0, NB_MR_OTHER, api_e2b_tpl_file_link},
    {NB_E2B_TPL_FILES, "", "PUT", PUBLIC | BULK, NB_MR_OTHER, api_e2b_tpl_file_put},
    {NB_E2B_TPL_BUILD, "", "POST", 0, NB_MR_OTHER, api_e2b_tpl_build},
    {NB_E2B_TPL_STATUS, "", "GET", 0, NB_MR_OTHER, api_e2b_tpl_status},
    {NB_E2B_TPL_ALIAS, "", "GET", 0, NB_MR_OTHER, api_e2b_tpl_alias},
    {NB_E2B_TPL_ONE, "", "DELETE", 0, NB_MR_OTHER, api_e2b_tpl_delete},
    {NB_E2B_TPL_LIST, "", "GET", 0, NB_MR_OTHER, api_e2b_tpl_list},
    {NB_E2B_TPL_ONE, "*", "*", 0, NB_MR_OTHER, api_e2b_not_implemented},
    {NB_E2B_TPL_OTHER, "*", "*", 0, NB_MR_OTHER, api_e2b_not_implemented},
};

/* Does r carry E2B's key style, "X-API-KEY: e2b_..." (and no native Authorization)? */
static int e2b_keyed(const struct nb_req *r)
{
    const char *k = nb_http_param(r, "HTTP_X_API_KEY");
    return k != NULL && !strncmp(k, "e2b_", 4) && nb_http_param(r, "HTTP_AUTHORIZATION") == NULL;
}

/*
 * A request of the data plane names its sandbox in the headers
 * E2b-Sandbox-Id/Port, or (E2B_DOMAIN) in the host, <port>-<id>.<domain>,
 * whatever its path, or is envd's /files without either; the control
 * plane by its path.
 */
static enum nb_route e2b_match(const struct nb_req *r, struct nb_route_args *ra)
{
    const char *sbx = nb_http_param(r, "HTTP_E2B_SANDBOX_ID");
    const char *port = nb_http_param(r, "HTTP_E2B_SANDBOX_PORT");
    const char *key = nb_http_param(r, "HTTP_X_API_KEY");
    char host_id[40], host_port[8];
    enum nb_route tpl;

    if (sbx == NULL && nb_e2b_host(nb_http_param(r, "HTTP_HOST"), host_id, sizeof(host_id),
                                   host_port, sizeof(host_port))) {
        sbx = host_id;
        port = host_port;
    }
    /* a signed URL of E2B_SANDBOX_URL's mode (files.downloadUrl/uploadUrl) names no
     * sandbox: its handler finds the one whose token signed it (e2b_common.c) */
    if (sbx == NULL && !strcmp(r->path, "/files"))
        sbx = "";
    if (sbx == NULL) {
        enum nb_route v = nb_e2b_match_volume(r->path, nb_http_param(r, "HTTP_X_API_KEY"), ra->arg,
                                              sizeof(ra->arg));
        if (v != NB_ROUTE_NONE) {
            ra->id[0] = ra->op[0] = '\0';
            return v;
        }
    }
    /* E2B's template paths: /templates itself only for an E2B key (else the native API's) */
    tpl = nb_e2b_match_tpl(r->path, key != NULL && !strncmp(key, "e2b_", 4));
    if (sbx == NULL && tpl != NB_ROUTE_NONE)
        return tpl;
    if (sbx != NULL)
        return nb_e2b_match_data(r->path, sbx, port, ra->id, sizeof(ra->id), ra->arg,
                                 sizeof(ra->arg), ra->op, sizeof(ra->op));
    if (e2b_keyed(r)) {
        /* snapshots' paths beside nanobox's own /templates: E2B's by its key */
        enum nb_route shape = nb_e2b_match_snapshots(r->path, ra->arg, sizeof(ra->arg));
        if (shape != NB_ROUTE_NONE) {
            ra->id[0] = ra->op[0] = '\0';
            return shape;
        }
    }
    return nb_e2b_match_path(r->path, ra->id, sizeof(ra->id), ra->arg, sizeof(ra->arg), ra->op,
                             sizeof(ra->op));
}

/*
 * An error of one of envd's Connect-RPC calls (e2b_rpc.h): a streaming
 * call's is a 200 stream of one end-of-stream envelope (the client reads
 * no message from a non-200 stream), a unary call's {"code": "not_found",
 * "message"} with the status Connect gives that code.
 */
static void rpc_error(struct nb_req *r, const struct nb_apierr *ae)
{
    const char *code = nb_rpc_code(ae->err, ae->code);
    struct nb_buf b;
    nb_buf_init(&b, sizeof(ae->msg) + 256);
    if (nb_rpc_is_stream_ctype(nb_http_param(r, "CONTENT_TYPE"))) {
        nb_rpc_end_stream(&b, code, ae->msg);
        nb_http_body(r, 200, NB_RPC_STREAM_CTYPE, b.data, b.len);
    } else {
        nb_rpc_error_body(&b, code, ae->msg);
        nb_http_body(r, nb_rpc_http_status(code), "application/json", b.data, b.len);
    }
    nb_buf_free(&b);
}

static void e2b_error(struct nb_req *r, const struct nb_apierr *ae)
{
    yajl_gen g;
    if (nb_rpc_is_procedure(r->path)) {
        rpc_error(r, ae);
        return;
    }
    /* E2B's Error schema: the SDK reads code (kill: 404 means false) and message */
    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_kv_int(g, "code", nb_http_status_of(ae->err));
    nb_json_kv_str(g, "message", ae->msg);
    yajl_gen_map_close(g);
    nb_http_json(r, nb_http_status_of(ae->err), g);
    yajl_gen_free(g);
}

static int e2b_stream_error(struct nb_req *r, const char *ctype, const struct nb_apierr *ae)
{
    if (ctype != NULL && !strcmp(ctype, "application/x-ndjson")) {
        /* the code interpreter's error line, which E2B's SDK reads */
        yajl_gen g = nb_json_gen();
        yajl_gen_map_open(g);
        nb_json_kv_str(g, "type", "error");
        nb_json_kv_str(g, "name", ae->code);
        nb_json_kv_str(g, "value", ae->msg);
        nb_json_kv_str(g, "traceback", "");
        yajl_gen_map_close(g);
        nb_http_stream_line(r, g);
        yajl_gen_free(g);
        return 1;
    }
    if (ctype != NULL && !strcmp(ctype, NB_RPC_STREAM_CTYPE)) {
        /* a Connect stream ends with its end-of-stream envelope, the error in it */
        struct nb_buf b;
        nb_buf_init(&b, sizeof(ae->msg) + 256);
        nb_rpc_end_stream(&b, nb_rpc_code(ae->err, ae->code), ae->msg);
        nb_http_stream_bytes(r, b.data, b.len);
        nb_buf_free(&b);
        return 1;
    }
    return 0; /* a byte stream: cut short, as the HTTP layer does */
}

const struct nb_front nb_e2b_front = {
    .name = "e2b",
    .match = e2b_match,
    .sub = nb_e2b_sub,
    .path = nb_e2b_path,
    .routes = e2b_routes,
    .n_routes = sizeof(e2b_routes) / sizeof(e2b_routes[0]),
    /* the E2B SDK refuses a key without "e2b_" before it sends anything */
    .key_prefix = "e2b_",
    /* nginx's @nanobox_e2b_unauthorized (nanobox.conf.in) repeats it word for word */
    .unauthorized = "missing or wrong API key: send \"X-API-KEY: e2b_<key>\"",
    .error = e2b_error,
    .stream_error = e2b_stream_error,
};
