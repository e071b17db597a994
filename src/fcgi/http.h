/*
 * http.h - one HTTP request as the worker sees it through FastCGI, and the
 * one way to answer it (JSON body, JSON error, or no content).
 */
#ifndef NB_HTTP_H
#define NB_HTTP_H

#include <fcgiapp.h>
#include <stddef.h>
#include <yajl/yajl_gen.h>

#include "app.h"
#include "buf.h"

#define NB_PATH_MAX 512
#define NB_QUERY_MAX 2048

struct nb_req {
    FCGX_Request *fcgi;
    const char *method;
    char path[NB_PATH_MAX];     /* raw path of REQUEST_URI, no query */
    char query[NB_QUERY_MAX];   /* raw query string */
    struct nb_buf body;         /* capped at conf.max_body */
    int status;                 /* status sent, for the access log */
    int answered;
};

/* Fill r from the FastCGI params. -1 with ae set if the path is too long. */
int nb_http_parse(struct nb_req *r, FCGX_Request *fcgi, struct nb_apierr *ae);

/* Read the body up to cap bytes; 413 in ae if CONTENT_LENGTH says more. */
int nb_http_read_body(struct nb_req *r, size_t cap, struct nb_apierr *ae);

/* A request header by CGI name (e.g. "HTTP_AUTHORIZATION"), or NULL. */
const char *nb_http_param(const struct nb_req *r, const char *name);

/* Decoded value of query key (first match) into out; 0 found, -1 not. */
int nb_http_query(const struct nb_req *r, const char *key, char *out, size_t outlen);

/*
 * Walk the decoded "key=value" pairs of the query: calls cb for each;
 * stops and returns -1 if cb does.
 */
int nb_http_query_each(const struct nb_req *r, int (*cb)(void *arg, const char *k, const char *v),
                       void *arg);

/* Answers. Each sends headers and body and marks r answered. */
void nb_http_json(struct nb_req *r, int status, yajl_gen g);
void nb_http_error(struct nb_req *r, const struct nb_apierr *ae);
void nb_http_fail(struct nb_req *r, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void nb_http_no_content(struct nb_req *r);

#endif
