/*
 * url.c - see url.h.
 */
#include "config.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "log.h"
#include "url.h"

static void escape_part(struct nb_buf *b, const char *s, size_t n)
{
    /* the handle argument is ignored since libcurl 7.82; NULL is allowed */
    char *enc;

    if (n == 0)
        return;
    if (n > INT_MAX) {
        nb_error("a URL part of %zu bytes is too long to escape", n);
        abort();
    }
    enc = curl_easy_escape(NULL, s, (int)n);
    if (enc == NULL) {
        nb_error("out of memory escaping %zu bytes of a URL", n);
        abort();
    }
    nb_buf_append(b, enc, strlen(enc));
    curl_free(enc);
}

void nb_url_escape(struct nb_buf *b, const char *s)
{
    escape_part(b, s, strlen(s));
}

void nb_url_escape_path(struct nb_buf *b, const char *s)
{
    for (;;) {
        size_t n = strcspn(s, "/");

        escape_part(b, s, n);
        if (s[n] == '\0')
            return;
        nb_buf_append(b, "/", 1);
        s += n + 1;
    }
}
