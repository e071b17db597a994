/*
 * apierr.c - filling a struct nb_apierr (app.h): the one error record that
 * carries a failure from an engine to a front's answer, and the one mapping
 * of a Docker failure to a domain code (nberr.h). Engines and handlers share it, so
 * it sits below both and knows nothing of either.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>

#include "app.h"

void nb_apierr_set(struct nb_apierr *ae, enum nb_err err, const char *code, const char *fmt, ...)
{
    va_list ap;
    ae->err = err;
    snprintf(ae->code, sizeof(ae->code), "%s", code);
    va_start(ap, fmt);
    vsnprintf(ae->msg, sizeof(ae->msg), fmt, ap);
    va_end(ap);
}

void nb_apierr_docker(struct nb_apierr *ae, const struct nb_derr *de, const char *what)
{
    switch (de->kind) {
    case NB_DERR_UNREACHABLE:
        nb_apierr_set(ae, NB_E_DOCKER_DOWN, "docker_unavailable", "could not %s: %s", what,
                      de->msg);
        break;
    case NB_DERR_TIMEOUT:
        nb_apierr_set(ae, NB_E_TIMEOUT, "timeout", "could not %s: Docker did not answer in time",
                      what);
        break;
    case NB_DERR_HTTP:
        if (de->status == 404)
            nb_apierr_set(ae, NB_E_NOT_FOUND, "not_found", "could not %s: %s", what, de->msg);
        else if (de->status == 409)
            nb_apierr_set(ae, NB_E_CONFLICT, "conflict", "could not %s: %s", what, de->msg);
        else
            nb_apierr_set(ae, NB_E_UPSTREAM, "docker_error", "could not %s: Docker said (%ld) %s",
                          what, de->status, de->msg);
        break;
    default:
        nb_apierr_set(ae, NB_E_UPSTREAM, "docker_error", "could not %s: %s", what, de->msg);
        break;
    }
}
