/*
 * client.c - see client.h.
 *
 * Where things come from, first match wins:
 *   url:     --url, NANOBOX_URL, "url" in cli.conf, http://127.0.0.1:8080
 *   api_key: --key, NANOBOX_API_KEY, "api_key" in cli.conf, "api_key" in
 *            /etc/nanobox/nanobox.conf (when this user may read it)
 * cli.conf is $XDG_CONFIG_HOME/nanobox/cli.conf, else
 * ~/.config/nanobox/cli.conf, read with the server's own line reader.
 */
#include "config.h"

#include <errno.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli.h"
#include "client.h"
#include "conf.h"
#include "json.h"
#include "ndjson.h"

#define ANSWER_MAX_DEPTH 64u /* nesting accepted in an answer */

/* One transfer's state, behind CURLOPT_WRITEDATA. */
struct transfer {
    struct client *c;
    const struct client_req *req;
    struct client_answer *a;
    int mode_known;     /* streamed or not has been decided */
    struct nb_buf line; /* a streamed answer's incomplete last line */
    int overflow;       /* the answer passed max_answer */
    int probed;         /* req->probe: stopped at a body that is not JSON */
    int aborted;        /* on_event asked to stop */
};

void client_init(struct client *c)
{
    memset(c, 0, sizeof(*c));
    c->max_answer = CLIENT_MAX_ANSWER;
}

void client_cleanup(struct client *c)
{
    if (c->curl != NULL) {
        curl_easy_cleanup(c->curl);
        c->curl = NULL;
        curl_global_cleanup();
    }
}

/* ---------------------------------------------------------------- config */

struct conf_pick {
    struct client *c;
    char url[1024];
    char api_key[256];
};

static int cli_conf_kv(void *ctx, const char *key, const char *value, char *msg, size_t msglen)
{
    struct conf_pick *p = ctx;
    uint64_t sz;

    if (!strcmp(key, "url")) {
        snprintf(p->url, sizeof(p->url), "%s", value);
    } else if (!strcmp(key, "api_key")) {
        snprintf(p->api_key, sizeof(p->api_key), "%s", value);
    } else if (!strcmp(key, "max_answer")) {
        if (nb_parse_size(value, &sz) != 0 || sz < 4096 || sz > SIZE_MAX / 2) {
            snprintf(msg, msglen, "max_answer: expected a size like 64m (at least 4k), got \"%s\"",
                     value);
            return -1;
        }
        p->c->max_answer = (size_t)sz;
    } else {
        snprintf(msg, msglen, "unknown key \"%s\" (cli.conf knows url, api_key, max_answer)", key);
        return -1;
    }
    return 0;
}

/* The server's config holds many keys: only api_key matters here. */
static int server_conf_kv(void *ctx, const char *key, const char *value, char *msg, size_t msglen)
{
    struct conf_pick *p = ctx;

    if (!strcmp(key, "api_key"))
        snprintf(p->api_key, sizeof(p->api_key), "%s", value);
    return 0;
}

static void cli_conf_path(struct client *c)
{
    const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");

    if (xdg != NULL && xdg[0] == '/') {
        snprintf(c->conf_path, sizeof(c->conf_path), "%s/nanobox/cli.conf", xdg);
        return;
    }
    if (home == NULL || home[0] == '\0') {
        struct passwd *pw = getpwuid(getuid());
        home = pw != NULL ? pw->pw_dir : "/";
    }
    snprintf(c->conf_path, sizeof(c->conf_path), "%s/.config/nanobox/cli.conf", home);
}

