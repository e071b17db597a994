/*
 * cmd_code.c - the code interpreter: "code" runs a cell in a sandbox's
 * session (POST /sandbox/{id}/code), "contexts" lists, creates, restarts
 * and removes sessions (/sandbox/{id}/contexts). See docs/CLI.md.
 *
 * code asks for a streamed answer ("stream": true; not with --json, which
 * prints the collected object) and relays it through the same client path
 * as exec (client.c's NDJSON feed), event by event:
 *   {"type":"stdout"|"stderr","text":"..."}   to our stdout / stderr
 *   {"type":"result","data":{MIME: ...}}      text/plain to stdout; an image
 *                                             as "[image/png 640x480, 23 KiB]"
 *                                             (or saved with --save-images)
 *   {"type":"error","name","value","traceback"}  the traceback to stderr
 *   {"type":"end","status",...}               the exit status
 *   {"type":"error","error","code"}           nanobox's own failure mid-way
 * Exit status: 0, 1 when the code raised (or nanobox failed), 124 when it
 * timed out (as exec).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "args.h"
#include "base64.h"
#include "cli.h"
#include "client.h"
#include "json.h"
#include "output.h"
#include "url.h"

#define CODE_MAX (16u * 1024u * 1024u) /* bytes of code read; the server's code_max_bytes decides */
#define CODE_MAX_IMAGE (64u * 1024u * 1024u) /* bytes of one decoded image */

/* The MIME types a result carries an image in: shown as a line, or saved. */
static const struct {
    const char *mime;
    const char *ext;
} image_types[] = {{"image/png", "png"}, {"image/jpeg", "jpg"}};
#define N_IMAGE_TYPES (sizeof(image_types) / sizeof(image_types[0]))

struct code_outcome {
    struct client *c;
    const char *timeout; /* --timeout as given, or NULL */
    const char *save_dir;
    unsigned images; /* images seen, to name the saved files */
    int have_end;
    char status[32]; /* the end's status */
    int timed_out;
    int truncated;
    int kernel_restarted;
    int raised; /* the code's error event */
    int failed; /* nanobox's error event, or an image that could not be saved */
};

static void put_text(FILE *f, const char *s, int newline)
{
    size_t n = strlen(s);

    fputs(s, f);
    if (newline && n > 0 && s[n - 1] != '\n')
        fputc('\n', f);
    fflush(f);
}

/* Width and height of a PNG or JPEG; 0 when they cannot be read. */
static void image_size(const unsigned char *p, size_t n, unsigned *w, unsigned *h)
{
    *w = *h = 0;
    if (n >= 24 && !memcmp(p, "\x89PNG\r\n\x1a\n", 8) && !memcmp(p + 12, "IHDR", 4)) {
        *w = (unsigned)p[16] << 24 | (unsigned)p[17] << 16 | (unsigned)p[18] << 8 | p[19];
        *h = (unsigned)p[20] << 24 | (unsigned)p[21] << 16 | (unsigned)p[22] << 8 | p[23];
        return;
    }
    if (n < 4 || p[0] != 0xff || p[1] != 0xd8)
        return;
    /* JPEG: walk the segments to the frame header (SOF0..SOF15 but DHT, JPG, DAC) */
    for (size_t i = 2; i + 9 < n;) {
        unsigned marker, len;
        if (p[i] != 0xff) {
            return;
        }
        marker = p[i + 1];
        if (marker == 0xff) {
            i++;
            continue;
        }
        len = (unsigned)p[i + 2] << 8 | p[i + 3];
        if (marker >= 0xc0 && marker <= 0xcf && marker != 0xc4 && marker != 0xc8 &&
            marker != 0xcc) {
            *h = (unsigned)p[i + 5] << 8 | p[i + 6];
            *w = (unsigned)p[i + 7] << 8 | p[i + 8];
            return;
        }
        if (len < 2)
            return;
        i += 2 + len;
    }
}

