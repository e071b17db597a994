/*
 * e2b_route.h - the E2B front's paths (docs/E2B.md): which of its shapes a
 * request names, by its path (the control plane) or by its headers or host
 * (the data plane). Pure functions of strings, as route.h's, so they are
 * fuzzed (tests/fuzz/fuzz_route.c) and unit-tested
 * (tests/unit/test_e2b_route.c); e2b_front.c hands them to the HTTP layer.
 */
#ifndef NB_E2B_ROUTE_H
#define NB_E2B_ROUTE_H

#include <stddef.h>

#include "route.h"

/* The front's shapes, after the native ones (route.h, NB_ROUTE_FRONT). */
#define NB_E2B_SANDBOXES (NB_ROUTE_FRONT + 0) /* /sandboxes */
#define NB_E2B_SANDBOX (NB_ROUTE_FRONT + 1)   /* /sandboxes/{id} */
#define NB_E2B_OP (NB_ROUTE_FRONT + 2)        /* /sandboxes/{id}/{op} (arg: the op) */
#define NB_E2B_LIST (NB_ROUTE_FRONT + 3)      /* /v2/sandboxes */
#define NB_E2B_V2_OP (NB_ROUTE_FRONT + 4)     /* /v2/sandboxes/{id}/{op} (arg: the op) */
#define NB_E2B_OTHER (NB_ROUTE_FRONT + 5)     /* anything else under /sandboxes or /v2/sandboxes */
#define NB_E2B_DATA (NB_ROUTE_FRONT + 6)      /* a data-plane request (nb_e2b_match_data) */
#define NB_E2B_SNAPSHOTS (NB_ROUTE_FRONT + 7) /* /snapshots (nb_e2b_match_snapshots) */
/* E2B's template API (nb_e2b_match_tpl), further on: others' shapes come before */
#define NB_E2B_TPL_V3 (NB_ROUTE_FRONT + 32)     /* /v3/templates */
#define NB_E2B_TPL_BUILD (NB_ROUTE_FRONT + 33)  /* /v2/templates/{id}/builds/{buildID} */
#define NB_E2B_TPL_STATUS (NB_ROUTE_FRONT + 34) /* /templates/{id}/builds/{buildID}/status */
#define NB_E2B_TPL_FILES (NB_ROUTE_FRONT + 35)  /* /templates/{id}/files/{hash} */
#define NB_E2B_TPL_ALIAS (NB_ROUTE_FRONT + 36)  /* /templates/aliases/{alias} */
#define NB_E2B_TPL_ONE (NB_ROUTE_FRONT + 37)    /* /templates/{id} (an E2B key's) */
#define NB_E2B_TPL_LIST (NB_ROUTE_FRONT + 38)   /* /templates (an E2B key's) */
#define NB_E2B_TPL_OTHER (NB_ROUTE_FRONT + 39)  /* anything else of the above's */

/*
 * E2B's template paths. /v3/templates..., /v2/templates/...,
 * /templates/{id}/files/... and /templates/{id}/builds/... are E2B's
 * whoever asks (the native API has none); /templates, /templates/{id} and
 * /templates/aliases/{alias} are E2B's only when e2b_key (the request
 * sends "X-API-KEY: e2b_..."), else the native API's. NB_ROUTE_NONE for
 * what is not E2B's. The handlers read their ids off the path.
 */
enum nb_route nb_e2b_match_tpl(const char *path, int e2b_key);
/* E2B's volume API (nb_e2b_match_volume); high numbers: other shapes come before them */
#define NB_E2B_VOLUMES (NB_ROUTE_FRONT + 20) /* /volumes */
#define NB_E2B_VOLUME (NB_ROUTE_FRONT + 21)  /* /volumes/{volumeID} (arg: the id) */

/*
 * The control plane: /sandboxes[/{id}[/{op}]], /v2/sandboxes and
 * /v2/sandboxes/{id}/{op} (the SDK's connect since e2b 2.50); anything else
 * that begins with /sandboxes or /v2/sandboxes is NB_E2B_OTHER (E2B's 404,
 * in its shape). Every other path is NB_ROUTE_NONE (not the front's). id,
 * arg and op as nb_route_match fills them (the id cut, not yet checked).
 */
enum nb_route nb_e2b_match_path(const char *path, char *id, size_t idlen, char *arg, size_t arglen,
                                char *op, size_t oplen);

/*
 * A data-plane request of the E2B SDK: it names its sandbox and port in
 * the headers E2b-Sandbox-Id and E2b-Sandbox-Port, never in the path, so
 * whatever the path is it is NB_E2B_DATA. id gets the sandbox id header
 * (cut to idlen - 1, not yet checked), arg the path as it is (with its
 * slashes; "" when it does not fit), op the port header (cut).
 */
enum nb_route nb_e2b_match_data(const char *path, const char *sandbox_id, const char *port,
                                char *id, size_t idlen, char *arg, size_t arglen, char *op,
                                size_t oplen);

/*
 * E2B's other mode (E2B_DOMAIN): the SDK names its sandbox and port in the
 * host, "<port>-<sandboxId>.<domain>". When host starts so, with port
 * 49983 or 49999 and 36 characters of [0-9a-f-] (not yet checked as an
 * id), 1 with them in id and port; else 0.
 */
int nb_e2b_host(const char *host, char *id, size_t idlen, char *port, size_t portlen);

/*
 * E2B's snapshot list outside /sandboxes, for a request with E2B's key
 * (the caller checks): GET /snapshots (listSnapshots) is NB_E2B_SNAPSHOTS.
 * deleteSnapshot's DELETE /templates/{templateID} is the template API's
 * (nb_e2b_match_tpl: a snapshot is one of the key's templates). Every
 * other path is NB_ROUTE_NONE.
 */
enum nb_route nb_e2b_match_snapshots(const char *path, char *arg, size_t arglen);

/*
 * The sub-route of one of the front's shapes (route.h, nb_route_sub): for
 * NB_E2B_OP and NB_E2B_V2_OP its op and for NB_E2B_DATA its path, as they
 * are (a sub no row names goes to the "*" row), except the code
 * interpreter's "/contexts/{ctx}" and "/contexts/{ctx}/restart" (the
 * handler reads {ctx} from ra->arg, the path); "" for the others.
 */
const char *nb_e2b_sub(enum nb_route shape, const struct nb_route_args *ra);

/*
 * The path of one of the front's shapes as docs write it (route.h,
 * nb_route_path; the data plane's is "": its sub is a whole path). NULL
 * for a shape not the front's.
 */
const char *nb_e2b_path(enum nb_route shape);

/*
 * /volumes and /volumes/{volumeID} when key, the request's X-API-Key, has
 * E2B's prefix "e2b_" (the native API serves the same paths for its own
 * keys): NB_E2B_VOLUMES or NB_E2B_VOLUME (arg: the id); else
 * NB_ROUTE_NONE.
 */
enum nb_route nb_e2b_match_volume(const char *path, const char *key, char *arg, size_t arglen);

#endif