static int client_open(struct client *c)
{
    struct conf_pick file = {.c = c}, server = {.c = c};
    const char *env_url = getenv("NANOBOX_URL"), *env_key = getenv("NANOBOX_API_KEY");
    char err[1200];
    size_t n;

    if (c->curl != NULL)
        return CLI_OK;

    cli_conf_path(c);
    if (nb_conf_read(c->conf_path, cli_conf_kv, &file, err, sizeof(err)) != 0 && errno != ENOENT) {
        fprintf(stderr, "nanobox: %s\n", err);
        return CLI_FAIL;
    }

    if (c->flag_url != NULL && c->flag_url[0] != '\0') {
        snprintf(c->url, sizeof(c->url), "%s", c->flag_url);
        c->url_from = "--url";
    } else if (env_url != NULL && env_url[0] != '\0') {
        snprintf(c->url, sizeof(c->url), "%s", env_url);
        c->url_from = "NANOBOX_URL";
    } else if (file.url[0] != '\0') {
        snprintf(c->url, sizeof(c->url), "%s", file.url);
        c->url_from = c->conf_path;
    } else {
        snprintf(c->url, sizeof(c->url), "%s", CLIENT_DEFAULT_URL);
        c->url_from = "the default";
    }
    n = strlen(c->url);
    while (n > 0 && c->url[n - 1] == '/')
        c->url[--n] = '\0';

    if (c->flag_key != NULL && c->flag_key[0] != '\0') {
        snprintf(c->api_key, sizeof(c->api_key), "%s", c->flag_key);
        c->key_from = "--key";
    } else if (env_key != NULL && env_key[0] != '\0') {
        snprintf(c->api_key, sizeof(c->api_key), "%s", env_key);
        c->key_from = "NANOBOX_API_KEY";
    } else if (file.api_key[0] != '\0') {
        snprintf(c->api_key, sizeof(c->api_key), "%s", file.api_key);
        c->key_from = c->conf_path;
    } else {
        /* a fallback for the operator's own shell: unreadable is normal */
        if (nb_conf_read(CLIENT_SERVER_CONF, server_conf_kv, &server, err, sizeof(err)) == 0 &&
            server.api_key[0] != '\0') {
            snprintf(c->api_key, sizeof(c->api_key), "%s", server.api_key);
            c->key_from = CLIENT_SERVER_CONF;
        }
    }

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK || (c->curl = curl_easy_init()) == NULL) {
        fprintf(stderr, "nanobox: cannot initialise libcurl\n");
        return CLI_FAIL;
    }
    return CLI_OK;
}

int client_ready(struct client *c)
{
    return client_open(c);
}

/* ------------------------------------------------------------- transfers */

static void decide_mode(struct transfer *t)
{
    char *ct = NULL;
    long status = 0;

    t->mode_known = 1;
    curl_easy_getinfo(t->c->curl, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(t->c->curl, CURLINFO_CONTENT_TYPE, &ct);
    if (t->req->probe && status / 100 == 2 &&
        (ct == NULL || strncasecmp(ct, "application/json", 16) != 0))
        t->probed = 1;
    if (t->req->on_event == NULL)
        return;
    if (status / 100 == 2 && ct != NULL && !strncasecmp(ct, "application/x-ndjson", 20))
        t->a->streamed = 1;
}

static int feed_line(struct transfer *t, const char *line, size_t len)
{
    yajl_val ev = NULL;
    char err[256];
    int rc;

    while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' '))
        len--;
    if (len == 0)
        return 0;
    /* nb_json_parse wants the NUL at line[len]: copy */
    {
        char *copy = nb_xmalloc(len + 1);
        memcpy(copy, line, len);
        copy[len] = '\0';
        if (nb_json_parse(copy, len, ANSWER_MAX_DEPTH, &ev, err, sizeof(err)) != 0 || ev == NULL ||
            !YAJL_IS_OBJECT(ev)) {
            fprintf(stderr,
                    "nanobox: the server's stream has a line that is not a JSON object "
                    "(%s)\n",
                    ev == NULL ? err : "not an object");
            yajl_tree_free(ev);
            free(copy);
            return -1;
        }
        rc = t->req->on_event(t->req->ctx, ev, copy, len);
        yajl_tree_free(ev);
        free(copy);
    }
    return rc;
}

static int feed_event_line(void *ctx, const char *line, size_t len)
{
    return feed_line(ctx, line, len);
}

static int feed_stream(struct transfer *t, const char *data, size_t len)
{
    int rc = ndjson_feed(&t->line, data, len, feed_event_line, t);

    if (rc == NDJSON_OVERFLOW)
        t->overflow = 1;
    else if (rc == NDJSON_STOP)
        t->aborted = 1;
    return rc == NDJSON_OK ? 0 : -1;
}

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    struct transfer *t = userdata;
    size_t len = size * nmemb;

    if (!t->mode_known)
        decide_mode(t);
    if (t->probed)
        return 0; /* ends the transfer: the caller wanted the kind, not the bytes */
    if (t->a->streamed)
        return feed_stream(t, ptr, len) == 0 ? len : 0;
    if (nb_buf_append(&t->a->body, ptr, len) != NB_OK) {
        t->overflow = 1;
        return 0;
    }
    return len;
}

