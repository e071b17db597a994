/*
 * output.h - how answers look to a person: durations ("9m 58s"), sizes
 * ("256M"), times, metadata ("k=v,k2=v2") and aligned tables.
 */
#ifndef NB_CLI_OUTPUT_H
#define NB_CLI_OUTPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <yajl/yajl_tree.h>

/* The member key of object o when it has type t, else NULL. */
yajl_val out_get(yajl_val o, const char *key, yajl_type t);
/* Its text ("" when missing or not a string), its integer (dflt when not a number). */
const char *out_str(yajl_val o, const char *key);
long long out_int(yajl_val o, const char *key, long long dflt);
int out_bool(yajl_val o, const char *key);

void out_duration(char *out, size_t outlen, long long secs);  /* "1h 2m" */
void out_size(char *out, size_t outlen, long long bytes);     /* "256M" */
void out_time(char *out, size_t outlen, long long unix_secs); /* local "2025-11-29 18:40:12" */
void out_number(char *out, size_t outlen, yajl_val v);        /* 0.5 as the server wrote it */
/* "k=v,k2=v2" of a string map, "" when empty. Caller frees. */
char *out_metadata(yajl_val obj);

struct out_table {
    size_t ncols;
    size_t nrows; /* the header is row 0 */
    char **cells; /* nrows * ncols, owned */
};

void out_table_init(struct out_table *t, size_t ncols, const char *const *headers);
void out_table_row(struct out_table *t, const char *const *cells); /* ncols of them */
/* Columns padded to their widest cell, two spaces apart; the last one not padded. */
void out_table_print(const struct out_table *t, FILE *f);
void out_table_free(struct out_table *t);

#endif