/* "23 KiB", "1.5 MiB", "900 bytes" */
static void human_size(char *out, size_t outlen, size_t n)
{
    if (n < 1024)
        snprintf(out, outlen, "%zu bytes", n);
    else if (n < 1024 * 1024)
        snprintf(out, outlen, n < 10 * 1024 ? "%.1f KiB" : "%.0f KiB", (double)n / 1024);
    else
        snprintf(out, outlen, "%.1f MiB", (double)n / (1024 * 1024));
}

/* One image of a result: a line saying what it is, after saving it when asked. */
static void show_image(struct code_outcome *o, const char *mime, const char *ext, const char *b64)
{
    struct nb_buf bytes;
    char size[32], dims[32] = "", path[4096] = "";
    unsigned w, h;

    nb_buf_init(&bytes, CODE_MAX_IMAGE);
    o->images++;
    if (nb_base64_decode(&bytes, b64, strlen(b64)) != NB_OK) {
        fprintf(stderr, "nanobox: a %s result is not valid base64: left out\n", mime);
        nb_buf_free(&bytes);
        return;
    }
    image_size((const unsigned char *)bytes.data, bytes.len, &w, &h);
    if (w > 0 && h > 0)
        snprintf(dims, sizeof(dims), " %ux%u", w, h);
    human_size(size, sizeof(size), bytes.len);
    if (o->save_dir != NULL) {
        FILE *f;
        snprintf(path, sizeof(path), "%s/image-%u.%s", o->save_dir, o->images, ext);
        f = fopen(path, "we");
        if (f == NULL ||
            fwrite(bytes.data != NULL ? bytes.data : "", 1, bytes.len, f) != bytes.len ||
            fclose(f) != 0) {
            fprintf(stderr, "nanobox: cannot write %s: %s\n", path, strerror(errno));
            if (f != NULL)
                fclose(f);
            o->failed = 1;
            path[0] = '\0';
        }
    }
    printf("[%s%s, %s]%s%s\n", mime, dims, size, path[0] ? " saved as " : "", path);
    fflush(stdout);
    nb_buf_free(&bytes);
}

/* A result's data: its images as lines, else its text/plain, else what it holds. */
static void show_result(struct code_outcome *o, yajl_val data)
{
    int images = 0;

    if (data == NULL)
        return;
    for (size_t i = 0; i < N_IMAGE_TYPES; i++) {
        yajl_val img = out_get(data, image_types[i].mime, yajl_t_string);
        if (img != NULL) {
            show_image(o, image_types[i].mime, image_types[i].ext, nb_json_string(img));
            images++;
        }
    }
    if (images > 0) /* its text/plain is "<Figure size ...>": the line said more */
        return;
    if (out_get(data, "text/plain", yajl_t_string) != NULL) {
        put_text(stdout, out_str(data, "text/plain"), 1);
    } else if (data->u.object.len > 0) {
        printf("[%s result: --json shows it]\n", data->u.object.keys[0]);
        fflush(stdout);
    }
}

static void show_error(struct code_outcome *o, yajl_val ev)
{
    const char *tb = out_str(ev, "traceback");

    o->raised = 1;
    if (tb[0] != '\0')
        put_text(stderr, tb, 1);
    else
        fprintf(stderr, "%s: %s\n", out_str(ev, "name"), out_str(ev, "value"));
}

static void take_end(struct code_outcome *o, yajl_val end)
{
    o->have_end = 1;
    snprintf(o->status, sizeof(o->status), "%s", out_str(end, "status"));
    o->timed_out = out_bool(end, "timed_out") || !strcmp(o->status, "timed_out");
    o->truncated = out_bool(end, "truncated");
    o->kernel_restarted = out_bool(end, "kernel_restarted");
}

