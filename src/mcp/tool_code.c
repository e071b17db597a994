/*
 * tool_code.c - the MCP tool run_code: a one-off program (POST /run), or
 * with a sandbox_id a cell of the sandbox's interpreter session (POST
 * /sandbox/{id}/code), whose results become text, charts and images.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#include "buf.h"
#include "conf.h"
#include "json.h"
#include "mcp.h"
#include "mcp_tool.h"

/* The MIME types of a result that become MCP image content. */
static const char *const image_mimes[] = {"image/png", "image/jpeg", NULL};

/* A chart's JSON up to this many bytes goes out whole; a bigger one as its brief. */
#define MCP_CHART_TEXT 4096

/*
 * A chart with each element's "points" as "n_points" (their count), sub-charts
 * alike: what the chart is and holds, in a few hundred bytes.
 */
static void chart_brief(yajl_gen g, yajl_val v)
{
    if (!YAJL_IS_OBJECT(v)) {
        nb_json_tree(g, v);
        return;
    }
    yajl_gen_map_open(g);
    for (size_t i = 0; i < v->u.object.len; i++) {
        const char *key = v->u.object.keys[i];
        yajl_val x = v->u.object.values[i];
        if (!strcmp(key, "points") && YAJL_IS_ARRAY(x)) {
            nb_json_kv_int(g, "n_points", (long long)x->u.array.len);
        } else if (!strcmp(key, "elements") && YAJL_IS_ARRAY(x)) {
            nb_json_cstr(g, key);
            yajl_gen_array_open(g);
            for (size_t k = 0; k < x->u.array.len; k++)
                chart_brief(g, x->u.array.values[k]);
            yajl_gen_array_close(g);
        } else {
            nb_json_cstr(g, key);
            nb_json_tree(g, x);
        }
    }
    yajl_gen_map_close(g);
}

/* A figure's chart (what it plots, as data) as text: whole when small, else its brief. */
static void put_chart(struct tool_call *t, yajl_val chart)
{
    yajl_gen g = nb_json_gen();
    char *text;

    nb_json_tree(g, chart);
    text = nb_json_gen_take(g);
    if (strlen(text) <= MCP_CHART_TEXT) {
        nb_buf_printf(mcp_text_out(t), "--- chart ---\n");
    } else {
        free(text);
        g = nb_json_gen();
        chart_brief(g, chart);
        text = nb_json_gen_take(g);
        nb_buf_printf(mcp_text_out(t), "--- chart (points counted; in full in the structured "
                                       "result) ---\n");
    }
    mcp_put_block(mcp_text_out(t), text);
    free(text);
}

/*
 * One result of a code run ({"is_main_result", "data": {MIME: value},
 * "chart"?}): its text/plain as text; without one, the first other text
 * form, labelled with its type (so HTML, a pandas table, reads as HTML); a
 * figure's chart as JSON; each PNG or JPEG as an image item.
 */
static void put_code_result(struct tool_call *t, yajl_val res)
{
    static const char *const text_mimes[] = {"text/markdown",    "text/html",     "text/latex",
                                             "application/json", "image/svg+xml", NULL};
    yajl_val data = mcp_member(res, "data"), plain = mcp_member(data, "text/plain");
    const char *label = YAJL_IS_TRUE(mcp_member(res, "is_main_result")) ? "result" : "display";
    int images = 0;
    size_t i;

    if (data == NULL || !YAJL_IS_OBJECT(data))
        return;
    for (i = 0; image_mimes[i] != NULL; i++)
        images += YAJL_IS_STRING(mcp_member(data, image_mimes[i]));
    for (i = 0; text_mimes[i] != NULL && mcp_member(data, text_mimes[i]) == NULL; i++)
        ;
    if (images > 0 && text_mimes[i] != NULL && !strcmp(text_mimes[i], "image/svg+xml"))
        i++; /* the image says it better than its SVG source */
    if (YAJL_IS_STRING(plain)) {
        nb_buf_printf(mcp_text_out(t), "--- %s ---\n", label);
        mcp_put_block(mcp_text_out(t), plain->u.string);
    } else if (text_mimes[i] != NULL) {
        struct nb_buf v;
        nb_buf_init(&v, MCP_MAX_TEXT);
        mcp_put_value(&v, mcp_member(data, text_mimes[i]));
        nb_buf_printf(mcp_text_out(t), "--- %s (%s) ---\n", label, text_mimes[i]);
        mcp_put_block(mcp_text_out(t), v.data != NULL ? v.data : "");
        nb_buf_free(&v);
    } else if (images == 0) {
        nb_buf_printf(mcp_text_out(t), "--- %s ---\n(no text form; its types:", label);
        for (size_t k = 0; k < data->u.object.len; k++)
            nb_buf_printf(mcp_text_out(t), " %s", data->u.object.keys[k]);
        nb_buf_printf(mcp_text_out(t), ")\n");
    }
    if (mcp_member(res, "chart") != NULL && YAJL_IS_OBJECT(mcp_member(res, "chart")))
        put_chart(t, mcp_member(res, "chart"));
    for (i = 0; image_mimes[i] != NULL; i++) {
        yajl_val img = mcp_member(data, image_mimes[i]);
        if (YAJL_IS_STRING(img))
            mcp_add_image(t, image_mimes[i], img->u.string);
    }
}

