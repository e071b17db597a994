/*
 * output.c - see output.h.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "json.h"
#include "output.h"

yajl_val out_get(yajl_val o, const char *key, yajl_type t)
{
    const char *path[] = {key, NULL};

    return o != NULL ? yajl_tree_get(o, path, t) : NULL;
}

const char *out_str(yajl_val o, const char *key)
{
    return nb_json_string(out_get(o, key, yajl_t_string));
}

long long out_int(yajl_val o, const char *key, long long dflt)
{
    yajl_val v = out_get(o, key, yajl_t_number);

    return v != NULL ? nb_json_int(v) : dflt;
}

int out_bool(yajl_val o, const char *key)
{
    return out_get(o, key, yajl_t_true) != NULL;
}

void out_duration(char *out, size_t outlen, long long s)
{
    if (s < 0)
        s = 0;
    if (s < 60)
        snprintf(out, outlen, "%llds", s);
    else if (s < 3600)
        snprintf(out, outlen, "%lldm %llds", s / 60, s % 60);
    else if (s < 86400)
        snprintf(out, outlen, "%lldh %lldm", s / 3600, s % 3600 / 60);
    else
        snprintf(out, outlen, "%lldd %lldh", s / 86400, s % 86400 / 3600);
}

void out_size(char *out, size_t outlen, long long b)
{
    static const char units[] = "KMGT";
    double v = (double)b;
    int u = -1;

    if (b < 1024) {
        snprintf(out, outlen, "%lldB", b);
        return;
    }
    while (v >= 1024 && u < 3) {
        v /= 1024;
        u++;
    }
    if (v == (double)(long long)v)
        snprintf(out, outlen, "%lld%c", (long long)v, units[u]);
    else
        snprintf(out, outlen, "%.1f%c", v, units[u]);
}

void out_time(char *out, size_t outlen, long long unix_secs)
{
    time_t t = (time_t)unix_secs;
    struct tm tm;

    if (localtime_r(&t, &tm) == NULL || strftime(out, outlen, "%Y-%m-%d %H:%M:%S", &tm) == 0)
        snprintf(out, outlen, "%lld", unix_secs);
}

void out_number(char *out, size_t outlen, yajl_val v)
{
    if (v == NULL || !YAJL_IS_NUMBER(v))
        snprintf(out, outlen, "-");
    else
        snprintf(out, outlen, "%s", YAJL_GET_NUMBER(v));
}

char *out_metadata(yajl_val obj)
{
    struct nb_buf b;

    nb_buf_init(&b, 1u << 20);
    nb_buf_append(&b, "", 0);
    if (obj != NULL && YAJL_IS_OBJECT(obj)) {
        for (size_t i = 0; i < obj->u.object.len; i++)
            nb_buf_printf(&b, "%s%s=%s", i ? "," : "", obj->u.object.keys[i],
                          nb_json_string(obj->u.object.values[i]));
    }
    return nb_buf_steal(&b);
}

void out_table_init(struct out_table *t, size_t ncols, const char *const *headers)
{
    t->ncols = ncols;
    t->nrows = 0;
    t->cells = NULL;
    out_table_row(t, headers);
}

void out_table_row(struct out_table *t, const char *const *cells)
{
    t->cells = nb_xrealloc(t->cells, (t->nrows + 1) * t->ncols * sizeof(*t->cells));
    for (size_t i = 0; i < t->ncols; i++)
        t->cells[t->nrows * t->ncols + i] = nb_xstrdup(cells[i] != NULL ? cells[i] : "");
    t->nrows++;
}

void out_table_print(const struct out_table *t, FILE *f)
{
    size_t *w = nb_xcalloc(t->ncols, sizeof(*w));

    for (size_t r = 0; r < t->nrows; r++)
        for (size_t i = 0; i < t->ncols; i++) {
            size_t n = strlen(t->cells[r * t->ncols + i]);
            if (n > w[i])
                w[i] = n;
        }
    for (size_t r = 0; r < t->nrows; r++) {
        struct nb_buf line;
        nb_buf_init(&line, SIZE_MAX / 2);
        for (size_t i = 0; i < t->ncols; i++) {
            const char *cell = t->cells[r * t->ncols + i];
            if (i + 1 < t->ncols)
                nb_buf_printf(&line, "%-*s  ", (int)w[i], cell);
            else
                nb_buf_printf(&line, "%s", cell);
        }
        while (line.len > 0 && line.data[line.len - 1] == ' ') /* an empty last column */
            line.data[--line.len] = '\0';
        fprintf(f, "%s\n", line.data);
        nb_buf_free(&line);
    }
    free(w);
}

void out_table_free(struct out_table *t)
{
    for (size_t i = 0; i < t->nrows * t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
    t->cells = NULL;
    t->nrows = 0;
}