static int on_code_event(void *ctx, yajl_val ev, const char *line, size_t len)
{
    struct code_outcome *o = ctx;
    const char *type = out_str(ev, "type");

    (void)line;
    (void)len;
    if (!strcmp(type, "stdout") || !strcmp(type, "stderr")) {
        put_text(type[3] == 'o' ? stdout : stderr, out_str(ev, "text"), 0);
    } else if (!strcmp(type, "result")) {
        show_result(o, out_get(ev, "data", yajl_t_object));
    } else if (!strcmp(type, "error") && out_get(ev, "error", yajl_t_string) != NULL) {
        fprintf(stderr, "nanobox: %s (%s)\n", out_str(ev, "error"), out_str(ev, "code"));
        o->failed = 1;
    } else if (!strcmp(type, "error")) {
        show_error(o, ev);
    } else if (!strcmp(type, "end")) {
        take_end(o, ev);
    }
    /* execution_count, and types of later versions: nothing to show */
    return 0;
}

/* The collected answer, shown as its events would have been. */
static void show_collected(struct code_outcome *o, yajl_val r)
{
    yajl_val results = out_get(r, "results", yajl_t_array),
             err = out_get(r, "error", yajl_t_object);

    put_text(stdout, out_str(r, "stdout"), 0);
    put_text(stderr, out_str(r, "stderr"), 0);
    for (size_t i = 0; results != NULL && i < results->u.array.len; i++)
        show_result(o, out_get(results->u.array.values[i], "data", yajl_t_object));
    if (err != NULL)
        show_error(o, err);
}

/* The exit status, after the notes a person needs. */
static int code_finish(struct code_outcome *o, const struct client_answer *a)
{
    struct client *c = o->c;

    if (!a->streamed) {
        if (c->json)
            client_print_raw(a);
        else
            show_collected(o, a->json);
        if (out_get(a->json, "status", yajl_t_string) != NULL)
            take_end(o, a->json);
        o->raised = o->raised || out_get(a->json, "error", yajl_t_object) != NULL;
    }
    if (o->failed)
        return CLI_FAIL;
    if (!o->have_end) {
        fprintf(stderr, "nanobox: the server's answer has no end%s\n",
                a->streamed ? " (the stream ended early)" : "");
        return CLI_FAIL;
    }
    if (!c->json) {
        if (o->kernel_restarted)
            fprintf(stderr, "nanobox: the session's kernel had died and was restarted: what "
                            "earlier code defined is gone\n");
        if (o->truncated)
            fprintf(stderr, "nanobox: output truncated: the server keeps at most max_output bytes "
                            "of output and results\n");
    }
    if (o->timed_out) {
        if (!c->json) {
            if (o->timeout != NULL)
                fprintf(stderr, "nanobox: the code timed out after %s s and was interrupted\n",
                        o->timeout);
            else
                fprintf(stderr, "nanobox: the code timed out (the server's default timeout) and "
                                "was interrupted; --timeout sets another\n");
        }
        return CLI_TIMED_OUT;
    }
    if (!strcmp(o->status, "interrupted")) {
        if (!c->json)
            fprintf(stderr, "nanobox: the code was interrupted\n");
        return CLI_FAIL;
    }
    if (o->raised || strcmp(o->status, "ok") != 0)
        return CLI_FAIL;
    return CLI_OK;
}

