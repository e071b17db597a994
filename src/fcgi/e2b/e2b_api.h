/*
 * e2b_api.h - the E2B front's handlers, one per row of its route table
 * (e2b_front.c), over the same engines as the native API's (api/api.h).
 * Like those, a handler answers only success and returns its error for
 * the HTTP layer to answer through the front's error writer.
 */
#ifndef NB_E2B_API_H
#define NB_E2B_API_H

#include "app.h"
#include "http.h"
#include "route.h"

/*
 * The E2B facade (api_e2b.c, docs/E2B.md): E2B's control plane over the
 * same engines; ra->arg is the op of /sandboxes/{id}/{op} and
 * /v2/sandboxes/{id}/{op}.
 */
int api_e2b_create(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                   struct nb_apierr *ae);
int api_e2b_create_v2(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                      struct nb_apierr *ae);
int api_e2b_list(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                 struct nb_apierr *ae);
int api_e2b_get(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                struct nb_apierr *ae);
int api_e2b_kill(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                 struct nb_apierr *ae);
int api_e2b_timeout(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                    struct nb_apierr *ae);
int api_e2b_connect(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                    struct nb_apierr *ae);
int api_e2b_connect_v2(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                       struct nb_apierr *ae);
int api_e2b_pause(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                  struct nb_apierr *ae);
int api_e2b_resume(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                   struct nb_apierr *ae);
/* E2B's volume API (api_e2b_volumes.c): ra->arg is the {volumeID} */
int api_e2b_volumes_list(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                         struct nb_apierr *ae);
int api_e2b_volumes_create(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                           struct nb_apierr *ae);
int api_e2b_volume_get(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                       struct nb_apierr *ae);
int api_e2b_volume_delete(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                          struct nb_apierr *ae);
/* GET /sandboxes/{id}/metrics (api_e2b.c): the usage history in a range (usage.h) */
int api_e2b_metrics(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                    struct nb_apierr *ae);
/*
 * Snapshots (api_e2b_snap.c): POST /sandboxes/{id}/snapshots, GET
 * /snapshots, DELETE /templates/{templateID} (ra->arg); fork (api_e2b.c):
 * POST /sandboxes/{id}/fork
 */
int api_e2b_snapshot_create(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                            struct nb_apierr *ae);
int api_e2b_fork(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                 struct nb_apierr *ae);
int api_e2b_snapshots_list(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                           struct nb_apierr *ae);
/* Connect-RPC filesystem.Filesystem (api_e2b_fs.c) over files.c */
int api_e2b_fs_stat(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                    struct nb_apierr *ae);
int api_e2b_fs_list(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                    struct nb_apierr *ae);
int api_e2b_fs_mkdir(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                     struct nb_apierr *ae);
int api_e2b_fs_move(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                    struct nb_apierr *ae);
int api_e2b_fs_watch(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                     struct nb_apierr *ae);
int api_e2b_fs_watcher_create(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                              struct nb_apierr *ae);
int api_e2b_fs_watcher_events(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                              struct nb_apierr *ae);
int api_e2b_fs_watcher_remove(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                              struct nb_apierr *ae);
int api_e2b_fs_remove(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                      struct nb_apierr *ae);
/* Connect-RPC process.Process (api_e2b_proc.c) over exec.c and procs.c */
int api_e2b_proc_start(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                       struct nb_apierr *ae);
int api_e2b_proc_connect(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                         struct nb_apierr *ae);
int api_e2b_proc_list(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                      struct nb_apierr *ae);
int api_e2b_proc_input(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                       struct nb_apierr *ae);
int api_e2b_proc_close_stdin(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                             struct nb_apierr *ae);
int api_e2b_proc_signal(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                        struct nb_apierr *ae);
int api_e2b_proc_update(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                        struct nb_apierr *ae);
/* data plane (E2b-Sandbox-Id): envd's GET /health; 501 for what is not there yet */
int api_e2b_health(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                   struct nb_apierr *ae);
/* data plane without Connect-RPC (api_e2b_data.c): envd's /files, the code interpreter's calls */
int api_e2b_files_get(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                      struct nb_apierr *ae);
int api_e2b_files_post(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                       struct nb_apierr *ae);
int api_e2b_execute(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                    struct nb_apierr *ae);
int api_e2b_contexts_list(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                          struct nb_apierr *ae);
int api_e2b_contexts_create(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                            struct nb_apierr *ae);
int api_e2b_context_delete(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                           struct nb_apierr *ae);
int api_e2b_context_restart(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                            struct nb_apierr *ae);
/*
 * E2B's template API (api_e2b_tpl.c) over the template builder
 * (templates.h): the v3 build flow, the upload links, aliases, delete.
 */
int api_e2b_tpl_create(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                       struct nb_apierr *ae);
int api_e2b_tpl_file_link(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                          struct nb_apierr *ae);
/* the upload itself: public, its signature checked (the SDK sends no key there) */
int api_e2b_tpl_file_put(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                         struct nb_apierr *ae);
int api_e2b_tpl_build(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                      struct nb_apierr *ae);
int api_e2b_tpl_status(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                       struct nb_apierr *ae);
int api_e2b_tpl_alias(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                      struct nb_apierr *ae);
int api_e2b_tpl_delete(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                       struct nb_apierr *ae);
int api_e2b_tpl_list(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                     struct nb_apierr *ae);
int api_e2b_not_implemented(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                            struct nb_apierr *ae);

#endif
