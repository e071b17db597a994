/*
 * api_openapi.c - GET /openapi.json: the API's OpenAPI description, the
 * JSON the build makes of docs/openapi.yaml (nanobox-openapi.json next to
 * nanobox-fcgi in a build tree, else under $(pkgdatadir)), sent as it is.
 * Read at each request: it is small, and a reinstall shows at once.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "api.h"
#include "buf.h"
#include "helper.h"

/* Far above the description's size (about 100 KiB). */
#define OPENAPI_MAX (4u << 20)

int api_openapi(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                struct nb_apierr *ae)
{
    char path[PATH_MAX], chunk[16384];
    struct nb_buf b;
    size_t n;
    FILE *f;

    (void)a;
    (void)ra;
    nb_helper_data_path("", "nanobox-openapi.json", NB_PKGDATADIR "/nanobox-openapi.json", path,
                        sizeof(path));
    f = fopen(path, "re");
    if (f == NULL) {
        nb_apierr_set(ae, NB_E_INTERNAL, "internal", "the API description %s cannot be read: %s",
                      path, strerror(errno));
        return NB_ERR;
    }
    nb_buf_init(&b, OPENAPI_MAX);
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        if (nb_buf_append(&b, chunk, n) != 0)
            break;
    }
    if (ferror(f) || !feof(f)) {
        nb_apierr_set(ae, NB_E_INTERNAL, "internal",
                      "the API description %s: read error or over %u bytes", path, OPENAPI_MAX);
        fclose(f);
        nb_buf_free(&b);
        return NB_ERR;
    }
    fclose(f);
    nb_http_body(r, 200, "application/json", b.data, b.len);
    nb_buf_free(&b);
    return NB_OK;
}
