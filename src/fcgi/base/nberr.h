/*
 * nberr.h - what went wrong, in the engines' words: one domain code per
 * kind of failure, carried with a slug and a message in struct nb_apierr
 * (app.h). Nothing below the handlers knows an HTTP status or compares a
 * slug; each front maps the code once: the HTTP answer (nb_http_status_of,
 * http.c), the E2B front's Connect codes and statuses (e2b_rpc.c), and
 * MCP's tool errors (which see the HTTP status of an internal request).
 */
#ifndef NB_NBERR_H
#define NB_NBERR_H

/* Kept in this order: nb_err_is_fault counts on the faults of a part coming
 * last, from NB_E_INTERNAL on. */
enum nb_err {
    NB_E_OK = 0,
    NB_E_INVALID,         /* malformed: bad JSON, a wrong type, a bad path */
    NB_E_OUT_OF_RANGE,    /* well formed, outside its limits */
    NB_E_UNAUTHENTICATED, /* no key, or a wrong one */
    NB_E_FORBIDDEN,       /* the key, the config or the sandbox's rights say no */
    NB_E_NOT_FOUND,       /* no such sandbox, file, process, template, ... */
    NB_E_NO_CONTEXT,      /* no such code context (the code bridge's) */
    NB_E_METHOD,          /* the route has no such method */
    NB_E_CONFLICT,        /* the state forbids it now (paused, busy, not empty) */
    NB_E_EXISTS,          /* what is to be made is there already */
    NB_E_TOO_LARGE,       /* a body, a file, an output past its cap */
    NB_E_URI_TOO_LONG,    /* a path or query past its cap */
    NB_E_LIMIT,           /* a quota or a rate: a later try may pass */
    NB_E_CANCELLED,       /* the client left */
    NB_E_INTERNAL,        /* a fault of nanobox's own */
    NB_E_UNSUPPORTED,     /* not implemented (here, or by this sandbox) */
    NB_E_UPSTREAM,        /* Docker or a sandbox answered with an error */
    NB_E_UNAVAILABLE,     /* a part cannot serve now */
    NB_E_AGENT_DOWN,      /* the sandbox's agent does not answer */
    NB_E_DOCKER_DOWN,     /* Docker does not answer */
    NB_E_CAPACITY,        /* no room for another sandbox (max_sandboxes) */
    NB_E_TIMEOUT,         /* it did not end in time */
    NB_E_NO_SPACE,        /* a disk cap or the disk is full */
    NB_E_COUNT
};

/* Is a part down (the agent, Docker, the room for sandboxes) or busy? */
static inline int nb_err_is_down(enum nb_err err)
{
    return err == NB_E_UNAVAILABLE || err == NB_E_AGENT_DOWN || err == NB_E_DOCKER_DOWN ||
           err == NB_E_CAPACITY;
}

/* Did a part fail (nanobox, Docker, the sandbox) rather than the request? */
static inline int nb_err_is_fault(enum nb_err err)
{
    return err >= NB_E_INTERNAL && err < NB_E_COUNT;
}

#endif
