/*
 * url.h - %-encoding for the URLs nanobox's own clients build (the CLI's
 * requests, the MCP core's API calls). libcurl does the encoding: it is
 * linked by both anyway, and one encoder is one set of rules.
 */
#ifndef NB_URL_H
#define NB_URL_H

#include "buf.h"

/* Append s with every byte but RFC 3986's unreserved ones %-encoded. */
void nb_url_escape(struct nb_buf *b, const char *s);

/* The same, but '/' stays as it is: a path stays a path (and readable in
 * the API's log). */
void nb_url_escape_path(struct nb_buf *b, const char *s);

#endif