int cmd_code(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    const char *inline_code = NULL, *context = NULL, *language = NULL, *timeout_s = NULL,
               *save_dir = NULL;
    const struct args_opt opts[] = {
        {"-c", ARG_VALUE, &inline_code},         {"--context", ARG_VALUE, &context},
        {"--language", ARG_VALUE, &language},    {"--timeout", ARG_VALUE, &timeout_s},
        {"--save-images", ARG_VALUE, &save_dir},
    };
    struct args_pos pos = {.v = nb_xcalloc((size_t)argc, sizeof(char *)), .stop_after = -1};
    struct code_outcome o = {.c = c};
    struct client_req req = {.method = "POST", .on_event = on_code_event, .ctx = &o};
    struct client_answer a = {0};
    struct nb_buf path = {0}, code;
    char id[37], *body = NULL;
    double timeout = 0;
    yajl_gen g;
    int rc;

    nb_buf_init(&code, CODE_MAX);
    if ((rc = args_parse(c, cmd, argc, argv, opts, sizeof(opts) / sizeof(opts[0]), &pos)) !=
        ARGS_GO_ON)
        goto out;
    rc = CLI_USAGE;
    if (pos.n == 0) {
        cli_usage_error(cmd, "give a sandbox ID and the code (-c CODE, a FILE, or - for stdin)");
        goto out;
    }
    if (pos.n > 2 || (pos.n == 2 && inline_code != NULL)) {
        cli_usage_error(cmd, "give the code once: -c CODE, a FILE, or - for stdin");
        goto out;
    }
    if (pos.n == 1 && inline_code == NULL) {
        cli_usage_error(cmd, "no code: give -c CODE, a FILE, or - for stdin");
        goto out;
    }
    if (timeout_s != NULL && args_double(cmd, "--timeout", timeout_s, 0.001, 1e6, &timeout) != 0)
        goto out;
    if (save_dir != NULL && mkdir(save_dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "nanobox: cannot create %s: %s\n", save_dir, strerror(errno));
        rc = CLI_FAIL;
        goto out;
    }
    if (inline_code != NULL)
        nb_buf_append(&code, inline_code, strlen(inline_code));
    else if ((rc = cli_read_text(pos.v[1], &code)) != CLI_OK)
        goto out;
    if (code.len == 0) {
        rc = cli_usage_error(cmd, "the code is empty");
        goto out;
    }
    o.timeout = timeout_s;
    o.save_dir = save_dir;
    if ((rc = sandbox_resolve_id(c, cmd, pos.v[0], id)) != CLI_OK)
        goto out;

    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_str(g, "code", 4);
    nb_json_str(g, code.data, code.len);
    if (context != NULL)
        nb_json_kv_str(g, "context", context);
    if (language != NULL)
        nb_json_kv_str(g, "language", language);
    if (timeout_s != NULL)
        nb_json_kv_double(g, "timeout", timeout);
    /* output as it happens; --json keeps the one collected object */
    if (!c->json)
        nb_json_kv_bool(g, "stream", 1);
    yajl_gen_map_close(g);
    req.body = body = nb_json_gen_take(g);
    sandbox_path(&path, id, "/code");
    req.path = path.data;
    req.timeout = cli_http_timeout(timeout);

    if ((rc = client_call(c, &req, &a)) == CLI_OK)
        rc = code_finish(&o, &a);
out:
    client_answer_free(&a);
    nb_buf_free(&path);
    nb_buf_free(&code);
    free(body);
    free(pos.v);
    return rc;
}

/* ------------------------------------------------------------- contexts */

/* "/sandbox/<id>/contexts[/<ctx>[rest]]" */
static void contexts_path(struct nb_buf *p, const char *id, const char *ctx, const char *rest)
{
    sandbox_path(p, id, "/contexts");
    if (ctx != NULL) {
        nb_buf_printf(p, "/");
        nb_url_escape(p, ctx);
        nb_buf_printf(p, "%s", rest);
    }
}

static void contexts_table(yajl_val list)
{
    static const char *const headers[] = {"ID",         "LANGUAGE", "STATE",
                                          "EXECUTIONS", "CWD",      "CREATED"};
    struct out_table t;

    out_table_init(&t, 6, headers);
    for (size_t i = 0; list != NULL && i < list->u.array.len; i++) {
        yajl_val x = list->u.array.values[i];
        char runs[32], created[64];
        const char *row[6] = {out_str(x, "id"),    out_str(x, "language"),
                              out_str(x, "state"), runs,
                              out_str(x, "cwd"),   created};
        snprintf(runs, sizeof(runs), "%lld", out_int(x, "executions", 0));
        out_time(created, sizeof(created), out_int(x, "created_at", 0));
        out_table_row(&t, row);
    }
    out_table_print(&t, stdout);
    out_table_free(&t);
}

