/*
 * client.h - the CLI's side of the HTTP API: where the server is and which
 * key to send (flags, environment, config files), one call path for every
 * request, and one way to tell the user what went wrong.
 *
 * Every answer lands in an nb_buf capped at max_answer, so a broken or
 * hostile server cannot make the CLI eat memory. Answers served as NDJSON
 * (application/x-ndjson, exec's streamed output) are handed over line by
 * line as they arrive instead of being collected.
 */
#ifndef NB_CLI_CLIENT_H
#define NB_CLI_CLIENT_H

#include <stddef.h>
#include <curl/curl.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#include "buf.h"

#define CLIENT_DEFAULT_URL "http://127.0.0.1:8080"
#define CLIENT_SERVER_CONF "/etc/nanobox/nanobox.conf"
#define CLIENT_MAX_ANSWER (64u * 1024u * 1024u) /* default of max_answer */
#define CLIENT_CONNECT_TIMEOUT 10L              /* seconds to establish a connection */
#define CLIENT_CALL_TIMEOUT 180L                /* seconds for calls other than exec/run */

struct client {
    const char *flag_url; /* --url, or NULL */
    const char *flag_key; /* --key, or NULL */
    int json;             /* --json: print the server's JSON as it came */

    /* resolved on the first call (client_open) */
    char url[1024];       /* base URL, no trailing slash */
    const char *url_from; /* where url came from, for messages */
    char api_key[256];    /* empty: send no key */
    const char *key_from;
    char conf_path[1024]; /* the user's cli.conf */
    size_t max_answer;    /* cap on one answer's bytes */
    CURL *curl;
};

/* One NDJSON line of a streamed answer: ev is the parsed line. Return 0 to
 * go on, -1 to abort the transfer (the callback printed why). */
typedef int (*client_event_fn)(void *ctx, yajl_val ev, const char *line, size_t len);

struct client_req {
    const char *method;
    const char *path;         /* after the base URL, query string included */
    const char *body;         /* JSON text, or NULL */
    size_t body_len;          /* bytes of body; 0: strlen(body) */
    const char *content_type; /* of body; NULL: application/json */
    int raw_answer;           /* a 2xx body need not be JSON (file bytes) */
    long timeout;             /* seconds for the whole call; 0: no limit */
    int keep_errors;          /* an HTTP error is the caller's to report */
    int probe;                /* a 2xx body that is not JSON (a file's bytes) is
                               * not fetched: the call ends with an empty body */
    client_event_fn on_event; /* NULL: a streamed answer is not expected */
    void *ctx;
    /* Polled about once a second while the call runs, and more often while
     * bytes move, with the transfer's bytes: done of total of the body sent
     * while it is sent, then of the answer received (total -1 when unknown;
     * both -1 before any byte moved). Non-zero drops the connection (the
     * server then kills an exec, interrupts a code cell) and the call ends
     * with no answer, quietly. NULL: never. */
    int (*abort_check)(void *abort_ctx, long long done, long long total);
    void *abort_ctx;
};

struct client_answer {
    long status;        /* HTTP status; 0 when no answer came */
    struct nb_buf body; /* the body (empty when streamed) */
    yajl_val json;      /* body parsed, or NULL (empty, or not JSON) */
    int streamed;       /* the answer was NDJSON, fed to on_event */
};

void client_init(struct client *c);
void client_cleanup(struct client *c);

/*
 * Send req and collect the answer in a (free it with client_answer_free
 * whatever the result). Returns CLI_OK for a 2xx answer whose body is JSON,
 * empty or streamed (any body with req->raw_answer); otherwise CLI_FAIL,
 * after telling the user why. With req->keep_errors, an HTTP error
 * (a->status >= 300) is not reported: it is the caller's to report;
 * a->status is 0 after any other failure.
 */
/* Resolve the server and the key and set up libcurl now rather than on the
 * first call (a front that copies the client into threads). CLI_OK, or
 * CLI_FAIL after saying why on stderr. */
int client_ready(struct client *c);

int client_call(struct client *c, const struct client_req *req, struct client_answer *a);
void client_answer_free(struct client_answer *a);

/* Tell the user why a non-2xx answer failed; with --json the error body goes
 * to stdout too. Returns CLI_FAIL. */
int client_report(struct client *c, const struct client_answer *a);

/* "message (code, HTTP status)" of an error answer. */
void client_error_text(const struct client *c, const struct client_answer *a, char *out,
                       size_t outlen);

/* Write the body to stdout as it came, ending with a newline (--json). */
void client_print_raw(const struct client_answer *a);

#endif