/* What the user can do about a failed connection. */
static int report_transport(struct client *c, CURLcode rc, const char *detail, long timeout)
{
    /* curl's own sentence names host and port: better than the bare code */
    const char *what = detail[0] != '\0' ? detail : curl_easy_strerror(rc);
    switch (rc) {
    case CURLE_COULDNT_CONNECT:
        fprintf(stderr,
                "nanobox: cannot reach nanobox at %s: %s — is it running? "
                "(src/setup/up.sh)\n",
                c->url, what);
        break;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
        fprintf(stderr,
                "nanobox: cannot reach nanobox at %s: %s — check the URL "
                "(it came from %s)\n",
                c->url, what, c->url_from);
        break;
    case CURLE_OPERATION_TIMEDOUT:
        if (timeout > 0)
            fprintf(stderr, "nanobox: no answer from nanobox at %s within %ld s (%s)\n", c->url,
                    timeout, what);
        else
            fprintf(stderr, "nanobox: cannot reach nanobox at %s: %s\n", c->url, what);
        break;
    default:
        fprintf(stderr, "nanobox: request to nanobox at %s failed: %s\n", c->url, what);
        break;
    }
    return CLI_FAIL;
}

/* CURLOPT_XFERINFOFUNCTION: the caller's abort_check, with the bytes moved. */
static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    const struct client_req *req = ((struct transfer *)arg)->req;
    long long done = -1, total = -1;

    if (dlnow > 0) {
        done = (long long)dlnow;
        total = dltotal > 0 ? (long long)dltotal : -1;
    } else if (ulnow > 0) {
        done = (long long)ulnow;
        total = ultotal > 0 ? (long long)ultotal : -1;
    }
    return req->abort_check(req->abort_ctx, done, total) != 0;
}