int cmd_contexts(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    const char *language = NULL, *cwd = NULL;
    const struct args_opt opts[] = {{"--language", ARG_VALUE, &language},
                                    {"--cwd", ARG_VALUE, &cwd}};
    struct args_pos pos = {.v = nb_xcalloc((size_t)argc, sizeof(char *)), .stop_after = -1};
    struct client_req req = {.method = "GET", .timeout = CLIENT_CALL_TIMEOUT};
    struct client_answer a = {0};
    struct nb_buf path = {0};
    const char *sub, *ctx = NULL;
    char id[37], *body = NULL;
    int rc;

    if ((rc = args_parse(c, cmd, argc, argv, opts, 2, &pos)) != ARGS_GO_ON)
        goto out;
    rc = CLI_USAGE;
    if (pos.n == 0) {
        cli_usage_error(cmd, "which sandbox? give its ID");
        goto out;
    }
    sub = pos.n > 1 ? pos.v[1] : "ls";
    if (!strcmp(sub, "ls") || !strcmp(sub, "create")) {
        if (pos.n > 2) {
            cli_usage_error(cmd, "unexpected argument \"%s\"", pos.v[2]);
            goto out;
        }
    } else if (!strcmp(sub, "rm") || !strcmp(sub, "restart")) {
        if (pos.n != 3) {
            cli_usage_error(cmd, "contexts ID %s needs one context id (CTX)", sub);
            goto out;
        }
        ctx = pos.v[2];
    } else {
        cli_usage_error(cmd, "unknown contexts command \"%s\" (ls, create, rm or restart)", sub);
        goto out;
    }
    if ((language != NULL || cwd != NULL) && strcmp(sub, "create") != 0) {
        cli_usage_error(cmd, "--language and --cwd are for \"contexts ID create\"");
        goto out;
    }
    if ((rc = sandbox_resolve_id(c, cmd, pos.v[0], id)) != CLI_OK)
        goto out;

    if (!strcmp(sub, "create")) {
        yajl_gen g = nb_json_gen();
        yajl_gen_map_open(g);
        if (language != NULL)
            nb_json_kv_str(g, "language", language);
        if (cwd != NULL)
            nb_json_kv_str(g, "cwd", cwd);
        yajl_gen_map_close(g);
        req.body = body = nb_json_gen_take(g);
        req.method = "POST";
        req.timeout = 0; /* answers once the kernel is up; the server bounds that */
    } else if (!strcmp(sub, "rm")) {
        req.method = "DELETE";
    } else if (!strcmp(sub, "restart")) {
        req.method = "POST";
        req.timeout = 0;
    }
    contexts_path(&path, id, ctx, !strcmp(sub, "restart") ? "/restart" : "");
    req.path = path.data;
    if ((rc = client_call(c, &req, &a)) != CLI_OK)
        goto out;

    if (!strcmp(sub, "rm")) {
        /* 204, no body: --json gets what was done */
        if (c->json) {
            yajl_gen g = nb_json_gen();
            char *text;
            yajl_gen_map_open(g);
            nb_json_kv_str(g, "sandboxId", id);
            nb_json_kv_str(g, "context", ctx);
            nb_json_kv_bool(g, "deleted", 1);
            yajl_gen_map_close(g);
            text = nb_json_gen_take(g);
            printf("%s\n", text);
            free(text);
        } else
            printf("deleted context %s of %s\n", ctx, id);
    } else if (c->json) {
        client_print_raw(&a);
    } else if (!strcmp(sub, "ls")) {
        contexts_table(out_get(a.json, "contexts", yajl_t_array));
    } else if (!strcmp(sub, "create")) {
        printf("%s\n", out_str(a.json, "id"));
    } else {
        printf("restarted context %s (%s, %s)\n", out_str(a.json, "id"),
               out_str(a.json, "language"), out_str(a.json, "state"));
    }
out:
    client_answer_free(&a);
    nb_buf_free(&path);
    free(body);
    free(pos.v);
    return rc;
}