/* The collected answer of POST /sandbox/{id}/code: text, images, and the error if any. */
static void put_code_answer(struct tool_call *t, yajl_val r)
{
    static const char *const keys[] = {"status", "context", "language", "execution_count", NULL};
    const char *out = mcp_member_str(r, "stdout"), *err = mcp_member_str(r, "stderr");
    yajl_val results = mcp_member(r, "results"), error = mcp_member(r, "error");
    int any = 0;

    mcp_put_fields(&t->text, r, keys);
    if (YAJL_IS_TRUE(mcp_member(r, "timed_out")))
        nb_buf_printf(&t->text, "timed_out: true (the code was interrupted)\n");
    if (YAJL_IS_TRUE(mcp_member(r, "truncated")))
        nb_buf_printf(&t->text, "truncated: true (output past the server's cap was dropped)\n");
    if (YAJL_IS_TRUE(mcp_member(r, "kernel_restarted")))
        nb_buf_printf(&t->text, "kernel_restarted: true (the session's kernel had died: a new one "
                                "ran this code, and what earlier calls defined is gone)\n");
    if (out[0] != '\0') {
        nb_buf_printf(&t->text, "--- stdout ---\n");
        mcp_put_block(&t->text, out);
        any = 1;
    }
    if (err[0] != '\0') {
        nb_buf_printf(&t->text, "--- stderr ---\n");
        mcp_put_block(&t->text, err);
        any = 1;
    }
    for (size_t i = 0; results != NULL && YAJL_IS_ARRAY(results) && i < results->u.array.len; i++) {
        put_code_result(t, results->u.array.values[i]);
        any = 1;
    }
    if (error != NULL && YAJL_IS_OBJECT(error)) {
        const char *tb = mcp_member_str(error, "traceback");
        nb_buf_printf(mcp_text_out(t), "--- error ---\n%s: %s\n", mcp_member_str(error, "name"),
                      mcp_member_str(error, "value"));
        mcp_put_block(mcp_text_out(t), tb);
        t->is_error = 1; /* the code raised: the model reads why */
        any = 1;
    }
    if (!any)
        nb_buf_printf(&t->text, "(no output)\n");
}

/* Remove member key from object o, if there. */
static void drop_member(yajl_val o, const char *key)
{
    for (size_t i = 0; o != NULL && YAJL_IS_OBJECT(o) && i < o->u.object.len; i++) {
        size_t after = o->u.object.len - i - 1;
        char *owned; /* yajl allocated the key: const only to its readers */
        if (strcmp(o->u.object.keys[i], key) != 0)
            continue;
        memcpy(&owned, &o->u.object.keys[i], sizeof(owned));
        free(owned);
        yajl_tree_free(o->u.object.values[i]);
        memmove(&o->u.object.keys[i], &o->u.object.keys[i + 1], after * sizeof(char *));
        memmove(&o->u.object.values[i], &o->u.object.values[i + 1], after * sizeof(yajl_val));
        o->u.object.len--;
        return;
    }
}

/* The timeout a code run gets: its argument, else the config's; 0 when unknown (stdio). */
static double code_timeout(struct tool_call *t)
{
    const struct nb_conf *c = mcp_conf(t->s);
    return mcp_arg_val(t, "timeout") != NULL ? nb_json_double(mcp_arg_val(t, "timeout"))
           : c != NULL                       ? c->exec_timeout
                                             : 0;
}

