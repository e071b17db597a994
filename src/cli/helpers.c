/*
 * helpers.c - what several commands share (cli.h): usage errors and help,
 * a sandbox id from the command line and the paths under it, and reading
 * a file (or stdin) to send. They call down into client.c and output.c,
 * never into a command, so the cmd_*.c files and main.c depend on this
 * file and not on each other.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "client.h"
#include "json.h"
#include "output.h"
#include "url.h"

#define EXEC_HTTP_MARGIN 60L /* seconds past the command's timeout */

/* ------------------------------------------------------------------ usage */

int cli_help(const struct cli_cmd *cmd)
{
    printf("usage: %s\n\n%s\n%s", cmd->synopsis, cmd->summary, cmd->help);
    fflush(stdout);
    return CLI_OK;
}

int cli_usage_error(const struct cli_cmd *cmd, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "nanobox %s: ", cmd->name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nusage: %s\n(see \"nanobox %s --help\")\n", cmd->synopsis, cmd->name);
    return CLI_USAGE;
}

/* ------------------------------------------------------------ sandbox ids */

static int is_uuid(const char *s)
{
    if (strlen(s) != CLI_UUID_LEN)
        return 0;
    for (int i = 0; i < CLI_UUID_LEN; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-')
                return 0;
        } else if (!isxdigit((unsigned char)s[i])) {
            return 0;
        }
    }
    return 1;
}

static int is_id_prefix(const char *s)
{
    if (*s == '\0' || strlen(s) >= CLI_UUID_LEN)
        return 0;
    for (; *s; s++)
        if (!isxdigit((unsigned char)*s) && *s != '-')
            return 0;
    return 1;
}

int sandbox_is_id(const char *s)
{
    return is_uuid(s) || is_id_prefix(s);
}

int sandbox_resolve_id(struct client *c, const struct cli_cmd *cmd, const char *arg, char out[37])
{
    struct client_req req = {.method = "GET", .path = "/sandbox", .timeout = CLIENT_CALL_TIMEOUT};
    struct client_answer a;
    yajl_val list;
    char want[CLI_UUID_LEN + 1];
    int found = 0, rc;
    size_t n;

    if (arg[0] == '\0') /* not GET /sandbox/, the list */
        return cli_usage_error(cmd, "the sandbox ID is empty");
    if (!is_id_prefix(arg)) {
        /* a full id, in any case; anything else is for the server to refuse */
        snprintf(out, CLI_UUID_LEN + 1, "%s", arg);
        if (is_uuid(out))
            for (char *p = out; *p; p++)
                *p = (char)tolower((unsigned char)*p);
        return CLI_OK;
    }
    n = strlen(arg);
    for (size_t i = 0; i <= n; i++)
        want[i] = (char)tolower((unsigned char)arg[i]);
    if ((rc = client_call(c, &req, &a)) != CLI_OK) {
        client_answer_free(&a);
        return rc;
    }
    list = out_get(a.json, "sandboxes", yajl_t_array);
    for (size_t i = 0; list != NULL && i < list->u.array.len; i++) {
        const char *id = out_str(list->u.array.values[i], "sandboxId");
        if (!strncmp(id, want, n) && strlen(id) == CLI_UUID_LEN) {
            if (found++ == 0)
                snprintf(out, CLI_UUID_LEN + 1, "%s", id);
        }
    }
    client_answer_free(&a);
    if (found == 1)
        return CLI_OK;
    if (found == 0)
        fprintf(stderr, "nanobox: no live sandbox has an id starting with \"%s\"\n", arg);
    else
        fprintf(stderr, "nanobox: \"%s\" is the start of %d sandboxes' ids: give more of it\n", arg,
                found);
    return CLI_FAIL;
}

void sandbox_path(struct nb_buf *b, const char *id, const char *suffix)
{
    nb_buf_init(b, 1u << 20); /* room for a %-encoded file path after it */
    nb_buf_printf(b, "/sandbox/");
    nb_url_escape(b, id);
    nb_buf_printf(b, "%s", suffix);
}

/* ------------------------------------------------------- reading to send */

long cli_http_timeout(double timeout)
{
    return timeout > 0 ? (long)ceil(timeout) + EXEC_HTTP_MARGIN : 0L;
}

int cli_read_bytes(const char *path, struct nb_buf *out)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "re") : stdin;
    char chunk[65536];
    size_t n;
    int rc = CLI_OK;
    if (f == NULL) {
        fprintf(stderr, "nanobox: cannot read %s: %s\n", path, strerror(errno));
        return CLI_FAIL;
    }
    while (rc == CLI_OK && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        if (nb_buf_append(out, chunk, n) != NB_OK) {
            fprintf(stderr, "nanobox: %s is larger than %zu bytes\n", path, out->cap);
            rc = CLI_FAIL;
        }
    if (rc == CLI_OK && ferror(f)) {
        fprintf(stderr, "nanobox: cannot read %s: %s\n", path, strerror(errno));
        rc = CLI_FAIL;
    }
    if (f != stdin)
        fclose(f);
    return rc;
}

int cli_read_text(const char *path, struct nb_buf *code)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "re") : stdin;
    const char *name = strcmp(path, "-") ? path : "stdin";
    char chunk[65536], *fixed;
    size_t n, fixed_len;
    int rc = CLI_OK;

    if (f == NULL) {
        fprintf(stderr, "nanobox: cannot read %s: %s\n", path, strerror(errno));
        return CLI_FAIL;
    }
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        if (nb_buf_append(code, chunk, n) != NB_OK) {
            fprintf(stderr, "nanobox: %s is larger than %zu bytes\n", name, code->cap);
            rc = CLI_FAIL;
            break;
        }
    }
    if (rc == CLI_OK && ferror(f)) {
        fprintf(stderr, "nanobox: cannot read %s: %s\n", name, strerror(errno));
        rc = CLI_FAIL;
    }
    if (f != stdin)
        fclose(f);
    if (rc != CLI_OK)
        return rc;
    nb_buf_append(code, "", 0);
    /* JSON carries text: refuse what would silently change on the way */
    fixed = nb_utf8_repair(code->data, code->len, &fixed_len);
    if (memchr(code->data, '\0', code->len) != NULL || fixed_len != code->len ||
        memcmp(fixed, code->data, code->len) != 0) {
        fprintf(stderr, "nanobox: %s is not UTF-8 text (NUL bytes or invalid UTF-8)\n", name);
        rc = CLI_FAIL;
    }
    free(fixed);
    return rc;
}