int client_call(struct client *c, const struct client_req *req, struct client_answer *a)
{
    struct transfer t = {.c = c, .req = req, .a = a};
    struct curl_slist *hdrs = NULL;
    struct nb_buf url, auth, ctype;
    char errbuf[CURL_ERROR_SIZE] = "", msg[256];
    CURLcode rc;
    int result = CLI_FAIL;

    memset(a, 0, sizeof(*a));
    nb_buf_init(&a->body, CLIENT_MAX_ANSWER);
    if (client_open(c) != CLI_OK)
        return CLI_FAIL;
    a->body.cap = c->max_answer;
    nb_buf_init(&t.line, c->max_answer);
    nb_buf_init(&url, 1u << 20);
    nb_buf_init(&auth, 1024);
    nb_buf_init(&ctype, 1024);

    nb_buf_printf(&url, "%s%s", c->url, req->path);
    hdrs = curl_slist_append(hdrs, "Accept: application/json");
    hdrs = curl_slist_append(hdrs, "Expect:");
    if (c->api_key[0] != '\0') {
        nb_buf_printf(&auth, "Authorization: Bearer %s", c->api_key);
        hdrs = curl_slist_append(hdrs, auth.data);
    }
    if (req->body != NULL) {
        nb_buf_printf(&ctype, "Content-Type: %s",
                      req->content_type != NULL ? req->content_type : "application/json");
        hdrs = curl_slist_append(hdrs, ctype.data);
    }

    curl_easy_reset(c->curl);
    curl_easy_setopt(c->curl, CURLOPT_URL, url.data);
    curl_easy_setopt(c->curl, CURLOPT_CUSTOMREQUEST, req->method);
    curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT, CLIENT_CONNECT_TIMEOUT);
    curl_easy_setopt(c->curl, CURLOPT_TIMEOUT, req->timeout > 0 ? req->timeout : 0L);
    curl_easy_setopt(c->curl, CURLOPT_USERAGENT, "nanobox-cli/" PACKAGE_VERSION);
    curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, hdrs);
    if (req->body != NULL) {
        curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, req->body);
        curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE,
                         (curl_off_t)(req->body_len > 0 ? req->body_len : strlen(req->body)));
    }

    if (req->abort_check != NULL) {
        curl_easy_setopt(c->curl, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(c->curl, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(c->curl, CURLOPT_XFERINFODATA, &t);
    }
    rc = curl_easy_perform(c->curl);
    curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &a->status);
    if (rc == CURLE_WRITE_ERROR && t.probed)
        rc = CURLE_OK;

    if (rc == CURLE_OK && a->streamed && t.line.len > 0 &&
        feed_line(&t, t.line.data, t.line.len) != 0) {
        a->status = 0; /* the last line had no newline */
        goto out;
    }
    if (rc != CURLE_OK) {
        /* an answer that began and broke off is still not an answer */
        a->status = 0;
        if (t.aborted || rc == CURLE_ABORTED_BY_CALLBACK)
            goto out; /* on_event said why, or the caller wanted it */
        if (rc == CURLE_WRITE_ERROR && t.overflow) {
            fprintf(stderr,
                    "nanobox: the answer from %s is larger than max_answer (%zu bytes; "
                    "raise it in %s)\n",
                    c->url, c->max_answer, c->conf_path);
            goto out;
        }
        report_transport(c, rc, errbuf, req->timeout);
        goto out;
    }

    if (!a->streamed && a->body.len > 0 &&
        nb_json_parse(a->body.data, a->body.len, ANSWER_MAX_DEPTH, &a->json, msg, sizeof(msg)) != 0)
        a->json = NULL;

    if (a->status / 100 != 2) {
        if (!req->keep_errors)
            client_report(c, a);
        goto out;
    }
    if (!a->streamed && a->body.len > 0 && a->json == NULL && !req->raw_answer) {
        fprintf(stderr,
                "nanobox: unexpected answer from %s: HTTP %ld with a body that is not "
                "JSON — is this a nanobox server? (the URL came from %s)\n",
                c->url, a->status, c->url_from);
        goto out;
    }
    result = CLI_OK;
out:
    curl_slist_free_all(hdrs);
    nb_buf_free(&url);
    nb_buf_free(&auth);
    nb_buf_free(&ctype);
    nb_buf_free(&t.line);
    return result;
}

void client_answer_free(struct client_answer *a)
{
    yajl_tree_free(a->json);
    a->json = NULL;
    nb_buf_free(&a->body);
}

/* ---------------------------------------------------------------- errors */

void client_error_text(const struct client *c, const struct client_answer *a, char *out,
                       size_t outlen)
{
    const char *epath[] = {"error", NULL}, *cpath[] = {"code", NULL};
    yajl_val e = a->json ? yajl_tree_get(a->json, epath, yajl_t_string) : NULL;
    yajl_val code = a->json ? yajl_tree_get(a->json, cpath, yajl_t_string) : NULL;

    if (e != NULL)
        snprintf(out, outlen, "%s (%s, HTTP %ld)", nb_json_string(e),
                 code != NULL ? nb_json_string(code) : "no code", a->status);
    else
        /* nginx's own pages, a proxy, another service on that port */
        snprintf(out, outlen,
                 "unexpected answer from %s: HTTP %ld, not a nanobox error "
                 "(is the URL right? it came from %s)",
                 c->url, a->status, c->url_from);
}

int client_report(struct client *c, const struct client_answer *a)
{
    char text[1400];

    if (c->json && a->json != NULL)
        client_print_raw(a);
    client_error_text(c, a, text, sizeof(text));
    fprintf(stderr, "nanobox: %s\n", text);
    if (a->status == 401) {
        if (c->api_key[0] == '\0')
            fprintf(stderr,
                    "nanobox: no API key was sent: give --key, set NANOBOX_API_KEY, or "
                    "put api_key in %s\n",
                    c->conf_path);
        else
            fprintf(stderr, "nanobox: the API key came from %s\n", c->key_from);
    }
    return CLI_FAIL;
}

/* ----------------------------------------------------------------- misc */

void client_print_raw(const struct client_answer *a)
{
    if (a->body.len > 0) {
        fwrite(a->body.data, 1, a->body.len, stdout);
        if (a->body.data[a->body.len - 1] != '\n')
            fputc('\n', stdout);
    }
    fflush(stdout);
}