/* run_code with a sandbox_id: a cell of the sandbox's session (POST /sandbox/{id}/code). */
static void run_in_sandbox(struct tool_call *t)
{
    const char *lang = mcp_arg_val(t, "language") != NULL ? mcp_arg_str(t, "language") : NULL;
    struct mcp_answer a;
    struct nb_buf path;
    yajl_val results;
    yajl_gen g;
    char *body;

    if (mcp_arg_val(t, "stdin") != NULL) {
        mcp_fail(t, "error: stdin is for a one-off run_code (without sandbox_id); in a session, "
                    "put the data in the code or in a file (sandbox_write_file)");
        return;
    }
    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "code", mcp_arg_str(t, "code"));
    if (mcp_arg_val(t, "context") != NULL)
        nb_json_kv_str(g, "context", mcp_arg_str(t, "context"));
    if (lang != NULL) /* a session's shell is bash */
        nb_json_kv_str(g, "language", !strcmp(lang, "sh") ? "bash" : lang);
    if (mcp_arg_val(t, "timeout") != NULL) {
        nb_json_cstr(g, "timeout");
        nb_json_tree(g, mcp_arg_val(t, "timeout"));
    }
    yajl_gen_map_close(g);
    body = nb_json_gen_take(g);
    mcp_watch_start(t, code_timeout(t), "interrupted", NULL);
    mcp_sandbox_path(&path, t, "/code");
    if (mcp_api_call(t, "POST", path.data, body, strlen(body), "application/json", &a) == 0) {
        put_code_answer(t, a.json);
        /* the images are content items already: not twice in the reply */
        results = mcp_member(a.json, "results");
        for (size_t i = 0; results != NULL && YAJL_IS_ARRAY(results) && i < results->u.array.len;
             i++)
            for (size_t k = 0; image_mimes[k] != NULL; k++)
                drop_member(mcp_member(results->u.array.values[i], "data"), image_mimes[k]);
        mcp_keep_structured(t, &a, NULL);
    } else if (!strcmp(mcp_member_str(a.json, "code"), "no_kernel")) {
        nb_buf_printf(&t->text, "\nA session needs a sandbox created with image "
                                "nanobox-python:latest (sandbox_create); without sandbox_id, "
                                "run_code runs python or sh once.");
    } else if (!strcmp(mcp_member_str(a.json, "code"), "unknown_context")) {
        nb_buf_printf(&t->text, "\nLeave context out to use the language's own session.");
    }
    mcp_answer_free(&a);
    nb_buf_free(&path);
    free(body);
}

void mcp_tool_run_code(struct tool_call *t)
{
    const char *lang = mcp_arg_val(t, "language") != NULL ? mcp_arg_str(t, "language") : "python";
    struct mcp_answer a;
    yajl_gen g;
    char *body;

    if (mcp_arg_val(t, "sandbox_id") != NULL) {
        run_in_sandbox(t);
        return;
    }
    if (mcp_arg_val(t, "context") != NULL) {
        mcp_fail(t, "error: context names a session in a sandbox: give its sandbox_id too");
        return;
    }
    if (strcmp(lang, "python") != 0 && strcmp(lang, "sh") != 0) {
        mcp_fail(t,
                 "error: a one-off run_code (without sandbox_id) runs python or sh; %s runs "
                 "in a sandbox's session: create one with sandbox_create (image "
                 "nanobox-python:latest) and pass its sandbox_id",
                 lang);
        return;
    }
    /* the one-off run, as POST /run takes it */
    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "language", lang);
    nb_json_kv_str(g, "code", mcp_arg_str(t, "code"));
    if (mcp_arg_val(t, "timeout") != NULL) {
        nb_json_cstr(g, "timeout");
        nb_json_tree(g, mcp_arg_val(t, "timeout"));
    }
    if (mcp_arg_val(t, "stdin") != NULL)
        nb_json_kv_str(g, "stdin", mcp_arg_str(t, "stdin"));
    yajl_gen_map_close(g);
    body = nb_json_gen_take(g);
    mcp_watch_start(t, code_timeout(t), "killed", NULL);
    if (mcp_api_call(t, "POST", "/run", body, strlen(body), "application/json", &a) == 0) {
        mcp_put_exec_result(t, a.json);
        mcp_keep_structured(t, &a, NULL);
    }
    mcp_answer_free(&a);
    free(body);
}
